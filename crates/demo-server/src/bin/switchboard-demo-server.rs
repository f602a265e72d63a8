//! `switchboard-demo-server`: run the bundled demo MCP server.
//!
//! ```text
//! switchboard-demo-server [stdio|http] [--port P] [--host 127.0.0.1] [--startup-delay-ms N]
//! ```
//!
//! Logs go to stderr only (stdout is the protocol channel in stdio mode);
//! `RUST_LOG` sets the filter (default `warn`).

use std::{net::IpAddr, process::ExitCode, time::Duration};

use switchboard_demo_server::{DemoOptions, serve_http, serve_stdio};

const USAGE: &str = "\
usage: switchboard-demo-server [stdio|http] [--port P] [--host ADDR] [--startup-delay-ms N]

  stdio               serve MCP on stdin/stdout (default)
  http                serve MCP over Streamable HTTP at http://HOST:PORT/mcp
  --port P            HTTP port (default 0: any free port)
  --host ADDR         HTTP bind address (default 127.0.0.1)
  --startup-delay-ms  wait N ms before answering initialize (default 0)";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Stdio,
    Http,
}

#[derive(Debug)]
struct Args {
    mode: Mode,
    host: IpAddr,
    port: u16,
    startup_delay: Duration,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut parsed = Args {
        mode: Mode::Stdio,
        host: IpAddr::from([127, 0, 0, 1]),
        port: 0,
        startup_delay: Duration::ZERO,
    };
    let mut mode_seen = false;
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "stdio" | "http" if !mode_seen => {
                mode_seen = true;
                parsed.mode = if flag == "http" {
                    Mode::Http
                } else {
                    Mode::Stdio
                };
            }
            "--port" => {
                let v = value("--port")?;
                parsed.port = v
                    .parse()
                    .map_err(|_| format!("--port: not a port number: {v}"))?;
            }
            "--host" => {
                let v = value("--host")?;
                parsed.host = v
                    .parse()
                    .map_err(|_| format!("--host: not an IP address: {v}"))?;
            }
            "--startup-delay-ms" => {
                let v = value("--startup-delay-ms")?;
                let ms: u64 = v
                    .parse()
                    .map_err(|_| format!("--startup-delay-ms: not a whole number: {v}"))?;
                parsed.startup_delay = Duration::from_millis(ms);
            }
            other => return Err(format!("unexpected argument: {other}")),
        }
    }
    Ok(Some(parsed))
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

async fn run(args: Args) -> Result<(), String> {
    let opts = DemoOptions::default().with_startup_delay(args.startup_delay);
    match args.mode {
        Mode::Stdio => serve_stdio(opts).await.map_err(|e| e.to_string()),
        Mode::Http => {
            let listener = tokio::net::TcpListener::bind((args.host, args.port))
                .await
                .map_err(|e| format!("cannot bind {}:{}: {e}", args.host, args.port))?;
            let addr = listener.local_addr().map_err(|e| e.to_string())?;
            eprintln!("listening on http://{addr}/mcp");
            tokio::select! {
                result = serve_http(listener, opts) => result.map_err(|e| e.to_string()),
                signal = tokio::signal::ctrl_c() => signal.map_err(|e| e.to_string()),
            }
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            eprintln!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("switchboard-demo-server: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    init_logging();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("switchboard-demo-server: {message}");
            ExitCode::FAILURE
        }
    }
}
