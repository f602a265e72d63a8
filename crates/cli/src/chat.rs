//! `switchboard chat`: talk to the model (Gemini, or an OpenAI-compatible server with
//! `--provider openai` / `provider` in the settings) with every MCP server's tools.
//!
//! Interactive mode reads lines with history and editing (rustyline); servers still
//! starting do not block the first prompt, and their tools join when ready. `-p` runs
//! one turn for scripts: it waits for discovery (bounded by each server's start-up
//! timeout), prints the answer on stdout and exits non-zero on failure.
//!
//! A tool call of a server not trusted asks first: on a terminal one key answers
//! (`y` once, `t`/`s` always this tool/server, `S` always and saved, `n`, Enter or Esc
//! cancel; the choice is echoed); if the terminal cannot give single keys, a line is
//! read. Without a terminal the call is declined.
//!
//! Ctrl-C anywhere in a turn cancels the turn at once: the model request is dropped,
//! tool calls in flight get `notifications/cancelled`, a pending confirmation counts as
//! declined and nothing more is asked in that turn; the prompt returns. At the prompt,
//! Ctrl-C once says how to quit and a second Ctrl-C quits.
//!
//! Servers that connect, fail or reconnect while the session runs are announced through
//! the line editor's printer (above the prompt, which is redrawn); the CLI's own escapes
//! never pass through [`crate::term::visible`], the server text does.

use std::collections::HashSet;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, anyhow, bail};
use futures::future::BoxFuture;
use serde_json::Value;
use switchboard_chat::Expanded;
use switchboard_chat::{
    AlwaysApprove, Chat, ChatEvent, ChatOptions, ConfirmRequest, Confirmer, Decision,
};
use switchboard_host::{Host, HostEvent, HostOptions, ServerStatus};
use switchboard_model::Part;
use switchboard_model::{ModelClient, ModelConfig, ModelConfigError, Provider as ModelProvider};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::ctx::{self, Globals};

#[derive(Debug, clap::Args)]
pub struct ChatArgs {
    /// Run one prompt and exit (for scripts).
    #[arg(short = 'p', long = "prompt", value_name = "TEXT")]
    pub prompt: Option<String>,
    /// The model (default: `model` in settings, else the built-in Gemini default; the
    /// `openai` provider has none).
    #[arg(short, long)]
    pub model: Option<String>,
    /// Run every tool call without asking.
    #[arg(long)]
    pub yolo: bool,
    /// Google Search grounding instead of MCP tools.
    #[arg(long)]
    pub web_search: bool,
    /// At most this many tool declarations per request.
    #[arg(long, default_value_t = switchboard_chat::DEFAULT_MAX_DECLARATIONS)]
    pub max_tools: usize,
    /// Do not stream the answer.
    #[arg(long)]
    pub no_stream: bool,
    /// A system prompt.
    #[arg(long)]
    pub system: Option<String>,
    /// The model API: `gemini`, or `openai` for any OpenAI-compatible chat-completions
    /// server (llama.cpp, Ollama, vLLM…; needs `--model` or `model` in settings)
    /// (default: `provider` in settings, else gemini).
    #[arg(long, value_enum)]
    pub provider: Option<Provider>,
    /// The API base URL. For `openai`, up to and including `/v1`, e.g.
    /// `http://127.0.0.1:8080/v1` (default: OPENAI_BASE_URL, else OpenAI's); for
    /// `gemini`, instead of GEMINI_BASE_URL.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
}

/// Which model API `switchboard chat` talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Provider {
    /// The Gemini API (GEMINI_API_KEY).
    Gemini,
    /// An OpenAI-compatible chat-completions endpoint (OPENAI_API_KEY, optional).
    Openai,
}

impl From<Provider> for switchboard_model::Provider {
    fn from(p: Provider) -> Self {
        match p {
            Provider::Gemini => Self::Gemini,
            Provider::Openai => Self::OpenAi,
        }
    }
}

/// The running turn's cancellation, shared by the session (Ctrl-C as a signal) and
/// the confirmation prompt (Ctrl-C read as a key).
#[derive(Clone, Default)]
struct TurnSignal(Arc<std::sync::Mutex<CancellationToken>>);

