//! [`AuthManager`]: tokens for every HTTP server, and the [`TokenSource`] connections
//! ask before each request.
//!
//! - **Saved logins** come from the [`TokenStore`]. A token is sent only to the URL it
//!   was obtained for. It is refreshed 5 minutes before expiry (half the lifetime
//!   for short-lived tokens) and once when the server answers 401, with the stored
//!   client id, under the store's cross-process lock; a rotated refresh token is
//!   saved before the new access token is used. `invalid_grant` removes the login
//!   and says to log in again.
//! - **Logins** ([`AuthManager::login`]): the authorization-code flow with PKCE,
//!   `state` and `resource`, through a loopback callback; or, with no user, the
//!   `client_credentials` grant, the enterprise jwt-bearer grant (an ID-JAG from the
//!   configured identity provider), and Google Application Default Credentials.
//! - **Split logins** for an app's own callback page
//!   ([`AuthManager::begin_authorization`] → [`AuthManager::complete_authorization`]):
//!   the same discovery, registration, PKCE and exchange, with the verifier, client
//!   secret and resource held in [`PendingAuthorizations`] keyed by `state` for
//!   [`PENDING_TTL`], each usable once.
//! - **Step-up**: a 403 `insufficient_scope` re-authorizes with the wider scope: at
//!   most 3 authorizations in all, counting the login that started it (so 2 step-ups
//!   per server and process until the next login; each request is bounded the same
//!   way by the connection); interactively only when a login UI is set.
//!
//! One `impl AuthManager` per concern:
//! - this file: the manager's state, [`ServerAuth`] and [`Grant`] (a server as the
//!   manager sees it), [`LoginOptions`], construction and the configured servers, the
//!   token cache, the probe and discovery every grant starts from, and the
//!   [`TokenSource`] that connections call;
//! - `refresh`: the token for a request, renewal before expiry and after a 401;
//! - `machine`: the grants that need no user (`client_credentials`, jwt-bearer with an
//!   ID-JAG, Google ADC);
//! - `login`: [`AuthManager::login`], the browser flow through the loopback callback
//!   and the split flow for an app's own callback page ([`PendingAuthorizations`]);
//! - `step_up`: re-authorization on 403 `insufficient_scope`;
//! - `status`: status, summaries and logout.

mod login;
mod machine;
mod refresh;
mod status;
mod step_up;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchboard_config::{AuthProviderType, OAuthConfig, ServerConfig, Transport};
use switchboard_mcp::{TokenFuture, TokenSource, TokenStatus};
use switchboard_net::GuardedClient;

use crate::browser::open_in_browser;
use crate::challenge::BearerChallenge;
use crate::crypto::SigningKey;
use crate::discovery::{Discovery, Overrides, discover};
use crate::error::AuthError;
use crate::http::Http;
use crate::store::{StoredLogin, TokenStore};
use crate::token::JWT_BEARER_GRANT;

pub use login::{
    Authorization, CompletedAuthorization, LoginReport, PENDING_TTL, PendingAuthorizations,
};
pub use status::AuthSummary;

/// How many authorizations a server gets while it keeps answering 403
/// `insufficient_scope`, counting the login (or saved token) that started it: after a
/// login, at most `MAX_AUTHORIZATIONS - 1` step-ups per server and process (the count
/// starts again at the next login). Each request is bounded the same way by the
/// connection.
pub const MAX_AUTHORIZATIONS: u32 = 3;
/// How many step-up re-authorizations follow the login that started them.
pub const MAX_STEP_UPS: u32 = MAX_AUTHORIZATIONS - 1;
/// `grantType` value for Google ADC logins in the store.
const GOOGLE_GRANT: &str = "google_credentials";

/// Which grant gets a server its tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// Browser login with PKCE (the default).
    AuthorizationCode,
    /// `client_credentials` (machine to machine, no browser).
    ClientCredentials,
    /// Enterprise: an ID-JAG from the identity provider, redeemed with the RFC 7523
    /// jwt-bearer grant.
    JwtBearer,
    /// Google Application Default Credentials.
    Google,
}

