//! Team workflows: each user's saved workflows (GemiHub's YAML) and their runs, kept in
//! the store so a team member keeps, runs and reviews them from any instance.
//!
//! - `GET /api/workflows`, `GET|PUT|DELETE /api/workflows/{name}` (`{source}`): the
//!   caller's workflows (the source sealed in the store);
//! - `POST /api/validate-workflow` `{source}`: every problem with its line, against the
//!   caller's usable servers (`{problems: [{line, node, message}]}`);
//! - `POST /api/workflows/{name}/run` `{inputs?}` → 202 `{run}`: validated, then run in
//!   its own task on this instance (a page that goes away does not stop it);
//! - `GET /api/workflow-runs?workflow=NAME`, `GET /api/workflow-runs/{id}` (with its
//!   log once finished), `GET /api/workflow-runs/{id}/events?after=N` (polled: the live
//!   events on the instance running it, the run's saved state on any instance),
//!   `POST /api/workflow-runs/{id}/cancel` (written to the store; the instance running
//!   it polls).
//!
//! A run is the unchanged [`switchboard_workflow::Runner`] over a per-run
//! [`switchboard_host::Host`] built from the caller's enabled servers and enabled
//! catalog servers (`catalog:NAME`, stdio ones only on an instance started with
//! `--allow-catalog-stdio`, with exactly the admin's argv and env as the client cache
//! uses), the team's URL guard for every HTTP request (servers, `http` nodes, one-off
//! `mcp` URLs, the model), bearer tokens from [`StoreTokens`] (the caller's own, asked
//! for on every request, refreshed under the store's lease), and the caller's model key
//! or the team key for `command` nodes. A run takes at most [`MAX_RUN_TIME`] (10 min); the
//! running instance checks the store for a cancel every 500 ms and keeps at most 5,000
//! live events; its row
//! is in the store from its start (so another instance shows it running, and a run
//! left by a stopped instance shows as interrupted after its deadline) and its log is
//! saved when it ends.
//!
//! Must not: run a `workflow` node (it reads files of the server's disk), reach a
//! workflow or run except through `Store::for_user` for the signed-in user (another
//! user's is a 404), send a token or key to the page, or keep anything another instance
//! needs only in memory (the live events are a convenience of the running instance).

use std::collections::HashMap;
use std::path::Path as FsPath;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::Json;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use switchboard_host::{Host, HostOptions, ServerSpec};
use switchboard_mcp::{TokenFuture, TokenSource};
use switchboard_store::{
    MAX_RUN_LOG_BYTES, MAX_RUNNING_PER_USER, MAX_WORKFLOW_BYTES, RunState, ServerRef, StoredTokens,
    UserId, UserStore, WorkflowRun,
};
use switchboard_workflow::run_log::{RunInfo, from_outcome};
use switchboard_workflow::{
    Problem, RunEvent, RunOptions, Runner, StepStatus, ValidateOptions, Variables, Workflow,
    WorkflowHooks, validate,
};
use tokio_util::sync::CancellationToken;

use super::cache::{catalog_key, catalog_options, connect_options};
use super::mcp_oauth::{tokens_after_401, usable_tokens};
use super::model_key::model_config;
use super::session::SignedIn;
use super::state::{TeamState, store_error};
use crate::access::ApiJson;
use crate::error::{ApiError, ApiResult};

/// The longest a run may take; then it is cancelled and saved as failed.
pub const MAX_RUN_TIME: Duration = Duration::from_secs(10 * 60);
/// How often a running run reads the store for a cancel asked on any instance.
const CANCEL_POLL: Duration = Duration::from_millis(500);
/// How long a finished run's live events stay on its instance for a page still polling.
const LIVE_AFTER_END: Duration = Duration::from_secs(60);
/// At most this many live events are kept per run (the saved log has every step).
const MAX_LIVE_EVENTS: usize = 5000;
/// Longest text of one live event's summary or detail.
const MAX_EVENT_TEXT: usize = 2000;
/// At most this many inputs to a run.
const MAX_INPUTS: usize = 100;
/// A server's request and start-up limits in a run.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs running on this instance, by id (a cache of live events only).
#[derive(Default)]
pub(crate) struct LiveRuns(Mutex<HashMap<String, Arc<LiveRun>>>);

