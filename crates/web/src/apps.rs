//! MCP Apps, the host side (SEP-1865, ext-apps protocol `2026-01-26`).
//!
//! - Linking: a tool's (or a result's) `_meta.ui.resourceUri` — or the deprecated flat
//!   key `_meta["ui/resourceUri"]`; nested wins — names a `ui://` resource.
//! - `POST /api/apps` `{server, resourceUri, tool?, chatSession?}` reads that resource
//!   through the server's own connection and opens an **app session**: a random id bound
//!   server-side to that server. The answer carries the HTML, the CSP and the iframe
//!   `allow` list; the page hands the HTML to the sandbox proxy.
//! - The sandbox proxy (`GET /sandbox/{id}` on the *second* listener, another host name
//!   than the app's so the app's cookies are out of reach) sends the session's CSP as an
//!   HTTP header and loads the HTML into an inner `srcdoc` iframe without
//!   `allow-same-origin`, relaying messages both ways.
//! - App requests (`tools/call`, `resources/read`, lists) come back through
//!   `/api/mcp/tool-call` and `/api/mcp/resource-read` with `appId`: the server is the
//!   session's, never one the browser names, and a tool must have `"app"` in its
//!   `_meta.ui.visibility` (default `["model","app"]`).
//! - The CSP ([`build_csp`]) is the spec's default, widened only by the *origins* the
//!   resource declares in `_meta.ui.csp` (`scheme://host[:port]`, a DNS name optionally
//!   led by one `*.` wildcard: [`csp_origin`]); every other entry (a bare scheme, `*`, a
//!   path) is dropped with a warning naming the app. `frame-ancestors` is the page that
//!   opened the session.

use std::time::Instant;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use switchboard_host::ServerStatus;
use switchboard_mcp::CallOptions;

use crate::access::ApiJson;
use crate::error::{ApiError, ApiResult};
use crate::random::random_id;
use crate::state::AppState;

/// The MIME type of MCP App HTML resources.
pub const APP_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// The CSP applied when a resource declares none (the spec's default).
pub const DEFAULT_CSP: &str = "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; media-src 'self' data:; connect-src 'none'; frame-src 'none'; object-src 'none'; base-uri 'self'";

/// At most this many app sessions are kept; the oldest go first.
const MAX_APP_SESSIONS: usize = 200;

/// A tool's MCP App link and visibility.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUi {
    /// The `ui://` resource of its app, if it has one.
    pub resource_uri: Option<String>,
    /// Who may call it: `model` and/or `app`.
    pub visibility: Vec<String>,
}

fn ui_uri(meta: &Value) -> Option<String> {
    let nested = meta
        .get("ui")
        .and_then(|u| u.get("resourceUri"))
        .and_then(Value::as_str);
    let flat = meta.get("ui/resourceUri").and_then(Value::as_str);
    nested
        .or(flat)
        .filter(|u| u.starts_with("ui://"))
        .map(str::to_string)
}

/// `_meta` of a tool → its app link and visibility (`None` when it has neither).
pub fn tool_ui(meta: &Value) -> Option<ToolUi> {
    let uri = ui_uri(meta);
    let vis = meta
        .get("ui")
        .and_then(|u| u.get("visibility"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect::<Vec<_>>()
        });
    if uri.is_none() && vis.is_none() {
        return None;
    }
    Some(ToolUi {
        resource_uri: uri,
        visibility: vis.unwrap_or_else(|| vec!["model".into(), "app".into()]),
    })
}

/// The `ui://` resource a tool result points at (`_meta.ui.resourceUri` or the flat key).
pub fn result_ui_uri(result: &Value) -> Option<String> {
    result.get("_meta").and_then(ui_uri)
}

/// Whether a tool (as JSON) may be called by an app.
pub fn visible_to_app(tool: &Value) -> bool {
    tool.get("_meta")
        .and_then(tool_ui)
        .is_none_or(|ui| ui.visibility.iter().any(|v| v == "app"))
}

