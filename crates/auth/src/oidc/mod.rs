//! OpenID Connect sign-in (OIDC Core 1.0, authorization code + PKCE S256) for the team
//! server: [`OidcClient::discover`] reads the issuer's OpenID configuration (its
//! `issuer` must be the configured one), [`OidcClient::begin`] makes the authorization
//! URL with fresh `state`, `nonce` and PKCE verifier (the caller keeps them, e.g. in
//! the store's pending logins), [`OidcClient::finish`] checks the callback, exchanges
//! the code and validates the ID token (signature against the issuer's JWKS, RS256 or
//! ES256 only; `iss`, `aud`/`azp`, times, `nonce`; a verified email) into an
//! [`Identity`]; [`SignInPolicy`] decides who may enter.
//!
//! `finish` takes the login's `state`, PKCE verifier and nonce from the caller (who
//! takes them once, e.g. from the store's pending logins); a provider `error` ends the
//! login; the `state` must match; an RFC 9207 `iss` must be the issuer when it is sent,
//! and is required when the provider promises it
//! (`authorization_response_iss_parameter_supported`); the code is exchanged with the
//! PKCE verifier and our client authentication, and the ID token must carry the login's
//! nonce, so a stolen, replayed or injected code or token signs no one in.
//!
//! It owns no state beyond the issuer's metadata and its key cache: nothing about a
//! login in flight is kept here (any replica may finish a login another began), and it
//! must not create sessions or users. Every request goes through the URL guard with a
//! time limit and a capped body (the crate's `Http`); the token endpoint, PKCE and
//! client authentication are the crate's own (`token`, `crypto`). Tokens, codes, the
//! verifier, the nonce and the client secret never appear in errors or `Debug`.

mod error;
mod id_token;
mod jwks;
mod policy;
mod provider;

use std::time::Duration;

use url::Url;

pub use error::OidcError;
pub use policy::{Access, Refusal, SignInPolicy};

use crate::crypto::{pkce, random_token};
use crate::error::AuthError;
use crate::http::{Http, shown};
use crate::store::now_ms;
use crate::token::{AuthMethod, ClientCreds, choose_auth_method, request_token};
use jwks::{JwksCache, KeyQuery};
use provider::ProviderMetadata;

/// The time limit of each request to the issuer (discovery, keys, token) when none is
/// configured.
pub const DEFAULT_SIGN_IN_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs one request to the issuer within `limit`.
pub(crate) async fn within<T>(
    limit: Duration,
    what: &'static str,
    url: &str,
    request: impl Future<Output = Result<T, AuthError>>,
) -> Result<T, AuthError> {
    tokio::time::timeout(limit, request).await.map_err(|_| {
        AuthError::from(OidcError::Timeout {
            what,
            url: shown(url),
            after: limit,
        })
    })?
}

/// The scopes asked for when none are configured.
pub const DEFAULT_SIGN_IN_SCOPES: &str = "openid email profile";

/// A client secret. `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientSecret(String);

impl ClientSecret {
    /// Wraps a secret.
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientSecret(***)")
    }
}

/// How to sign in with one issuer.
#[derive(Debug, Clone)]
pub struct OidcConfig {
    /// The issuer identifier (e.g. `https://accounts.google.com`); https, or http on
    /// loopback.
    pub issuer: Url,
    /// The client id registered at the issuer.
    pub client_id: String,
    /// The client secret (a confidential client); `None` for a public client.
    pub client_secret: Option<ClientSecret>,
    /// This app's callback URL, registered at the issuer.
    pub redirect_uri: Url,
    /// Scopes to ask for; `openid` is added when missing. Empty means
    /// [`DEFAULT_SIGN_IN_SCOPES`].
    pub scopes: Vec<String>,
    /// How to authenticate at the token endpoint; `None` chooses from the issuer's
    /// metadata (`client_secret_basic` preferred, then `client_secret_post`).
    pub auth_method: Option<AuthMethod>,
    /// The time limit of each request to the issuer (at most 30 s, the crate's limit
    /// for any OAuth request).
    pub timeout: Duration,
}

