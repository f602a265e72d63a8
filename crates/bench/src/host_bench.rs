//! `discover` and `rss`: many stdio demo servers (`switchboard demo-server`) started
//! concurrently by [`switchboard_host::Host::start`], as `switchboard mcp list` does.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use switchboard_config::{EnvPolicy, child_env};
use switchboard_host::{Host, HostOptions, ServerSpec, ServerStatus};
use switchboard_mcp::{CallOptions, StdioTarget, Target};

use crate::args::Args;
use crate::stats::{median, round3};

/// Options of the `discover` subcommand.
#[derive(Debug)]
pub struct DiscoverOpts {
    pub servers: usize,
    pub delay_ms: u64,
    pub runs: usize,
    pub switchboard: PathBuf,
}

impl DiscoverOpts {
    pub fn from_args(args: &mut Args) -> Result<Self> {
        let servers: usize = args.required("servers")?;
        let delay_ms = args.parsed_or("delay-ms", 0u64)?;
        let runs = args.parsed_or("runs", 3usize)?;
        if servers == 0 || runs == 0 {
            bail!("--servers and --runs must be at least 1");
        }
        Ok(Self {
            servers,
            delay_ms,
            runs,
            switchboard: args.switchboard_bin()?,
        })
    }
}

/// Options of the `rss` subcommand.
#[derive(Debug)]
pub struct RssOpts {
    pub servers: usize,
    pub switchboard: PathBuf,
}

impl RssOpts {
    pub fn from_args(args: &mut Args) -> Result<Self> {
        Ok(Self {
            servers: args.parsed_or("servers", 20usize)?,
            switchboard: args.switchboard_bin()?,
        })
    }
}

fn demo_specs(switchboard: &Path, count: usize, delay_ms: u64) -> Vec<ServerSpec> {
    let env = child_env(EnvPolicy::Filtered, std::env::vars(), &Default::default());
    (0..count)
        .map(|i| {
            let target = Target::Stdio(StdioTarget {
                program: switchboard.display().to_string(),
                args: vec![
                    "demo-server".into(),
                    "--startup-delay-ms".into(),
                    delay_ms.to_string(),
                ],
                env: env.clone(),
                cwd: None,
            });
            let mut spec = ServerSpec::adhoc(format!("demo{i}"), "bench", target);
            spec.trust = true;
            spec
        })
        .collect()
}

struct Started {
    host: Host,
    wall: Duration,
    connected: usize,
    errors: Vec<String>,
}

async fn start(switchboard: &Path, count: usize, delay_ms: u64) -> Started {
    let host = Host::new(
        demo_specs(switchboard, count, delay_ms),
        HostOptions::default(),
    );
    let t = Instant::now();
    host.start().await;
    let wall = t.elapsed();
    let snapshot = host.snapshot();
    let connected = snapshot
        .iter()
        .filter(|s| s.status == ServerStatus::Connected)
        .count();
    let errors = snapshot
        .iter()
        .filter_map(|s| s.error.as_ref().map(|e| format!("{}: {e}", s.name)))
        .collect();
    Started {
        host,
        wall,
        connected,
        errors,
    }
}

/// Discovery wall time over `runs` runs (each with fresh processes).
pub async fn discover(opts: DiscoverOpts) -> Result<Value> {
    let mut walls = Vec::new();
    let mut shutdowns = Vec::new();
    for _ in 0..opts.runs {
        let s = start(&opts.switchboard, opts.servers, opts.delay_ms).await;
        let t = Instant::now();
        s.host.shutdown().await;
        let shutdown = t.elapsed();
        if s.connected != opts.servers {
            bail!(
                "only {} of {} servers connected: {}",
                s.connected,
                opts.servers,
                s.errors.join("; ")
            );
        }
        walls.push(s.wall.as_secs_f64() * 1000.0);
        shutdowns.push(shutdown.as_secs_f64() * 1000.0);
    }
    Ok(json!({
        "servers": opts.servers,
        "delay_ms": opts.delay_ms,
        "runs": opts.runs,
        "wall_ms": round3(median(&walls)),
        "wall_ms_runs": walls.iter().map(|w| round3(*w)).collect::<Vec<_>>(),
        "shutdown_ms": round3(median(&shutdowns)),
    }))
}

/// Reads a `kB` field (`VmHWM`, `VmRSS`) of `/proc/self/status`.
fn status_kb(field: &str) -> Result<u64> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("cannot read /proc/self/status")?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .with_context(|| format!("no {field} in /proc/self/status"))?;
    let kb = line.trim().trim_end_matches("kB").trim();
    kb.parse()
        .with_context(|| format!("cannot parse {field}: `{line}`"))
}

/// Peak RSS of this (host) process with `servers` demo servers connected.
pub async fn rss(opts: RssOpts) -> Result<Value> {
    let before_kb = status_kb("VmHWM")?;
    let s = start(&opts.switchboard, opts.servers, 0).await;
    // Use every connection once (a tools/call echo), as a host would, before reading
    // the peak.
    let mut tools = 0usize;
    let mut calls = 0usize;
    for name in s.host.server_names() {
        if let Some(server) = s.host.server(&name) {
            tools += server.tools.len();
        }
        if let Some(conn) = s.host.connection(&name) {
            let mut args = serde_json::Map::new();
            args.insert("message".into(), Value::String("rss".into()));
            if conn
                .call_tool("echo", Some(args), &CallOptions::default())
                .await
                .is_ok()
            {
                calls += 1;
            }
        }
    }
    let hwm_kb = status_kb("VmHWM")?;
    let rss_kb = status_kb("VmRSS")?;
    s.host.shutdown().await;
    if s.connected != opts.servers {
        bail!(
            "only {} of {} servers connected: {}",
            s.connected,
            opts.servers,
            s.errors.join("; ")
        );
    }
    Ok(json!({
        "servers": opts.servers,
        "connected": s.connected,
        "tools": tools,
        "echo_calls": calls,
        "vm_hwm_before_kb": before_kb,
        "vm_hwm_kb": hwm_kb,
        "vm_rss_kb": rss_kb,
        "vm_hwm_mb": round3(hwm_kb as f64 / 1024.0),
    }))
}
