//! The signed-in user's MCP servers, all in the store through `Store::for_user`:
//! - `GET /api/servers`: `{servers: [{name, url, transport, headers, enabled, oauth}]}`,
//!   every header value replaced by [`KEEP_UNCHANGED`](crate::KEEP_UNCHANGED) (as the
//!   personal Settings mask secrets); `oauth.signedIn` says whether tokens are saved;
//! - `POST /api/servers` `{name, url, transport?, headers?, enabled?}`: add (409 when the
//!   name is taken); `PUT /api/servers/{name}`: edit (a header sent as `<unchanged>`
//!   keeps its saved value, only while the URL stays the same); `DELETE`: remove (with
//!   its tokens and cached connections);
//! - `POST /api/mcp-test` `{url?, headers?, transport?, name?}`: the personal Test
//!   (`test_conn::run_test`, GemiHub's contract, OAuth discovery hint on a 401); `name`
//!   alone tests that saved server;
//! - `GET /api/servers/{name}/tools`, `POST /api/servers/{name}/call` `{tool, args?}`:
//!   through this instance's client cache, with saved OAuth tokens refreshed first when
//!   they expire within five minutes (`mcp_oauth::usable_tokens`); a 401 to saved
//!   tokens refreshes them once (under the store's lease) and retries once, a second
//!   401 is `needs_oauth` naming the login;
//!   each counted and timed in `/metrics` by outcome (`metrics::McpOutcome`).
//!
//! HTTP and SSE only: a body with `command`, `args`, `env` or `cwd`, or transport
//! `stdio`, is a 400 (a browser user never makes the server run a command). Every
//! outbound request goes through the URL guard. A name that is not one of the caller's
//! servers is a 404, whoever else may have one.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use switchboard_auth::BrowserClientOptions;
use switchboard_mcp::{CallOptions, ConnectError, Connection, RequestError};
use switchboard_store::{Secret, ServerRecord, ServerRef, Transport, UserStore};

use super::cache::server_key;
use super::cache::{PlannedTarget, target_options};
use super::catalog::enabled_catalog_server;
use super::mcp_oauth::{tokens_after_401, usable_tokens};
use super::metrics::{McpMethod, McpOutcome};
use super::session::SignedIn;
use super::state::{TeamState, store_error};
use crate::KEEP_UNCHANGED;
use crate::access::ApiJson;
use crate::dto::tool_dto;
use crate::error::{ApiError, ApiResult};
use crate::test_conn::{Discovery, discover_oauth, failure, preflight, run_test};

/// At most this many headers on one server.
const MAX_HEADERS: usize = 32;

/// A server form as sent (step one: shape only).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawServer {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default, alias = "type")]
    transport: Option<String>,
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    command: Option<Value>,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default)]
    env: Option<Value>,
    #[serde(default)]
    cwd: Option<Value>,
}

/// A header value in a form: a new value, or the saved one kept.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HeaderInput {
    Keep,
    Value(String),
}

/// A checked server form (step two).
#[derive(Debug)]
struct ServerForm {
    name: Option<String>,
    url: Option<String>,
    transport: Option<Transport>,
    headers: Option<BTreeMap<String, HeaderInput>>,
    enabled: Option<bool>,
}

const STDIO_REFUSED: &str = "team mode runs no commands for browser users: stdio servers (command, args, env, cwd) cannot be added, edited or tested; give the server's http:// or https:// URL";

fn stdio_requested(
    command: Option<&Value>,
    args: Option<&Value>,
    env: Option<&Value>,
    cwd: Option<&Value>,
    transport: Option<&str>,
) -> bool {
    [command, args, env, cwd]
        .into_iter()
        .any(|v| v.is_some_and(|v| !v.is_null()))
        || transport.is_some_and(|t| t.eq_ignore_ascii_case("stdio"))
}

fn parse_transport(t: Option<&str>) -> ApiResult<Option<Transport>> {
    match t.map(str::trim) {
        None | Some("") => Ok(None),
        Some(t) if t.eq_ignore_ascii_case("http") || t.eq_ignore_ascii_case("streamable-http") => {
            Ok(Some(Transport::Http))
        }
        Some(t) if t.eq_ignore_ascii_case("sse") => Ok(Some(Transport::Sse)),
        Some(other) => Err(ApiError::bad_request(format!(
            "transport `{other}`: use `http` (Streamable HTTP) or `sse`"
        ))),
    }
}

