//! What every HTTP dial shares: the URL check, the URL guard (the caller's or one shared
//! `local`-policy guard) with its preflight, the one guarded HTTP client, the target's
//! custom headers (transport-owned ones refused), and the bearer token source.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use http::{HeaderName, HeaderValue};
use switchboard_net::{ClientOptions, GuardedClient, UrlPolicy};

use super::ConnectOptions;
use crate::error::ConnectError;
use crate::token::TokenSource;

pub(super) fn header_map(
    headers: &[(String, String)],
) -> Result<HashMap<HeaderName, HeaderValue>, ConnectError> {
    let mut map = HashMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| ConnectError::BadHeader {
            name: k.clone(),
            reason: e.to_string(),
        })?;
        let lower = name.as_str();
        if matches!(
            lower,
            "accept"
                | "mcp-session-id"
                | "last-event-id"
                | "content-type"
                | "content-length"
                | "host"
        ) {
            return Err(ConnectError::BadHeader {
                name: k.clone(),
                reason: "this header is set by the transport; remove it from `headers`".into(),
            });
        }
        let value = HeaderValue::from_str(v).map_err(|e| ConnectError::BadHeader {
            name: k.clone(),
            reason: format!("invalid value ({e})"),
        })?;
        map.insert(name, value);
    }
    Ok(map)
}

/// The guard every HTTP request of this connection goes through: the caller's, or
/// one shared `local`-policy guard.
pub(super) fn guard(opts: &ConnectOptions) -> Result<GuardedClient, ConnectError> {
    if let Some(g) = &opts.guard {
        return Ok(g.clone());
    }
    static DEFAULT: OnceLock<Result<GuardedClient, String>> = OnceLock::new();
    DEFAULT
        .get_or_init(|| {
            GuardedClient::new(ClientOptions::new(UrlPolicy::Local)).map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|message| ConnectError::Initialize {
            message: format!("cannot build the HTTP client: {message}"),
            stderr: vec![],
        })
}

/// The HTTP client of this connection: always the guard's.
pub(super) fn http_client(opts: &ConnectOptions) -> Result<reqwest::Client, ConnectError> {
    Ok(guard(opts)?.inner().clone())
}

/// The token source for an HTTP target and the token it gives now: `None` without a
/// source, or when the target's headers set their own `Authorization`. A source that
/// fails (a saved login that can no longer be refreshed) fails the connection with
/// its message.
pub(super) async fn auth_source(
    opts: &ConnectOptions,
    url: &str,
    headers: &[(String, String)],
) -> Result<Option<(Arc<dyn TokenSource>, Option<String>)>, ConnectError> {
    let Some(source) = &opts.token_source else {
        return Ok(None);
    };
    if headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
    {
        return Ok(None);
    }
    match source.bearer(&opts.name, url).await {
        Ok(token) => Ok(Some((source.clone(), token))),
        Err(reason) => Err(ConnectError::AuthFailed {
            server: opts.name.clone(),
            reason,
        }),
    }
}

/// Checks the server URL against the URL guard's policy.
pub(super) async fn preflight(opts: &ConnectOptions, url: &str) -> Result<(), ConnectError> {
    guard(opts)?
        .preflight(url)
        .await
        .map_err(|b| ConnectError::Blocked {
            url: url.to_string(),
            reason: b.to_string(),
        })?;
    Ok(())
}

pub(super) fn check_url(url: &str) -> Result<(), ConnectError> {
    match url::Url::parse(url) {
        Ok(u) if u.scheme() == "http" || u.scheme() == "https" => Ok(()),
        Ok(u) => Err(ConnectError::BadUrl {
            url: url.into(),
            reason: format!("scheme `{}` is not http or https", u.scheme()),
        }),
        Err(e) => Err(ConnectError::BadUrl {
            url: url.into(),
            reason: e.to_string(),
        }),
    }
}
