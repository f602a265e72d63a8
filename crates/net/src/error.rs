//! [`NetError`]: building the client and sending requests through the guard; and
//! [`find_blocked`], which digs a guard verdict out of any error chain (reqwest, rmcp).

use std::error::Error as StdError;
use std::path::PathBuf;

use crate::blocked::Blocked;

/// What can go wrong building the client or sending a guarded request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// The URL guard refused a URL (the request, a redirect hop, or an address a name
    /// resolved to).
    #[error(transparent)]
    Blocked(#[from] Blocked),
    /// A CA file could not be read.
    #[error("could not read CA certificates from {} ({origin}): {source}", .path.display())]
    CaFile {
        path: PathBuf,
        /// Where the path came from: `caFile` or `SSL_CERT_FILE`.
        origin: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// A CA file holds no usable PEM certificate.
    #[error("no usable PEM certificate in {} ({origin}){}", .path.display(), .reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default())]
    InvalidCaFile {
        path: PathBuf,
        origin: &'static str,
        reason: Option<String>,
    },
    /// An explicitly configured proxy URL is not usable.
    #[error("invalid proxy URL `{url}`: {source}")]
    Proxy {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// reqwest refused the client configuration.
    #[error("could not build the HTTP client: {0}")]
    Build(#[source] reqwest::Error),
    /// The request could not be built (an unparsable URL, a bad header value).
    #[error("invalid request: {0}")]
    InvalidRequest(#[source] reqwest::Error),
    /// The request failed (connect, TLS, timeout, body…).
    #[error("HTTP request to {url} failed: {source}")]
    Request {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// A redirect that cannot be followed (bad `Location`, a body that cannot be sent
    /// again).
    #[error("cannot follow the redirect from {from}: {reason}")]
    Redirect { from: String, reason: String },
}

impl NetError {
    /// Wrap a reqwest error, surfacing a guard verdict hidden in its chain (from the
    /// DNS resolver or the redirect policy) as [`NetError::Blocked`].
    pub fn from_reqwest(err: reqwest::Error) -> Self {
        if let Some(blocked) = find_blocked(&err) {
            return Self::Blocked(blocked.clone());
        }
        if err.is_builder() {
            return Self::InvalidRequest(err.without_url());
        }
        let url = err
            .url()
            .map(|u| redacted(u.as_str()))
            .unwrap_or_else(|| "(unknown URL)".to_owned());
        // The URL is given redacted; reqwest's own message would repeat it in full.
        Self::Request {
            url,
            source: err.without_url(),
        }
    }

    /// The guard verdict, if this error is one.
    pub fn blocked(&self) -> Option<&Blocked> {
        match self {
            Self::Blocked(b) => Some(b),
            _ => find_blocked(self),
        }
    }
}

/// The guard verdict somewhere in `err`'s source chain, if any. Use it on errors from
/// libraries that were handed [`crate::GuardedClient::inner`] (e.g. rmcp).
pub fn find_blocked<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a Blocked> {
    let mut current: Option<&'a (dyn StdError + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(b) = e.downcast_ref::<Blocked>() {
            return Some(b);
        }
        current = e.source();
    }
    None
}

/// A URL for messages: without user info, query or fragment (they may hold secrets); an
/// unparseable one is not shown at all.
pub fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => "(invalid URL)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Blocked);

    #[test]
    fn finds_blocked_in_a_chain() {
        let b = Blocked::Resolution {
            host: "x.test".into(),
            reason: "no".into(),
        };
        let outer = Outer(b.clone());
        assert_eq!(find_blocked(&outer), Some(&b));
        let io = std::io::Error::other("plain");
        assert!(find_blocked(&io).is_none());
    }

    #[test]
    fn redaction() {
        assert_eq!(
            redacted("https://u:p@example.com/x?token=1#f"),
            "https://example.com/x"
        );
    }
}
