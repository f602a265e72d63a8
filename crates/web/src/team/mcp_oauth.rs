//! A signed-in user's OAuth login to one of their MCP servers or to a catalog server they
//! enabled (`ServerRef`: the two keep separate tokens), and the refresh of the tokens it
//! gives, with nothing kept in the process (any instance answers any step). The catalog
//! routes (`POST /api/catalog/{name}/oauth/start|logout`) use the same steps:
//! - `POST /api/servers/{name}/oauth/start` ([`start`]): discovery through
//!   `switchboard-auth` (RFC 9728 → RFC 8414, dynamic client registration for this
//!   app's callback, else the fixed fallback client, endpoints checked by the URL
//!   guard), then a pending server login in the store (`state` hashed, PKCE verifier
//!   sealed, bound to the user, the server's name and URL, [`LOGIN_TTL`]); answers
//!   `{authorizeUrl}` for the page to open in a popup.
//! - `GET /oauth/mcp/callback` ([`callback`], [`CALLBACK_PATH`]): public (the
//!   authorization server's redirect), but it acts only for the user whose session
//!   cookie arrives: the pending login is taken for that user (another user's, an
//!   unknown or a used `state` finds nothing and uses nothing up), the code is exchanged
//!   at the token endpoint and the tokens are saved through `for_user(..)
//!   .put_oauth_tokens`, only if the server is still there (enabled, for a catalog
//!   server) at the URL the login began with. The answer is a small page that posts
//!   `{type:"mcp-oauth-result", server, ok, error?}` to its opener (target origin: the
//!   app's) and closes, or, with no opener (mobile, popup blocked), goes back to the app
//!   (`/?mcpOAuth=ok|error&server=…`). The page allows its one script by hash (CSP
//!   `default-src 'none'`, `frame-ancestors 'none'`) and is sent `no-store` and
//!   `no-referrer`. No token is in any answer. RFC 9207 (mix-up
//!   defence, [`check_issuer`]): an `iss` in the response must be exactly the issuer
//!   the login started with, and is required when that server's metadata says
//!   `authorization_response_iss_parameter_supported`; otherwise the login is used up
//!   and its code goes nowhere.
//! - `POST /api/servers/{name}/oauth/logout` ([`logout`]): removes the user's tokens.
//! - [`usable_tokens`]: before a connection uses saved tokens that expire within
//!   [`REFRESH_BUFFER`] (half its lifetime for a token that lives under ten minutes),
//!   they are refreshed under the store's refresh lease, so one
//!   instance at a time spends a (rotating) refresh token; an instance that finds the
//!   lease taken waits for the holder's tokens and uses them. A refresh token the
//!   authorization server refuses (`invalid_grant`) is dead: the tokens are removed
//!   and the answer says to sign in to the server again.
//!
//! Must not: put a token, verifier or code in an answer or a log; reach tokens except
//! through `Store::for_user` with the signed-in user's id; send a token request past
//! the URL guard or without a time limit.

use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchboard_auth::{BrowserClientOptions, DiscoveryClient, TokenSet, now_ms};
use switchboard_net::{GuardedClient, LimitedBody, read_limited};
use switchboard_store::{
    CatalogLaunch, NewServerLogin, PendingServerLogin, Secret, ServerLoginClient, ServerRef,
    StoredTokens, UserStore,
};

use super::cache::server_key;
use super::catalog::{catalog_entry_or_404, enabled_catalog_server};
use super::servers::{server_or_404, user_store};
use super::session::SignedIn;
use super::state::{TeamState, store_error};
use crate::access::cookie_value;
use crate::error::{ApiError, ApiResult};

