//! OAuth discovery for an MCP server (MCP authorization, 2025-11-25, with the
//! 2025-03-26 fallbacks):
//!
//! 1. Protected-resource metadata (RFC 9728): the 401's `resource_metadata`, else
//!    `/.well-known/oauth-protected-resource{path}` at the server origin, else
//!    `/.well-known/oauth-protected-resource`. Its `resource` must be the server URL
//!    (or a parent path of it on the same origin), else we refuse.
//! 2. Authorization-server metadata (RFC 8414) for `authorization_servers[0]`:
//!    `/.well-known/oauth-authorization-server{path}`, then OpenID configuration
//!    (both path forms), then the `authorization_servers[0]` URL itself.
//! 3. No protected-resource metadata at all (2025-03-26 servers): the server origin is
//!    the authorization server; its root metadata, else `/authorize`, `/token` and
//!    `/register` there.
//!
//! Every URL is fetched through the URL guard. Configured `authorizationUrl` and
//! `tokenUrl` win over what is discovered.

use serde_json::{Map, Value};
use url::Url;

use crate::challenge::BearerChallenge;
use crate::error::AuthError;
use crate::http::{Http, shown};

/// RFC 9728 protected-resource metadata (the fields we use).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceMetadata {
    /// Where it was found.
    pub url: String,
    pub resource: Option<String>,
    pub authorization_servers: Vec<String>,
    pub scopes_supported: Vec<String>,
}

/// How the authorization-server endpoints were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataSource {
    /// RFC 8414 / OpenID metadata document.
    Document,
    /// The 2025-03-26 default paths (`/authorize`, `/token`, `/register`).
    DefaultPaths,
    /// `oauth.authorizationUrl` / `oauth.tokenUrl`.
    Configured,
}

/// RFC 8414 authorization-server metadata (the fields we use).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerMetadata {
    pub issuer: String,
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
    pub revocation_endpoint: Option<String>,
    pub scopes_supported: Vec<String>,
    pub grant_types_supported: Option<Vec<String>>,
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    pub code_challenge_methods_supported: Option<Vec<String>>,
    pub client_id_metadata_document_supported: bool,
    pub authorization_response_iss_parameter_supported: bool,
    pub source: MetadataSource,
}

/// Everything discovery found for one server.
#[derive(Debug, Clone)]
pub struct Discovery {
    pub resource_metadata: Option<ResourceMetadata>,
    /// The RFC 8707 `resource` to request tokens for.
    pub resource: String,
    pub server: ServerMetadata,
    /// The server's challenge (scope hints).
    pub challenge: BearerChallenge,
}

impl Discovery {
    /// The scope to ask for: the challenge's, else the protected-resource metadata's
    /// `scopes_supported`, else none.
    pub fn default_scope(&self) -> Option<String> {
        if let Some(s) = self
            .challenge
            .scope
            .as_ref()
            .filter(|s| !s.trim().is_empty())
        {
            return Some(s.trim().to_string());
        }
        self.resource_metadata
            .as_ref()
            .map(|m| m.scopes_supported.join(" "))
            .filter(|s| !s.trim().is_empty())
    }
}

/// Configured endpoints that override discovery.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub authorization_url: Option<String>,
    pub token_url: Option<String>,
}

