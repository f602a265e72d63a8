//! Step one of parsing: permissive serde shapes of `settings.json`.
//!
//! Every field is optional and unknown keys are collected in `extra` (and kept in the
//! file when Switchboard writes it). Step two ([`crate::server`]) validates these into
//! [`crate::ServerConfig`].

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::env_policy::EnvPolicy;

/// Known keys of a server entry (for "did you mean" suggestions).
pub(crate) const SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "httpUrl",
    "type",
    "headers",
    "timeout",
    "startupTimeout",
    "maxMessageBytes",
    "trust",
    "includeTools",
    "excludeTools",
    "oauth",
    "authProviderType",
    "description",
    "disabled",
    "envPolicy",
    "pinTools",
];

/// Known keys of an `oauth` block.
pub(crate) const OAUTH_KEYS: &[&str] = &[
    "enabled",
    "clientId",
    "clientSecret",
    "authorizationUrl",
    "tokenUrl",
    "scopes",
    "redirectUri",
    "tokenParamName",
    "audiences",
    "grantType",
    "tokenEndpointAuthMethod",
    "privateKeyFile",
    "signingAlgorithm",
    "idp",
];

/// Known keys of an `oauth.idp` block.
pub(crate) const IDP_KEYS: &[&str] = &["issuer", "tokenEndpoint", "clientId", "idToken"];

/// Known keys of the top-level `mcp` block.
pub(crate) const MCP_KEYS: &[&str] = &["allowed", "excluded", "serverCommand"];

/// How a server authenticates (`authProviderType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthProviderType {
    /// Discover OAuth from the server's metadata after a 401 (the default).
    #[default]
    DynamicDiscovery,
    /// Google Application Default Credentials.
    GoogleCredentials,
    /// Google service account impersonation.
    ServiceAccountImpersonation,
}

/// An identity provider used for token exchange (`oauth.idp`, Switchboard's own).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdpConfig {
    /// Issuer URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// Token endpoint URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
    /// Client id at the identity provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// An ID token (or a reference to one) to exchange.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id_token: Option<String>,
    /// Unknown keys, kept.
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

/// A server's `oauth` block. Every field is optional; the OAuth layer decides what
/// it needs (Gemini CLI's fields plus Switchboard's `grantType`,
/// `tokenEndpointAuthMethod`, `privateKeyFile`, `signingAlgorithm` and `idp`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthConfig {
    /// Enable OAuth for this server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Client id (optional with dynamic registration).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Client secret (optional for public clients).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// Authorization endpoint (discovered if omitted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authorization_url: Option<String>,
    /// Token endpoint (discovered if omitted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_url: Option<String>,
    /// Scopes to request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// Redirect URI (default `http://localhost:7777/oauth/callback`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    /// Query parameter name for tokens in SSE URLs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_param_name: Option<String>,
    /// Audiences.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audiences: Option<Vec<String>>,
    /// Grant type (e.g. `authorization_code`, `client_credentials`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant_type: Option<String>,
    /// Token endpoint auth method (e.g. `client_secret_basic`, `private_key_jwt`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_endpoint_auth_method: Option<String>,
    /// Private key file for `private_key_jwt`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private_key_file: Option<String>,
    /// JWS algorithm for `private_key_jwt`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signing_algorithm: Option<String>,
    /// Identity provider for token exchange.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idp: Option<IdpConfig>,
    /// Unknown keys, kept.
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

/// One `mcpServers.<name>` entry as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RawServer {
    pub command: Option<String>,
    pub args: Option<Vec<String>>,
    pub env: Option<IndexMap<String, String>>,
    pub cwd: Option<String>,
    pub url: Option<String>,
    pub http_url: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub headers: Option<IndexMap<String, String>>,
    pub timeout: Option<u64>,
    pub startup_timeout: Option<u64>,
    pub max_message_bytes: Option<u64>,
    pub trust: Option<bool>,
    pub include_tools: Option<Vec<String>>,
    pub exclude_tools: Option<Vec<String>>,
    pub oauth: Option<OAuthConfig>,
    pub auth_provider_type: Option<AuthProviderType>,
    pub description: Option<String>,
    pub disabled: Option<bool>,
    pub env_policy: Option<EnvPolicy>,
    pub pin_tools: Option<bool>,
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

/// The top-level `mcp` block.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RawMcp {
    pub allowed: Option<Vec<String>>,
    pub excluded: Option<Vec<String>>,
    pub server_command: Option<String>,
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

