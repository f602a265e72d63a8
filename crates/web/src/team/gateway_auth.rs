//! The team server as an OAuth 2.1 authorization server for MCP clients of its gateway
//! (`/mcp`), per the MCP authorization spec: RFC 9728 protected-resource metadata (both
//! the root and the `/mcp`-suffixed form), RFC 8414 authorization-server metadata, RFC 7591
//! dynamic registration of public clients (redirect URIs: loopback `http` or `https`, no
//! fragment or user info), Client ID Metadata Documents (`client_document`: a
//! `client_id` that is the https URL of the client's own metadata document, fetched
//! through the URL guard and cached, so the client needs no registration),
//! `/oauth/authorize` (code + PKCE S256 only; a team sign-in session is required — without
//! one the browser goes through the OIDC sign-in and comes back; then a consent page whose
//! POST carries the app's own `Origin`), and `/oauth/token` (the code once, PKCE checked,
//! RFC 8707 `resource` bound to the gateway's `/mcp` URL; refresh tokens rotated), and
//! `/oauth/revoke` (RFC 7009, for the client holding the token: a refresh token ends its
//! grant, an access token only itself; 200 for a token it does not know). A signed-in
//! user lists and ends their own grants (the connected clients: `/api/gateway/grants`).
//!
//! Every step is in the store (`switchboard-store`'s `gateway_oauth`): any instance
//! answers any step. Codes and tokens are stored hashed; a grant lives only as long as the
//! sign-in session that approved it.
//!
//! Registration is open to anyone, so it is bounded ([`RegistrationLimits`]):
//! - each field has a size (`client_name` 100 characters; 1 to 8 `redirect_uris` of at
//!   most 2048 bytes; `scope`, `software_id`, `software_version` 255 bytes; `client_uri`,
//!   `logo_uri`, `tos_uri`, `policy_uri`, `jwks_uri` 2048 bytes; at most 8 `contacts` of 255
//!   bytes, 8 grant and response types): past it, 400 `invalid_client_metadata`
//!   (`invalid_redirect_uri` for redirect URIs) naming the field; a request past 8 KiB is
//!   413. Only the name and redirect URIs are stored;
//! - each client address may register `per_address_burst` times at once, then once per
//!   `per_address_every` (in memory, per instance; the TCP peer address, never a
//!   forwarded-for header: `rate_limit`); past it, 429 with `Retry-After`;
//! - at most `max_pending_clients` registered clients wait for their first approval, kept
//!   in the store so the cap holds across instances: each registration purges the oldest
//!   pending ones past it (logged with the number; unused registrations also go after a
//!   day).
//!
//! Text a client chose (its name) is shown on the consent page with control and bidi
//! formatting characters made visible (`switchboard_config::visible`, the terminal's rule),
//! then HTML-escaped; so is the connected-clients list's name.
//!
//! Limits: codes live [`CODE_TTL`] (5 min) and are taken once, and a wrong verifier,
//! client or redirect URI ends their grant; access tokens last 1 h, refresh tokens 30
//! days ([`TOKEN_LIFETIMES`]) and never outlive the approving session. The consent,
//! token and revocation forms are at most 16 KiB, an authorization `state` at most 1024
//! bytes. Every page has no script (`default-src 'none'`, `form-action` self plus, on
//! the consent page, the redirect URI's origin, `frame-ancestors 'none'`,
//! `X-Frame-Options: DENY`, `no-store`) and is sent with `Referrer-Policy: same-origin`
//! (under `no-referrer` a browser posts the consent form with `Origin: null`, which the
//! session middleware refuses); the redirect to the client carries
//! `Referrer-Policy: no-referrer`.
//!
//! Must not: redirect anywhere but a registered redirect URI of the client named (a
//! metadata-document client's: one its document lists), issue a token for any resource
//! but this gateway's, accept `plain` PKCE, write request text into a page unescaped or
//! with a bidi override raw, trust a forwarded-for header for the rate limit, or put a
//! code or token in a log.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Query, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Json};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchboard_config::visible;
use switchboard_store::{
    GatewayApproval, GatewayClient, MAX_PENDING_GATEWAY_CLIENTS, RefreshOutcome, Revocation,
    StoreError, TokenHint, TokenLifetimes,
};

use super::client_document::{ClientDocuments, DocumentRefusal, is_document_client_id};
use super::rate_limit::{RateLimiter, retry_after_secs};
use super::session::{SignedIn, host_allowed};
use super::state::{TeamConfig, TeamState, store_error};
use crate::access::cookie_value;
use crate::error::{ApiError, ApiResult};

/// How long an authorization code may wait for the token request.
pub const CODE_TTL: Duration = Duration::from_secs(5 * 60);
/// Access and refresh token lifetimes (a refresh token never outlives its session).
pub const TOKEN_LIFETIMES: TokenLifetimes = TokenLifetimes {
    access: Duration::from_secs(60 * 60),
    refresh: Duration::from_secs(30 * 24 * 60 * 60),
};
/// The one scope: use the gateway.
pub const SCOPE: &str = "mcp";
/// The path the gateway is served at.
pub const MCP_PATH: &str = "/mcp";