/// One run on this instance: whose it is, its events so far, its cancel switch.
struct LiveRun {
    user: UserId,
    events: Mutex<Vec<Value>>,
    cancel: CancellationToken,
    done: AtomicBool,
}

impl LiveRuns {
    fn insert(&self, id: &str, run: Arc<LiveRun>) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(id.to_owned(), run);
        }
    }

    /// The live run `id` of `user` on this instance, if there is one.
    fn get(&self, id: &str, user: &UserId) -> Option<Arc<LiveRun>> {
        let m = self.0.lock().ok()?;
        m.get(id).filter(|r| &r.user == user).cloned()
    }

    fn remove(&self, id: &str) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(id);
        }
    }
}

fn us(state: &TeamState, signed: &SignedIn) -> UserStore {
    state.store().for_user(&signed.user.id)
}

fn no_workflow() -> ApiError {
    ApiError::not_found("no such workflow")
}

fn no_run() -> ApiError {
    ApiError::not_found("no such run")
}

fn run_json(r: &WorkflowRun) -> Value {
    json!({
        "id": r.id,
        "workflow": r.workflow_name,
        "state": r.state.as_str(),
        "startedAt": r.started_at,
        "finishedAt": r.finished_at,
        "cancelRequested": r.cancel_requested_at.is_some(),
    })
}

fn problems_json(problems: &[Problem]) -> Value {
    Value::Array(
        problems
            .iter()
            .map(|p| json!({"line": p.line, "node": p.node, "message": p.message}))
            .collect(),
    )
}

/// A workflow's source as sent (step one: shape only).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSource {
    source: String,
}

/// Step two: a source within the store's size.
fn checked_source(raw: RawSource) -> ApiResult<String> {
    if raw.source.len() > MAX_WORKFLOW_BYTES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!(
                "the workflow is {} bytes; at most {MAX_WORKFLOW_BYTES} are kept: split it",
                raw.source.len()
            ),
        ));
    }
    Ok(raw.source)
}

/// A server a run may use: its name in the run (`catalog:NAME` for the catalog), which
/// of the caller's servers it is, and how to reach it.
struct Planned {
    name: String,
    server: ServerRef,
    target: switchboard_mcp::Target,
    /// The server's own headers set `Authorization` (then no OAuth token is sent).
    own_authorization: bool,
}

/// The caller's enabled servers and enabled catalog servers (stdio ones only where this
/// instance runs them), with the targets the client cache would use.
async fn plan_servers(state: &TeamState, us: &UserStore) -> ApiResult<Vec<Planned>> {
    let mut plan = Vec::new();
    for record in us.servers().await.map_err(store_error)? {
        if !record.enabled {
            continue;
        }
        let own_authorization = record
            .headers
            .keys()
            .any(|k| k.eq_ignore_ascii_case("authorization"));
        plan.push(Planned {
            name: record.name.clone(),
            server: ServerRef::own(&record.name),
            target: connect_options(state.guard(), &record, None).target,
            own_authorization,
        });
    }
    for entry in us.catalog().await.map_err(store_error)? {
        let server = entry.record.server;
        if !entry.enabled || (server.launch.is_stdio() && !state.allow_catalog_stdio()) {
            continue;
        }
        let own_authorization = match &server.launch {
            switchboard_store::CatalogLaunch::Http { headers, .. } => headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("authorization")),
            switchboard_store::CatalogLaunch::Stdio { .. } => true,
        };
        plan.push(Planned {
            name: catalog_key(&server.name),
            server: ServerRef::catalog(&server.name),
            target: catalog_options(state.guard(), &server, None).target,
            own_authorization,
        });
    }
    Ok(plan)
}

/// Parse and validate `source` against the server names `servers` and the team's
/// limits: every problem, with its line.
fn check_workflow(
    source: &str,
    servers: Vec<String>,
    inputs: &Variables,
) -> Result<Workflow, Vec<Problem>> {
    let wf = Workflow::from_yaml(source)?;
    let mut problems: Vec<Problem> = wf
        .nodes
        .iter()
        .filter(|n| n.kind == "workflow")
        .map(|n| {
            Problem::node(
                n.line,
                &n.id,
                "`workflow` nodes read files on the server and do not run in team mode: copy the steps into this workflow",
            )
        })
        .collect();
    problems.extend(validate(
        &wf,
        &ValidateOptions {
            inputs: inputs.names().map(str::to_string).collect(),
            servers: Some(servers),
        },
    ));
    if problems.is_empty() {
        Ok(wf)
    } else {
        problems.sort_by_key(|p| p.line.unwrap_or(0));
        Err(problems)
    }
}

