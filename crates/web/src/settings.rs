//! Settings › MCP Servers: the servers in the same settings files as the CLI.
//!
//! - `GET /api/settings/mcp-servers`: every entry as written (variables unexpanded),
//!   with header values, secret-looking `env` values and `oauth.clientSecret` replaced
//!   by [`KEEP_UNCHANGED`];
//! - `POST /api/settings/mcp-servers`: add (to the user file, or `--config`'s; `scope:
//!   "project"` writes the project file);
//! - `PUT /api/settings/mcp-servers/{name}`: edit (may rename); [`KEEP_UNCHANGED`]
//!   keeps the saved value; keys the form does not know are kept;
//! - `DELETE /api/settings/mcp-servers/{name}`;
//! - `POST /api/settings/mcp-servers/{name}/enabled` `{enabled}`.
//!
//! Every write goes through `SettingsDoc` (atomic, unknown fields and order kept) and
//! then rebuilds the host. Values that arrive here are data, never references: they
//! are stored so that `$VAR` is not expanded, local-file and ambient-credential
//! references cannot be added, and saved secrets ([`KEEP_UNCHANGED`]) are kept only
//! while the server keeps pointing where it did. Served beyond loopback, stdio servers cannot be added,
//! edited or enabled from the browser (that would let whoever reaches the page run
//! commands).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use axum::Json;
use axum::extract::{Path as UrlPath, State};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use switchboard_config::{
    EXPANDED_FIELDS, EntryState, SettingsDoc, escape_vars, is_secret_name, local_references,
    project_settings_path,
};

use crate::access::ApiJson;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Stands for a saved secret in settings responses; sent back on save, it keeps the
/// saved value.
pub const KEEP_UNCHANGED: &str = "<unchanged>";

/// The transport an entry as written uses: `stdio`, `http`, `sse` or `auto`.
fn transport_of(raw: &Map<String, Value>) -> &'static str {
    if raw.contains_key("command") {
        return "stdio";
    }
    if raw.contains_key("httpUrl") {
        return "http";
    }
    match raw.get("type").and_then(Value::as_str) {
        Some("sse") => "sse",
        Some("http") | Some("streamable-http") => "http",
        _ if raw.contains_key("url") => "auto",
        _ => "unknown",
    }
}

fn mask_map(v: Option<&Value>, all: bool) -> Value {
    match v.and_then(Value::as_object) {
        Some(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let shown = if all || is_secret_name(k) {
                        json!(KEEP_UNCHANGED)
                    } else {
                        v.clone()
                    };
                    (k.clone(), shown)
                })
                .collect(),
        ),
        None => json!({}),
    }
}

/// One entry as written → what the browser sees (secrets replaced by the marker).
pub fn entry_view(name: &str, raw: &Value) -> Value {
    let empty = Map::new();
    let obj = raw.as_object().unwrap_or(&empty);
    let mut oauth = obj.get("oauth").cloned();
    if let Some(Value::Object(o)) = &mut oauth
        && o.contains_key("clientSecret")
    {
        o.insert("clientSecret".into(), json!(KEEP_UNCHANGED));
    }
    json!({
        "name": name,
        "transport": transport_of(obj),
        "url": obj.get("httpUrl").or_else(|| obj.get("url")),
        "command": obj.get("command"),
        "args": obj.get("args").cloned().unwrap_or_else(|| json!([])),
        "env": mask_map(obj.get("env"), false),
        "cwd": obj.get("cwd"),
        "headers": mask_map(obj.get("headers"), true),
        "oauth": oauth,
        "trust": obj.get("trust").and_then(Value::as_bool).unwrap_or(false),
        "timeout": obj.get("timeout"),
        "description": obj.get("description"),
        "disabled": obj.get("disabled").and_then(Value::as_bool).unwrap_or(false),
        "includeTools": obj.get("includeTools"),
        "excludeTools": obj.get("excludeTools"),
    })
}

