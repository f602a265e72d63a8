//! A registry's `server.json` (and the list item around it) in two steps: the raw serde
//! shape, every field optional and unknown fields ignored, then [`ServerJson`], the
//! validated type the rest of the crate uses. A package or remote that cannot be used
//! (no identifier, no URL) is left out and named in [`ServerJson::problems`]; an item
//! with no server name is not a server at all.
//!
//! Strings are the registry's, unchanged: they are untrusted text, and whoever shows
//! them makes them safe for their medium. Nothing here does I/O.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// The registry's own metadata key in an item's `_meta`.
const OFFICIAL_META: &str = "io.modelcontextprotocol.registry/official";
/// Longest text kept from one registry string field (names, descriptions, values).
const MAX_TEXT: usize = 4096;
/// Most packages, remotes, arguments or variables kept from one list.
const MAX_LIST: usize = 64;

// ------------------------------------------------------------------- raw shapes

#[derive(Debug, Deserialize)]
struct RawItem {
    server: Option<RawServer>,
    #[serde(rename = "_meta")]
    meta: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawServer {
    name: Option<Value>,
    title: Option<Value>,
    description: Option<Value>,
    version: Option<Value>,
    website_url: Option<Value>,
    #[serde(default)]
    packages: Vec<Value>,
    #[serde(default)]
    remotes: Vec<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPackage {
    registry_type: Option<Value>,
    identifier: Option<Value>,
    version: Option<Value>,
    runtime_hint: Option<Value>,
    transport: Option<Value>,
    file_sha256: Option<Value>,
    #[serde(default)]
    runtime_arguments: Vec<Value>,
    #[serde(default)]
    package_arguments: Vec<Value>,
    #[serde(default)]
    environment_variables: Vec<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRemote {
    #[serde(rename = "type")]
    kind: Option<Value>,
    url: Option<Value>,
    #[serde(default)]
    headers: Vec<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawInput {
    name: Option<Value>,
    description: Option<Value>,
    is_required: Option<Value>,
    is_secret: Option<Value>,
    value: Option<Value>,
    default: Option<Value>,
    #[serde(default)]
    choices: Vec<Value>,
    value_hint: Option<Value>,
    #[serde(rename = "type")]
    kind: Option<Value>,
    variables: Option<BTreeMap<String, Value>>,
}

// ------------------------------------------------------------- validated types

/// One entry of the registry: its `server.json` and its status there.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    pub server: ServerJson,
    /// `active`, `deprecated`, `deleted`… (absent: `active`).
    pub status: String,
}

impl Listing {
    /// Whether the registry lists the server as active (only those are installed).
    pub fn is_active(&self) -> bool {
        self.status == "active"
    }
}

/// A server as its `server.json` describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerJson {
    /// The registry name, e.g. `io.github.example/weather-mcp`.
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub version: String,
    pub website_url: Option<String>,
    pub packages: Vec<Package>,
    pub remotes: Vec<Remote>,
    /// What was left out, and why (a package without an identifier…).
    pub problems: Vec<String>,
}

impl ServerJson {
    /// How the server runs: each package's registry type once, then `remote`.
    pub fn runs(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for p in &self.packages {
            let t = p.registry_type.as_str();
            if !out.iter().any(|o| o == t) {
                out.push(t.to_string());
            }
        }
        if !self.remotes.is_empty() {
            out.push("remote".into());
        }
        out
    }
}

/// A package's registry type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackageKind {
    Npm,
    Pypi,
    Oci,
    Mcpb,
    /// Any other (`nuget`…): listed, not installable.
    Other(String),
}

impl PackageKind {
    fn parse(s: &str) -> Self {
        match s {
            "npm" => Self::Npm,
            "pypi" => Self::Pypi,
            "oci" => Self::Oci,
            "mcpb" => Self::Mcpb,
            other => Self::Other(other.to_string()),
        }
    }

    /// The registry's word for it.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Npm => "npm",
            Self::Pypi => "pypi",
            Self::Oci => "oci",
            Self::Mcpb => "mcpb",
            Self::Other(s) => s,
        }
    }
}

