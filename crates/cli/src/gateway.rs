//! `switchboard gateway`: every configured server as one MCP server, over stdio (for
//! clients that spawn it) or Streamable HTTP with `--http` (behind a bearer token).
//! Wires settings, the URL guard and OAuth tokens into a `Host` and hands it to
//! `switchboard-gateway`; nothing but MCP is written to stdout in stdio mode. The host
//! judges tools by the same pin store as every other command (`ctx::pin_store`:
//! `$SWITCHBOARD_HOME/pins.json`), so a tool changed or renamed since it was pinned is
//! withheld from the gateway's clients until `switchboard mcp pins accept`.
//!
//! The `--http` token comes from `--token-file` (its first line; the file is refused
//! when group or others may read it, [`read_private_file`]) or
//! `SWITCHBOARD_GATEWAY_TOKEN`, at least 16 characters; with neither, one is generated
//! and printed on stderr, but only on a loopback bind: beyond loopback the gateway
//! refuses to start without a configured token. Over stdio it runs on a current-thread
//! runtime beside the reader threads of its stdin and of each stdio server (measured:
//! less CPU per call and lower latency than two workers); `--http` uses two workers.
//! `--wait-ms` (default 5000) is how long the first answers wait for servers.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use switchboard_gateway::{
    Audit, CatalogOptions, Gateway, GatewayHooks, GatewayOptions, HttpOptions, MCP_PATH,
    generate_token, serve_http,
};
use switchboard_host::{Host, HostOptions};

use crate::ctx::{self, Globals};
use crate::globals::{error_line, error_text};

/// The environment variable that may hold the HTTP gateway's token.
pub const TOKEN_ENV: &str = "SWITCHBOARD_GATEWAY_TOKEN";

#[derive(Debug, clap::Args)]
pub struct GatewayArgs {
    /// Serve Streamable HTTP (at /mcp, with sessions) instead of stdio.
    #[arg(long)]
    pub http: bool,
    /// Port for --http (0 picks a free one).
    #[arg(long, default_value_t = 8766, requires = "http")]
    pub port: u16,
    /// Address for --http. Beyond loopback a token must be configured (--token-file or
    /// SWITCHBOARD_GATEWAY_TOKEN); a generated one is refused.
    #[arg(
        long,
        default_value = "127.0.0.1",
        value_name = "ADDR",
        requires = "http"
    )]
    pub bind: IpAddr,
    /// Read the HTTP bearer token from this file (first line; refused unless only its
    /// owner may read it: `chmod 600 FILE`). Without it and without
    /// SWITCHBOARD_GATEWAY_TOKEN, a random token is generated and printed on stderr.
    #[arg(long, value_name = "FILE", requires = "http")]
    pub token_file: Option<PathBuf>,
    /// Append one JSON line per call to FILE (names and error classes: no arguments,
    /// results, error texts or resource URIs).
    #[arg(long, value_name = "FILE")]
    pub audit: Option<PathBuf>,
    /// Also write arguments and results to the audit file.
    #[arg(long, requires = "audit")]
    pub audit_payloads: bool,
    /// Offer only tools annotated `readOnlyHint: true`.
    #[arg(long)]
    pub read_only: bool,
    /// How long the first answers wait for servers to connect, in ms (later ones are
    /// announced with list_changed).
    #[arg(long, default_value_t = 5000, value_name = "MS")]
    pub wait_ms: u64,
}

/// A secret file's text, refused when its mode lets group or others read it (the one
/// check of `--token-file` and team mode's `*_FILE` variables); `what` names it in the
/// error (`--token-file PATH`, `VAR=PATH`).
pub(crate) fn read_private_file(path: &std::path::Path, what: &str) -> Result<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path).with_context(|| format!("{what}: cannot read it"))?;
        if meta.permissions().mode() & 0o077 != 0 {
            bail!(
                "{what}: other users may read it: run `chmod 600 {}`",
                path.display()
            );
        }
    }
    std::fs::read_to_string(path).with_context(|| format!("{what}: cannot read it"))
}