/// The path of the team app's OAuth callback for MCP servers.
pub const CALLBACK_PATH: &str = "/oauth/mcp/callback";
/// How long a server login waits for its callback.
pub const LOGIN_TTL: Duration = Duration::from_secs(600);
/// Saved tokens expiring within this are refreshed before use.
pub const REFRESH_BUFFER: Duration = Duration::from_secs(300);
/// How long a refresh may hold the lease (a dead instance's lease runs out after it).
const REFRESH_LEASE: Duration = Duration::from_secs(60);
/// How long a request waits for another instance's refresh before using what it has.
const REFRESH_WAIT: Duration = Duration::from_secs(20);
const REFRESH_POLL: Duration = Duration::from_millis(150);
/// Time limits of discovery and of each token request.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(30);
const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest token endpoint answer read.
const MAX_TOKEN_BODY: usize = 64 * 1024;

/// What team mode saves as a user's tokens for a server: the token set (the shape the
/// client cache reads its bearer from) and what a refresh needs (nothing secret beyond
/// the tokens; the client is public).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TeamTokens {
    #[serde(flatten)]
    set: TokenSet,
    #[serde(default)]
    token_url: Option<String>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    resource: Option<String>,
    /// When the access token was issued (ms since the epoch).
    #[serde(default)]
    obtained_at: Option<u64>,
}

impl TeamTokens {
    fn sealed(&self) -> ApiResult<(Secret, Option<i64>)> {
        let text = serde_json::to_string(self)
            .map_err(|e| ApiError::internal(format!("cannot encode the tokens: {e}")))?;
        let secs = self
            .set
            .expires_at
            .map(|ms| i64::try_from(ms / 1000).unwrap_or(i64::MAX));
        Ok((Secret::new(text), secs))
    }

    /// [`REFRESH_BUFFER`] before expiry, or at half its lifetime when the token lives
    /// less than twice that (as the personal app's `StoredLogin::refresh_due`), so a
    /// token just refreshed is not due again at once.
    fn refresh_due(&self, now: u64) -> bool {
        let Some(expires_at) = self.set.expires_at else {
            return false;
        };
        let buffer = u64::try_from(REFRESH_BUFFER.as_millis()).unwrap_or(u64::MAX);
        let margin = match self.obtained_at {
            Some(at) => expires_at.saturating_sub(at).saturating_div(2).min(buffer),
            None => buffer,
        };
        now.saturating_add(margin) >= expires_at
    }

    fn is_expired(&self, now: u64) -> bool {
        self.set.expires_at.is_some_and(|e| now >= e)
    }
}

fn parse_tokens(t: &StoredTokens) -> Option<TeamTokens> {
    serde_json::from_str(t.tokens.expose()).ok()
}

fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// `POST /api/servers/{name}/oauth/start`: `{authorizeUrl}`.
pub async fn start(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    start_login(&state, &signed, ServerRef::Own(name)).await
}

/// The URL a login to `server` is for: the user's server's, or the enabled catalog
/// server's (a stdio one has none).
async fn login_url(state: &TeamState, us: &UserStore, server: &ServerRef) -> ApiResult<String> {
    match server {
        ServerRef::Own(name) => Ok(server_or_404(us, name).await?.url),
        ServerRef::Catalog(name) => {
            let entry = enabled_catalog_server(state, us, name).await?;
            match entry.launch {
                CatalogLaunch::Http { url, .. } => Ok(url),
                CatalogLaunch::Stdio { .. } => Err(ApiError::bad_request(format!(
                    "catalog server `{name}` runs on the server (stdio): it has no OAuth login"
                ))),
            }
        }
    }
}