/// Parses one server entry. On failure the message names the offending field
/// (`mcpServers.<name>.<field>: …`) and the file.
pub(crate) fn parse_server(
    file: &std::path::Path,
    name: &str,
    value: &Value,
) -> Result<RawServer, String> {
    let Value::Object(map) = value else {
        return Err(format!(
            "{}: mcpServers.{name}: expected an object like {{\"command\": \"...\"}} or {{\"httpUrl\": \"...\"}}, found {}",
            file.display(),
            type_name(value)
        ));
    };
    match serde_json::from_value::<RawServer>(value.clone()) {
        Ok(raw) => Ok(raw),
        Err(whole) => {
            // Find the field that failed, to name it.
            for (key, v) in map {
                let mut one = serde_json::Map::new();
                one.insert(key.clone(), v.clone());
                if let Err(e) = serde_json::from_value::<RawServer>(Value::Object(one)) {
                    return Err(format!(
                        "{}: mcpServers.{name}.{key}: {}",
                        file.display(),
                        field_hint(key, &e.to_string())
                    ));
                }
            }
            Err(format!("{}: mcpServers.{name}: {whole}", file.display()))
        }
    }
}

fn field_hint(key: &str, err: &str) -> String {
    let hint = match key {
        "args" | "includeTools" | "excludeTools" => " (expected a list of strings)",
        "env" | "headers" => " (expected an object of string values)",
        "timeout" | "startupTimeout" => " (expected a whole number of milliseconds)",
        "maxMessageBytes" => " (expected a whole number of bytes, e.g. 16777216 for 16 MiB)",
        "trust" | "disabled" | "pinTools" => " (expected true or false)",
        "envPolicy" => " (use \"filtered\", \"inherit\" or \"minimal\")",
        "authProviderType" => {
            " (use \"dynamic_discovery\", \"google_credentials\" or \"service_account_impersonation\")"
        }
        _ => "",
    };
    format!("{err}{hint}")
}

pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    #[test]
    fn parses_all_fields_and_keeps_extra() {
        let v = json!({
            "command": "node", "args": ["a"], "env": {"A": "1"}, "cwd": ".",
            "type": "stdio", "timeout": 5000, "startupTimeout": 100, "trust": true,
            "includeTools": ["x"], "excludeTools": ["y"],
            "oauth": {"enabled": true, "clientId": "c", "scopes": ["s"], "idp": {"issuer": "i", "zzz": 1}, "weird": 2},
            "authProviderType": "google_credentials", "description": "d",
            "disabled": false, "envPolicy": "inherit", "myToolKey": {"x": 1}
        });
        let raw = parse_server(Path::new("f"), "s", &v).unwrap();
        assert_eq!(raw.command.as_deref(), Some("node"));
        assert_eq!(raw.timeout, Some(5000));
        assert_eq!(raw.env_policy, Some(EnvPolicy::Inherit));
        assert_eq!(
            raw.auth_provider_type,
            Some(AuthProviderType::GoogleCredentials)
        );
        let oauth = raw.oauth.unwrap();
        assert_eq!(oauth.client_id.as_deref(), Some("c"));
        assert_eq!(oauth.extra.get("weird"), Some(&json!(2)));
        assert_eq!(oauth.idp.unwrap().extra.get("zzz"), Some(&json!(1)));
        assert_eq!(raw.extra.get("myToolKey"), Some(&json!({"x": 1})));
    }

    #[test]
    fn wrong_type_names_the_field() {
        let v = json!({"command": "node", "args": "a b"});
        let e = parse_server(Path::new("/p/settings.json"), "srv", &v).unwrap_err();
        assert!(
            e.starts_with("/p/settings.json: mcpServers.srv.args: "),
            "{e}"
        );
        assert!(e.contains("list of strings"), "{e}");
        let v = json!({"httpUrl": "http://x", "timeout": "10s"});
        let e = parse_server(Path::new("f"), "srv", &v).unwrap_err();
        assert!(e.contains("mcpServers.srv.timeout"), "{e}");
        let e = parse_server(Path::new("f"), "srv", &json!("node")).unwrap_err();
        assert!(e.contains("expected an object"), "{e}");
        let e = parse_server(
            Path::new("f"),
            "srv",
            &json!({"command": "x", "envPolicy": "all"}),
        )
        .unwrap_err();
        assert!(
            e.contains("mcpServers.srv.envPolicy") && e.contains("minimal"),
            "{e}"
        );
    }
}