impl TurnSignal {
    /// A fresh token for a new turn.
    fn begin(&self) -> CancellationToken {
        let token = CancellationToken::new();
        if let Ok(mut current) = self.0.lock() {
            *current = token.clone();
        }
        token
    }

    /// The token of the turn running now.
    fn current(&self) -> CancellationToken {
        self.0.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

/// Asks on the terminal; without one, declines (scripts use `--yolo` or `trust`).
struct TerminalConfirmer {
    turn: TurnSignal,
}

impl Confirmer for TerminalConfirmer {
    fn confirm(&self, r: ConfirmRequest) -> BoxFuture<'static, Decision> {
        let cancel = self.turn.current();
        Box::pin(ask_confirmation(r, cancel))
    }
}

/// What the person answered at the confirmation.
enum Reply {
    Decided(Decision),
    /// Ctrl-C: the whole turn is cancelled.
    Interrupted,
}

const CONFIRM_PROMPT: &str = "  Run it? [y] once  [t] always this tool  [s] always this server  [S] always, and save  [n] cancel: ";

async fn ask_confirmation(r: ConfirmRequest, cancel: CancellationToken) -> Decision {
    // A turn cancelled at an earlier confirmation asks nothing more.
    if cancel.is_cancelled() {
        return Decision::Cancel;
    }
    let hints = match (r.read_only, r.destructive) {
        (true, _) => " (read-only)",
        (false, true) => " (DESTRUCTIVE)",
        _ => "",
    };
    let args = serde_json::to_string(&r.args).unwrap_or_default();
    if !std::io::stdin().is_terminal() {
        errln!(
            "declined tool call {}.{}{hints} {args}: no terminal to ask (use --yolo or set `trust: true` for the server)",
            r.server,
            r.tool
        );
        return Decision::Cancel;
    }
    errln!("\n⚙ {}.{}{hints}\n  {args}", r.server, r.tool);
    let stop = Arc::new(AtomicBool::new(false));
    let mut asking = {
        let stop = stop.clone();
        let server = r.server.clone();
        tokio::task::spawn_blocking(move || read_reply(&server, &stop))
    };
    tokio::select! {
        reply = &mut asking => match reply {
            Ok(Reply::Decided(d)) => d,
            Ok(Reply::Interrupted) => {
                cancel.cancel();
                Decision::Cancel
            }
            Err(_) => Decision::Cancel,
        },
        // Cancelled elsewhere (a signal): give the key reader back the terminal first.
        _ = cancel.cancelled() => {
            stop.store(true, Ordering::SeqCst);
            let _ = asking.await;
            errln!();
            Decision::Cancel
        }
    }
}

/// Reads the answer: one key on a terminal that gives single keys, else a line.
fn read_reply(server: &str, stop: &AtomicBool) -> Reply {
    errout!("{CONFIRM_PROMPT}");
    let _ = std::io::stderr().flush();
    loop {
        let key = match crate::term::read_key(stop) {
            Ok(Some(key)) => key,
            Ok(None) => return Reply::Decided(Decision::Cancel),
            Err(_) => return read_line_reply(server),
        };
        let choice = match key {
            crate::term::Key::Interrupt => {
                errln!("^C");
                return Reply::Interrupted;
            }
            crate::term::Key::Enter | crate::term::Key::Escape | crate::term::Key::EndOfFile => {
                "n".to_string()
            }
            crate::term::Key::Char(c) => c.to_string(),
            crate::term::Key::Other => continue,
        };
        if let Some(decision) = decide(&choice, server, || errln!("{choice}")) {
            return Reply::Decided(decision);
        }
    }
}

/// Reads the answer as a line (a terminal that cannot give single keys).
fn read_line_reply(server: &str) -> Reply {
    loop {
        let mut line = String::new();
        if std::io::stdin().lock().read_line(&mut line).unwrap_or(0) == 0 {
            return Reply::Decided(Decision::Cancel);
        }
        if let Some(decision) = decide(line.trim(), server, || {}) {
            return Reply::Decided(decision);
        }
        errout!("{CONFIRM_PROMPT}");
        let _ = std::io::stderr().flush();
    }
}

/// What an answer means (`S` saves; other letters in either case); `None` for an
/// answer that is none of the choices. `echo` runs before anything is printed about a
/// valid answer.
fn decide(answer: &str, server: &str, echo: impl FnOnce()) -> Option<Decision> {
    let lowered = if answer == "S" {
        "S".to_string()
    } else {
        answer.to_ascii_lowercase()
    };
    let decision = match lowered.as_str() {
        "y" | "yes" => Decision::ProceedOnce,
        "t" => Decision::AlwaysTool,
        "s" => Decision::AlwaysServer,
        "save" | "S" => {
            echo();
            match save_trust(server) {
                Ok(path) => {
                    errln!("  saved: `{server}` is trusted in {}", path.display());
                }
                Err(e) => {
                    errln!("  could not save ({e:#}); trusting it for this session only");
                }
            }
            return Some(Decision::AlwaysServer);
        }
        "n" | "no" | "" => Decision::Cancel,
        _ => return None,
    };
    echo();
    Some(decision)
}

/// The model client through the one factory: `--provider` over `provider` in the
/// settings, `--base-url` over the provider's `*_BASE_URL`, keys from the environment.
fn client(
    a: &ChatArgs,
    provider: ModelProvider,
    http: &reqwest::Client,
) -> Result<Arc<dyn ModelClient>> {
    let mut cfg = ModelConfig::from_env().with_provider(provider);
    cfg.default_http(http);
    if let Some(url) = &a.base_url {
        cfg.set_base_url(url);
    }
    cfg.build().map_err(|e| {
        let hint = match provider {
            ModelProvider::Gemini => e.hint(),
            // No key is fine: local servers (llama.cpp, Ollama, vLLM) need none.
            ModelProvider::OpenAi => {
                "--base-url (or OPENAI_BASE_URL) is the server's API base up to and including /v1, e.g. http://127.0.0.1:8080/v1"
            }
        };
        anyhow!("{e}\nhint: {hint}")
    })
}

/// Saves `trust: true` for a server in the settings file that defines it (the
/// project's first, then the user's), keeping the rest of the file.
fn save_trust(server: &str) -> Result<std::path::PathBuf> {
    let candidates = [
        switchboard_config::project_settings_path(&ctx::project_dir()?),
        switchboard_config::user_settings_path(&ctx::home_dir()?),
    ];
    for path in candidates {
        let mut doc = switchboard_config::SettingsDoc::open(&path)?;
        if let Some(Value::Object(mut entry)) = doc.server(server).cloned() {
            entry.insert("trust".into(), Value::Bool(true));
            doc.set_server(server, Value::Object(entry))?;
            doc.save()?;
            return Ok(path);
        }
    }
    bail!("`{server}` is not defined in a settings file (it may be ad-hoc or the bundled demo)")
}

pub async fn run(g: &Globals, a: ChatArgs) -> Result<ExitCode> {
    let (specs, settings) = ctx::all_specs(g, false)?;
    let guard = ctx::guard(g, Some(&settings))?;
    let provider = ModelProvider::choose(a.provider.map(Into::into), settings.provider.as_deref())?;
    let model = match provider.model([a.model.clone(), settings.model.clone()]) {
        Ok(model) => model,
        Err(ModelConfigError::NoModel) => bail!(
            "--provider openai needs a model: pass --model with the name the server serves (e.g. `llama3.2` for Ollama) or set `model` in the settings"
        ),
        Err(e) => bail!(e),
    };
    let client = client(&a, provider, guard.inner())?;
    let hooks = crate::sampling::ChatHooks {
        client: client.clone(),
        model: model.clone(),
        yolo: a.yolo,
        trusted: specs
            .iter()
            .filter(|s| s.trust)
            .map(|s| s.name.clone())
            .collect(),
    };
    let host = Host::new(
        specs,
        HostOptions {
            hooks: Arc::new(hooks),
            reconnect: a.prompt.is_none(),
            watch_lists: a.prompt.is_none(),
            token_source: crate::auth_cmd::token_source(Some(&settings), &guard, true),
            guard: Some(guard),
            transport_cache: ctx::transport_cache(),
            pins: ctx::pin_store(),
            ..Default::default()
        },
    );
    let opts = ChatOptions {
        model,
        system_prompt: a.system.clone(),
        yolo: a.yolo,
        max_declarations: a.max_tools.max(1),
        web_search: a.web_search,
        stream: !a.no_stream,
        ..Default::default()
    };
    let turn = TurnSignal::default();
    let confirmer: Arc<dyn Confirmer> = if a.yolo {
        Arc::new(AlwaysApprove)
    } else {
        Arc::new(TerminalConfirmer { turn: turn.clone() })
    };
    let result = match &a.prompt {
        Some(prompt) => {
            host.start().await;
            let mut chat = Chat::new(host.clone(), client, opts, confirmer);
            one_shot(&mut chat, prompt, &turn).await
        }
        None => {
            let starter = {
                let host = host.clone();
                tokio::spawn(async move { host.start().await })
            };
            let mut chat = Chat::new(host.clone(), client, opts, confirmer);
            let r = interactive(&mut chat, &turn).await;
            starter.abort();
            r
        }
    };
    host.shutdown().await;
    result
}

async fn one_shot(chat: &mut Chat, prompt: &str, turn: &TurnSignal) -> Result<ExitCode> {
    for s in chat.host().snapshot() {
        if s.status == ServerStatus::Disconnected
            && let Some(e) = &s.error
        {
            errln!("note: MCP server `{}` is not available: {e}", s.name);
        }
    }
    let parts = match expand_input(chat, prompt).await? {
        Some(parts) => parts,
        None => return Ok(ExitCode::SUCCESS),
    };
    let cancel = turn.begin();
    let ctrl_c = cancel_on_ctrl_c(&cancel);
    let outcome = run_turn(chat, parts, &cancel).await;
    ctrl_c.abort();
    outln!();
    match outcome {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            errln!("error: {e:#}");
            Ok(ExitCode::from(1))
        }
    }
}