/// Start a login to the caller's server or enabled catalog server: `{authorizeUrl}`.
pub(super) async fn start_login(
    state: &TeamState,
    signed: &SignedIn,
    server: ServerRef,
) -> ApiResult<Json<Value>> {
    let us = user_store(state, signed);
    let server_url = login_url(state, &us, &server).await?;
    let name = server.name().to_owned();
    let redirect_uri = state.cfg().oauth_redirect_uri();
    let found = tokio::time::timeout(
        DISCOVERY_TIMEOUT,
        DiscoveryClient::new(state.guard().clone()).browser_client(
            &name,
            &server_url,
            None,
            &redirect_uri,
            &BrowserClientOptions::default(),
        ),
    )
    .await
    .map_err(|_| {
        ApiError::upstream(format!(
            "OAuth discovery for `{name}` took longer than {} s; check that its authorization server answers",
            DISCOVERY_TIMEOUT.as_secs()
        ))
    })?
    .map_err(|e| ApiError::upstream(format!("OAuth discovery for `{name}` failed: {e}")))?;
    let config = found.config;
    let client = ServerLoginClient {
        client_id: config.client_id.clone(),
        token_url: config.token_url.clone(),
        redirect_uri: redirect_uri.clone(),
        resource: config.resource.clone(),
        scopes: config.scopes.clone(),
        issuer: Some(found.issuer.clone()),
        iss_required: found.iss_parameter_supported,
    };
    let login = NewServerLogin {
        server_name: name.clone(),
        server_url,
        client,
    };
    let started = match server {
        ServerRef::Own(_) => us.start_server_login(&login, LOGIN_TTL).await,
        ServerRef::Catalog(_) => us.start_catalog_login(&login, LOGIN_TTL).await,
    }
    .map_err(store_error)?;
    let challenge = b64url(&Sha256::digest(started.verifier.expose().as_bytes()));
    let mut url = url::Url::parse(&config.authorization_url).map_err(|e| {
        ApiError::upstream(format!(
            "the authorization endpoint of `{name}` is not a URL: {e}"
        ))
    })?;
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code");
        q.append_pair("client_id", &config.client_id);
        q.append_pair("redirect_uri", &redirect_uri);
        q.append_pair("code_challenge", &challenge);
        q.append_pair("code_challenge_method", "S256");
        q.append_pair("state", &started.state);
        if !config.scopes.is_empty() {
            q.append_pair("scope", &config.scopes.join(" "));
        }
        if let Some(r) = &config.resource {
            q.append_pair("resource", r);
        }
    }
    Ok(Json(json!({"authorizeUrl": url.to_string()})))
}

/// `POST /api/servers/{name}/oauth/logout`: `{ok, server, removed}`.
pub async fn logout(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    logout_from(&state, &signed, ServerRef::Own(name)).await
}

/// Remove the caller's tokens for their server or enabled catalog server.
pub(super) async fn logout_from(
    state: &TeamState,
    signed: &SignedIn,
    server: ServerRef,
) -> ApiResult<Json<Value>> {
    let us = user_store(state, signed);
    match &server {
        ServerRef::Own(name) => {
            server_or_404(&us, name).await?;
        }
        ServerRef::Catalog(name) => {
            catalog_entry_or_404(&us, name).await?;
        }
    }
    let removed = us.remove_tokens(&server).await.map_err(store_error)?;
    state.cache().forget(&signed.user.id, &server_key(&server));
    Ok(Json(
        json!({"ok": true, "server": server.name(), "removed": removed}),
    ))
}

/// The authorization server's redirect, as sent (step one: shape only).
#[derive(Debug, Deserialize)]
pub struct RawCallback {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    error: Option<String>,
    /// RFC 9207: the issuer that sent this response.
    #[serde(default)]
    iss: Option<String>,
}

/// The outcome the callback page reports.
struct Outcome {
    status: StatusCode,
    server: Option<String>,
    error: Option<String>,
}

impl Outcome {
    fn refused(status: StatusCode, why: impl Into<String>) -> Self {
        Self {
            status,
            server: None,
            error: Some(why.into()),
        }
    }
}

/// `GET /oauth/mcp/callback`.
pub async fn callback(
    State(state): State<TeamState>,
    headers: HeaderMap,
    Query(raw): Query<RawCallback>,
) -> Response {
    let outcome = complete(&state, &headers, raw).await;
    callback_page(&state.cfg().app_origin, outcome)
}

