//! The runner: walks a workflow node by node, keeps the variables, reports each step,
//! and stops at the first failing node (unless that node says `continueOnError`).
//!
//! Bounds: a `while` loop runs its body at most 1000 times in a row, a run takes at
//! most 100,000 steps (sub-workflows included), sub-workflows nest at most 16 deep.
//! Servers are started lazily: a configured server is connected the first time a node
//! needs it, so a workflow that uses one server does not start all of them.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::Value;
use switchboard_host::{Host, ServerStatus};
use switchboard_mcp::{ClientHooks, Connection};
use switchboard_model::{ModelClient, ModelConfig, Provider};
use switchboard_net::{ClientOptions, GuardedClient, UrlPolicy};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::events::{AppInfo, RunEvent, Step, StepStatus, WorkflowHooks};
use crate::graph::next_of;
use crate::parse::{Node, Workflow};
use crate::problem;
use crate::template::{evaluate, evaluate_expression, parse_condition, parse_json_text, render};
use crate::validate::{ValidateOptions, validate};
use crate::vars::{Variables, auto_number, input_value, value_text};

/// At most this many iterations of one `while` loop in a row.
pub const MAX_WHILE_ITERATIONS: usize = 1000;
/// At most this many steps in one run.
pub const MAX_TOTAL_STEPS: usize = 100_000;
/// At most this many nested sub-workflows.
pub const MAX_DEPTH: usize = 16;
/// The time limit of an `mcp` node's tool call unless it sets `timeout` (GemiHub's).
pub const DEFAULT_MCP_TIMEOUT: Duration = Duration::from_secs(60);
/// The time limit of an `http` node unless it sets `timeout`.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(60);

/// How a run behaves.
#[derive(Clone)]
pub struct RunOptions {
    /// The URL guard for `http` nodes and one-off MCP connections. `None` uses the
    /// `strict` policy.
    pub guard: Option<GuardedClient>,
    /// The model API of `command` nodes, built through the one factory
    /// ([`ModelConfig::build`]; `provider` in the settings picks Gemini or an
    /// OpenAI-compatible server). `None`: they fail, saying why.
    pub model: Option<ModelConfig>,
    /// The model of `command` nodes without `model` (`model` in the settings).
    pub default_model: Option<String>,
    /// Receives the live step log.
    pub events: Option<UnboundedSender<RunEvent>>,
    /// Stops the run (the running call is cancelled on its server).
    pub cancel: CancellationToken,
    pub mcp_timeout: Duration,
    pub http_timeout: Duration,
    /// Start-up limit of one-off MCP connections.
    pub startup_timeout: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            guard: None,
            model: None,
            default_model: None,
            events: None,
            cancel: CancellationToken::new(),
            mcp_timeout: DEFAULT_MCP_TIMEOUT,
            http_timeout: DEFAULT_HTTP_TIMEOUT,
            startup_timeout: Duration::from_secs(30),
        }
    }
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("provider", &self.model.as_ref().map(|m| m.provider))
            .field("default_model", &self.default_model)
            .field("mcp_timeout", &self.mcp_timeout)
            .finish_non_exhaustive()
    }
}

/// Why a run stopped early.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("node `{node}` ({kind}) failed: {message}")]
pub struct Failure {
    /// The failing node (a sub-workflow's node as `parent/child`).
    pub node: String,
    pub kind: String,
    pub message: String,
}

/// What a run leaves behind.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The variables at the end (also after a failure: as they were then).
    pub variables: Variables,
    pub steps: Vec<Step>,
    /// Every MCP App UI a step produced.
    pub apps: Vec<AppInfo>,
    pub failure: Option<Failure>,
}

impl RunOutcome {
    pub fn is_ok(&self) -> bool {
        self.failure.is_none()
    }
}

/// Why a node failed.
pub(crate) enum NodeError {
    /// The node's own failure.
    Message(String),
    /// A sub-workflow's node failed (reported as it is).
    Child(Failure),
}

impl From<String> for NodeError {
    fn from(s: String) -> Self {
        NodeError::Message(s)
    }
}

/// What a node did.
pub(crate) struct NodeOut {
    pub(crate) summary: String,
    /// For `if`/`while`: the branch to take.
    pub(crate) branch: Option<bool>,
}

impl NodeOut {
    fn text(summary: impl Into<String>) -> Self {
        Self {
            summary: summary.into(),
            branch: None,
        }
    }
}

