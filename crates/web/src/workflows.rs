//! The Workflows page's API:
//! - `GET /api/workflows`: workflow files in the project's `.switchboard/workflows/`
//!   and `examples/` (YAML, or Markdown with a ```` ```workflow ```` block), with their
//!   names, or why they cannot be read;
//! - `GET /api/workflows/runs`: the runs `switchboard run` saved, newest first;
//! - `GET /api/workflows/runs/{id}`: one run's log. Each UI step also says which
//!   configured server of this app can render it (`appServer`: the same name, else a
//!   server with the same URL); the page then opens it through `POST /api/apps`, like
//!   the explorer, so the UI resource is read server-side from that server and the app
//!   session is bound to it.

use std::path::Path;

use axum::Json;
use axum::extract::{Path as UrlPath, State};
use serde_json::{Value, json};
use switchboard_workflow::Workflow;

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use switchboard_workflow::run_log::{list_runs, load_run, runs_dir, valid_id};

/// The folders searched for workflows, relative to the project directory.
pub const WORKFLOW_DIRS: &[&str] = &[".switchboard/workflows", "examples"];

fn is_workflow_file(path: &Path) -> bool {
    path.is_file()
        && path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "yaml" | "yml" | "md"))
}

fn describe(project: &Path, dir: &str, path: &Path) -> Value {
    let rel = path
        .strip_prefix(project)
        .unwrap_or(path)
        .display()
        .to_string();
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    match Workflow::load(path) {
        Ok(wf) => json!({
            "path": rel,
            "dir": dir,
            "name": wf.name.unwrap_or(stem),
            "nodes": wf.nodes.len(),
            "command": format!("switchboard run {rel}"),
        }),
        Err(e) => json!({
            "path": rel,
            "dir": dir,
            "name": stem,
            "error": e.to_string(),
        }),
    }
}

/// Workflow files in `project`'s [`WORKFLOW_DIRS`], sorted by path.
pub fn find_workflows(project: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for dir in WORKFLOW_DIRS {
        let Ok(entries) = std::fs::read_dir(project.join(dir)) else {
            continue;
        };
        let mut paths: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| is_workflow_file(p))
            .collect();
        paths.sort();
        out.extend(paths.iter().map(|p| describe(project, dir, p)));
    }
    out
}

/// `GET /api/workflows`.
pub async fn list(State(state): State<AppState>) -> Json<Value> {
    let project = state.cfg().load.project_dir.clone();
    let dirs: Vec<String> = WORKFLOW_DIRS
        .iter()
        .map(|d| project.join(d).display().to_string())
        .collect();
    let workflows = tokio::task::spawn_blocking(move || find_workflows(&project))
        .await
        .unwrap_or_default();
    Json(json!({"workflows": workflows, "dirs": dirs}))
}

/// `GET /api/workflows/runs`.
pub async fn runs(State(state): State<AppState>) -> Json<Value> {
    let home = state.cfg().load.home.clone();
    let dir = runs_dir(&home).display().to_string();
    let runs = tokio::task::spawn_blocking(move || list_runs(&home))
        .await
        .unwrap_or_default();
    Json(json!({"runs": runs, "dir": dir}))
}

/// `GET /api/workflows/runs/{id}`.
pub async fn run(
    State(state): State<AppState>,
    UrlPath(id): UrlPath<String>,
) -> ApiResult<Json<Value>> {
    if !valid_id(&id) {
        return Err(ApiError::bad_request("not a run id"));
    }
    let home = state.cfg().load.home.clone();
    let wanted = id.clone();
    let log = tokio::task::spawn_blocking(move || load_run(&home, &wanted))
        .await
        .ok()
        .flatten()
        .ok_or_else(|| ApiError::not_found(format!("no saved run `{id}`")))?;
    let host = state.host();
    let snapshot = host.snapshot();
    let mut value =
        serde_json::to_value(&log).map_err(|e| ApiError::internal(format!("the run log: {e}")))?;
    if let Some(apps) = value.get_mut("apps").and_then(Value::as_array_mut) {
        for (app, info) in apps.iter_mut().zip(&log.apps) {
            let by_name = info
                .server
                .as_deref()
                .filter(|n| snapshot.iter().any(|s| s.name == *n))
                .map(str::to_string);
            let by_url = || {
                info.server_url.as_deref().and_then(|u| {
                    snapshot
                        .iter()
                        .find(|s| s.target == u)
                        .map(|s| s.name.clone())
                })
            };
            app["appServer"] = json!(by_name.or_else(by_url));
        }
    }
    Ok(Json(value))
}