async fn complete(state: &TeamState, headers: &HeaderMap, raw: RawCallback) -> Outcome {
    let Some(login_state) = raw.state.filter(|s| !s.is_empty() && s.len() <= 512) else {
        return Outcome::refused(
            StatusCode::BAD_REQUEST,
            "the authorization server's answer has no `state`: start the login again",
        );
    };
    // Only the user who started the login may complete it: the session cookie decides.
    let cookie = cookie_value(headers, state.cfg().cookie_name());
    let user = match cookie {
        None => None,
        Some(c) => match state.store().session_user(&c).await {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!("team store: {e}");
                return Outcome::refused(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the team database did not answer; try the login again in a moment",
                );
            }
        },
    };
    let Some(user) = user else {
        return Outcome::refused(
            StatusCode::UNAUTHORIZED,
            "not signed in to the team app in this browser: sign in, then start the login again",
        );
    };
    let us = state.store().for_user(&user.id);
    let pending = match us.take_server_login(&login_state).await {
        Ok(Some(p)) => p,
        Ok(None) => {
            return Outcome::refused(
                StatusCode::BAD_REQUEST,
                "this login is unknown, expired, already used or was started by someone else: start it again from your servers",
            );
        }
        Err(e) => {
            tracing::warn!("team store: {e}");
            return Outcome::refused(
                StatusCode::SERVICE_UNAVAILABLE,
                "the team database did not answer; start the login again in a moment",
            );
        }
    };
    let server = server_key(&pending.server);
    let failed = |status: StatusCode, why: String| Outcome {
        status,
        server: Some(server.clone()),
        error: Some(why),
    };
    // The mix-up defence comes first, for error responses too: the login is used up.
    if let Err(why) = check_issuer(&pending.client, raw.iss.as_deref()) {
        return failed(StatusCode::BAD_REQUEST, why);
    }
    if let Some(e) = raw.error {
        return failed(
            StatusCode::BAD_REQUEST,
            format!(
                "the authorization server refused the login ({}): start it again",
                sanitize(&e)
            ),
        );
    }
    let Some(code) = raw.code.filter(|c| !c.is_empty()) else {
        return failed(
            StatusCode::BAD_REQUEST,
            "the authorization server's answer has no `code`: start the login again".into(),
        );
    };
    match exchange_and_save(state, &us, &pending, &code).await {
        Ok(()) => {
            state.cache().forget(&user.id, &server_key(&pending.server));
            Outcome {
                status: StatusCode::OK,
                server: Some(server),
                error: None,
            }
        }
        Err(e) => failed(e.status, e.message),
    }
}

/// RFC 9207 for an authorization response: an `iss` that is there must be exactly the
/// issuer the login was started with; a server whose metadata promised `iss`
/// (`authorization_response_iss_parameter_supported`) must send it. Otherwise the
/// response may come from another authorization server (a mix-up attack) and its code
/// is not sent anywhere.
fn check_issuer(client: &ServerLoginClient, iss: Option<&str>) -> Result<(), String> {
    match (iss, client.issuer.as_deref()) {
        (Some(got), Some(want)) if got == want => Ok(()),
        (Some(got), want) => Err(format!(
            "the authorization response came from issuer `{}`, not `{}` where this login started (RFC 9207: it may be another server's answer); nothing was saved: start the login again",
            sanitize(got),
            want.unwrap_or("unknown")
        )),
        (None, _) if client.iss_required => Err(format!(
            "the authorization response has no `iss` although `{}` promises one (RFC 9207); nothing was saved: start the login again",
            client
                .issuer
                .as_deref()
                .unwrap_or("the authorization server")
        )),
        (None, _) => Ok(()),
    }
}

