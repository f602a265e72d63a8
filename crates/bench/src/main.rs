//! `switchboard-bench`: benchmarks for Switchboard's MCP client and host. These are
//! measurements, not timed tests: they print JSON and never fail on a slow number.
//!
//! ```text
//! switchboard-bench calls --transport stdio|http --target everything|demo [--n 1000]
//!                         [--warmup 50] [--url URL] [--token T] [--session true] [--tool echo]
//!                         [--concurrency C] [--conc-n 4000] [--switchboard PATH] [--peers DIR]
//! switchboard-bench discover --servers N --delay-ms D [--runs 3] [--switchboard PATH]
//! switchboard-bench rss [--servers 20] [--switchboard PATH]
//! switchboard-bench registry [--tools 1000] [--servers 20] [--iterations 200]
//! switchboard-bench chat-turn [--tools 100] [--calls 3] [--sessions 200] [--session-turns 3]
//!                             [--model in-process|fake-http|both] [--stream true|false|both]
//! switchboard-bench team [--users 200] [--rounds 10] [--instances 1,2] [--switchboard PATH]
//!                        [--demo PATH]
//! switchboard-bench relay [--event-loop] -- PROGRAM [ARGS...]
//! (every measuring subcommand also takes --runtime multi|current)
//! ```
//!
//! `bench/run.sh` runs all of them (and the TS / Python peer clients) and writes
//! `BENCHMARKS.md`.

mod args;
mod calls;
mod chat_bench;
mod host_bench;
mod relay;
mod stats;
mod team_bench;

use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::args::{Args, Flavor};

const USAGE: &str = "\
usage:
  switchboard-bench calls --transport stdio|http --target everything|demo [--n 1000]
                          [--warmup 50] [--url URL] [--token T] [--session true] [--tool echo]
                          [--concurrency C] [--conc-n 4000] [--switchboard PATH] [--peers DIR]
      sequential tools/call `echo`; prints {calls_per_s, p50_ms, p99_ms, ...}; with
      --concurrency C, then --conc-n calls with C in flight (\"conc\": {...})
      (stdio spawns the server: server-everything via node, or `switchboard demo-server`;
      http needs --url of a running server; --token is sent as a bearer token;
      --session true skips the 2026-07-28 probe for the initialize handshake)
  switchboard-bench discover --servers N --delay-ms D [--runs 3] [--switchboard PATH]
      N stdio demo servers (`switchboard demo-server --startup-delay-ms D`) started
      concurrently by Host::start(); prints the wall time of each run and the median
  switchboard-bench rss [--servers 20] [--switchboard PATH]
      peak RSS (VmHWM) of this host process with N demo servers connected
  switchboard-bench registry [--tools 1000] [--servers 20] [--iterations 200] [--warmup 20]
                             [--cap 128] [--fixtures DIR]
      ToolRegistry::new over N corpus tools + declarations(cap) + declarations(MAX), steady
      state (schemas normalized once, cached); also the cold first build and re-listed tools
  switchboard-bench chat-turn [--tools 100] [--calls 3] [--sessions 200] [--session-turns 3]
                              [--warmup 10] [--synthetic-servers 3]
                              [--model in-process|fake-http|both]
                              [--stream true|false|both] [--switchboard PATH] [--fixtures DIR]
      host overhead of one chat turn (demo server + synthetic stdio servers, a model
      answering at once): turn time minus model time minus tool-call time, for the
      first turn of a conversation and for the later ones
  switchboard-bench team [--users 200] [--rounds 10] [--warmup-rounds 1] [--instances 1,2]
                         [--sign-in-concurrency 8] [--switchboard PATH] [--demo PATH]
      N users signed in through the real OpenID provider, each listing the demo server's
      tools and calling `echo` through `serve --team` (1 instance, then 2 on one
      PostgreSQL, round-robin); prints requests/s, p50/p99, errors, peak RSS per instance

  switchboard-bench relay [--event-loop] -- PROGRAM [ARGS...]
      not a measurement: spawns PROGRAM and copies stdin/stdout to and from it, one
      blocked thread per direction (the gateway benchmark's floor for a process hop);
      --event-loop: one task on a current-thread tokio runtime instead, both directions
      on its reactor (the floor for a process that waits as the gateway does)

  --switchboard defaults to the `switchboard` binary next to this one; --peers to
  the repository's tests/peers; --runtime multi|current picks the tokio runtime
  (default multi, as the `switchboard` CLI uses).";

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    let Some(command) = argv.next() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    if command == "-h" || command == "--help" {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    if command == "relay" {
        // Not a measurement itself: a process for the gateway benchmark to measure.
        let mut argv: Vec<String> = argv.collect();
        let event_loop = argv.first().is_some_and(|a| a == "--event-loop");
        if event_loop {
            argv.remove(0);
        }
        let argv: Vec<String> = argv.into_iter().skip_while(|a| a == "--").collect();
        return if event_loop {
            relay::run_event_loop(&argv)
        } else {
            relay::run(&argv)
        };
    }
    let mut args = match Args::parse(argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("switchboard-bench: {e:#}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match args.runtime() {
        Ok(Flavor::Multi) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
        Ok(Flavor::Current) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Err(e) => {
            eprintln!("switchboard-bench: {e:#}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchboard-bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Run the benchmark as a task, as a host's work runs (on a worker thread of the
    // multi-thread runtime), not on the thread blocked in `block_on`.
    let task = runtime.spawn(async move { run(&command, args).await });
    let result = match runtime.block_on(task) {
        Ok(r) => r,
        Err(e) => Err(anyhow::anyhow!("the benchmark task failed: {e}")),
    };
    match result {
        Ok(value) => {
            println!("{value}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("switchboard-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: &str, mut args: Args) -> Result<serde_json::Value> {
    let value = match command {
        "calls" => {
            let opts = calls::CallsOpts::from_args(&mut args)?;
            args.finish()?;
            calls::run(opts).await?
        }
        "discover" => {
            let opts = host_bench::DiscoverOpts::from_args(&mut args)?;
            args.finish()?;
            host_bench::discover(opts).await?
        }
        "rss" => {
            let opts = host_bench::RssOpts::from_args(&mut args)?;
            args.finish()?;
            host_bench::rss(opts).await?
        }
        "registry" => {
            let opts = chat_bench::RegistryOpts::from_args(&mut args)?;
            args.finish()?;
            chat_bench::registry(opts)?
        }
        "team" => {
            let opts = team_bench::TeamOpts::from_args(&mut args)?;
            args.finish()?;
            team_bench::run(opts).await?
        }
        "chat-turn" => {
            let opts = chat_bench::ChatTurnOpts::from_args(&mut args)?;
            args.finish()?;
            chat_bench::chat_turn(opts).await?
        }
        // Internal: the synthetic stdio MCP server `chat-turn` spawns (never returns).
        "tool-server" => {
            let opts = chat_bench::ToolServerOpts::from_args(&mut args)?;
            args.finish()?;
            chat_bench::tool_server(opts).await?;
            bail!("tool-server returned")
        }
        other => bail!("unknown subcommand `{other}`"),
    };
    Ok(value)
}