/// `GET /api/workflows`.
pub async fn list(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
) -> ApiResult<Json<Value>> {
    let all = us(&state, &signed).workflows().await.map_err(store_error)?;
    let items: Vec<Value> = all
        .iter()
        .map(|w| json!({"name": w.name, "createdAt": w.created_at, "updatedAt": w.updated_at}))
        .collect();
    Ok(Json(json!({"workflows": items})))
}

/// `GET /api/workflows/{name}`.
pub async fn get(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let w = us(&state, &signed)
        .workflow(&name)
        .await
        .map_err(store_error)?
        .ok_or_else(no_workflow)?;
    Ok(Json(json!({
        "name": w.name,
        "source": w.source,
        "createdAt": w.created_at,
        "updatedAt": w.updated_at,
    })))
}

/// `PUT /api/workflows/{name}` `{source}`: saves it (problems or not) and answers its
/// problems.
pub async fn save(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
    ApiJson(raw): ApiJson<RawSource>,
) -> ApiResult<Json<Value>> {
    let source = checked_source(raw)?;
    let us = us(&state, &signed);
    if !us.put_workflow(&name, &source).await.map_err(store_error)? {
        return Err(ApiError::conflict(format!(
            "you have {} workflows, the most kept: delete one first",
            switchboard_store::MAX_WORKFLOWS_PER_USER
        )));
    }
    let names = plan_servers(&state, &us)
        .await?
        .into_iter()
        .map(|p| p.name)
        .collect();
    let problems = check_workflow(&source, names, &Variables::new()).err();
    Ok(Json(json!({
        "ok": true,
        "name": name,
        "problems": problems_json(&problems.unwrap_or_default()),
    })))
}

/// `DELETE /api/workflows/{name}`: with its finished runs.
pub async fn remove(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    if !us(&state, &signed)
        .delete_workflow(&name)
        .await
        .map_err(store_error)?
    {
        return Err(no_workflow());
    }
    Ok(Json(json!({"ok": true})))
}

/// `POST /api/validate-workflow` `{source}`.
pub async fn check(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    ApiJson(raw): ApiJson<RawSource>,
) -> ApiResult<Json<Value>> {
    let source = checked_source(raw)?;
    let us = us(&state, &signed);
    let names = plan_servers(&state, &us)
        .await?
        .into_iter()
        .map(|p| p.name)
        .collect();
    let problems = check_workflow(&source, names, &Variables::new()).err();
    Ok(Json(
        json!({"problems": problems_json(&problems.unwrap_or_default())}),
    ))
}

/// A run request as sent.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRun {
    #[serde(default)]
    inputs: Option<Value>,
}

/// Step two: the inputs as variables.
fn checked_inputs(raw: RawRun) -> ApiResult<Variables> {
    match raw.inputs {
        None | Some(Value::Null) => Ok(Variables::new()),
        Some(v @ Value::Object(_)) => {
            if v.as_object().is_some_and(|o| o.len() > MAX_INPUTS) {
                return Err(ApiError::bad_request(format!(
                    "at most {MAX_INPUTS} inputs"
                )));
            }
            Variables::from_json_object(&v).map_err(ApiError::bad_request)
        }
        Some(_) => Err(ApiError::bad_request(
            "`inputs` must be a JSON object of names to values",
        )),
    }
}