async fn exchange_and_save(
    state: &TeamState,
    us: &UserStore,
    pending: &PendingServerLogin,
    code: &str,
) -> ApiResult<()> {
    // The server must still be there (enabled, for a catalog server) at the URL the
    // login was started for.
    let name = &pending.server_name;
    let still_there = match &pending.server {
        ServerRef::Own(_) => us
            .server(name)
            .await
            .map_err(store_error)?
            .is_some_and(|r| r.url == pending.server_url),
        ServerRef::Catalog(_) => us
            .catalog_server(name)
            .await
            .map_err(store_error)?
            .is_some_and(|e| {
                e.enabled
                    && matches!(&e.record.server.launch,
                        CatalogLaunch::Http { url, .. } if *url == pending.server_url)
            }),
    };
    if !still_there {
        return Err(ApiError::bad_request(format!(
            "server `{name}` was removed, disabled or its URL changed during the login: start it again"
        )));
    }
    let c = &pending.client;
    let mut form = vec![
        ("grant_type", "authorization_code".to_owned()),
        ("code", code.to_owned()),
        ("redirect_uri", c.redirect_uri.clone()),
        ("client_id", c.client_id.clone()),
        ("code_verifier", pending.verifier.expose().to_owned()),
    ];
    if let Some(r) = &c.resource {
        form.push(("resource", r.clone()));
    }
    let set = token_request(state.guard(), &c.token_url, &form)
        .await
        .map_err(|e| ApiError::upstream(format!("logging in to `{name}`: {e}")))?;
    let tokens = TeamTokens {
        set,
        token_url: Some(c.token_url.clone()),
        client_id: Some(c.client_id.clone()),
        resource: c.resource.clone(),
        obtained_at: Some(now_ms()),
    };
    let (secret, expires_at) = tokens.sealed()?;
    us.put_tokens(&pending.server, &secret, expires_at)
        .await
        .map_err(store_error)
}

/// Why a token request failed (no token in it).
#[derive(Debug)]
struct TokenFailure {
    /// The OAuth `error` code, when the endpoint sent one.
    error: Option<String>,
    message: String,
}

impl std::fmt::Display for TokenFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Printable, bounded text from an authorization server.
fn sanitize(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect::<String>()
}

/// A token request through the URL guard, under [`TOKEN_TIMEOUT`], reading at most
/// [`MAX_TOKEN_BODY`].
async fn token_request(
    guard: &GuardedClient,
    token_url: &str,
    form: &[(&str, String)],
) -> Result<TokenSet, TokenFailure> {
    let fail = |message: String| TokenFailure {
        error: None,
        message,
    };
    let body = {
        let mut ser = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in form {
            ser.append_pair(k, v);
        }
        ser.finish()
    };
    let shown = switchboard_net::redacted(token_url);
    let request = guard
        .post(token_url)
        .header("Accept", "application/json")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body)
        .timeout(TOKEN_TIMEOUT);
    let response = guard
        .send(request)
        .await
        .map_err(|e| fail(format!("the token endpoint {shown} did not answer: {e}")))?;
    let status = response.status();
    let bytes = match read_limited(response, MAX_TOKEN_BODY).await {
        Ok(LimitedBody::Whole(b)) => b,
        Ok(LimitedBody::Cut(_)) => {
            return Err(fail(format!(
                "the token endpoint {shown} answered more than {MAX_TOKEN_BODY} bytes"
            )));
        }
        Err(_) => {
            return Err(fail(format!(
                "the token endpoint {shown} broke off its answer"
            )));
        }
    };
    let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if !status.is_success() {
        let error = v.get("error").and_then(Value::as_str).map(sanitize);
        let description = v
            .get("error_description")
            .and_then(Value::as_str)
            .map(sanitize);
        return Err(TokenFailure {
            message: format!(
                "the token endpoint {shown} answered {status}{}{}",
                error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default(),
                description.map(|d| format!(" ({d})")).unwrap_or_default()
            ),
            error,
        });
    }
    let access_token = v
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            fail(format!(
                "the token endpoint {shown} answered without an `access_token`"
            ))
        })?
        .to_owned();
    let expires_at = v
        .get("expires_in")
        .and_then(Value::as_u64)
        .map(|s| now_ms().saturating_add(s.saturating_mul(1000)));
    Ok(TokenSet {
        access_token,
        refresh_token: v
            .get("refresh_token")
            .and_then(Value::as_str)
            .map(str::to_owned),
        expires_at,
        token_type: "Bearer".into(),
        scope: v.get("scope").and_then(Value::as_str).map(str::to_owned),
    })
}

