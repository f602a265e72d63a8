//! The team catalog: servers admins publish for everyone, which each user enables and
//! uses with their own OAuth login.
//!
//! Admin routes (`RouteAccess::Admin`: a signed-in user whose store flag says admin;
//! anyone else 403 "only a team admin may do this", nothing more):
//! - `GET /api/admin/catalog`: every catalog server, header and env values replaced by
//!   [`KEEP_UNCHANGED`](crate::KEEP_UNCHANGED);
//! - `POST /api/admin/catalog` `{name, description?, url?, transport?, headers?, command?,
//!   args?, cwd?, env?}`: publish (409 when the name is taken); `PUT
//!   /api/admin/catalog/{name}`: edit (a header or env value sent as `<unchanged>` keeps
//!   its saved value only while the URL, or the command, args and cwd, stay the same);
//!   `DELETE`: unpublish (every user's enablement and tokens go with it).
//!   A stdio entry (`command`, or transport `stdio`) is refused unless the instance was
//!   started with `--allow-catalog-stdio`; the admin is responsible for the command, which
//!   runs with exactly the admin's arguments and environment (nothing else is inherited,
//!   nothing of a user's goes into argv or env).
//!
//! User routes (`Session`):
//! - `GET /api/catalog`: `{servers: [{name, description, transport, url?, runsOnServer,
//!   available, enabled, oauth: {signedIn}}]}`: no header or env value, no command, args
//!   or cwd (only whether it runs on the server);
//! - `POST /api/catalog/{name}/enable|disable` (disabling forgets the user's tokens);
//! - `GET /api/catalog/{name}/tools`, `POST /api/catalog/{name}/call`, `POST
//!   /api/catalog/{name}/test` (with the OAuth discovery hint), `POST
//!   /api/catalog/{name}/oauth/start|logout`: as for the user's own servers
//!   (`servers`, `mcp_oauth`), on an enabled catalog server, with the user's OWN tokens.
//!
//! Names: the catalog is a namespace apart from each user's servers (its own routes,
//! token table and cache keys `catalog:NAME`): a user's server and a catalog server may
//! share a name and are never confused.
//!
//! Must not: send a header, env value, token, command, argument or working folder to a
//! non-admin; run a stdio entry on an instance started without the flag; put a user's
//! input into a process's argv or env.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use switchboard_store::{
    CatalogEntry, CatalogLaunch, CatalogRecord, CatalogServer, Secret, ServerRef, Transport,
    UserStore,
};

use super::cache::{catalog_options, server_key};
use super::mcp_oauth::{logout_from, start_login, usable_tokens};
use super::servers::{RawCall, call_on, tools_of, user_store};
use super::session::SignedIn;
use super::state::{TeamState, store_error};
use crate::KEEP_UNCHANGED;
use crate::access::ApiJson;
use crate::error::{ApiError, ApiResult};
use crate::test_conn::{failure, preflight};

/// The flag an operator passes to allow stdio catalog servers.
pub const ALLOW_STDIO_FLAG: &str = "--allow-catalog-stdio";
const MAX_ITEMS: usize = 64;

fn stdio_off() -> ApiError {
    ApiError::forbidden(format!(
        "this Switchboard was started without {ALLOW_STDIO_FLAG}: stdio catalog servers (commands run on the server) are off; the operator may restart it with {ALLOW_STDIO_FLAG}, or publish the server's http:// or https:// URL"
    ))
}

/// A catalog form as sent (step one: shape only).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawCatalogServer {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default, alias = "type")]
    transport: Option<String>,
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
}

/// A value in a form: new, or the saved one kept.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Input {
    Keep,
    Value(String),
}

/// How the form says to reach the server (step two).
#[derive(Debug)]
enum LaunchForm {
    Http {
        url: Option<String>,
        transport: Option<Transport>,
        headers: Option<BTreeMap<String, Input>>,
    },
    Stdio {
        command: Option<String>,
        args: Option<Vec<String>>,
        cwd: Option<String>,
        env: Option<BTreeMap<String, Input>>,
    },
}

#[derive(Debug)]
struct CatalogForm {
    name: Option<String>,
    description: Option<String>,
    launch: LaunchForm,
}