#[derive(Default)]
struct RunState {
    steps: Vec<Step>,
    apps: Vec<AppInfo>,
    total_steps: usize,
}

/// Runs workflows against a host's servers. Cheap to share; one run at a time.
pub struct Runner {
    host: Host,
    opts: RunOptions,
    model_client: Mutex<Option<Arc<dyn ModelClient>>>,
    guard: Mutex<Option<GuardedClient>>,
    tried: Mutex<HashSet<String>>,
    failed: Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("host", &self.host)
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

impl Runner {
    /// A runner over `host`'s servers. The host need not be started: servers are
    /// connected when a node first needs them. The caller shuts the host down.
    pub fn new(host: Host, opts: RunOptions) -> Self {
        Self {
            guard: Mutex::new(opts.guard.clone()),
            host,
            opts,
            model_client: Mutex::new(None),
            tried: Mutex::new(HashSet::new()),
            failed: Mutex::new(HashMap::new()),
        }
    }

    pub fn host(&self) -> &Host {
        &self.host
    }

    pub fn options(&self) -> &RunOptions {
        &self.opts
    }

    /// The hooks to give one-off connections (and the host): they answer elicitation
    /// and report it on this runner's events.
    pub fn hooks(&self) -> Arc<dyn ClientHooks> {
        Arc::new(WorkflowHooks::new(self.opts.events.clone()))
    }

    /// Validates `wf` for a run with these inputs against this host's servers.
    pub fn validate(&self, wf: &Workflow, inputs: &Variables) -> Vec<problem::Problem> {
        validate(
            wf,
            &ValidateOptions {
                inputs: inputs.names().map(str::to_string).collect(),
                servers: Some(self.host.server_names()),
            },
        )
    }

    /// Runs `wf` from its first node with `inputs` set. Validate it first
    /// ([`Runner::validate`]): the runner assumes a valid workflow.
    pub async fn run(&self, wf: &Workflow, inputs: Variables) -> RunOutcome {
        let mut vars = inputs;
        let mut state = RunState::default();
        let failure = self
            .run_workflow(wf, &mut vars, String::new(), 0, &mut state)
            .await
            .err();
        RunOutcome {
            variables: vars,
            steps: state.steps,
            apps: state.apps,
            failure,
        }
    }

    pub(crate) fn emit(&self, event: RunEvent) {
        if let Some(tx) = &self.opts.events {
            let _ = tx.send(event);
        }
    }

    pub(crate) fn cancel(&self) -> &CancellationToken {
        &self.opts.cancel
    }

    /// The URL guard (strict when none was given).
    pub(crate) fn guard(&self) -> Result<GuardedClient, String> {
        let mut slot = self
            .guard
            .lock()
            .map_err(|_| "internal error: guard lock poisoned".to_string())?;
        if let Some(g) = slot.as_ref() {
            return Ok(g.clone());
        }
        let mut copts = ClientOptions::new(UrlPolicy::Strict);
        copts.timeout = None;
        let g =
            GuardedClient::new(copts).map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        *slot = Some(g.clone());
        Ok(g)
    }

    /// The provider `command` nodes use (Gemini when none is configured).
    pub(crate) fn provider(&self) -> Provider {
        self.opts
            .model
            .as_ref()
            .map(|m| m.provider)
            .unwrap_or_default()
    }

    /// The model client of `command` nodes, made on first use through the factory.
    pub(crate) fn model_client(&self) -> Result<Arc<dyn ModelClient>, String> {
        let mut slot = self
            .model_client
            .lock()
            .map_err(|_| "internal error: model client lock poisoned".to_string())?;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let Some(mut cfg) = self.opts.model.clone() else {
            return Err(
                "a `command` node needs a model, and none is configured: set GEMINI_API_KEY (or `provider: openai` in the settings and OPENAI_BASE_URL)".into(),
            );
        };
        if let Ok(g) = self.guard() {
            cfg.default_http(g.inner());
        }
        let client = cfg.build().map_err(|e| format!("{e} ({})", e.hint()))?;
        *slot = Some(client.clone());
        Ok(client)
    }