/// Runs one turn, printing streamed text on stdout and tool activity on stderr.
async fn run_turn(chat: &mut Chat, parts: Vec<Part>, cancel: &CancellationToken) -> Result<()> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let printer = tokio::spawn(async move {
        let mut out = std::io::stdout();
        while let Some(ev) = rx.recv().await {
            render_event(&mut out, ev);
        }
    });
    let r = chat.send(parts, &tx, cancel).await;
    drop(tx);
    let _ = printer.await;
    r.map(|_| ()).map_err(anyhow::Error::from)
}

/// Shows one chat event: the answer's text on stdout, tool activity and notices on
/// stderr.
fn render_event(out: &mut std::io::Stdout, ev: ChatEvent) {
    match ev {
        ChatEvent::Text(t) => {
            let _ = write!(out, "{}", crate::term::visible(&t));
            let _ = out.flush();
        }
        ChatEvent::Notice(n) => errln!("\n[{n}]"),
        ChatEvent::ToolStart {
            server, tool, args, ..
        } => {
            errln!(
                "\n→ {server}.{tool} {}",
                serde_json::to_string(&args).unwrap_or_default()
            );
        }
        ChatEvent::ToolProgress {
            progress,
            total,
            message,
            ..
        } => {
            let total = total.map(|t| format!("/{t}")).unwrap_or_default();
            errln!("  … {progress}{total} {}", message.unwrap_or_default());
        }
        ChatEvent::ToolEnd {
            server,
            tool,
            display,
            is_error,
            ..
        } => {
            let mark = if is_error { "✗" } else { "✓" };
            let shown: String = display.chars().take(500).collect();
            errln!("{mark} {server}.{tool}: {shown}");
        }
    }
}

