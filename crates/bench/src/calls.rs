//! `calls`: sequential `tools/call echo` through Switchboard's client
//! ([`switchboard_mcp::Connection`]), one call in flight at a time, timing each call.
//!
//! The loop is the same in `bench/peers/ts_client.mjs` and `bench/peers/py_client.py`:
//! connect (not timed), `warmup` untimed calls, then `n` timed calls; `calls_per_s` is
//! `n` over the wall time of the timed loop, p50/p99 are nearest-rank percentiles of the
//! per-call latencies.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use switchboard_config::{EnvPolicy, child_env};
use switchboard_mcp::{CallOptions, ConnectOptions, Connection, StdioTarget, Target};

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
            switchboard,
            peers,
        })
    }

    fn target(&self) -> Result<Target> {
        if let Some(url) = &self.url {
            return Ok(Target::Http {
                url: url.clone(),
                headers: Vec::new(),
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

async fn echo(conn: &Connection, opts: &CallOptions, i: usize) -> Result<()> {
    let mut args = serde_json::Map::new();
    args.insert("message".into(), Value::String(format!("hello {i}")));
    let result = conn
        .call_tool("echo", Some(args), opts)
        .await
        .with_context(|| format!("call {i} failed"))?;
    if result.is_error == Some(true) {
        bail!("call {i}: the echo tool reported an error: {result:?}");
    }
    Ok(())
}

/// Runs the benchmark and returns its JSON summary.
pub async fn run(opts: CallsOpts) -> Result<Value> {
    let target = opts.target()?;
    let display = target.display();
    let conn = Connection::connect(ConnectOptions::new("bench", target))
        .await
        .with_context(|| format!("cannot connect to {display}"))?;
    let call_opts = CallOptions::default();
    let outcome = async {
        for i in 0..opts.warmup {
            echo(&conn, &call_opts, i).await?;
        }
        let mut latencies = Vec::with_capacity(opts.n);
        let start = Instant::now();
        for i in 0..opts.n {
            let t = Instant::now();
            echo(&conn, &call_opts, i).await?;
            latencies.push(t.elapsed());
        }
        anyhow::Ok((start.elapsed(), latencies))
    }
    .await;
    conn.close(Duration::from_millis(500)).await;
    let (total, mut latencies) = outcome?;
    latencies.sort();
    Ok(json!({
        "client": "switchboard",
        "transport": match opts.transport { Transport::Stdio => "stdio", Transport::Http => "http" },
        "target": match opts.server { Server::Everything => "everything", Server::Demo => "demo" },
        "n": opts.n,
        "calls_per_s": round3(opts.n as f64 / total.as_secs_f64()),
        "p50_ms": round3(percentile_ms(&latencies, 50.0)),
        "p99_ms": round3(percentile_ms(&latencies, 99.0)),
    }))
}
