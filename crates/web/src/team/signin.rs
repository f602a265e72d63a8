//! Signing in and out: `GET /auth/login` (a login in flight stored under its `state`,
//! then a redirect to the issuer), `GET /auth/callback` (the login taken from the store
//! once, so it may complete on any instance; the issuer's answer checked and the policy
//! applied; a session created), `POST /auth/logout` (this session, or with
//! `?everywhere=1` all the user's sessions), `GET /api/me`.
//!
//! The session cookie is `HttpOnly; SameSite=Lax; Path=/` (plus `Secure` and the
//! `__Host-` prefix behind https). `Lax`, not `Strict`: the browser arrives at the callback
//! by a top-level redirect from the issuer's site, and everything after it (the redirect
//! to the app's page) belongs to that cross-site navigation; a `Strict` cookie would not
//! be sent there, so the user would look signed out right after signing in. `Lax` still
//! keeps the cookie off cross-site POSTs, subrequests and frames, and every request that
//! changes something must carry the app's own `Origin` (`session`).
//!
//! Must not: trust anything from the callback's query but `code` and `state` (the user
//! comes from the issuer's verified answer), accept a `state` twice, or send the browser
//! anywhere but a path on this app afterwards.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Extension, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::json;
use switchboard_store::{PendingLogin, Secret};

use super::session::{SignedIn, clearing_cookie, session_cookie};
use super::state::{TeamState, store_error};
use crate::error::{ApiError, ApiResult};

/// How long a login may stay between the redirect to the issuer and the callback.
pub const LOGIN_TTL: Duration = Duration::from_secs(10 * 60);

/// The start of a sign-in: where to send the browser, and what the callback needs.
#[derive(Clone)]
pub struct LoginStart {
    /// The issuer's authorization URL (with `state`, `nonce`, the PKCE challenge).
    pub authorize_url: String,
    /// The `state` the issuer sends back.
    pub state: String,
    /// The PKCE code verifier (kept sealed in the store until the callback).
    pub pkce_verifier: Secret,
    /// The `nonce` the ID token must carry.
    pub nonce: String,
}

impl std::fmt::Debug for LoginStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginStart")
            .field("authorize_url", &self.authorize_url)
            .finish_non_exhaustive()
    }
}

/// Someone the issuer vouched for and the sign-in policy let in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// The verified email (the user's key in the store).
    pub email: String,
    /// The display name.
    pub name: String,
    /// Whether the admin list names them.
    pub admin: bool,
}

/// Why a callback did not sign anyone in.
#[derive(Debug, Clone)]
pub enum SignInRefusal {
    /// The issuer vouched for someone the policy does not let in (403).
    NotAllowed(String),
    /// The exchange or the ID token's checks failed (502).
    Failed(String),
}

/// What team sign-in needs from an OpenID Connect issuer: start a login, and turn the
/// callback's `code` (with the stored verifier and nonce) into an admitted user. The
/// CLI implements it over `switchboard-auth`'s OIDC client and sign-in policy.
pub trait IdentityProvider: Send + Sync {
    /// A new login: fresh `state`, PKCE verifier and nonce, and the URL to send the
    /// browser to.
    fn begin(&self) -> BoxFuture<'_, Result<LoginStart, String>>;

    /// Exchange `code` (with the login's verifier and nonce), verify the ID token and
    /// apply the sign-in policy.
    fn finish<'a>(
        &'a self,
        code: &'a str,
        verifier: &'a Secret,
        nonce: &'a str,
    ) -> BoxFuture<'a, Result<Admitted, SignInRefusal>>;
}

/// A shared [`IdentityProvider`].
pub type SharedIdentityProvider = Arc<dyn IdentityProvider>;

#[derive(Debug, Deserialize)]
pub struct LoginQuery {
    /// Where to go after signing in (a path on this app).
    #[serde(default, rename = "return")]
    return_to: Option<String>,
}

/// A path on this app (`/…`, not `//…`, no backslash, no scheme), else `/`.
fn local_path(p: Option<&str>) -> String {
    match p {
        Some(p)
            if p.starts_with('/')
                && !p.starts_with("//")
                && !p.contains('\\')
                && !p.chars().any(char::is_control) =>
        {
            p.to_owned()
        }
        _ => "/".to_owned(),
    }
}

fn no_provider() -> ApiError {
    ApiError::unavailable(
        "sign-in is not configured on this instance: start it with --oidc-issuer and SWITCHBOARD_OIDC_CLIENT_ID",
    )
}