/// `GET /api/settings/mcp-servers`.
pub async fn list(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let settings = state
        .load_settings()
        .map_err(|e| ApiError::internal(format!("cannot read the settings: {e}")))?;
    let mut docs: HashMap<PathBuf, Option<SettingsDoc>> = HashMap::new();
    let host = state.host();
    let mut servers = Vec::new();
    for entry in &settings.servers {
        let doc = docs
            .entry(entry.source_file.clone())
            .or_insert_with(|| SettingsDoc::open(&entry.source_file).ok());
        let raw = doc
            .as_ref()
            .and_then(|d| d.server(&entry.name).cloned())
            .unwrap_or(Value::Null);
        let mut view = entry_view(&entry.name, &raw);
        let status = host.server(&entry.name);
        let is_stdio = view["transport"] == "stdio";
        view["origin"] = json!(entry.origin.to_string());
        view["file"] = json!(entry.source_file.display().to_string());
        view["editable"] = json!(!(state.cfg().remote && is_stdio));
        view["configError"] = json!(entry.config.as_ref().err());
        view["state"] = json!(match &entry.state {
            EntryState::Enabled => "enabled".to_string(),
            EntryState::Disabled => "disabled".to_string(),
            EntryState::Blocked(r) => format!("blocked: {r}"),
        });
        view["status"] = json!(status.as_ref().map(|s| s.status.as_str()));
        view["error"] = json!(status.as_ref().and_then(|s| s.error.clone()));
        view["auth"] = json!(
            status
                .as_ref()
                .and_then(|s| s.auth)
                .and_then(|a| serde_json::to_value(a).ok())
        );
        view["toolCount"] = json!(status.as_ref().map(|s| s.tools.len()));
        servers.push(view);
    }
    if settings.no_settings_file {
        for spec in &state.cfg().default_servers {
            let status = host.server(&spec.name);
            servers.push(json!({
                "name": spec.name,
                "transport": spec.transport_label,
                "command": spec.target_display,
                "origin": "default",
                "editable": false,
                "builtin": true,
                "status": status.as_ref().map(|s| s.status.as_str()),
                "error": status.as_ref().and_then(|s| s.error.clone()),
                "toolCount": status.as_ref().map(|s| s.tools.len()),
                "headers": {}, "env": {}, "args": [],
            }));
        }
    }
    Ok(Json(json!({
        "servers": servers,
        "writeFile": state.cfg().write_path().display().to_string(),
        "noSettingsFile": settings.no_settings_file,
        "remote": state.cfg().remote,
        "keepUnchanged": KEEP_UNCHANGED,
        "urlPolicy": state.cfg().url_policy.as_str(),
        "warnings": settings
            .warnings
            .iter()
            .cloned()
            .chain(settings.ignored_project.as_ref().map(|i| i.message()))
            .collect::<Vec<_>>(),
        "ignoredProjectSettings": settings.ignored_project.as_ref().map(|i| json!({
            "file": i.file,
            "folder": i.folder,
            "servers": i.servers,
            "fix": i.fix(),
        })),
    })))
}

/// The settings form (add and edit).
#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerForm {
    pub name: String,
    #[serde(default)]
    pub transport: Option<String>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Option<Vec<String>>,
    #[serde(default)]
    pub env: Option<Value>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// An object of strings, or a JSON text of one.
    #[serde(default)]
    pub headers: Option<Value>,
    /// An object, or `null` to remove.
    #[serde(default)]
    pub oauth: Option<Value>,
    #[serde(default)]
    pub trust: Option<bool>,
    #[serde(default)]
    pub timeout: Option<u64>,
    #[serde(default)]
    pub description: Option<String>,
    /// `user` (default) or `project`; add only.
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub disabled: Option<bool>,
}

pub(crate) fn valid_name(name: &str) -> ApiResult<()> {
    if name.trim().is_empty()
        || name.len() > 100
        || name
            .chars()
            .any(|c| c.is_control() || c == '/' || c == '\\')
    {
        return Err(ApiError::bad_request(format!(
            "`{name}` is not a usable server name (1-100 characters, no slashes or control characters)"
        )));
    }
    Ok(())
}

/// The saved values a form may keep with [`KEEP_UNCHANGED`]: `Ok(None)` when there
/// are none, `Err(why)` when keeping them is refused (the server now points
/// somewhere else).
type Keepable<'a> = Result<Option<&'a Value>, &'a str>;