fn inputs(
    what: &str,
    map: Option<BTreeMap<String, String>>,
    check_name: impl Fn(&str) -> bool,
) -> ApiResult<Option<BTreeMap<String, Input>>> {
    let Some(map) = map else {
        return Ok(None);
    };
    if map.len() > MAX_ITEMS {
        return Err(ApiError::bad_request(format!(
            "{} {what}s: at most {MAX_ITEMS}",
            map.len()
        )));
    }
    let mut out = BTreeMap::new();
    for (k, v) in map {
        if !check_name(&k) {
            return Err(ApiError::bad_request(format!(
                "{what} name `{}` is not valid",
                k.escape_debug()
            )));
        }
        let input = if v == KEEP_UNCHANGED {
            Input::Keep
        } else {
            Input::Value(v)
        };
        out.insert(k, input);
    }
    Ok(Some(out))
}

fn parse_form(raw: RawCatalogServer, allow_stdio: bool) -> ApiResult<CatalogForm> {
    let transport = raw.transport.as_deref().map(str::trim).unwrap_or("");
    let stdio = raw.command.is_some()
        || raw.args.is_some()
        || raw.cwd.is_some()
        || raw.env.is_some()
        || transport.eq_ignore_ascii_case("stdio");
    let launch = if stdio {
        if !allow_stdio {
            return Err(stdio_off());
        }
        if raw.url.is_some() || raw.headers.is_some() {
            return Err(ApiError::bad_request(
                "a catalog server is either a URL (url, transport, headers) or a command (command, args, cwd, env), not both",
            ));
        }
        LaunchForm::Stdio {
            command: raw.command.map(|c| c.trim().to_owned()),
            args: raw.args,
            cwd: raw
                .cwd
                .map(|c| c.trim().to_owned())
                .filter(|c| !c.is_empty()),
            env: inputs("environment variable", raw.env, |k| {
                !k.is_empty() && !k.contains(['=', '\0'])
            })?,
        }
    } else {
        let transport = match transport {
            "" => None,
            t if t.eq_ignore_ascii_case("http") || t.eq_ignore_ascii_case("streamable-http") => {
                Some(Transport::Http)
            }
            t if t.eq_ignore_ascii_case("sse") => Some(Transport::Sse),
            other => {
                return Err(ApiError::bad_request(format!(
                    "transport `{other}`: use `http` (Streamable HTTP), `sse` or `stdio`"
                )));
            }
        };
        let headers = inputs("header", raw.headers, |k| {
            HeaderName::from_bytes(k.as_bytes()).is_ok()
        })?;
        if let Some(h) = &headers {
            for (k, v) in h {
                if let Input::Value(v) = v
                    && HeaderValue::from_str(v).is_err()
                {
                    return Err(ApiError::bad_request(format!(
                        "the value of header `{k}` is not a valid HTTP header value (no line breaks or control characters)"
                    )));
                }
            }
        }
        LaunchForm::Http {
            url: raw
                .url
                .map(|u| u.trim().to_owned())
                .filter(|u| !u.is_empty()),
            transport,
            headers,
        }
    };
    Ok(CatalogForm {
        name: raw
            .name
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty()),
        description: raw.description.map(|d| d.trim().to_owned()),
        launch,
    })
}

/// New values as sent; `<unchanged>` ones from `saved`, only when `same_place`.
fn resolve(
    what: &str,
    form: Option<BTreeMap<String, Input>>,
    saved: Option<&BTreeMap<String, Secret>>,
    same_place: bool,
) -> ApiResult<BTreeMap<String, Secret>> {
    let Some(form) = form else {
        return Ok(match saved {
            Some(s) if same_place => s.clone(),
            _ => BTreeMap::new(),
        });
    };
    let mut out = BTreeMap::new();
    for (k, input) in form {
        let value = match input {
            Input::Value(v) => Secret::new(v),
            Input::Keep => {
                if !same_place {
                    return Err(ApiError::bad_request(format!(
                        "{what} `{k}` is {KEEP_UNCHANGED}, but the server's address or command changed: saved secrets stay with what they were written for; enter the value again"
                    )));
                }
                saved.and_then(|s| s.get(&k)).cloned().ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "{what} `{k}` is {KEEP_UNCHANGED} but there is no saved value to keep; enter the value"
                    ))
                })?
            }
        };
        out.insert(k, value);
    }
    Ok(out)
}