    /// The connection of a configured server, connecting it on first use.
    pub(crate) async fn server_connection(&self, name: &str) -> Result<Arc<Connection>, String> {
        if let Some(c) = self.host.connection(name) {
            return Ok(c);
        }
        let Some(snap) = self.host.server(name) else {
            let names = self.host.server_names();
            return Err(format!(
                "no configured server named `{name}`; configured: {}",
                if names.is_empty() {
                    "(none)".to_string()
                } else {
                    names.join(", ")
                }
            ));
        };
        if let Some(e) = self.failed.lock().ok().and_then(|f| f.get(name).cloned()) {
            return Err(e);
        }
        let tried = self.tried.lock().map(|t| t.contains(name)).unwrap_or(false);
        let refuse = match snap.status {
            ServerStatus::Disabled => Some(format!(
                "server `{name}` is disabled (enable it with `switchboard mcp enable {name}`)"
            )),
            ServerStatus::Blocked => Some(format!(
                "server `{name}` is blocked: {}",
                snap.error.clone().unwrap_or_default()
            )),
            _ if !tried && snap.error.is_some() => Some(format!(
                "server `{name}` cannot start: {}",
                snap.error.clone().unwrap_or_default()
            )),
            _ => None,
        };
        if let Some(reason) = refuse {
            return Err(reason);
        }
        if let Ok(mut t) = self.tried.lock() {
            t.insert(name.to_string());
        }
        self.emit(RunEvent::Notice {
            node: None,
            message: format!("starting server `{name}`"),
        });
        self.host.restart(name).await;
        if let Some(c) = self.host.connection(name) {
            return Ok(c);
        }
        let snap = self.host.server(name);
        let mut reason = format!("could not connect to server `{name}`");
        if let Some(s) = &snap {
            if let Some(e) = &s.error {
                reason.push_str(": ");
                reason.push_str(e);
            }
            if let Some(h) = &s.hint {
                reason.push_str(&format!(" (hint: {h})"));
            }
        }
        if let Ok(mut f) = self.failed.lock() {
            f.insert(name.to_string(), reason.clone());
        }
        Err(reason)
    }