/// A string map from the form: an object of strings (or a JSON text of one); values
/// equal to [`KEEP_UNCHANGED`] take the saved value.
fn string_map(field: &str, value: &Value, saved: Keepable<'_>) -> ApiResult<Map<String, Value>> {
    let parsed;
    let value = match value {
        Value::String(s) if s.trim().is_empty() => return Ok(Map::new()),
        Value::String(s) => {
            parsed = serde_json::from_str::<Value>(s)
                .map_err(|e| ApiError::bad_request(format!("`{field}` is not valid JSON: {e}")))?;
            &parsed
        }
        Value::Null => return Ok(Map::new()),
        v => v,
    };
    let obj = value.as_object().ok_or_else(|| {
        ApiError::bad_request(format!(
            "`{field}` must be a JSON object of strings, like {{\"Authorization\": \"Bearer …\"}}"
        ))
    })?;
    let mut out = Map::new();
    for (k, v) in obj {
        if k.trim().is_empty() {
            return Err(ApiError::bad_request(format!(
                "`{field}` has an empty name"
            )));
        }
        let v = match v {
            Value::String(s) if s == KEEP_UNCHANGED => match saved {
                Err(why) => {
                    return Err(ApiError::bad_request(format!(
                        "`{field}.{k}` is {KEEP_UNCHANGED}, but {why}: saved secrets stay with the destination they were written for; enter the value again"
                    )));
                }
                Ok(saved) => saved.and_then(|m| m.get(k)).cloned().ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "`{field}.{k}` is {KEEP_UNCHANGED} but there is no saved value to keep; enter the value"
                    ))
                })?,
            },
            Value::String(s) => Value::String(s.clone()),
            Value::Number(n) => Value::String(n.to_string()),
            Value::Bool(b) => Value::String(b.to_string()),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "`{field}.{k}` must be a string"
                )));
            }
        };
        out.insert(k.clone(), v);
    }
    Ok(out)
}

/// What [`KEEP_UNCHANGED`] may take in an edit: the saved values, unless the edit
/// points the server somewhere else.
fn keepable(moved: bool, saved: Option<&Value>) -> Keepable<'_> {
    if moved {
        Err("the server's command or URL changed")
    } else {
        Ok(saved)
    }
}

/// Where an entry as written points: what runs, or what is contacted.
fn destination(entry: &Value) -> [Option<&Value>; 4] {
    [
        entry.get("command"),
        entry
            .get("args")
            .filter(|a| a.as_array().is_some_and(|a| !a.is_empty())),
        entry.get("cwd"),
        entry.get("httpUrl").or_else(|| entry.get("url")),
    ]
}

/// Where an entry's OAuth client secret and ID token are sent.
fn oauth_destination(oauth: Option<&Value>) -> [Option<&Value>; 3] {
    [
        oauth.and_then(|o| o.get("tokenUrl")),
        oauth.and_then(|o| o.get("authorizationUrl")),
        oauth
            .and_then(|o| o.get("idp"))
            .and_then(|i| i.get("tokenEndpoint")),
    ]
}

