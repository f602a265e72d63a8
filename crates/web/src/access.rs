//! Access control and request parsing shared by every route.
//!
//! - [`api_guard`] (middleware on `/api`): the `Host` header must be one the app
//!   answers to (DNS-rebinding defence); the token must come as the app's cookie or as
//!   `Authorization: Bearer <token>` (401 otherwise); a state-changing request (not
//!   GET/HEAD/OPTIONS) that carries an `Origin` must carry exactly the app's own (`null`
//!   is refused), and one authenticated by the cookie must carry it (403 otherwise);
//!   any request another origin's page makes (an `Origin` other than the app's, or
//!   `Sec-Fetch-Site` other than `same-origin`/`none`), the MCP Apps sandbox's
//!   included, is refused (403) whatever its method and credentials.
//! - [`page_access`]: pages show a "use the printed link" page without the cookie; the
//!   printed `?token=` link sets the cookie (`HttpOnly; SameSite=Strict`, name carries
//!   the port). The page script then removes the token from the address bar.
//! - [`ApiJson`]: a JSON body; malformed JSON is a 400 naming the parse error.
//! - The origin rules themselves ([`OriginRule`], [`cross_origin_refusal`],
//!   [`state_change_refusal`]) are shared with team mode's session guard
//!   (`team::session`), which applies them with its own origin and cookie.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::random::constant_time_eq;
use crate::state::AppState;

/// How a request proved it may use the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthKind {
    Cookie,
    Bearer,
}

/// The value of cookie `name` in the request, if any.
pub fn cookie_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim().to_string())
}

/// Checks the cookie or the bearer token.
pub fn authenticate(state: &AppState, headers: &HeaderMap) -> Option<AuthKind> {
    let cfg = state.cfg();
    if let Some(auth) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        && let Some(token) = auth
            .strip_prefix("Bearer ")
            .or_else(|| auth.strip_prefix("bearer "))
        && constant_time_eq(token.trim(), &cfg.token)
    {
        return Some(AuthKind::Bearer);
    }
    if let Some(v) = cookie_value(headers, &cfg.cookie_name())
        && constant_time_eq(&v, &cfg.token)
    {
        return Some(AuthKind::Cookie);
    }
    None
}

fn host_allowed(state: &AppState, headers: &HeaderMap) -> bool {
    let allowed = &state.cfg().allowed_hosts;
    if allowed.is_empty() {
        return true;
    }
    headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|h| allowed.iter().any(|a| a.eq_ignore_ascii_case(h)))
}

/// The origins a state-changing request may come from.
pub fn origin_allowed(state: &AppState, headers: &HeaderMap, origin: &str) -> bool {
    let cfg = state.cfg();
    if origin == cfg.app_origin {
        return true;
    }
    if cfg.origin_from_host
        && let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok())
    {
        return origin == format!("http://{host}");
    }
    false
}

fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Which origins may use an API: the rule [`cross_origin_refusal`] and
/// [`state_change_refusal`] apply, for the personal app ([`api_guard`]) and the team
/// app's session guard alike.
pub(crate) struct OriginRule<'a> {
    /// Whether `origin` (an `Origin` header's value) is the app's own.
    pub allowed: &'a dyn Fn(&str) -> bool,
    /// The app's origin, as messages show it.
    pub app_origin: String,
    /// The MCP Apps sandbox's origin, named in the message when it is the caller.
    pub sandbox_origin: Option<String>,
}

impl OriginRule<'_> {
    fn personal<'a>(
        state: &'a AppState,
        headers: &'a HeaderMap,
        allowed: &'a dyn Fn(&str) -> bool,
    ) -> OriginRule<'a> {
        OriginRule {
            allowed,
            app_origin: state.app_origin_for(headers),
            sandbox_origin: Some(state.proxy_origin_for(headers)),
        }
    }
}

/// A request some other origin's page made (the MCP Apps sandbox, on another port of
/// the same host, included): refused whatever its method and credentials, so the
/// access cookie, which browsers also send to other ports of the same host, is never
/// accepted from there. An `Origin` other than the app's, or a `Sec-Fetch-Site` other
/// than `same-origin` / `none` (a typed address or bookmark), is refused.
pub(crate) fn cross_origin_refusal(rule: &OriginRule<'_>, headers: &HeaderMap) -> Option<ApiError> {
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("?");
        if !(rule.allowed)(origin) {
            let sandbox = rule.sandbox_origin.as_deref() == Some(origin);
            return Some(ApiError::new(
                StatusCode::FORBIDDEN,
                "bad_origin",
                format!(
                    "the API answers only the app's own page ({}); this request came from `{origin}`{}",
                    rule.app_origin,
                    if sandbox {
                        ", the MCP Apps sandbox, which never gets access"
                    } else {
                        ""
                    }
                ),
            ));
        }
    }
    let site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())?;
    if site.eq_ignore_ascii_case("same-origin") || site.eq_ignore_ascii_case("none") {
        return None;
    }
    Some(ApiError::new(
        StatusCode::FORBIDDEN,
        "cross_origin",
        format!(
            "the API answers only the app's own page ({}); this request came from a {site} page",
            rule.app_origin
        ),
    ))
}