/// The task that cancels `cancel` on Ctrl-C (abort it after the turn).
fn cancel_on_ctrl_c(cancel: &CancellationToken) -> tokio::task::JoinHandle<()> {
    let cancel = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    })
}

/// Turns a line into message parts (see `switchboard_chat::expand_input`): `/prompt …`
/// commands become the prompt's messages, `@server:uri` references are attached.
/// `None` when the line was answered locally (a prompt's `help`), which is printed.
async fn expand_input(chat: &mut Chat, line: &str) -> Result<Option<Vec<Part>>> {
    match switchboard_chat::expand_input(chat.host(), line, chat.untrusted()).await {
        Ok(Expanded::Parts(parts)) => Ok(Some(parts)),
        Ok(Expanded::Reply(text)) => {
            outln!("{text}");
            Ok(None)
        }
        Err(e) => Err(anyhow!(e)),
    }
}

fn is_settled(s: &switchboard_host::ServerSnapshot) -> bool {
    match s.status {
        ServerStatus::Connected | ServerStatus::Blocked | ServerStatus::Disabled => true,
        ServerStatus::Connecting => false,
        ServerStatus::Disconnected => s.error.is_some(),
    }
}

fn settled(host: &Host) -> bool {
    host.snapshot().iter().all(is_settled)
}

