//! The gateway's errors.

/// What went wrong serving the gateway.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The downstream session could not start or ended with an error.
    #[error("the MCP session with the client failed: {0}")]
    Initialize(String),
    /// The gateway's own stdin or stdout could not be set up.
    #[error("the gateway could not set up its stdin/stdout: {0}")]
    Stdio(std::io::Error),
    /// The HTTP listener failed.
    #[error("the gateway's HTTP listener failed: {0}")]
    Http(#[from] std::io::Error),
}