/// The refresh-token grant for `old`; the new set keeps the old refresh token when the
/// server sends none (no rotation).
async fn refresh(guard: &GuardedClient, old: &TeamTokens) -> Result<TeamTokens, TokenFailure> {
    let missing = |what: &str| TokenFailure {
        error: None,
        message: format!("the saved login has no {what}: log in again"),
    };
    let refresh_token = old
        .set
        .refresh_token
        .clone()
        .ok_or_else(|| missing("refresh token"))?;
    let token_url = old.token_url.clone().ok_or_else(|| missing("token URL"))?;
    let mut form = vec![
        ("grant_type", "refresh_token".to_owned()),
        ("refresh_token", refresh_token),
    ];
    if let Some(id) = &old.client_id {
        form.push(("client_id", id.clone()));
    }
    if let Some(r) = &old.resource {
        form.push(("resource", r.clone()));
    }
    let mut set = token_request(guard, &token_url, &form).await?;
    if set.refresh_token.is_none() {
        set.refresh_token = old.set.refresh_token.clone();
    }
    if set.scope.is_none() {
        set.scope = old.set.scope.clone();
    }
    Ok(TeamTokens {
        set,
        token_url: Some(token_url),
        client_id: old.client_id.clone(),
        resource: old.resource.clone(),
        obtained_at: Some(now_ms()),
    })
}

/// The refresh token was refused (`invalid_grant`): the saved login is gone, and the
/// user is told where to sign in again.
fn login_refused(name: &str, why: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_GATEWAY,
        "needs_oauth",
        format!(
            "the login to `{name}` is no longer valid ({why}); its saved tokens were removed: sign in to `{name}` again (Servers → Test → Sign in to this server)"
        ),
    )
}

fn login_again(name: &str, why: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_GATEWAY,
        "needs_oauth",
        format!("the login to `{name}` has expired ({why}): log in to it again"),
    )
}

/// The user's tokens for server `name`, ready to use: when they expire within
/// [`REFRESH_BUFFER`] and can be refreshed, refreshed first under the store's lease (one
/// instance at a time; an instance that finds the lease taken waits for the holder's
/// tokens). A refresh that fails leaves the tokens as they are while they still work.
///
/// # Errors
/// A store failure, or tokens that have expired and could not be refreshed.
pub(crate) async fn usable_tokens(
    state: &TeamState,
    us: &UserStore,
    server: &ServerRef,
) -> ApiResult<Option<StoredTokens>> {
    fresh_tokens(state, us, server, None).await
}

/// After the server answered 401 to `rejected`: the tokens refreshed once under the
/// lease (or, when another request or instance already replaced them, the new ones).
///
/// # Errors
/// A store failure; tokens that cannot be refreshed (no refresh token, or the refresh
/// failed): the user has to log in to the server again.
pub(crate) async fn tokens_after_401(
    state: &TeamState,
    us: &UserStore,
    server: &ServerRef,
    rejected: &StoredTokens,
) -> ApiResult<Option<StoredTokens>> {
    let name = server.name();
    let refreshable = parse_tokens(rejected)
        .is_some_and(|p| p.set.refresh_token.is_some() && p.token_url.is_some());
    if !refreshable {
        return Err(login_again(
            name,
            "the server refused the access token and the login has no refresh token",
        ));
    }
    fresh_tokens(state, us, server, Some(rejected)).await
}

