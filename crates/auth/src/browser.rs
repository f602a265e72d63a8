//! Opening the authorization URL: `$BROWSER` first (a `:`-separated list of commands;
//! `%s` stands for the URL, else it is appended), then the desktop opener
//! (`xdg-open` with a display, `open` on macOS). Nothing is waited for.

use std::process::{Command, Stdio};

/// Opens `url` in a browser; whether a browser command was started.
pub fn open_in_browser(url: &str) -> bool {
    if let Some(list) = std::env::var_os("BROWSER").filter(|v| !v.is_empty()) {
        for entry in list.to_string_lossy().split(':') {
            if spawn_template(entry, url) {
                return true;
            }
        }
        return false;
    }
    if cfg!(target_os = "macos") {
        return spawn(&["open".to_string(), url.to_string()]);
    }
    let has_display =
        std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    has_display && spawn(&["xdg-open".to_string(), url.to_string()])
}

fn spawn_template(template: &str, url: &str) -> bool {
    let Some(mut words) = shlex::split(template).filter(|w| !w.is_empty()) else {
        return false;
    };
    if words.iter().any(|w| w.contains("%s")) {
        for w in &mut words {
            *w = w.replace("%s", url);
        }
    } else {
        words.push(url.to_string());
    }
    spawn(&words)
}

fn spawn(words: &[String]) -> bool {
    let Some((program, args)) = words.split_first() else {
        return false;
    };
    match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(mut child) => {
            // Reap it whenever it exits; do not wait here.
            std::thread::spawn(move || {
                let _ = child.wait();
            });
            true
        }
        Err(e) => {
            tracing::debug!("could not start the browser `{program}`: {e}");
            false
        }
    }
}
