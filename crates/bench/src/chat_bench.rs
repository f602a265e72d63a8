//! The chat benchmarks of issue 3 (`registry`, `chat-turn`) and the synthetic MCP
//! server they use (`tool-server`).
//!
//! - `registry`: [`ToolRegistry::new`] over N realistic tools (the schema corpus of
//!   `crates/chat/tests/fixtures/schemas`, cycled under distinct names across several
//!   servers), then `declarations(128)` and `declarations(usize::MAX)`; the time of the
//!   three together, per iteration. The registry normalizes each schema once per
//!   content (a process-wide cache), so the iterations measure the steady state; the
//!   first build (cold cache) and builds from re-listed tools (equal schemas in new
//!   `Arc`s, found by content) are reported apart.
//! - `chat-turn`: one [`Chat`] turn over a [`Host`] whose servers expose N tools in total
//!   (the stdio demo server, `switchboard demo-server`, plus synthetic stdio servers,
//!   `switchboard-bench tool-server`, whose tools answer at once): the request with N
//!   declarations → K parallel function calls (to the demo server's `echo` and `add`) →
//!   results mapped → the second request → the final text. The model is either an
//!   in-process [`ModelClient`] answering at once (no HTTP; it encodes the request and
//!   decodes a canned answer as the real client does), or the `FakeGemini` server over
//!   loopback HTTP (for reference). Host overhead = turn wall time − time inside the
//!   model client − the wall time of the same K parallel `tools/call`s made directly on
//!   the connections right next to the turn (the tool time). Each conversation is a
//!   fresh [`Chat`] of a few turns: its first turn builds the tool registry and the
//!   declarations, the later ones reuse them; the two are reported apart.
//! - `tool-server`: serves N synthetic tools (corpus schemas) over stdio; every call
//!   answers at once with a short text.

use std::collections::HashSet;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use futures::future::{BoxFuture, join_all};
use futures::{Stream, StreamExt};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};
use switchboard_chat::visible_to_model;
use switchboard_chat::{AlwaysApprove, Chat, ChatOptions, ToolRegistry, normalize};
use switchboard_config::{EnvPolicy, child_env};
use switchboard_host::{Host, HostOptions, ServerSpec, ServerStatus};
use switchboard_mcp::model::Tool;
use switchboard_mcp::{CallOptions, StdioTarget, Target};
use switchboard_model::{
    ChunkStream, GenerateRequest, GenerateResponse, ModelClient, ModelError, Part,
};
use switchboard_model_fakes::gemini::{FakeGemini, FakeOptions, FakeTurn, declared_function_names};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::args::Args;
use crate::stats::{percentile_ms, round3};

/// The demo server's name in the chat-turn host.
const DEMO: &str = "demo";

/// The final answer of the scripted models.
const FINAL_TEXT: &str = "All three tools answered: the echo came back and the sum is right.";

/// `--fixtures DIR`, else the schema corpus of `crates/chat`.
fn fixtures_dir(args: &mut Args) -> PathBuf {
    args.take("fixtures").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("chat")
            .join("tests")
            .join("fixtures")
            .join("schemas")
    })
}

/// The corpus tools visible to the model, sorted by file name; a tool name that two
/// servers share (`push_files`) gets the second one's server prefix, so every name is
/// distinct.
fn load_fixtures(dir: &Path) -> Result<Vec<Tool>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read the schema corpus {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    let mut seen = HashSet::new();
    let mut tools = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let mut tool: Tool = serde_json::from_str(&text)
            .with_context(|| format!("{} is not an MCP tool", path.display()))?;
        if !visible_to_model(&tool) {
            continue;
        }
        if !seen.insert(tool.name.to_string()) {
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("x");
            let prefix = stem.split("__").next().unwrap_or(stem);
            tool.name = format!("{prefix}_{}", tool.name).into();
            seen.insert(tool.name.to_string());
        }
        tools.push(tool);
    }
    ensure!(!tools.is_empty(), "no tool fixtures in {}", dir.display());
    Ok(tools)
}

/// `count` tools taken from the corpus from position `offset` on, cycling; the n-th
/// reuse of a fixture is named `{name}_{n}`.
fn synth_tools(fixtures: &[Tool], count: usize, offset: usize) -> Vec<Tool> {
    (offset..offset + count)
        .map(|i| {
            let mut tool = fixtures[i % fixtures.len()].clone();
            let cycle = i / fixtures.len();
            if cycle > 0 {
                tool.name = format!("{}_{cycle}", tool.name).into();
            }
            tool
        })
        .collect()
}