async fn fresh_tokens(
    state: &TeamState,
    us: &UserStore,
    server: &ServerRef,
    rejected: Option<&StoredTokens>,
) -> ApiResult<Option<StoredTokens>> {
    let name = server.name();
    let Some(mut seen) = us.tokens(server).await.map_err(store_error)? else {
        return Ok(None);
    };
    let forced = rejected.is_some_and(|r| r.tokens == seen.tokens);
    if rejected.is_some() && !forced {
        // Replaced since the rejected ones were read: use the new ones.
        return Ok(Some(seen));
    }
    let needs = |t: &StoredTokens| {
        parse_tokens(t).filter(|p| {
            (p.refresh_due(now_ms()) || rejected.is_some_and(|r| r.tokens == t.tokens))
                && p.set.refresh_token.is_some()
                && p.token_url.is_some()
        })
    };
    if needs(&seen).is_none() {
        return Ok(Some(seen));
    }
    let deadline = Instant::now() + REFRESH_WAIT;
    loop {
        match us
            .begin_tokens_refresh(server, REFRESH_LEASE)
            .await
            .map_err(store_error)?
        {
            Some(lease) => {
                // Under the lease: another instance may have written new tokens just
                // before it was ours; those are used, never refreshed again.
                let current = us.tokens(server).await.map_err(store_error)?;
                let Some(current) = current else {
                    us.abandon_refresh(lease).await.map_err(store_error)?;
                    return Ok(None);
                };
                if current.tokens != seen.tokens {
                    us.abandon_refresh(lease).await.map_err(store_error)?;
                    return Ok(Some(current));
                }
                let Some(old) = needs(&current) else {
                    us.abandon_refresh(lease).await.map_err(store_error)?;
                    return Ok(Some(current));
                };
                match refresh(state.guard(), &old).await {
                    Ok(new) => {
                        let (secret, expires_at) = new.sealed()?;
                        let written = us
                            .finish_refresh(lease, &secret, expires_at)
                            .await
                            .map_err(store_error)?;
                        if !written {
                            tracing::info!(server = name, "a newer login replaced a refresh");
                        }
                        return us.tokens(server).await.map_err(store_error);
                    }
                    Err(e) if e.error.as_deref() == Some("invalid_grant") => {
                        // The refresh token is dead (revoked, expired, or spent by a
                        // rotation elsewhere): so are these tokens. Removed under the
                        // lease, so no other instance keeps retrying them.
                        us.remove_tokens(server).await.map_err(store_error)?;
                        us.abandon_refresh(lease).await.map_err(store_error)?;
                        state.cache().forget(us.user(), &server_key(server));
                        tracing::warn!(server = name, "the refresh token was refused: {e}");
                        return Err(login_refused(name, &e.message));
                    }
                    Err(e) => {
                        us.abandon_refresh(lease).await.map_err(store_error)?;
                        tracing::warn!(server = name, "refreshing the token failed: {e}");
                        if forced || old.is_expired(now_ms()) {
                            return Err(login_again(name, &e.message));
                        }
                        return Ok(Some(current));
                    }
                }
            }
            None => {
                // Another instance (or request) is refreshing: wait for its tokens.
                tokio::time::sleep(REFRESH_POLL).await;
                let Some(current) = us.tokens(server).await.map_err(store_error)? else {
                    return Ok(None);
                };
                if current.tokens != seen.tokens {
                    return Ok(Some(current));
                }
                seen = current;
                if Instant::now() >= deadline {
                    return Ok(Some(seen));
                }
            }
        }
    }
}

/// The callback page's script: it reads the outcome from the JSON block and posts it to
/// the opener (the app's origin only), or goes back to the app when there is none.
const CALLBACK_SCRIPT: &str = r#"(function(){var d=JSON.parse(document.getElementById('outcome').textContent);var m={type:'mcp-oauth-result',server:d.server,ok:d.ok};if(d.error){m.error=d.error;}if(window.opener&&!window.opener.closed){try{window.opener.postMessage(m,d.origin);}catch(e){}window.close();}var q='?mcpOAuth='+(d.ok?'ok':'error')+(d.server?'&server='+encodeURIComponent(d.server):'');setTimeout(function(){window.location.replace(d.origin+'/'+q);},window.opener?300:0);})();"#;