/// The largest registration request (a client's usual one is under 1 KiB).
pub const MAX_REGISTRATION_BYTES: usize = 8 * 1024;
const MAX_REDIRECT_URIS: usize = 8;
const MAX_URI_LEN: usize = 2048;
const MAX_NAME_CHARS: usize = 100;
/// `scope`, `software_id`, `software_version`, each contact.
const MAX_SHORT_FIELD: usize = 255;
const MAX_CONTACTS: usize = 8;
const MAX_TYPES: usize = 8;
const MAX_STATE_LEN: usize = 1024;
const MAX_FORM_BYTES: usize = 16 * 1024;

/// How much anonymous registration an instance takes (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistrationLimits {
    /// Registrations (and metadata-document fetches) one client address may make at once.
    pub per_address_burst: u32,
    /// Then one more per this long.
    pub per_address_every: Duration,
    /// Registered clients never approved that the store keeps (all instances together);
    /// the oldest go first.
    pub max_pending_clients: u64,
}

impl Default for RegistrationLimits {
    /// 20 at once, then one every 30 s per address; 1000 pending clients.
    fn default() -> Self {
        Self {
            per_address_burst: 20,
            per_address_every: Duration::from_secs(30),
            max_pending_clients: MAX_PENDING_GATEWAY_CLIENTS,
        }
    }
}

/// What an instance keeps about clients that are not in the store: the registration
/// limits and their per-address buckets, and the metadata documents it fetched.
#[derive(Debug)]
pub(crate) struct GatewayClients {
    limits: RegistrationLimits,
    registrations: RateLimiter,
    documents: ClientDocuments,
}

impl GatewayClients {
    pub(crate) fn new(limits: RegistrationLimits) -> Self {
        let limiter = || RateLimiter::new(limits.per_address_burst, limits.per_address_every);
        Self {
            limits,
            registrations: limiter(),
            documents: ClientDocuments::new(limiter()),
        }
    }
}

/// The client's address, when the server was started with connection info.
type PeerAddr = Option<Extension<ConnectInfo<SocketAddr>>>;

fn peer_ip(peer: &PeerAddr) -> Option<IpAddr> {
    peer.as_ref().map(|Extension(ConnectInfo(a))| a.ip())
}

/// Text a client chose, for a page: control and bidi characters made visible, then
/// HTML-escaped.
fn shown(text: &str) -> String {
    escape_html(&visible(text))
}

/// The gateway's URL: the RFC 8707 resource every token is bound to.
pub fn mcp_url(cfg: &TeamConfig) -> String {
    format!("{}{MCP_PATH}", cfg.app_origin)
}

/// Where the gateway's RFC 9728 metadata is (the `/mcp`-suffixed form).
pub fn resource_metadata_url(cfg: &TeamConfig) -> String {
    format!(
        "{}/.well-known/oauth-protected-resource{MCP_PATH}",
        cfg.app_origin
    )
}

fn no_store(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    r
}

fn json_answer(status: StatusCode, body: Value) -> Response {
    no_store((status, axum::Json(body)).into_response())
}

/// An OAuth error body (`error`, `error_description`).
fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    json_answer(
        status,
        json!({"error": error, "error_description": description}),
    )
}

/// A form body (`application/x-www-form-urlencoded`) in two steps: the pairs, each name
/// at most once (OAuth forbids repeating a parameter), then the typed struct.
fn parse_form<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    let mut map = serde_json::Map::new();
    for (k, v) in url::form_urlencoded::parse(body) {
        if map
            .insert(k.clone().into_owned(), Value::String(v.into_owned()))
            .is_some()
        {
            return Err(format!("the parameter `{k}` is repeated"));
        }
    }
    serde_json::from_value(Value::Object(map)).map_err(|e| e.to_string())
}

/// `GET /.well-known/oauth-protected-resource[/mcp]` (RFC 9728).
pub async fn protected_resource(State(state): State<TeamState>) -> Response {
    let cfg = state.cfg();
    json_answer(
        StatusCode::OK,
        json!({
            "resource": mcp_url(cfg),
            "authorization_servers": [cfg.app_origin],
            "scopes_supported": [SCOPE],
            "bearer_methods_supported": ["header"],
            "resource_name": "Switchboard team gateway",
        }),
    )
}

/// `GET /.well-known/oauth-authorization-server` (RFC 8414).
pub async fn authorization_server(State(state): State<TeamState>) -> Response {
    let o = &state.cfg().app_origin;
    json_answer(
        StatusCode::OK,
        json!({
            "issuer": o,
            "authorization_endpoint": format!("{o}/oauth/authorize"),
            "token_endpoint": format!("{o}/oauth/token"),
            "registration_endpoint": format!("{o}/oauth/register"),
            "revocation_endpoint": format!("{o}/oauth/revoke"),
            "revocation_endpoint_auth_methods_supported": ["none"],
            "scopes_supported": [SCOPE],
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none"],
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": true,
            "client_id_metadata_document_supported": true,
        }),
    )
}

/// A registration request as sent (RFC 7591), or a client's metadata document; the
/// members read are size-checked, only the name and redirect URIs are kept, other
/// members are ignored.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawRegistration {
    #[serde(default)]
    redirect_uris: Vec<String>,
    #[serde(default)]
    client_name: Option<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
    #[serde(default)]
    grant_types: Option<Vec<String>>,
    #[serde(default)]
    response_types: Option<Vec<String>>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    software_id: Option<String>,
    #[serde(default)]
    software_version: Option<String>,
    #[serde(default)]
    client_uri: Option<String>,
    #[serde(default)]
    logo_uri: Option<String>,
    #[serde(default)]
    tos_uri: Option<String>,
    #[serde(default)]
    policy_uri: Option<String>,
    #[serde(default)]
    jwks_uri: Option<String>,
    #[serde(default)]
    contacts: Option<Vec<String>>,
}