/// Why a declared `_meta.ui.csp` entry was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CspSourceError {
    Empty,
    TooLong,
    /// Whitespace, a quote, `;`, `,`, `\\` or a control character: it could add
    /// sources or directives to the header.
    Separator,
    /// No `scheme://`: a bare scheme (`https:`, `data:`), a bare host or `*`.
    NoScheme,
    /// A scheme other than `https`, `http`, `wss`, `ws`.
    Scheme,
    /// A path (other than a lone `/`), query, fragment or user info.
    NotAnOrigin,
    /// A host that is not a DNS name, an IPv4 address or a bracketed IPv6 address
    /// (a `*.` subdomain wildcard may lead a DNS name).
    Host,
    Port,
}

impl std::fmt::Display for CspSourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CspSourceError::Empty => "it is empty",
            CspSourceError::TooLong => "it is longer than 200 characters",
            CspSourceError::Separator => {
                "it contains whitespace, a quote, `;`, `,`, `\\` or a control character"
            }
            CspSourceError::NoScheme => {
                "it is not an origin (`https://host[:port]`): a bare scheme, host or `*` is refused"
            }
            CspSourceError::Scheme => "only https, http, wss and ws origins are allowed",
            CspSourceError::NotAnOrigin => {
                "it has a path, query, fragment or user info: only an origin (`scheme://host[:port]`) is allowed"
            }
            CspSourceError::Host => "its host is not a valid host name or address",
            CspSourceError::Port => "its port is not a number from 1 to 65535",
        })
    }
}

fn valid_dns_name(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// A declared CSP entry (`_meta.ui.csp.*Domains`) as it may go into the header: an
/// origin only, `scheme://host[:port]` with scheme `https`, `http`, `wss` or `ws`,
/// lower-cased. A DNS name may start with a `*.` subdomain wildcard
/// (`https://*.example.com`, as the ext-apps types allow for resources); a single
/// trailing `/` is dropped. Bare schemes (`https:`, `data:`, `blob:`), `*`, bare hosts,
/// paths, queries, quotes, `;`, `,` and whitespace are refused.
pub fn csp_origin(src: &str) -> Result<String, CspSourceError> {
    if src.is_empty() {
        return Err(CspSourceError::Empty);
    }
    if src.len() > 200 {
        return Err(CspSourceError::TooLong);
    }
    if src
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, ';' | ',' | '\'' | '"' | '\\'))
    {
        return Err(CspSourceError::Separator);
    }
    let Some((scheme, rest)) = src.split_once("://") else {
        return Err(CspSourceError::NoScheme);
    };
    let scheme = scheme.to_ascii_lowercase();
    if !matches!(scheme.as_str(), "https" | "http" | "wss" | "ws") {
        return Err(CspSourceError::Scheme);
    }
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() {
        return Err(CspSourceError::Host);
    }
    if authority.contains(['/', '?', '#', '@']) {
        return Err(CspSourceError::NotAnOrigin);
    }
    let authority = authority.to_ascii_lowercase();
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (addr, after) = v6.split_once(']').ok_or(CspSourceError::Host)?;
        if addr.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(CspSourceError::Host);
        }
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or(CspSourceError::Port)?),
        };
        (format!("[{addr}]"), port)
    } else {
        let (host, port) = match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority.as_str(), None),
        };
        let name = host.strip_prefix("*.").unwrap_or(host);
        if !valid_dns_name(name) {
            return Err(CspSourceError::Host);
        }
        (host.to_string(), port)
    };
    match port {
        None => Ok(format!("{scheme}://{host}")),
        Some(p) => {
            let ok = !p.is_empty()
                && p.len() <= 5
                && p.chars().all(|c| c.is_ascii_digit())
                && p.parse::<u32>().is_ok_and(|n| (1..=65535).contains(&n));
            if !ok {
                return Err(CspSourceError::Port);
            }
            Ok(format!("{scheme}://{host}:{p}"))
        }
    }
}