fn parse_headers(
    headers: Option<BTreeMap<String, String>>,
) -> ApiResult<Option<BTreeMap<String, HeaderInput>>> {
    let Some(headers) = headers else {
        return Ok(None);
    };
    if headers.len() > MAX_HEADERS {
        return Err(ApiError::bad_request(format!(
            "{} headers: at most {MAX_HEADERS}",
            headers.len()
        )));
    }
    let mut out = BTreeMap::new();
    for (name, value) in headers {
        if HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(ApiError::bad_request(format!(
                "header name `{}` is not a valid HTTP header name",
                name.escape_debug()
            )));
        }
        let input = if value == KEEP_UNCHANGED {
            HeaderInput::Keep
        } else if HeaderValue::from_str(&value).is_err() {
            return Err(ApiError::bad_request(format!(
                "the value of header `{name}` is not a valid HTTP header value (no line breaks or control characters)"
            )));
        } else {
            HeaderInput::Value(value)
        };
        out.insert(name, input);
    }
    Ok(Some(out))
}

fn parse_form(raw: RawServer) -> ApiResult<ServerForm> {
    if stdio_requested(
        raw.command.as_ref(),
        raw.args.as_ref(),
        raw.env.as_ref(),
        raw.cwd.as_ref(),
        raw.transport.as_deref(),
    ) {
        return Err(ApiError::bad_request(STDIO_REFUSED));
    }
    Ok(ServerForm {
        name: raw.name.map(|n| n.trim().to_owned()),
        url: raw
            .url
            .map(|u| u.trim().to_owned())
            .filter(|u| !u.is_empty()),
        transport: parse_transport(raw.transport.as_deref())?,
        headers: parse_headers(raw.headers)?,
        enabled: raw.enabled,
    })
}

/// The headers to save: new values as sent, `<unchanged>` ones from the saved server of
/// the same name, and only while the URL is the one they were saved for.
fn resolve_headers(
    form: Option<BTreeMap<String, HeaderInput>>,
    saved: Option<&ServerRecord>,
    url: &str,
) -> ApiResult<BTreeMap<String, Secret>> {
    let Some(form) = form else {
        return Ok(match saved {
            Some(s) if s.url == url => s.headers.clone(),
            _ => BTreeMap::new(),
        });
    };
    let mut out = BTreeMap::new();
    for (name, input) in form {
        let value = match input {
            HeaderInput::Value(v) => Secret::new(v),
            HeaderInput::Keep => {
                let Some(saved) = saved else {
                    return Err(ApiError::bad_request(format!(
                        "header `{name}` is {KEEP_UNCHANGED} but there is no saved value to keep; enter the value"
                    )));
                };
                if saved.url != url {
                    return Err(ApiError::bad_request(format!(
                        "header `{name}` is {KEEP_UNCHANGED}, but the server's URL changed: saved secrets stay with the URL they were written for; enter the value again"
                    )));
                }
                saved.headers.get(&name).cloned().ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "header `{name}` is {KEEP_UNCHANGED} but there is no saved value to keep; enter the value"
                    ))
                })?
            }
        };
        out.insert(name, value);
    }
    Ok(out)
}

fn not_found(name: &str) -> ApiError {
    ApiError::not_found(format!("you have no server named `{name}`"))
}

/// What the page sees of a server: no header value, no token.
fn view(record: &ServerRecord, signed_in: bool) -> Value {
    let headers: Map<String, Value> = record
        .headers
        .keys()
        .map(|k| (k.clone(), json!(KEEP_UNCHANGED)))
        .collect();
    json!({
        "name": record.name,
        "url": record.url,
        "transport": record.transport.as_str(),
        "headers": headers,
        "enabled": record.enabled,
        "oauth": {"signedIn": signed_in},
    })
}

pub(super) fn user_store(state: &TeamState, signed: &SignedIn) -> UserStore {
    state.store().for_user(&signed.user.id)
}