/// Nearest-rank percentile of plain numbers (may be negative).
fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// `{p50, p90, min, max}` in milliseconds, rounded.
fn summary(values_ms: &[f64]) -> Value {
    json!({
        "p50": round3(percentile(values_ms, 50.0)),
        "p90": round3(percentile(values_ms, 90.0)),
        "min": round3(values_ms.iter().copied().fold(f64::INFINITY, f64::min)),
        "max": round3(values_ms.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

// ------------------------------------------------------------------------ registry

/// Options of the `registry` subcommand.
#[derive(Debug)]
pub struct RegistryOpts {
    pub tools: usize,
    pub servers: usize,
    pub iterations: usize,
    pub warmup: usize,
    pub cap: usize,
    pub fixtures: PathBuf,
}

impl RegistryOpts {
    pub fn from_args(args: &mut Args) -> Result<Self> {
        let opts = Self {
            tools: args.parsed_or("tools", 1000usize)?,
            servers: args.parsed_or("servers", 20usize)?,
            iterations: args.parsed_or("iterations", 200usize)?,
            warmup: args.parsed_or("warmup", 20usize)?,
            cap: args.parsed_or("cap", switchboard_chat::DEFAULT_MAX_DECLARATIONS)?,
            fixtures: fixtures_dir(args),
        };
        if opts.tools == 0 || opts.servers == 0 || opts.iterations == 0 {
            bail!("--tools, --servers and --iterations must be at least 1");
        }
        Ok(opts)
    }
}

/// Registry build + `declarations(cap)` + `declarations(usize::MAX)`, timed per
/// iteration.
pub fn registry(opts: RegistryOpts) -> Result<Value> {
    let fixtures = load_fixtures(&opts.fixtures)?;
    let per_server = opts.tools.div_ceil(opts.servers);
    let mut servers: Vec<(String, Vec<Tool>)> = Vec::new();
    let mut start = 0;
    while start < opts.tools {
        let n = per_server.min(opts.tools - start);
        servers.push((
            format!("server-{:02}", servers.len()),
            synth_tools(&fixtures, n, start),
        ));
        start += n;
    }
    let pairs: Vec<(&str, &[Tool])> = servers
        .iter()
        .map(|(s, t)| (s.as_str(), t.as_slice()))
        .collect();
    let schema_bytes: usize = servers
        .iter()
        .flat_map(|(_, t)| t)
        .map(|t| serde_json::to_vec(&*t.input_schema).map_or(0, |v| v.len()))
        .sum();

    // Check once that the work is what it claims to be. In a fresh process this first
    // build finds the schema cache empty: the cold cost, one sample.
    let t0 = Instant::now();
    let reg = ToolRegistry::new(&pairs);
    let cold_new = t0.elapsed();
    ensure!(
        reg.len() == opts.tools,
        "the registry holds {} tools, not {}",
        reg.len(),
        opts.tools
    );
    let (capped, omitted) = reg.declarations(opts.cap);
    let (all, _) = reg.declarations(usize::MAX);
    ensure!(all.len() == opts.tools, "declarations(MAX) is incomplete");

    let mut total = Vec::with_capacity(opts.iterations);
    let mut build = Vec::with_capacity(opts.iterations);
    let mut decl_cap = Vec::with_capacity(opts.iterations);
    let mut decl_all = Vec::with_capacity(opts.iterations);
    let mut normalize_only = Vec::with_capacity(opts.iterations);
    let mut relisted_new = Vec::with_capacity(opts.iterations);
    // For the breakdown: the schema normalizer alone, on the same input schemas.
    let inputs: Vec<Value> = servers
        .iter()
        .flat_map(|(_, t)| t)
        .map(|t| Value::Object((*t.input_schema).clone()))
        .collect();
    let normalized_bytes: usize = inputs
        .iter()
        .map(|v| serde_json::to_vec(&normalize(v).schema).map_or(0, |b| b.len()))
        .sum();
    // Each step runs in its own loop, so the memory one step frees is not handed back
    // (glibc consolidates freed chunks at the next large allocation) on another step's
    // clock.
    for i in 0..opts.warmup + opts.iterations {
        let t0 = Instant::now();
        let reg = ToolRegistry::new(black_box(&pairs));
        let t1 = Instant::now();
        let capped = reg.declarations(black_box(opts.cap));
        let t2 = Instant::now();
        let all = reg.declarations(black_box(usize::MAX));
        let t3 = Instant::now();
        black_box((&reg, &capped, &all));
        drop((reg, capped, all));
        if i >= opts.warmup {
            total.push(t3 - t0);
            build.push(t1 - t0);
            decl_cap.push(t2 - t1);
            decl_all.push(t3 - t2);
        }
    }
    for i in 0..opts.warmup + opts.iterations {
        let t0 = Instant::now();
        let normalized: Vec<_> = inputs.iter().map(|v| normalize(black_box(v))).collect();
        let t1 = Instant::now();
        drop(black_box(normalized));
        if i >= opts.warmup {
            normalize_only.push(t1 - t0);
        }
    }
    for i in 0..opts.warmup + opts.iterations {
        // The same tools as a server lists them again: equal schemas in new `Arc`s.
        let relisted = relist(&servers);
        let relisted_pairs: Vec<(&str, &[Tool])> = relisted
            .iter()
            .map(|(s, t)| (s.as_str(), t.as_slice()))
            .collect();
        let t0 = Instant::now();
        let reg = ToolRegistry::new(black_box(&relisted_pairs));
        let t1 = Instant::now();
        drop(black_box(reg));
        if i >= opts.warmup {
            relisted_new.push(t1 - t0);
        }
    }
    let stats = |v: &mut Vec<Duration>| {
        v.sort();
        json!({
            "p50": round3(percentile_ms(v, 50.0)),
            "p90": round3(percentile_ms(v, 90.0)),
            "min": round3(percentile_ms(v, 0.0)),
            "max": round3(percentile_ms(v, 100.0)),
        })
    };
    Ok(json!({
        "tools": opts.tools,
        "servers": servers.len(),
        "distinct_schemas": fixtures.len(),
        "input_schema_bytes": schema_bytes,
        "normalized_schema_bytes": normalized_bytes,
        "cap": opts.cap,
        "declared_with_cap": capped.len(),
        "omitted_with_cap": omitted.count,
        "iterations": opts.iterations,
        "warmup": opts.warmup,
        "total_ms": stats(&mut total),
        "new_ms": stats(&mut build),
        "declarations_cap_ms": stats(&mut decl_cap),
        "declarations_all_ms": stats(&mut decl_all),
        "normalize_only_ms": stats(&mut normalize_only),
        "cold_new_ms": round3(ms(cold_new)),
        "relisted_new_ms": stats(&mut relisted_new),
    }))
}

/// Copies of the servers' tools whose input schemas sit in new `Arc`s with equal
/// content, as after a server lists its tools again.
fn relist(servers: &[(String, Vec<Tool>)]) -> Vec<(String, Vec<Tool>)> {
    servers
        .iter()
        .map(|(s, tools)| {
            let tools = tools
                .iter()
                .map(|t| {
                    let mut t = t.clone();
                    t.input_schema = Arc::new((*t.input_schema).clone());
                    t
                })
                .collect();
            (s.clone(), tools)
        })
        .collect()
}

// --------------------------------------------------------------------- tool-server

/// Options of the (internal) `tool-server` subcommand.
#[derive(Debug)]
pub struct ToolServerOpts {
    pub tools: usize,
    pub offset: usize,
    pub fixtures: PathBuf,
}

impl ToolServerOpts {
    pub fn from_args(args: &mut Args) -> Result<Self> {
        Ok(Self {
            tools: args.required("tools")?,
            offset: args.parsed_or("offset", 0usize)?,
            fixtures: fixtures_dir(args),
        })
    }
}

/// An MCP server with synthetic tools that answer at once.
#[derive(Debug, Clone)]
struct SynthServer {
    tools: Arc<Vec<Tool>>,
}

impl ServerHandler for SynthServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("switchboard-bench-tools", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items((*self.tools).clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(
            CallToolResult::success(vec![ContentBlock::text(format!("ok: {}", request.name))])
                .into(),
        )
    }
}

/// Serves the synthetic tools on stdin/stdout until stdin closes, then ends the process
/// (so that nothing but protocol messages is ever written to stdout).
pub async fn tool_server(opts: ToolServerOpts) -> Result<()> {
    let fixtures = load_fixtures(&opts.fixtures)?;
    let server = SynthServer {
        tools: Arc::new(synth_tools(&fixtures, opts.tools, opts.offset)),
    };
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow!("tool-server: initialize failed: {e}"))?;
    let _ = running.waiting().await;
    std::process::exit(0)
}

// ----------------------------------------------------------------------- chat-turn

/// Which model answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ModelKind {
    /// [`InstantModel`]: in-process, answers at once.
    InProcess,
    /// `FakeGemini` over loopback HTTP through the real `GeminiClient`.
    FakeHttp,
}

impl ModelKind {
    fn label(self) -> &'static str {
        match self {
            ModelKind::InProcess => "in-process",
            ModelKind::FakeHttp => "fake-gemini-http",
        }
    }
}

/// Options of the `chat-turn` subcommand.
#[derive(Debug)]
pub struct ChatTurnOpts {
    pub tools: usize,
    pub calls: usize,
    /// Conversations measured (after `warmup` more).
    pub sessions: usize,
    /// Turns per conversation: the first, then the later ones.
    pub session_turns: usize,
    pub warmup: usize,
    pub synthetic_servers: usize,
    models: Vec<ModelKind>,
    streams: Vec<bool>,
    pub switchboard: PathBuf,
    pub fixtures: PathBuf,
}

impl ChatTurnOpts {
    pub fn from_args(args: &mut Args) -> Result<Self> {
        let tools = args.parsed_or("tools", 100usize)?;
        let calls = args.parsed_or("calls", 3usize)?;
        let sessions = args.parsed_or("sessions", 200usize)?;
        let session_turns = args.parsed_or("session-turns", 3usize)?;
        let warmup = args.parsed_or("warmup", 10usize)?;
        let synthetic_servers = args.parsed_or("synthetic-servers", 3usize)?;
        let models = match args.take("model").as_deref() {
            None | Some("both") => vec![ModelKind::InProcess, ModelKind::FakeHttp],
            Some("in-process") => vec![ModelKind::InProcess],
            Some("fake-http") => vec![ModelKind::FakeHttp],
            Some(other) => bail!("--model: expected in-process, fake-http or both, got `{other}`"),
        };
        let streams = match args.take("stream").as_deref() {
            None | Some("both") => vec![false, true],
            Some("true") => vec![true],
            Some("false") => vec![false],
            Some(other) => bail!("--stream: expected true, false or both, got `{other}`"),
        };
        if calls == 0 || sessions == 0 || synthetic_servers == 0 || session_turns < 2 {
            bail!(
                "--calls, --sessions and --synthetic-servers must be at least 1, --session-turns at least 2"
            );
        }
        Ok(Self {
            tools,
            calls,
            sessions,
            session_turns,
            warmup,
            synthetic_servers,
            models,
            streams,
            switchboard: args.switchboard_bin()?,
            fixtures: fixtures_dir(args),
        })
    }
}

/// One planned function call: the demo server's tool, its arguments, and the name the
/// model uses.
#[derive(Debug, Clone)]
struct PlannedCall {
    server: String,
    tool: String,
    args: Map<String, Value>,
    model_name: String,
}

/// The calls of one turn: the demo server's `echo` and `add`, alternately.
fn plan_calls(registry: &ToolRegistry, count: usize) -> Result<Vec<PlannedCall>> {
    (0..count)
        .map(|i| {
            let (tool, args) = if i % 2 == 0 {
                ("echo", json!({"message": format!("hello {i}")}))
            } else {
                ("add", json!({"a": i, "b": 2.5}))
            };
            let model_name = registry
                .name_of(DEMO, tool)
                .ok_or_else(|| anyhow!("the demo server has no `{tool}` tool"))?
                .to_string();
            Ok(PlannedCall {
                server: DEMO.into(),
                tool: tool.into(),
                args: args.as_object().cloned().unwrap_or_default(),
                model_name,
            })
        })
        .collect()
}

/// A model that answers at once, in process: function calls first, then (once the
/// request carries function responses) the final text. It encodes each request to JSON
/// and decodes a canned JSON answer, the work the HTTP client does on the host.
struct InstantModel {
    calls_json: Vec<u8>,
    text_chunks_json: Vec<Vec<u8>>,
    text_json: Vec<u8>,
    last_declarations: AtomicUsize,
}

impl InstantModel {
    fn new(calls: &[PlannedCall]) -> Result<Self> {
        let parts: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut part = json!({"functionCall": {
                    "id": format!("fc-bench-{i}"),
                    "name": c.model_name,
                    "args": c.args,
                }});
                if i == 0 {
                    part["thoughtSignature"] = json!("YmVuY2gtc2lnbmF0dXJlLTAwMDE=");
                }
                part
            })
            .collect();
        let answer = |parts: Value| {
            json!({
                "candidates": [{
                    "content": {"role": "model", "parts": parts},
                    "finishReason": "STOP",
                    "index": 0
                }],
                "usageMetadata": {"promptTokenCount": 4321, "candidatesTokenCount": 42, "totalTokenCount": 4363},
                "modelVersion": switchboard_model::DEFAULT_MODEL,
                "responseId": "bench-response"
            })
        };
        let words: Vec<&str> = FINAL_TEXT.split_inclusive(' ').collect();
        let third = words.len().div_ceil(3);
        let text_chunks_json = words
            .chunks(third.max(1))
            .map(|w| serde_json::to_vec(&answer(json!([{"text": w.concat()}]))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            calls_json: serde_json::to_vec(&answer(Value::Array(parts)))?,
            text_json: serde_json::to_vec(&answer(json!([{"text": FINAL_TEXT}])))?,
            text_chunks_json,
            last_declarations: AtomicUsize::new(0),
        })
    }

    /// The canned answers for `request` (one, or the text in chunks when `chunked`).
    fn answer(
        &self,
        request: &GenerateRequest,
        chunked: bool,
    ) -> Result<Vec<GenerateResponse>, ModelError> {
        let body = serde_json::to_vec(request).map_err(|source| ModelError::Encode {
            api: switchboard_model::ApiKind::Gemini,
            source,
        })?;
        black_box(&body);
        let declarations = request
            .tools
            .iter()
            .flatten()
            .filter_map(|t| t.function_declarations.as_ref())
            .map(Vec::len)
            .sum();
        self.last_declarations
            .store(declarations, Ordering::Relaxed);
        let after_tools = request
            .contents
            .last()
            .is_some_and(|c| c.parts.iter().any(|p| p.function_response.is_some()));
        let decode = |bytes: &[u8]| {
            serde_json::from_slice::<GenerateResponse>(bytes).map_err(|e| ModelError::Decode {
                api: switchboard_model::ApiKind::Gemini,
                message: e.to_string(),
            })
        };
        if !after_tools {
            Ok(vec![decode(&self.calls_json)?])
        } else if chunked {
            self.text_chunks_json.iter().map(|b| decode(b)).collect()
        } else {
            Ok(vec![decode(&self.text_json)?])
        }
    }
}