fn print_status(host: &Host) {
    out!("{}", crate::list::human(&host.snapshot(), &[]));
}

fn help_text(host: &Host) -> String {
    let mut out = String::from(
        "Commands:\n  /mcp                      server status (as `mcp list`)\n  /mcp refresh [server]     reconnect and re-list\n  /mcp enable|disable <s>   turn a server's tools on/off for this session\n  /tools                    the tools the model gets\n  /help                     this list\n  /quit                     leave (or Ctrl-D; Ctrl-C twice)\n  @server:uri               attach a resource to your message\n",
    );
    out.push_str(&switchboard_chat::prompt_commands_help(host));
    out
}

/// The line editor of an interactive session, with the history file it loads from and
/// saves to (`~/.switchboard/chat_history`).
struct LineEditor {
    editor: Arc<std::sync::Mutex<rustyline::DefaultEditor>>,
    /// Prints above the prompt (`None` when stdin or stdout is not a terminal).
    printer: Option<Box<dyn rustyline::ExternalPrinter + Send>>,
    history: Option<std::path::PathBuf>,
    /// Whether the last read was interrupted by Ctrl-C (a second one quits).
    last_interrupt: bool,
}

/// What one read from the terminal gave.
enum Input {
    Line(String),
    /// Nothing to do (a first Ctrl-C): read again.
    Again,
    /// Ctrl-D, a second Ctrl-C, or a terminal error.
    Quit,
}

impl LineEditor {
    fn open() -> Result<Self> {
        let mut line_editor =
            rustyline::DefaultEditor::new().context("cannot open the terminal line editor")?;
        let printer = line_editor
            .create_external_printer()
            .ok()
            .map(|p| Box::new(p) as Box<dyn rustyline::ExternalPrinter + Send>);
        let editor = Arc::new(std::sync::Mutex::new(line_editor));
        let history = ctx::home_dir().ok().map(|h| h.join("chat_history"));
        if let (Some(path), Ok(mut ed)) = (&history, editor.lock()) {
            let _ = ed.load_history(path);
        }
        Ok(Self {
            editor,
            printer,
            history,
            last_interrupt: false,
        })
    }

    /// The announcer for [`announce_servers`]: a thread printing through the line
    /// editor's printer until the announcer is dropped, or stderr.
    fn announcer(&mut self) -> Announcer {
        let Some(mut printer) = self.printer.take() else {
            return Announcer::Stderr;
        };
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in rx {
                if printer.print(format!("{line}\n")).is_err() {
                    eprintln!("{line}");
                }
            }
        });
        Announcer::Printer(tx)
    }

    async fn read(&mut self) -> Input {
        match read_line(self.editor.clone()).await {
            Ok(Some(line)) => {
                self.last_interrupt = false;
                Input::Line(line)
            }
            Ok(None) => Input::Quit,
            Err(rustyline::error::ReadlineError::Interrupted) => {
                if self.last_interrupt {
                    return Input::Quit;
                }
                self.last_interrupt = true;
                errln!("(Ctrl-C again to quit)");
                Input::Again
            }
            Err(e) => {
                errln!("error: {e}");
                Input::Quit
            }
        }
    }

    fn save_history(&self) {
        let (Some(path), Ok(mut ed)) = (&self.history, self.editor.lock()) else {
            return;
        };
        // The line editor writes the file in place: never through a link put there.
        match switchboard_config::refuse_symlink(path) {
            Ok(()) => {
                // What was typed may hold secrets: the user's eyes only.
                use std::os::unix::fs::PermissionsExt as _;
                if ed.save_history(path).is_ok() {
                    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
                }
            }
            Err(e) => errln!("chat history not saved: {e}"),
        }
    }
}