/// `POST /api/workflows/{name}/run` `{inputs?}` → 202 `{run}`; 422 with `problems` when
/// the workflow does not validate; 429 while the caller has the most runs running.
pub async fn start(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
    ApiJson(raw): ApiJson<RawRun>,
) -> ApiResult<Response> {
    let inputs = checked_inputs(raw)?;
    let us = us(&state, &signed);
    let saved = us
        .workflow(&name)
        .await
        .map_err(store_error)?
        .ok_or_else(no_workflow)?;
    let plan = plan_servers(&state, &us).await?;
    let names = plan.iter().map(|p| p.name.clone()).collect();
    let wf = match check_workflow(&saved.source, names, &inputs) {
        Ok(wf) => wf,
        Err(problems) => {
            return Ok((
                StatusCode::UNPROCESSABLE_ENTITY,
                Json(json!({
                    "code": "invalid_workflow",
                    "message": "the workflow has problems: fix them, then run it",
                    "problems": problems_json(&problems),
                })),
            )
                .into_response());
        }
    };
    let model = if wf.nodes.iter().any(|n| n.kind == "command") {
        Some(model_config(&state, &us).await?)
    } else {
        None
    };
    let Some(id) = us
        .start_workflow_run(&name, MAX_RUN_TIME)
        .await
        .map_err(store_error)?
    else {
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_runs",
            format!(
                "you have {MAX_RUNNING_PER_USER} runs running: wait for one to end or cancel it"
            ),
        ));
    };
    let live = Arc::new(LiveRun {
        user: signed.user.id.clone(),
        events: Mutex::new(Vec::new()),
        cancel: CancellationToken::new(),
        done: AtomicBool::new(false),
    });
    state.live_runs().insert(&id, Arc::clone(&live));
    let job = RunJob {
        state: state.clone(),
        us: us.clone(),
        id: id.clone(),
        name: name.clone(),
        wf,
        inputs,
        plan,
        model,
        live,
    };
    tokio::spawn(job.run());
    let run = us
        .workflow_run(&id)
        .await
        .map_err(store_error)?
        .ok_or_else(no_run)?;
    Ok((StatusCode::ACCEPTED, Json(json!({"run": run_json(&run.0)}))).into_response())
}

/// One run, moved into its task.
struct RunJob {
    state: TeamState,
    us: UserStore,
    id: String,
    name: String,
    wf: Workflow,
    inputs: Variables,
    plan: Vec<Planned>,
    model: Option<(switchboard_model::ModelConfig, String)>,
    live: Arc<LiveRun>,
}

