//! Signing in and out: `GET /auth/login` (a login in flight stored under its `state`,
//! then a redirect to the issuer), `GET /auth/callback` (the login taken from the store
//! once, so it may complete on any instance; the issuer's answer checked and the policy
//! applied; a session created), `POST /auth/logout` (this session, or with
//! `?everywhere=1` all the user's sessions), `GET /api/me`.
//!
//! `/auth/login` also sets a short-lived login cookie holding the `state`; the callback
//! proceeds only when the browser brings it back (so a callback URL someone else made —
//! login CSRF — signs nobody in here), and clears it.
//!
//! The session cookie is `HttpOnly; SameSite=Lax; Path=/` (plus `Secure` and the
//! `__Host-` prefix behind https). `Lax`, not `Strict`: the browser arrives at the callback
//! by a top-level redirect from the issuer's site, and everything after it (the redirect
//! to the app's page) belongs to that cross-site navigation; a `Strict` cookie would not
//! be sent there, so the user would look signed out right after signing in (and the
//! login cookie would not reach the callback at all). `Lax` still
//! keeps the cookie off cross-site POSTs, subrequests and frames, and every request that
//! changes something must carry the app's own `Origin` (`session`).
//!
//! The user is the issuer's account: the issuer and `sub` of the verified ID token, never
//! the email, which the issuer may give to another account later (that account signs in
//! as a new user with nothing of the first one's). The email is shown, matched against
//! the policy (allowed domains and emails, admins: only a verified email gets this far,
//! as the OIDC client refuses an unverified one), and claims a user from before schema
//! 15 once (`switchboard_store`'s `account` docs).
//!
//! Must not: trust the callback's query beyond what the OIDC client checks (`code`,
//! `state`, `iss`, `error`; the user comes from the issuer's verified ID token), key a
//! user by email, accept a `state` twice or from a browser that did not start it, or
//! send the browser anywhere but a path on this app afterwards.

use std::time::Duration;

use axum::Json;
use axum::extract::{Extension, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::json;
use switchboard_auth::{
    AuthError, ClientSecret, OidcClient, OidcConfig, OidcError, PendingSignIn, SignInCallback,
    SignInPolicy,
};
use switchboard_net::GuardedClient;
use switchboard_store::{PendingLogin, Secret, SignInIdentity};
use url::Url;

use super::session::{
    SignedIn, clearing_cookie, clearing_login_cookie, login_cookie, session_cookie,
};
use super::state::{TeamState, store_error};
use crate::access::cookie_value;
use crate::error::{ApiError, ApiResult};
use crate::random::constant_time_eq;

/// How long a login may stay between the redirect to the issuer and the callback.
pub const LOGIN_TTL: Duration = Duration::from_secs(10 * 60);

/// How team members sign in: the OpenID Connect issuer, this app's client there, and
/// who may enter. The redirect URI is the app's origin + `/auth/callback`.
#[derive(Debug, Clone)]
pub struct SignInOptions {
    /// The issuer (e.g. `https://accounts.google.com`).
    pub issuer: Url,
    /// The client id registered at the issuer.
    pub client_id: String,
    /// The client secret (a confidential client).
    pub client_secret: Option<ClientSecret>,
    /// Scopes (empty: `openid email profile`).
    pub scopes: Vec<String>,
    /// Allowed domains and emails, admins.
    pub policy: SignInPolicy,
}

/// The sign-in of one instance: the OIDC client (discovered on first use, again after a
/// failed discovery) and the policy.
pub(crate) struct SignIn {
    config: OidcConfig,
    policy: SignInPolicy,
    guard: GuardedClient,
    client: tokio::sync::OnceCell<OidcClient>,
}

impl SignIn {
    pub(crate) fn new(opts: SignInOptions, redirect_uri: Url, guard: GuardedClient) -> Self {
        let mut config = OidcConfig::new(
            opts.issuer,
            opts.client_id,
            opts.client_secret,
            redirect_uri,
        );
        config.scopes = opts.scopes;
        Self {
            config,
            policy: opts.policy,
            guard,
            client: tokio::sync::OnceCell::new(),
        }
    }

    /// The client, discovering the issuer's configuration if not done yet.
    pub(crate) async fn client(&self) -> Result<&OidcClient, AuthError> {
        self.client
            .get_or_try_init(|| OidcClient::discover(self.config.clone(), self.guard.clone()))
            .await
    }
}

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
        "sign-in is not configured on this instance: start it with --oidc-issuer and SWITCHBOARD_OIDC_CLIENT_ID (see `switchboard serve --help`)",
    )
}