/// A package (something that runs on this machine).
#[derive(Debug, Clone, PartialEq)]
pub struct Package {
    pub registry_type: PackageKind,
    pub identifier: String,
    pub version: Option<String>,
    pub runtime_hint: Option<String>,
    /// `stdio` (default), `streamable-http` or `sse`.
    pub transport: String,
    pub file_sha256: Option<String>,
    pub runtime_arguments: Vec<Argument>,
    pub package_arguments: Vec<Argument>,
    pub environment_variables: Vec<Input>,
}

/// A remote (a server someone else runs).
#[derive(Debug, Clone, PartialEq)]
pub struct Remote {
    /// `streamable-http` (default) or `sse` (anything else is kept, and refused when
    /// chosen).
    pub kind: String,
    pub url: String,
    pub headers: Vec<Input>,
}

/// A value a server needs: an environment variable, a header, or an argument's
/// `{variable}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub name: String,
    pub description: Option<String>,
    pub required: bool,
    /// `isSecret`: asked for without echo, never shown again.
    pub secret: bool,
    /// A fixed value the registry gives.
    pub value: Option<String>,
    pub default: Option<String>,
    pub choices: Vec<String>,
}

impl Input {
    /// Whether a person must give it: required, with neither a fixed value nor a
    /// default.
    pub fn needs_value(&self) -> bool {
        self.required && self.value.is_none() && self.default.is_none()
    }

    /// `NAME (description)`, for messages.
    pub fn label(&self) -> String {
        match &self.description {
            Some(d) => format!("{} ({d})", self.name),
            None => self.name.clone(),
        }
    }
}

/// A runtime or package argument.
#[derive(Debug, Clone, PartialEq)]
pub struct Argument {
    /// `named` (`--flag value`) or positional.
    pub named: bool,
    pub name: Option<String>,
    pub value_hint: Option<String>,
    pub description: Option<String>,
    pub required: bool,
    pub value: Option<String>,
    pub default: Option<String>,
    /// `{name}` variables in `value`, with their defaults.
    pub variables: BTreeMap<String, Input>,
}

impl Argument {
    /// The name a person knows it by (`name`, else `valueHint`).
    pub fn label(&self) -> &str {
        self.name
            .as_deref()
            .or(self.value_hint.as_deref())
            .unwrap_or("?")
    }
}

// ----------------------------------------------------------------- validation

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => {
            let mut s = s.clone();
            if s.len() > MAX_TEXT {
                let mut end = MAX_TEXT;
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                s.truncate(end);
            }
            Some(s)
        }
        _ => None,
    }
}

fn flag(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Bool(true)))
}

fn input(raw: &Value) -> Option<Input> {
    let r: RawInput = serde_json::from_value(raw.clone()).ok()?;
    Some(Input {
        name: text(r.name.as_ref())?,
        description: text(r.description.as_ref()),
        required: flag(r.is_required.as_ref()),
        secret: flag(r.is_secret.as_ref()),
        value: text(r.value.as_ref()),
        default: text(r.default.as_ref()),
        choices: r
            .choices
            .iter()
            .take(MAX_LIST)
            .filter_map(|c| text(Some(c)))
            .collect(),
    })
}

/// A variable of an argument (its key is its name).
fn variable(name: &str, raw: &Value) -> Option<Input> {
    let mut with_name = raw.clone();
    if let Value::Object(m) = &mut with_name {
        m.insert("name".into(), Value::String(name.to_string()));
    }
    input(&with_name)
}

fn argument(raw: &Value) -> Option<Argument> {
    let r: RawInput = serde_json::from_value(raw.clone()).ok()?;
    Some(Argument {
        named: text(r.kind.as_ref()).as_deref() == Some("named"),
        name: text(r.name.as_ref()),
        value_hint: text(r.value_hint.as_ref()),
        description: text(r.description.as_ref()),
        required: flag(r.is_required.as_ref()),
        value: text(r.value.as_ref()),
        default: text(r.default.as_ref()),
        variables: r
            .variables
            .unwrap_or_default()
            .iter()
            .take(MAX_LIST)
            .filter_map(|(k, v)| Some((k.clone(), variable(k, v)?)))
            .collect(),
    })
}

fn list<T>(raw: &[Value], f: impl Fn(&Value) -> Option<T>) -> Vec<T> {
    raw.iter().take(MAX_LIST).filter_map(f).collect()
}

