//! Reading an answer's body within a limit. Nothing Switchboard calls is trusted to keep
//! its answers small, so every caller that reads a whole body (OAuth, the model APIs, the
//! MCP Registry) reads it here, chunk by chunk, never holding more than its limit.

/// A body read up to a limit.
#[derive(Debug)]
pub enum LimitedBody {
    /// All of it.
    Whole(Vec<u8>),
    /// Its first `limit` bytes; there was more.
    Cut(Vec<u8>),
}

impl LimitedBody {
    /// The bytes read, whole or cut.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Self::Whole(b) | Self::Cut(b) => b,
        }
    }
}

/// Reads at most `limit` bytes of `response`.
///
/// # Errors
/// The body broke off while it was read.
pub async fn read_limited(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<LimitedBody, reqwest::Error> {
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if out.len() + chunk.len() > limit {
            let room = limit - out.len();
            out.extend_from_slice(&chunk[..room]);
            return Ok(LimitedBody::Cut(out));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(LimitedBody::Whole(out))
}