impl ModelClient for InstantModel {
    fn generate<'a>(
        &'a self,
        _model: &'a str,
        request: &'a GenerateRequest,
    ) -> BoxFuture<'a, Result<GenerateResponse, ModelError>> {
        Box::pin(async move {
            self.answer(request, false)?
                .pop()
                .ok_or_else(|| ModelError::Decode {
                    api: switchboard_model::ApiKind::Gemini,
                    message: "no canned answer".into(),
                })
        })
    }

    fn stream<'a>(
        &'a self,
        _model: &'a str,
        request: &'a GenerateRequest,
    ) -> BoxFuture<'a, Result<ChunkStream, ModelError>> {
        Box::pin(async move {
            let chunks = self.answer(request, true)?;
            Ok(Box::pin(futures::stream::iter(chunks.into_iter().map(Ok))) as ChunkStream)
        })
    }
}

/// Wraps a model client and adds up the time spent inside it: the whole `generate`
/// future, the opening of a stream, and for each chunk the time from the first poll
/// after the previous chunk until the chunk is ready (waiting included), so the time
/// the chat spends on a chunk is not counted.
struct TimedModel {
    inner: Arc<dyn ModelClient>,
    nanos: Arc<AtomicU64>,
}

impl TimedModel {
    fn add(nanos: &AtomicU64, d: Duration) {
        nanos.fetch_add(
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// Returns the time counted so far and resets it.
    fn take(&self) -> Duration {
        Duration::from_nanos(self.nanos.swap(0, Ordering::Relaxed))
    }
}

struct TimedStream {
    inner: ChunkStream,
    nanos: Arc<AtomicU64>,
    waiting_since: Option<Instant>,
}

impl Stream for TimedStream {
    type Item = Result<GenerateResponse, ModelError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let since = *self.waiting_since.get_or_insert_with(Instant::now);
        let poll = self.inner.poll_next_unpin(cx);
        if poll.is_ready() {
            TimedModel::add(&self.nanos, since.elapsed());
            self.waiting_since = None;
        }
        poll
    }
}

impl ModelClient for TimedModel {
    fn generate<'a>(
        &'a self,
        model: &'a str,
        request: &'a GenerateRequest,
    ) -> BoxFuture<'a, Result<GenerateResponse, ModelError>> {
        Box::pin(async move {
            let t = Instant::now();
            let r = self.inner.generate(model, request).await;
            Self::add(&self.nanos, t.elapsed());
            r
        })
    }

    fn stream<'a>(
        &'a self,
        model: &'a str,
        request: &'a GenerateRequest,
    ) -> BoxFuture<'a, Result<ChunkStream, ModelError>> {
        Box::pin(async move {
            let t = Instant::now();
            let r = self.inner.stream(model, request).await;
            Self::add(&self.nanos, t.elapsed());
            r.map(|inner| {
                Box::pin(TimedStream {
                    inner,
                    nanos: self.nanos.clone(),
                    waiting_since: None,
                }) as ChunkStream
            })
        })
    }
}

