//! Logins a user asks for: [`AuthManager::login`] (the browser flow, or the
//! configured machine grant), the authorization-code flow with PKCE through the
//! loopback callback (prepare, open the browser, finish), and the split flow for an
//! app's own callback page ([`AuthManager::begin_authorization`] →
//! [`AuthManager::complete_authorization`]) with its [`PendingAuthorizations`]
//! ([`PENDING_TTL`], 10 min, each taken once). A callback's RFC 9207 `iss` must be the
//! issuer the login started with, and is required when the server's metadata promises it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Map;

use crate::callback::{CallbackListener, CallbackParams, DEFAULT_REDIRECT_URI};
use crate::challenge::BearerChallenge;
use crate::crypto::{pkce, random_token};
use crate::discovery::MetadataSource;
use crate::error::AuthError;
use crate::store::{StoredLogin, TokenSet, now_ms};
use crate::token::{AuthMethod, ClientCreds, choose_auth_method, register, request_token};

use super::{AuthManager, Grant, LoginOptions, ServerAuth, lock};

/// What a login achieved (no token in it).
#[derive(Debug, Clone)]
pub struct LoginReport {
    pub server: String,
    pub grant: Grant,
    pub scope: Option<String>,
    pub expires_at: Option<u64>,
    pub has_refresh_token: bool,
    pub client_id: Option<String>,
    pub issuer: Option<String>,
}

/// How long a login started with [`AuthManager::begin_authorization`] waits for its
/// code.
pub const PENDING_TTL: Duration = Duration::from_secs(600);

/// An authorization request waiting for its code: what must never reach the browser
/// (the PKCE verifier, the client secret or key) stays here.
struct PendingAuth {
    server: String,
    server_url: String,
    resource: String,
    token_endpoint: String,
    issuer: String,
    iss_required: bool,
    redirect_uri: String,
    verifier: String,
    state: String,
    client: ClientCreds,
    scope: Option<String>,
    registration_url: Option<String>,
    created: Instant,
}

/// Logins started with [`AuthManager::begin_authorization`], keyed by `state`. Cheap
/// to clone; share one between managers ([`AuthManager::with_pending`]) so that a
/// login begun by one completes through another.
#[derive(Clone, Default)]
pub struct PendingAuthorizations(Arc<Mutex<HashMap<String, PendingAuth>>>);

impl std::fmt::Debug for PendingAuthorizations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingAuthorizations")
            .field("waiting", &lock(&self.0).len())
            .finish()
    }
}

impl PendingAuthorizations {
    fn prune(map: &mut HashMap<String, PendingAuth>) {
        map.retain(|_, p| p.created.elapsed() < PENDING_TTL);
    }

    fn insert(&self, p: PendingAuth) {
        let mut map = lock(&self.0);
        Self::prune(&mut map);
        map.insert(p.state.clone(), p);
    }

    /// The waiting login for `state`, removed (so a `state` works once).
    fn take(&self, state: &str) -> Option<PendingAuth> {
        let mut map = lock(&self.0);
        Self::prune(&mut map);
        map.remove(state)
    }
}

/// A login begun for an app's own callback page.
#[derive(Debug, Clone)]
pub struct Authorization {
    /// Where to send the browser.
    pub authorize_url: String,
    /// The request's `state` (the key of the waiting login).
    pub state: String,
    pub server: String,
}

/// A login finished by [`AuthManager::complete_authorization`] (no token in it).
#[derive(Debug, Clone)]
pub struct CompletedAuthorization {
    pub server: String,
    /// Milliseconds since the epoch.
    pub expires_at: Option<u64>,
}

/// Removes `offline_access` unless the authorization server lists it.
fn filter_scope(scope: Option<String>, supported: &[String]) -> Option<String> {
    let scope = scope?;
    let keep: Vec<&str> = scope
        .split_whitespace()
        .filter(|s| *s != "offline_access" || supported.iter().any(|x| x == "offline_access"))
        .collect();
    (!keep.is_empty()).then(|| keep.join(" "))
}

impl AuthManager {
    /// `server`'s settings, if OAuth logins are allowed for it.
    fn loginable(&self, server: &str, url: &str) -> Result<ServerAuth, AuthError> {
        let sa = self.server(server, url);
        if sa.own_authorization {
            return Err(AuthError::Config(format!(
                "`mcpServers.{server}.headers` sets `Authorization`, so OAuth is not used for it; remove that header to log in"
            )));
        }
        if sa.oauth.enabled == Some(false) {
            return Err(AuthError::Config(format!(
                "OAuth is turned off for `{server}` (`oauth.enabled: false`)"
            )));
        }
        Ok(sa)
    }