pub(super) async fn server_or_404(us: &UserStore, name: &str) -> ApiResult<ServerRecord> {
    us.server(name)
        .await
        .map_err(store_error)?
        .ok_or_else(|| not_found(name))
}

/// `GET /api/servers`.
pub async fn list(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
) -> ApiResult<Json<Value>> {
    let us = user_store(&state, &signed);
    let mut out = Vec::new();
    for record in us.servers().await.map_err(store_error)? {
        let tokens = us.oauth_tokens(&record.name).await.map_err(store_error)?;
        out.push(view(&record, tokens.is_some()));
    }
    Ok(Json(
        json!({"servers": out, "keepUnchanged": KEEP_UNCHANGED}),
    ))
}

/// `POST /api/servers`.
pub async fn add(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    ApiJson(raw): ApiJson<RawServer>,
) -> ApiResult<Response> {
    let form = parse_form(raw)?;
    let name = form
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::bad_request("give the server a `name`"))?;
    let url = form
        .url
        .clone()
        .ok_or_else(|| ApiError::bad_request("give the server's `url` (http:// or https://)"))?;
    let us = user_store(&state, &signed);
    if us.server(&name).await.map_err(store_error)?.is_some() {
        return Err(ApiError::conflict(format!(
            "you already have a server named `{name}`: edit it, or choose another name"
        )));
    }
    let record = ServerRecord {
        headers: resolve_headers(form.headers, None, &url)?,
        name,
        url,
        transport: form.transport.unwrap_or(Transport::Http),
        enabled: form.enabled.unwrap_or(true),
    };
    us.put_server(&record).await.map_err(store_error)?;
    Ok((StatusCode::CREATED, Json(view(&record, false))).into_response())
}

/// `PUT /api/servers/{name}`.
pub async fn edit(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
    ApiJson(raw): ApiJson<RawServer>,
) -> ApiResult<Json<Value>> {
    let form = parse_form(raw)?;
    let us = user_store(&state, &signed);
    let saved = server_or_404(&us, &name).await?;
    if let Some(other) = form.name.as_deref().filter(|n| !n.is_empty() && *n != name) {
        return Err(ApiError::bad_request(format!(
            "renaming `{name}` to `{other}` is not supported: add `{other}` and remove `{name}`"
        )));
    }
    let url = form.url.clone().unwrap_or_else(|| saved.url.clone());
    let record = ServerRecord {
        headers: resolve_headers(form.headers, Some(&saved), &url)?,
        url,
        transport: form.transport.unwrap_or(saved.transport),
        enabled: form.enabled.unwrap_or(saved.enabled),
        name,
    };
    us.put_server(&record).await.map_err(store_error)?;
    let tokens = us.oauth_tokens(&record.name).await.map_err(store_error)?;
    Ok(Json(view(&record, tokens.is_some())))
}

/// `DELETE /api/servers/{name}`.
pub async fn remove(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let us = user_store(&state, &signed);
    if !us.remove_server(&name).await.map_err(store_error)? {
        return Err(not_found(&name));
    }
    state.cache().forget(&signed.user.id, &name);
    Ok(Json(json!({"ok": true, "removed": name})))
}

/// A Test request as sent.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawTest {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default, alias = "type")]
    transport: Option<String>,
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    command: Option<Value>,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default)]
    env: Option<Value>,
    #[serde(default)]
    cwd: Option<Value>,
}

/// `POST /api/mcp-test`.
pub async fn test(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    ApiJson(raw): ApiJson<RawTest>,
) -> Response {
    match prepare_test(&state, &signed, raw).await {
        Ok(opts) => test_with_oauth_hint(&state, opts).await,
        Err(r) => r,
    }
}

/// A Test of `opts` (a user's server or a catalog server): when the server asks for
/// OAuth, the answer carries what discovery found, with the team's callback as the
/// redirect URI.
pub(super) async fn test_with_oauth_hint(
    state: &TeamState,
    opts: switchboard_mcp::ConnectOptions,
) -> Response {
    let guard = state.guard().clone();
    let redirect_uri = state.cfg().oauth_redirect_uri();
    let name = opts.name.clone();
    run_test(opts, |url, www_authenticate| async move {
        discover_oauth(
            &guard,
            &Discovery {
                name: Some(&name),
                url: &url,
                www_authenticate: www_authenticate.as_deref(),
                redirect_uri: &redirect_uri,
            },
            &BrowserClientOptions::default(),
        )
        .await
    })
    .await
}