fn stdio_spec(name: String, program: &Path, args: Vec<String>) -> ServerSpec {
    let env = child_env(EnvPolicy::Filtered, std::env::vars(), &Default::default());
    let target = Target::Stdio(StdioTarget {
        program: program.display().to_string(),
        args,
        env,
        cwd: None,
    });
    let mut spec = ServerSpec::adhoc(name, "bench", target);
    spec.trust = true;
    spec
}

/// Starts a host and checks that every server connected.
async fn start_host(specs: Vec<ServerSpec>) -> Result<Host> {
    let count = specs.len();
    let host = Host::new(specs, HostOptions::default());
    host.start().await;
    let snapshot = host.snapshot();
    let connected = snapshot
        .iter()
        .filter(|s| s.status == ServerStatus::Connected)
        .count();
    if connected != count {
        let errors: Vec<String> = snapshot
            .iter()
            .filter_map(|s| s.error.as_ref().map(|e| format!("{}: {e}", s.name)))
            .collect();
        host.shutdown().await;
        bail!(
            "only {connected} of {count} servers connected: {}",
            errors.join("; ")
        );
    }
    Ok(host)
}

/// The registry the chat would build from the host right now.
fn host_registry(host: &Host) -> ToolRegistry {
    let snapshot = host.snapshot();
    let pairs: Vec<(&str, &[Tool])> = snapshot
        .iter()
        .map(|s| (s.name.as_str(), s.tools.as_slice()))
        .collect();
    ToolRegistry::new(&pairs)
}

