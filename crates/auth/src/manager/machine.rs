//! Tokens from the grants that need no user: `client_credentials`, the enterprise
//! jwt-bearer grant (leg 1: an ID-JAG from the configured identity provider), and
//! Google Application Default Credentials.

use serde_json::Map;

use crate::challenge::BearerChallenge;
use crate::error::AuthError;
use crate::google::{DEFAULT_GOOGLE_SCOPES, fetch_token, load_adc};
use crate::http::shown;
use crate::store::{StoredLogin, TokenSet, now_ms};
use crate::token::{
    AuthMethod, ClientCreds, JWT_BEARER_GRANT, TOKEN_EXCHANGE_GRANT, TokenResponse,
    choose_auth_method, request_token,
};

use super::{AuthManager, Grant, ServerAuth, lock};

/// The ID-JAG token type (draft-ietf-oauth-identity-assertion-authz-grant).
const ID_JAG_TYPE: &str = "urn:ietf:params:oauth:token-type:id-jag";
const ID_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id_token";

impl AuthManager {
    pub(super) fn adc(&self) -> Result<crate::google::Adc, AuthError> {
        let path = lock(&self.inner.adc_path).clone();
        load_adc(path).map(|(_, a)| a)
    }

    /// A token from a grant that needs no user.
    pub(super) async fn machine_login(
        &self,
        sa: &ServerAuth,
        challenge: Option<BearerChallenge>,
        scope_override: Option<String>,
    ) -> Result<StoredLogin, AuthError> {
        let grant = sa.grant()?;
        let now = now_ms();
        let base = |resp: TokenResponse,
                    client_id: Option<String>,
                    client_secret: Option<String>,
                    method: Option<AuthMethod>,
                    token_url: String,
                    resource: Option<String>,
                    issuer: Option<String>,
                    requested: Option<String>| StoredLogin {
            server_name: sa.name.clone(),
            token: TokenSet {
                expires_at: resp.expires_at(now),
                access_token: resp.access_token,
                refresh_token: resp.refresh_token,
                token_type: "Bearer".into(),
                scope: resp.scope.or(requested),
            },
            client_id,
            client_secret,
            token_url: Some(token_url),
            mcp_server_url: sa.url.clone(),
            updated_at: now,
            grant_type: Some(grant.as_str().into()),
            token_endpoint_auth_method: method.map(|m| m.as_str().to_string()),
            resource,
            issuer,
            registration_url: None,
            extra: Map::new(),
        };
        match grant {
            Grant::AuthorizationCode => Err(AuthError::NeedsLogin {
                server: sa.name.clone(),
            }),
            Grant::Google => {
                let adc = self.adc()?;
                let scopes: Vec<String> = match &sa.oauth.scopes {
                    Some(s) if !s.is_empty() => s.clone(),
                    _ => DEFAULT_GOOGLE_SCOPES
                        .iter()
                        .map(|s| s.to_string())
                        .collect(),
                };
                let resp = fetch_token(&self.inner.http, &adc, &scopes).await?;
                Ok(base(
                    resp,
                    Some(adc.principal().to_string()),
                    None,
                    None,
                    adc.token_uri().to_string(),
                    None,
                    None,
                    Some(scopes.join(" ")),
                ))
            }
            Grant::ClientCredentials | Grant::JwtBearer => {
                let client_id = sa.oauth.client_id.clone().ok_or_else(|| {
                    AuthError::Config(format!(
                        "the {} grant needs a pre-registered client: set `mcpServers.{}.oauth.clientId` (and `clientSecret` or `privateKeyFile`)",
                        grant.as_str(),
                        sa.name
                    ))
                })?;
                let (token_url, supported, resource, issuer, discovered_scope) =
                    match (&sa.oauth.token_url, &challenge) {
                        (Some(t), None) => (
                            t.clone(),
                            None,
                            sa.url.split('#').next().unwrap_or(&sa.url).to_string(),
                            None,
                            None,
                        ),
                        _ => {
                            let (_, d) = self.discover_for(sa, challenge).await?;
                            let scope = d.default_scope();
                            (
                                d.server.token_endpoint.clone(),
                                d.server.token_endpoint_auth_methods_supported.clone(),
                                d.resource.clone(),
                                Some(d.server.issuer.clone()),
                                scope,
                            )
                        }
                    };
                let key = sa.signing_key()?;
                let method = choose_auth_method(
                    sa.oauth.token_endpoint_auth_method.as_deref(),
                    None,
                    sa.oauth.client_secret.is_some(),
                    key.is_some(),
                    supported.as_deref(),
                )?;
                let client = ClientCreds {
                    id: client_id.clone(),
                    secret: sa.oauth.client_secret.clone(),
                    method,
                    key,
                    issuer: issuer.clone(),
                };
                let scope = scope_override
                    .or_else(|| sa.configured_scope())
                    .or(discovered_scope);
                let resp = if grant == Grant::ClientCredentials {
                    let mut params =
                        vec![("grant_type".to_string(), "client_credentials".to_string())];
                    if let Some(s) = &scope {
                        params.push(("scope".into(), s.clone()));
                    }
                    params.push(("resource".into(), resource.clone()));
                    request_token(
                        &self.inner.http,
                        &token_url,
                        "client_credentials",
                        params,
                        Some(&client),
                        true,
                    )
                    .await?
                } else {
                    let audience = issuer.clone().unwrap_or_else(|| {
                        url::Url::parse(&token_url)
                            .map(|u| u.origin().ascii_serialization())
                            .unwrap_or_else(|_| token_url.clone())
                    });
                    let assertion = self
                        .id_jag(sa, &audience, &resource, scope.as_deref())
                        .await?;
                    let params = vec![
                        ("grant_type".to_string(), JWT_BEARER_GRANT.to_string()),
                        ("assertion".to_string(), assertion),
                    ];
                    request_token(
                        &self.inner.http,
                        &token_url,
                        "jwt-bearer",
                        params,
                        Some(&client),
                        true,
                    )
                    .await?
                };
                let secret = sa.oauth.client_secret.clone();
                Ok(base(
                    resp,
                    Some(client_id),
                    secret,
                    Some(method),
                    token_url,
                    Some(resource),
                    issuer,
                    scope,
                ))
            }
        }
    }