impl RunJob {
    async fn run(self) {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<RunEvent>();
        let forward = {
            let live = Arc::clone(&self.live);
            tokio::spawn(async move {
                while let Some(event) = rx.recv().await {
                    push_event(&live, event_json(&event));
                }
            })
        };
        let tokens = StoreTokens {
            state: self.state.clone(),
            us: self.us.clone(),
            servers: self
                .plan
                .iter()
                .filter(|p| !p.own_authorization)
                .map(|p| (p.name.clone(), p.server.clone()))
                .collect(),
            last: Arc::default(),
        };
        let specs = self
            .plan
            .into_iter()
            .map(|p| {
                let mut spec = ServerSpec::adhoc(p.name, "team", p.target);
                spec.timeout = REQUEST_TIMEOUT;
                spec.startup_timeout = STARTUP_TIMEOUT;
                spec.pin_tools = false;
                spec
            })
            .collect();
        let host = Host::new(
            specs,
            HostOptions {
                hooks: Arc::new(WorkflowHooks::new(Some(tx.clone()))),
                guard: Some(self.state.guard().clone()),
                token_source: Some(Arc::new(tokens)),
                ..HostOptions::default()
            },
        );
        let (model, default_model) = match self.model {
            Some((cfg, name)) => (Some(cfg), Some(name)),
            None => (None, None),
        };
        let cancel = self.live.cancel.clone();
        let runner = Runner::new(
            host.clone(),
            RunOptions {
                guard: Some(self.state.guard().clone()),
                model,
                default_model,
                events: Some(tx),
                cancel: cancel.clone(),
                mcp_timeout: REQUEST_TIMEOUT,
                http_timeout: Duration::from_secs(60),
                startup_timeout: STARTUP_TIMEOUT,
            },
        );
        let asked = Arc::new(AtomicBool::new(false));
        let watch = tokio::spawn(watch_cancel(
            self.us.clone(),
            self.id.clone(),
            cancel.clone(),
            Arc::clone(&asked),
        ));
        let started = SystemTime::now();
        let outcome = runner.run(&self.wf, self.inputs.clone()).await;
        let finished = SystemTime::now();
        watch.abort();
        host.shutdown().await;
        drop(runner);
        drop(host);
        // Every event was sent before `run` returned; the host's hooks may keep a sender
        // alive in a task that outlives it, so the forwarder gets a moment, not forever.
        if tokio::time::timeout(Duration::from_secs(2), forward)
            .await
            .is_err()
        {
            tracing::debug!(
                "team workflows: the event forwarder outlived run {}",
                self.id
            );
        }
        let user_cancelled = asked.load(Ordering::SeqCst);
        let timed_out = cancel.is_cancelled() && !user_cancelled;
        let mut log = from_outcome(
            &RunInfo {
                file: FsPath::new(&self.name),
                name: self.name.clone(),
                inputs: &self.inputs,
                started,
                finished,
                cancelled: user_cancelled,
            },
            &outcome,
        );
        log.id.clone_from(&self.id);
        log.workflow_path = String::new();
        if timed_out && let Some(f) = log.failure.as_mut() {
            f.message = format!(
                "the run took longer than {} minutes and was stopped",
                MAX_RUN_TIME.as_secs() / 60
            );
        }
        let run_state = match log.status.as_str() {
            "ok" => RunState::Ok,
            "cancelled" => RunState::Cancelled,
            _ => RunState::Failed,
        };
        let value = fit_log(serde_json::to_value(&log).unwrap_or(Value::Null));
        push_event(
            &self.live,
            json!({"type": "done", "state": run_state.as_str(),
                   "failure": log.failure.as_ref().map(|f| json!({"node": f.node, "message": f.message}))}),
        );
        if let Err(e) = self
            .us
            .finish_workflow_run(&self.id, run_state, &value)
            .await
        {
            tracing::warn!("team workflows: saving run {}: {e}", self.id);
            push_event(
                &self.live,
                json!({"type": "error", "message": "the run log could not be saved"}),
            );
        }
        self.live.done.store(true, Ordering::SeqCst);
        tokio::time::sleep(LIVE_AFTER_END).await;
        self.state.live_runs().remove(&self.id);
    }
}

/// Cancels the run when a cancel was asked for in the store (on any instance), or at
/// [`MAX_RUN_TIME`]; `asked` says which.
async fn watch_cancel(
    us: UserStore,
    id: String,
    cancel: CancellationToken,
    asked: Arc<AtomicBool>,
) {
    let deadline = tokio::time::Instant::now() + MAX_RUN_TIME;
    loop {
        tokio::select! {
            () = cancel.cancelled() => {
                asked.store(true, Ordering::SeqCst);
                return;
            }
            () = tokio::time::sleep_until(deadline) => {
                cancel.cancel();
                return;
            }
            () = tokio::time::sleep(CANCEL_POLL) => {}
        }
        if let Ok(Some((run, _))) = us.workflow_run(&id).await
            && run.cancel_requested_at.is_some()
        {
            asked.store(true, Ordering::SeqCst);
            cancel.cancel();
            return;
        }
    }
}

/// The run log within [`MAX_RUN_LOG_BYTES`]: long texts cut, then the variables and
/// app results dropped, then the oldest steps.
fn fit_log(mut log: Value) -> Value {
    let size = |v: &Value| v.to_string().len();
    if size(&log) <= MAX_RUN_LOG_BYTES {
        return log;
    }
    if let Some(steps) = log["steps"].as_array_mut() {
        for s in steps {
            if let Some(t) = s["summary"].as_str() {
                s["summary"] = Value::String(cut(t));
            }
        }
    }
    for key in ["variables", "apps", "inputs"] {
        if size(&log) > MAX_RUN_LOG_BYTES {
            log[key] = json!({"trimmed": "too large to keep in the run log"});
        }
    }
    while size(&log) > MAX_RUN_LOG_BYTES {
        let Some(steps) = log["steps"].as_array_mut().filter(|s| !s.is_empty()) else {
            return json!({"status": log["status"], "trimmed": "the run log was too large to keep"});
        };
        let half = steps.len().div_ceil(2);
        steps.drain(..half);
    }
    log
}