/// A checked registration.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Registration {
    pub(super) redirect_uris: Vec<String>,
    pub(super) client_name: String,
}

/// A redirect URI a client may register: `https` anywhere, `http` only to a loopback
/// host (a native client's local listener); absolute, no fragment, no user info.
pub fn redirect_uri_allowed(uri: &str) -> Result<(), String> {
    if uri.len() > MAX_URI_LEN {
        return Err(format!("longer than {MAX_URI_LEN} characters"));
    }
    let url = url::Url::parse(uri).map_err(|e| format!("not an absolute URL ({e})"))?;
    if url.fragment().is_some() {
        return Err("it has a fragment (`#…`)".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("it carries user info".into());
    }
    match (url.scheme(), url.host()) {
        ("https", Some(_)) => Ok(()),
        ("http", Some(url::Host::Ipv4(ip))) if ip.is_loopback() => Ok(()),
        ("http", Some(url::Host::Ipv6(ip))) if ip.is_loopback() => Ok(()),
        ("http", Some(url::Host::Domain("localhost"))) => Ok(()),
        ("http", _) => Err(
            "plain http is allowed only to a loopback address (127.0.0.1, [::1], localhost)".into(),
        ),
        (other, _) => Err(format!(
            "the scheme `{other}` is not allowed: use https or loopback http"
        )),
    }
}

/// The size rules of the metadata members that are read but not kept.
fn check_sizes(raw: &RawRegistration) -> Result<(), (&'static str, String)> {
    let too_long = |field: &str, max: usize| {
        (
            "invalid_client_metadata",
            format!("{field} is longer than {max} bytes"),
        )
    };
    for (field, value) in [
        ("scope", &raw.scope),
        ("software_id", &raw.software_id),
        ("software_version", &raw.software_version),
    ] {
        if value.as_ref().is_some_and(|v| v.len() > MAX_SHORT_FIELD) {
            return Err(too_long(field, MAX_SHORT_FIELD));
        }
    }
    for (field, value) in [
        ("client_uri", &raw.client_uri),
        ("logo_uri", &raw.logo_uri),
        ("tos_uri", &raw.tos_uri),
        ("policy_uri", &raw.policy_uri),
        ("jwks_uri", &raw.jwks_uri),
    ] {
        if value.as_ref().is_some_and(|v| v.len() > MAX_URI_LEN) {
            return Err(too_long(field, MAX_URI_LEN));
        }
    }
    if let Some(c) = &raw.contacts
        && (c.len() > MAX_CONTACTS || c.iter().any(|c| c.len() > MAX_SHORT_FIELD))
    {
        return Err((
            "invalid_client_metadata",
            format!("contacts: at most {MAX_CONTACTS} of at most {MAX_SHORT_FIELD} bytes each"),
        ));
    }
    for (field, list) in [
        ("grant_types", &raw.grant_types),
        ("response_types", &raw.response_types),
    ] {
        if list.as_ref().is_some_and(|l| l.len() > MAX_TYPES) {
            return Err((
                "invalid_client_metadata",
                format!("{field}: at most {MAX_TYPES} entries"),
            ));
        }
    }
    if let Some(name) = &raw.client_name
        && name.chars().count() > MAX_NAME_CHARS
    {
        return Err((
            "invalid_client_metadata",
            format!("client_name is longer than {MAX_NAME_CHARS} characters"),
        ));
    }
    Ok(())
}

/// The checks of a registration (and of a metadata document's members): sizes, redirect
/// URIs, public client, code and refresh grants. An error is the RFC 7591 code and why.
pub(super) fn check_registration(
    raw: RawRegistration,
) -> Result<Registration, (&'static str, String)> {
    if raw.redirect_uris.is_empty() || raw.redirect_uris.len() > MAX_REDIRECT_URIS {
        return Err((
            "invalid_redirect_uri",
            format!("redirect_uris: give between 1 and {MAX_REDIRECT_URIS}"),
        ));
    }
    for uri in &raw.redirect_uris {
        redirect_uri_allowed(uri).map_err(|why| {
            (
                "invalid_redirect_uri",
                format!("redirect_uris: a redirect URI is refused: {why}"),
            )
        })?;
    }
    check_sizes(&raw)?;
    if let Some(m) = raw.token_endpoint_auth_method.as_deref()
        && m != "none"
    {
        return Err((
            "invalid_client_metadata",
            format!("token_endpoint_auth_method `{m}`: only public clients (`none`) with PKCE"),
        ));
    }
    if let Some(g) = &raw.grant_types
        && let Some(bad) = g
            .iter()
            .find(|g| !matches!(g.as_str(), "authorization_code" | "refresh_token"))
    {
        return Err((
            "invalid_client_metadata",
            format!("grant type `{bad}`: only authorization_code and refresh_token"),
        ));
    }
    if let Some(r) = &raw.response_types
        && let Some(bad) = r.iter().find(|r| r.as_str() != "code")
    {
        return Err((
            "invalid_client_metadata",
            format!("response type `{bad}`: only `code`"),
        ));
    }
    let name: String = raw
        .client_name
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_CHARS)
        .collect();
    let name = name.trim();
    let mut uris: Vec<String> = Vec::new();
    for u in raw.redirect_uris {
        if !uris.contains(&u) {
            uris.push(u);
        }
    }
    Ok(Registration {
        redirect_uris: uris,
        client_name: if name.is_empty() {
            "an unnamed MCP client".into()
        } else {
            name.to_owned()
        },
    })
}

