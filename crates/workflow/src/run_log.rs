//! The run-log format, next to the runner that produces it: `switchboard run` writes one
//! JSON file per run under `$SWITCHBOARD_HOME/runs/` (`<timestamp>-<workflow-name>.json`,
//! [`from_outcome`] + [`save_run`]), and `switchboard serve` lists them and shows one
//! ([`list_runs`], [`load_run`]: the step log, the final variables, and the MCP App UIs
//! the run produced, which it can render again).
//!
//! Files are written atomically (a temporary file renamed into place) and only the
//! newest [`MAX_RUNS`] are kept. A run's id is its file name without `.json`; ids are
//! checked before any file is opened, so a request cannot name a path.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::{RunOutcome, StepStatus, Variables};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// At most this many run logs are kept; the oldest are deleted.
pub const MAX_RUNS: usize = 200;

/// One saved run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RunLog {
    /// The file name without `.json` (set by [`save_run`]).
    pub id: String,
    /// The workflow file, as given to `switchboard run` (made absolute).
    pub workflow_path: String,
    /// The workflow's `name` (else the file stem).
    pub workflow_name: String,
    /// The input variables (`--var`, `--vars-file`).
    pub inputs: Value,
    /// Start and end, RFC 3339 UTC with milliseconds.
    pub started: String,
    pub finished: String,
    pub duration_ms: u64,
    /// `ok`, `failed` or `cancelled`.
    pub status: String,
    /// The node that failed, with why.
    pub failure: Option<RunFailure>,
    /// Every finished step, in order.
    pub steps: Vec<RunStep>,
    /// The variables at the end.
    pub variables: Value,
    /// The MCP App UIs that steps produced.
    pub apps: Vec<RunApp>,
}

/// Where a run stopped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RunFailure {
    pub node: String,
    pub kind: String,
    pub message: String,
}

/// One step of the log.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RunStep {
    pub node: String,
    /// The node type (`mcp`, `set`…).
    pub kind: String,
    /// `ok`, `failed` or `continuedAfterError`.
    pub status: String,
    pub summary: String,
    pub duration_ms: u64,
}

/// A step that produced an MCP App UI, as saved: the event's own form.
pub type RunApp = crate::events::AppInfo;

/// A run in the list (without variables and tool results).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    pub id: String,
    pub workflow_path: String,
    pub workflow_name: String,
    pub started: String,
    pub duration_ms: u64,
    pub status: String,
    pub failed_node: Option<String>,
    pub steps: usize,
    /// The nodes that produced an MCP App UI.
    pub app_nodes: Vec<String>,
}

impl From<&RunLog> for RunSummary {
    fn from(r: &RunLog) -> Self {
        Self {
            id: r.id.clone(),
            workflow_path: r.workflow_path.clone(),
            workflow_name: r.workflow_name.clone(),
            started: r.started.clone(),
            duration_ms: r.duration_ms,
            status: r.status.clone(),
            failed_node: r.failure.as_ref().map(|f| f.node.clone()),
            steps: r.steps.len(),
            app_nodes: r.apps.iter().map(|a| a.node.clone()).collect(),
        }
    }
}

/// What the run was, besides its outcome.
pub struct RunInfo<'a> {
    pub file: &'a Path,
    pub name: String,
    pub inputs: &'a Variables,
    pub started: SystemTime,
    pub finished: SystemTime,
    pub cancelled: bool,
}

fn status_text(s: StepStatus) -> &'static str {
    match s {
        StepStatus::Ok => "ok",
        StepStatus::Failed => "failed",
        StepStatus::ContinuedAfterError => "continuedAfterError",
    }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The run log of a finished run (its id is set by [`save_run`]).
pub fn from_outcome(info: &RunInfo<'_>, outcome: &RunOutcome) -> RunLog {
    let path = std::path::absolute(info.file).unwrap_or_else(|_| info.file.to_path_buf());
    RunLog {
        id: String::new(),
        workflow_path: path.display().to_string(),
        workflow_name: info.name.clone(),
        inputs: info.inputs.to_json(),
        started: rfc3339(info.started),
        finished: rfc3339(info.finished),
        duration_ms: millis(
            info.finished
                .duration_since(info.started)
                .unwrap_or_default(),
        ),
        status: match &outcome.failure {
            None => "ok",
            Some(_) if info.cancelled => "cancelled",
            Some(_) => "failed",
        }
        .into(),
        failure: outcome.failure.as_ref().map(|f| RunFailure {
            node: f.node.clone(),
            kind: f.kind.clone(),
            message: f.message.clone(),
        }),
        steps: outcome
            .steps
            .iter()
            .map(|s| RunStep {
                node: s.node.clone(),
                kind: s.kind.clone(),
                status: status_text(s.status).into(),
                summary: s.summary.clone(),
                duration_ms: millis(s.elapsed),
            })
            .collect(),
        variables: outcome.variables.to_json(),
        apps: outcome.apps.clone(),
    }
}

