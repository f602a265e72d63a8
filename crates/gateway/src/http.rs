//! The gateway over Streamable HTTP (rmcp's server transport, with sessions) at
//! [`MCP_PATH`], behind a bearer token.
//!
//! Every request must carry `Authorization: Bearer <token>` (compared in constant
//! time); anything else gets `401` with an empty body and `WWW-Authenticate: Bearer`,
//! before rmcp sees it, so an unauthenticated client learns nothing about the servers
//! behind it. rmcp also checks `Host` (DNS rebinding). Choosing whether a bind address
//! is acceptable without a configured token is the caller's decision (the CLI refuses
//! beyond loopback).
//!
//! Clients on 2025-11-25 and older get rmcp sessions; a 2026-07-28 request is served on
//! its own, and answered as one JSON body when its result is its only message (an event
//! stream only when progress, a log line or a question comes first).

use std::future::Future;
use std::io::Read;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

use crate::error::GatewayError;
use crate::gateway::Gateway;

/// The path the gateway is served at.
pub const MCP_PATH: &str = "/mcp";

/// How the HTTP gateway is served.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The bearer token every request must carry.
    pub token: String,
    /// Extra `Host` values to accept (beyond loopback names and the bound address).
    pub allowed_hosts: Vec<String>,
}

/// A random token: 32 bytes from the kernel's CSPRNG as hex.
pub fn generate_token() -> std::io::Result<String> {
    let mut buf = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn require_token(State(token): State<Arc<str>>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    match presented {
        Some(p) if constant_time_eq(p.as_bytes(), token.as_bytes()) => next.run(request).await,
        _ => {
            let mut r = StatusCode::UNAUTHORIZED.into_response();
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"switchboard-gateway\""),
            );
            r
        }
    }
}

/// Serves the gateway on `listener` until `shutdown` completes.
pub async fn serve_http<F>(
    gateway: Gateway,
    listener: TcpListener,
    opts: HttpOptions,
    shutdown: F,
) -> Result<(), GatewayError>
where
    F: Future<Output = ()> + Send + 'static,
{
    let local = listener.local_addr()?;
    // Sessions for clients on 2025-11-25 and older (rmcp's default); a 2026-07-28 request
    // is served on its own, and its answer is sent as plain JSON when it is the only
    // message (no progress or question before it): a client then parses one JSON body
    // instead of an event stream, which is faster for every client measured.
    let mut config = StreamableHttpServerConfig::default().with_json_response(true);
    let ip = local.ip();
    if !ip.is_loopback() && !ip.is_unspecified() {
        config.allowed_hosts.push(ip.to_string());
    }
    config
        .allowed_hosts
        .extend(opts.allowed_hosts.iter().cloned());
    let sessions_ct = config.cancellation_token.clone();
    let factory = gateway.clone();
    let service = StreamableHttpService::new(
        move || Ok(factory.session()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let token: Arc<str> = Arc::from(opts.token.as_str());
    let router = axum::Router::new()
        .nest_service(MCP_PATH, service)
        .layer(axum::middleware::from_fn_with_state(token, require_token));
    // TCP_NODELAY (switchboard-net's `no_delay`): a response is an SSE stream of small
    // writes (priming event, then the result).
    axum::serve(switchboard_net::no_delay(listener), router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            sessions_ct.cancel();
        })
        .await?;
    Ok(())
}
