//! OpenID Provider discovery (OpenID Connect Discovery 1.0 §4): GET
//! `{issuer}/.well-known/openid-configuration` through the guard (capped body, time
//! limit), read it with the crate's RFC 8414 reader, then validate it into
//! [`ProviderMetadata`]: the published `issuer` must be the configured one, and the
//! authorization, token and JWKS endpoints must be there. It must not fetch the keys.
//! The issuer must be `https` (`http` only on a loopback host); whether it promises RFC
//! 9207 `iss` in authorization responses is kept, so a callback without it is refused.

use std::time::Duration;

use serde_json::Value;
use url::Url;

use super::error::OidcError;
use crate::discovery::{MetadataSource, parse_server_metadata};
use crate::error::AuthError;
use crate::http::{Http, shown};

/// What the OpenID configuration says, validated.
#[derive(Debug, Clone)]
pub(crate) struct ProviderMetadata {
    /// The issuer identifier exactly as published (ID tokens' `iss` must equal it).
    pub issuer: String,
    pub authorization_endpoint: Url,
    pub token_endpoint: String,
    pub jwks_uri: Url,
    /// `token_endpoint_auth_methods_supported`, when listed.
    pub auth_methods: Option<Vec<String>>,
    /// Whether the provider promises RFC 9207 `iss` in authorization responses.
    pub iss_parameter: bool,
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// The published issuer is the configured one: identical text, but for the `/` that
/// URL parsing adds to an empty path.
fn same_issuer(configured: &Url, published: &str) -> bool {
    let c = configured.as_str();
    published == c || (configured.path() == "/" && published == c.trim_end_matches('/'))
}

/// Fetches and validates the OpenID configuration of `issuer`.
pub(crate) async fn fetch(
    http: &Http,
    issuer: &Url,
    limit: Duration,
) -> Result<ProviderMetadata, AuthError> {
    if issuer.query().is_some() || issuer.fragment().is_some() {
        return Err(OidcError::Config(
            "the issuer URL must have no query or fragment (OpenID Discovery §2)".into(),
        )
        .into());
    }
    if !(issuer.scheme() == "https" || (issuer.scheme() == "http" && is_loopback(issuer))) {
        return Err(OidcError::InsecureIssuer {
            issuer: shown(issuer.as_str()),
        }
        .into());
    }
    let url = format!(
        "{}/.well-known/openid-configuration",
        issuer.as_str().trim_end_matches('/')
    );
    let bad = |reason: String| {
        AuthError::from(OidcError::Discovery {
            url: shown(&url),
            reason,
        })
    };
    const WHAT: &str = "the OpenID configuration";
    let reply = super::within(limit, WHAT, &url, http.get(WHAT, &url)).await?;
    if !reply.is_success() {
        return Err(bad(format!("HTTP {}", reply.status)));
    }
    let doc = reply.json_object().map_err(&bad)?;
    let meta =
        parse_server_metadata(&doc, MetadataSource::Document).map_err(|r| bad(r.to_string()))?;
    if !same_issuer(issuer, &meta.issuer) {
        return Err(OidcError::IssuerMismatch {
            url: shown(&url),
            configured: issuer.to_string(),
            published: meta.issuer,
        }
        .into());
    }
    let endpoint = |name: &str, value: Option<&str>| -> Result<Url, AuthError> {
        let value = value.ok_or_else(|| bad(format!("it has no `{name}`")))?;
        Url::parse(value).map_err(|_| bad(format!("its `{name}` is not a URL")))
    };
    let authorization_endpoint = endpoint(
        "authorization_endpoint",
        meta.authorization_endpoint.as_deref(),
    )?;
    // The browser is sent there: the guard must allow it like any URL we fetch.
    http.check(
        "the authorization endpoint",
        authorization_endpoint.as_str(),
    )
    .await?;
    endpoint("token_endpoint", Some(&meta.token_endpoint))?;
    let jwks_uri = endpoint("jwks_uri", doc.get("jwks_uri").and_then(Value::as_str))?;
    if let Some(methods) = &meta.code_challenge_methods_supported
        && !methods.iter().any(|m| m == "S256")
    {
        return Err(bad(
            "it does not offer PKCE with S256 (`code_challenge_methods_supported`)".into(),
        ));
    }
    Ok(ProviderMetadata {
        issuer: meta.issuer,
        authorization_endpoint,
        token_endpoint: meta.token_endpoint,
        jwks_uri,
        auth_methods: meta.token_endpoint_auth_methods_supported,
        iss_parameter: meta.authorization_response_iss_parameter_supported,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issuer_identity_forgives_only_the_added_slash() {
        let u = |s: &str| Url::parse(s).unwrap();
        assert!(same_issuer(
            &u("https://accounts.google.com"),
            "https://accounts.google.com"
        ));
        assert!(same_issuer(
            &u("https://accounts.google.com/"),
            "https://accounts.google.com/"
        ));
        assert!(same_issuer(
            &u("https://a.example/realms/x"),
            "https://a.example/realms/x"
        ));
        assert!(!same_issuer(
            &u("https://a.example/realms/x"),
            "https://a.example/realms/x/"
        ));
        assert!(!same_issuer(&u("https://a.example"), "https://A.example"));
        assert!(!same_issuer(
            &u("https://a.example"),
            "https://a.example:443/x"
        ));
        assert!(!same_issuer(&u("https://a.example"), "http://a.example"));
    }

    #[test]
    fn http_only_on_loopback() {
        let u = |s: &str| Url::parse(s).unwrap();
        assert!(is_loopback(&u("http://127.0.0.1:8080")));
        assert!(is_loopback(&u("http://[::1]:8080")));
        assert!(is_loopback(&u("http://LOCALHOST")));
        assert!(!is_loopback(&u("http://10.0.0.1")));
        assert!(!is_loopback(&u("http://localhost.evil.example")));
    }
}