fn store_failure(e: &StoreError) -> Response {
    tracing::warn!("team store (gateway authorization): {e}");
    oauth_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "temporarily_unavailable",
        "the team database did not answer; try again in a moment",
    )
}

/// `POST /oauth/register` (RFC 7591): public clients only, within the
/// [`RegistrationLimits`] (the address's rate first, then the sizes, then the store's cap
/// on pending clients).
pub async fn register(State(state): State<TeamState>, peer: PeerAddr, body: Bytes) -> Response {
    let clients = state.gateway_clients();
    if let Err(wait) = clients.registrations.check(peer_ip(&peer)) {
        let secs = retry_after_secs(wait);
        let mut r = oauth_error(
            StatusCode::TOO_MANY_REQUESTS,
            "temporarily_unavailable",
            &format!(
                "too many registrations from your address: try again in {secs} s (a client registers once; a client with a metadata document needs no registration)"
            ),
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        return r;
    }
    if body.len() > MAX_REGISTRATION_BYTES {
        return oauth_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_client_metadata",
            &format!(
                "the registration is larger than {} KiB",
                MAX_REGISTRATION_BYTES / 1024
            ),
        );
    }
    let raw: RawRegistration = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_client_metadata",
                &format!("the registration is not the JSON object RFC 7591 describes: {e}"),
            );
        }
    };
    let reg = match check_registration(raw) {
        Ok(r) => r,
        Err((code, why)) => return oauth_error(StatusCode::BAD_REQUEST, code, &why),
    };
    let cap = clients.limits.max_pending_clients;
    match state
        .store()
        .register_gateway_client_within(&reg.client_name, &reg.redirect_uris, cap)
        .await
    {
        Ok(registered) => {
            if registered.purged > 0 {
                tracing::warn!(
                    purged = registered.purged,
                    cap,
                    "gateway registration: {} registered client(s) nobody approved were removed, oldest first: at most {cap} may wait for approval",
                    registered.purged
                );
            }
            let c = registered.client;
            json_answer(
                StatusCode::CREATED,
                json!({
                    "client_id": c.client_id,
                    "client_id_issued_at": c.created_at,
                    "client_name": c.client_name,
                    "redirect_uris": c.redirect_uris,
                    "grant_types": ["authorization_code", "refresh_token"],
                    "response_types": ["code"],
                    "token_endpoint_auth_method": "none",
                    "scope": SCOPE,
                }),
            )
        }
        Err(e) => store_failure(&e),
    }
}

/// An authorization request as sent (query of the GET, or the consent form's fields).
#[derive(Debug, Default, Deserialize)]
pub struct RawAuthorize {
    #[serde(default)]
    response_type: Option<String>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    redirect_uri: Option<String>,
    #[serde(default)]
    code_challenge: Option<String>,
    #[serde(default)]
    code_challenge_method: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    resource: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    /// The consent form's button (`allow` or `deny`).
    #[serde(default)]
    decision: Option<String>,
}

/// A checked authorization request.
#[derive(Debug, Clone)]
struct Authorize {
    client: GatewayClient,
    /// `host[:port]` of the client's metadata document, for a client that has one.
    document_host: Option<String>,
    redirect_uri: String,
    code_challenge: String,
    state: Option<String>,
    resource: String,
    scope: String,
}

/// Why a request cannot be served: shown on our page (the client or redirect URI cannot be
/// trusted), or sent back to the client's redirect URI.
enum Refusal {
    Page(StatusCode, String),
    Redirect {
        redirect_uri: String,
        state: Option<String>,
        error: &'static str,
        description: String,
    },
}

fn is_pkce_value(v: &str) -> bool {
    (43..=128).contains(&v.len())
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// The client a request names: a metadata document's (fetched or cached), or a
/// registered one from the store, with the document's host for the former.
async fn find_client(
    state: &TeamState,
    client_id: &str,
    addr: Option<IpAddr>,
) -> Result<(GatewayClient, Option<String>), Refusal> {
    let page = |why: &str| Refusal::Page(StatusCode::BAD_REQUEST, why.to_owned());
    if is_document_client_id(client_id) {
        return match state
            .gateway_clients()
            .documents
            .client(state.guard(), client_id, addr)
            .await
        {
            Ok(d) => Ok((d.client.clone(), Some(d.host.clone()))),
            Err(DocumentRefusal::Refused(why)) => Err(page(&why)),
            Err(DocumentRefusal::Limited(wait)) => Err(Refusal::Page(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "too many client metadata documents fetched for your address: try again in {} s",
                    retry_after_secs(wait)
                ),
            )),
        };
    }
    match state.store().gateway_client(client_id).await {
        Ok(Some(c)) => Ok((c, None)),
        Ok(None) => Err(page(
            "this client is not registered here: let the MCP client register again",
        )),
        Err(e) => {
            tracing::warn!("team store (gateway authorization): {e}");
            Err(Refusal::Page(
                StatusCode::SERVICE_UNAVAILABLE,
                "the team database did not answer; try again in a moment".into(),
            ))
        }
    }
}

