//! Settings › Add from the MCP Registry: the web side of `switchboard-registry`.
//!
//! - `GET /api/registry/search?q=TEXT`: active servers whose names match, each with the
//!   ways it can run (`options`: its packages and remotes, whether each can be added
//!   here and why not, and the variables or headers each declares; `target` is the
//!   exact command line a package would run, `-e NAME` flags included
//!   (`Plan::preview`), or a remote's URL);
//! - `POST /api/registry/add` `{name, id: "ID[@VERSION]", choice?: {kind: "package" |
//!   "remote", index}, values?: {NAME: value}, references?: {NAME: VAR}, scope?}`:
//!   the chosen package or remote becomes a settings entry named `name`, written like
//!   any Settings add (never over an existing name: 409), and the host is rebuilt; the
//!   answer's `command` is the exact command line written (a package).
//!
//! Rules: the registry is the `registryUrl` setting (else the official one), asked
//! through the app's guarded client under its URL policy; what it says is data shown
//! as text. Values typed here are stored literally (`$` escaped); a reference stores
//! `${VAR}` and is allowed only on loopback (beyond it, the page cannot make an entry
//! read this machine's environment). No answer carries a value sent here: the add
//! answers what Settings answers after a write. Beyond loopback only remotes can be
//! added (a package runs a command on this machine). A secret environment variable
//! whose name does not look secret (so Settings would show it) is taken only as a
//! reference. Must not: write settings except through `settings::add_entry`, or
//! build its own HTTP client.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Query, State};
use serde::Deserialize;
use serde_json::{Value, json};
use switchboard_config::{escape_vars, is_secret_name, is_var_name};
use switchboard_registry::{
    Choice, DEFAULT_REGISTRY, Input, InputKind, Listing, Plan, Registry, RegistryError, ServerJson,
    command_line, split_id,
};

use crate::access::ApiJson;
use crate::error::{ApiError, ApiResult};
use crate::settings::{add_entry, valid_name};
use crate::state::AppState;

/// Pages one search follows at most (100 servers a page).
const MAX_PAGES: usize = 3;
/// Longest value or reference accepted for one variable or header.
const MAX_VALUE: usize = 8 * 1024;
/// Longest search text or server id.
const MAX_QUERY: usize = 200;

/// Why stdio packages cannot be added here when served beyond loopback.
const REMOTE_ONLY: &str = "Switchboard is served beyond loopback, so only remote servers can be added from the browser (a package would run a command on this machine for anyone who reaches this page); add it with `switchboard mcp add NAME --from-registry ID` on the machine itself";

/// The registry the settings name, through the app's guarded client.
fn registry(state: &AppState) -> ApiResult<Registry> {
    let settings = state
        .load_settings()
        .map_err(|e| ApiError::internal(format!("cannot read the settings: {e}")))?;
    let base = settings
        .registry_url
        .unwrap_or_else(|| DEFAULT_REGISTRY.to_string());
    Registry::new(&base, state.inner.guard.clone())
        .map_err(|e| ApiError::bad_request(format!("{e} (`registryUrl` in the settings)")))
}

/// A registry error as an API answer.
fn api_error(e: RegistryError) -> ApiError {
    match e {
        e @ (RegistryError::Unreachable { .. }
        | RegistryError::Read { .. }
        | RegistryError::TooLarge { .. }
        | RegistryError::Status { .. }
        | RegistryError::Malformed { .. }
        | RegistryError::NotARegistry { .. }) => {
            ApiError::upstream(format!("{e} (`registryUrl` in the settings)"))
        }
        e @ RegistryError::NotFound { .. } => {
            ApiError::not_found(format!("{e}; search for its exact name"))
        }
        RegistryError::Missing { kind, names } => ApiError::bad_request(format!(
            "the server needs {} {}; fill them in",
            kind.plural(),
            names.join(", ")
        )),
        e => ApiError::bad_request(e.to_string()),
    }
}

fn input_view(i: &Input) -> Value {
    json!({
        "name": i.name,
        "description": i.description,
        "required": i.required,
        "secret": i.secret,
        "needsValue": i.needs_value(),
        "default": i.default,
        "fixed": i.value.is_some(),
        "choices": i.choices,
    })
}