    /// Leg 1 of the enterprise flow: the identity provider exchanges the user's ID
    /// token for an ID-JAG (RFC 8693 token exchange) for the authorization server.
    async fn id_jag(
        &self,
        sa: &ServerAuth,
        audience: &str,
        resource: &str,
        scope: Option<&str>,
    ) -> Result<String, AuthError> {
        let missing = |field: &str| {
            AuthError::Config(format!(
                "the jwt-bearer grant needs `mcpServers.{}.oauth.idp.{field}`",
                sa.name
            ))
        };
        let idp = sa
            .oauth
            .idp
            .clone()
            .ok_or_else(|| missing("tokenEndpoint"))?;
        let endpoint = idp.token_endpoint.ok_or_else(|| missing("tokenEndpoint"))?;
        let idp_client = idp.client_id.ok_or_else(|| missing("clientId"))?;
        let id_token = idp.id_token.ok_or_else(|| missing("idToken"))?;
        let id_token = match id_token.strip_prefix("file:") {
            Some(path) => std::fs::read_to_string(path.trim())
                .map(|t| t.trim().to_string())
                .map_err(|e| {
                    AuthError::Config(format!("cannot read the ID token file {path}: {e}"))
                })?,
            None => id_token,
        };
        let mut params = vec![
            ("grant_type".to_string(), TOKEN_EXCHANGE_GRANT.to_string()),
            ("requested_token_type".to_string(), ID_JAG_TYPE.to_string()),
            ("subject_token".to_string(), id_token),
            ("subject_token_type".to_string(), ID_TOKEN_TYPE.to_string()),
            ("audience".to_string(), audience.to_string()),
            ("resource".to_string(), resource.to_string()),
        ];
        if let Some(s) = scope {
            params.push(("scope".into(), s.to_string()));
        }
        let client = ClientCreds {
            id: idp_client,
            secret: None,
            method: AuthMethod::None,
            key: None,
            issuer: None,
        };
        let resp = request_token(
            &self.inner.http,
            &endpoint,
            "token-exchange",
            params,
            Some(&client),
            false,
        )
        .await?;
        if resp.issued_token_type.as_deref() != Some(ID_JAG_TYPE) {
            return Err(AuthError::InvalidResponse {
                what: "the identity provider",
                url: shown(&endpoint),
                reason: format!(
                    "`issued_token_type` is {}, expected `{ID_JAG_TYPE}`",
                    resp.issued_token_type
                        .as_deref()
                        .map(|t| format!("`{}`", crate::error::sanitize(t)))
                        .unwrap_or_else(|| "missing".into())
                ),
            });
        }
        if let Some(iss) = &idp.issuer {
            tracing::debug!(issuer = %iss, "ID-JAG obtained");
        }
        Ok(resp.access_token)
    }
}