/// Checks a request in order: client and redirect URI (else our own error page), then
/// the rest (else an error sent to the redirect URI). `addr` is the caller's address
/// (a metadata-document fetch is rate-limited by it).
async fn check_authorize(
    state: &TeamState,
    raw: &RawAuthorize,
    addr: Option<IpAddr>,
) -> Result<Authorize, Refusal> {
    let page = |why: &str| Refusal::Page(StatusCode::BAD_REQUEST, why.to_owned());
    let client_id = raw
        .client_id
        .as_deref()
        .ok_or_else(|| page("the request names no client_id"))?;
    let (client, document_host) = find_client(state, client_id, addr).await?;
    let redirect_uri = raw
        .redirect_uri
        .clone()
        .ok_or_else(|| page("the request names no redirect_uri"))?;
    if !client.redirect_uris.contains(&redirect_uri) {
        return Err(page(if document_host.is_some() {
            "the redirect_uri is not one of the client's redirect_uris in its metadata document: nothing is sent there"
        } else {
            "the redirect_uri is not one this client registered: nothing is sent there"
        }));
    }
    let st = raw.state.clone().filter(|s| s.len() <= MAX_STATE_LEN);
    let back = |error: &'static str, description: &str| Refusal::Redirect {
        redirect_uri: redirect_uri.clone(),
        state: st.clone(),
        error,
        description: description.to_owned(),
    };
    if raw.state.as_ref().is_some_and(|s| s.len() > MAX_STATE_LEN) {
        return Err(back("invalid_request", "state is longer than 1024 bytes"));
    }
    if raw.response_type.as_deref() != Some("code") {
        return Err(back(
            "unsupported_response_type",
            "only response_type=code is supported",
        ));
    }
    if raw.code_challenge_method.as_deref() != Some("S256") {
        return Err(back(
            "invalid_request",
            "PKCE is required with code_challenge_method=S256",
        ));
    }
    let code_challenge = raw
        .code_challenge
        .clone()
        .filter(|c| is_pkce_value(c))
        .ok_or_else(|| back("invalid_request", "a code_challenge (S256) is required"))?;
    let ours = mcp_url(state.cfg());
    let resource = match raw.resource.as_deref() {
        None => ours,
        Some(r) if r == ours => ours,
        Some(_) => {
            return Err(back(
                "invalid_target",
                "this server issues tokens only for its own gateway (its /mcp URL)",
            ));
        }
    };
    let scopes: BTreeSet<&str> = raw
        .scope
        .as_deref()
        .unwrap_or(SCOPE)
        .split(' ')
        .filter(|s| !s.is_empty())
        .collect();
    if scopes.iter().any(|s| *s != SCOPE) {
        return Err(back("invalid_scope", "the only scope is `mcp`"));
    }
    Ok(Authorize {
        client,
        document_host,
        redirect_uri,
        code_challenge,
        state: st,
        resource,
        scope: SCOPE.to_owned(),
    })
}

/// `redirect_uri` with `params` added to its query.
fn redirect_with(redirect_uri: &str, params: &[(&str, &str)]) -> Response {
    let mut url = match url::Url::parse(redirect_uri) {
        Ok(u) => u,
        Err(_) => return error_page(StatusCode::BAD_REQUEST, "the redirect_uri is not a URL"),
    };
    {
        let mut q = url.query_pairs_mut();
        for (k, v) in params {
            q.append_pair(k, v);
        }
    }
    let mut r = Redirect::to(url.as_str()).into_response();
    r.headers_mut().insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    no_store(r)
}

fn refusal_response(cfg: &TeamConfig, refusal: Refusal) -> Response {
    match refusal {
        Refusal::Page(status, why) => error_page(status, &why),
        Refusal::Redirect {
            redirect_uri,
            state,
            error,
            description,
        } => {
            let mut params = vec![
                ("error", error),
                ("error_description", description.as_str()),
                ("iss", cfg.app_origin.as_str()),
            ];
            if let Some(s) = &state {
                params.push(("state", s));
            }
            redirect_with(&redirect_uri, &params)
        }
    }
}

/// `&`, `<`, `>`, `"` and `'` as entities.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A page: no script at all, no framing, nothing cached or sent on as a referrer to another
/// origin; forms
/// only to this app and `form_target` (where the consent's redirect goes).
fn page(status: StatusCode, title: &str, body: &str, form_target: Option<&str>) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>{}</title></head><body>{body}</body></html>",
        escape_html(title)
    );
    let form_action = match form_target {
        Some(t) => format!("'self' {t}"),
        None => "'self'".to_owned(),
    };
    let csp = format!(
        "default-src 'none'; form-action {form_action}; frame-ancestors 'none'; base-uri 'none'"
    );
    let mut r = (status, html).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    if let Ok(v) = HeaderValue::from_str(&csp) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // `same-origin`, not `no-referrer`: under `no-referrer` a browser sends the consent
    // form's POST with `Origin: null`, which the session middleware refuses; this way the
    // POST carries the app's origin and nothing is sent on to the client's redirect URI.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    no_store(r)
}

fn error_page(status: StatusCode, why: &str) -> Response {
    page(
        status,
        "Authorization refused",
        &format!("<h1>Authorization refused</h1><p>{}</p>", shown(why)),
        None,
    )
}

/// The origin of a URL (`scheme://host[:port]`), for the consent page's `form-action`.
fn origin_of(uri: &str) -> Option<String> {
    let url = url::Url::parse(uri).ok()?;
    Some(url.origin().ascii_serialization()).filter(|o| o != "null")
}