async fn read_line(
    editor: Arc<std::sync::Mutex<rustyline::DefaultEditor>>,
) -> Result<Option<String>, rustyline::error::ReadlineError> {
    tokio::task::spawn_blocking(move || {
        let mut ed = editor
            .lock()
            .map_err(|_| rustyline::error::ReadlineError::Interrupted)?;
        match ed.readline("› ") {
            Ok(line) => {
                let _ = ed.add_history_entry(line.as_str());
                Ok(Some(line))
            }
            Err(rustyline::error::ReadlineError::Eof) => Ok(None),
            Err(e) => Err(e),
        }
    })
    .await
    .unwrap_or(Err(rustyline::error::ReadlineError::Interrupted))
}

/// Whether the session goes on after a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Quit,
}

async fn interactive(chat: &mut Chat, turn: &TurnSignal) -> Result<ExitCode> {
    let mut editor = LineEditor::open()?;
    // Subscribe before waiting, so that no server is missed between the banner and
    // the notifier.
    let host_events = chat.host().subscribe();
    let announced = print_banner(chat).await;
    let notifier = tokio::spawn(announce_servers(host_events, announced, editor.announcer()));
    loop {
        let line = match editor.read().await {
            Input::Line(line) => line,
            Input::Again => continue,
            Input::Quit => break,
        };
        if handle_line(chat, line.trim(), turn).await == Flow::Quit {
            break;
        }
    }
    notifier.abort();
    editor.save_history();
    Ok(ExitCode::SUCCESS)
}

/// Waits briefly for fast servers, then prints the banner: the model, the connected
/// servers, those still connecting and those that failed. Returns the servers it
/// accounted for (later ones are announced by [`announce_servers`]).
async fn print_banner(chat: &Chat) -> HashSet<String> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(800);
    while tokio::time::Instant::now() < deadline && !settled(chat.host()) {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let snapshot = chat.host().snapshot();
    let ready: Vec<String> = snapshot
        .iter()
        .filter(|s| s.status == ServerStatus::Connected)
        .map(|s| {
            if s.origin == "default" {
                format!(
                    "{} ({}; the bundled demo server, as no settings file exists)",
                    s.name,
                    crate::term::count(s.tools.len(), "tool")
                )
            } else {
                format!("{} ({})", s.name, crate::term::count(s.tools.len(), "tool"))
            }
        })
        .collect();
    let waiting: Vec<String> = snapshot
        .iter()
        .filter(|s| !is_settled(s))
        .map(|s| s.name.clone())
        .collect();
    let announced: HashSet<String> = snapshot
        .iter()
        .filter(|s| is_settled(s))
        .map(|s| s.name.clone())
        .collect();
    outln!("Switchboard chat — model {}", chat.options().model);
    outln!(
        "MCP: {}{}",
        if ready.is_empty() {
            "no servers connected".to_string()
        } else {
            ready.join(", ")
        },
        if waiting.is_empty() {
            String::new()
        } else {
            format!("; still connecting: {}", waiting.join(", "))
        }
    );
    for s in snapshot
        .iter()
        .filter(|s| s.status != ServerStatus::Connected && s.error.is_some())
    {
        outln!(
            "  {} is {}: {}",
            s.name,
            s.status,
            s.error.as_deref().unwrap_or("")
        );
    }
    outln!("/help for commands, Ctrl-D to quit.");
    announced
}

/// Tells the person, while the session runs, about servers that connect late, fail or
/// reconnect.
async fn announce_servers(
    mut events: tokio::sync::broadcast::Receiver<HostEvent>,
    mut announced: HashSet<String>,
    announcer: Announcer,
) {
    while let Ok(ev) = events.recv().await {
        match ev {
            HostEvent::Status {
                server,
                status: ServerStatus::Connected,
                ..
            } if announced.insert(server.clone()) => {
                announcer.say(&format!(
                    "[MCP server `{server}` connected; its tools join the next message]"
                ));
            }
            HostEvent::Status {
                server,
                status: ServerStatus::Disconnected,
                error: Some(e),
            } => {
                announcer.say(&format!("[MCP server `{server}`: {e}]"));
            }
            HostEvent::Reconnecting {
                server,
                attempt,
                delay,
            } => {
                announcer.say(&format!(
                    "[MCP server `{server}` dropped; reconnecting in {} s (attempt {attempt})]",
                    delay.as_secs()
                ));
            }
            _ => {}
        }
    }
}

