//! Who is calling: [`require_session`], the middleware in front of every `Session` route.
//! In order: the `Host` must be one the team app answers to (DNS-rebinding defence); a
//! request another origin's page made is refused, and one that changes something must
//! carry the app's own `Origin` (the personal app's rules, `access::OriginRule`); then the
//! session cookie is resolved through the store, on every request (no session table in
//! memory: any instance answers), into [`SignedIn`]. No cookie, or one the store does not
//! know or that expired: 401 JSON.
//!
//! The session cookie is `HttpOnly` and `SameSite=Lax` (the issuer's redirect back is a
//! cross-site navigation), with `Secure` and the `__Host-` prefix behind https. Sessions
//! are stored as SHA-256 hashes, expire, and end on one device or all from any instance.
//!
//! Must not: accept a user from anywhere but the store's answer for the cookie.

use std::fmt;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use switchboard_store::User;

use super::state::{TeamConfig, TeamState};
use crate::access::{OriginRule, cookie_value, cross_origin_refusal, state_change_refusal};
use crate::error::ApiError;

/// The signed-in user of a request, put there by [`require_session`].
#[derive(Clone)]
pub struct SignedIn {
    /// The user the store found for the session cookie.
    pub user: User,
    cookie: String,
}

impl SignedIn {
    /// The session cookie's value (to end this session).
    pub fn cookie(&self) -> &str {
        &self.cookie
    }
}

impl fmt::Debug for SignedIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignedIn")
            .field("user", &self.user.id)
            .finish_non_exhaustive()
    }
}

/// A `Set-Cookie` value: `HttpOnly; SameSite=Lax; Path=/`, `Secure` behind https.
fn cookie(cfg: &TeamConfig, name: &str, value: &str, max_age: u64) -> String {
    format!(
        "{name}={value}; HttpOnly; SameSite=Lax; Path=/; Max-Age={max_age}{}",
        if cfg.secure_cookies { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value for a new session.
pub fn session_cookie(cfg: &TeamConfig, value: &str) -> String {
    cookie(cfg, cfg.cookie_name(), value, cfg.session_ttl.as_secs())
}

/// The `Set-Cookie` value that removes the session cookie.
pub fn clearing_cookie(cfg: &TeamConfig) -> String {
    cookie(cfg, cfg.cookie_name(), "", 0)
}

/// The `Set-Cookie` value binding a login in flight (its `state`) to this browser.
pub fn login_cookie(cfg: &TeamConfig, state: &str, ttl: std::time::Duration) -> String {
    cookie(cfg, cfg.login_cookie_name(), state, ttl.as_secs())
}

/// The `Set-Cookie` value that removes the login cookie.
pub fn clearing_login_cookie(cfg: &TeamConfig) -> String {
    cookie(cfg, cfg.login_cookie_name(), "", 0)
}

pub(crate) fn host_allowed(cfg: &TeamConfig, headers: &HeaderMap) -> bool {
    headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|h| cfg.allowed_hosts.iter().any(|a| a.eq_ignore_ascii_case(h)))
}

/// The checks that need no database, in order.
fn header_refusal(cfg: &TeamConfig, request: &Request) -> Option<ApiError> {
    let headers = request.headers();
    if !host_allowed(cfg, headers) {
        return Some(ApiError::new(
            StatusCode::FORBIDDEN,
            "bad_host",
            format!(
                "unexpected Host header: open the team app at {}",
                cfg.app_origin
            ),
        ));
    }
    let allowed = |origin: &str| origin == cfg.app_origin;
    let rule = OriginRule {
        allowed: &allowed,
        app_origin: cfg.app_origin.clone(),
        sandbox_origin: None,
    };
    cross_origin_refusal(&rule, headers)
        .or_else(|| state_change_refusal(&rule, request.method(), headers, true))
}

fn unauthorized(cfg: &TeamConfig, why: &str) -> Response {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        format!("{why}: sign in at {}/auth/login", cfg.app_origin),
    )
    .into_response()
}

/// Middleware for `Session` routes: host, origin, then the session from the store.
pub async fn require_session(
    State(state): State<TeamState>,
    mut request: Request,
    next: Next,
) -> Response {
    let cfg = state.cfg();
    if let Some(refusal) = header_refusal(cfg, &request) {
        return refusal.into_response();
    }
    let Some(cookie) = cookie_value(request.headers(), cfg.cookie_name()) else {
        return unauthorized(cfg, "not signed in");
    };
    let user = match state.store().session_user(&cookie).await {
        Ok(Some(user)) => user,
        Ok(None) => return unauthorized(cfg, "the session ended or expired"),
        Err(e) => {
            tracing::warn!("team store: {e}");
            return ApiError::unavailable(
                "the team database did not answer; try again in a moment",
            )
            .into_response();
        }
    };
    request.extensions_mut().insert(SignedIn { user, cookie });
    let mut response = next.run(request).await;
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Middleware for `Admin` routes, behind [`require_session`]: a signed-in user whose
/// `is_admin` is set, else 403.
pub async fn require_admin(request: Request, next: Next) -> Response {
    let admin = request
        .extensions()
        .get::<SignedIn>()
        .is_some_and(|s| s.user.is_admin);
    if !admin {
        return ApiError::forbidden("only a team admin may do this").into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn cfg(origin: &str) -> TeamConfig {
        TeamConfig {
            secure_cookies: origin.starts_with("https://"),
            app_origin: origin.into(),
            allowed_hosts: vec![],
            session_ttl: Duration::from_secs(60),
        }
    }

    #[test]
    fn cookies_are_http_only_lax_and_secure_behind_https() {
        let plain = session_cookie(&cfg("http://127.0.0.1:8765"), "v");
        assert_eq!(
            plain,
            "switchboard_session=v; HttpOnly; SameSite=Lax; Path=/; Max-Age=60"
        );
        let tls = session_cookie(&cfg("https://team.example.com"), "v");
        assert_eq!(
            tls,
            "__Host-switchboard_session=v; HttpOnly; SameSite=Lax; Path=/; Max-Age=60; Secure"
        );
        let gone = clearing_cookie(&cfg("https://team.example.com"));
        assert!(gone.starts_with("__Host-switchboard_session=;") && gone.contains("Max-Age=0"));
        assert!(gone.ends_with("; Secure"));
        let login = login_cookie(
            &cfg("https://team.example.com"),
            "st",
            Duration::from_secs(600),
        );
        assert_eq!(
            login,
            "__Host-switchboard_login=st; HttpOnly; SameSite=Lax; Path=/; Max-Age=600; Secure"
        );
        assert!(
            clearing_login_cookie(&cfg("http://127.0.0.1:1")).starts_with("switchboard_login=;")
        );
    }
}