fn consent_page(req: &Authorize, email: &str) -> Response {
    let mut hidden = String::new();
    let mut field = |name: &str, value: &str| {
        let _ = write!(
            hidden,
            "<input type=\"hidden\" name=\"{name}\" value=\"{}\">",
            escape_html(value)
        );
    };
    field("response_type", "code");
    field("client_id", &req.client.client_id);
    field("redirect_uri", &req.redirect_uri);
    field("code_challenge", &req.code_challenge);
    field("code_challenge_method", "S256");
    field("resource", &req.resource);
    field("scope", &req.scope);
    if let Some(s) = &req.state {
        field("state", s);
    }
    let published = req.document_host.as_deref().map_or(String::new(), |h| {
        format!(
            " (described by its metadata document on <code>{}</code>)",
            shown(h)
        )
    });
    let body = format!(
        "<h1>Allow an MCP client?</h1>\
         <p><strong>{client}</strong>{published} asks to use your servers in this Switchboard team, \
         as <strong>{email}</strong>, through the team gateway <code>{resource}</code>.</p>\
         <p>It will be sent back to <code>{redirect}</code>. Approve only a client you \
         started yourself.</p>\
         <form method=\"post\" action=\"/oauth/authorize\">{hidden}\
         <button type=\"submit\" name=\"decision\" value=\"allow\">Allow</button> \
         <button type=\"submit\" name=\"decision\" value=\"deny\">Deny</button></form>",
        client = shown(&req.client.client_name),
        email = shown(email),
        resource = shown(&req.resource),
        redirect = shown(&req.redirect_uri),
    );
    page(
        StatusCode::OK,
        "Allow an MCP client?",
        &body,
        origin_of(&req.redirect_uri).as_deref(),
    )
}

/// `GET /oauth/authorize`: checks the request, then either sends the browser through
/// the team sign-in (and back here) or shows the consent page for the signed-in user.
pub async fn authorize(
    State(state): State<TeamState>,
    peer: PeerAddr,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
    Query(raw): Query<RawAuthorize>,
) -> Response {
    let cfg = state.cfg();
    if !host_allowed(cfg, &headers) {
        return error_page(
            StatusCode::FORBIDDEN,
            &format!("unexpected Host header: open {}", cfg.app_origin),
        );
    }
    let req = match check_authorize(&state, &raw, peer_ip(&peer)).await {
        Ok(r) => r,
        Err(refusal) => return refusal_response(cfg, refusal),
    };
    let user = match cookie_value(&headers, cfg.cookie_name()) {
        Some(c) => match state.store().session_user(&c).await {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!("team store (gateway authorization): {e}");
                return error_page(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the team database did not answer; try again in a moment",
                );
            }
        },
        None => None,
    };
    let Some(user) = user else {
        let back = format!("/oauth/authorize?{}", query.unwrap_or_default());
        let login = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("return", &back)
            .finish();
        return no_store(Redirect::to(&format!("/auth/login?{login}")).into_response());
    };
    consent_page(&req, &user.email)
}

/// `POST /oauth/authorize`: the consent form (a `Session` route: the session middleware
/// has checked Host, the app's own `Origin` and the cookie). The request is checked again
/// from its fields; `allow` makes a code for the signed-in user, anything else is
/// `access_denied`.
pub async fn approve(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    peer: PeerAddr,
    body: Bytes,
) -> Response {
    let cfg = state.cfg();
    if body.len() > MAX_FORM_BYTES {
        return error_page(StatusCode::PAYLOAD_TOO_LARGE, "the form is too large");
    }
    let raw: RawAuthorize = match parse_form(&body) {
        Ok(r) => r,
        Err(e) => {
            return error_page(StatusCode::BAD_REQUEST, &format!("unreadable form: {e}"));
        }
    };
    let req = match check_authorize(&state, &raw, peer_ip(&peer)).await {
        Ok(r) => r,
        Err(refusal) => return refusal_response(cfg, refusal),
    };
    let mut params: Vec<(&str, &str)> = vec![("iss", cfg.app_origin.as_str())];
    if let Some(s) = &req.state {
        params.push(("state", s));
    }
    if raw.decision.as_deref() != Some("allow") {
        params.push(("error", "access_denied"));
        params.push(("error_description", "the user denied the request"));
        return redirect_with(&req.redirect_uri, &params);
    }
    // A metadata-document client gets its row now (grants refer to it).
    if req.document_host.is_some()
        && let Err(e) = state.store().put_document_client(&req.client).await
    {
        tracing::warn!("team store (gateway authorization): {e}");
        return error_page(
            StatusCode::SERVICE_UNAVAILABLE,
            "the team database did not answer; try again in a moment",
        );
    }
    let approval = GatewayApproval {
        client_id: req.client.client_id.clone(),
        redirect_uri: req.redirect_uri.clone(),
        code_challenge: req.code_challenge.clone(),
        resource: req.resource.clone(),
        scope: req.scope.clone(),
    };
    let code = match state
        .store()
        .approve_gateway_grant(signed.cookie(), &approval, CODE_TTL)
        .await
    {
        Ok(c) => c,
        Err(StoreError::Invalid(why)) => return error_page(StatusCode::UNAUTHORIZED, &why),
        Err(e) => {
            tracing::warn!("team store (gateway authorization): {e}");
            return error_page(
                StatusCode::SERVICE_UNAVAILABLE,
                "the team database did not answer; try again in a moment",
            );
        }
    };
    params.push(("code", &code));
    redirect_with(&req.redirect_uri, &params)
}

