//! `switchboard`: an MCP host on the command line.
//!
//! `switchboard mcp list` shows every configured server with its status and what it
//! offers; `mcp call/read/prompt` use one server (or an ad-hoc URL or `--stdio`
//! command); `mcp add/remove/get/enable/disable/import` and `trust` edit settings; `mcp search`
//! and `mcp add --from-registry` use the MCP Registry; `mcp pins` shows and accepts
//! changed tool definitions; `db migrate`
//! and `db reencrypt` look after team mode's database.

#[macro_use]
mod term;
mod auth_cmd;
mod call;
mod chat;
mod color;
mod complete;
mod ctx;
mod db;
mod edit;
mod gateway;
mod globals;
mod hooks;
mod import;
mod list;
mod logging;
mod pins;
mod progress;
mod registry;
mod render;
mod run;
mod run_log;
mod sampling;
mod serve;
mod team;
mod tokens;
mod tool_names;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "switchboard", version, about = "Connect an assistant to your MCP servers", long_about = None)]
struct Cli {
    #[command(flatten)]
    globals: globals::GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Manage and use MCP servers.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Talk to Gemini with your MCP servers' tools (`-p` for one prompt).
    Chat(chat::ChatArgs),
    /// Run a workflow (GemiHub's YAML format) against your MCP servers.
    ///
    /// A workflow may always use the bundled demo server as `demo` (as
    /// `examples/*.yaml` do), unless one of your servers is named `demo`.
    Run(run::RunArgs),
    /// Start the web app: MCP server settings with Test, tool explorer, MCP Apps, chat.
    Serve(serve::ServeArgs),
    /// Serve every configured server as one MCP server (stdio, or --http).
    Gateway(gateway::GatewayArgs),
    /// Team mode's database: `db migrate`, `db reencrypt`.
    #[command(subcommand)]
    Db(db::DbCommand),
    /// Trust a folder, so that its `.switchboard/settings.json` applies (until then a
    /// project's settings are ignored: no server from it starts, no policy applies).
    Trust {
        /// The folder (default: the current directory).
        path: Option<PathBuf>,
        /// Stop trusting the folder.
        #[arg(long)]
        revoke: bool,
        /// List the trusted folders.
        #[arg(long, conflicts_with_all = ["revoke", "path"])]
        list: bool,
    },
    /// Print a shell completion script: `source <(switchboard completions bash)`.
    /// It completes subcommands, flags, server names and workflow files.
    Completions {
        /// bash, zsh, fish, powershell or elvish.
        shell: clap_complete::Shell,
        /// A self-contained script (subcommands and flags, no server names) instead of
        /// one that asks `switchboard` for each completion.
        #[arg(long = "static")]
        static_script: bool,
    },
    /// Explain whether a URL may be contacted under the URL policy, and why.
    UrlCheck {
        url: String,
        #[arg(long)]
        json: bool,
    },
    /// Run the bundled demo MCP server on stdio (used as the default server).
    #[command(hide = true, name = "demo-server")]
    DemoServer {
        #[arg(long, default_value_t = 0)]
        startup_delay_ms: u64,
    },
}

#[derive(Debug, Args, Clone, Default)]
pub struct TargetArgs {
    /// Connect to this command line over stdio instead of a configured server.
    #[arg(long, value_name = "COMMAND LINE")]
    stdio: Option<String>,
    /// Force the transport for a URL target: http or sse.
    #[arg(long, value_name = "http|sse")]
    transport: Option<String>,
}

