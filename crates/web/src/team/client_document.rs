//! Client ID Metadata Documents (MCP authorization 2025-11-25,
//! draft-ietf-oauth-client-id-metadata-document): an MCP client may name itself by the
//! URL of a JSON document describing it (`client_id` = that URL) instead of registering,
//! so most clients need no stored row until a user approves one.
//!
//! The rules, in order:
//! - **The URL** ([`check_client_id_url`]): `https` with a path (not just `/`), no
//!   fragment, no user info, no `.`/`..` segments, at most 2048 bytes, written in its
//!   normal form (what is fetched is exactly the `client_id`). Plain `http` is accepted
//!   only when the team's URL policy lets http through (`local` or `off`, for tests and
//!   development on loopback); never under the default `strict`.
//! - **The fetch**: through the team's URL guard ([`GuardedClient`], so the policy's
//!   address rules hold for the name and every address it resolves to), a GET with no
//!   redirect followed (a 3xx is refused, as the draft says), within
//!   [`DOCUMENT_TIMEOUT`] for the whole answer, at most [`MAX_DOCUMENT_BYTES`]; `200`
//!   with `application/json` (or `application/…+json`) only. Fetches that miss the cache
//!   are rate-limited per client address like registrations (`rate_limit`).
//! - **The document**: a JSON object whose `client_id` equals the URL exactly; no
//!   `client_secret` (a document cannot hold a shared secret: public clients only); then
//!   the same checks and sizes as a registration (`gateway_auth::check_registration`:
//!   redirect URIs https or loopback http, `none` authentication, code and refresh grants).
//!   The request's `redirect_uri` must be one of its `redirect_uris` (checked by the
//!   caller, as for a registered client).
//! - **The cache**: a good document is kept in memory on this instance for its
//!   `Cache-Control: max-age` clamped to [`MIN_CACHE`]..[`MAX_CACHE`] ([`DEFAULT_CACHE`]
//!   without one; `no-store`/`no-cache` count as the minimum), at most [`MAX_CACHED`]
//!   documents. A refused document is never cached.
//!
//! The consent page names the document's host (`host[:port]` of the URL) beside the
//! client's self-chosen name, so the person sees who is asking.
//!
//! Must not: follow a redirect, fetch anything the URL guard refuses, read more than
//! [`MAX_DOCUMENT_BYTES`], wait longer than [`DOCUMENT_TIMEOUT`], or accept a document
//! that names another `client_id` or carries a secret.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::http::header;
use switchboard_net::{GuardedClient, LimitedBody, NetError, read_limited};
use switchboard_store::GatewayClient;

use super::gateway_auth::{RawRegistration, check_registration};
use super::rate_limit::RateLimiter;

/// The largest document read.
pub const MAX_DOCUMENT_BYTES: usize = 64 * 1024;
/// The whole fetch (connect, answer, body) must end within this.
pub const DOCUMENT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a document is kept without a `max-age`.
pub const DEFAULT_CACHE: Duration = Duration::from_secs(5 * 60);
/// The shortest a document is kept (also for `no-store`): bounds how often one client's
/// authorization fetches its document.
pub const MIN_CACHE: Duration = Duration::from_secs(30);
/// The longest a document is kept, whatever it says.
pub const MAX_CACHE: Duration = Duration::from_secs(60 * 60);
/// At most this many documents are cached.
pub const MAX_CACHED: usize = 1024;
const MAX_CLIENT_ID_LEN: usize = 2048;

/// Whether `client_id` names a metadata document (rather than a registered client, whose
/// ids are `sbc_…`).
pub fn is_document_client_id(client_id: &str) -> bool {
    client_id.starts_with("https://") || client_id.starts_with("http://")
}

/// Whether the raw path of `client_id` has a `.` or `..` segment (the URL parser would
/// have removed them, so the raw text is read).
fn has_dot_segment(client_id: &str) -> bool {
    let after_scheme = client_id.split_once("://").map_or("", |(_, rest)| rest);
    let path = after_scheme
        .find('/')
        .map_or("", |i| &after_scheme[i..])
        .split(['?', '#'])
        .next()
        .unwrap_or("");
    path.split('/').any(|seg| {
        let seg = seg.to_ascii_lowercase().replace("%2e", ".");
        seg == "." || seg == ".."
    })
}