/// A token request as sent (form-encoded).
#[derive(Debug, Default, Deserialize)]
struct RawToken {
    #[serde(default)]
    grant_type: Option<String>,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    redirect_uri: Option<String>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    code_verifier: Option<String>,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    resource: Option<String>,
}

/// The S256 challenge of a verifier.
pub fn s256(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn invalid_grant(why: &str) -> Response {
    oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", why)
}

fn tokens_answer(t: &switchboard_store::IssuedTokens) -> Response {
    json_answer(
        StatusCode::OK,
        json!({
            "access_token": t.access_token,
            "token_type": "Bearer",
            "expires_in": t.expires_in,
            "refresh_token": t.refresh_token,
            "scope": t.scope,
        }),
    )
}

/// `POST /oauth/token`: `authorization_code` (PKCE S256) and `refresh_token` (rotated).
pub async fn token(State(state): State<TeamState>, body: Bytes) -> Response {
    if body.len() > MAX_FORM_BYTES {
        return oauth_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request",
            "the token request is larger than 16 KiB",
        );
    }
    let raw: RawToken = match parse_form(&body) {
        Ok(r) => r,
        Err(e) => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                &format!("send the token request form-encoded: {e}"),
            );
        }
    };
    let ours = mcp_url(state.cfg());
    if raw.resource.as_deref().is_some_and(|r| r != ours) {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_target",
            "this server issues tokens only for its own gateway (its /mcp URL)",
        );
    }
    let Some(client_id) = raw.client_id.as_deref() else {
        return oauth_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "name the client_id (public clients authenticate with it and PKCE)",
        );
    };
    match raw.grant_type.as_deref() {
        Some("authorization_code") => code_grant(&state, &raw, client_id).await,
        Some("refresh_token") => {
            let Some(refresh) = raw.refresh_token.as_deref() else {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    "refresh_token is missing",
                );
            };
            match state
                .store()
                .refresh_gateway_tokens(refresh, client_id, TOKEN_LIFETIMES)
                .await
            {
                Ok(RefreshOutcome::Issued(t)) => tokens_answer(&t),
                Ok(RefreshOutcome::Invalid) => invalid_grant(
                    "the refresh token is unknown, expired, another client's, or its sign-in session ended: authorize again",
                ),
                Ok(RefreshOutcome::Reused) => invalid_grant(
                    "the refresh token was used before: the grant is ended; authorize again",
                ),
                Err(e) => store_failure(&e),
            }
        }
        other => oauth_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            &format!(
                "grant_type {:?}: use authorization_code or refresh_token",
                other.unwrap_or("")
            ),
        ),
    }
}

/// A revocation request as sent (RFC 7009, form-encoded).
#[derive(Debug, Default, Deserialize)]
struct RawRevoke {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    token_type_hint: Option<String>,
    #[serde(default)]
    client_id: Option<String>,
}

/// `POST /oauth/revoke` (RFC 7009): a public client names itself with `client_id` and
/// revokes a token issued to it. A refresh token ends its grant (with every token of it),
/// an access token only itself. A token this server does not know (never issued,
/// expired, revoked before) is answered 200, as the RFC says; another client's token is
/// refused and left alone. An unknown `token_type_hint` is ignored (both kinds are
/// searched).
pub async fn revoke(State(state): State<TeamState>, body: Bytes) -> Response {
    if body.len() > MAX_FORM_BYTES {
        return oauth_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request",
            "the revocation request is larger than 16 KiB",
        );
    }
    let raw: RawRevoke = match parse_form(&body) {
        Ok(r) => r,
        Err(e) => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                &format!("send the revocation request form-encoded: {e}"),
            );
        }
    };
    let Some(client_id) = raw.client_id.as_deref() else {
        return oauth_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "name the client_id the token was issued to (public clients authenticate with it)",
        );
    };
    let Some(token) = raw.token.as_deref().filter(|t| !t.is_empty()) else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "name the token to revoke (`token`)",
        );
    };
    let hint = match raw.token_type_hint.as_deref() {
        Some("access_token") => Some(TokenHint::Access),
        Some("refresh_token") => Some(TokenHint::Refresh),
        _ => None,
    };
    match state
        .store()
        .revoke_gateway_token(token, client_id, hint)
        .await
    {
        Ok(Revocation::Grant | Revocation::AccessToken | Revocation::Unknown) => {
            no_store(StatusCode::OK.into_response())
        }
        Ok(Revocation::OtherClient) => oauth_error(
            StatusCode::BAD_REQUEST,
            "unauthorized_client",
            "the token was not issued to this client_id: nothing was revoked",
        ),
        Err(e) => store_failure(&e),
    }
}

/// Where a client's redirect URIs point (`host[:port]` of each, once): what a user
/// recognises a client by, besides its self-chosen name.
fn redirect_hosts(uris: &[String]) -> Vec<String> {
    let mut hosts: Vec<String> = Vec::new();
    for u in uris {
        if let Ok(url) = url::Url::parse(u)
            && let Some(host) = url.host_str()
        {
            let h = match url.port() {
                Some(p) => format!("{host}:{p}"),
                None => host.to_owned(),
            };
            if !hosts.contains(&h) {
                hosts.push(h);
            }
        }
    }
    hosts
}