/// The ways `server` can run, as the page offers them.
fn options(server: &ServerJson, remote_mode: bool) -> Vec<Value> {
    let mut out = Vec::new();
    for (i, p) in server.packages.iter().enumerate() {
        let plan = Plan::new(server, Choice::Package(i), &[]);
        let why = match &plan {
            Err(e) => Some(e.to_string()),
            Ok(_) if remote_mode => Some(REMOTE_ONLY.to_string()),
            Ok(_) => None,
        };
        // The command line it would run, when it can run.
        let target = plan
            .as_ref()
            .map(Plan::preview)
            .unwrap_or_else(|_| match &p.version {
                Some(v) => format!("{}@{v}", p.identifier),
                None => p.identifier.clone(),
            });
        out.push(json!({
            "kind": "package",
            "index": i,
            "type": p.registry_type.as_str(),
            "transport": "stdio",
            "target": target,
            "available": why.is_none(),
            "why": why,
            "inputs": p.environment_variables.iter().map(input_view).collect::<Vec<_>>(),
        }));
    }
    for (i, r) in server.remotes.iter().enumerate() {
        let plan = Plan::new(server, Choice::Remote(i), &[]);
        out.push(json!({
            "kind": "remote",
            "index": i,
            "type": r.kind,
            "transport": plan.as_ref().map(Plan::transport).unwrap_or("?"),
            "target": r.url,
            "available": plan.is_ok(),
            "why": plan.err().map(|e| e.to_string()),
            "inputs": r.headers.iter().map(input_view).collect::<Vec<_>>(),
        }));
    }
    out
}

fn listing_view(l: &Listing, remote_mode: bool) -> Value {
    let s = &l.server;
    json!({
        "id": s.name,
        "title": s.title,
        "description": s.description,
        "version": s.version,
        "runs": s.runs(),
        "options": options(s, remote_mode),
    })
}

#[derive(Debug, Deserialize)]
pub struct SearchQuery {
    #[serde(default)]
    q: String,
}

/// `GET /api/registry/search?q=TEXT`.
pub async fn search(
    State(state): State<AppState>,
    Query(query): Query<SearchQuery>,
) -> ApiResult<Json<Value>> {
    let text = query.q.trim();
    if text.chars().count() > MAX_QUERY || text.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!(
            "the search text must be at most {MAX_QUERY} characters, without control characters"
        )));
    }
    let reg = registry(&state)?;
    let found = reg.search(text, MAX_PAGES).await.map_err(api_error)?;
    let remote_mode = state.cfg().remote;
    Ok(Json(json!({
        "registry": reg.base().as_str(),
        "remote": remote_mode,
        "truncated": found.truncated,
        "servers": found.servers.iter().map(|l| listing_view(l, remote_mode)).collect::<Vec<_>>(),
    })))
}

/// The add request as sent.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawAdd {
    name: String,
    id: String,
    #[serde(default)]
    choice: Option<RawChoice>,
    #[serde(default)]
    values: BTreeMap<String, String>,
    #[serde(default)]
    references: BTreeMap<String, String>,
    #[serde(default)]
    scope: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawChoice {
    kind: String,
    index: usize,
}

/// A value for one declared variable or header, as the person chose it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Given {
    /// Typed in: stored literally.
    Value(String),
    /// The name of an environment variable: stored as `${VAR}`.
    Reference(String),
}

/// The add request, checked.
#[derive(Debug)]
struct AddRequest {
    name: String,
    id: String,
    version: Option<String>,
    choice: Option<Choice>,
    given: BTreeMap<String, Given>,
    scope: Option<String>,
}

impl AddRequest {
    fn parse(raw: RawAdd) -> ApiResult<Self> {
        valid_name(&raw.name)?;
        let spec = raw.id.trim();
        if spec.is_empty() || spec.len() > MAX_QUERY || spec.chars().any(char::is_control) {
            return Err(ApiError::bad_request(
                "`id` must be a registry server name such as `io.github.example/weather-mcp`, optionally with `@VERSION`",
            ));
        }
        let (id, version) = split_id(spec);
        let choice = match raw.choice {
            None => None,
            Some(c) => Some(match c.kind.as_str() {
                "package" => Choice::Package(c.index),
                "remote" => Choice::Remote(c.index),
                other => {
                    return Err(ApiError::bad_request(format!(
                        "`choice.kind` must be package or remote, not `{other}`"
                    )));
                }
            }),
        };
        let mut given = BTreeMap::new();
        for (k, v) in raw.values {
            if v.len() > MAX_VALUE || v.chars().any(char::is_control) {
                return Err(ApiError::bad_request(format!(
                    "the value of `{k}` must be at most {MAX_VALUE} bytes, without control characters"
                )));
            }
            given.insert(k, Given::Value(v));
        }
        for (k, var) in raw.references {
            let var = var.trim().trim_start_matches("${").trim_end_matches('}');
            if !is_var_name(var) || var.len() > 128 {
                return Err(ApiError::bad_request(format!(
                    "the reference for `{k}` must be an environment variable name (letters, digits and _, not starting with a digit)"
                )));
            }
            if given
                .insert(k.clone(), Given::Reference(var.to_string()))
                .is_some()
            {
                return Err(ApiError::bad_request(format!(
                    "`{k}` has both a value and a reference; send one"
                )));
            }
        }
        Ok(Self {
            name: raw.name,
            id: id.to_string(),
            version: version.map(str::to_string),
            choice,
            given,
            scope: raw.scope,
        })
    }
}