/// The demo server plus synthetic servers with `tools` tools in total.
async fn build_host(opts: &ChatTurnOpts) -> Result<(Host, Vec<usize>)> {
    let demo_spec = || stdio_spec(DEMO.into(), &opts.switchboard, vec!["demo-server".into()]);
    // How many tools does the demo server show the model?
    let probe = start_host(vec![demo_spec()]).await?;
    let demo_tools = host_registry(&probe).len();
    probe.shutdown().await;
    let Some(synthetic) = opts.tools.checked_sub(demo_tools) else {
        bail!("--tools must be at least {demo_tools} (the demo server's tools)");
    };
    let exe = std::env::current_exe().context("cannot find this executable's path")?;
    let per_server = synthetic.div_ceil(opts.synthetic_servers).max(1);
    let mut specs = vec![demo_spec()];
    let mut sizes = vec![demo_tools];
    let mut start = 0;
    while start < synthetic {
        let n = per_server.min(synthetic - start);
        specs.push(stdio_spec(
            format!("tools-{}", specs.len()),
            &exe,
            vec![
                "tool-server".into(),
                "--tools".into(),
                n.to_string(),
                "--offset".into(),
                start.to_string(),
                "--fixtures".into(),
                opts.fixtures.display().to_string(),
            ],
        ));
        sizes.push(n);
        start += n;
    }
    let host = start_host(specs).await?;
    let registered = host_registry(&host).len();
    if registered != opts.tools {
        host.shutdown().await;
        bail!(
            "the host offers {registered} tools to the model, not {}",
            opts.tools
        );
    }
    Ok((host, sizes))
}