fn package(raw: &Value) -> Result<Package, String> {
    let r: RawPackage =
        serde_json::from_value(raw.clone()).map_err(|e| format!("a package is malformed: {e}"))?;
    let kind = text(r.registry_type.as_ref()).unwrap_or_default();
    let identifier = text(r.identifier.as_ref())
        .filter(|i| !i.is_empty())
        .ok_or_else(|| format!("a {kind} package has no `identifier`"))?;
    Ok(Package {
        registry_type: PackageKind::parse(&kind),
        identifier,
        version: text(r.version.as_ref()),
        runtime_hint: text(r.runtime_hint.as_ref()),
        transport: r
            .transport
            .as_ref()
            .and_then(|t| text(t.get("type")))
            .unwrap_or_else(|| "stdio".into()),
        file_sha256: text(r.file_sha256.as_ref()),
        runtime_arguments: list(&r.runtime_arguments, argument),
        package_arguments: list(&r.package_arguments, argument),
        environment_variables: list(&r.environment_variables, input),
    })
}

fn remote(raw: &Value) -> Result<Remote, String> {
    let r: RawRemote =
        serde_json::from_value(raw.clone()).map_err(|e| format!("a remote is malformed: {e}"))?;
    let url = text(r.url.as_ref())
        .filter(|u| !u.is_empty())
        .ok_or("a remote has no `url`")?;
    Ok(Remote {
        kind: text(r.kind.as_ref()).unwrap_or_else(|| "streamable-http".into()),
        url,
        headers: list(&r.headers, input),
    })
}

/// Validates a `server.json`; `None` when it is not one (no name).
pub fn parse_server(raw: &Value) -> Option<ServerJson> {
    let r: RawServer = serde_json::from_value(raw.clone()).ok()?;
    let name = text(r.name.as_ref()).filter(|n| !n.is_empty())?;
    let mut problems = Vec::new();
    let mut packages = Vec::new();
    for p in r.packages.iter().take(MAX_LIST) {
        match package(p) {
            Ok(p) => packages.push(p),
            Err(why) => problems.push(why),
        }
    }
    let mut remotes = Vec::new();
    for p in r.remotes.iter().take(MAX_LIST) {
        match remote(p) {
            Ok(p) => remotes.push(p),
            Err(why) => problems.push(why),
        }
    }
    Some(ServerJson {
        name,
        title: text(r.title.as_ref()),
        description: text(r.description.as_ref()).unwrap_or_default(),
        version: text(r.version.as_ref()).unwrap_or_default(),
        website_url: text(r.website_url.as_ref()),
        packages,
        remotes,
        problems,
    })
}

/// Validates one registry item (`{server, _meta}`; a bare `server.json` is taken as an
/// active server); `None` when it holds no server.
pub fn parse_listing(raw: &Value) -> Option<Listing> {
    let item: RawItem = serde_json::from_value(raw.clone()).ok()?;
    let status = item
        .meta
        .as_ref()
        .and_then(|m| m.get(OFFICIAL_META))
        .and_then(|o| text(o.get("status")))
        .unwrap_or_else(|| "active".into());
    let server = match &item.server {
        Some(_) => raw.get("server").and_then(parse_server)?,
        None => parse_server(raw)?,
    };
    Some(Listing { server, status })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unusable_parts_are_left_out_and_named() {
        let raw = json!({"server": {
            "name": "io.example/x", "version": 7,
            "packages": [{"registryType": "npm"}, {"registryType": "pypi", "identifier": "x"}],
            "remotes": [{"type": "sse"}, "junk"],
        }, "_meta": {OFFICIAL_META: {"status": "deprecated"}}});
        let l = parse_listing(&raw).unwrap();
        assert_eq!(l.status, "deprecated");
        assert!(!l.is_active());
        assert_eq!(l.server.version, "");
        assert_eq!(l.server.packages.len(), 1);
        assert_eq!(l.server.packages[0].transport, "stdio");
        assert!(l.server.remotes.is_empty());
        assert_eq!(l.server.problems.len(), 3, "{:?}", l.server.problems);
        assert!(l.server.problems[0].contains("npm package has no `identifier`"));
        assert!(parse_listing(&json!({"server": {"title": "no name"}})).is_none());
        assert!(parse_listing(&json!("text")).is_none());
    }

    #[test]
    fn long_text_is_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_TEXT);
        let s = parse_server(&json!({"name": "n", "description": long})).unwrap();
        assert!(s.description.len() <= MAX_TEXT);
        assert!(s.description.chars().all(|c| c == 'é'));
    }
}