impl OidcConfig {
    /// A configuration with the default scopes and token endpoint authentication.
    pub fn new(
        issuer: Url,
        client_id: impl Into<String>,
        client_secret: Option<ClientSecret>,
        redirect_uri: Url,
    ) -> Self {
        Self {
            issuer,
            client_id: client_id.into(),
            client_secret,
            redirect_uri,
            scopes: Vec::new(),
            auth_method: None,
            timeout: DEFAULT_SIGN_IN_TIMEOUT,
        }
    }
}

/// A sign-in begun: send the browser to `authorize_url`, keep the rest (the store's
/// `put_pending_login(&state, &PendingLogin { verifier: pkce_verifier, nonce, .. })`).
#[derive(Clone)]
pub struct LoginStart {
    /// Where to send the browser.
    pub authorize_url: Url,
    /// The `state` sent (the key of the pending login).
    pub state: String,
    /// The PKCE code verifier (a secret until the code is exchanged).
    pub pkce_verifier: String,
    /// The `nonce` the ID token must carry.
    pub nonce: String,
}

impl std::fmt::Debug for LoginStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginStart")
            .field("authorize_url", &shown(self.authorize_url.as_str()))
            .finish_non_exhaustive()
    }
}

/// What the caller kept of a [`LoginStart`], given back to [`OidcClient::finish`].
#[derive(Clone, PartialEq, Eq)]
pub struct PendingSignIn {
    /// The `state` the login was stored under (the one the caller looked it up by).
    pub state: String,
    /// The PKCE code verifier.
    pub pkce_verifier: String,
    /// The `nonce` sent.
    pub nonce: String,
}

impl std::fmt::Debug for PendingSignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingSignIn { .. }")
    }
}

impl From<&LoginStart> for PendingSignIn {
    fn from(s: &LoginStart) -> Self {
        Self {
            state: s.state.clone(),
            pkce_verifier: s.pkce_verifier.clone(),
            nonce: s.nonce.clone(),
        }
    }
}

/// The query of the request that arrived at the redirect URI.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SignInCallback {
    /// The authorization code.
    pub code: Option<String>,
    /// The `state` sent in [`LoginStart`] (the key to find the pending login by).
    pub state: Option<String>,
    /// RFC 9207 issuer identification.
    pub iss: Option<String>,
    /// The provider's error code, when it refused.
    pub error: Option<String>,
    /// Its description.
    pub error_description: Option<String>,
}

impl std::fmt::Debug for SignInCallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignInCallback")
            .field("code", &self.code.as_ref().map(|_| "<redacted>"))
            .field("iss", &self.iss)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl SignInCallback {
    /// Reads the callback's query string (without the `?`); the first of a repeated
    /// parameter wins, unknown ones are ignored.
    pub fn from_query(query: &str) -> Self {
        let mut cb = Self::default();
        for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
            let slot = match k.as_ref() {
                "code" => &mut cb.code,
                "state" => &mut cb.state,
                "iss" => &mut cb.iss,
                "error" => &mut cb.error,
                "error_description" => &mut cb.error_description,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(v.into_owned());
            }
        }
        cb
    }
}

/// Who signed in, as the issuer vouches in a valid ID token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The issuer that vouches, exactly as it publishes itself (the configured issuer,
    /// checked against its discovery document; with `subject`, the account's key).
    pub issuer: String,
    /// The issuer's stable id of the account (`sub`).
    pub subject: String,
    /// The email, as the issuer gave it: a display attribute the issuer may later give
    /// to another account, never the account's key.
    pub email: String,
    /// Always true: an unverified email is refused.
    pub email_verified: bool,
    /// The display name, when given.
    pub name: Option<String>,
}

/// An OpenID Connect client for one issuer. Cheap to share (`Arc` it); any number of
/// sign-ins may run at once.
#[derive(Debug)]
pub struct OidcClient {
    http: Http,
    config: OidcConfig,
    scope: String,
    meta: ProviderMetadata,
    creds: ClientCreds,
    jwks: JwksCache,
}

