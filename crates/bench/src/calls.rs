//! `calls`: `tools/call echo` through Switchboard's client
//! ([`switchboard_mcp::Connection`]), one call in flight at a time, timing each call;
//! with `--concurrency C`, then `--conc-n` more calls with C in flight.
//!
//! The sequential loop is the same in `bench/peers/ts_client.mjs` and
//! `bench/peers/py_client.py`: connect (not timed), `warmup` untimed calls, then `n` timed
//! calls; `calls_per_s` is `n` over the wall time of the timed loop, p50/p99 are
//! nearest-rank percentiles of the per-call latencies. The in-flight phase is the one of
//! `bench/peers/ts_gateway_client.mjs`, so a gateway or proxy can be driven by a client
//! that is not itself the bottleneck (the Node client's HTTP stack caps at a few hundred
//! calls/s on this machine).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use switchboard_config::{EnvPolicy, child_env};
use switchboard_mcp::{
    CallOptions, ConnectOptions, Connection, StdioTarget, Target, TransportKind,
};

use crate::args::Args;
use crate::stats::{percentile_ms, round3};

/// Which transport to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Stdio,
    Http,
}

/// Which server to call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// `@modelcontextprotocol/server-everything` (Node, TS SDK).
    Everything,
    /// Switchboard's demo server (rmcp).
    Demo,
}

/// Options of the `calls` subcommand.
#[derive(Debug)]
pub struct CallsOpts {
    pub transport: Transport,
    pub server: Server,
    pub n: usize,
    pub warmup: usize,
    pub url: Option<String>,
    /// Sent as `Authorization: Bearer …` (an HTTP gateway's token).
    pub token: Option<String>,
    /// HTTP only: skip the stateless 2026-07-28 probe and use the `initialize` handshake
    /// with a session, as the TS SDK 1.x client does (`--session true`), so proxies that
    /// serve 2026-07-28 differently are compared on the protocol the Node client speaks.
    pub session: bool,
    /// The tool called (`echo`; a gateway names it `demo__echo`).
    pub tool: String,
    /// Calls in flight in the second phase (0: no second phase).
    pub concurrency: usize,
    /// Calls of the second phase.
    pub conc_n: usize,
    pub switchboard: Option<PathBuf>,
    pub peers: PathBuf,
}

impl CallsOpts {
    pub fn from_args(args: &mut Args) -> Result<Self> {
        let transport = match args.required::<String>("transport")?.as_str() {
            "stdio" => Transport::Stdio,
            "http" => Transport::Http,
            other => bail!("--transport: expected stdio or http, got `{other}`"),
        };
        let server = match args.required::<String>("target")?.as_str() {
            "everything" => Server::Everything,
            "demo" => Server::Demo,
            other => bail!("--target: expected everything or demo, got `{other}`"),
        };
        let n = args.parsed_or("n", 1000usize)?;
        if n == 0 {
            bail!("--n must be at least 1");
        }
        let warmup = args.parsed_or("warmup", 50usize)?;
        let url = args.take("url");
        if transport == Transport::Http && url.is_none() {
            bail!("--transport http needs --url http://127.0.0.1:PORT/mcp");
        }
        let token = args.take("token");
        if token.is_some() && url.is_none() {
            bail!("--token is sent over HTTP only: give --url too");
        }
        let session = args.parsed_or("session", false)?;
        if session && url.is_none() {
            bail!("--session is about HTTP: give --url too");
        }
        let tool = args.take("tool").unwrap_or_else(|| "echo".to_owned());
        let concurrency = args.parsed_or("concurrency", 0usize)?;
        let conc_n = args.parsed_or("conc-n", 4000usize)?;
        if concurrency > 0 && conc_n < concurrency {
            bail!("--conc-n ({conc_n}) must be at least --concurrency ({concurrency})");
        }
        let switchboard = if transport == Transport::Stdio && server == Server::Demo {
            Some(args.switchboard_bin()?)
        } else {
            // Accepted (so scripts can always pass it) but not needed.
            args.take("switchboard").map(PathBuf::from)
        };
        let peers = args.peers_dir();
        Ok(Self {
            transport,
            server,
            n,
            warmup,
            url,
            token,
            session,
            tool,
            concurrency,
            conc_n,
            switchboard,
            peers,
        })
    }