    /// `server`'s settings, if it logs in through a browser.
    fn interactive(&self, server: &str, url: &str) -> Result<ServerAuth, AuthError> {
        let sa = self.loginable(server, url)?;
        let grant = sa.grant()?;
        if grant.is_machine() {
            return Err(AuthError::Config(format!(
                "`{server}` uses the {} grant, which needs no browser",
                grant.as_str()
            )));
        }
        Ok(sa)
    }

    /// Whether a browser login for `server` must come back to the loopback callback:
    /// a configured `oauth.clientId` (registered with that redirect URI) or
    /// `oauth.redirectUri`.
    pub fn needs_loopback(&self, server: &str, url: &str) -> bool {
        let sa = self.server(server, url);
        sa.oauth.client_id.is_some() || sa.oauth.redirect_uri.is_some()
    }

    /// Whether `server` gets its tokens without a browser.
    pub fn is_machine_grant(&self, server: &str, url: &str) -> bool {
        self.server(server, url)
            .grant()
            .map(Grant::is_machine)
            .unwrap_or(false)
    }

    /// Logs in to `server`: the browser flow for `authorization_code`, or the
    /// configured machine grant. The token is saved.
    pub async fn login(
        &self,
        server: &str,
        url: &str,
        opts: &LoginOptions,
    ) -> Result<LoginReport, AuthError> {
        let sa = self.loginable(server, url)?;
        let grant = sa.grant()?;
        let login = if grant.is_machine() {
            let challenge = if grant == Grant::Google || sa.oauth.token_url.is_some() {
                None
            } else {
                Some(self.probe(&sa.url).await?.1)
            };
            let scope = opts.scopes.as_ref().map(|s| s.join(" "));
            self.machine_login(&sa, challenge, scope).await?
        } else {
            let scope = opts.scopes.as_ref().map(|s| s.join(" "));
            self.authorize(&sa, scope, None, opts).await?
        };
        self.inner.store.put(login.clone()).await?;
        self.cache_put(&login);
        lock(&self.inner.step_ups).remove(server);
        Ok(LoginReport {
            server: server.into(),
            grant,
            scope: login.token.scope.clone(),
            expires_at: login.token.expires_at,
            has_refresh_token: login.token.refresh_token.is_some(),
            client_id: login.client_id.clone(),
            issuer: login.issuer.clone(),
        })
    }

    /// The authorization-code flow with PKCE through the loopback callback.
    pub(super) async fn authorize(
        &self,
        sa: &ServerAuth,
        scope_override: Option<String>,
        challenge: Option<BearerChallenge>,
        opts: &LoginOptions,
    ) -> Result<StoredLogin, AuthError> {
        let (pending, auth_url, listener) =
            self.prepare(sa, scope_override, challenge, None).await?;
        let listener = listener
            .ok_or_else(|| AuthError::Config("the loopback callback listener is missing".into()))?;
        let waiting = tokio::spawn(listener.wait(opts.timeout));
        (opts.open_url)(auth_url.as_str());
        let params = waiting
            .await
            .map_err(|e| AuthError::Config(format!("the callback listener stopped: {e}")))??;
        if params.error.is_none() && params.state.as_deref() != Some(pending.state.as_str()) {
            return Err(AuthError::StateMismatch {
                server: sa.name.clone(),
            });
        }
        self.finish(pending, params, opts.verifier_override.clone())
            .await
    }