/// The checked URL of a metadata-document `client_id`, or why it is not one.
pub fn check_client_id_url(client_id: &str, allow_http: bool) -> Result<url::Url, String> {
    if client_id.len() > MAX_CLIENT_ID_LEN {
        return Err(format!(
            "the client_id URL is longer than {MAX_CLIENT_ID_LEN} bytes"
        ));
    }
    let url =
        url::Url::parse(client_id).map_err(|e| format!("the client_id is not a URL ({e})"))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_http => {}
        "http" => {
            return Err(
                "a client_id URL must use https (plain http is taken only under the `local` URL policy, for development)"
                    .into(),
            );
        }
        other => return Err(format!("a client_id URL must use https, not `{other}`")),
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("the client_id URL has no host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("the client_id URL carries user info".into());
    }
    if url.fragment().is_some() {
        return Err("the client_id URL has a fragment (`#…`)".into());
    }
    if url.path() == "/" || url.path().is_empty() {
        return Err(
            "the client_id URL has no path: it must name the client's metadata document".into(),
        );
    }
    if has_dot_segment(client_id) {
        return Err("the client_id URL has a `.` or `..` path segment".into());
    }
    if url.as_str() != client_id {
        return Err(format!(
            "the client_id URL is not written in its normal form (`{}`): the client must use exactly the URL its document is fetched from",
            url.as_str()
        ));
    }
    Ok(url)
}

/// `host[:port]` of a URL: who publishes the document.
fn host_of(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_owned(),
    }
}

/// A client described by a good metadata document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentClient {
    /// The client as the rest of the authorization server sees it (`client_id` is the URL).
    pub client: GatewayClient,
    /// `host[:port]` of the document's URL, shown on the consent page.
    pub host: String,
}

/// Why a document client cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentRefusal {
    /// The URL or the document is not acceptable (said to the person on our own page).
    Refused(String),
    /// Too many fetches from this address: try again after the wait.
    Limited(Duration),
}

/// How long to keep a document, from its `Cache-Control`.
fn cache_for(cache_control: Option<&str>) -> Duration {
    let Some(cc) = cache_control else {
        return DEFAULT_CACHE;
    };
    let mut max_age: Option<Duration> = None;
    for directive in cc.split(',') {
        let d = directive.trim().to_ascii_lowercase();
        if d == "no-store" || d == "no-cache" {
            return MIN_CACHE;
        }
        if let Some(v) = d.strip_prefix("max-age=")
            && let Ok(secs) = v.trim_matches('"').parse::<u64>()
        {
            max_age = Some(Duration::from_secs(secs));
        }
    }
    max_age.map_or(DEFAULT_CACHE, |d| d.clamp(MIN_CACHE, MAX_CACHE))
}

/// Whether a `Content-Type` is JSON (`application/json` or `application/…+json`).
fn is_json_type(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// A fetched document, checked: the client, or why not.
pub fn check_document(
    client_id: &str,
    url: &url::Url,
    body: &[u8],
) -> Result<DocumentClient, String> {
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| format!("the client's metadata document is not JSON ({e})"))?;
    let Some(object) = value.as_object() else {
        return Err("the client's metadata document is not a JSON object".into());
    };
    match object.get("client_id").and_then(serde_json::Value::as_str) {
        Some(id) if id == client_id => {}
        Some(id) => {
            return Err(format!(
                "the client's metadata document names the client_id `{}`, which is not the URL it was fetched from",
                switchboard_config::visible(&id.chars().take(200).collect::<String>())
            ));
        }
        None => return Err("the client's metadata document has no client_id".into()),
    }
    if object.contains_key("client_secret") || object.contains_key("client_secret_expires_at") {
        return Err(
            "the client's metadata document carries a client_secret: a document cannot hold a shared secret, so only public clients (PKCE, no secret) may use one"
                .into(),
        );
    }
    let raw: RawRegistration = serde_json::from_value(value)
        .map_err(|e| format!("the client's metadata document is not client metadata ({e})"))?;
    let reg = check_registration(raw)
        .map_err(|(_, why)| format!("the client's metadata document is refused: {why}"))?;
    Ok(DocumentClient {
        client: GatewayClient {
            client_id: client_id.to_owned(),
            client_name: reg.client_name,
            redirect_uris: reg.redirect_uris,
            created_at: now_secs(),
        },
        host: host_of(url),
    })
}

