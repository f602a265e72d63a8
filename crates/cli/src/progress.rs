//! Progress where a person waits, drawn with `indicatif` on stderr: a spinner line per
//! server while `mcp list` starts them (each replaced by its result as it arrives), a
//! spinner while `mcp call/read/prompt` connects, a server's progress notifications as a
//! bar, and what `mcp login` is waiting for.
//!
//! Drawn only when both stdout and stderr are terminals and `--json` is not given
//! ([`enabled`]); colour settings do not change it. Everything drawn is cleared before
//! the command prints its result, so stdout (and a terminal transcript) is the same as
//! without it. Text from servers (names, progress messages) goes through
//! [`crate::term::visible`] first.

use std::borrow::Cow;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use switchboard_host::{HostEvent, ServerStatus};

use crate::term::visible;

/// How often a spinner turns.
const TICK: Duration = Duration::from_millis(80);

/// Whether progress may be drawn: stdout and stderr are terminals and `--json` is off.
pub fn enabled(json: bool) -> bool {
    !json && std::io::stdout().is_terminal() && std::io::stderr().is_terminal()
}

fn spinner_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
        .tick_chars("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏ ")
}

fn done_style() -> ProgressStyle {
    ProgressStyle::with_template("{msg}").unwrap_or_else(|_| ProgressStyle::default_spinner())
}

/// One spinner on stderr saying `message` (already safe to print) until dropped or cleared.
pub struct Spinner(ProgressBar);

impl Spinner {
    /// A turning spinner with `message`, or `None` when progress is not drawn.
    pub fn start(json: bool, message: impl Into<Cow<'static, str>>) -> Option<Self> {
        if !enabled(json) {
            return None;
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(spinner_style());
        bar.set_message(message);
        bar.enable_steady_tick(TICK);
        Some(Self(bar))
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// The spinner lines of `mcp list`: one per server starting, each replaced by its
/// result line (`🟢 name — connected (0.3 s)`) as it arrives; all cleared on drop.
pub struct ServerLines {
    multi: MultiProgress,
    lines: Vec<(String, ProgressBar)>,
    started: Instant,
}

impl ServerLines {
    /// Lines for the servers in `starting`, or `None` when progress is not drawn.
    pub fn start(json: bool, starting: &[String]) -> Option<Self> {
        if starting.is_empty() || !enabled(json) {
            return None;
        }
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let lines = starting
            .iter()
            .map(|name| {
                let bar = multi.add(ProgressBar::new_spinner());
                bar.set_style(spinner_style());
                bar.set_message(format!("{} — connecting…", visible(name)));
                bar.enable_steady_tick(TICK);
                (name.clone(), bar)
            })
            .collect();
        Some(Self {
            multi,
            lines,
            started: Instant::now(),
        })
    }

    /// Replaces a server's spinner with its result when the host reports it settled.
    pub fn event(&self, event: &HostEvent) {
        let HostEvent::Status {
            server,
            status,
            error,
        } = event
        else {
            return;
        };
        if *status == ServerStatus::Connecting {
            return;
        }
        let Some((_, bar)) = self.lines.iter().find(|(n, _)| n == server) else {
            return;
        };
        if bar.is_finished() {
            return;
        }
        let mut line = format!(
            "{} {} — {status} ({:.1} s)",
            crate::list::icon(*status),
            visible(server),
            self.started.elapsed().as_secs_f64()
        );
        if let Some(first) = error.as_deref().and_then(|e| e.lines().next()) {
            line.push_str(": ");
            line.push_str(&visible(first));
        }
        bar.set_style(done_style());
        bar.finish_with_message(line);
    }
}

impl Drop for ServerLines {
    fn drop(&mut self) {
        for (_, bar) in &self.lines {
            bar.finish_and_clear();
        }
        let _ = self.multi.clear();
    }
}

/// A server's `notifications/progress` as a bar on stderr (a spinner with the message
/// when the server gives no `total`); cleared on drop.
pub struct ProgressLine {
    bar: ProgressBar,
    label: String,
}

/// Scale for fractional progress values (the bar counts integers).
const SCALE: f64 = 1000.0;

impl ProgressLine {
    /// A bar labelled `label` (e.g. the tool name), or `None` when progress is not drawn.
    pub fn start(json: bool, label: &str) -> Option<Self> {
        if !enabled(json) {
            return None;
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(spinner_style());
        let label = visible(label).into_owned();
        bar.set_message(format!("{label}: waiting for the server…"));
        bar.enable_steady_tick(TICK);
        Some(Self { bar, label })
    }

    /// Shows one progress notification.
    pub fn update(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let msg = message.map(visible).unwrap_or_default();
        match total.filter(|t| t.is_finite() && *t > 0.0) {
            Some(total) => {
                if self.bar.length().is_none() {
                    let style = ProgressStyle::with_template(
                        "{spinner} {prefix} [{bar:30}] {percent:>3}% {msg}",
                    )
                    .map(|s| s.progress_chars("█▉▊▋▌▍▎▏ ").tick_chars("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏ "))
                    .unwrap_or_else(|_| ProgressStyle::default_bar());
                    self.bar.set_style(style);
                    self.bar.set_prefix(self.label.clone());
                }
                self.bar.set_length((total * SCALE) as u64);
                self.bar
                    .set_position((progress.clamp(0.0, total) * SCALE) as u64);
                self.bar.set_message(msg.into_owned());
            }
            // Once a bar, the bar stays (its prefix is the label); only the text changes.
            None if self.bar.length().is_some() => self.bar.set_message(msg.into_owned()),
            None => {
                let text = if msg.is_empty() {
                    format!("{}: {progress}", self.label)
                } else {
                    format!("{}: {msg} ({progress})", self.label)
                };
                self.bar.set_message(text);
            }
        }
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
