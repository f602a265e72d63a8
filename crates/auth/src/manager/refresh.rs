//! The token for each request: the cached or saved one, renewed under the store lock
//! when its refresh is due or the server answered 401 (the refresh-token grant with
//! the saved client, or the machine grant again); `invalid_grant` removes the login.

use crate::challenge::BearerChallenge;
use crate::error::AuthError;
use crate::store::{StoredLogin, TokenSet, now_ms};
use crate::token::{AuthMethod, ClientCreds, request_token};

use super::{AuthManager, GOOGLE_GRANT, Grant, ServerAuth, lock};

impl AuthManager {
    /// The token to send to `server` at `url` now: the saved one (refreshed when
    /// due), one from a machine grant that needs no discovery, or none.
    pub async fn token(&self, server: &str, url: &str) -> Result<Option<String>, AuthError> {
        let sa = self.server(server, url);
        if !sa.enabled() {
            return Ok(None);
        }
        let now = now_ms();
        if let Some(l) = lock(&self.inner.cache).get(server)
            && l.mcp_server_url == url
            && !l.refresh_due(now)
        {
            return Ok(Some(l.token.access_token.clone()));
        }
        // No login last time, and the file has not changed since: skip reading it.
        let stamp = self.inner.store.stamp();
        let known_absent = lock(&self.inner.absent)
            .get(server)
            .is_some_and(|s| *s == stamp);
        if !known_absent {
            if let Some(l) = self.saved(server, url)? {
                if !l.refresh_due(now) {
                    self.cache_put(&l);
                    return Ok(Some(l.token.access_token));
                }
                return self.renew(&sa, None, None).await;
            }
            lock(&self.inner.absent).insert(server.to_string(), stamp);
        }
        let grant = sa.grant()?;
        let direct = match grant {
            Grant::AuthorizationCode => false,
            Grant::Google => true,
            Grant::ClientCredentials | Grant::JwtBearer => sa.oauth.token_url.is_some(),
        };
        if direct {
            return self.renew(&sa, None, None).await;
        }
        Ok(None)
    }