/// The launch to save, from the form and the saved entry (when editing).
fn resolve_launch(
    name: &str,
    form: LaunchForm,
    saved: Option<&CatalogLaunch>,
) -> ApiResult<CatalogLaunch> {
    match form {
        LaunchForm::Http {
            url,
            transport,
            headers,
        } => {
            let (saved_url, saved_transport, saved_headers) = match saved {
                Some(CatalogLaunch::Http {
                    url,
                    transport,
                    headers,
                }) => (Some(url.as_str()), Some(*transport), Some(headers)),
                _ => (None, None, None),
            };
            let url = url.or(saved_url.map(str::to_owned)).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "give catalog server `{name}` a `url` (http:// or https://) or a `command`"
                ))
            })?;
            let same = saved_url == Some(url.as_str());
            Ok(CatalogLaunch::Http {
                headers: resolve("header", headers, saved_headers, same)?,
                transport: transport.or(saved_transport).unwrap_or(Transport::Http),
                url,
            })
        }
        LaunchForm::Stdio {
            command,
            args,
            cwd,
            env,
        } => {
            let saved = match saved {
                Some(CatalogLaunch::Stdio {
                    command,
                    args,
                    cwd,
                    env,
                }) => Some((command, args, cwd, env)),
                _ => None,
            };
            let command = command
                .filter(|c| !c.is_empty())
                .or(saved.map(|s| s.0.clone()))
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "give catalog server `{name}` the `command` to run"
                    ))
                })?;
            let args = args.or(saved.map(|s| s.1.clone())).unwrap_or_default();
            let cwd = cwd.or(saved.and_then(|s| s.2.clone()));
            let same = saved.is_some_and(|s| *s.0 == command && *s.1 == args && *s.2 == cwd);
            Ok(CatalogLaunch::Stdio {
                env: resolve("environment variable", env, saved.map(|s| s.3), same)?,
                command,
                args,
                cwd,
            })
        }
    }
}

fn masked(map: &BTreeMap<String, Secret>) -> Map<String, Value> {
    map.keys()
        .map(|k| (k.clone(), json!(KEEP_UNCHANGED)))
        .collect()
}

/// What an admin sees: everything but secret values.
fn admin_view(record: &CatalogRecord) -> Value {
    let s = &record.server;
    let mut v = json!({
        "name": s.name,
        "description": s.description,
        "transport": s.launch.transport_name(),
        "updatedAt": record.updated_at,
    });
    match &s.launch {
        CatalogLaunch::Http { url, headers, .. } => {
            v["url"] = json!(url);
            v["headers"] = Value::Object(masked(headers));
        }
        CatalogLaunch::Stdio {
            command,
            args,
            cwd,
            env,
        } => {
            v["command"] = json!(command);
            v["args"] = json!(args);
            v["cwd"] = json!(cwd);
            v["env"] = Value::Object(masked(env));
        }
    }
    v
}

/// What a user sees: no secret, no command line.
fn user_view(entry: &CatalogEntry, signed_in: bool, allow_stdio: bool) -> Value {
    let s = &entry.record.server;
    let stdio = s.launch.is_stdio();
    let mut v = json!({
        "name": s.name,
        "description": s.description,
        "transport": s.launch.transport_name(),
        "runsOnServer": stdio,
        "available": !stdio || allow_stdio,
        "enabled": entry.enabled,
        "oauth": {"signedIn": signed_in},
    });
    if let CatalogLaunch::Http { url, .. } = &s.launch {
        v["url"] = json!(url);
    }
    v
}

fn not_published(name: &str) -> ApiError {
    ApiError::not_found(format!("the team catalog has no server named `{name}`"))
}

/// The catalog server `name` as this user sees it, or 404.
pub(super) async fn catalog_entry_or_404(us: &UserStore, name: &str) -> ApiResult<CatalogEntry> {
    us.catalog_server(name)
        .await
        .map_err(store_error)?
        .ok_or_else(|| not_published(name))
}

/// The catalog server `name`, which this user must have enabled (else 409), and which
/// this instance must be allowed to run (a stdio one needs the flag, else 403).
pub(super) async fn enabled_catalog_server(
    state: &TeamState,
    us: &UserStore,
    name: &str,
) -> ApiResult<CatalogServer> {
    let entry = catalog_entry_or_404(us, name).await?;
    if !entry.enabled {
        return Err(ApiError::conflict(format!(
            "you have not enabled catalog server `{name}`: enable it first"
        )));
    }
    if entry.record.server.launch.is_stdio() && !state.allow_catalog_stdio() {
        return Err(stdio_off());
    }
    Ok(entry.record.server)
}