/// `GET /auth/login[?return=/path]`.
pub async fn login(
    State(state): State<TeamState>,
    Query(q): Query<LoginQuery>,
) -> ApiResult<Response> {
    let provider = state.identity().ok_or_else(no_provider)?;
    let start = provider.begin().await.map_err(|e| {
        tracing::warn!("sign-in: {e}");
        ApiError::upstream(format!("cannot start the sign-in with the issuer: {e}"))
    })?;
    let pending = PendingLogin {
        verifier: start.pkce_verifier.clone(),
        nonce: start.nonce.clone(),
        return_path: local_path(q.return_to.as_deref()),
    };
    state
        .store()
        .put_pending_login(&start.state, &pending, LOGIN_TTL)
        .await
        .map_err(store_error)?;
    let mut response = Redirect::to(&start.authorize_url).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

#[derive(Debug, Deserialize)]
pub struct CallbackQuery {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_description: Option<String>,
}

/// Printable text from the issuer, cut short (it is shown back to the user).
fn shown(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(200).collect()
}

/// `GET /auth/callback?code&state` (or `?error`).
pub async fn callback(
    State(state): State<TeamState>,
    Query(q): Query<CallbackQuery>,
) -> ApiResult<Response> {
    let Some(login_state) = q.state.as_deref().filter(|s| !s.is_empty()) else {
        return Err(ApiError::bad_request(
            "the sign-in callback has no `state`: start again at /auth/login",
        ));
    };
    // Taken once, on whatever instance the browser reaches; an error answer uses it up too.
    let pending = state
        .store()
        .take_pending_login(login_state)
        .await
        .map_err(store_error)?
        .ok_or_else(|| {
            ApiError::bad_request(
                "this sign-in is unknown, expired or already used: start again at /auth/login",
            )
        })?;
    if let Some(error) = &q.error {
        let why = q
            .error_description
            .as_deref()
            .map(|d| format!(": {}", shown(d)))
            .unwrap_or_default();
        return Err(ApiError::forbidden(format!(
            "the issuer refused the sign-in ({}{why}); start again at /auth/login",
            shown(error)
        )));
    }
    let Some(code) = q.code.as_deref().filter(|c| !c.is_empty()) else {
        return Err(ApiError::bad_request(
            "the sign-in callback has no `code`: start again at /auth/login",
        ));
    };
    let provider = state.identity().ok_or_else(no_provider)?;
    let admitted = provider
        .finish(code, &pending.verifier, &pending.nonce)
        .await
        .map_err(|refusal| match refusal {
            SignInRefusal::NotAllowed(why) => ApiError::forbidden(why),
            SignInRefusal::Failed(why) => {
                tracing::warn!("sign-in: {why}");
                ApiError::upstream(format!("the sign-in did not complete: {why}"))
            }
        })?;
    let user = state
        .store()
        .sign_in_user(&admitted.email, &admitted.name, admitted.admin)
        .await
        .map_err(|e| match e {
            switchboard_store::StoreError::Invalid(why) => ApiError::forbidden(why),
            other => store_error(other),
        })?;
    let token = state
        .store()
        .create_session(&user.id, state.cfg().session_ttl)
        .await
        .map_err(store_error)?;
    let cookie = session_cookie(state.cfg(), token.expose());
    let mut response = Redirect::to(&pending.return_path).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie)
            .map_err(|_| ApiError::internal("the session cookie is not a valid header"))?,
    );
    Ok(response)
}

#[derive(Debug, Deserialize)]
pub struct LogoutQuery {
    #[serde(default)]
    everywhere: Option<String>,
}

/// `POST /auth/logout[?everywhere=1]`.
pub async fn logout(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Query(q): Query<LogoutQuery>,
) -> ApiResult<Response> {
    let everywhere = matches!(q.everywhere.as_deref(), Some("1" | "true" | "yes"));
    let ended = if everywhere {
        state
            .store()
            .end_all_sessions(&signed.user.id)
            .await
            .map_err(store_error)?
    } else {
        u64::from(
            state
                .store()
                .end_session(signed.cookie())
                .await
                .map_err(store_error)?,
        )
    };
    let mut response = (
        StatusCode::OK,
        Json(json!({"ok": true, "ended": ended, "everywhere": everywhere})),
    )
        .into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&clearing_cookie(state.cfg()))
            .map_err(|_| ApiError::internal("the clearing cookie is not a valid header"))?,
    );
    Ok(response)
}

/// `GET /api/me`: who is signed in (nothing secret).
pub async fn me(Extension(signed): Extension<SignedIn>) -> Json<serde_json::Value> {
    Json(json!({
        "email": signed.user.email,
        "name": signed.user.name,
        "admin": signed.user.is_admin,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_return_targets() {
        assert_eq!(local_path(Some("/servers?x=1")), "/servers?x=1");
        for bad in [
            "//evil.example/",
            "https://evil.example/",
            "/\\evil.example",
            "servers",
            "/a\nb",
        ] {
            assert_eq!(local_path(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(local_path(None), "/");
    }
}