/// The same tool calls as one turn makes, in parallel, directly on the connections (as
/// the chat makes them: with a progress channel and a cancellation token); their wall
/// time.
async fn direct_calls(host: &Host, calls: &[PlannedCall]) -> Result<Duration> {
    let t = Instant::now();
    let results = join_all(calls.iter().map(|c| async move {
        let conn = host
            .connection(&c.server)
            .ok_or_else(|| anyhow!("`{}` is not connected", c.server))?;
        let (ptx, _prx) = mpsc::unbounded_channel();
        let opts = CallOptions {
            timeout: None,
            progress: Some(ptx),
            cancel: Some(CancellationToken::new()),
            meta: None,
        };
        conn.call_tool(&c.tool, Some(c.args.clone()), &opts)
            .await
            .map_err(|e| anyhow!("{}: {e}", c.tool))
    }))
    .await;
    let elapsed = t.elapsed();
    for r in results {
        if r?.is_error == Some(true) {
            bail!("a direct tool call failed");
        }
    }
    Ok(elapsed)
}

/// Checks that the turn just finished made every call, got every result, and ended with
/// the final text.
fn check_turn(chat: &Chat, answer: &str, calls: usize) -> Result<()> {
    ensure!(answer == FINAL_TEXT, "unexpected final text: {answer:?}");
    let history = chat.history();
    let responses: Vec<_> = history
        .len()
        .checked_sub(2)
        .and_then(|i| history.get(i))
        .map(|c| {
            c.parts
                .iter()
                .filter_map(|p| p.function_response.as_ref())
                .collect()
        })
        .unwrap_or_default();
    ensure!(
        responses.len() == calls,
        "{} function responses, not {calls}",
        responses.len()
    );
    for r in responses {
        ensure!(
            !r.response.contains_key("error"),
            "a tool call failed: {:?}",
            r.response
        );
    }
    Ok(())
}

