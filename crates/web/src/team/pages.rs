//! The team app's pages: `GET /` (the sign-in page for a browser without a live session,
//! else the app shell) and `GET /assets/{file}` (its CSS and JavaScript). Plain HTML, CSS
//! and JavaScript embedded in the binary (`ui/team/`, plus the personal app's `app.css`
//! and icon), no build step.
//!
//! Both pages are static: no user data is written into them (the shell's script asks
//! `/api/me` and `/api/servers`, behind the session middleware), so `/` answers nothing
//! about anyone's data whoever calls it; a live session only picks which page. Served
//! with a strict CSP (scripts from the app's own origin only, frames only from it — the
//! MCP App sandbox pages, themselves in an opaque origin —, no framing of the app) and
//! `no-store`.
//!
//! [`problem_page`]: the page a browser gets when the sign-in callback fails (a refused
//! account, an expired login): the reason, HTML-escaped, and a link back to `/`, under
//! the same CSP, no script.
//!
//! Must not: put anything from the store (email, server names, URLs) into a page, put
//! unescaped text into one, or serve a file that is not in the embedded list.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::state::TeamState;
use crate::access::cookie_value;

const APP_HTML: &str = include_str!("../../ui/team/index.html");
const SIGNIN_HTML: &str = include_str!("../../ui/team/signin.html");

/// `(file name, content type, content)` of every team asset.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("../../ui/app.css"),
    ),
    (
        "team.css",
        "text/css; charset=utf-8",
        include_str!("../../ui/team/team.css"),
    ),
    (
        "team.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/team/team.js"),
    ),
    (
        "team-apps.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/team/team-apps.js"),
    ),
    (
        "apps.js",
        "text/javascript; charset=utf-8",
        include_str!("../../ui/apps.js"),
    ),
    (
        "favicon.svg",
        "image/svg+xml",
        include_str!("../../ui/favicon.svg"),
    ),
];

/// The pages' Content-Security-Policy.
const TEAM_PAGE_CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

fn security_headers(h: &mut HeaderMap) {
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

/// Whether the request carries a session the store knows (a store error counts as
/// signed in: the shell then reports the store's answer from `/api/me`).
async fn has_session(state: &TeamState, headers: &HeaderMap) -> bool {
    let Some(cookie) = cookie_value(headers, state.cfg().cookie_name()) else {
        return false;
    };
    match state.store().session_user(&cookie).await {
        Ok(user) => user.is_some(),
        Err(e) => {
            tracing::warn!("team store: {e}");
            true
        }
    }
}

/// `GET /`: the app shell for a signed-in browser, else the sign-in page.
pub async fn page(State(state): State<TeamState>, headers: HeaderMap) -> Response {
    let body = if has_session(&state, &headers).await {
        APP_HTML
    } else {
        SIGNIN_HTML
    };
    let mut resp = (StatusCode::OK, body).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(TEAM_PAGE_CSP),
    );
    security_headers(h);
    resp
}

/// Whether the request prefers an HTML answer (a browser navigating), by its `Accept`.
pub(crate) fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("text/html"))
}

/// `text` with `& < > " '` as character references.
fn escape_html(text: &str) -> String {
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

/// A page saying why the sign-in did not complete (`why`, escaped) with a link back to
/// the sign-in page; `status` as given, the pages' CSP, `no-store`.
pub(crate) fn problem_page(status: StatusCode, title: &str, why: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}</title><link rel=\"stylesheet\" href=\"/assets/app.css\">\
         <link rel=\"stylesheet\" href=\"/assets/team.css\"></head>\
         <body><main class=\"signin\"><h1>{title}</h1><p class=\"problem\">{why}</p>\
         <p><a href=\"/\">Back to the sign-in page</a></p></main></body></html>",
        title = escape_html(title),
        why = escape_html(why),
    );
    let mut resp = (status, html).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(TEAM_PAGE_CSP),
    );
    security_headers(h);
    resp
}

/// `GET /assets/{file}`: one of the embedded files, else 404.
pub async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, ctype, body)) => {
            let mut resp = (StatusCode::OK, *body).into_response();
            let h = resp.headers_mut();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            security_headers(h);
            resp
        }
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_problem_page_escapes_its_text_and_runs_no_script() {
        let resp = problem_page(
            StatusCode::FORBIDDEN,
            "Not allowed",
            "<script>alert('x')</script> & \"more\"",
        );
        assert_eq!(resp.status(), StatusCode::FORBIDDEN);
        assert_eq!(
            resp.headers()[header::CONTENT_SECURITY_POLICY],
            TEAM_PAGE_CSP
        );
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        let page = String::from_utf8(body.to_vec()).unwrap();
        assert!(!page.contains("<script"), "{page}");
        assert!(
            page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;more&quot;"),
            "{page}"
        );
    }
}