// ---- admin routes ----

/// `GET /api/admin/catalog`.
pub async fn admin_list(State(state): State<TeamState>) -> ApiResult<Json<Value>> {
    let all = state.store().catalog_servers().await.map_err(store_error)?;
    let servers: Vec<Value> = all.iter().map(admin_view).collect();
    Ok(Json(json!({
        "servers": servers,
        "keepUnchanged": KEEP_UNCHANGED,
        "stdioAllowed": state.allow_catalog_stdio(),
    })))
}

/// `POST /api/admin/catalog`.
pub async fn publish(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    ApiJson(raw): ApiJson<RawCatalogServer>,
) -> ApiResult<Response> {
    let form = parse_form(raw, state.allow_catalog_stdio())?;
    let name = form
        .name
        .clone()
        .ok_or_else(|| ApiError::bad_request("give the catalog server a `name`"))?;
    if state
        .store()
        .catalog_server(&name)
        .await
        .map_err(store_error)?
        .is_some()
    {
        return Err(ApiError::conflict(format!(
            "the catalog already has a server named `{name}`: edit it, or choose another name"
        )));
    }
    let server = CatalogServer {
        launch: resolve_launch(&name, form.launch, None)?,
        description: form.description.unwrap_or_default(),
        name: name.clone(),
    };
    state
        .store()
        .publish_catalog_server(&signed.user.id, &server)
        .await
        .map_err(store_error)?;
    saved_view(&state, &name, StatusCode::CREATED).await
}

async fn saved_view(state: &TeamState, name: &str, status: StatusCode) -> ApiResult<Response> {
    let record = state
        .store()
        .catalog_server(name)
        .await
        .map_err(store_error)?
        .ok_or_else(|| not_published(name))?;
    Ok((status, Json(admin_view(&record))).into_response())
}

/// `PUT /api/admin/catalog/{name}`.
pub async fn edit(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
    ApiJson(raw): ApiJson<RawCatalogServer>,
) -> ApiResult<Response> {
    let form = parse_form(raw, state.allow_catalog_stdio())?;
    let saved = state
        .store()
        .catalog_server(&name)
        .await
        .map_err(store_error)?
        .ok_or_else(|| not_published(&name))?;
    if let Some(other) = form.name.as_deref().filter(|n| *n != name) {
        return Err(ApiError::bad_request(format!(
            "renaming `{name}` to `{other}` is not supported: publish `{other}` and unpublish `{name}`"
        )));
    }
    let server = CatalogServer {
        launch: resolve_launch(&name, form.launch, Some(&saved.server.launch))?,
        description: form
            .description
            .unwrap_or_else(|| saved.server.description.clone()),
        name: name.clone(),
    };
    state
        .store()
        .publish_catalog_server(&signed.user.id, &server)
        .await
        .map_err(store_error)?;
    if server.launch != saved.server.launch {
        state.cache().forget_catalog(&name);
    }
    saved_view(&state, &name, StatusCode::OK).await
}

/// `DELETE /api/admin/catalog/{name}`.
pub async fn unpublish(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    if !state
        .store()
        .unpublish_catalog_server(&signed.user.id, &name)
        .await
        .map_err(store_error)?
    {
        return Err(not_published(&name));
    }
    state.cache().forget_catalog(&name);
    Ok(Json(json!({"ok": true, "removed": name})))
}

// ---- user routes ----

/// `GET /api/catalog`.
pub async fn list(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
) -> ApiResult<Json<Value>> {
    let us = user_store(&state, &signed);
    let mut out = Vec::new();
    for entry in us.catalog().await.map_err(store_error)? {
        let signed_in = entry.enabled
            && us
                .tokens(&ServerRef::catalog(&entry.record.server.name))
                .await
                .map_err(store_error)?
                .is_some();
        out.push(user_view(&entry, signed_in, state.allow_catalog_stdio()));
    }
    Ok(Json(json!({"servers": out})))
}

/// `POST /api/catalog/{name}/enable`.
pub async fn enable(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let us = user_store(&state, &signed);
    if !us.enable_catalog_server(&name).await.map_err(store_error)? {
        return Err(not_published(&name));
    }
    let entry = catalog_entry_or_404(&us, &name).await?;
    let signed_in = us
        .tokens(&ServerRef::catalog(&name))
        .await
        .map_err(store_error)?
        .is_some();
    Ok(Json(user_view(
        &entry,
        signed_in,
        state.allow_catalog_stdio(),
    )))
}

