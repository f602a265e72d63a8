//! `switchboard-gateway`: `switchboard gateway` as its own lean executable. It takes
//! exactly the same flags and settings (the same clap definitions: `GlobalArgs` and
//! `GatewayArgs`, and the same code: `gateway::main`), but links only what the gateway
//! needs (settings, the host, OAuth tokens, the demo server), not the web app, the
//! team store, chat, models or workflows: fewer executable pages touched, so a
//! smaller resident set for a process that may run once per MCP client.
//!
//! `tests/gateway_lean.rs` checks both: the binary's symbols (no web, store, chat or
//! workflow code) and that its flags equal `switchboard gateway`'s.
//!
//! Must not: grow commands of its own. Anything but the gateway belongs in
//! `switchboard`; the hidden `demo-server` is there because the default server (no
//! settings file) is this very executable run as `demo-server`.

// The modules it shares with `switchboard`, which uses the rest of what they hold.
#[macro_use]
#[allow(dead_code, unused_macros)]
mod term;
#[allow(dead_code)]
mod color;
#[allow(dead_code)]
mod ctx;
mod gateway;
mod globals;
#[allow(dead_code)]
mod logging;
mod tokens;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "switchboard-gateway",
    version,
    about = "Serve every configured MCP server as one MCP server (stdio, or --http); the same as `switchboard gateway`",
    long_about = None,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(flatten)]
    globals: globals::GlobalArgs,
    #[command(flatten)]
    gateway: gateway::GatewayArgs,
    #[command(subcommand)]
    internal: Option<Internal>,
}

#[derive(Debug, Subcommand)]
enum Internal {
    /// Run the bundled demo MCP server on stdio (used as the default server).
    #[command(hide = true, name = "demo-server")]
    DemoServer {
        #[arg(long, default_value_t = 0)]
        startup_delay_ms: u64,
    },
}

fn main() -> ExitCode {
    let color = color::ColorChoice::from_args(std::env::args_os());
    let matches = Cli::command().color(color.for_clap()).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.format(&mut Cli::command().color(color.for_clap())).exit(),
    };
    if let Some(Internal::DemoServer { startup_delay_ms }) = cli.internal {
        return globals::run_demo(startup_delay_ms);
    }
    cli.globals.init_logging();
    gateway::main(cli.globals.globals(), cli.gateway)
}