fn configured_token(a: &GatewayArgs) -> Result<Option<String>> {
    if let Some(path) = &a.token_file {
        let text = read_private_file(path, &format!("--token-file {}", path.display()))?;
        let token = text.lines().next().unwrap_or("").trim().to_string();
        if token.len() < 16 {
            bail!(
                "the token in {} is shorter than 16 characters: write a long random token there (e.g. `openssl rand -hex 32`)",
                path.display()
            );
        }
        return Ok(Some(token));
    }
    match std::env::var(TOKEN_ENV) {
        Ok(t) if !t.trim().is_empty() => {
            let t = t.trim().to_string();
            if t.len() < 16 {
                bail!("{TOKEN_ENV} is shorter than 16 characters: use a long random token");
            }
            Ok(Some(t))
        }
        _ => Ok(None),
    }
}

/// Runs the gateway to the end on its own runtime (both `switchboard gateway` and the
/// lean `switchboard-gateway` binary start here, after logging is set up). Over stdio
/// it serves one client: one thread does it all with no wake-ups across threads
/// (measured: less CPU per call and lower latency than two workers; BENCHMARKS.md,
/// gateway section). `--http` keeps two workers.
pub fn main(g: Globals, a: GatewayArgs) -> ExitCode {
    let built = if a.http {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .worker_threads(2)
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    let runtime = match built {
        Ok(rt) => rt,
        Err(e) => {
            error_line(&format!("error: cannot start the async runtime: {e}"));
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(run(&g, a));
    // Do not wait for stray tasks (servers are already stopped by then).
    runtime.shutdown_timeout(Duration::from_millis(100));
    match result {
        Ok(code) => code,
        Err(e) => {
            error_line(&error_text(&e));
            ExitCode::from(1)
        }
    }
}

async fn run(g: &Globals, a: GatewayArgs) -> Result<ExitCode> {
    // Refuse a bad HTTP set-up before any server starts.
    let http = if a.http {
        let token = match configured_token(&a)? {
            Some(t) => (t, false),
            None if a.bind.is_loopback() => (
                generate_token().context("cannot read /dev/urandom for the gateway token")?,
                true,
            ),
            None => bail!(
                "refusing to serve the gateway on {} without a configured token: pass --token-file FILE or set {TOKEN_ENV} (or bind 127.0.0.1)",
                a.bind
            ),
        };
        let addr = SocketAddr::new(a.bind, a.port);
        let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| {
            format!("cannot listen on {addr} (is the port in use? pick another with --port)")
        })?;
        Some((listener, token))
    } else {
        None
    };
    let audit = match &a.audit {
        Some(path) => Some(Arc::new(Audit::open(path, a.audit_payloads).with_context(
            || format!("cannot open the audit file {}", path.display()),
        )?)),
        None => None,
    };

    let (specs, settings) = ctx::all_specs(g, false)?;
    let guard = ctx::guard(g, Some(&settings))?;
    let hooks = GatewayHooks::new();
    let host = Host::new(
        specs,
        HostOptions {
            hooks: Arc::new(hooks.clone()),
            reconnect: true,
            token_source: crate::tokens::stored(Some(&settings), &guard),
            guard: Some(guard),
            transport_cache: ctx::transport_cache(),
            // The pins every front end judges tools by: a changed or renamed tool is
            // withheld from the gateway's clients until `switchboard mcp pins accept`.
            pins: ctx::pin_store(),
            ..Default::default()
        },
    );
    let gateway = Gateway::new(
        host,
        &hooks,
        GatewayOptions {
            catalog: CatalogOptions {
                read_only: a.read_only,
                ..Default::default()
            },
            initial_wait: Duration::from_millis(a.wait_ms),
            audit,
            ..Default::default()
        },
    );
    gateway.start();

    let result = match http {
        None => gateway.serve_stdio().await.context("switchboard gateway"),
        Some((listener, (token, generated))) => {
            let local = listener.local_addr()?;
            errln!("Switchboard gateway: http://{local}{MCP_PATH}");
            if generated {
                errln!("Bearer token (send `Authorization: Bearer <token>`): {token}");
            }
            serve_http(
                gateway.clone(),
                listener,
                HttpOptions {
                    token,
                    allowed_hosts: Vec::new(),
                },
                async {
                    let _ = tokio::signal::ctrl_c().await;
                },
            )
            .await
            .context("switchboard gateway --http")
        }
    };
    gateway.shutdown().await;
    result.map(|()| ExitCode::SUCCESS)
}