/// The measurements of one kind of turn, in milliseconds.
#[derive(Debug, Default)]
struct Series {
    turn: Vec<f64>,
    model: Vec<f64>,
    tools: Vec<f64>,
    overhead: Vec<f64>,
}

impl Series {
    fn push(&mut self, wall: Duration, model: Duration, tools: Duration) {
        self.turn.push(ms(wall));
        self.model.push(ms(model));
        self.tools.push(ms(tools));
        self.overhead.push(ms(wall) - ms(model) - ms(tools));
    }

    fn report(&self, in_process: bool) -> Value {
        let p50 = |v: &[f64]| percentile(v, 50.0);
        let mut v = json!({
            "turns": self.turn.len(),
            "turn_ms": summary(&self.turn),
            "model_ms": summary(&self.model),
            "tool_calls_ms": summary(&self.tools),
            "overhead_ms": summary(&self.overhead),
            "overhead_p50_of_medians_ms":
                round3(p50(&self.turn) - p50(&self.model) - p50(&self.tools)),
        });
        if in_process {
            // The in-process model's own work (encoding the request, decoding the answer,
            // as the HTTP client does) is host work too: with a model answering at once,
            // the stricter overhead is the turn minus the tool calls.
            let with_client: Vec<f64> = self
                .overhead
                .iter()
                .zip(&self.model)
                .map(|(o, m)| o + m)
                .collect();
            v["overhead_incl_client_ms"] = summary(&with_client);
        }
        v
    }
}

/// One configuration measured: the model and whether the answer is streamed.
struct Mode {
    kind: ModelKind,
    stream: bool,
    instant: Option<Arc<InstantModel>>,
    /// The first turn of each conversation (the chat builds its tool registry).
    first: Series,
    /// The later turns (the registry and the declarations are reused).
    later: Series,
}

impl Mode {
    /// The model client of a new conversation, and the FakeGemini behind it (a fresh
    /// one per conversation: it keeps every request it received).
    async fn session_client(&self) -> Result<(Arc<TimedModel>, Option<FakeGemini>)> {
        let nanos = Arc::new(AtomicU64::new(0));
        if let Some(m) = &self.instant {
            let inner: Arc<dyn ModelClient> = m.clone();
            return Ok((Arc::new(TimedModel { inner, nanos }), None));
        }
        let fake = FakeGemini::try_start(
            FakeOptions {
                chunk_delay: Duration::ZERO,
                ..FakeOptions::default()
            },
            Vec::new(),
        )
        .await
        .context("cannot start FakeGemini")?;
        let client = fake.client().map_err(|e| anyhow!("{e}"))?;
        let inner: Arc<dyn ModelClient> = Arc::new(client);
        Ok((Arc::new(TimedModel { inner, nanos }), Some(fake)))
    }

    fn report(&self) -> Value {
        let in_process = self.kind == ModelKind::InProcess;
        json!({
            "model": self.kind.label(),
            "stream": self.stream,
            "first_turn": self.first.report(in_process),
            "later_turns": self.later.report(in_process),
        })
    }
}