struct Cached {
    client: Arc<DocumentClient>,
    until: Instant,
}

/// This instance's fetched documents, by `client_id`.
pub struct ClientDocuments {
    cache: Mutex<HashMap<String, Cached>>,
    fetches: RateLimiter,
}

impl std::fmt::Debug for ClientDocuments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientDocuments").finish_non_exhaustive()
    }
}

impl ClientDocuments {
    /// An empty cache; fetches that miss it are limited by `fetches`.
    pub fn new(fetches: RateLimiter) -> Self {
        Self {
            cache: Mutex::new(HashMap::new()),
            fetches,
        }
    }

    fn cached(&self, client_id: &str) -> Option<Arc<DocumentClient>> {
        let cache = self.cache.lock().ok()?;
        cache
            .get(client_id)
            .filter(|c| c.until > Instant::now())
            .map(|c| Arc::clone(&c.client))
    }

    fn keep(&self, client_id: &str, client: Arc<DocumentClient>, ttl: Duration) {
        let Ok(mut cache) = self.cache.lock() else {
            return;
        };
        let now = Instant::now();
        if cache.len() >= MAX_CACHED {
            cache.retain(|_, c| c.until > now);
        }
        if cache.len() >= MAX_CACHED {
            let soonest = cache
                .iter()
                .min_by_key(|(_, c)| c.until)
                .map(|(k, _)| k.clone());
            if let Some(k) = soonest {
                cache.remove(&k);
            }
        }
        cache.insert(
            client_id.to_owned(),
            Cached {
                client,
                until: now + ttl,
            },
        );
    }

    /// The client `client_id` (a metadata document's URL) describes: from the cache, or
    /// fetched through `guard` for a request from `addr`.
    pub async fn client(
        &self,
        guard: &GuardedClient,
        client_id: &str,
        addr: Option<IpAddr>,
    ) -> Result<Arc<DocumentClient>, DocumentRefusal> {
        let allow_http = guard.policy().allows_scheme("http");
        let url = check_client_id_url(client_id, allow_http).map_err(DocumentRefusal::Refused)?;
        if let Some(c) = self.cached(client_id) {
            return Ok(c);
        }
        self.fetches.check(addr).map_err(DocumentRefusal::Limited)?;
        let (client, ttl) =
            match tokio::time::timeout(DOCUMENT_TIMEOUT, fetch(guard, client_id, &url)).await {
                Ok(Ok(found)) => found,
                Ok(Err(why)) => return Err(DocumentRefusal::Refused(why)),
                Err(_) => {
                    return Err(DocumentRefusal::Refused(format!(
                        "the client's metadata document at {client_id} did not answer within {} s",
                        DOCUMENT_TIMEOUT.as_secs()
                    )));
                }
            };
        let client = Arc::new(client);
        self.keep(client_id, Arc::clone(&client), ttl);
        Ok(client)
    }
}