/// `$SWITCHBOARD_HOME/runs`.
pub fn runs_dir(home: &Path) -> PathBuf {
    home.join("runs")
}

/// Whether `id` can be a run id: a plain file stem (letters, digits, `.`, `_`, `-`),
/// not starting with a dot.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 200
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// `time` as RFC 3339 UTC with milliseconds (`2026-11-22T23:15:49.123Z`); times
/// before 1970 as the epoch.
pub fn rfc3339(time: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time.max(UNIX_EPOCH))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The file-name form of a start time: `20261122T231549.123Z`.
fn stamp(started: &str) -> String {
    started.chars().filter(|c| *c != '-' && *c != ':').collect()
}

/// A workflow name as a file-name part (`My flow!` → `My-flow`).
fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
        if out.len() >= 60 {
            break;
        }
    }
    let out = out.trim_matches(['-', '.']).to_string();
    if out.is_empty() {
        "workflow".into()
    } else {
        out
    }
}

/// Saves `log` as `<timestamp>-<name>.json` in `$SWITCHBOARD_HOME/runs` (atomically),
/// sets its id, and deletes all but the newest [`MAX_RUNS`] logs. Returns the path.
pub fn save_run(home: &Path, log: &mut RunLog) -> std::io::Result<PathBuf> {
    let dir = runs_dir(home);
    std::fs::create_dir_all(&dir)?;
    let base = format!("{}-{}", stamp(&log.started), slug(&log.workflow_name));
    let mut id = base.clone();
    let mut n = 2;
    while dir.join(format!("{id}.json")).exists() {
        id = format!("{base}-{n}");
        n += 1;
    }
    log.id = id.clone();
    let text = serde_json::to_string_pretty(log).map_err(std::io::Error::other)?;
    let path = dir.join(format!("{id}.json"));
    // Random `create_new`/`O_NOFOLLOW` temp file, fsync, rename; a link refused.
    switchboard_config::replace_file(&path, text.as_bytes(), switchboard_config::Replace::OWNED)
        .map_err(std::io::Error::other)?;
    prune(&dir, MAX_RUNS);
    Ok(path)
}

/// The run ids in `dir`, newest first (ids start with their timestamp).
fn ids(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".json")
                .filter(|id| valid_id(id))
                .map(str::to_string)
        })
        .collect();
    ids.sort_by(|a, b| b.cmp(a));
    ids
}

fn prune(dir: &Path, keep: usize) {
    for id in ids(dir).into_iter().skip(keep) {
        let _ = std::fs::remove_file(dir.join(format!("{id}.json")));
    }
}

/// One saved run, or `None` when the id is invalid or there is no such run.
pub fn load_run(home: &Path, id: &str) -> Option<RunLog> {
    if !valid_id(id) {
        return None;
    }
    let text = std::fs::read_to_string(runs_dir(home).join(format!("{id}.json"))).ok()?;
    let mut log: RunLog = serde_json::from_str(&text).ok()?;
    log.id = id.to_string();
    Some(log)
}

/// Every saved run, newest first (unreadable files are skipped).
pub fn list_runs(home: &Path) -> Vec<RunSummary> {
    ids(&runs_dir(home))
        .iter()
        .filter_map(|id| load_run(home, id))
        .map(|r| RunSummary::from(&r))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_and_ids() {
        let t = UNIX_EPOCH + Duration::from_millis(1_795_389_349_123);
        assert_eq!(rfc3339(t), "2026-11-22T23:15:49.123Z");
        assert_eq!(stamp("2026-11-22T23:15:49.123Z"), "20261122T231549.123Z");
        assert_eq!(slug("My flow!"), "My-flow");
        assert_eq!(slug("../.."), "workflow");
        assert!(valid_id("20261122T231549.123Z-demo-tour"));
        assert!(!valid_id("../x"));
        assert!(!valid_id(".hidden"));
        assert!(!valid_id("a/b"));
    }

    #[test]
    fn saves_lists_loads_and_prunes() {
        let home = tempfile::tempdir().unwrap();
        for i in 0..(MAX_RUNS + 3) {
            let mut log = RunLog {
                workflow_name: "demo tour".into(),
                started: format!("2026-01-01T00:00:{:02}.{:03}Z", i / 1000, i % 1000),
                status: "ok".into(),
                ..Default::default()
            };
            save_run(home.path(), &mut log).unwrap();
        }
        let runs = list_runs(home.path());
        assert_eq!(runs.len(), MAX_RUNS);
        assert_eq!(runs[0].id, "20260101T000000.202Z-demo-tour");
        assert!(load_run(home.path(), &runs[0].id).is_some());
        assert!(load_run(home.path(), "20260101T000000.000Z-demo-tour").is_none());
        assert!(load_run(home.path(), "../../etc/passwd").is_none());
    }
}
