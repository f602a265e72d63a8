//! CORS for browser MCP clients, on the bearer-token and public OAuth endpoints only:
//! `/mcp`, the RFC 9728 and RFC 8414 metadata, `/oauth/register`, `/oauth/token` and
//! `/oauth/revoke` ([`CORS_PATHS`]). A preflight (`OPTIONS` with
//! `Access-Control-Request-Method`) on one of them is answered here, before routing; every
//! answer of one of them carries `Access-Control-Allow-Origin: *` and exposes
//! `Mcp-Session-Id`, `WWW-Authenticate` and `Mcp-Protocol-Version`. Any origin is allowed
//! because none of these endpoints reads a cookie: a token in a header or a form is what
//! they act on, so another site's page gains nothing a script there could not send itself.
//!
//! Why not tower-http's `CorsLayer`: it is per router, and these open paths sit beside
//! cookie routes in one router, so a layer would mean splitting the router by trust; a
//! path list checked before routing keeps "no CORS on a cookie route" one constant,
//! tested path by path (`tests/team_gateway.rs`'s
//! `cors_opens_the_bearer_endpoints_and_no_cookie_route`, and from a second origin in
//! headless Chromium: `tests/team_browser.rs`).
//!
//! Must not: add CORS headers to any other path (the session routes stay same-origin, and
//! `session::require_session` still refuses another origin's request carrying the cookie),
//! or ever send `Access-Control-Allow-Credentials`.

use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The paths a page on another origin may call (no cookie is read on any of them).
pub const CORS_PATHS: &[&str] = &[
    "/mcp",
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-authorization-server",
    "/oauth/register",
    "/oauth/token",
    "/oauth/revoke",
];

const ALLOW_METHODS: &str = "GET, POST, DELETE, OPTIONS";
/// `Authorization` is never covered by a `*`, so every header is named.
const ALLOW_HEADERS: &str =
    "Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID";
const EXPOSE_HEADERS: &str = "Mcp-Session-Id, WWW-Authenticate, Mcp-Protocol-Version";
const MAX_AGE: &str = "600";

fn is_cors_path(path: &str) -> bool {
    CORS_PATHS.contains(&path)
}

/// Middleware around the whole team router: preflights of [`CORS_PATHS`] answered (204),
/// their answers marked readable by any origin; every other path untouched.
pub async fn cors(request: Request, next: Next) -> Response {
    if !is_cors_path(request.uri().path()) {
        return next.run(request).await;
    }
    let preflight = request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut response = if preflight {
        let mut r = StatusCode::NO_CONTENT.into_response();
        let h = r.headers_mut();
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(ALLOW_METHODS),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static(ALLOW_HEADERS),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static(MAX_AGE),
        );
        r
    } else {
        next.run(request).await
    };
    let h = response.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSE_HEADERS),
    );
    h.remove(header::ACCESS_CONTROL_ALLOW_CREDENTIALS);
    h.append(header::VARY, HeaderValue::from_static("Origin"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bearer_and_public_oauth_paths_get_cors() {
        for p in ["/mcp", "/oauth/token", "/oauth/revoke", "/oauth/register"] {
            assert!(is_cors_path(p), "{p}");
        }
        for p in [
            "/api/servers",
            "/api/gateway/grants",
            "/oauth/authorize",
            "/auth/logout",
            "/oauth/mcp/callback",
            "/mcp/",
            "/",
        ] {
            assert!(!is_cors_path(p), "{p}");
        }
    }
}
