//! OAuth from the browser, through hooks the embedding program provides (the CLI wires
//! `switchboard-auth` in): the token source every host connection asks, and a browser
//! login.
//!
//! - `POST /api/settings/mcp-login` `{name}` starts a login for a configured HTTP
//!   server and answers `{authorizationUrl}` as soon as the login has one; the page
//!   opens it in a popup (or offers a link when popups are blocked). The authorization
//!   server redirects to the login's loopback callback; when the login is saved, the
//!   server is reconnected and an `oauth` event `{server, ok, message}` goes to every
//!   page. Nothing here sees a token or a PKCE verifier.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
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
        Ok(Ok(u)) => Ok(Json(json!({"authorizationUrl": u}))),
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