    /// Everything before the browser: discovery, endpoint checks, the client
    /// (configured or registered for the redirect URI), PKCE, `state` and the
    /// authorization URL. `redirect_uri: None` binds the loopback callback listener
    /// (returned) for the configured or default redirect URI.
    async fn prepare(
        &self,
        sa: &ServerAuth,
        scope_override: Option<String>,
        challenge: Option<BearerChallenge>,
        redirect_uri: Option<&str>,
    ) -> Result<(PendingAuth, url::Url, Option<CallbackListener>), AuthError> {
        let (status, d) = self.discover_for(sa, challenge).await?;
        if !(401..=403).contains(&status)
            && d.resource_metadata.is_none()
            && d.server.source == MetadataSource::DefaultPaths
        {
            return Err(AuthError::NotProtected {
                url: sa.url.clone(),
                status,
            });
        }
        let meta = &d.server;
        let auth_endpoint = meta.authorization_endpoint.clone().ok_or_else(|| {
            AuthError::Config(format!(
                "the authorization server {} lists no `authorization_endpoint`: set `mcpServers.{}.oauth.authorizationUrl`",
                meta.issuer, sa.name
            ))
        })?;
        self.inner
            .http
            .check("the authorization endpoint", &auth_endpoint)
            .await?;
        self.inner
            .http
            .check("the token endpoint", &meta.token_endpoint)
            .await?;
        if meta.source == MetadataSource::Document {
            match &meta.code_challenge_methods_supported {
                Some(m) if !m.iter().any(|x| x == "S256") => {
                    return Err(AuthError::NoPkce {
                        issuer: meta.issuer.clone(),
                        methods: m.join(", "),
                    });
                }
                None => tracing::warn!(
                    "the authorization server {} does not list code_challenge_methods_supported; using S256",
                    meta.issuer
                ),
                _ => {}
            }
        }
        let scope = filter_scope(
            scope_override
                .or_else(|| sa.configured_scope())
                .or_else(|| d.default_scope()),
            &meta.scopes_supported,
        );

        let (redirect_uri, listener) = match redirect_uri {
            Some(r) => (r.to_string(), None),
            None => {
                let redirect = sa
                    .oauth
                    .redirect_uri
                    .clone()
                    .unwrap_or_else(|| DEFAULT_REDIRECT_URI.to_string());
                let listener = CallbackListener::bind(&redirect, &sa.name).await?;
                (listener.redirect_uri().to_string(), Some(listener))
            }
        };

        // The client: configured, else registered now.
        let key = sa.signing_key()?;
        let (client_id, secret, registered_method, registration_url) = match &sa.oauth.client_id {
            Some(id) => (id.clone(), sa.oauth.client_secret.clone(), None, None),
            None => {
                let Some(reg) = meta.registration_endpoint.clone() else {
                    return Err(AuthError::NoClient {
                        server: sa.name.clone(),
                        issuer: meta.issuer.clone(),
                    });
                };
                let r = register(&self.inner.http, &reg, &redirect_uri, scope.as_deref()).await?;
                (r.client_id, r.client_secret, r.auth_method, Some(reg))
            }
        };
        let is_metadata_document = client_id.starts_with("https://");
        let method = if is_metadata_document && secret.is_none() && key.is_none() {
            AuthMethod::None
        } else {
            choose_auth_method(
                sa.oauth.token_endpoint_auth_method.as_deref(),
                registered_method.as_deref(),
                secret.is_some(),
                key.is_some(),
                meta.token_endpoint_auth_methods_supported.as_deref(),
            )?
        };
        let client = ClientCreds {
            id: client_id.clone(),
            secret,
            method,
            key,
            issuer: Some(meta.issuer.clone()),
        };

        let pkce = pkce()?;
        let state = random_token(24)?;
        let mut auth_url = url::Url::parse(&auth_endpoint).map_err(|e| {
            AuthError::Config(format!(
                "the authorization endpoint `{auth_endpoint}` is not a URL: {e}"
            ))
        })?;
        {
            let mut q = auth_url.query_pairs_mut();
            q.append_pair("response_type", "code");
            q.append_pair("client_id", &client_id);
            q.append_pair("redirect_uri", &redirect_uri);
            q.append_pair("code_challenge", &pkce.challenge);
            q.append_pair("code_challenge_method", "S256");
            q.append_pair("state", &state);
            if let Some(s) = &scope {
                q.append_pair("scope", s);
            }
            q.append_pair("resource", &d.resource);
        }
        let pending = PendingAuth {
            server: sa.name.clone(),
            server_url: sa.url.clone(),
            resource: d.resource.clone(),
            token_endpoint: meta.token_endpoint.clone(),
            issuer: meta.issuer.clone(),
            iss_required: meta.authorization_response_iss_parameter_supported,
            redirect_uri,
            verifier: pkce.verifier.clone(),
            state,
            client,
            scope,
            registration_url,
            created: Instant::now(),
        };
        Ok((pending, auth_url, listener))
    }