fn cut(text: &str) -> String {
    if text.chars().count() <= MAX_EVENT_TEXT {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(MAX_EVENT_TEXT).collect();
    s.push('…');
    s
}

fn push_event(live: &LiveRun, event: Value) {
    if let Ok(mut events) = live.events.lock()
        && events.len() < MAX_LIVE_EVENTS
    {
        events.push(event);
    }
}

fn status_text(s: StepStatus) -> &'static str {
    match s {
        StepStatus::Ok => "ok",
        StepStatus::Failed => "failed",
        StepStatus::ContinuedAfterError => "continuedAfterError",
    }
}

/// One live event as the page reads it.
fn event_json(event: &RunEvent) -> Value {
    match event {
        RunEvent::NodeStarted { node, kind, detail } => {
            json!({"type": "node-start", "node": node, "kind": kind, "detail": cut(detail)})
        }
        RunEvent::Progress {
            node,
            progress,
            total,
            message,
        } => json!({"type": "progress", "node": node, "progress": progress, "total": total,
                    "message": message.as_deref().map(cut)}),
        RunEvent::NodeFinished {
            node,
            kind,
            status,
            summary,
            elapsed,
        } => json!({"type": "node-end", "node": node, "kind": kind,
                    "status": status_text(*status), "summary": cut(summary),
                    "ms": u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)}),
        RunEvent::Elicitation {
            server,
            message,
            accepted,
        } => json!({"type": "elicitation", "server": server, "message": cut(message),
                    "accepted": accepted}),
        RunEvent::App(app) => json!({"type": "app", "node": app.node, "tool": app.tool}),
        RunEvent::Notice { node, message } => {
            json!({"type": "notice", "node": node, "message": cut(message)})
        }
    }
}

/// A run filter as sent.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRunFilter {
    #[serde(default)]
    workflow: Option<String>,
}

/// `GET /api/workflow-runs?workflow=NAME`.
pub async fn runs(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Query(filter): Query<RawRunFilter>,
) -> ApiResult<Json<Value>> {
    let runs = us(&state, &signed)
        .workflow_runs(filter.workflow.as_deref())
        .await
        .map_err(store_error)?;
    Ok(Json(
        json!({"runs": runs.iter().map(run_json).collect::<Vec<_>>()}),
    ))
}

/// `GET /api/workflow-runs/{id}`: the run and its log once finished.
pub async fn run(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let (run, log) = us(&state, &signed)
        .workflow_run(&id)
        .await
        .map_err(store_error)?
        .ok_or_else(no_run)?;
    Ok(Json(json!({"run": run_json(&run), "log": log})))
}

/// Where a page's polling left off.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAfter {
    #[serde(default)]
    after: Option<usize>,
}

/// `GET /api/workflow-runs/{id}/events?after=N`: the run's state, its live events from
/// `N` on (on the instance running it; `live: false` elsewhere), and its log once
/// finished.
pub async fn events(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(id): Path<String>,
    Query(after): Query<RawAfter>,
) -> ApiResult<Json<Value>> {
    let (run, log) = us(&state, &signed)
        .workflow_run(&id)
        .await
        .map_err(store_error)?
        .ok_or_else(no_run)?;
    let from = after.after.unwrap_or(0);
    let (live, events, next) = match state.live_runs().get(&id, &signed.user.id) {
        Some(l) => {
            let events = l.events.lock().map(|e| e.clone()).unwrap_or_default();
            let next = events.len();
            let tail: Vec<Value> = events.into_iter().skip(from).collect();
            (!l.done.load(Ordering::SeqCst), tail, next)
        }
        None => (false, Vec::new(), from),
    };
    Ok(Json(json!({
        "run": run_json(&run),
        "live": live,
        "events": events,
        "next": next,
        "log": log,
    })))
}

/// `POST /api/workflow-runs/{id}/cancel`: 409 when it already ended.
pub async fn cancel(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let us = us(&state, &signed);
    if !us.request_run_cancel(&id).await.map_err(store_error)? {
        let known = us.workflow_run(&id).await.map_err(store_error)?;
        return Err(match known {
            None => no_run(),
            Some(_) => ApiError::conflict("the run has already ended"),
        });
    }
    if let Some(l) = state.live_runs().get(&id, &signed.user.id) {
        l.cancel.cancel();
    }
    Ok(Json(json!({"ok": true})))
}