/// A request that changes something (not GET/HEAD/OPTIONS) must carry an `Origin` equal
/// to the app's own when it carries one at all, and must carry one when a cookie
/// authenticated it (`by_cookie`): a browser always sends `Origin` on such requests, so
/// its absence means a client that could be replaying the cookie.
pub(crate) fn state_change_refusal(
    rule: &OriginRule<'_>,
    method: &Method,
    headers: &HeaderMap,
    by_cookie: bool,
) -> Option<ApiError> {
    if is_safe(method) {
        return None;
    }
    match headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        Some(origin) if (rule.allowed)(origin) => None,
        Some(origin) => Some(ApiError::new(
            StatusCode::FORBIDDEN,
            "bad_origin",
            format!(
                "requests that change something must come from the app's own page ({}); this one came from `{origin}`",
                rule.app_origin
            ),
        )),
        None if by_cookie => Some(ApiError::new(
            StatusCode::FORBIDDEN,
            "missing_origin",
            "a browser request that changes something must carry an Origin header",
        )),
        None => None,
    }
}

/// The origin and token checks of [`api_guard`], in order.
fn personal_refusal(state: &AppState, request: &Request) -> Option<ApiError> {
    let headers = request.headers();
    let allowed = |origin: &str| origin_allowed(state, headers, origin);
    let rule = OriginRule::personal(state, headers, &allowed);
    if let Some(refusal) = cross_origin_refusal(&rule, headers) {
        return Some(refusal);
    }
    let Some(kind) = authenticate(state, headers) else {
        return Some(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            format!(
                "missing or wrong access token: open the link `switchboard serve` printed ({}/?token=…), or send `Authorization: Bearer <token>`",
                state.cfg().app_origin
            ),
        ));
    };
    let rule = OriginRule {
        app_origin: state.cfg().app_origin.clone(),
        ..rule
    };
    state_change_refusal(&rule, request.method(), headers, kind == AuthKind::Cookie)
}

/// Middleware for `/api`: host, token, origin.
pub async fn api_guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if !host_allowed(&state, headers) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "bad_host",
            "unexpected Host header: open the app at the address Switchboard printed",
        )
        .into_response();
    }
    if let Some(refusal) = personal_refusal(&state, &request) {
        return refusal.into_response();
    }
    let mut response = next.run(request).await;
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

/// What a page request may see.
pub enum PageAccess {
    /// Serve the page.
    Ok,
    /// Serve the page and set the cookie (the printed link was followed).
    SetCookie(String),
    /// Show the "use the printed link" page.
    Denied { wrong_token: bool },
}

/// Decides access for a page (`token` is the `?token=` query parameter).
pub fn page_access(state: &AppState, headers: &HeaderMap, token: Option<&str>) -> PageAccess {
    let cfg = state.cfg();
    if let Some(t) = token {
        if constant_time_eq(t, &cfg.token) {
            let secure = if cfg.app_origin.starts_with("https://") {
                "; Secure"
            } else {
                ""
            };
            return PageAccess::SetCookie(format!(
                "{}={}; HttpOnly; SameSite=Strict; Path=/{secure}",
                cfg.cookie_name(),
                cfg.token
            ));
        }
        return PageAccess::Denied { wrong_token: true };
    }
    if !host_allowed(state, headers) {
        return PageAccess::Denied { wrong_token: false };
    }
    match cookie_value(headers, &cfg.cookie_name()) {
        Some(v) if constant_time_eq(&v, &cfg.token) => PageAccess::Ok,
        _ => PageAccess::Denied { wrong_token: false },
    }
}

/// A JSON request body. Malformed JSON → 400 with the parse error; JSON of the wrong
/// shape → 400 naming the field.
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request<Body>, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("cannot read the request body: {e}"),
            )
        })?;
        parse_json(&bytes).map(ApiJson)
    }
}

/// Parses a request body as `T`, with the errors [`ApiJson`] gives.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            "the request body is empty: send a JSON object",
        ));
    }
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            format!("malformed JSON: {e}"),
        )
    })?;
    serde_json::from_value(value).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            format!("invalid request: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn cookies_are_found_by_exact_name() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; switchboard_token_80=xyz; switchboard_token_8=no"),
        );
        assert_eq!(
            cookie_value(&h, "switchboard_token_80").as_deref(),
            Some("xyz")
        );
        assert_eq!(
            cookie_value(&h, "switchboard_token_8").as_deref(),
            Some("no")
        );
        assert_eq!(cookie_value(&h, "b"), None);
    }

    #[test]
    fn json_errors_are_classified() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct T {
            url: String,
        }
        assert_eq!(
            parse_json::<T>(b"{nope").unwrap_err().code,
            "malformed_json"
        );
        assert_eq!(parse_json::<T>(b"").unwrap_err().code, "malformed_json");
        let e = parse_json::<T>(b"{}").unwrap_err();
        assert_eq!(e.code, "invalid_request");
        assert!(e.message.contains("url"), "{}", e.message);
    }
}