impl Grant {
    /// The name used in messages and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Grant::AuthorizationCode => "authorization_code",
            Grant::ClientCredentials => "client_credentials",
            Grant::JwtBearer => JWT_BEARER_GRANT,
            Grant::Google => GOOGLE_GRANT,
        }
    }

    /// Whether it needs no user.
    pub fn is_machine(self) -> bool {
        self != Grant::AuthorizationCode
    }
}

/// One HTTP server as the manager sees it.
#[derive(Debug, Clone)]
pub struct ServerAuth {
    pub name: String,
    pub url: String,
    pub oauth: OAuthConfig,
    pub provider: AuthProviderType,
    /// The server's headers set `Authorization`: no OAuth token is ever sent.
    pub own_authorization: bool,
}

impl ServerAuth {
    /// A server with no settings (an ad-hoc URL): named by its URL.
    pub fn adhoc(name: &str, url: &str) -> Self {
        Self {
            name: name.into(),
            url: url.into(),
            oauth: OAuthConfig::default(),
            provider: AuthProviderType::DynamicDiscovery,
            own_authorization: false,
        }
    }

    /// From a validated settings entry; `None` for stdio servers.
    pub fn from_config(cfg: &ServerConfig) -> Option<Self> {
        if matches!(cfg.transport, Transport::Stdio { .. }) {
            return None;
        }
        let url = cfg.transport.url()?.to_string();
        let own_authorization = cfg
            .transport
            .headers()
            .is_some_and(|h| h.keys().any(|k| k.eq_ignore_ascii_case("authorization")));
        Some(Self {
            name: cfg.name.clone(),
            url,
            oauth: cfg.oauth.clone().unwrap_or_default(),
            provider: cfg.auth_provider_type,
            own_authorization,
        })
    }

    /// OAuth is on unless `oauth.enabled` is `false`.
    pub fn enabled(&self) -> bool {
        self.oauth.enabled != Some(false) && !self.own_authorization
    }

    /// The grant configured for this server.
    pub fn grant(&self) -> Result<Grant, AuthError> {
        if self.provider == AuthProviderType::GoogleCredentials {
            return Ok(Grant::Google);
        }
        if self.provider == AuthProviderType::ServiceAccountImpersonation {
            return Err(AuthError::Config(format!(
                "`mcpServers.{}.authProviderType` `service_account_impersonation` is not supported; use `google_credentials` or `dynamic_discovery`",
                self.name
            )));
        }
        match self.oauth.grant_type.as_deref() {
            None | Some("authorization_code") => Ok(Grant::AuthorizationCode),
            Some("client_credentials") => Ok(Grant::ClientCredentials),
            Some(JWT_BEARER_GRANT) | Some("jwt-bearer") | Some("jwt_bearer") => {
                Ok(Grant::JwtBearer)
            }
            Some(other) => Err(AuthError::Config(format!(
                "`mcpServers.{}.oauth.grantType` `{other}` is not supported: use authorization_code, client_credentials or {JWT_BEARER_GRANT}",
                self.name
            ))),
        }
    }

    fn overrides(&self) -> Overrides {
        Overrides {
            authorization_url: self.oauth.authorization_url.clone(),
            token_url: self.oauth.token_url.clone(),
        }
    }

    fn configured_scope(&self) -> Option<String> {
        self.oauth
            .scopes
            .as_ref()
            .map(|s| s.join(" "))
            .filter(|s| !s.trim().is_empty())
    }

    fn signing_key(&self) -> Result<Option<Arc<SigningKey>>, AuthError> {
        match &self.oauth.private_key_file {
            Some(path) => Ok(Some(Arc::new(SigningKey::from_file(
                std::path::Path::new(path),
                self.oauth.signing_algorithm.as_deref(),
            )?))),
            None => Ok(None),
        }
    }
}

