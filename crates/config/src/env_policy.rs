//! The environment a stdio server process receives.
//!
//! # The rule
//!
//! Every stdio server gets an environment built from Switchboard's own environment
//! according to its `envPolicy` (`"filtered"` by default, `"inherit"` or `"minimal"`),
//! **plus every variable listed in the server's `env`**, which is always passed and
//! overrides an inherited value of the same name:
//!
//! - [`EnvPolicy::Filtered`] (default, like Gemini CLI): the whole parent environment
//!   except variables that look secret — the name contains (any case) `TOKEN`,
//!   `SECRET`, `PASSWORD`, `PASSWD`, `KEY`, `AUTH`, `CREDENTIAL`, `PRIVATE`, `CERT`,
//!   `COOKIE` or `SESSION`, or the value looks like a PEM block (`-----BEGIN`) or a
//!   JWT — except that proxy and CA variables are always kept (`HTTP_PROXY`,
//!   `HTTPS_PROXY`, `NO_PROXY`, `ALL_PROXY` in any case, `SSL_CERT_FILE`,
//!   `SSL_CERT_DIR`, `NODE_EXTRA_CA_CERTS`, `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`).
//! - [`EnvPolicy::Inherit`]: the whole parent environment.
//! - [`EnvPolicy::Minimal`] (like Codex): only `HOME`, `LOGNAME`, `PATH`, `SHELL`,
//!   `USER`, `LANG`, `LC_ALL`, `TERM`, `TMPDIR`, `TZ` and the proxy/CA variables above.
//!
//! Pass a secret to one server explicitly: `"env": {"API_KEY": "$MY_API_KEY"}`.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// Which of Switchboard's environment variables a stdio server inherits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnvPolicy {
    /// Everything except variables that look secret (the default).
    #[default]
    Filtered,
    /// Everything.
    Inherit,
    /// A short allow-list (home, path, locale, terminal, proxy and CA variables).
    Minimal,
}

const SECRET_NAME_PARTS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "KEY",
    "AUTH",
    "CREDENTIAL",
    "PRIVATE",
    "CERT",
    "COOKIE",
    "SESSION",
];

const PROXY_AND_CA: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
];

const MINIMAL: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ",
];

fn is_proxy_or_ca(name: &str) -> bool {
    PROXY_AND_CA.iter().any(|p| p.eq_ignore_ascii_case(name))
}

fn name_looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAME_PARTS.iter().any(|p| upper.contains(p))
}

fn is_base64url(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'=')
}

/// Whether a value looks like a PEM block or a JWT.
fn value_looks_secret(value: &str) -> bool {
    if value.contains("-----BEGIN ") {
        return true;
    }
    let v = value.trim();
    let parts: Vec<&str> = v.split('.').collect();
    v.starts_with("eyJ") && parts.len() == 3 && parts.iter().take(2).all(|p| is_base64url(p))
}

/// Whether the `filtered` policy drops this variable.
pub fn is_filtered_out(name: &str, value: &str) -> bool {
    if is_proxy_or_ca(name) {
        return false;
    }
    name_looks_secret(name) || value_looks_secret(value)
}

/// Builds a stdio server's environment.
///
/// # The rule
///
/// Every stdio server gets an environment built from Switchboard's own environment
/// according to its `envPolicy` (`"filtered"` by default, `"inherit"` or `"minimal"`),
/// **plus every variable listed in the server's `env`**, which is always passed and
/// overrides an inherited value of the same name:
///
/// - [`EnvPolicy::Filtered`] (default, like Gemini CLI): the whole parent environment
///   except variables that look secret — the name contains (any case) `TOKEN`,
///   `SECRET`, `PASSWORD`, `PASSWD`, `KEY`, `AUTH`, `CREDENTIAL`, `PRIVATE`, `CERT`,
///   `COOKIE` or `SESSION`, or the value looks like a PEM block (`-----BEGIN`) or a
///   JWT — except that proxy and CA variables are always kept (`HTTP_PROXY`,
///   `HTTPS_PROXY`, `NO_PROXY`, `ALL_PROXY` in any case, `SSL_CERT_FILE`,
///   `SSL_CERT_DIR`, `NODE_EXTRA_CA_CERTS`, `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`).
/// - [`EnvPolicy::Inherit`]: the whole parent environment.
/// - [`EnvPolicy::Minimal`] (like Codex): only `HOME`, `LOGNAME`, `PATH`, `SHELL`,
///   `USER`, `LANG`, `LC_ALL`, `TERM`, `TMPDIR`, `TZ` and the proxy/CA variables above.
///
/// Pass a secret to one server explicitly: `"env": {"API_KEY": "$MY_API_KEY"}`.
///
///
/// The parent's order is kept; configured entries replace inherited ones in place
/// and new ones are appended in configuration order.
pub fn child_env(
    policy: EnvPolicy,
    parent: impl Iterator<Item = (String, String)>,
    configured: &IndexMap<String, String>,
) -> Vec<(String, String)> {
    let mut out: IndexMap<String, String> = IndexMap::new();
    for (name, value) in parent {
        let keep = match policy {
            EnvPolicy::Inherit => true,
            EnvPolicy::Filtered => !is_filtered_out(&name, &value),
            EnvPolicy::Minimal => MINIMAL.contains(&name.as_str()) || is_proxy_or_ca(&name),
        };
        if keep {
            out.insert(name, value);
        }
    }
    for (name, value) in configured {
        out.insert(name.clone(), value.clone());
    }
    out.into_iter().collect()
}