/// `GET /auth/login[?return=/path]`.
pub async fn login(
    State(state): State<TeamState>,
    Query(q): Query<LoginQuery>,
) -> ApiResult<Response> {
    let sign_in = state.sign_in().ok_or_else(no_provider)?;
    let start = sign_in
        .client()
        .await
        .and_then(OidcClient::begin)
        .map_err(|e| {
            tracing::warn!("sign-in: {e}");
            ApiError::upstream(format!("cannot start the sign-in with the issuer: {e}"))
        })?;
    let pending = PendingLogin {
        verifier: Secret::new(start.pkce_verifier.clone()),
        nonce: start.nonce.clone(),
        return_path: local_path(q.return_to.as_deref()),
    };
    state
        .store()
        .put_pending_login(&start.state, &pending, LOGIN_TTL)
        .await
        .map_err(store_error)?;
    let mut response = Redirect::to(start.authorize_url.as_str()).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::SET_COOKIE,
        header_value(&login_cookie(state.cfg(), &start.state, LOGIN_TTL))?,
    );
    Ok(response)
}

fn header_value(cookie: &str) -> ApiResult<HeaderValue> {
    HeaderValue::from_str(cookie).map_err(|_| ApiError::internal("a cookie is not a valid header"))
}

#[derive(Debug, Deserialize)]
pub struct CallbackQuery {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_description: Option<String>,
}

/// A failed finish as an answer: the provider's refusal is 403, a callback that does not
/// belong to the login 400, anything else (exchange, ID token, keys) 502.
fn finish_error(e: &AuthError) -> ApiError {
    let why = format!("the sign-in did not complete: {e}");
    match e {
        AuthError::SignIn(OidcError::Denied { .. }) => ApiError::forbidden(why),
        AuthError::SignIn(
            OidcError::StateMismatch | OidcError::NoCode | OidcError::CallbackIssuer { .. },
        ) => ApiError::bad_request(why),
        _ => {
            tracing::warn!("sign-in: {e}");
            ApiError::upstream(why)
        }
    }
}

/// `GET /auth/callback?code&state&iss` (or `?error`). A browser (`Accept: text/html`)
/// that cannot be signed in — an account the team does not admit, a stale login — gets
/// a page saying why; other clients get the JSON error.
pub async fn callback(
    State(state): State<TeamState>,
    request_headers: HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> Response {
    let html = super::pages::wants_html(&request_headers);
    match finish_callback(&state, &request_headers, q).await {
        Ok(r) => r,
        Err(e) if html => {
            let title = if e.status == StatusCode::FORBIDDEN {
                "You cannot sign in to this Switchboard"
            } else {
                "The sign-in did not complete"
            };
            super::pages::problem_page(e.status, title, &e.message)
        }
        Err(e) => e.into_response(),
    }
}

async fn finish_callback(
    state: &TeamState,
    request_headers: &HeaderMap,
    q: CallbackQuery,
) -> ApiResult<Response> {
    let Some(login_state) = q.state.clone().filter(|s| !s.is_empty()) else {
        return Err(ApiError::bad_request(
            "the sign-in callback has no `state`: start again at /auth/login",
        ));
    };
    // Only the browser that started this login may finish it (login CSRF): a callback
    // URL someone else made carries a state this browser's login cookie does not hold.
    // Checked before the login is taken, so a stray callback cannot use it up.
    let started_here = cookie_value(request_headers, state.cfg().login_cookie_name())
        .is_some_and(|c| constant_time_eq(&c, &login_state));
    if !started_here {
        return Err(ApiError::bad_request(
            "this sign-in was not started in this browser (or its cookie expired): start again at /auth/login",
        ));
    }
    let sign_in = state.sign_in().ok_or_else(no_provider)?;
    // Taken once, on whatever instance the browser reaches; an error answer uses it up too.
    let pending = state
        .store()
        .take_pending_login(&login_state)
        .await
        .map_err(store_error)?
        .ok_or_else(|| {
            ApiError::bad_request(
                "this sign-in is unknown, expired or already used: start again at /auth/login",
            )
        })?;
    let client = sign_in.client().await.map_err(|e| finish_error(&e))?;
    let callback = SignInCallback {
        code: q.code,
        state: Some(login_state.clone()),
        iss: q.iss,
        error: q.error,
        error_description: q.error_description,
    };
    let kept = PendingSignIn {
        state: login_state,
        pkce_verifier: pending.verifier.expose().to_owned(),
        nonce: pending.nonce.clone(),
    };
    let identity = client
        .finish(&callback, &kept)
        .await
        .map_err(|e| finish_error(&e))?;
    let access = sign_in
        .policy
        .decide(&identity)
        .map_err(|refusal| ApiError::forbidden(refusal.to_string()))?;
    let name = identity
        .name
        .clone()
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| identity.email.clone());
    // The user is the issuer's account (issuer + `sub`); the email only shows, and
    // claims a user from before schema 15 once (the store's `account` docs).
    let who = SignInIdentity {
        issuer: &identity.issuer,
        subject: &identity.subject,
        email: &identity.email,
        email_verified: identity.email_verified,
    };
    let user = state
        .store()
        .sign_in_user(&who, &name, access.is_admin)
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
    let mut response = Redirect::to(&pending.return_path).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.append(
        header::SET_COOKIE,
        header_value(&session_cookie(state.cfg(), token.expose()))?,
    );
    headers.append(
        header::SET_COOKIE,
        header_value(&clearing_login_cookie(state.cfg()))?,
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
        header_value(&clearing_cookie(state.cfg()))?,
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