/// Checks that the last request declared every tool.
fn check_declarations(mode: &Mode, fake: Option<&FakeGemini>, tools: usize) -> Result<()> {
    let declared = if let Some(m) = &mode.instant {
        m.last_declarations.load(Ordering::Relaxed)
    } else if let Some(fake) = fake {
        fake.requests()
            .last()
            .map_or(0, |r| declared_function_names(r).len())
    } else {
        0
    };
    ensure!(
        declared == tools,
        "{}: the request declared {declared} functions, not {tools}",
        mode.kind.label()
    );
    Ok(())
}

/// The timings of one turn: wall time, time in the model client, and the wall time of
/// the same tool calls made directly.
type TurnTimes = (Duration, Duration, Duration);

/// One conversation of `turns` turns; the timings of each.
async fn session(
    host: &Host,
    mode: &Mode,
    calls: &[PlannedCall],
    turns: usize,
    check_tools: Option<usize>,
    direct_first: bool,
) -> Result<Vec<TurnTimes>> {
    let (client, fake) = mode.session_client().await?;
    let opts = ChatOptions {
        yolo: true,
        stream: mode.stream,
        ..ChatOptions::default()
    };
    let mut chat = Chat::new(host.clone(), client.clone(), opts, Arc::new(AlwaysApprove));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let mut times = Vec::with_capacity(turns);
    for turn in 0..turns {
        if let Some(fake) = &fake {
            fake.push(FakeTurn::calls(
                calls
                    .iter()
                    .map(|c| (c.model_name.clone(), Value::Object(c.args.clone()))),
            ));
            fake.push(FakeTurn::text(FINAL_TEXT));
        }
        // Alternate which goes first, so neither always runs on a warmer cache.
        let direct_first = direct_first ^ (turn % 2 == 1);
        let mut tools = Duration::ZERO;
        if direct_first {
            tools = direct_calls(host, calls).await?;
        }
        client.take();
        let t = Instant::now();
        let answer = chat
            .send(
                vec![Part::text(format!(
                    "Turn {turn}: echo hello, add the numbers, then sum it up."
                ))],
                &tx,
                &cancel,
            )
            .await;
        let wall = t.elapsed();
        let model = client.take();
        let answer = answer.map_err(|e| anyhow!("{} turn failed: {e}", mode.kind.label()))?;
        if !direct_first {
            tools = direct_calls(host, calls).await?;
        }
        while rx.try_recv().is_ok() {}
        check_turn(&chat, &answer, calls.len())?;
        if let Some(n) = check_tools {
            check_declarations(mode, fake.as_ref(), n)?;
        }
        times.push((wall, model, tools));
    }
    Ok(times)
}

/// Chat-turn host overhead, every configured mode interleaved.
pub async fn chat_turn(opts: ChatTurnOpts) -> Result<Value> {
    let (host, sizes) = build_host(&opts).await?;
    let result = chat_turn_on(&host, &opts, &sizes).await;
    host.shutdown().await;
    result
}

async fn chat_turn_on(host: &Host, opts: &ChatTurnOpts, sizes: &[usize]) -> Result<Value> {
    let registry = host_registry(host);
    let calls = plan_calls(&registry, opts.calls)?;
    let mut modes = Vec::new();
    for &kind in &opts.models {
        for &stream in &opts.streams {
            let instant = match kind {
                ModelKind::InProcess => Some(Arc::new(InstantModel::new(&calls)?)),
                ModelKind::FakeHttp => None,
            };
            modes.push(Mode {
                kind,
                stream,
                instant,
                first: Series::default(),
                later: Series::default(),
            });
        }
    }

    for iteration in 0..opts.warmup + opts.sessions {
        for mode in &mut modes {
            let check = (iteration == 0).then_some(opts.tools);
            let times = session(
                host,
                mode,
                &calls,
                opts.session_turns,
                check,
                iteration % 2 == 1,
            )
            .await?;
            if iteration < opts.warmup {
                continue;
            }
            for (i, (wall, model, tools)) in times.into_iter().enumerate() {
                let series = if i == 0 {
                    &mut mode.first
                } else {
                    &mut mode.later
                };
                series.push(wall, model, tools);
            }
        }
    }
    Ok(json!({
        "tools": opts.tools,
        "calls": opts.calls,
        "servers": sizes.len(),
        "tools_per_server": sizes,
        "called": calls.iter().map(|c| format!("{}/{}", c.server, c.tool)).collect::<Vec<_>>(),
        "sessions": opts.sessions,
        "session_turns": opts.session_turns,
        "warmup_sessions": opts.warmup,
        "modes": modes.iter().map(Mode::report).collect::<Vec<_>>(),
    }))
}