    fn run_workflow<'a>(
        &'a self,
        wf: &'a Workflow,
        vars: &'a mut Variables,
        scope: String,
        depth: usize,
        state: &'a mut RunState,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let mut current = if wf.nodes.is_empty() { None } else { Some(0) };
            let mut loops: HashMap<usize, usize> = HashMap::new();
            while let Some(i) = current {
                let node = &wf.nodes[i];
                let scoped = format!("{scope}{}", node.id);
                let fail = |message: String| Failure {
                    node: scoped.clone(),
                    kind: node.kind.clone(),
                    message,
                };
                if self.opts.cancel.is_cancelled() {
                    return Err(fail("the run was cancelled".into()));
                }
                state.total_steps += 1;
                if state.total_steps > MAX_TOTAL_STEPS {
                    return Err(fail(format!(
                        "the run took more than {MAX_TOTAL_STEPS} steps; stopping"
                    )));
                }
                self.emit(RunEvent::NodeStarted {
                    node: scoped.clone(),
                    kind: node.kind.clone(),
                    detail: describe(node, vars, self.provider()),
                });
                let started = Instant::now();
                let result = self
                    .exec(wf, i, vars, &scoped, depth, state, &mut loops)
                    .await;
                let elapsed = started.elapsed();
                let mut finish = |status: StepStatus, summary: String| {
                    let step = Step {
                        node: scoped.clone(),
                        kind: node.kind.clone(),
                        status,
                        summary: summary.clone(),
                        elapsed,
                    };
                    state.steps.push(step);
                    self.emit(RunEvent::NodeFinished {
                        node: scoped.clone(),
                        kind: node.kind.clone(),
                        status,
                        summary,
                        elapsed,
                    });
                };
                match result {
                    Ok(out) => {
                        finish(StepStatus::Ok, out.summary);
                        current = next_of(wf, i, out.branch);
                    }
                    Err(NodeError::Message(message)) if continues_on_error(node, vars) => {
                        if let Some(to) = node.get("saveTo") {
                            vars.set_text(to, message.clone());
                        }
                        finish(
                            StepStatus::ContinuedAfterError,
                            format!("error (continuing): {}", one_line(&message)),
                        );
                        current = next_of(wf, i, None);
                    }
                    Err(NodeError::Message(message)) => {
                        finish(StepStatus::Failed, one_line(&message));
                        return Err(fail(message));
                    }
                    Err(NodeError::Child(child)) => {
                        finish(
                            StepStatus::Failed,
                            format!("sub-workflow failed at `{}`", child.node),
                        );
                        return Err(child);
                    }
                }
            }
            Ok(())
        })
    }

    #[allow(clippy::too_many_arguments)]
    async fn exec(
        &self,
        wf: &Workflow,
        i: usize,
        vars: &mut Variables,
        scoped: &str,
        depth: usize,
        state: &mut RunState,
        loops: &mut HashMap<usize, usize>,
    ) -> Result<NodeOut, NodeError> {
        let node = &wf.nodes[i];
        let prop = |k: &str| node.get(k).unwrap_or("");
        match node.kind.as_str() {
            "variable" => {
                let name = prop("name");
                let value = match node.get("value") {
                    Some(v) => auto_number(&render(v, vars)),
                    None => vars
                        .get(name)
                        .cloned()
                        .unwrap_or(Value::String(String::new())),
                };
                let shown = value_text(&value);
                vars.set(name, value);
                Ok(NodeOut::text(format!("{name} = {}", one_line(&shown))))
            }
            "set" => {
                let name = prop("name");
                let value = evaluate_expression(prop("value"), vars)?;
                let shown = value_text(&value);
                vars.set(name, value);
                Ok(NodeOut::text(format!("{name} = {}", one_line(&shown))))
            }
            "if" | "while" => {
                let raw = prop("condition");
                let cond =
                    parse_condition(raw).ok_or_else(|| format!("invalid condition `{raw}`"))?;
                let e = evaluate(&cond, vars);
                let side = |s: &str| {
                    if s.is_empty() {
                        "\"\"".to_string()
                    } else {
                        one_line(s)
                    }
                };
                let shown = format!(
                    "{} {} {} → {}",
                    side(&e.left),
                    cond.op.as_str(),
                    side(&e.right),
                    e.result
                );
                if node.kind == "while" {
                    if e.result {
                        let n = loops.entry(i).or_insert(0);
                        *n += 1;
                        if *n > MAX_WHILE_ITERATIONS {
                            return Err(NodeError::Message(format!(
                                "the loop ran more than {MAX_WHILE_ITERATIONS} times; stopping"
                            )));
                        }
                        let n = *n;
                        return Ok(NodeOut {
                            summary: format!("{shown} (iteration {n})"),
                            branch: Some(true),
                        });
                    }
                    loops.remove(&i);
                }
                Ok(NodeOut {
                    summary: shown,
                    branch: Some(e.result),
                })
            }
            "sleep" => {
                let text = render(prop("duration"), vars);
                let digits: String = text
                    .trim()
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                let ms: u64 = digits
                    .parse()
                    .map_err(|_| format!("`duration` is not a number of milliseconds: `{text}`"))?;
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(ms)) => {}
                    () = self.opts.cancel.cancelled() => {
                        return Err(NodeError::Message("the run was cancelled".into()));
                    }
                }
                Ok(NodeOut::text(format!("slept {ms} ms")))
            }
            "json" => {
                let source = render(prop("source"), vars);
                let text = match vars.get(&source) {
                    Some(v) => value_text(v),
                    None => source.clone(),
                };
                let parsed = parse_json_text(&text).ok_or_else(|| {
                    format!(
                        "`{}` is not JSON (nor does it hold a ```json block): {}",
                        prop("source"),
                        one_line(&text)
                    )
                })?;
                let to = prop("saveTo");
                let out = parsed.to_string();
                vars.set_text(to, out.clone());
                Ok(NodeOut::text(format!("{to} = {}", one_line(&out))))
            }
            "mcp" => {
                let (summary, app) = crate::mcp_node::run(self, node, vars, scoped).await?;
                if let Some(app) = app {
                    self.emit(RunEvent::App(app.clone()));
                    state.apps.push(app);
                }
                Ok(NodeOut::text(summary))
            }
            "http" => Ok(NodeOut::text(
                crate::http_node::run(self, node, vars).await?,
            )),
            "command" => Ok(NodeOut::text(
                crate::command_node::run(self, node, vars, scoped).await?,
            )),
            "workflow" => {
                self.sub_workflow(wf, node, vars, scoped, depth, state)
                    .await
            }
            other => Err(NodeError::Message(format!(
                "node type `{other}` cannot run"
            ))),
        }
    }

    async fn sub_workflow(
        &self,
        wf: &Workflow,
        node: &Node,
        vars: &mut Variables,
        scoped: &str,
        depth: usize,
        state: &mut RunState,
    ) -> Result<NodeOut, NodeError> {
        if depth + 1 > MAX_DEPTH {
            return Err(NodeError::Message(format!(
                "sub-workflows nest more than {MAX_DEPTH} deep; stopping"
            )));
        }
        let rel = render(node.get("path").unwrap_or(""), vars);
        let path: PathBuf = wf.base_dir().join(&rel);
        let name = node.get("name").map(|n| render(n, vars));
        let child = Workflow::load_named(&path, name.as_deref()).map_err(|e| e.to_string())?;
        let mut child_vars = Variables::new();
        if let Some(input) = node.get("input") {
            let text = render(input, vars);
            match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(map)) => {
                    for (k, v) in &map {
                        child_vars.set(k.clone(), input_value(v));
                    }
                }
                _ => {
                    for pair in text.split(',') {
                        if let Some((k, v)) = pair.split_once('=') {
                            let (k, v) = (k.trim(), v.trim());
                            if k.is_empty() {
                                continue;
                            }
                            let value = vars
                                .get(v)
                                .cloned()
                                .unwrap_or_else(|| Value::String(v.to_string()));
                            child_vars.set(k.to_string(), value);
                        }
                    }
                }
            }
        }
        let problems = self.validate(&child, &child_vars);
        if !problems.is_empty() {
            return Err(NodeError::Message(format!(
                "sub-workflow {} is not valid:\n{}",
                path.display(),
                problem::list(&problems)
            )));
        }
        self.run_workflow(
            &child,
            &mut child_vars,
            format!("{scoped}/"),
            depth + 1,
            state,
        )
        .await
        .map_err(NodeError::Child)?;
        let mut copied = Vec::new();
        match node.get("output").map(|o| render(o, vars)) {
            Some(text) => {
                let pairs: Vec<(String, String)> = match serde_json::from_str::<Value>(&text) {
                    Ok(Value::Object(map)) => map
                        .iter()
                        .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                        .collect(),
                    _ => text
                        .split(',')
                        .filter_map(|p| p.split_once('='))
                        .map(|(a, b)| (a.trim().to_string(), b.trim().to_string()))
                        .filter(|(a, b)| !a.is_empty() && !b.is_empty())
                        .collect(),
                };
                for (parent, child_name) in pairs {
                    if let Some(v) = child_vars.get(&child_name) {
                        vars.set(parent.clone(), v.clone());
                        copied.push(parent);
                    }
                }
            }
            None => {
                let prefix = node.get("prefix").unwrap_or("");
                for (k, v) in child_vars.iter() {
                    let name = format!("{prefix}{k}");
                    vars.set(name.clone(), v.clone());
                    copied.push(name);
                }
            }
        }
        Ok(NodeOut::text(format!(
            "ran {}; set {}",
            child.name.as_deref().unwrap_or(&rel),
            if copied.is_empty() {
                "nothing".to_string()
            } else {
                copied.join(", ")
            }
        )))
    }
}