    /// Everything after the browser: the authorization response's error and `iss`,
    /// then the code exchange. (`state` was checked by the caller.)
    async fn finish(
        &self,
        p: PendingAuth,
        params: CallbackParams,
        verifier_override: Option<String>,
    ) -> Result<StoredLogin, AuthError> {
        // RFC 9207 first, for error responses too: an answer from another issuer is
        // reported as such, whatever it says.
        match &params.iss {
            Some(iss) if !iss.trim_end_matches('/').eq(p.issuer.trim_end_matches('/')) => {
                return Err(AuthError::IssuerMismatch {
                    expected: p.issuer.clone(),
                    got: crate::error::sanitize(iss),
                });
            }
            None if p.iss_required => {
                return Err(AuthError::IssuerMismatch {
                    expected: p.issuer.clone(),
                    got: "(none)".into(),
                });
            }
            _ => {}
        }
        if params.error.is_some() {
            return Err(AuthError::Denied {
                error: params.error,
                description: params.error_description,
            });
        }
        let code = params
            .code
            .clone()
            .ok_or_else(|| AuthError::InvalidResponse {
                what: "the authorization response",
                url: p.redirect_uri.clone(),
                reason: "it has no `code`".into(),
            })?;
        let verifier = verifier_override.unwrap_or_else(|| p.verifier.clone());
        let form = vec![
            ("grant_type".to_string(), "authorization_code".to_string()),
            ("code".to_string(), code),
            ("redirect_uri".to_string(), p.redirect_uri.clone()),
            ("code_verifier".to_string(), verifier),
            ("resource".to_string(), p.resource.clone()),
        ];
        let resp = request_token(
            &self.inner.http,
            &p.token_endpoint,
            "authorization_code",
            form,
            Some(&p.client),
            true,
        )
        .await?;
        let now = now_ms();
        Ok(StoredLogin {
            server_name: p.server.clone(),
            token: TokenSet {
                expires_at: resp.expires_at(now),
                access_token: resp.access_token,
                refresh_token: resp.refresh_token,
                token_type: "Bearer".into(),
                scope: resp.scope.or(p.scope),
            },
            client_id: Some(p.client.id.clone()),
            client_secret: p.client.secret.clone(),
            token_url: Some(p.token_endpoint.clone()),
            mcp_server_url: p.server_url.clone(),
            updated_at: now,
            grant_type: Some(Grant::AuthorizationCode.as_str().into()),
            token_endpoint_auth_method: Some(p.client.method.as_str().into()),
            resource: Some(p.resource.clone()),
            issuer: Some(p.issuer.clone()),
            registration_url: p.registration_url,
            extra: Map::new(),
        })
    }

    /// Starts an authorization-code login whose browser comes back to `redirect_uri`
    /// (an app's own callback page, not the loopback listener): discovery, the client
    /// (registered for `redirect_uri` when none is configured), PKCE and `state`. The
    /// verifier, client secret and resource stay here, keyed by `state`, for
    /// [`PENDING_TTL`]; finish with [`AuthManager::complete_authorization`].
    pub async fn begin_authorization(
        &self,
        server: &str,
        url: &str,
        redirect_uri: &str,
        scopes: Option<Vec<String>>,
    ) -> Result<Authorization, AuthError> {
        let sa = self.interactive(server, url)?;
        let scope = scopes.map(|s| s.join(" "));
        let (pending, auth_url, _) = self.prepare(&sa, scope, None, Some(redirect_uri)).await?;
        let state = pending.state.clone();
        self.inner.pending.insert(pending);
        Ok(Authorization {
            authorize_url: auth_url.to_string(),
            state,
            server: sa.name,
        })
    }

    /// Completes a login started by [`AuthManager::begin_authorization`]: takes the
    /// waiting authorization for `state` (once: [`AuthError::UnknownState`] when it is
    /// unknown, expired or used), exchanges `code` and saves the tokens. Returns the
    /// server name and the token's expiry; never the tokens.
    pub async fn complete_authorization(
        &self,
        state: &str,
        code: &str,
        iss: Option<&str>,
    ) -> Result<CompletedAuthorization, AuthError> {
        let pending = self
            .inner
            .pending
            .take(state)
            .ok_or(AuthError::UnknownState)?;
        let params = CallbackParams {
            code: Some(code.to_string()),
            state: Some(state.to_string()),
            error: None,
            error_description: None,
            iss: iss.map(str::to_string),
        };
        let login = self.finish(pending, params, None).await?;
        self.inner.store.put(login.clone()).await?;
        self.cache_put(&login);
        lock(&self.inner.step_ups).remove(&login.server_name);
        Ok(CompletedAuthorization {
            server: login.server_name.clone(),
            expires_at: login.token.expires_at,
        })
    }

    /// Drops the waiting authorization for `state` (the user was denied, or gave up).
    pub fn cancel_authorization(&self, state: &str) -> bool {
        self.inner.pending.take(state).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes() {
        assert_eq!(
            filter_scope(Some("a offline_access b".into()), &[]).as_deref(),
            Some("a b")
        );
        assert_eq!(
            filter_scope(Some("a offline_access".into()), &["offline_access".into()]).as_deref(),
            Some("a offline_access")
        );
        assert_eq!(filter_scope(Some("offline_access".into()), &[]), None);
    }
}
