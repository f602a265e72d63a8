//! What in a server entry reaches beyond its own text: `${VAR}` references, which
//! are expanded from the environment, and references to local files or ambient
//! credentials, which are read. Both are honoured only in settings the user wrote
//! (the user file, a trusted project file, a `--config` file). A writer that takes
//! values from someone else — the web API — stores values literally with
//! [`escape_vars`] and refuses new [`local_references`].

use serde_json::Value;

/// The fields whose string values are expanded (see [`crate::expand_vars`]): the
/// top-level strings and the values of the maps and lists.
pub const EXPANDED_FIELDS: &[&str] =
    &["command", "args", "env", "cwd", "url", "httpUrl", "headers"];

/// `value` written so that expansion gives it back unchanged (`$` → `$$`).
pub fn escape_vars(value: &str) -> String {
    value.replace('$', "$$")
}

/// A reference to something local that Switchboard would read or use for an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalReference {
    /// The field, e.g. `oauth.idp.idToken`.
    pub field: &'static str,
    /// Its value as written.
    pub value: String,
    /// What is read, for messages ("a local file", "Google credentials").
    pub what: &'static str,
}

/// Every local-file or ambient-credential reference in an entry as written:
/// `oauth.idp.idToken: "file:…"`, `oauth.privateKeyFile`, and an `authProviderType`
/// that sends this machine's Google credentials.
pub fn local_references(entry: &Value) -> Vec<LocalReference> {
    let mut out = Vec::new();
    let oauth = entry.get("oauth");
    if let Some(v) = oauth
        .and_then(|o| o.get("idp"))
        .and_then(|i| i.get("idToken"))
        .and_then(Value::as_str)
        .filter(|v| v.trim_start().starts_with("file:"))
    {
        out.push(LocalReference {
            field: "oauth.idp.idToken",
            value: v.to_string(),
            what: "a local file",
        });
    }
    if let Some(v) = oauth
        .and_then(|o| o.get("privateKeyFile"))
        .filter(|v| !v.is_null())
    {
        out.push(LocalReference {
            field: "oauth.privateKeyFile",
            value: v.as_str().map_or_else(|| v.to_string(), str::to_string),
            what: "a local file",
        });
    }
    if let Some(v) = entry
        .get("authProviderType")
        .and_then(Value::as_str)
        .filter(|v| matches!(*v, "google_credentials" | "service_account_impersonation"))
    {
        out.push(LocalReference {
            field: "authProviderType",
            value: v.to_string(),
            what: "this machine's Google credentials",
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expand_vars;
    use serde_json::json;

    #[test]
    fn escaped_values_expand_to_themselves() {
        let env = |_: &str| Some("SECRET".to_string());
        for v in [
            "Bearer ${GITHUB_TOKEN}",
            "$HOME/x",
            "a$$b",
            "5$",
            "${X:-d}",
            "plain",
        ] {
            assert_eq!(expand_vars(&escape_vars(v), &env).unwrap(), v, "{v}");
        }
    }

    #[test]
    fn finds_local_references() {
        let e = json!({
            "httpUrl": "https://x",
            "authProviderType": "google_credentials",
            "oauth": {"privateKeyFile": "/k.pem", "idp": {"idToken": " file:/etc/passwd"}}
        });
        let fields: Vec<&str> = local_references(&e).iter().map(|r| r.field).collect();
        assert_eq!(
            fields,
            [
                "oauth.idp.idToken",
                "oauth.privateKeyFile",
                "authProviderType"
            ]
        );
        let e = json!({"oauth": {"idp": {"idToken": "eyJ.literal.token"}}, "authProviderType": "dynamic_discovery"});
        assert!(local_references(&e).is_empty());
    }
}