/// Opens (or shows) the authorization URL; returns whether a browser was started.
pub type OpenUrl = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// How an interactive login runs.
#[derive(Clone)]
pub struct LoginOptions {
    /// How long to wait for the browser to come back.
    pub timeout: Duration,
    /// Called with the authorization URL.
    pub open_url: OpenUrl,
    /// Scopes to ask for instead of the discovered ones.
    pub scopes: Option<Vec<String>>,
    /// Test hook: send this PKCE verifier instead of the right one.
    #[doc(hidden)]
    pub verifier_override: Option<String>,
}

impl std::fmt::Debug for LoginOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginOptions")
            .field("timeout", &self.timeout)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

impl Default for LoginOptions {
    /// Five minutes; `$BROWSER` or the desktop opener.
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(300),
            open_url: Arc::new(open_in_browser),
            scopes: None,
            verifier_override: None,
        }
    }
}

struct Inner {
    pending: PendingAuthorizations,
    store: TokenStore,
    http: Http,
    servers: Mutex<HashMap<String, ServerAuth>>,
    /// Tokens known good, per server (valid until their refresh is due).
    cache: Mutex<HashMap<String, StoredLogin>>,
    step_ups: Mutex<HashMap<String, u32>>,
    /// Serializes renewals in this process (the store lock covers other processes).
    renewing: tokio::sync::Mutex<()>,
    /// Lets step-up open a browser.
    login_ui: Mutex<Option<LoginOptions>>,
    /// Google credentials file instead of the ADC search path.
    adc_path: Mutex<Option<std::path::PathBuf>>,
    /// Servers with no saved login, with the store's state when that was seen.
    absent: Mutex<HashMap<String, Option<crate::store::Stamp>>>,
}