/// The values to write for `plan`'s inputs: typed values escaped, references as
/// `${VAR}`; names the server does not declare, references beyond loopback and typed
/// secrets that Settings would show are refused.
fn values_for(
    plan: &Plan<'_>,
    given: &BTreeMap<String, Given>,
    remote_mode: bool,
) -> ApiResult<Vec<(String, String)>> {
    let inputs = plan.inputs();
    let mut out = Vec::new();
    for (name, g) in given {
        let Some(input) = inputs.iter().find(|i| i.name == *name) else {
            let declared: Vec<&str> = inputs.iter().map(|i| i.name.as_str()).collect();
            return Err(ApiError::bad_request(format!(
                "`{name}` is not one of this server's {} ({})",
                plan.input_kind().plural(),
                if declared.is_empty() {
                    "it declares none".to_string()
                } else {
                    declared.join(", ")
                }
            )));
        };
        let value = match g {
            Given::Reference(var) => {
                if remote_mode {
                    return Err(ApiError::forbidden(format!(
                        "`{name}`: Switchboard is served beyond loopback, so the browser cannot make an entry read this machine's environment; enter the value instead"
                    )));
                }
                format!("${{{var}}}")
            }
            Given::Value(v) if v.is_empty() => continue,
            Given::Value(v) => {
                if input.secret
                    && plan.input_kind() == InputKind::Env
                    && !is_secret_name(&input.name)
                {
                    return Err(ApiError::bad_request(format!(
                        "`{name}` is secret, but Settings would show it (its name does not look secret): store it as a reference to an environment variable instead"
                    )));
                }
                escape_vars(v)
            }
        };
        out.push((name.clone(), value));
    }
    Ok(out)
}

/// `POST /api/registry/add`.
pub async fn add(
    State(state): State<AppState>,
    ApiJson(raw): ApiJson<RawAdd>,
) -> ApiResult<Json<Value>> {
    let req = AddRequest::parse(raw)?;
    let remote_mode = state.cfg().remote;
    let settings = state
        .load_settings()
        .map_err(|e| ApiError::internal(format!("cannot read the settings: {e}")))?;
    // Said before the registry is asked; checked again under the write lock.
    if settings.server(&req.name).is_some() {
        return Err(ApiError::conflict(format!(
            "a server named `{}` already exists; edit it or choose another name",
            req.name
        )));
    }
    let reg = registry(&state)?;
    let listing = reg
        .server(&req.id, req.version.as_deref())
        .await
        .map_err(api_error)?;
    let server = &listing.server;
    let choice = match req.choice {
        Some(c) => c,
        // Beyond loopback, only a remote can be added: take the first one.
        None if remote_mode && !server.remotes.is_empty() => Choice::Remote(0),
        None => Choice::Auto,
    };
    let plan = Plan::new(server, choice, &[]).map_err(api_error)?;
    if plan.runs_locally() && remote_mode {
        return Err(ApiError::forbidden(REMOTE_ONLY));
    }
    let values = values_for(&plan, &req.given, remote_mode)?;
    let mut entry = plan.entry(&values).map_err(api_error)?;
    if !server.description.is_empty() {
        entry.insert("description".into(), json!(server.description));
    }
    let command = command_line(&entry);
    let Json(mut answer) = add_entry(
        &state,
        &req.name,
        req.scope.as_deref(),
        Value::Object(entry),
    )
    .await?;
    answer["name"] = json!(req.name);
    answer["transport"] = json!(plan.transport());
    if let Some(c) = command {
        answer["command"] = json!(c);
    }
    Ok(Json(answer))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(v: Value) -> RawAdd {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn requests_are_checked_before_the_registry_is_asked() {
        let ok = AddRequest::parse(raw(json!({"name": "fs", "id": "a/b@1.0",
            "choice": {"kind": "remote", "index": 1},
            "values": {"X-Region": "eu"}, "references": {"X-API-Key": "${FS_KEY}"}})))
        .unwrap();
        assert_eq!(ok.id, "a/b");
        assert_eq!(ok.version.as_deref(), Some("1.0"));
        assert_eq!(ok.choice, Some(Choice::Remote(1)));
        assert_eq!(ok.given["X-API-Key"], Given::Reference("FS_KEY".into()));
        for bad in [
            json!({"name": "a/b", "id": "x"}),
            json!({"name": "a", "id": ""}),
            json!({"name": "a", "id": "x", "choice": {"kind": "binary", "index": 0}}),
            json!({"name": "a", "id": "x", "references": {"K": "1X"}}),
            json!({"name": "a", "id": "x", "references": {"K": "A B"}}),
            json!({"name": "a", "id": "x", "values": {"K": "v"}, "references": {"K": "K"}}),
            json!({"name": "a", "id": "x", "values": {"K": "line\nbreak"}}),
        ] {
            assert!(AddRequest::parse(raw(bad.clone())).is_err(), "{bad}");
        }
        assert!(
            serde_json::from_value::<RawAdd>(json!({"name": "a", "id": "x", "url": "http://evil"}))
                .is_err()
        );
    }
}