/// One line describing the policy, for `mcp get`.
pub fn describe_env_policy(policy: EnvPolicy) -> &'static str {
    match policy {
        EnvPolicy::Filtered => {
            "filtered: inherits the environment minus secret-looking variables (names with TOKEN, KEY, SECRET, PASSWORD, AUTH…; PEM/JWT values); proxy/CA variables kept; `env` entries added"
        }
        EnvPolicy::Inherit => "inherit: inherits the whole environment; `env` entries added",
        EnvPolicy::Minimal => {
            "minimal: only HOME, LOGNAME, PATH, SHELL, USER, LANG, LC_ALL, TERM, TMPDIR, TZ and proxy/CA variables; `env` entries added"
        }
    }
}

impl std::fmt::Display for EnvPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EnvPolicy::Filtered => "filtered",
            EnvPolicy::Inherit => "inherit",
            EnvPolicy::Minimal => "minimal",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl";

    fn parent() -> Vec<(String, String)> {
        [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("GITHUB_TOKEN", "ghp_x"),
            ("openai_api_key", "sk-1"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("DB_PASSWORD", "p"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/c.json"),
            ("https_proxy", "http://proxy:3128"),
            ("NO_PROXY", "localhost"),
            ("SSL_CERT_FILE", "/etc/ca.pem"),
            ("NODE_EXTRA_CA_CERTS", "/etc/extra.pem"),
            ("REQUESTS_CA_BUNDLE", "/etc/b.pem"),
            ("SOME_PEM", "-----BEGIN PRIVATE KEY-----\nabc"),
            ("SOME_JWT", JWT),
            ("EDITOR", "vim"),
            ("LANG", "C.UTF-8"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
    }

    fn names(v: &[(String, String)]) -> Vec<&str> {
        v.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn filtered_drops_secrets_keeps_proxy_and_ca() {
        let out = child_env(EnvPolicy::Filtered, parent().into_iter(), &IndexMap::new());
        assert_eq!(
            names(&out),
            vec![
                "PATH",
                "HOME",
                "https_proxy",
                "NO_PROXY",
                "SSL_CERT_FILE",
                "NODE_EXTRA_CA_CERTS",
                "REQUESTS_CA_BUNDLE",
                "EDITOR",
                "LANG"
            ]
        );
    }

    #[test]
    fn inherit_keeps_everything() {
        let out = child_env(EnvPolicy::Inherit, parent().into_iter(), &IndexMap::new());
        assert_eq!(out, parent());
    }

    #[test]
    fn minimal_is_an_allow_list() {
        let out = child_env(EnvPolicy::Minimal, parent().into_iter(), &IndexMap::new());
        assert_eq!(
            names(&out),
            vec![
                "PATH",
                "HOME",
                "https_proxy",
                "NO_PROXY",
                "SSL_CERT_FILE",
                "NODE_EXTRA_CA_CERTS",
                "REQUESTS_CA_BUNDLE",
                "LANG"
            ]
        );
    }

    #[test]
    fn configured_entries_always_added_and_override() {
        let mut cfg = IndexMap::new();
        cfg.insert("GITHUB_TOKEN".to_string(), "explicit".to_string());
        cfg.insert("PATH".to_string(), "/opt/bin".to_string());
        cfg.insert("NEW".to_string(), "1".to_string());
        for policy in [EnvPolicy::Filtered, EnvPolicy::Minimal, EnvPolicy::Inherit] {
            let out = child_env(policy, parent().into_iter(), &cfg);
            let get = |k: &str| out.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
            assert_eq!(get("GITHUB_TOKEN"), Some("explicit"), "{policy}");
            assert_eq!(get("PATH"), Some("/opt/bin"), "{policy}");
            assert_eq!(get("NEW"), Some("1"), "{policy}");
            assert_eq!(out[0].0, "PATH", "order kept for {policy}");
        }
    }

    #[test]
    fn secret_value_detection() {
        assert!(value_looks_secret(JWT));
        assert!(value_looks_secret("-----BEGIN RSA PRIVATE KEY-----"));
        assert!(!value_looks_secret("eyJ.not"));
        assert!(!value_looks_secret("hello.world.foo"));
        assert!(!is_filtered_out("ALL_PROXY", "socks5://x"));
        assert!(is_filtered_out("X_AUTH", "v"));
    }

    #[test]
    fn policy_parses_and_describes() {
        let p: EnvPolicy = serde_json::from_str("\"minimal\"").unwrap();
        assert_eq!(p, EnvPolicy::Minimal);
        assert!(serde_json::from_str::<EnvPolicy>("\"all\"").is_err());
        assert!(describe_env_policy(EnvPolicy::Filtered).starts_with("filtered"));
        assert_eq!(EnvPolicy::default(), EnvPolicy::Filtered);
    }
}
