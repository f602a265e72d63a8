//! Entry points that run the demo server over stdio or Streamable HTTP.

use std::{future::Future, sync::Arc};

use rmcp::{
    ServiceExt,
    service::ServerInitializeError,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService,
        streamable_http_server::session::local::LocalSessionManager,
    },
};
use tokio::net::TcpListener;

use crate::{DemoError, DemoOptions, DemoServer};

/// Path the Streamable HTTP endpoint is served at.
const HTTP_PATH: &str = "/mcp";

/// Serve the demo server on stdin/stdout until stdin reaches EOF (or the
/// client otherwise closes the connection), then return.
///
/// A client that closes the connection before finishing `initialize` is not
/// an error. Nothing but protocol messages is written to stdout.
pub async fn serve_stdio(opts: DemoOptions) -> Result<(), DemoError> {
    let server = DemoServer::new(opts);
    let running = match server.serve(rmcp::transport::stdio()).await {
        Ok(running) => running,
        Err(ServerInitializeError::ConnectionClosed(reason)) => {
            tracing::debug!(%reason, "stdin closed before initialization finished");
            return Ok(());
        }
        Err(error) => return Err(error.into()),
    };
    let reason = running.waiting().await?;
    tracing::debug!(?reason, "stdio session ended");
    Ok(())
}

/// Serve the demo server over Streamable HTTP at `/mcp` on `listener`
/// until the process ends or the listener fails.
pub async fn serve_http(listener: TcpListener, opts: DemoOptions) -> Result<(), DemoError> {
    serve_http_with_shutdown(listener, opts, std::future::pending()).await
}

/// Like [`serve_http`], but stops when `shutdown` completes: open sessions
/// are closed, in-flight connections drain and the function returns.
pub async fn serve_http_with_shutdown<F>(
    listener: TcpListener,
    opts: DemoOptions,
    shutdown: F,
) -> Result<(), DemoError>
where
    F: Future<Output = ()> + Send + 'static,
{
    let local = listener.local_addr()?;
    let mut config = StreamableHttpServerConfig::default();
    let ip = local.ip();
    if !ip.is_loopback() && !ip.is_unspecified() {
        // Keep DNS-rebinding protection, but accept the address we were asked to bind.
        config.allowed_hosts.push(ip.to_string());
    }
    let sessions_ct = config.cancellation_token.clone();
    let service = StreamableHttpService::new(
        move || Ok(DemoServer::new(opts.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().nest_service(HTTP_PATH, service);
    tracing::info!(%local, "serving MCP over Streamable HTTP at {HTTP_PATH}");
    // TCP_NODELAY (switchboard-net's `no_delay`): an answer is an SSE stream of small
    // writes.
    axum::serve(switchboard_net::no_delay(listener), router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            sessions_ct.cancel();
        })
        .await?;
    Ok(())
}
