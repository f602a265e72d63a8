//! The UI: plain HTML, CSS and JavaScript embedded in the binary (no build step).
//!
//! Pages (`/`, `/explorer`, `/chat`, `/settings`, `/workflows`) are one shell, `index.html`, served
//! only with the access cookie (or the printed `?token=` link, which sets it), with a
//! strict CSP: scripts from the app's own origin only, frames only from the sandbox
//! proxy's origin, and no framing of the app itself.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::access::{PageAccess, page_access};
use crate::state::AppState;

const INDEX_HTML: &str = include_str!("../ui/index.html");
const DENIED_HTML: &str = include_str!("../ui/denied.html");

/// `(file name, content type, content)` of every static asset.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("../ui/app.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/app.js"),
    ),
    (
        "forms.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/forms.js"),
    ),
    (
        "apps.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/apps.js"),
    ),
    (
        "explorer.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/explorer.js"),
    ),
    (
        "registry.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/registry.js"),
    ),
    (
        "settings.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/settings.js"),
    ),
    (
        "oauth-callback.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/oauth-callback.js"),
    ),
    (
        "chat.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/chat.js"),
    ),
    (
        "workflows.js",
        "text/javascript; charset=utf-8",
        include_str!("../ui/workflows.js"),
    ),
    (
        "favicon.svg",
        "image/svg+xml",
        include_str!("../ui/favicon.svg"),
    ),
];

fn page_csp(state: &AppState, headers: &HeaderMap) -> String {
    let proxy = state.proxy_origin_for(headers);
    format!(
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-src {proxy}; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
}

fn security_headers(resp: &mut Response) {
    let h = resp.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

/// Every page: the shell, or the "use the printed link" page.
pub async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let access = page_access(&state, &headers, query.get("token").map(String::as_str));
    let mut resp = match &access {
        PageAccess::Denied { wrong_token } => {
            let why = if *wrong_token {
                "That link's token is not this server's: it is from an earlier run, or mistyped."
            } else {
                "This page needs the link that <code>switchboard serve</code> printed in the terminal (it carries an access token)."
            };
            (
                StatusCode::UNAUTHORIZED,
                DENIED_HTML.replace("{{why}}", why),
            )
                .into_response()
        }
        PageAccess::Ok | PageAccess::SetCookie(_) => (StatusCode::OK, INDEX_HTML).into_response(),
    };
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(v) = HeaderValue::from_str(&page_csp(&state, &headers)) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    if let PageAccess::SetCookie(cookie) = access
        && let Ok(v) = HeaderValue::from_str(&cookie)
    {
        h.insert(header::SET_COOKIE, v);
    }
    security_headers(&mut resp);
    resp
}

/// `GET /assets/{file}`.
pub async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, ctype, body)) => {
            let mut resp = (StatusCode::OK, *body).into_response();
            let h = resp.headers_mut();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            security_headers(&mut resp);
            resp
        }
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}