impl OidcClient {
    /// Reads `{issuer}/.well-known/openid-configuration` and checks it: its `issuer`
    /// must be the configured one, and it must name the authorization, token and JWKS
    /// endpoints (and allow PKCE S256 when it lists methods).
    ///
    /// # Errors
    /// A bad configuration, a blocked or failing request, or an unusable document.
    pub async fn discover(
        config: OidcConfig,
        http: switchboard_net::GuardedClient,
    ) -> Result<OidcClient, AuthError> {
        let http = Http::new(http);
        let cfg = |m: &str| AuthError::from(OidcError::Config(m.to_string()));
        if config.client_id.trim().is_empty() {
            return Err(cfg(
                "the client id is empty; set the client id registered at the issuer",
            ));
        }
        if !matches!(config.redirect_uri.scheme(), "https" | "http") {
            return Err(cfg(
                "the redirect URI must be an http(s) URL of this app's callback",
            ));
        }
        let has_secret = config.client_secret.is_some();
        let configured = match config.auth_method {
            Some(AuthMethod::PrivateKeyJwt) => {
                return Err(cfg(
                    "private_key_jwt is not offered for sign-in; use client_secret_basic or client_secret_post",
                ));
            }
            Some(m @ (AuthMethod::ClientSecretBasic | AuthMethod::ClientSecretPost))
                if !has_secret =>
            {
                return Err(cfg(&format!(
                    "token endpoint authentication `{}` needs the client secret; set it, or choose `none` for a public client",
                    m.as_str()
                )));
            }
            m => m,
        };
        let meta = provider::fetch(&http, &config.issuer, config.timeout).await?;
        let method = match configured {
            Some(m) => m,
            None => {
                choose_auth_method(None, None, has_secret, false, meta.auth_methods.as_deref())?
            }
        };
        let mut scopes: Vec<String> = if config.scopes.is_empty() {
            DEFAULT_SIGN_IN_SCOPES
                .split(' ')
                .map(str::to_string)
                .collect()
        } else {
            config.scopes.clone()
        };
        if !scopes.iter().any(|s| s == "openid") {
            scopes.insert(0, "openid".into());
        }
        let creds = ClientCreds {
            id: config.client_id.clone(),
            secret: config
                .client_secret
                .as_ref()
                .map(|s| s.expose().to_string()),
            method,
            key: None,
            issuer: Some(meta.issuer.clone()),
        };
        Ok(OidcClient {
            http,
            scope: scopes.join(" "),
            jwks: JwksCache::new(meta.jwks_uri.to_string()),
            meta,
            creds,
            config,
        })
    }

    /// The issuer identifier as the provider publishes it.
    pub fn issuer(&self) -> &str {
        &self.meta.issuer
    }

    /// The client id.
    pub fn client_id(&self) -> &str {
        &self.config.client_id
    }