/// `POST /api/catalog/{name}/disable`: also forgets the caller's tokens for it.
pub async fn disable(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let us = user_store(&state, &signed);
    let entry = catalog_entry_or_404(&us, &name).await?;
    us.disable_catalog_server(&name)
        .await
        .map_err(store_error)?;
    state
        .cache()
        .forget(&signed.user.id, &server_key(&ServerRef::catalog(&name)));
    let entry = CatalogEntry {
        enabled: false,
        ..entry
    };
    Ok(Json(user_view(&entry, false, state.allow_catalog_stdio())))
}

/// `GET /api/catalog/{name}/tools`.
pub async fn tools(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    tools_of(&state, &signed, ServerRef::Catalog(name)).await
}

/// `POST /api/catalog/{name}/call`.
pub async fn call(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
    ApiJson(raw): ApiJson<RawCall>,
) -> ApiResult<Json<Value>> {
    call_on(&state, &signed, ServerRef::Catalog(name), raw).await
}

/// `POST /api/catalog/{name}/oauth/start`: `{authorizeUrl}`.
pub async fn oauth_start(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    start_login(&state, &signed, ServerRef::Catalog(name)).await
}

/// `POST /api/catalog/{name}/oauth/logout`.
pub async fn oauth_logout(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    logout_from(&state, &signed, ServerRef::Catalog(name)).await
}

/// `POST /api/catalog/{name}/test`: the personal Test (GemiHub's answer, with the OAuth
/// discovery hint on a 401) against the enabled catalog server, with the caller's own
/// tokens.
pub async fn test(
    State(state): State<TeamState>,
    Extension(signed): Extension<SignedIn>,
    Path(name): Path<String>,
) -> Response {
    let us = user_store(&state, &signed);
    let prepared = async {
        let server = enabled_catalog_server(&state, &us, &name).await?;
        let tokens = usable_tokens(&state, &us, &ServerRef::catalog(&name)).await?;
        Ok::<_, ApiError>((server, tokens))
    }
    .await;
    let (server, tokens) = match prepared {
        Ok(p) => p,
        Err(e) => return failure(e.status, e.message, "bad request"),
    };
    if let CatalogLaunch::Http { url, .. } = &server.launch
        && let Err(r) = preflight(state.guard(), url).await
    {
        return r;
    }
    let opts = catalog_options(state.guard(), &server, tokens.as_ref());
    super::servers::test_with_oauth_hint(&state, opts).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(v: Value) -> RawCatalogServer {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn stdio_needs_the_flag_and_never_mixes_with_a_url() {
        let e = parse_form(raw(json!({"name": "t", "command": "tool"})), false).unwrap_err();
        assert_eq!(e.status, StatusCode::FORBIDDEN);
        assert!(e.message.contains(ALLOW_STDIO_FLAG), "{}", e.message);
        let e = parse_form(
            raw(json!({"name": "t", "url": "https://a", "transport": "stdio"})),
            false,
        )
        .unwrap_err();
        assert!(e.message.contains(ALLOW_STDIO_FLAG));
        let e = parse_form(
            raw(json!({"name": "t", "url": "https://a", "command": "tool"})),
            true,
        )
        .unwrap_err();
        assert!(e.message.contains("not both"), "{}", e.message);
        assert!(parse_form(raw(json!({"name": "t", "command": "tool"})), true).is_ok());
    }

    #[test]
    fn kept_values_stay_with_the_command_they_were_saved_for() {
        let saved = CatalogLaunch::Stdio {
            command: "tool".into(),
            args: vec!["a".into()],
            cwd: None,
            env: BTreeMap::from([("KEY".to_owned(), Secret::new("v"))]),
        };
        let keep = || Some(BTreeMap::from([("KEY".to_owned(), Input::Keep)]));
        let same = resolve_launch(
            "t",
            LaunchForm::Stdio {
                command: None,
                args: None,
                cwd: None,
                env: keep(),
            },
            Some(&saved),
        )
        .unwrap();
        assert_eq!(same, saved);
        let moved = resolve_launch(
            "t",
            LaunchForm::Stdio {
                command: Some("other".into()),
                args: None,
                cwd: None,
                env: keep(),
            },
            Some(&saved),
        )
        .unwrap_err();
        assert!(moved.message.contains("changed"), "{}", moved.message);
    }
}