/// Values that arrive through the web API are data, never references: every
/// expanded string that is new, or that no longer points at the destination it was
/// written for, is stored escaped (so `$VAR` stays `$VAR`); a value kept exactly as
/// the file had it for the same destination keeps its meaning.
fn store_literally(entry: &mut Map<String, Value>, base: &Value, moved: bool) {
    let kept = |path: &[&str], v: &str| {
        !moved
            && path
                .iter()
                .try_fold(base, |node, key| node.get(*key))
                .and_then(Value::as_str)
                == Some(v)
    };
    for field in EXPANDED_FIELDS {
        let Some(value) = entry.get_mut(*field) else {
            continue;
        };
        match value {
            Value::String(s) if !kept(&[field], s) => *s = escape_vars(s),
            Value::Array(items) => {
                let saved = (!moved).then(|| base.get(*field)).flatten();
                for (i, item) in items.iter_mut().enumerate() {
                    if let Value::String(s) = item
                        && saved.and_then(|a| a.get(i)).and_then(Value::as_str) != Some(s.as_str())
                    {
                        *s = escape_vars(s);
                    }
                }
            }
            Value::Object(map) => {
                for (k, item) in map.iter_mut() {
                    if let Value::String(s) = item
                        && !kept(&[field, k], s)
                    {
                        *s = escape_vars(s);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Local files and ambient credentials are read only for entries written by hand:
/// the web API may keep such a reference exactly as the file has it, for the same
/// destination, but never add or change one.
fn refuse_new_local_references(entry: &Value, base: &Value, moved: bool) -> ApiResult<()> {
    let saved = local_references(base);
    for r in local_references(entry) {
        if moved || !saved.contains(&r) {
            return Err(ApiError::bad_request(format!(
                "`{}` makes Switchboard use {} (`{}`); that is honoured only in settings written by hand, so it cannot be set or pointed at a new server from the browser: edit the settings file itself",
                r.field, r.what, r.value
            )));
        }
    }
    Ok(())
}

const TRANSPORT_KEYS: &[&str] = &[
    "command", "args", "env", "cwd", "url", "httpUrl", "type", "headers",
];

/// Applies the form to an entry as written (`base`: the saved entry, or empty).
pub fn apply_form(base: &Value, form: &ServerForm) -> ApiResult<Value> {
    let mut entry = base.as_object().cloned().unwrap_or_default();
    let url = form.url.as_deref().map(str::trim).filter(|u| !u.is_empty());
    let command = form
        .command
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty());
    let transport = match form.transport.as_deref().filter(|t| !t.is_empty()) {
        Some(t) => t.to_string(),
        None if command.is_some() => "stdio".into(),
        None => "http".into(),
    };
    let saved_env = base.get("env").cloned();
    let saved_headers = base.get("headers").cloned();
    for k in TRANSPORT_KEYS {
        entry.shift_remove(*k);
    }
    // Whether the edit points the server somewhere else, worked out before the
    // secrets are filled in: kept secrets must not follow it.
    let moved = base.is_object()
        && destination(base) != destination(&form_destination(form, &transport, url, command));

    match transport.as_str() {
        "stdio" => {
            let command =
                command.ok_or_else(|| ApiError::bad_request("a stdio server needs a `command`"))?;
            entry.insert("command".into(), json!(command));
            let args: Vec<String> = form.args.clone().unwrap_or_default();
            if !args.is_empty() {
                entry.insert("args".into(), json!(args));
            }
            if let Some(env) = &form.env {
                let env = string_map("env", env, keepable(moved, saved_env.as_ref()))?;
                if !env.is_empty() {
                    entry.insert("env".into(), Value::Object(env));
                }
            }
            if let Some(cwd) = form.cwd.as_deref().filter(|c| !c.trim().is_empty()) {
                entry.insert("cwd".into(), json!(cwd));
            }
            if form.headers.as_ref().is_some_and(|h| {
                !string_map("headers", h, Ok(None))
                    .unwrap_or_default()
                    .is_empty()
            }) {
                return Err(ApiError::bad_request(
                    "headers are for http and sse servers, not stdio",
                ));
            }
        }
        "http" | "sse" | "auto" => {
            let url = url.ok_or_else(|| {
                ApiError::bad_request(format!(
                    "a server with transport `{transport}` needs a `url`"
                ))
            })?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(ApiError::bad_request(format!(
                    "`{url}` is not an http(s):// URL"
                )));
            }
            match transport.as_str() {
                "http" => {
                    entry.insert("httpUrl".into(), json!(url));
                }
                "sse" => {
                    entry.insert("url".into(), json!(url));
                    entry.insert("type".into(), json!("sse"));
                }
                _ => {
                    entry.insert("url".into(), json!(url));
                }
            }
            if let Some(h) = &form.headers {
                let headers = string_map("headers", h, keepable(moved, saved_headers.as_ref()))?;
                if !headers.is_empty() {
                    entry.insert("headers".into(), Value::Object(headers));
                }
            }
        }
        other => {
            return Err(ApiError::bad_request(format!(
                "`transport` must be stdio, http, sse or auto, not `{other}`"
            )));
        }
    }
    match &form.oauth {
        None | Some(Value::Null) => {
            entry.shift_remove("oauth");
        }
        Some(Value::Object(o)) => {
            let mut o = o.clone();
            if o.get("clientSecret").and_then(Value::as_str) == Some(KEEP_UNCHANGED) {
                let new_oauth = Value::Object(o.clone());
                if moved
                    || oauth_destination(base.get("oauth")) != oauth_destination(Some(&new_oauth))
                {
                    return Err(ApiError::bad_request(format!(
                        "`oauth.clientSecret` is {KEEP_UNCHANGED}, but the server's URL or its OAuth endpoints changed: saved secrets stay with the destination they were written for; enter the value again"
                    )));
                }
                match base.get("oauth").and_then(|b| b.get("clientSecret")) {
                    Some(saved) => {
                        o.insert("clientSecret".into(), saved.clone());
                    }
                    None => {
                        o.shift_remove("clientSecret");
                    }
                }
            }
            o.retain(|_, v| !v.is_null() && v.as_str() != Some(""));
            if o.is_empty() {
                entry.shift_remove("oauth");
            } else {
                entry.insert("oauth".into(), Value::Object(o));
            }
        }
        Some(_) => return Err(ApiError::bad_request("`oauth` must be an object or null")),
    }
    set_or_remove(
        &mut entry,
        "trust",
        form.trust.filter(|t| *t).map(|t| json!(t)),
    );
    set_or_remove(&mut entry, "timeout", form.timeout.map(|t| json!(t)));
    set_or_remove(
        &mut entry,
        "description",
        form.description
            .as_deref()
            .filter(|d| !d.trim().is_empty())
            .map(|d| json!(d)),
    );
    if let Some(d) = form.disabled {
        set_or_remove(&mut entry, "disabled", d.then(|| json!(true)));
    }
    store_literally(&mut entry, base, moved);
    let entry = Value::Object(entry);
    refuse_new_local_references(&entry, base, moved)?;
    Ok(entry)
}

/// The destination fields the form asks for, as an entry would hold them.
fn form_destination(
    form: &ServerForm,
    transport: &str,
    url: Option<&str>,
    command: Option<&str>,
) -> Value {
    if transport == "stdio" {
        json!({
            "command": command,
            "args": form.args.clone().unwrap_or_default(),
            "cwd": form.cwd.as_deref().filter(|c| !c.trim().is_empty()),
        })
    } else {
        json!({ "url": url })
    }
}

fn set_or_remove(entry: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    match value {
        Some(v) => {
            entry.insert(key.into(), v);
        }
        None => {
            entry.shift_remove(key);
        }
    }
}

fn is_stdio(entry: &Value) -> bool {
    entry.get("command").is_some()
}

fn refuse_remote_stdio(state: &AppState, what: &str) -> ApiResult<()> {
    if state.cfg().remote {
        return Err(ApiError::forbidden(format!(
            "{what}: Switchboard is served beyond loopback, so stdio servers cannot be added, edited or enabled from the browser (that would let anyone who reaches this page run commands); use `switchboard mcp add` on the machine itself"
        )));
    }
    Ok(())
}

/// The file that defines `name`, if any.
fn source_file(state: &AppState, name: &str) -> ApiResult<Option<PathBuf>> {
    let settings = state
        .load_settings()
        .map_err(|e| ApiError::internal(format!("cannot read the settings: {e}")))?;
    Ok(settings.server(name).map(|e| e.source_file.clone()))
}

fn open_doc(path: &Path) -> ApiResult<SettingsDoc> {
    SettingsDoc::open(path).map_err(|e| ApiError::internal(e.to_string()))
}

fn save(doc: &SettingsDoc) -> ApiResult<()> {
    doc.save().map_err(|e| ApiError::internal(e.to_string()))
}

/// After a write: rebuild the host and report the entry's state.
async fn after_write(state: &AppState, name: Option<&str>, file: &Path) -> Json<Value> {
    let reload = state.start_host().await;
    let config_error = name.and_then(|n| {
        state
            .load_settings()
            .ok()
            .and_then(|s| s.server(n).and_then(|e| e.config.clone().err()))
    });
    Json(json!({
        "ok": true,
        "file": file.display().to_string(),
        "configError": config_error,
        "reloadError": reload.err(),
    }))
}

/// `POST /api/settings/mcp-servers`.
pub async fn add(
    State(state): State<AppState>,
    ApiJson(form): ApiJson<ServerForm>,
) -> ApiResult<Json<Value>> {
    valid_name(&form.name)?;
    let entry = apply_form(&Value::Null, &form)?;
    add_entry(&state, &form.name, form.scope.as_deref(), entry).await
}

/// Writes a new entry `name` (never over an existing one: 409) into the file `scope`
/// names, then rebuilds the host; shared by the form and the MCP Registry's add.
pub(crate) async fn add_entry(
    state: &AppState,
    name: &str,
    scope: Option<&str>,
    entry: Value,
) -> ApiResult<Json<Value>> {
    let _w = state.inner.write_lock.lock().await;
    if is_stdio(&entry) {
        refuse_remote_stdio(state, "cannot add a stdio server")?;
    }
    if source_file(state, name)?.is_some() {
        return Err(ApiError::conflict(format!(
            "a server named `{name}` already exists; edit it or choose another name"
        )));
    }
    let path = match scope {
        None | Some("user") | Some("") => state.cfg().write_path(),
        Some("project") if state.cfg().load.config_file.is_none() => {
            project_settings_path(&state.cfg().load.project_dir)
        }
        Some("project") => state.cfg().write_path(),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "`scope` must be user or project, not `{other}`"
            )));
        }
    };
    let mut doc = open_doc(&path)?;
    doc.set_server(name, entry)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    save(&doc)?;
    Ok(after_write(state, Some(name), &path).await)
}

