//! OAuth from the browser, through hooks the embedding program provides (the CLI wires
//! `switchboard-auth` in): the token source every host connection asks, and a browser
//! login.
//!
//! - `POST /api/settings/mcp-login` `{name}` starts a login for a configured HTTP
//!   server. Usually (dynamic client registration) it comes back to the app itself:
//!   the answer is `{authorizationUrl, state, flow:"callback"}`, the registered
//!   redirect URI is `{app origin}/auth/mcp-oauth-callback`, and the hooks keep the
//!   PKCE verifier and client secret keyed by `state`. The page opens the URL in a
//!   popup, or, when popups are blocked, in the same tab.
//! - `GET /auth/mcp-oauth-callback` ([`callback_page`]): the authorization server's
//!   redirect, a top-level cross-site navigation that carries no SameSite=Strict
//!   cookie, so it needs none and holds no secret. Its script posts
//!   `{type:"mcp-oauth-callback", code, state, error, errorDescription, iss}` to
//!   `window.opener` (target origin: its own) and closes; with no opener it keeps the
//!   message in `sessionStorage` and goes to `/settings?mcp-oauth-return=1`, where the
//!   settings page resumes.
//! - `POST /api/settings/mcp-oauth-token` `{state, code, iss?}` ([`token`]), behind the
//!   cookie and the Origin check like every API route: an unknown, expired or used
//!   `state` is 400; otherwise the hooks exchange the code, save the tokens in the
//!   token store and the answer is `{ok, server, expiresAt}`, never a token.
//! - A configured `oauth.clientId` or `oauth.redirectUri` (a client registered with
//!   the loopback redirect) and machine grants keep the loopback flow: the answer is
//!   `{authorizationUrl, flow:"loopback"}` (or `{done}`) and the auth crate's loopback
//!   listener takes the callback.
//!
//! Either way, when the login is saved the server is reconnected and an `oauth` event
//! `{server, ok, message}` goes to every page. Nothing here sees a token or a PKCE
//! verifier.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};
use switchboard_config::{Settings, Transport};
use switchboard_mcp::TokenSource;
use switchboard_net::GuardedClient;
use tokio::sync::oneshot;

use crate::access::ApiJson;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Called with the authorization URL of a browser login.
pub type OpenUrlFn = Box<dyn Fn(&str) + Send + Sync>;

/// The path of the app's own OAuth callback page.
pub const CALLBACK_PATH: &str = "/auth/mcp-oauth-callback";

/// A browser login begun for the app's own callback page.
#[derive(Debug, Clone)]
pub struct BeganLogin {
    /// Where to send the browser.
    pub authorization_url: String,
    /// The request's `state`.
    pub state: String,
}

/// A finished callback login (no token in it).
#[derive(Debug, Clone)]
pub struct CompletedLogin {
    pub server: String,
    /// The access token's expiry, milliseconds since the epoch.
    pub expires_at: Option<u64>,
}

/// Why a callback login could not be completed.
#[derive(Debug, Clone)]
pub enum CompleteError {
    /// No login waits for that `state` (unknown, expired or already used).
    UnknownState(String),
    /// The code exchange (or saving the tokens) failed.
    Failed(String),
}

/// What the embedding program provides for OAuth.
pub trait OAuthHooks: Send + Sync {
    /// The token source for a host built from `settings` (`None`: no OAuth).
    fn token_source(
        &self,
        settings: &Settings,
        guard: &GuardedClient,
    ) -> Option<Arc<dyn TokenSource>>;

    /// Logs in to `server` at `url`: calls `open` with the authorization URL (browser
    /// grants) and resolves once the login is saved, with a message for the person.
    fn login(
        &self,
        settings: &Settings,
        guard: &GuardedClient,
        server: &str,
        url: &str,
        open: OpenUrlFn,
    ) -> BoxFuture<'static, Result<String, String>>;

    /// Begins a browser login for `server` at `url` that comes back to `redirect_uri`
    /// (the app's callback page), keeping the PKCE verifier and client secret keyed by
    /// `state`. `Ok(None)`: this server logs in through [`OAuthHooks::login`] instead
    /// (a client registered with the loopback redirect, or a grant with no browser).
    fn begin_login(
        &self,
        settings: &Settings,
        guard: &GuardedClient,
        server: &str,
        url: &str,
        redirect_uri: &str,
    ) -> BoxFuture<'static, Result<Option<BeganLogin>, String>>;

    /// Completes a login begun by [`OAuthHooks::begin_login`]: exchanges `code` for
    /// the login waiting under `state` and saves the tokens.
    fn complete_login(
        &self,
        settings: &Settings,
        guard: &GuardedClient,
        state: &str,
        code: &str,
        iss: Option<&str>,
    ) -> BoxFuture<'static, Result<CompletedLogin, CompleteError>>;
}

/// The hooks, shared (with a `Debug` that shows nothing).
#[derive(Clone)]
pub struct OAuthHandle(pub Arc<dyn OAuthHooks>);

impl std::fmt::Debug for OAuthHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OAuthHandle")
    }
}

#[derive(Debug, Deserialize)]
pub struct LoginRequest {
    name: String,
}

/// How long to wait for a login to produce its authorization URL.
const URL_WAIT: Duration = Duration::from_secs(30);