/// One fetch of the document, checked, and how long to keep it.
async fn fetch(
    guard: &GuardedClient,
    client_id: &str,
    url: &url::Url,
) -> Result<(DocumentClient, Duration), String> {
    let request = guard
        .get(url.as_str())
        .header(header::ACCEPT.as_str(), "application/json")
        .timeout(DOCUMENT_TIMEOUT);
    let response = match guard.send_without_redirects(request).await {
        Ok(r) => r,
        Err(NetError::Blocked(b)) => {
            return Err(format!(
                "the team's URL policy refuses the client's metadata document at {client_id}: {b}"
            ));
        }
        Err(NetError::Request { source, .. }) if source.is_timeout() => {
            return Err(format!(
                "the client's metadata document at {client_id} did not answer within {} s",
                DOCUMENT_TIMEOUT.as_secs()
            ));
        }
        Err(e) => {
            return Err(format!(
                "the client's metadata document at {client_id} could not be fetched: {e}"
            ));
        }
    };
    let status = response.status();
    if status.is_redirection() {
        return Err(format!(
            "the client's metadata document at {client_id} answered with a redirect ({status}): a document is fetched from its client_id exactly, redirects are not followed"
        ));
    }
    if status.as_u16() != 200 {
        return Err(format!(
            "the client's metadata document at {client_id} answered {status}, not 200"
        ));
    }
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE.as_str())
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    if !is_json_type(&content_type) {
        return Err(format!(
            "the client's metadata document at {client_id} is served as `{}`, not application/json",
            switchboard_config::visible(&content_type.chars().take(100).collect::<String>())
        ));
    }
    let ttl = cache_for(
        response
            .headers()
            .get(header::CACHE_CONTROL.as_str())
            .and_then(|v| v.to_str().ok()),
    );
    let body = match read_limited(response, MAX_DOCUMENT_BYTES).await {
        Ok(LimitedBody::Whole(b)) => b,
        Ok(LimitedBody::Cut(_)) => {
            return Err(format!(
                "the client's metadata document at {client_id} is larger than {} KiB",
                MAX_DOCUMENT_BYTES / 1024
            ));
        }
        Err(e) if e.is_timeout() => {
            return Err(format!(
                "the client's metadata document at {client_id} did not answer within {} s",
                DOCUMENT_TIMEOUT.as_secs()
            ));
        }
        Err(_) => {
            return Err(format!(
                "the client's metadata document at {client_id} broke off while it was read"
            ));
        }
    };
    Ok((check_document(client_id, url, &body)?, ttl))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_id_urls_follow_the_draft() {
        for ok in [
            "https://app.example/client.json",
            "https://app.example:8443/oauth/metadata",
            "https://app.example/c?v=1",
        ] {
            assert!(check_client_id_url(ok, false).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("https://app.example", "no path"),
            ("https://app.example/", "no path"),
            ("http://127.0.0.1:9/c.json", "https"),
            ("ftp://app.example/c.json", "https"),
            ("https://u:p@app.example/c.json", "user info"),
            ("https://app.example/c.json#x", "fragment"),
            ("https://app.example/a/../c.json", "`.` or `..`"),
            ("https://app.example/a/%2E%2E/c.json", "`.` or `..`"),
            ("https://APP.example/c.json", "normal form"),
            ("not a url", "not a URL"),
        ] {
            let err = check_client_id_url(bad, false).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        // Loopback http only where the URL policy lets http through.
        assert!(check_client_id_url("http://127.0.0.1:9/c.json", true).is_ok());
        assert!(is_document_client_id("https://a.example/c"));
        assert!(!is_document_client_id("sbc_abc"));
    }

    #[test]
    fn cache_control_is_honoured_within_bounds() {
        assert_eq!(cache_for(None), DEFAULT_CACHE);
        assert_eq!(cache_for(Some("max-age=120")), Duration::from_secs(120));
        assert_eq!(cache_for(Some("public, max-age=1")), MIN_CACHE);
        assert_eq!(cache_for(Some("max-age=99999999")), MAX_CACHE);
        assert_eq!(cache_for(Some("no-store")), MIN_CACHE);
        assert_eq!(cache_for(Some("private")), DEFAULT_CACHE);
    }

    #[test]
    fn json_types() {
        assert!(is_json_type("application/json"));
        assert!(is_json_type("application/json; charset=utf-8"));
        assert!(is_json_type("application/client-metadata+json"));
        assert!(!is_json_type("text/html"));
        assert!(!is_json_type("text/json+html"));
    }

    #[test]
    fn documents_are_checked() {
        let id = "https://app.example/c.json";
        let url = url::Url::parse(id).unwrap();
        let doc = |v: serde_json::Value| check_document(id, &url, v.to_string().as_bytes());
        let good = doc(serde_json::json!({"client_id": id, "client_name": "App",
            "redirect_uris": ["http://127.0.0.1:3/cb"]}))
        .unwrap();
        assert_eq!(good.client.client_name, "App");
        assert_eq!(good.host, "app.example");
        assert!(
            doc(
                serde_json::json!({"client_id": "https://other.example/c.json",
                "redirect_uris": ["http://127.0.0.1:3/cb"]})
            )
            .unwrap_err()
            .contains("not the URL")
        );
        assert!(
            doc(serde_json::json!({"client_id": id, "client_secret": "x",
                "redirect_uris": ["http://127.0.0.1:3/cb"]}))
            .unwrap_err()
            .contains("client_secret")
        );
        assert!(
            doc(serde_json::json!({"client_id": id, "redirect_uris": ["http://evil.example/cb"]}))
                .unwrap_err()
                .contains("redirect")
        );
        assert!(doc(serde_json::json!([id])).unwrap_err().contains("object"));
    }
}