/// The connection a Test makes, or the answer when it cannot be made.
async fn prepare_test(
    state: &TeamState,
    signed: &SignedIn,
    raw: RawTest,
) -> Result<switchboard_mcp::ConnectOptions, Response> {
    let bad = |e: ApiError| failure(e.status, e.message, "bad request");
    if stdio_requested(
        raw.command.as_ref(),
        raw.args.as_ref(),
        raw.env.as_ref(),
        raw.cwd.as_ref(),
        raw.transport.as_deref(),
    ) {
        return Err(failure(
            StatusCode::BAD_REQUEST,
            STDIO_REFUSED,
            "bad request",
        ));
    }
    let transport = parse_transport(raw.transport.as_deref()).map_err(bad)?;
    let headers = parse_headers(raw.headers).map_err(bad)?;
    let name = raw
        .name
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty());
    let us = user_store(state, signed);
    let saved = match &name {
        Some(n) => us.server(n).await.map_err(|e| bad(store_error(e)))?,
        None => None,
    };
    let url = match (
        raw.url
            .map(|u| u.trim().to_owned())
            .filter(|u| !u.is_empty()),
        &saved,
        &name,
    ) {
        (Some(url), _, _) => url,
        (None, Some(s), _) => s.url.clone(),
        (None, None, Some(n)) => return Err(bad(not_found(n))),
        (None, None, None) => {
            return Err(bad(ApiError::bad_request(
                "give the server's `url`, or the `name` of one of your servers",
            )));
        }
    };
    preflight(state.guard(), &url).await?;
    let headers = resolve_headers(headers, saved.as_ref(), &url).map_err(bad)?;
    // Saved tokens go only to the URL they were saved for.
    let tokens = match (&saved, &name) {
        (Some(s), Some(n)) if s.url == url => {
            us.oauth_tokens(n).await.map_err(|e| bad(store_error(e)))?
        }
        _ => None,
    };
    let transport = transport.or(saved.as_ref().filter(|s| s.url == url).map(|s| s.transport));
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.clone(), v.expose().to_owned()))
        .collect();
    Ok(target_options(
        state.guard(),
        PlannedTarget {
            name: name.as_deref().unwrap_or("test"),
            url: &url,
            transport: transport.map(Transport::as_str),
            headers,
        },
        tokens.as_ref(),
    ))
}

pub(super) fn connect_error(name: &str, e: ConnectError) -> ApiError {
    match e {
        ConnectError::AuthRequired { .. } => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "needs_oauth",
            format!(
                "server `{name}` requires OAuth authentication: Test it to see how to sign in to it"
            ),
        ),
        ConnectError::Blocked { reason, .. } => {
            ApiError::new(StatusCode::BAD_REQUEST, "ssrf_blocked", reason)
        }
        other => ApiError::upstream(format!("cannot connect to `{name}`: {other}")),
    }
}

fn request_error(e: RequestError) -> ApiError {
    match e {
        RequestError::Server { code, message, .. } => {
            ApiError::upstream(format!("the server answered with error {code}: {message}"))
        }
        other => ApiError::upstream(other.to_string()),
    }
}

/// The server refused the tokens again right after they were refreshed.
fn still_refused(name: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_GATEWAY,
        "needs_oauth",
        format!(
            "server `{name}` refuses your login even after refreshing its token (HTTP 401 twice): sign in to `{name}` again (Servers → Test → Sign in to this server)"
        ),
    )
}

/// One attempt on the server: its answer, or a 401 to the saved tokens.
enum Attempt<T> {
    Answer(Result<T, RequestError>),
    Unauthorized,
}

/// What a server reference names, resolved for the caller before connecting.
pub(super) enum Resolved {
    Own(ServerRecord),
    Catalog(switchboard_store::CatalogServer),
}

