//! Errors returned by the demo server's entry points.

use thiserror::Error;

/// Why serving the demo server failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DemoError {
    /// The MCP `initialize` handshake with the client failed.
    #[error("MCP initialization failed: {0}")]
    Initialize(Box<rmcp::service::ServerInitializeError>),
    /// The task running the MCP session ended abnormally (for example it panicked).
    #[error("the MCP session task failed: {0}")]
    Session(#[from] tokio::task::JoinError),
    /// An I/O error from the listener or HTTP server.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

impl From<rmcp::service::ServerInitializeError> for DemoError {
    fn from(error: rmcp::service::ServerInitializeError) -> Self {
        Self::Initialize(Box::new(error))
    }
}
