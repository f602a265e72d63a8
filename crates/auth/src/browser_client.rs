//! Discovery for a login the browser runs itself (the web app's `mcp-test`, GemiHub's
//! `oauthDiscovery` contract): after a server's 401, everything a page needs to start
//! an authorization-code login.
//!
//! 1. Protected-resource metadata (the 401's `resource_metadata`, else the well-known
//!    paths), then the authorization server's metadata ([`crate::discovery`]); the
//!    resource must match the server.
//! 2. The client: a configured `oauth.clientId`, else RFC 7591 dynamic registration
//!    (a public client for `redirect_uri`) when the server has a
//!    `registration_endpoint`, else (or when registration is refused)
//!    [`FALLBACK_CLIENT_ID`].
//! 3. The authorization and token endpoints are checked against the URL guard (the
//!    browser will open the first).
//!
//! Every request goes through the guard with a time limit. The answer holds no
//! secret: a client secret a registration may return is not passed on.

use serde::Serialize;

use crate::challenge::BearerChallenge;
use crate::discovery::{Overrides, discover};
use crate::error::AuthError;
use crate::http::Http;
use crate::token::register;

/// The client id offered when the authorization server has no registration endpoint
/// or refuses registration (GemiHub offers its own name the same way).
pub const FALLBACK_CLIENT_ID: &str = "switchboard";

/// The client settings a page starts a login with (`oauthDiscovery.config`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrowserClientConfig {
    pub client_id: String,
    pub authorization_url: String,
    pub token_url: String,
    pub scopes: Vec<String>,
    /// The RFC 8707 resource, when the server published protected-resource metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

/// GemiHub's `oauthDiscovery` object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthDiscovery {
    pub config: BrowserClientConfig,
    /// The authorization server's registration endpoint, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registration_url: Option<String>,
    /// The authorization server's issuer identifier (RFC 8414 `issuer`), which an
    /// authorization response's `iss` must equal (RFC 9207). Not sent to the page.
    #[serde(skip)]
    pub issuer: String,
    /// The metadata says `authorization_response_iss_parameter_supported`: a response
    /// without `iss` is refused. Not sent to the page.
    #[serde(skip)]
    pub iss_parameter_supported: bool,
}

/// What is already configured for the server (a saved entry's `oauth`).
#[derive(Debug, Clone, Default)]
pub struct BrowserClientOptions {
    /// `oauth.clientId`: used as is, no registration.
    pub client_id: Option<String>,
    /// `oauth.scopes`: asked for instead of the discovered scope.
    pub scopes: Option<Vec<String>>,
    /// `oauth.authorizationUrl` / `oauth.tokenUrl`.
    pub overrides: Overrides,
}

pub(crate) async fn browser_client(
    http: &Http,
    server: &str,
    server_url: &str,
    www_authenticate: Option<&str>,
    redirect_uri: &str,
    options: &BrowserClientOptions,
) -> Result<OAuthDiscovery, AuthError> {
    let challenge = BearerChallenge::parse(www_authenticate.unwrap_or(""));
    let d = discover(http, server, server_url, challenge, &options.overrides).await?;
    let meta = &d.server;
    let authorization_url = meta.authorization_endpoint.clone().ok_or_else(|| {
        AuthError::Config(format!(
            "the authorization server {} lists no `authorization_endpoint`: set `mcpServers.{server}.oauth.authorizationUrl`",
            meta.issuer
        ))
    })?;
    http.check("the authorization endpoint", &authorization_url)
        .await?;
    http.check("the token endpoint", &meta.token_endpoint)
        .await?;
    let scopes: Vec<String> = match options.scopes.as_ref().filter(|s| !s.is_empty()) {
        Some(s) => s.clone(),
        None => d
            .default_scope()
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
    };
    let registration_url = meta.registration_endpoint.clone();
    let client_id = match (&options.client_id, &registration_url) {
        (Some(id), _) => id.clone(),
        (None, Some(reg)) => {
            let scope = (!scopes.is_empty()).then(|| scopes.join(" "));
            match register(http, reg, redirect_uri, scope.as_deref()).await {
                Ok(r) => r.client_id,
                Err(e) => {
                    tracing::info!(
                        server,
                        "dynamic client registration failed ({e}); offering the client id `{FALLBACK_CLIENT_ID}`"
                    );
                    FALLBACK_CLIENT_ID.to_string()
                }
            }
        }
        (None, None) => FALLBACK_CLIENT_ID.to_string(),
    };
    Ok(OAuthDiscovery {
        config: BrowserClientConfig {
            client_id,
            authorization_url,
            token_url: meta.token_endpoint.clone(),
            scopes,
            resource: d.resource_metadata.as_ref().map(|_| d.resource.clone()),
        },
        registration_url,
        issuer: meta.issuer.clone(),
        iss_parameter_supported: meta.authorization_response_iss_parameter_supported,
    })
}