fn callback_page(app_origin: &str, outcome: Outcome) -> Response {
    let ok = outcome.error.is_none();
    let data = json!({
        "origin": app_origin,
        "ok": ok,
        "server": outcome.server,
        "error": outcome.error,
    })
    .to_string()
    .replace('<', "\\u003c")
    .replace('>', "\\u003e")
    .replace('&', "\\u0026");
    let title = if ok {
        "Signed in"
    } else {
        "The sign-in did not complete"
    };
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title></head>\
         <body><p>{title}. You can close this window.</p>\
         <script type=\"application/json\" id=\"outcome\">{data}</script>\
         <script>{CALLBACK_SCRIPT}</script></body></html>"
    );
    let script_hash =
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(CALLBACK_SCRIPT));
    let csp = format!(
        "default-src 'none'; script-src 'sha256-{script_hash}'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    );
    let mut resp = (outcome.status, html).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(v) = HeaderValue::from_str(&csp) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refresh_is_due_within_five_minutes_of_expiry() {
        let t = |expires_at: Option<u64>| TeamTokens {
            set: TokenSet {
                access_token: "a".into(),
                refresh_token: Some("r".into()),
                expires_at,
                token_type: "Bearer".into(),
                scope: None,
            },
            token_url: None,
            client_id: None,
            resource: None,
            obtained_at: None,
        };
        let now = 1_000_000_000;
        assert!(!t(None).refresh_due(now));
        assert!(!t(Some(now + 301_000)).refresh_due(now));
        assert!(t(Some(now + 299_000)).refresh_due(now));
        assert!(t(Some(now - 1)).is_expired(now));
        // A token living 4 s is due after 2 s, not at once.
        let short = |issued: u64| TeamTokens {
            obtained_at: Some(issued),
            ..t(Some(issued + 4_000))
        };
        assert!(!short(now).refresh_due(now + 1_000));
        assert!(short(now).refresh_due(now + 2_000));
        // A long-lived one keeps the 5-minute buffer.
        let long = TeamTokens {
            obtained_at: Some(now),
            ..t(Some(now + 3_600_000))
        };
        assert!(!long.refresh_due(now + 3_290_000));
        assert!(long.refresh_due(now + 3_300_000));
    }

    #[test]
    fn iss_must_match_and_is_required_when_promised() {
        let client = |issuer: Option<&str>, iss_required: bool| ServerLoginClient {
            client_id: "c".into(),
            token_url: "https://as.example/token".into(),
            redirect_uri: "https://team.example/oauth/mcp/callback".into(),
            resource: None,
            scopes: vec![],
            issuer: issuer.map(str::to_owned),
            iss_required,
        };
        let strict = client(Some("https://as.example"), true);
        assert!(check_issuer(&strict, Some("https://as.example")).is_ok());
        assert!(
            check_issuer(&strict, None)
                .unwrap_err()
                .contains("no `iss`")
        );
        // Simple string comparison (RFC 9207 §2.4): not even a trailing slash differs.
        assert!(check_issuer(&strict, Some("https://as.example/")).is_err());
        let e = check_issuer(&strict, Some("https://evil.example\n")).unwrap_err();
        assert!(e.contains("evil.example") && !e.contains('\n'), "{e}");
        let lax = client(Some("https://as.example"), false);
        assert!(check_issuer(&lax, None).is_ok());
        assert!(check_issuer(&lax, Some("https://evil.example")).is_err());
        // A login whose issuer is unknown accepts no `iss` at all.
        assert!(check_issuer(&client(None, false), Some("https://as.example")).is_err());
    }

    #[tokio::test]
    async fn the_page_carries_no_markup_from_its_data_and_allows_only_its_script() {
        let resp = callback_page(
            "https://team.example",
            Outcome::refused(StatusCode::BAD_REQUEST, "</script><script>alert(1)"),
        );
        let csp = resp.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .to_owned();
        let hash =
            base64::engine::general_purpose::STANDARD.encode(Sha256::digest(CALLBACK_SCRIPT));
        assert!(
            csp.contains(&format!("script-src 'sha256-{hash}'")),
            "{csp}"
        );
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        let page = String::from_utf8(body.to_vec()).unwrap();
        assert!(!page.contains("</script><script>alert"), "{page}");
        assert!(page.contains("\\u003c/script\\u003e"), "{page}");
        assert_eq!(page.matches("<script").count(), 2, "{page}");
    }
}