impl Resolved {
    /// The caller's server `server` names: their own (404 when they have none of that
    /// name) or an enabled catalog server (409 not enabled, 403 stdio not allowed here).
    pub(super) async fn of(
        state: &TeamState,
        us: &UserStore,
        server: &ServerRef,
    ) -> ApiResult<Self> {
        Ok(match server {
            ServerRef::Own(name) => Self::Own(server_or_404(us, name).await?),
            ServerRef::Catalog(name) => {
                Self::Catalog(enabled_catalog_server(state, us, name).await?)
            }
        })
    }

    /// Connected through the per-instance cache with `tokens`, as `user`.
    pub(super) async fn connect(
        &self,
        state: &TeamState,
        user: &switchboard_store::UserId,
        tokens: Option<&switchboard_store::StoredTokens>,
    ) -> Result<Arc<Connection>, ConnectError> {
        match self {
            Self::Own(record) => state.cache().connection(user, record, tokens).await,
            Self::Catalog(entry) => state.cache().catalog_connection(user, entry, tokens).await,
        }
    }
}

/// Runs `op` (an MCP request `method`) on the caller's server (or enabled catalog
/// server), connected from the cache with the caller's saved OAuth tokens (refreshed
/// first when due). When the server
/// answers 401 although tokens were sent (at connect or on the request), the tokens are
/// refreshed once under the store's lease and `op` runs once more on a new connection;
/// a second 401 is `needs_oauth` naming the login. Counted and timed in `/metrics`.
pub(super) async fn on_server<T, F, Fut>(
    state: &TeamState,
    signed: &SignedIn,
    server: &ServerRef,
    (method, tool_error): (McpMethod, fn(&T) -> bool),
    op: F,
) -> ApiResult<T>
where
    F: Fn(Arc<Connection>) -> Fut,
    Fut: Future<Output = Result<T, RequestError>>,
{
    let started = Instant::now();
    let us = user_store(state, signed);
    let name = server.name();
    let resolved = Resolved::of(state, &us, server).await?;
    let mut tokens = usable_tokens(state, &us, server).await?;
    let mut refreshed = false;
    loop {
        let connected = resolved
            .connect(state, &signed.user.id, tokens.as_ref())
            .await;
        let attempt = match connected {
            Ok(conn) => match op(conn).await {
                Err(e) if tokens.is_some() && e.is_unauthorized() => Attempt::Unauthorized,
                answer => Attempt::Answer(answer),
            },
            Err(e) if tokens.is_some() && e.is_unauthorized() => Attempt::Unauthorized,
            Err(e) => {
                state
                    .metrics()
                    .mcp_call(method, McpOutcome::of_connect(&e), started);
                return Err(connect_error(name, e));
            }
        };
        match attempt {
            Attempt::Answer(answer) => {
                state.metrics().mcp_call(
                    method,
                    McpOutcome::of_answer(&answer, tool_error),
                    started,
                );
                return answer.map_err(request_error);
            }
            Attempt::Unauthorized => {
                state.cache().forget(&signed.user.id, &server_key(server));
                let rejected = match tokens.take() {
                    Some(t) if !refreshed => t,
                    _ => {
                        state
                            .metrics()
                            .mcp_call(method, McpOutcome::Failed, started);
                        return Err(still_refused(name));
                    }
                };
                refreshed = true;
                tokens = match tokens_after_401(state, &us, server, &rejected).await {
                    Ok(t) => t,
                    Err(e) => {
                        state
                            .metrics()
                            .mcp_call(method, McpOutcome::Failed, started);
                        return Err(e);
                    }
                };
            }
        }
    }
}

/// `GET /api/servers/{name}/tools`.
pub async fn tools(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    tools_of(&state, &signed, ServerRef::Own(name)).await
}