fn origin_of(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// `/.well-known/<name>` inserted before the path of `base` (RFC 8414 §3.1 form), or
/// appended when the path is empty.
fn well_known(base: &Url, name: &str) -> String {
    let path = base.path().trim_end_matches('/');
    format!("{}/.well-known/{name}{path}", origin_of(base))
}

/// Whether protected-resource metadata for `resource` may be used for `server_url`:
/// same origin, and the resource path is the server path or a parent of it.
pub fn resource_matches(resource: &str, server_url: &str) -> bool {
    let (Ok(r), Ok(s)) = (Url::parse(resource), Url::parse(server_url)) else {
        return false;
    };
    if r.origin() != s.origin() || r.fragment().is_some() {
        return false;
    }
    let rp = r.path().trim_end_matches('/');
    let sp = s.path().trim_end_matches('/');
    rp.is_empty() || sp == rp || sp.starts_with(&format!("{rp}/"))
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn opt_strings(v: Option<&Value>) -> Option<Vec<String>> {
    v.and_then(Value::as_array).map(|_| strings(v))
}

fn string(m: &Map<String, Value>, k: &str) -> Option<String> {
    m.get(k)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Parses an RFC 8414 document (`issuer` and `token_endpoint` required).
pub(crate) fn parse_server_metadata(
    m: &Map<String, Value>,
    source: MetadataSource,
) -> Result<ServerMetadata, String> {
    let token_endpoint = string(m, "token_endpoint").ok_or("it has no `token_endpoint`")?;
    let issuer = string(m, "issuer").ok_or("it has no `issuer`")?;
    Ok(ServerMetadata {
        issuer,
        authorization_endpoint: string(m, "authorization_endpoint"),
        token_endpoint,
        registration_endpoint: string(m, "registration_endpoint"),
        revocation_endpoint: string(m, "revocation_endpoint"),
        scopes_supported: strings(m.get("scopes_supported")),
        grant_types_supported: opt_strings(m.get("grant_types_supported")),
        token_endpoint_auth_methods_supported: opt_strings(
            m.get("token_endpoint_auth_methods_supported"),
        ),
        code_challenge_methods_supported: opt_strings(m.get("code_challenge_methods_supported")),
        client_id_metadata_document_supported: m
            .get("client_id_metadata_document_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        authorization_response_iss_parameter_supported: m
            .get("authorization_response_iss_parameter_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        source,
    })
}

/// `a` and `b` name the same issuer (a trailing slash aside).
fn same_issuer(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// GETs a JSON object; `Ok(None)` when the answer is not a 2xx JSON object (try the
/// next candidate). Guard and network errors are errors.
async fn fetch_object(
    http: &Http,
    what: &'static str,
    url: &str,
) -> Result<Option<Map<String, Value>>, AuthError> {
    let reply = http.get(what, url).await?;
    if !reply.is_success() {
        tracing::debug!(url = %shown(url), status = reply.status, "no {what} here");
        return Ok(None);
    }
    match reply.json_object() {
        Ok(m) => Ok(Some(m)),
        Err(why) => {
            tracing::debug!(url = %shown(url), "not {what}: {why}");
            Ok(None)
        }
    }
}

/// Finds the protected-resource metadata of `server_url`.
pub async fn resource_metadata(
    http: &Http,
    server_url: &str,
    challenge: &BearerChallenge,
    tried: &mut Vec<String>,
) -> Result<Option<ResourceMetadata>, AuthError> {
    const WHAT: &str = "protected-resource metadata";
    let base = Url::parse(server_url).map_err(|e| {
        AuthError::Config(format!("the server URL `{server_url}` is not valid: {e}"))
    })?;
    if let Some(given) = &challenge.resource_metadata {
        let url = base
            .join(given)
            .map_err(|e| AuthError::InvalidResponse {
                what: "the server's WWW-Authenticate header",
                url: shown(server_url),
                reason: format!("resource_metadata `{given}` is not a URL: {e}"),
            })?
            .to_string();
        tried.push(shown(&url));
        let reply = http.get(WHAT, &url).await?;
        if !reply.is_success() {
            return Err(AuthError::InvalidResponse {
                what: WHAT,
                url: shown(&url),
                reason: format!("HTTP {}", reply.status),
            });
        }
        let m = reply
            .json_object()
            .map_err(|reason| AuthError::InvalidResponse {
                what: WHAT,
                url: shown(&url),
                reason,
            })?;
        return Ok(Some(parse_resource_metadata(&m, url)));
    }
    let mut candidates = vec![well_known(&base, "oauth-protected-resource")];
    let root = format!("{}/.well-known/oauth-protected-resource", origin_of(&base));
    if !candidates.contains(&root) {
        candidates.push(root);
    }
    for url in candidates {
        tried.push(shown(&url));
        if let Some(m) = fetch_object(http, WHAT, &url).await? {
            return Ok(Some(parse_resource_metadata(&m, url)));
        }
    }
    Ok(None)
}

fn parse_resource_metadata(m: &Map<String, Value>, url: String) -> ResourceMetadata {
    ResourceMetadata {
        url,
        resource: string(m, "resource"),
        authorization_servers: strings(m.get("authorization_servers")),
        scopes_supported: strings(m.get("scopes_supported")),
    }
}

/// Finds the authorization-server metadata for issuer `issuer`.
async fn server_metadata(
    http: &Http,
    issuer: &str,
    from_prm: bool,
    tried: &mut Vec<String>,
) -> Result<Option<ServerMetadata>, AuthError> {
    const WHAT: &str = "authorization-server metadata";
    let base = Url::parse(issuer).map_err(|e| AuthError::InvalidResponse {
        what: WHAT,
        url: shown(issuer),
        reason: format!("the authorization server `{issuer}` is not a URL: {e}"),
    })?;
    let has_path = !base.path().trim_end_matches('/').is_empty();
    let mut candidates = vec![
        well_known(&base, "oauth-authorization-server"),
        well_known(&base, "openid-configuration"),
    ];
    if has_path {
        candidates.push(format!(
            "{}/.well-known/openid-configuration",
            base.as_str().trim_end_matches('/')
        ));
    }
    if from_prm {
        candidates.push(base.to_string());
    }
    for url in candidates {
        tried.push(shown(&url));
        let Some(m) = fetch_object(http, WHAT, &url).await? else {
            continue;
        };
        let meta = match parse_server_metadata(&m, MetadataSource::Document) {
            Ok(meta) => meta,
            Err(why) => {
                tracing::debug!(url = %shown(&url), "unusable {WHAT}: {why}");
                continue;
            }
        };
        if from_prm && !same_issuer(&meta.issuer, issuer) {
            return Err(AuthError::InvalidResponse {
                what: WHAT,
                url: shown(&url),
                reason: format!(
                    "its issuer `{}` is not the authorization server `{issuer}` the resource names (RFC 8414 §3.3)",
                    meta.issuer
                ),
            });
        }
        return Ok(Some(meta));
    }
    Ok(None)
}

/// Runs discovery for `server` at `server_url` after a challenge.
pub async fn discover(
    http: &Http,
    server: &str,
    server_url: &str,
    challenge: BearerChallenge,
    overrides: &Overrides,
) -> Result<Discovery, AuthError> {
    let mut tried = Vec::new();
    let prm = resource_metadata(http, server_url, &challenge, &mut tried).await?;
    let base = Url::parse(server_url).map_err(|e| {
        AuthError::Config(format!("the server URL `{server_url}` is not valid: {e}"))
    })?;
    let mut resource = server_url
        .split('#')
        .next()
        .unwrap_or(server_url)
        .to_string();
    let (issuer, from_prm) = match &prm {
        Some(p) => {
            if let Some(r) = &p.resource {
                if !resource_matches(r, server_url) {
                    return Err(AuthError::ResourceMismatch {
                        server: server.into(),
                        server_url: server_url.into(),
                        resource: r.clone(),
                    });
                }
                resource = r.clone();
            }
            match p.authorization_servers.first() {
                Some(a) => (a.clone(), true),
                None if overrides.token_url.is_some() => (origin_of(&base), false),
                None => {
                    return Err(AuthError::InvalidResponse {
                        what: "protected-resource metadata",
                        url: shown(&p.url),
                        reason: "it lists no `authorization_servers`".into(),
                    });
                }
            }
        }
        None => (origin_of(&base), false),
    };

    let found = server_metadata(http, &issuer, from_prm, &mut tried).await?;
    let mut meta = match found {
        Some(m) => m,
        None if prm.is_none() => {
            // 2025-03-26: default endpoints at the server's origin.
            let o = origin_of(&base);
            ServerMetadata {
                issuer: o.clone(),
                authorization_endpoint: Some(format!("{o}/authorize")),
                token_endpoint: format!("{o}/token"),
                registration_endpoint: Some(format!("{o}/register")),
                revocation_endpoint: None,
                scopes_supported: Vec::new(),
                grant_types_supported: None,
                token_endpoint_auth_methods_supported: None,
                code_challenge_methods_supported: None,
                client_id_metadata_document_supported: false,
                authorization_response_iss_parameter_supported: false,
                source: MetadataSource::DefaultPaths,
            }
        }
        None => match &overrides.token_url {
            Some(t) => ServerMetadata {
                issuer: issuer.clone(),
                authorization_endpoint: None,
                token_endpoint: t.clone(),
                registration_endpoint: None,
                revocation_endpoint: None,
                scopes_supported: Vec::new(),
                grant_types_supported: None,
                token_endpoint_auth_methods_supported: None,
                code_challenge_methods_supported: None,
                client_id_metadata_document_supported: false,
                authorization_response_iss_parameter_supported: false,
                source: MetadataSource::Configured,
            },
            None => {
                return Err(AuthError::NoMetadata {
                    server: server.into(),
                    server_url: server_url.into(),
                    tried: tried.join(", "),
                });
            }
        },
    };
    if let Some(a) = &overrides.authorization_url {
        meta.authorization_endpoint = Some(a.clone());
        meta.source = MetadataSource::Configured;
    }
    if let Some(t) = &overrides.token_url {
        meta.token_endpoint = t.clone();
        meta.source = MetadataSource::Configured;
    }
    Ok(Discovery {
        resource_metadata: prm,
        resource,
        server: meta,
        challenge,
    })
}

/// Endpoints from configuration alone (no discovery).
#[cfg(test)]
fn configured_only(server_url: &str, overrides: &Overrides) -> Option<Discovery> {
    let token = overrides.token_url.clone()?;
    let issuer = Url::parse(&token)
        .map(|u| origin_of(&u))
        .unwrap_or_else(|_| token.clone());
    Some(Discovery {
        resource_metadata: None,
        resource: server_url
            .split('#')
            .next()
            .unwrap_or(server_url)
            .to_string(),
        server: ServerMetadata {
            issuer,
            authorization_endpoint: overrides.authorization_url.clone(),
            token_endpoint: token,
            registration_endpoint: None,
            revocation_endpoint: None,
            scopes_supported: Vec::new(),
            grant_types_supported: None,
            token_endpoint_auth_methods_supported: None,
            code_challenge_methods_supported: None,
            client_id_metadata_document_supported: false,
            authorization_response_iss_parameter_supported: false,
            source: MetadataSource::Configured,
        },
        challenge: BearerChallenge::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_matching() {
        let s = "http://127.0.0.1:8000/mcp";
        assert!(resource_matches("http://127.0.0.1:8000/mcp", s));
        assert!(resource_matches("http://127.0.0.1:8000/mcp/", s));
        assert!(resource_matches("http://127.0.0.1:8000/", s));
        assert!(resource_matches("http://127.0.0.1:8000", s));
        assert!(resource_matches("HTTP://127.0.0.1:8000/mcp", s));
        assert!(resource_matches(
            "http://a.example/x",
            "http://a.example:80/x/y"
        ));
        assert!(!resource_matches("http://127.0.0.1:8001/mcp", s));
        assert!(!resource_matches("https://127.0.0.1:8000/mcp", s));
        assert!(!resource_matches("http://127.0.0.1:8000/other", s));
        assert!(!resource_matches("http://127.0.0.1:8000/mc", s));
        assert!(!resource_matches("http://evil.example/mcp", s));
        assert!(!resource_matches("not a url", s));
    }

    #[test]
    fn well_known_forms() {
        let u = Url::parse("https://as.example/tenant/1").unwrap();
        assert_eq!(
            well_known(&u, "oauth-authorization-server"),
            "https://as.example/.well-known/oauth-authorization-server/tenant/1"
        );
        let u = Url::parse("https://as.example/").unwrap();
        assert_eq!(
            well_known(&u, "oauth-protected-resource"),
            "https://as.example/.well-known/oauth-protected-resource"
        );
    }

    #[test]
    fn scope_choice() {
        let meta = configured_only(
            "http://s/mcp",
            &Overrides {
                token_url: Some("http://s/token".into()),
                ..Default::default()
            },
        )
        .unwrap();
        let mut d = meta;
        assert_eq!(d.default_scope(), None);
        d.resource_metadata = Some(ResourceMetadata {
            url: String::new(),
            resource: None,
            authorization_servers: vec![],
            scopes_supported: vec!["a".into(), "b".into()],
        });
        assert_eq!(d.default_scope().as_deref(), Some("a b"));
        d.challenge.scope = Some("c".into());
        assert_eq!(d.default_scope().as_deref(), Some("c"));
    }
}