/// Where announcements made while the session runs go: the line editor's printer on a
/// terminal (printed above the prompt, which is redrawn; straight out while no prompt
/// is shown), else stderr.
enum Announcer {
    /// Lines for the thread that owns the printer (its writes may block briefly).
    Printer(std::sync::mpsc::Sender<String>),
    Stderr,
}

impl Announcer {
    /// Prints one line; `text` is made visible here, the printer's escapes are its own.
    fn say(&self, text: &str) {
        let line = crate::term::visible(text).into_owned();
        match self {
            Self::Printer(tx) => {
                if let Err(std::sync::mpsc::SendError(line)) = tx.send(line) {
                    eprintln!("{line}");
                }
            }
            Self::Stderr => eprintln!("{line}"),
        }
    }
}

/// One line the person typed (trimmed): nothing, a slash command, or a message for a
/// turn.
async fn handle_line(chat: &mut Chat, line: &str, turn: &TurnSignal) -> Flow {
    if line.is_empty() {
        return Flow::Continue;
    }
    if let Some(flow) = slash_command(chat, line).await {
        return flow;
    }
    one_turn(chat, line, turn).await;
    Flow::Continue
}

/// The built-in slash commands (`/quit`, `/help`, `/mcp …`, `/tools`); `None` when the
/// line is not one of them (prompts as slash commands are a turn).
async fn slash_command(chat: &mut Chat, line: &str) -> Option<Flow> {
    match line {
        "/quit" | "/exit" => return Some(Flow::Quit),
        "/help" => out!("{}", help_text(chat.host())),
        "/mcp" => print_status(chat.host()),
        "/tools" => print_tools(chat),
        _ => {
            let rest = line.strip_prefix("/mcp ")?;
            mcp_command(chat, rest).await;
        }
    }
    Some(Flow::Continue)
}

/// `/tools`: the tools the model gets, by model-facing name.
fn print_tools(chat: &mut Chat) {
    chat.refresh_tools();
    for t in chat.registry().tools() {
        outln!("  {}  ({}.{})", t.name, t.server, t.tool.name);
    }
    if chat.registry().is_empty() {
        outln!("  (no tools)");
    }
}

/// `/mcp refresh [server]` and `/mcp enable|disable <server>`.
async fn mcp_command(chat: &mut Chat, rest: &str) {
    let mut words = rest.split_whitespace();
    match (words.next(), words.next()) {
        (Some("refresh"), name) => {
            let names: Vec<String> = match name {
                Some(n) => vec![n.to_string()],
                None => chat.host().server_names(),
            };
            for n in names {
                if !chat.host().restart(&n).await {
                    errln!("no server `{n}`");
                }
            }
            print_status(chat.host());
        }
        (Some(op @ ("enable" | "disable")), Some(n)) => {
            if chat.host().spec(n).is_none() {
                errln!("no server `{n}`");
            } else {
                chat.set_server_enabled(n, op == "enable");
                outln!(
                    "{} `{n}` for this session",
                    if op == "enable" {
                        "Enabled"
                    } else {
                        "Disabled"
                    }
                );
            }
        }
        _ => {
            errln!("usage: /mcp | /mcp refresh [server] | /mcp enable|disable <server>")
        }
    }
}

/// A message for the model: expanded (prompts, `@server:uri`), sent, its events shown;
/// Ctrl-C cancels it. Errors are printed and the session goes on.
async fn one_turn(chat: &mut Chat, line: &str, turn: &TurnSignal) {
    let parts = match expand_input(chat, line).await {
        Ok(Some(p)) => p,
        Ok(None) => return,
        Err(e) => {
            errln!("error: {e:#}");
            return;
        }
    };
    let cancel = turn.begin();
    let ctrl_c = cancel_on_ctrl_c(&cancel);
    if let Err(e) = run_turn(chat, parts, &cancel).await {
        if cancel.is_cancelled() {
            errln!("\n[the turn was cancelled]");
        } else {
            errln!("\nerror: {e:#}");
        }
    }
    ctrl_c.abort();
    outln!();
}