/// The valid origins declared under `key`; every other entry is dropped with a
/// warning naming the app and the entry.
fn sources(csp: Option<&Value>, key: &str, app: &str) -> Vec<String> {
    let Some(declared) = csp.and_then(|c| c.get(key)) else {
        return Vec::new();
    };
    let Some(entries) = declared.as_array() else {
        tracing::warn!(
            app,
            "MCP App CSP: `{key}` is not a list of origins; ignoring it"
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries {
        let Some(s) = entry.as_str() else {
            tracing::warn!(
                app,
                %entry,
                "MCP App CSP: dropped a `{key}` entry: it is not a string"
            );
            continue;
        };
        match csp_origin(s) {
            Ok(origin) => {
                if !out.contains(&origin) {
                    out.push(origin);
                }
            }
            Err(why) => tracing::warn!(
                app,
                entry = s,
                "MCP App CSP: dropped the `{key}` entry {s:?} of app {app}: {why}"
            ),
        }
    }
    out
}

/// The Content-Security-Policy for an app: the spec's default, widened only by the
/// domains the resource declares in `_meta.ui.csp` (`connectDomains`,
/// `resourceDomains`, `frameDomains`, `baseUriDomains`); entries that are not origins
/// (see [`csp_origin`]) are dropped.
/// `frame_ancestor` (the app's origin) is the only page allowed to embed the proxy.
/// `app` names the app in the warnings about dropped entries.
pub fn build_csp(csp: Option<&Value>, frame_ancestor: &str, app: &str) -> String {
    let connect = sources(csp, "connectDomains", app);
    let resource = sources(csp, "resourceDomains", app);
    let frame = sources(csp, "frameDomains", app);
    let base = sources(csp, "baseUriDomains", app);
    let with = |base: &str, extra: &[String]| {
        if extra.is_empty() {
            base.to_string()
        } else {
            format!("{base} {}", extra.join(" "))
        }
    };
    let mut parts = vec![
        "default-src 'none'".to_string(),
        with("script-src 'self' 'unsafe-inline'", &resource),
        with("style-src 'self' 'unsafe-inline'", &resource),
        with("img-src 'self' data:", &resource),
        with("media-src 'self' data:", &resource),
    ];
    if !resource.is_empty() {
        parts.push(with("font-src 'self' data:", &resource));
    }
    parts.push(if connect.is_empty() {
        "connect-src 'none'".into()
    } else {
        with("connect-src 'self'", &connect)
    });
    parts.push(if frame.is_empty() {
        "frame-src 'none'".into()
    } else {
        format!("frame-src {}", frame.join(" "))
    });
    parts.push("object-src 'none'".into());
    parts.push(with("base-uri 'self'", &base));
    if !frame_ancestor.is_empty() {
        parts.push(format!("frame-ancestors {frame_ancestor}"));
    }
    parts.join("; ")
}

/// `_meta.ui.permissions` → the iframe `allow` attribute (`camera; microphone`).
pub fn permissions_to_allow(permissions: Option<&Value>) -> String {
    let Some(p) = permissions.and_then(Value::as_object) else {
        return String::new();
    };
    let mut out = Vec::new();
    for (key, feature) in [
        ("camera", "camera"),
        ("microphone", "microphone"),
        ("geolocation", "geolocation"),
        ("clipboardWrite", "clipboard-write"),
    ] {
        let on = match p.get(key) {
            Some(Value::Bool(b)) => *b,
            Some(Value::Object(_)) => true,
            _ => false,
        };
        if on {
            out.push(feature);
        }
    }
    out.join("; ")
}

/// An MCP App's HTML resource as read: its HTML, MIME type and `_meta.ui`.
#[derive(Debug, Clone)]
pub struct UiResource {
    /// The HTML (from `text`, or a base64 `blob` holding UTF-8).
    pub html: String,
    /// The content's MIME type, when it names one.
    pub mime_type: Option<String>,
    /// The content's `_meta.ui` (`csp`, `permissions`, `prefersBorder`), if any.
    pub ui: Option<Value>,
}

/// A `resources/read` result (as JSON) → the app's HTML: its first content, which must be
/// HTML (`text/html…`, or no MIME type) as `text` or a base64 `blob`.
///
/// # Errors
/// A 502 naming `uri` and what was wrong: no contents, another MIME type, a blob that is
/// not base64 UTF-8, neither text nor blob.
pub fn ui_resource(read_result: &Value, uri: &str) -> ApiResult<UiResource> {
    let first = read_result
        .get("contents")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| ApiError::upstream(format!("{uri} has no contents")))?;
    let mime = first
        .get("mimeType")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(m) = &mime
        && !m.to_ascii_lowercase().starts_with("text/html")
    {
        return Err(ApiError::upstream(format!(
            "{uri} is `{m}`, not an MCP App ({APP_MIME_TYPE})"
        )));
    }
    let html = if let Some(t) = first.get("text").and_then(Value::as_str) {
        t.to_string()
    } else if let Some(b) = first.get("blob").and_then(Value::as_str) {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b.trim())
            .map_err(|e| ApiError::upstream(format!("the resource blob is not base64: {e}")))?;
        String::from_utf8(bytes)
            .map_err(|_| ApiError::upstream("the resource blob is not UTF-8 HTML"))?
    } else {
        return Err(ApiError::upstream(format!(
            "{uri} has neither text nor blob"
        )));
    };
    Ok(UiResource {
        html,
        mime_type: mime,
        ui: first.get("_meta").and_then(|m| m.get("ui")).cloned(),
    })
}

