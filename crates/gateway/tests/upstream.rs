//! Scaffolding shared by the in-process gateway tests: an rmcp handler served over
//! Streamable HTTP on 127.0.0.1 as a gateway's one upstream, and in-memory downstream
//! sessions of that gateway.

use std::sync::Arc;

use rmcp::ServerHandler;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use switchboard_gateway::{Gateway, GatewayHooks, GatewayOptions};
use switchboard_host::{Host, HostOptions, ServerSpec};
use switchboard_mcp::Target;
use switchboard_testkit::free_port;
use tokio::io::DuplexStream;
use tokio::task::JoinHandle;

/// A started gateway whose one upstream, `name`, is `handler` over HTTP. The upstream
/// stops when the returned task is aborted (or the test's runtime ends).
pub async fn gateway_over<H>(name: &str, handler: H) -> (Gateway, JoinHandle<()>)
where
    H: ServerHandler + Clone + Send + Sync + 'static,
{
    let port = free_port();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let served = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let hooks = GatewayHooks::new();
    let spec = ServerSpec::adhoc(
        name,
        "ad-hoc",
        Target::Http {
            url: format!("http://127.0.0.1:{port}/mcp"),
            headers: Vec::new(),
        },
    );
    let host = Host::new(
        vec![spec],
        HostOptions {
            hooks: Arc::new(hooks.clone()),
            ..Default::default()
        },
    );
    let gateway = Gateway::new(host, &hooks, GatewayOptions::default());
    gateway.start();
    (gateway, served)
}

/// A new downstream session of `gateway`: the client's end of an in-memory pipe.
pub fn session(gateway: &Gateway) -> DuplexStream {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let session = gateway.session();
    tokio::spawn(async move {
        if let Ok(running) = session.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    client_io
}