/// `PUT /api/settings/mcp-servers/{name}`.
pub async fn edit(
    State(state): State<AppState>,
    UrlPath(name): UrlPath<String>,
    ApiJson(form): ApiJson<ServerForm>,
) -> ApiResult<Json<Value>> {
    valid_name(&form.name)?;
    let _w = state.inner.write_lock.lock().await;
    let path = source_file(&state, &name)?
        .ok_or_else(|| ApiError::not_found(format!("no server `{name}` in the settings files")))?;
    let mut doc = open_doc(&path)?;
    let base = doc
        .server(&name)
        .cloned()
        .ok_or_else(|| ApiError::not_found(format!("no server `{name}` in {}", path.display())))?;
    let entry = apply_form(&base, &form)?;
    if is_stdio(&base) || is_stdio(&entry) {
        refuse_remote_stdio(&state, "cannot edit a stdio server")?;
    }
    if form.name != name {
        if source_file(&state, &form.name)?.is_some() {
            return Err(ApiError::conflict(format!(
                "a server named `{}` already exists",
                form.name
            )));
        }
        doc.remove_server(&name);
    }
    doc.set_server(&form.name, entry)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    save(&doc)?;
    Ok(after_write(&state, Some(&form.name), &path).await)
}

/// `DELETE /api/settings/mcp-servers/{name}`.
pub async fn delete(
    State(state): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> ApiResult<Json<Value>> {
    let _w = state.inner.write_lock.lock().await;
    let path = source_file(&state, &name)?.ok_or_else(|| {
        ApiError::not_found(format!(
            "no server `{name}` in the settings files (the bundled demo server cannot be deleted; it goes away once you add your own)"
        ))
    })?;
    let mut doc = open_doc(&path)?;
    if !doc.remove_server(&name) {
        return Err(ApiError::not_found(format!(
            "no server `{name}` in {}",
            path.display()
        )));
    }
    save(&doc)?;
    Ok(after_write(&state, None, &path).await)
}

#[derive(Debug, Deserialize)]
pub struct Enabled {
    enabled: bool,
}

/// `POST /api/settings/mcp-servers/{name}/enabled` `{enabled}`.
pub async fn set_enabled(
    State(state): State<AppState>,
    UrlPath(name): UrlPath<String>,
    ApiJson(body): ApiJson<Enabled>,
) -> ApiResult<Json<Value>> {
    let _w = state.inner.write_lock.lock().await;
    let path = source_file(&state, &name)?
        .ok_or_else(|| ApiError::not_found(format!("no server `{name}` in the settings files")))?;
    let mut doc = open_doc(&path)?;
    if body.enabled && doc.server(&name).is_some_and(is_stdio) {
        refuse_remote_stdio(&state, "cannot enable a stdio server")?;
    }
    doc.set_disabled(&name, !body.enabled)
        .map_err(|e| ApiError::not_found(e.to_string()))?;
    save(&doc)?;
    Ok(after_write(&state, Some(&name), &path).await)
}

/// Resolves a headers value from the browser for Test (object or JSON text). A
/// [`KEEP_UNCHANGED`] value takes the header server `name` is configured with
/// (expanded, as the host would send it), and only when the test goes to that
/// server's own URL: saved secrets never follow a URL typed in the browser.
pub fn resolve_headers(
    state: &AppState,
    headers: Option<&Value>,
    name: Option<&str>,
    url: &str,
) -> ApiResult<Vec<(String, String)>> {
    let Some(h) = headers else {
        return Ok(Vec::new());
    };
    let settings = name.and_then(|_| state.load_settings().ok());
    let configured = name
        .and_then(|n| settings.as_ref()?.server(n))
        .and_then(|e| e.config.as_ref().ok())
        .map(|c| &c.transport);
    let saved = configured.and_then(|t| t.headers()).map(|h| {
        Value::Object(
            h.iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        )
    });
    let same_url = configured.and_then(|t| t.url()) == Some(url.trim());
    let keep: Keepable<'_> = if saved.is_some() && !same_url {
        Err("the URL differs from the saved server's")
    } else {
        Ok(saved.as_ref())
    };
    let map = string_map("headers", h, keep)?;
    Ok(map
        .into_iter()
        .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_string()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_keeps_unknown_fields_and_masked_values() {
        let base = json!({
            "httpUrl": "http://a/mcp",
            "headers": {"Authorization": "Bearer secret", "X-Other": "1"},
            "oauth": {"clientId": "c", "clientSecret": "s3cret"},
            "myExtra": [1, 2],
            "timeout": 5
        });
        let view = entry_view("a", &base);
        assert_eq!(view["headers"]["Authorization"], KEEP_UNCHANGED);
        assert_eq!(view["headers"]["X-Other"], KEEP_UNCHANGED);
        assert_eq!(view["oauth"]["clientSecret"], KEEP_UNCHANGED);
        assert!(!view.to_string().contains("secret\""));
        let form = ServerForm {
            name: "a".into(),
            transport: Some("http".into()),
            url: Some("http://a/mcp".into()),
            headers: Some(json!({"Authorization": KEEP_UNCHANGED, "X-New": "2"})),
            oauth: Some(json!({"clientId": "c", "clientSecret": KEEP_UNCHANGED})),
            timeout: Some(7),
            ..Default::default()
        };
        let out = apply_form(&base, &form).unwrap();
        assert_eq!(out["httpUrl"], "http://a/mcp");
        assert_eq!(
            out["headers"],
            json!({"Authorization": "Bearer secret", "X-New": "2"})
        );
        assert_eq!(out["oauth"]["clientSecret"], "s3cret");
        assert_eq!(out["myExtra"], json!([1, 2]));
        assert_eq!(out["timeout"], 7);
    }

    #[test]
    fn kept_secrets_do_not_follow_a_new_destination() {
        let base = json!({
            "httpUrl": "https://api.example.com/mcp",
            "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"},
            "oauth": {"clientId": "c", "clientSecret": "s3cret", "tokenUrl": "https://as.example.com/token"},
        });
        let moved = |url: &str, headers: Value, oauth: Option<Value>| {
            apply_form(
                &base,
                &ServerForm {
                    name: "gh".into(),
                    transport: Some("http".into()),
                    url: Some(url.into()),
                    headers: Some(headers),
                    oauth,
                    ..Default::default()
                },
            )
        };
        let e = moved(
            "http://127.0.0.1:9/steal",
            json!({"Authorization": KEEP_UNCHANGED}),
            None,
        )
        .unwrap_err();
        assert!(e.message.contains("changed"), "{}", e.message);
        let e = moved(
            "http://127.0.0.1:9/steal",
            json!({}),
            Some(json!({"clientId": "c", "clientSecret": KEEP_UNCHANGED, "tokenUrl": "https://as.example.com/token"})),
        )
        .unwrap_err();
        assert!(e.message.contains("oauth.clientSecret"), "{}", e.message);
        // Same server, new token endpoint: the client secret does not follow either.
        let e = moved(
            "https://api.example.com/mcp",
            json!({"Authorization": KEEP_UNCHANGED}),
            Some(json!({"clientId": "c", "clientSecret": KEEP_UNCHANGED, "tokenUrl": "http://127.0.0.1:9/token"})),
        )
        .unwrap_err();
        assert!(e.message.contains("oauth.clientSecret"), "{}", e.message);
        // Same destination: the reference the user wrote keeps its meaning.
        let same = moved(
            "https://api.example.com/mcp",
            json!({"Authorization": KEEP_UNCHANGED, "X-Typed": "Bearer ${OPENAI_API_KEY}"}),
            None,
        )
        .unwrap();
        assert_eq!(same["headers"]["Authorization"], "Bearer ${GITHUB_TOKEN}");
        assert_eq!(
            same["headers"]["X-Typed"], "Bearer $${OPENAI_API_KEY}",
            "typed in the browser: stored literally"
        );
        // Moved with new values: everything literal.
        let out = moved(
            "https://other.example.com/$PATH",
            json!({"Authorization": "Bearer ${GITHUB_TOKEN}"}),
            None,
        )
        .unwrap();
        assert_eq!(out["httpUrl"], "https://other.example.com/$$PATH");
        assert_eq!(out["headers"]["Authorization"], "Bearer $${GITHUB_TOKEN}");
    }

    #[test]
    fn local_files_and_ambient_credentials_are_not_set_from_the_browser() {
        let form = |oauth: Value| ServerForm {
            name: "x".into(),
            transport: Some("http".into()),
            url: Some("https://x.example.com/mcp".into()),
            oauth: Some(oauth),
            ..Default::default()
        };
        for oauth in [
            json!({"grantType": "urn:ietf:params:oauth:grant-type:jwt-bearer", "idp": {"tokenEndpoint": "https://evil.example/t", "clientId": "c", "idToken": "file:/home/u/.ssh/id_rsa"}}),
            json!({"clientId": "c", "privateKeyFile": "/etc/shadow"}),
        ] {
            let e = apply_form(&Value::Null, &form(oauth)).unwrap_err();
            assert!(e.message.contains("written by hand"), "{}", e.message);
        }
        // A reference the file already has, for the same server, may stay.
        let base = json!({"httpUrl": "https://x.example.com/mcp", "authProviderType": "google_credentials",
            "oauth": {"clientId": "c", "privateKeyFile": "/k.pem"}});
        let kept = apply_form(
            &base,
            &form(json!({"clientId": "c", "privateKeyFile": "/k.pem"})),
        )
        .unwrap();
        assert_eq!(kept["authProviderType"], "google_credentials");
        // But not towards another server.
        let mut other = form(json!({"clientId": "c", "privateKeyFile": "/k.pem"}));
        other.url = Some("https://evil.example/mcp".into());
        assert!(apply_form(&base, &other).is_err());
        let mut changed =
            form(json!({"clientId": "c", "privateKeyFile": "/etc/ssh/ssh_host_ed25519_key"}));
        changed.url = Some("https://x.example.com/mcp".into());
        assert!(apply_form(&base, &changed).is_err());
    }

    #[test]
    fn transports_are_written_like_the_cli() {
        let sse = apply_form(
            &Value::Null,
            &ServerForm {
                name: "s".into(),
                transport: Some("sse".into()),
                url: Some("http://x/sse".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(sse, json!({"url": "http://x/sse", "type": "sse"}));
        let stdio = apply_form(
            &json!({"httpUrl": "http://old", "headers": {"a": "b"}}),
            &ServerForm {
                name: "s".into(),
                command: Some("node".into()),
                args: Some(vec!["srv.js".into()]),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(stdio, json!({"command": "node", "args": ["srv.js"]}));
        let bad = apply_form(
            &Value::Null,
            &ServerForm {
                name: "s".into(),
                headers: Some(json!({"A": KEEP_UNCHANGED})),
                url: Some("http://x".into()),
                ..Default::default()
            },
        );
        assert!(bad.is_err());
        assert!(
            apply_form(
                &Value::Null,
                &ServerForm {
                    name: "s".into(),
                    url: Some("ftp://x".into()),
                    ..Default::default()
                }
            )
            .is_err()
        );
    }
}