/// Whether an app may call `tool` (its definition on the app's server, as JSON): the
/// tool must exist there and have `"app"` in its `_meta.ui.visibility`.
///
/// # Errors
/// 403 naming the tool and why.
pub fn check_app_tool(tool: Option<&Value>, server: &str, name: &str) -> ApiResult<()> {
    let Some(tool) = tool else {
        return Err(ApiError::forbidden(format!(
            "the app's server `{server}` has no tool `{name}`; an app may only call its own server's tools"
        )));
    };
    if !visible_to_app(tool) {
        return Err(ApiError::forbidden(format!(
            "tool `{name}` is not visible to apps (its _meta.ui.visibility lacks \"app\")"
        )));
    }
    Ok(())
}

/// The sandbox proxy page for an app opened by the page at `host_origin`, under
/// `csp_header` (sent as the HTTP header the app's `srcdoc` frame inherits), `no-store`,
/// `no-referrer`, `nosniff`. No valid CSP, no page: the app is never served unconfined.
pub fn sandbox_response(host_origin: &str, csp_header: &str) -> Response {
    let origin_js = serde_json::to_string(host_origin).unwrap_or_else(|_| "\"\"".into());
    let body = SANDBOX_HTML.replace("\"__HOST_ORIGIN__\"", &origin_js);
    let Ok(csp) = HeaderValue::from_str(csp_header) else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the app's Content-Security-Policy is not a valid header; reopen the app",
        )
            .into_response();
    };
    let mut resp = (StatusCode::OK, body).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CONTENT_SECURITY_POLICY, csp);
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// An app rendered in the page, bound to the server that produced it.
#[derive(Debug, Clone)]
pub struct AppSession {
    pub server: String,
    pub resource_uri: String,
    pub csp_header: String,
    /// The app page's origin: the only `frame-ancestors` and the only origin the
    /// sandbox accepts messages from.
    pub host_origin: String,
    pub created: Instant,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenApp {
    server: String,
    resource_uri: String,
    #[serde(default)]
    tool: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenedApp {
    app_id: String,
    proxy_url: String,
    proxy_origin: String,
    html: String,
    mime_type: Option<String>,
    /// `_meta.ui.csp` as declared (for `hostCapabilities.sandbox`).
    csp: Option<Value>,
    /// The CSP header the proxy page sends.
    csp_header: String,
    permissions: Option<Value>,
    /// The iframe `allow` attribute.
    allow: String,
    prefers_border: Option<bool>,
    /// The inner iframe's sandbox.
    sandbox: &'static str,
    /// The tool definition, for `hostContext.toolInfo`.
    tool: Option<Value>,
}

/// `POST /api/apps`: read a UI resource and open an app session.
pub async fn open(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<OpenApp>,
) -> ApiResult<Json<OpenedApp>> {
    if !req.resource_uri.starts_with("ui://") {
        return Err(ApiError::bad_request(
            "`resourceUri` must be a ui:// resource (MCP Apps)",
        ));
    }
    let host = state.host();
    let snap = host
        .server(&req.server)
        .ok_or_else(|| ApiError::not_found(format!("no server named `{}`", req.server)))?;
    if snap.status != ServerStatus::Connected {
        return Err(ApiError::conflict(format!(
            "server `{}` is {}",
            req.server, snap.status
        )));
    }
    let conn = host
        .connection(&req.server)
        .ok_or_else(|| ApiError::conflict(format!("server `{}` is not connected", req.server)))?;
    let result = conn
        .read_resource(&req.resource_uri, &CallOptions::default())
        .await
        .map_err(|e| ApiError::upstream(format!("reading {}: {e}", req.resource_uri)))?;
    let value = serde_json::to_value(&result).unwrap_or(Value::Null);
    let resource = ui_resource(&value, &req.resource_uri)?;
    // `_meta.ui` from the content, else from the resources/list entry.
    let listed_meta = snap
        .resources
        .iter()
        .filter_map(|r| serde_json::to_value(r).ok())
        .find(|r| r.get("uri").and_then(Value::as_str) == Some(req.resource_uri.as_str()))
        .and_then(|r| r.get("_meta").and_then(|m| m.get("ui")).cloned());
    let UiResource {
        html,
        mime_type: mime,
        ui,
    } = resource;
    let ui = ui.or(listed_meta);
    let csp = ui.as_ref().and_then(|u| u.get("csp")).cloned();
    let permissions = ui.as_ref().and_then(|u| u.get("permissions")).cloned();
    let prefers_border = ui
        .as_ref()
        .and_then(|u| u.get("prefersBorder"))
        .and_then(Value::as_bool);
    // The page that opened the app is the only one allowed to embed its sandbox, in
    // every mode (bound to 0.0.0.0, the origin the page was reached under).
    let host_origin = state.app_origin_for(&headers);
    let app_name = format!("{} ({})", req.resource_uri, req.server);
    let csp_header = build_csp(csp.as_ref(), &host_origin, &app_name);
    let tool = req.tool.as_ref().and_then(|name| {
        snap.tools
            .iter()
            .find(|t| t.name == name.as_str())
            .and_then(|t| serde_json::to_value(t).ok())
    });
    let app_id = random_id();
    {
        let mut apps = state
            .inner
            .apps
            .lock()
            .map_err(|_| ApiError::internal("app sessions are unavailable"))?;
        if apps.len() >= MAX_APP_SESSIONS
            && let Some(oldest) = apps
                .iter()
                .min_by_key(|(_, s)| s.created)
                .map(|(k, _)| k.clone())
        {
            apps.remove(&oldest);
        }
        apps.insert(
            app_id.clone(),
            AppSession {
                server: req.server.clone(),
                resource_uri: req.resource_uri.clone(),
                csp_header: csp_header.clone(),
                host_origin,
                created: Instant::now(),
            },
        );
    }
    let proxy_origin = state.proxy_origin_for(&headers);
    Ok(Json(OpenedApp {
        proxy_url: format!("{proxy_origin}/sandbox/{app_id}"),
        proxy_origin,
        app_id,
        html,
        mime_type: mime,
        allow: permissions_to_allow(permissions.as_ref()),
        csp,
        csp_header,
        permissions,
        prefers_border,
        sandbox: "allow-scripts allow-forms",
        tool,
    }))
}

/// `DELETE /api/apps/{id}`: the app was torn down.
pub async fn close(State(state): State<AppState>, Path(id): Path<String>) -> Json<Value> {
    let removed = state
        .inner
        .apps
        .lock()
        .map(|mut a| a.remove(&id).is_some())
        .unwrap_or(false);
    Json(json!({"ok": removed}))
}

/// The session an app request belongs to.
pub fn session(state: &AppState, app_id: &str) -> ApiResult<AppSession> {
    state
        .inner
        .apps
        .lock()
        .ok()
        .and_then(|a| a.get(app_id).cloned())
        .ok_or_else(|| {
            ApiError::forbidden("unknown app session: the app was closed or never opened")
        })
}

/// `GET /api/apps/{id}/lists`: what the app's own server offers (for the app's
/// `resources/list`, `resources/templates/list`, `prompts/list`).
pub async fn lists(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let s = session(&state, &id)?;
    let snap = state
        .host()
        .server(&s.server)
        .ok_or_else(|| ApiError::not_found("the app's server is gone"))?;
    Ok(Json(json!({
        "server": s.server,
        "resourceUri": s.resource_uri,
        "resources": snap.resources,
        "resourceTemplates": snap.resource_templates,
        "prompts": snap.prompts,
    })))
}

const SANDBOX_HTML: &str = include_str!("../ui/sandbox.html");

/// Every sandbox-listener answer that has no CSP of its own (errors, unknown routes)
/// gets one that nothing may frame or load.
pub async fn sandbox_default_csp(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let mut resp = next.run(request).await;
    if !resp.headers().contains_key(header::CONTENT_SECURITY_POLICY) {
        resp.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
        );
    }
    resp
}

/// `GET /sandbox/{id}` on the proxy listener: the sandbox proxy page, with the app
/// session's CSP as a header.
pub async fn sandbox_page(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let cfg = state.cfg();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let host_ok = if cfg.origin_from_host {
        // Reached under any address: at least on the sandbox's own port.
        host.rsplit_once(':')
            .is_some_and(|(_, port)| port == cfg.proxy_port.to_string())
    } else {
        let expected = cfg
            .proxy_origin
            .split_once("://")
            .map_or(cfg.proxy_origin.as_str(), |(_, rest)| rest);
        host.eq_ignore_ascii_case(expected)
    };
    if !host_ok {
        return (
            StatusCode::FORBIDDEN,
            "unexpected Host header: the sandbox answers only under its own origin",
        )
            .into_response();
    }
    let Some(session) = state
        .inner
        .apps
        .lock()
        .ok()
        .and_then(|a| a.get(&id).cloned())
    else {
        return (StatusCode::NOT_FOUND, "no such app session").into_response();
    };
    sandbox_response(&session.host_origin, &session.csp_header)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_uri_wins_over_flat_and_must_be_ui() {
        let m = json!({"ui": {"resourceUri": "ui://a"}, "ui/resourceUri": "ui://b"});
        assert_eq!(
            tool_ui(&m).and_then(|u| u.resource_uri).as_deref(),
            Some("ui://a")
        );
        let flat = json!({"ui/resourceUri": "ui://b"});
        assert_eq!(
            tool_ui(&flat).and_then(|u| u.resource_uri).as_deref(),
            Some("ui://b")
        );
        assert_eq!(tool_ui(&json!({"ui": {"resourceUri": "https://x"}})), None);
        assert_eq!(
            result_ui_uri(&json!({"_meta": {"ui/resourceUri": "ui://c"}})).as_deref(),
            Some("ui://c")
        );
    }

    #[test]
    fn visibility_defaults_to_both() {
        assert!(visible_to_app(&json!({"name": "t"})));
        assert!(visible_to_app(
            &json!({"name": "t", "_meta": {"ui": {"resourceUri": "ui://x"}}})
        ));
        assert!(!visible_to_app(
            &json!({"name": "t", "_meta": {"ui": {"visibility": ["model"]}}})
        ));
        assert!(visible_to_app(
            &json!({"name": "t", "_meta": {"ui": {"visibility": ["app"]}}})
        ));
    }

    #[test]
    fn default_csp_and_declared_domains() {
        let d = build_csp(None, "", "ui://t");
        assert_eq!(d, DEFAULT_CSP);
        let c = build_csp(
            Some(&json!({
                "connectDomains": ["https://api.example.com", "bad; script-src *"],
                "resourceDomains": ["https://cdn.example.com"],
                "frameDomains": ["https://youtube.com"],
            })),
            "http://127.0.0.1:1",
            "ui://t",
        );
        assert!(
            c.contains("connect-src 'self' https://api.example.com;"),
            "{c}"
        );
        assert!(!c.contains("bad"), "{c}");
        assert!(
            c.contains("script-src 'self' 'unsafe-inline' https://cdn.example.com;"),
            "{c}"
        );
        assert!(c.contains("frame-src https://youtube.com;"), "{c}");
        assert!(c.ends_with("frame-ancestors http://127.0.0.1:1"), "{c}");
    }

    #[test]
    fn csp_entries_must_be_origins() {
        for ok in [
            ("https://api.example.com", "https://api.example.com"),
            ("wss://x.example:8443", "wss://x.example:8443"),
            ("HTTPS://CDN.Example.com/", "https://cdn.example.com"),
            ("https://*.example.com", "https://*.example.com"),
            ("http://127.0.0.1:3001", "http://127.0.0.1:3001"),
            ("https://[::1]:8443", "https://[::1]:8443"),
            ("ws://localhost", "ws://localhost"),
        ] {
            assert_eq!(csp_origin(ok.0).as_deref(), Ok(ok.1), "{}", ok.0);
        }
        for bad in [
            "",
            "*",
            "http:",
            "https:",
            "ws:",
            "data:",
            "blob:",
            "data:text/html,x",
            "api.example.com",
            "*.example.com",
            "https://*",
            "https://*.*.example.com",
            "https://a.*.example.com",
            "https://",
            "https:///",
            "javascript://x",
            "file:///etc/passwd",
            "ftp://example.com",
            "https://example.com/path",
            "https://example.com/a/",
            "https://example.com?q=1",
            "https://example.com#f",
            "https://user@example.com",
            "https://example.com:",
            "https://example.com:0",
            "https://example.com:65536",
            "https://example.com:*",
            "https://example.com:80x",
            "https://[::1",
            "https://[nope]",
            "https://exa mple.com",
            " https://example.com",
            "https://example.com\t",
            "https://example.com;script-src *",
            "https://example.com; script-src *",
            "https://a.com,https://b.com",
            "'self'",
            "'unsafe-eval'",
            "https://example.com'",
            "https://\"x\".com",
            "https://ex\\ample.com",
            "https://-bad.example.com",
            "https://bad..example.com",
            "https://exa_mple.com",
        ] {
            assert!(csp_origin(bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn non_origin_entries_are_dropped_and_the_rest_kept() {
        let c = build_csp(
            Some(&json!({
                "connectDomains": ["https:", "https://api.example.com", "*", "wss://rt.example.com:8443", 7],
                "resourceDomains": ["data:", "blob:", "https://cdn.example.com/lib.js", "https://cdn.example.com"],
                "frameDomains": ["https://embed.example.com?x", "https://embed.example.com"],
                "baseUriDomains": ["https://base.example.com", "http: https:"],
            })),
            "http://127.0.0.1:1",
            "ui://t",
        );
        assert!(
            c.contains("connect-src 'self' https://api.example.com wss://rt.example.com:8443;"),
            "{c}"
        );
        assert!(
            c.contains("img-src 'self' data: https://cdn.example.com;"),
            "{c}"
        );
        assert!(c.contains("frame-src https://embed.example.com;"), "{c}");
        assert!(
            c.contains("base-uri 'self' https://base.example.com;"),
            "{c}"
        );
        assert!(!c.contains("blob:"), "{c}");
        assert!(!c.contains("lib.js"), "{c}");
        assert!(!c.contains(" * "), "{c}");
        assert!(!c.contains(" https: "), "{c}");
        // Only refused entries: the directive stays closed.
        let c = build_csp(
            Some(&json!({"connectDomains": ["https:", "*"], "frameDomains": ["data:"]})),
            "",
            "ui://t",
        );
        assert_eq!(c, DEFAULT_CSP);
    }

    #[test]
    fn permissions_map_to_allow() {
        assert_eq!(
            permissions_to_allow(Some(
                &json!({"microphone": {}, "clipboardWrite": {}, "camera": false})
            )),
            "microphone; clipboard-write"
        );
        assert_eq!(permissions_to_allow(None), "");
    }
}