    fn target(&self) -> Result<Target> {
        if let Some(url) = &self.url {
            let headers = self
                .token
                .iter()
                .map(|t| ("Authorization".to_owned(), format!("Bearer {t}")))
                .collect();
            return Ok(Target::Http {
                url: url.clone(),
                headers,
            });
        }
        let env = child_env(EnvPolicy::Filtered, std::env::vars(), &Default::default());
        let (program, args) = match self.server {
            Server::Everything => {
                let script = everything_script(&self.peers);
                if !script.is_file() {
                    bail!(
                        "{} does not exist: run scripts/install-peers.sh",
                        script.display()
                    );
                }
                (
                    "node".to_owned(),
                    vec![script.display().to_string(), "stdio".to_owned()],
                )
            }
            Server::Demo => {
                let bin = self
                    .switchboard
                    .clone()
                    .context("no switchboard binary for the demo server")?;
                (bin.display().to_string(), vec!["demo-server".to_owned()])
            }
        };
        Ok(Target::Stdio(StdioTarget {
            program,
            args,
            env,
            cwd: None,
        }))
    }
}

/// server-everything's entry point inside the installed peers.
pub fn everything_script(peers: &std::path::Path) -> PathBuf {
    peers
        .join("node")
        .join("node_modules")
        .join("@modelcontextprotocol")
        .join("server-everything")
        .join("dist")
        .join("index.js")
}

async fn echo(conn: &Connection, tool: &str, opts: &CallOptions, i: usize) -> Result<()> {
    let mut args = serde_json::Map::new();
    args.insert("message".into(), Value::String(format!("hello {i}")));
    let result = conn
        .call_tool(tool, Some(args), opts)
        .await
        .with_context(|| format!("call {i} failed"))?;
    if result.is_error == Some(true) {
        bail!("call {i}: the echo tool reported an error: {result:?}");
    }
    Ok(())
}

/// `n` calls with `concurrency` in flight: the wall time and each call's latency.
async fn in_flight(
    conn: &Connection,
    tool: &str,
    opts: &CallOptions,
    concurrency: usize,
    n: usize,
) -> Result<(Duration, Vec<Duration>)> {
    use futures::stream::{self, StreamExt, TryStreamExt};
    let start = Instant::now();
    let latencies = stream::iter(0..n)
        .map(|i| async move {
            let t = Instant::now();
            echo(conn, tool, opts, i).await?;
            anyhow::Ok(t.elapsed())
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    Ok((start.elapsed(), latencies))
}

/// Runs the benchmark and returns its JSON summary.
pub async fn run(opts: CallsOpts) -> Result<Value> {
    let target = opts.target()?;
    let display = target.display();
    let mut connect = ConnectOptions::new("bench", target);
    if opts.session {
        connect.transport_hint = Some(TransportKind::StreamableHttp);
    }
    let conn = Connection::connect(connect)
        .await
        .with_context(|| format!("cannot connect to {display}"))?;
    let call_opts = CallOptions::default();
    let outcome = async {
        for i in 0..opts.warmup {
            echo(&conn, &opts.tool, &call_opts, i).await?;
        }
        let mut latencies = Vec::with_capacity(opts.n);
        let start = Instant::now();
        for i in 0..opts.n {
            let t = Instant::now();
            echo(&conn, &opts.tool, &call_opts, i).await?;
            latencies.push(t.elapsed());
        }
        let seq = (start.elapsed(), latencies);
        let conc = if opts.concurrency > 0 {
            Some(in_flight(&conn, &opts.tool, &call_opts, opts.concurrency, opts.conc_n).await?)
        } else {
            None
        };
        anyhow::Ok((seq, conc))
    }
    .await;
    conn.close(Duration::from_millis(500)).await;
    let ((total, mut latencies), conc) = outcome?;
    latencies.sort();
    let conc = conc.map(|(total, mut latencies)| {
        latencies.sort();
        json!({
            "n": opts.conc_n,
            "concurrency": opts.concurrency,
            "calls_per_s": round3(opts.conc_n as f64 / total.as_secs_f64()),
            "p50_ms": round3(percentile_ms(&latencies, 50.0)),
            "p99_ms": round3(percentile_ms(&latencies, 99.0)),
        })
    });
    Ok(json!({
        "protocol": conn.protocol_version().map(|v| v.as_str().to_owned()),
        "conc": conc,
        "client": "switchboard",
        "transport": match opts.transport { Transport::Stdio => "stdio", Transport::Http => "http" },
        "target": match opts.server { Server::Everything => "everything", Server::Demo => "demo" },
        "n": opts.n,
        "calls_per_s": round3(opts.n as f64 / total.as_secs_f64()),
        "p50_ms": round3(percentile_ms(&latencies, 50.0)),
        "p99_ms": round3(percentile_ms(&latencies, 99.0)),
    }))
}