/// Bearer tokens for a run's servers: the caller's own saved tokens for the server the
/// host names (`NAME` or `catalog:NAME`), read from the store on every request and
/// refreshed under the store's lease when due or refused (one instance at a time).
/// Servers whose own headers set `Authorization` are not in `servers` (no token sent).
struct StoreTokens {
    state: TeamState,
    us: UserStore,
    servers: HashMap<String, ServerRef>,
    /// The tokens last handed out per server (what a 401 refused).
    last: Arc<Mutex<HashMap<String, StoredTokens>>>,
}

/// The access token of saved tokens (a `switchboard-auth` token set), remembered as
/// the ones handed out for `server`.
fn hand_out(
    last: &Mutex<HashMap<String, StoredTokens>>,
    server: &str,
    tokens: Option<StoredTokens>,
) -> Option<String> {
    let tokens = tokens?;
    let set: switchboard_auth::TokenSet = serde_json::from_str(tokens.tokens.expose()).ok()?;
    if let Ok(mut m) = last.lock() {
        m.insert(server.to_owned(), tokens);
    }
    Some(set.access_token)
}

impl TokenSource for StoreTokens {
    fn bearer(&self, server: &str, _url: &str) -> TokenFuture {
        let Some(sref) = self.servers.get(server).cloned() else {
            return Box::pin(async { Ok(None) });
        };
        let (state, us, last, name) = (
            self.state.clone(),
            self.us.clone(),
            Arc::clone(&self.last),
            server.to_owned(),
        );
        Box::pin(async move {
            let tokens = usable_tokens(&state, &us, &sref)
                .await
                .map_err(|e| e.message)?;
            Ok(hand_out(&last, &name, tokens))
        })
    }

    fn unauthorized(
        &self,
        server: &str,
        _url: &str,
        _rejected: Option<String>,
        _www_authenticate: Option<String>,
    ) -> TokenFuture {
        let Some(sref) = self.servers.get(server).cloned() else {
            return Box::pin(async { Ok(None) });
        };
        let rejected = self.last.lock().ok().and_then(|m| m.get(server).cloned());
        let Some(rejected) = rejected else {
            return Box::pin(async { Ok(None) });
        };
        let (state, us, last, name) = (
            self.state.clone(),
            self.us.clone(),
            Arc::clone(&self.last),
            server.to_owned(),
        );
        Box::pin(async move {
            let tokens = tokens_after_401(&state, &us, &sref, &rejected)
                .await
                .map_err(|e| e.message)?;
            Ok(hand_out(&last, &name, tokens))
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_log_too_large_is_trimmed_to_fit() {
        let step = json!({"node": "a", "summary": "s".repeat(10_000)});
        let log = json!({
            "status": "ok",
            "steps": vec![step; 400],
            "variables": {"big": "v".repeat(2 * MAX_RUN_LOG_BYTES)},
        });
        let fitted = fit_log(log);
        assert!(fitted.to_string().len() <= MAX_RUN_LOG_BYTES);
        assert_eq!(fitted["status"], "ok");
        assert_eq!(fitted["steps"].as_array().unwrap().len(), 400);
        assert!(fitted["variables"]["trimmed"].is_string());
        let small = json!({"status": "failed", "steps": [], "variables": {"x": 1}});
        assert_eq!(fit_log(small.clone()), small);
    }

    #[test]
    fn workflow_nodes_and_unknown_servers_are_problems_with_lines() {
        let src = "name: t\nnodes:\n  - id: a\n    type: workflow\n    path: /etc/passwd\n  - id: b\n    type: mcp\n    server: nope\n    tool: echo\n";
        let problems = check_workflow(src, vec!["demo".into()], &Variables::new()).unwrap_err();
        assert!(
            problems
                .iter()
                .any(|p| p.line == Some(3) || p.line == Some(4)),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.message.contains("team mode")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.message.contains("nope")),
            "{problems:?}"
        );
        let ok = "name: t\nnodes:\n  - id: b\n    type: mcp\n    server: demo\n    tool: echo\n";
        assert!(check_workflow(ok, vec!["demo".into()], &Variables::new()).is_ok());
    }
}