/// `GET /api/gateway/grants`: the caller's connected clients (never a token).
pub async fn my_grants(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
) -> ApiResult<Json<Value>> {
    let grants = state
        .store()
        .for_user(&signed.user.id)
        .gateway_grants()
        .await
        .map_err(store_error)?;
    let list: Vec<Value> = grants
        .iter()
        .map(|g| {
            json!({
                "id": g.id.as_str(),
                "client_name": visible(&g.client_name),
                "redirect_hosts": redirect_hosts(&g.redirect_uris),
                "created_at": g.created_at,
                "last_used_at": g.last_used_at,
            })
        })
        .collect();
    Ok(Json(json!({ "grants": list })))
}

/// `DELETE /api/gateway/grants/{id}`: ends the caller's grant `id` and every token of it;
/// another user's grant is not found.
pub async fn revoke_my_grant(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let ended = state
        .store()
        .for_user(&signed.user.id)
        .end_gateway_grant(&id)
        .await
        .map_err(store_error)?;
    if !ended {
        return Err(ApiError::not_found(
            "you have no connected client with this id: reload the list",
        ));
    }
    Ok(Json(json!({"ok": true})))
}

async fn code_grant(state: &TeamState, raw: &RawToken, client_id: &str) -> Response {
    let (Some(code), Some(verifier)) = (raw.code.as_deref(), raw.code_verifier.as_deref()) else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "code and code_verifier are required",
        );
    };
    let store = state.store();
    let taken = match store.take_gateway_code(code).await {
        Ok(Some(t)) => t,
        Ok(None) => {
            return invalid_grant(
                "the code is unknown, used, expired, or its sign-in session ended",
            );
        }
        Err(e) => return store_failure(&e),
    };
    let matches = taken.client_id == client_id
        && raw.redirect_uri.as_deref() == Some(taken.redirect_uri.as_str())
        && is_pkce_value(verifier)
        && constant_time_eq(s256(verifier).as_bytes(), taken.code_challenge.as_bytes())
        && raw.resource.as_deref().is_none_or(|r| r == taken.resource);
    if !matches {
        // A code presented with the wrong verifier, client or redirect URI is spent, and
        // so is its grant.
        if let Err(e) = store.end_gateway_grant(&taken.grant).await {
            tracing::warn!("team store (gateway authorization): {e}");
        }
        return invalid_grant("the code does not match this client, redirect_uri or code_verifier");
    }
    match store
        .issue_gateway_tokens(&taken.grant, TOKEN_LIFETIMES)
        .await
    {
        Ok(t) => tokens_answer(&t),
        Err(StoreError::Invalid(why)) => invalid_grant(&why),
        Err(e) => store_failure(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_are_https_or_loopback_http() {
        for ok in [
            "https://app.example/cb",
            "http://127.0.0.1:33418/callback",
            "http://[::1]:9/cb",
            "http://localhost:8080/cb?x=1",
        ] {
            assert_eq!(redirect_uri_allowed(ok), Ok(()), "{ok}");
        }
        for bad in [
            "http://evil.example/cb",
            "http://10.0.0.1/cb",
            "javascript:alert(1)",
            "custom-scheme:/cb",
            "https://app.example/cb#frag",
            "https://user:pw@app.example/cb",
            "/relative",
            "http://localhost.evil.example/cb",
        ] {
            assert!(redirect_uri_allowed(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn registration_is_checked() {
        let raw = |uris: &[&str], method: Option<&str>| RawRegistration {
            redirect_uris: uris.iter().map(|s| (*s).to_owned()).collect(),
            client_name: Some("<b>x</b>\u{7}".into()),
            token_endpoint_auth_method: method.map(str::to_owned),
            ..Default::default()
        };
        let ok = check_registration(raw(&["http://127.0.0.1:1/cb"], Some("none"))).unwrap();
        assert_eq!(ok.client_name, "<b>x</b>");
        assert_eq!(
            check_registration(raw(&[], None)).unwrap_err().0,
            "invalid_redirect_uri"
        );
        assert_eq!(
            check_registration(raw(&["http://127.0.0.1:1/cb"], Some("client_secret_basic")))
                .unwrap_err()
                .0,
            "invalid_client_metadata"
        );
        let named = |name: String| RawRegistration {
            redirect_uris: vec!["http://127.0.0.1:1/cb".into()],
            client_name: Some(name),
            ..Default::default()
        };
        assert!(check_registration(named("é".repeat(100))).is_ok());
        let (code, why) = check_registration(named("é".repeat(101))).unwrap_err();
        assert_eq!(code, "invalid_client_metadata");
        assert!(why.contains("client_name"), "{why}");
        let (_, why) = check_registration(RawRegistration {
            redirect_uris: vec!["http://127.0.0.1:1/cb".into()],
            software_id: Some("x".repeat(256)),
            ..Default::default()
        })
        .unwrap_err();
        assert!(why.contains("software_id"), "{why}");
    }

    #[test]
    fn shown_text_has_bidi_made_visible_and_html_escaped() {
        assert_eq!(
            shown("<b>\u{202e}gpj.exe</b>"),
            "&lt;b&gt;\\u{202e}gpj.exe&lt;/b&gt;"
        );
    }

    #[test]
    fn html_is_escaped_and_pkce_is_s256() {
        assert_eq!(
            escape_html("<script>\"'&"),
            "&lt;script&gt;&quot;&#39;&amp;"
        );
        // RFC 7636 appendix B.
        assert_eq!(
            s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        assert!(!is_pkce_value("short"));
    }
}