/// `POST /api/settings/mcp-login`.
pub async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<LoginRequest>,
) -> ApiResult<Json<Value>> {
    let hooks = state.cfg().oauth.clone().ok_or_else(|| {
        ApiError::unavailable(
            "OAuth login is not available in this build of the web app; run `switchboard mcp login <name>`",
        )
    })?;
    let settings = state
        .load_settings()
        .map_err(|e| ApiError::internal(format!("cannot read the settings: {e}")))?;
    let entry = settings
        .server(&req.name)
        .ok_or_else(|| ApiError::not_found(format!("no server named `{}`", req.name)))?;
    let cfg = entry
        .config
        .as_ref()
        .map_err(|e| ApiError::bad_request(e.clone()))?;
    let url = match &cfg.transport {
        Transport::Stdio { .. } => {
            return Err(ApiError::bad_request(
                "OAuth is for HTTP servers; this one is a stdio server",
            ));
        }
        t => t.url().unwrap_or_default().to_string(),
    };
    let redirect_uri = format!("{}{CALLBACK_PATH}", state.app_origin_for(&headers));
    let began = hooks
        .0
        .begin_login(
            &settings,
            &state.inner.guard,
            &req.name,
            &url,
            &redirect_uri,
        )
        .await
        .map_err(ApiError::upstream)?;
    if let Some(b) = began {
        return Ok(Json(json!({
            "authorizationUrl": b.authorization_url,
            "state": b.state,
            "flow": "callback",
        })));
    }
    let (url_tx, url_rx) = oneshot::channel::<String>();
    let url_tx = Mutex::new(Some(url_tx));
    let open: OpenUrlFn = Box::new(move |u: &str| {
        if let Some(tx) = url_tx.lock().ok().and_then(|mut t| t.take()) {
            let _ = tx.send(u.to_string());
        }
    });
    let (done_tx, done_rx) = oneshot::channel::<Result<String, String>>();
    let name = req.name.clone();
    let task_state = state.clone();
    let fut = hooks
        .0
        .login(&settings, &state.inner.guard, &req.name, &url, open);
    tokio::spawn(async move {
        let outcome = fut.await;
        if outcome.is_ok() {
            task_state.host().restart(&name).await;
        }
        let (ok, message) = match &outcome {
            Ok(m) => (true, m.clone()),
            Err(e) => (false, e.clone()),
        };
        let _ = task_state
            .inner
            .events
            .send(json!({"type": "oauth", "server": name, "ok": ok, "message": message}));
        let _ = done_tx.send(outcome);
    });
    match tokio::time::timeout(URL_WAIT, url_rx).await {
        Ok(Ok(u)) => Ok(Json(json!({"authorizationUrl": u, "flow": "loopback"}))),
        // No URL: a machine grant, or the login failed before it had one.
        Ok(Err(_)) => match done_rx.await {
            Ok(Ok(message)) => Ok(Json(json!({"done": true, "message": message}))),
            Ok(Err(e)) => Err(ApiError::upstream(e)),
            Err(_) => Err(ApiError::internal("the login task stopped")),
        },
        Err(_) => Err(ApiError::upstream(
            "the login did not produce an authorization URL in time",
        )),
    }
}

#[derive(Debug, Deserialize)]
pub struct TokenRequest {
    #[serde(default)]
    state: String,
    #[serde(default)]
    code: String,
    #[serde(default)]
    iss: Option<String>,
}

/// `POST /api/settings/mcp-oauth-token` `{state, code, iss?}`: `{ok, server,
/// expiresAt}`; the tokens stay in the token store.
pub async fn token(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<TokenRequest>,
) -> ApiResult<Json<Value>> {
    let hooks = state.cfg().oauth.clone().ok_or_else(|| {
        ApiError::unavailable("OAuth login is not available in this build of the web app")
    })?;
    if req.state.is_empty() || req.code.is_empty() {
        return Err(ApiError::bad_request(
            "`state` and `code` are required (from the authorization server's redirect)",
        ));
    }
    let settings = state
        .load_settings()
        .map_err(|e| ApiError::internal(format!("cannot read the settings: {e}")))?;
    let done = hooks
        .0
        .complete_login(
            &settings,
            &state.inner.guard,
            &req.state,
            &req.code,
            req.iss.as_deref(),
        )
        .await;
    match done {
        Ok(d) => {
            state.host().restart(&d.server).await;
            let message = format!("Logged in to `{}`.", d.server);
            let _ = state
                .inner
                .events
                .send(json!({"type": "oauth", "server": d.server, "ok": true, "message": message}));
            Ok(Json(json!({
                "ok": true,
                "server": d.server,
                "expiresAt": d.expires_at,
                "message": message,
            })))
        }
        Err(CompleteError::UnknownState(m)) => {
            Err(ApiError::new(StatusCode::BAD_REQUEST, "unknown_state", m))
        }
        Err(CompleteError::Failed(m)) => Err(ApiError::upstream(m)),
    }
}

const CALLBACK_HTML: &str = include_str!("../ui/oauth-callback.html");

/// `GET /auth/mcp-oauth-callback`: the page the authorization server redirects to.
/// Served without the access cookie (a cross-site redirect does not carry a
/// SameSite=Strict cookie); it holds nothing secret, and its script only hands the
/// query to the app's own page, which completes the login through the API.
pub async fn callback_page() -> Response {
    let mut resp = (StatusCode::OK, CALLBACK_HTML).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        ),
    );
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