#[derive(Debug, Subcommand)]
enum McpCommand {
    /// Show every server: status, transport, tools, prompts, resources, errors.
    ///
    /// Servers of this folder's .switchboard/settings.json are listed as ignored while
    /// the folder is not trusted (`switchboard trust`); they do not start.
    List {
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Add a server to settings (or from the MCP Registry with --from-registry).
    #[command(
        override_usage = "switchboard mcp add [OPTIONS] <NAME> <COMMAND_OR_URL> [-- <ARGS>...]\n       \
        switchboard mcp add [OPTIONS] <NAME> -- <COMMAND> [ARGS]...\n       \
        switchboard mcp add [OPTIONS] <NAME> --from-registry <ID[@VERSION]>"
    )]
    Add(edit::AddArgs),
    /// Search the MCP Registry for servers (only active ones are listed).
    Search(registry::SearchArgs),
    /// Import servers from another host: Claude Desktop, Claude Code, VS Code, Cursor,
    /// Codex, Gemini CLI, Windsurf, or a file.
    Import(import::ImportArgs),
    /// Remove a server from settings.
    Remove {
        #[arg(add = complete::server_names())]
        name: String,
        /// Which settings file: project or user (default: the one that defines it).
        #[arg(long, short)]
        scope: Option<String>,
    },
    /// Show one server's settings (secrets masked) and the environment it will get.
    Get {
        #[arg(add = complete::server_names())]
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Enable a server.
    Enable {
        #[arg(add = complete::server_names())]
        name: String,
        /// Which settings file: project or user (default: the one that defines it).
        #[arg(long, short)]
        scope: Option<String>,
    },
    /// Disable a server (kept in settings, not started).
    Disable {
        #[arg(add = complete::server_names())]
        name: String,
        /// Which settings file: project or user (default: the one that defines it).
        #[arg(long, short)]
        scope: Option<String>,
    },
    /// Call a tool: `mcp call <server|URL> <tool> [--args JSON | key=value…]`.
    ///
    /// `demo` is the bundled demo server (`mcp call demo echo message=hi`), listed by
    /// `mcp list` only while no settings file exists but usable by name (here, in
    /// `mcp read/prompt` and in workflows) unless one of your servers is named `demo`.
    Call {
        /// `<server|URL> <tool> [key=value…]`, or `<tool> [key=value…]` with --stdio.
        /// Values are typed by the tool's input schema.
        #[arg(required = true, num_args = 1.., value_name = "SERVER TOOL KEY=VALUE", add = complete::server_then_tool())]
        positional: Vec<String>,
        /// Arguments as a JSON object.
        #[arg(long, value_name = "JSON")]
        args: Option<String>,
        /// Print the raw result as JSON.
        #[arg(long)]
        json: bool,
        /// Request timeout in milliseconds (default: the server's `timeout`).
        #[arg(long, value_name = "MS")]
        timeout: Option<u64>,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Read a resource: `mcp read <server|URL> <uri>`.
    Read {
        #[arg(required = true, num_args = 1..=2, add = complete::server_first())]
        positional: Vec<String>,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Get a prompt: `mcp prompt <server|URL> <name> [--arg=value…]`.
    Prompt {
        /// `<server|URL> <name> [arg=value…]`; `--arg=value` forms go after `--`.
        #[arg(required = true, num_args = 1.., value_name = "SERVER NAME ARG=VALUE", add = complete::server_first())]
        positional: Vec<String>,
        #[arg(last = true)]
        kv: Vec<String>,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Log in to a server with OAuth (opens a browser; machine grants need none).
    Login(auth_cmd::LoginArgs),
    /// Forget a server's saved OAuth login.
    Logout {
        #[arg(add = complete::server_names())]
        server: String,
    },
    /// Pinned tools and changes waiting to be accepted (a diff for each);
    /// `mcp pins accept SERVER TOOL|--all` accepts.
    Pins(pins::PinsArgs),
    /// Show the OAuth state of every HTTP server (and which ones need a login).
    Auth {
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    // A shell asking for completions (`COMPLETE=bash switchboard -- …`) is answered here
    // and the process exits.
    if complete::requested() {
        clap_complete::CompleteEnv::with_factory(Cli::command)
            .var(complete::COMPLETE_VAR)
            .complete();
    }
    let color = color::ColorChoice::from_args(std::env::args_os());
    let matches = Cli::command().color(color.for_clap()).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.format(&mut Cli::command().color(color.for_clap())).exit(),
    };
    match &cli.command {
        Command::DemoServer { startup_delay_ms } => return globals::run_demo(*startup_delay_ms),
        Command::Completions {
            shell,
            static_script,
        } => return complete::print(*shell, *static_script, Cli::command()),
        _ => {}
    }
    cli.globals.init_logging();
    if let Command::Gateway(args) = cli.command {
        return gateway::main(cli.globals.globals(), args);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .worker_threads(2)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            error_line(&format!("error: cannot start the async runtime: {e}"));
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(run(cli.command, cli.globals.globals()));
    // Do not wait for stray tasks (servers are already stopped by then).
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match result {
        Ok(code) => code,
        Err(e) => {
            error_line(&globals::error_text(&e));
            ExitCode::from(1)
        }
    }
}

use globals::error_line;

async fn run(command: Command, g: ctx::Globals) -> anyhow::Result<ExitCode> {
    match command {
        Command::Mcp(cmd) => match cmd {
            McpCommand::List { json } => list::run(&g, json).await,
            McpCommand::Login(args) => auth_cmd::login(&g, args).await,
            McpCommand::Logout { server } => auth_cmd::logout(&g, &server).await,
            McpCommand::Auth { json } => auth_cmd::auth(&g, json).await,
            McpCommand::Pins(args) => pins::run(&g, args).await,
            McpCommand::Add(args) if args.from_registry.is_some() => registry::add(&g, args).await,
            McpCommand::Add(args) => edit::add(&g, args),
            McpCommand::Search(args) => registry::search(&g, args).await,
            McpCommand::Import(args) => import::run(&g, args),
            McpCommand::Remove { name, scope } => edit::remove(&g, &name, scope.as_deref()),
            McpCommand::Get { name, json } => edit::get(&g, &name, json),
            McpCommand::Enable { name, scope } => {
                edit::set_enabled(&g, &name, scope.as_deref(), true)
            }
            McpCommand::Disable { name, scope } => {
                edit::set_enabled(&g, &name, scope.as_deref(), false)
            }
            McpCommand::Call {
                positional,
                args,
                json,
                timeout,
                target,
            } => {
                call::call(
                    &g,
                    call::CallArgs {
                        positional,
                        args,
                        json,
                        timeout_ms: timeout,
                        adhoc: adhoc(&target),
                    },
                )
                .await
            }
            McpCommand::Read {
                positional,
                json,
                target,
            } => call::read(&g, positional, json, adhoc(&target)).await,
            McpCommand::Prompt {
                positional,
                kv,
                json,
                target,
            } => call::prompt(&g, positional, kv, json, adhoc(&target)).await,
        },
        Command::Trust { path, revoke, list } => edit::trust(path, revoke, list),
        Command::Serve(args) => serve::run(&g, args).await,
        Command::Db(cmd) => db::run(cmd).await,
        Command::Chat(args) => chat::run(&g, args).await,
        Command::Run(args) => run::run(&g, args).await,
        Command::UrlCheck { url, json } => url_check(&g, &url, json).await,
        // Answered in `main` before the runtime starts.
        Command::DemoServer { .. } | Command::Completions { .. } | Command::Gateway(_) => {
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn adhoc(t: &TargetArgs) -> ctx::AdHoc {
    ctx::AdHoc {
        stdio: t.stdio.clone(),
        transport: t.transport.clone(),
    }
}

async fn url_check(g: &ctx::Globals, url: &str, json: bool) -> anyhow::Result<ExitCode> {
    let settings = ctx::load_settings(g).ok();
    let policy = ctx::url_policy(g, settings.as_ref())?;
    let verdict = switchboard_net::explain(url, policy).await;
    if json {
        println!("{}", serde_json::to_string_pretty(&verdict)?);
    } else {
        outln!("{verdict}");
    }
    Ok(if verdict.allowed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