    /// The server rejected `rejected` (or a request without a token) with 401:
    /// refresh once, or get a machine token, and return the token to retry with.
    pub async fn on_unauthorized(
        &self,
        server: &str,
        url: &str,
        rejected: Option<String>,
        www_authenticate: Option<&str>,
    ) -> Result<Option<String>, AuthError> {
        let sa = self.server(server, url);
        if !sa.enabled() {
            return Ok(None);
        }
        self.cache_drop(server);
        let challenge = www_authenticate.map(BearerChallenge::parse);
        match self.renew(&sa, rejected.as_deref(), challenge).await {
            Ok(t) => Ok(t),
            // A rejected token that cannot be renewed: the user logs in again.
            Err(AuthError::NeedsLogin { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Under the store lock: re-read the login, and if it still needs renewing (due,
    /// or it is the token the server rejected), refresh it or run the machine grant.
    async fn renew(
        &self,
        sa: &ServerAuth,
        rejected: Option<&str>,
        challenge: Option<BearerChallenge>,
    ) -> Result<Option<String>, AuthError> {
        let _one = self.inner.renewing.lock().await;
        let store_lock = self.inner.store.lock().await?;
        let now = now_ms();
        let current = store_lock
            .get(&sa.name)?
            .filter(|l| l.mcp_server_url == sa.url);
        let grant = sa.grant()?;
        if let Some(l) = &current {
            let fresh = match rejected {
                // Someone else renewed it meanwhile.
                Some(r) => l.token.access_token != r && !l.is_expired(now),
                None => !l.refresh_due(now),
            };
            if fresh {
                self.cache_put(l);
                return Ok(Some(l.token.access_token.clone()));
            }
            if let Some(refresh_token) = l.token.refresh_token.clone() {
                match self.refresh(sa, l, &refresh_token).await {
                    Ok(new) => {
                        store_lock.put(new.clone())?;
                        self.cache_put(&new);
                        return Ok(Some(new.token.access_token));
                    }
                    Err(AuthError::TokenRefused {
                        error: Some(code),
                        description,
                        ..
                    }) if code == "invalid_grant" => {
                        store_lock.remove(&sa.name)?;
                        self.cache_drop(&sa.name);
                        let reason = match description {
                            Some(d) => format!(
                                "the refresh token was refused: invalid_grant, {}",
                                crate::error::sanitize(&d)
                            ),
                            None => "the refresh token was refused: invalid_grant".into(),
                        };
                        return Err(AuthError::LoginAgain {
                            server: sa.name.clone(),
                            reason,
                        });
                    }
                    Err(e) if rejected.is_none() && !l.is_expired(now) => {
                        tracing::warn!(server = %sa.name, "refreshing the token failed ({e}); using it until it expires");
                        return Ok(Some(l.token.access_token.clone()));
                    }
                    Err(e) => return Err(e),
                }
            }
            if !grant.is_machine() {
                if rejected.is_none() && !l.is_expired(now) {
                    return Ok(Some(l.token.access_token.clone()));
                }
                if rejected.is_some() {
                    return Err(AuthError::NeedsLogin {
                        server: sa.name.clone(),
                    });
                }
                return Err(AuthError::LoginAgain {
                    server: sa.name.clone(),
                    reason: "the access token expired and the server issued no refresh token"
                        .into(),
                });
            }
        } else if !grant.is_machine() {
            return Err(AuthError::NeedsLogin {
                server: sa.name.clone(),
            });
        }
        let login = self.machine_login(sa, challenge, None).await?;
        store_lock.put(login.clone())?;
        self.cache_put(&login);
        Ok(Some(login.token.access_token))
    }

    /// The client a saved login was obtained with.
    fn saved_client(&self, sa: &ServerAuth, l: &StoredLogin) -> Result<ClientCreds, AuthError> {
        let id = l.client_id.clone().ok_or_else(|| AuthError::LoginAgain {
            server: sa.name.clone(),
            reason: "no client id was saved with it".into(),
        })?;
        let method = match l
            .token_endpoint_auth_method
            .as_deref()
            .and_then(AuthMethod::parse)
        {
            Some(m) => m,
            None if l.client_secret.is_some() => AuthMethod::ClientSecretBasic,
            None => AuthMethod::None,
        };
        let key = if method == AuthMethod::PrivateKeyJwt {
            sa.signing_key()?
        } else {
            None
        };
        Ok(ClientCreds {
            id,
            secret: l.client_secret.clone(),
            method,
            key,
            issuer: l.issuer.clone(),
        })
    }

    /// The refresh-token grant with the saved client.
    async fn refresh(
        &self,
        sa: &ServerAuth,
        l: &StoredLogin,
        refresh_token: &str,
    ) -> Result<StoredLogin, AuthError> {
        if l.grant_type.as_deref() == Some(GOOGLE_GRANT) {
            // ADC access tokens are simply fetched again.
            return self.machine_login(sa, None, None).await;
        }
        let token_url = l.token_url.clone().ok_or_else(|| AuthError::LoginAgain {
            server: sa.name.clone(),
            reason: "no token URL was saved with it".into(),
        })?;
        let client = self.saved_client(sa, l)?;
        let mut params = vec![
            ("grant_type".to_string(), "refresh_token".to_string()),
            ("refresh_token".to_string(), refresh_token.to_string()),
        ];
        if let Some(r) = &l.resource {
            params.push(("resource".into(), r.clone()));
        }
        let resp = request_token(
            &self.inner.http,
            &token_url,
            "refresh_token",
            params,
            Some(&client),
            true,
        )
        .await?;
        let now = now_ms();
        let mut new = l.clone();
        new.token = TokenSet {
            expires_at: resp.expires_at(now),
            access_token: resp.access_token,
            // A rotated refresh token replaces the old one; none keeps the old one.
            refresh_token: resp.refresh_token.or_else(|| l.token.refresh_token.clone()),
            token_type: "Bearer".into(),
            scope: resp.scope.or_else(|| l.token.scope.clone()),
        };
        new.updated_at = now;
        tracing::debug!(server = %sa.name, "token refreshed");
        Ok(new)
    }
}