    /// Begins a sign-in: fresh random `state` and `nonce` (256 bits each) and a PKCE
    /// verifier, and the authorization URL carrying them (`code_challenge_method=S256`).
    ///
    /// # Errors
    /// Only if the system's random source fails.
    pub fn begin(&self) -> Result<LoginStart, AuthError> {
        let state = random_token(32)?;
        let nonce = random_token(32)?;
        let pkce = pkce()?;
        let mut url = self.meta.authorization_endpoint.clone();
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.config.client_id)
            .append_pair("redirect_uri", self.config.redirect_uri.as_str())
            .append_pair("scope", &self.scope)
            .append_pair("state", &state)
            .append_pair("nonce", &nonce)
            .append_pair("code_challenge", &pkce.challenge)
            .append_pair("code_challenge_method", "S256");
        Ok(LoginStart {
            authorize_url: url,
            state,
            pkce_verifier: pkce.verifier,
            nonce,
        })
    }

    /// Finishes a sign-in: checks the callback against `pending` (`state`, RFC 9207
    /// `iss`, an error from the provider), exchanges the code (with the PKCE verifier)
    /// and validates the ID token.
    ///
    /// # Errors
    /// An [`AuthError::SignIn`] naming what was wrong, or the token endpoint's refusal
    /// ([`AuthError::TokenRefused`], e.g. a code used twice).
    pub async fn finish(
        &self,
        callback: &SignInCallback,
        pending: &PendingSignIn,
    ) -> Result<Identity, AuthError> {
        if let Some(error) = &callback.error {
            return Err(OidcError::Denied {
                error: error.clone(),
                description: callback.error_description.clone(),
            }
            .into());
        }
        match &callback.state {
            Some(s) if !pending.state.is_empty() && s == &pending.state => {}
            _ => return Err(OidcError::StateMismatch.into()),
        }
        match &callback.iss {
            Some(iss) if iss == &self.meta.issuer => {}
            None if !self.meta.iss_parameter => {}
            got => {
                return Err(OidcError::CallbackIssuer {
                    expected: self.meta.issuer.clone(),
                    got: got.clone(),
                }
                .into());
            }
        }
        let code = callback
            .code
            .clone()
            .filter(|c| !c.is_empty())
            .ok_or(OidcError::NoCode)?;
        let form = vec![
            ("grant_type".to_string(), "authorization_code".to_string()),
            ("code".to_string(), code),
            (
                "redirect_uri".to_string(),
                self.config.redirect_uri.to_string(),
            ),
            ("code_verifier".to_string(), pending.pkce_verifier.clone()),
        ];
        let answer = within(
            self.config.timeout,
            "the token endpoint",
            &self.meta.token_endpoint,
            request_token(
                &self.http,
                &self.meta.token_endpoint,
                "authorization_code",
                form,
                Some(&self.creds),
                true,
            ),
        )
        .await
        .map_err(sign_in_hint)?;
        let id_token = answer.id_token.ok_or_else(|| OidcError::NoIdToken {
            url: shown(&self.meta.token_endpoint),
        })?;
        self.verify_id_token(&id_token, &pending.nonce).await
    }

    /// Validates an ID token this client received from the issuer's token endpoint:
    /// signature (RS256/ES256, key by `kid` from the issuer's JWKS), `iss`, `aud`/`azp`,
    /// `exp`/`iat`/`nbf`, `nonce` equal to `nonce`, and a verified email.
    /// [`OidcClient::finish`] calls it; it is public for callers that obtain the ID
    /// token themselves.
    ///
    /// # Errors
    /// An [`AuthError::SignIn`] naming the failed check, or a failure to load the keys.
    pub async fn verify_id_token(
        &self,
        id_token: &str,
        nonce: &str,
    ) -> Result<Identity, AuthError> {
        let issuer = &self.meta.issuer;
        let jws = id_token::parse(issuer, id_token)?;
        let key = self
            .jwks
            .find(
                &self.http,
                self.config.timeout,
                &KeyQuery {
                    kid: jws.kid.as_deref(),
                    alg: jws.alg,
                },
            )
            .await?;
        if !key.verify(jws.alg, jws.signed.as_bytes(), &jws.signature) {
            return Err(OidcError::BadSignature {
                issuer: issuer.clone(),
                kid: jws.kid,
                alg: jws.alg.as_str(),
            }
            .into());
        }
        let now = i64::try_from(now_ms() / 1000).unwrap_or(i64::MAX);
        Ok(id_token::check_claims(
            &jws.payload,
            &id_token::Expected {
                issuer,
                client_id: &self.config.client_id,
                nonce,
                scopes: &self.scope,
                now,
            },
        )?)
    }
}

/// The token endpoint's `invalid_client` hint names the MCP settings; for sign-in it
/// names the sign-in client instead.
fn sign_in_hint(e: AuthError) -> AuthError {
    match e {
        AuthError::TokenRefused {
            url,
            grant,
            status,
            error,
            description,
            hint,
        } => {
            let hint = if error.as_deref() == Some("invalid_client") {
                Some("the issuer did not accept this client: check the sign-in client id and secret (and the token endpoint authentication method)".into())
            } else {
                hint
            };
            AuthError::TokenRefused {
                url,
                grant,
                status,
                error,
                description,
                hint,
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_query_is_read_first_wins() {
        let cb = SignInCallback::from_query("code=c%201&state=s&state=t&iss=https%3A%2F%2Fi&x=y");
        assert_eq!(cb.code.as_deref(), Some("c 1"));
        assert_eq!(cb.state.as_deref(), Some("s"));
        assert_eq!(cb.iss.as_deref(), Some("https://i"));
        assert!(!format!("{cb:?}").contains("c 1"), "Debug hides the code");
        let cb = SignInCallback::from_query("error=access_denied&error_description=no");
        assert_eq!(cb.error.as_deref(), Some("access_denied"));
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let s = ClientSecret::new("hunter2");
        assert!(!format!("{s:?}").contains("hunter2"));
        let p = PendingSignIn {
            state: "st".into(),
            pkce_verifier: "ver".into(),
            nonce: "non".into(),
        };
        let d = format!("{p:?}");
        assert!(!d.contains("ver") && !d.contains("non"), "{d}");
    }
}
