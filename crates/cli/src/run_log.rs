//! Saving a `switchboard run` as a run log (`$SWITCHBOARD_HOME/runs/…json`, see
//! [`switchboard_workflow::run_log`]) and the links that open its MCP App UIs in `switchboard
//! serve`.

use std::path::{Path, PathBuf};

use switchboard_web::DEFAULT_PORT;
pub use switchboard_workflow::run_log::{RunInfo, from_outcome as build};
use switchboard_workflow::run_log::{RunLog, save_run};

/// Saves the run log; returns its id and path.
pub fn save(home: &Path, mut log: RunLog) -> std::io::Result<(String, PathBuf)> {
    let path = save_run(home, &mut log)?;
    Ok((log.id, path))
}

/// Percent-encodes a query value (everything but unreserved characters).
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The link that opens a run's UI step in `switchboard serve` on the default port.
pub fn app_link(run_id: &str, node: &str) -> String {
    format!(
        "http://127.0.0.1:{DEFAULT_PORT}/workflows?run={}&step={}",
        encode(run_id),
        encode(node)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_encode_the_query() {
        assert_eq!(
            app_link("20261122T231549.123Z-demo-tour", "sub/clock"),
            "http://127.0.0.1:8765/workflows?run=20261122T231549.123Z-demo-tour&step=sub%2Fclock"
        );
    }
}