/// Tokens for MCP servers. Cheap to clone.
#[derive(Clone)]
pub struct AuthManager {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for AuthManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthManager")
            .field("store", &self.inner.store.path())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl AuthManager {
    /// A manager over `store`, sending every request through `http`.
    pub fn new(store: TokenStore, http: GuardedClient) -> Self {
        Self::with_pending(store, http, PendingAuthorizations::default())
    }

    /// A manager whose browser logins wait in `pending` (shared with other managers).
    pub fn with_pending(
        store: TokenStore,
        http: GuardedClient,
        pending: PendingAuthorizations,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                pending,
                store,
                http: Http::new(http),
                servers: Mutex::new(HashMap::new()),
                cache: Mutex::new(HashMap::new()),
                step_ups: Mutex::new(HashMap::new()),
                renewing: tokio::sync::Mutex::new(()),
                login_ui: Mutex::new(None),
                adc_path: Mutex::new(None),
                absent: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Adds (or replaces) a server's settings.
    pub fn add_server(&self, server: ServerAuth) {
        lock(&self.inner.servers).insert(server.name.clone(), server);
    }

    /// Adds every HTTP server of validated settings entries.
    pub fn add_configs<'a>(&self, configs: impl IntoIterator<Item = &'a ServerConfig>) {
        for cfg in configs {
            if let Some(s) = ServerAuth::from_config(cfg) {
                self.add_server(s);
            }
        }
    }

    /// Lets step-up authorization (403 `insufficient_scope`) open a browser with
    /// these options. Without it, step-up asks the user to log in again.
    pub fn set_login_ui(&self, ui: Option<LoginOptions>) {
        *lock(&self.inner.login_ui) = ui;
    }

    /// Reads Google credentials from `path` instead of `GOOGLE_APPLICATION_CREDENTIALS`
    /// or gcloud's default path.
    pub fn set_google_credentials_file(&self, path: Option<std::path::PathBuf>) {
        *lock(&self.inner.adc_path) = path;
    }

    /// The token store.
    pub fn store(&self) -> &TokenStore {
        &self.inner.store
    }

    /// The configured servers.
    pub fn servers(&self) -> Vec<ServerAuth> {
        let mut v: Vec<ServerAuth> = lock(&self.inner.servers).values().cloned().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// The server named `name` (configured, else an ad-hoc one at `url`).
    pub fn server(&self, name: &str, url: &str) -> ServerAuth {
        match lock(&self.inner.servers).get(name) {
            Some(s) if s.url == url => s.clone(),
            _ => ServerAuth::adhoc(name, url),
        }
    }

    fn configured(&self, name: &str) -> Option<ServerAuth> {
        lock(&self.inner.servers).get(name).cloned()
    }

    fn cache_put(&self, login: &StoredLogin) {
        lock(&self.inner.cache).insert(login.server_name.clone(), login.clone());
    }

    fn cache_drop(&self, name: &str) {
        lock(&self.inner.cache).remove(name);
    }

    /// The saved login of `server` if it belongs to `url`.
    fn saved(&self, server: &str, url: &str) -> Result<Option<StoredLogin>, AuthError> {
        Ok(self
            .inner
            .store
            .load(server)?
            .filter(|l| l.mcp_server_url == url))
    }

    /// Reads a server's 401 (or other answer) to its `initialize`.
    async fn probe(&self, url: &str) -> Result<(u16, BearerChallenge), AuthError> {
        let mut reply = self.inner.http.probe_mcp(url, None).await?;
        if reply.status == 405 {
            // A legacy SSE endpoint takes GET.
            reply = self.inner.http.get("the MCP server", url).await?;
        }
        let challenge = reply
            .headers
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .map(BearerChallenge::parse)
            .unwrap_or_default();
        Ok((reply.status, challenge))
    }

    /// Whether the server at `url` asks for authorization (answers its
    /// `initialize` with 401).
    pub async fn requires_auth(&self, url: &str) -> Result<bool, AuthError> {
        let (status, _) = self.probe(url).await?;
        Ok(status == 401)
    }

    async fn discover_for(
        &self,
        sa: &ServerAuth,
        challenge: Option<BearerChallenge>,
    ) -> Result<(u16, Discovery), AuthError> {
        let (status, challenge) = match challenge {
            Some(c) => (401, c),
            None => self.probe(&sa.url).await?,
        };
        let d = discover(
            &self.inner.http,
            &sa.name,
            &sa.url,
            challenge,
            &sa.overrides(),
        )
        .await?;
        Ok((status, d))
    }
}

impl TokenSource for AuthManager {
    fn bearer(&self, server: &str, url: &str) -> TokenFuture {
        let this = self.clone();
        let (server, url) = (server.to_string(), url.to_string());
        Box::pin(async move { this.token(&server, &url).await.map_err(|e| e.to_string()) })
    }

    fn unauthorized(
        &self,
        server: &str,
        url: &str,
        rejected: Option<String>,
        www_authenticate: Option<String>,
    ) -> TokenFuture {
        let this = self.clone();
        let (server, url) = (server.to_string(), url.to_string());
        Box::pin(async move {
            this.on_unauthorized(&server, &url, rejected, www_authenticate.as_deref())
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn insufficient_scope(&self, server: &str, url: &str, www_authenticate: String) -> TokenFuture {
        let this = self.clone();
        let (server, url) = (server.to_string(), url.to_string());
        Box::pin(async move {
            this.step_up(&server, &url, &www_authenticate)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn status(&self, server: &str, url: &str) -> Option<TokenStatus> {
        AuthManager::status(self, server, url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_from_settings() {
        let mut sa = ServerAuth::adhoc("s", "http://x/mcp");
        assert_eq!(sa.grant().unwrap(), Grant::AuthorizationCode);
        sa.oauth.grant_type = Some("client_credentials".into());
        assert_eq!(sa.grant().unwrap(), Grant::ClientCredentials);
        sa.oauth.grant_type = Some(JWT_BEARER_GRANT.into());
        assert_eq!(sa.grant().unwrap(), Grant::JwtBearer);
        sa.oauth.grant_type = Some("password".into());
        let e = sa.grant().unwrap_err().to_string();
        assert!(e.contains("mcpServers.s.oauth.grantType"), "{e}");
        sa.provider = AuthProviderType::GoogleCredentials;
        assert_eq!(sa.grant().unwrap(), Grant::Google);
    }
}