/// The tools of the caller's server or enabled catalog server.
pub(super) async fn tools_of(
    state: &TeamState,
    signed: &SignedIn,
    server: ServerRef,
) -> ApiResult<Json<Value>> {
    let name = server.name();
    let tools = on_server(
        state,
        signed,
        &server,
        (McpMethod::ListTools, |_| false),
        |conn| async move { conn.list_tools(&CallOptions::default()).await },
    )
    .await?;
    let tools: Vec<Value> = tools
        .iter()
        .filter_map(|t| serde_json::to_value(t).ok())
        .filter_map(|t| serde_json::to_value(tool_dto(&t)).ok())
        .collect();
    Ok(Json(json!({"server": name, "tools": tools})))
}

/// A tool call as sent.
#[derive(Debug, Deserialize)]
pub struct RawCall {
    #[serde(alias = "name")]
    tool: String,
    #[serde(default, alias = "arguments")]
    args: Option<Value>,
}

impl RawCall {
    /// The tool named.
    pub(crate) fn tool(&self) -> &str {
        &self.tool
    }
}

/// `POST /api/servers/{name}/call`.
pub async fn call(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
    ApiJson(raw): ApiJson<RawCall>,
) -> ApiResult<Json<Value>> {
    call_on(&state, &signed, ServerRef::Own(name), raw).await
}

/// A tool call on the caller's server or enabled catalog server.
pub(super) async fn call_on(
    state: &TeamState,
    signed: &SignedIn,
    server: ServerRef,
    raw: RawCall,
) -> ApiResult<Json<Value>> {
    let args: Option<Map<String, Value>> = match raw.args {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m),
        Some(_) => return Err(ApiError::bad_request("`args` must be a JSON object")),
    };
    if raw.tool.trim().is_empty() {
        return Err(ApiError::bad_request("name the `tool` to call"));
    }
    let name = server.name();
    let tool = raw.tool.clone();
    let result = on_server(
        state,
        signed,
        &server,
        (
            McpMethod::CallTool,
            |r: &switchboard_mcp::model::CallToolResult| r.is_error == Some(true),
        ),
        |conn| {
            let (tool, args) = (tool.clone(), args.clone());
            async move { conn.call_tool(&tool, args, &CallOptions::default()).await }
        },
    )
    .await?;
    Ok(Json(json!({
        "server": name,
        "tool": raw.tool,
        "result": serde_json::to_value(&result).unwrap_or(Value::Null),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saved() -> ServerRecord {
        ServerRecord {
            name: "s".into(),
            url: "https://a.example/mcp".into(),
            transport: Transport::Http,
            headers: BTreeMap::from([("Authorization".to_owned(), Secret::new("Bearer k"))]),
            enabled: true,
        }
    }

    fn keep() -> Option<BTreeMap<String, HeaderInput>> {
        Some(BTreeMap::from([(
            "Authorization".to_owned(),
            HeaderInput::Keep,
        )]))
    }

    #[test]
    fn kept_headers_stay_with_their_url() {
        let s = saved();
        let same = resolve_headers(keep(), Some(&s), "https://a.example/mcp").unwrap();
        assert_eq!(same["Authorization"].expose(), "Bearer k");
        let moved = resolve_headers(keep(), Some(&s), "https://evil.example/mcp").unwrap_err();
        assert!(moved.message.contains("URL changed"), "{}", moved.message);
        assert!(resolve_headers(keep(), None, "https://a.example/mcp").is_err());
        // No headers in the form: kept for the same URL, dropped for another.
        assert_eq!(
            resolve_headers(None, Some(&s), "https://a.example/mcp")
                .unwrap()
                .len(),
            1
        );
        assert!(
            resolve_headers(None, Some(&s), "https://b.example/mcp")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn stdio_and_bad_headers_are_refused() {
        let raw: RawServer =
            serde_json::from_value(json!({"name": "x", "command": "rm", "args": ["-rf", "/"]}))
                .unwrap();
        assert!(
            parse_form(raw)
                .unwrap_err()
                .message
                .contains("runs no commands")
        );
        let raw: RawServer =
            serde_json::from_value(json!({"name": "x", "url": "https://a", "transport": "stdio"}))
                .unwrap();
        assert!(parse_form(raw).is_err());
        let raw: RawServer = serde_json::from_value(
            json!({"name": "x", "url": "https://a", "headers": {"X": "a\r\nInjected: 1"}}),
        )
        .unwrap();
        assert!(parse_form(raw).is_err());
    }
}