fn continues_on_error(node: &Node, vars: &Variables) -> bool {
    matches!(node.kind.as_str(), "mcp" | "http" | "command")
        && node
            .get("continueOnError")
            .is_some_and(|v| render(v, vars) == "true")
}

/// What a node is about to do, for the log.
fn describe(node: &Node, vars: &Variables, provider: Provider) -> String {
    let r = |k: &str| node.get(k).map(|v| render(v, vars));
    match node.kind.as_str() {
        "mcp" => {
            let tool = r("tool").unwrap_or_default();
            match (node.get("server"), r("url")) {
                (Some(s), _) => format!("{s}.{tool}"),
                (None, Some(u)) => format!("{tool} at {u}"),
                _ => tool,
            }
        }
        "http" => format!(
            "{} {}",
            r("method")
                .unwrap_or_else(|| "GET".into())
                .to_ascii_uppercase(),
            r("url").unwrap_or_default()
        ),
        "command" => {
            let servers = node.get("mcpServers").unwrap_or("");
            let api = provider.api().short_name();
            if servers.is_empty() {
                api.into()
            } else {
                format!("{api} with {servers}")
            }
        }
        "workflow" => r("path").unwrap_or_default(),
        "sleep" => format!("{} ms", r("duration").unwrap_or_default()),
        _ => String::new(),
    }
}

/// The first line of `s`, at most 160 characters.
pub(crate) fn one_line(s: &str) -> String {
    let first = s
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let more = s.trim().lines().count() > 1;
    let mut out: String = first.chars().take(160).collect();
    if first.chars().count() > 160 || more {
        out.push('…');
    }
    out
}
