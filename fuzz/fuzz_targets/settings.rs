//! Settings files are untrusted text (a cloned project's file, a file shared with other
//! tools): JSONC reading, the raw → validated parse, merging and `${VAR}` expansion must
//! never panic, whatever the bytes. The input is split at the first NUL byte into a user
//! file and a trusted project file, so merging is exercised too.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use switchboard_config::{LoadOptions, load, trust_folder};

struct Dirs {
    _root: PathBuf,
    home: PathBuf,
    project: PathBuf,
}

fn dirs() -> &'static Dirs {
    static DIRS: OnceLock<Dirs> = OnceLock::new();
    DIRS.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("switchboard-fuzz-{}", std::process::id()));
        let home = root.join("home");
        let project = root.join("project");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(project.join(".switchboard")).unwrap();
        trust_folder(&home, &project).unwrap();
        Dirs { _root: root, home, project }
    })
}

fn env(name: &str) -> Option<String> {
    match name {
        "HOME" => Some("/home/u".into()),
        "TOKEN" => Some("t0k$en{}".into()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (user, project) = text.split_once('\0').unwrap_or((text, ""));
    let d = dirs();
    std::fs::write(d.home.join("settings.json"), user).unwrap();
    let project_file = d.project.join(".switchboard/settings.json");
    if project.is_empty() {
        let _ = std::fs::remove_file(&project_file);
    } else {
        std::fs::write(&project_file, project).unwrap();
    }
    let opts = LoadOptions {
        home: d.home.clone(),
        project_dir: d.project.clone(),
        config_file: None,
    };
    if let Ok(settings) = load(&opts, &env) {
        for s in &settings.servers {
            let _ = s.should_start();
        }
    }
    let _ = switchboard_config::expand_vars(text, &env);
    let _ = switchboard_config::local_references(&serde_json::from_str(user).unwrap_or_default());
});
