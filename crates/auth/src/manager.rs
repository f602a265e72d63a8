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

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Map;
use switchboard_config::{AuthProviderType, OAuthConfig, ServerConfig, Transport};
use switchboard_mcp::{TokenFuture, TokenSource, TokenStatus};
use switchboard_net::GuardedClient;

use crate::browser::open_in_browser;
use crate::callback::{CallbackListener, CallbackParams, DEFAULT_REDIRECT_URI};
use crate::challenge::BearerChallenge;
use crate::crypto::{SigningKey, pkce, random_token};
use crate::discovery::{Discovery, MetadataSource, Overrides, discover};
use crate::error::AuthError;
use crate::google::{DEFAULT_GOOGLE_SCOPES, fetch_token, load_adc};
use crate::http::{Http, shown};
use crate::store::{StoredLogin, TokenSet, TokenStore, now_ms};
use crate::token::{
    AuthMethod, ClientCreds, JWT_BEARER_GRANT, TOKEN_EXCHANGE_GRANT, TokenResponse,
    choose_auth_method, register, request_token,
};

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
/// The ID-JAG token type (draft-ietf-oauth-identity-assertion-authz-grant).
const ID_JAG_TYPE: &str = "urn:ietf:params:oauth:token-type:id-jag";
const ID_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id_token";

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

/// One server's authorization state, for `mcp auth`.
#[derive(Debug, Clone)]
pub struct AuthSummary {
    pub server: String,
    pub url: String,
    pub grant: Option<Grant>,
    /// `authenticated`, `expired`, `not logged in`, `off`.
    pub state: &'static str,
    pub expires_at: Option<u64>,
    pub scope: Option<String>,
    pub has_refresh_token: bool,
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

/// Removes `offline_access` unless the authorization server lists it.
fn filter_scope(scope: Option<String>, supported: &[String]) -> Option<String> {
    let scope = scope?;
    let keep: Vec<&str> = scope
        .split_whitespace()
        .filter(|s| *s != "offline_access" || supported.iter().any(|x| x == "offline_access"))
        .collect();
    (!keep.is_empty()).then(|| keep.join(" "))
}

fn union_scope(a: Option<&str>, b: Option<&str>) -> Option<String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for s in a.into_iter().chain(b).flat_map(str::split_whitespace) {
        if seen.insert(s.to_string()) {
            out.push(s.to_string());
        }
    }
    (!out.is_empty()).then(|| out.join(" "))
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

    fn adc(&self) -> Result<crate::google::Adc, AuthError> {
        let path = lock(&self.inner.adc_path).clone();
        load_adc(path).map(|(_, a)| a)
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

    /// A token from a grant that needs no user.
    async fn machine_login(
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
    async fn authorize(
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
        if params.error.is_some() {
            return Err(AuthError::Denied {
                error: params.error,
                description: params.error_description,
            });
        }
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

    /// The server answered 403 `insufficient_scope`: re-authorize with the wider
    /// scope (at most [`MAX_STEP_UPS`] times per server after its login, which makes
    /// [`MAX_AUTHORIZATIONS`] with it).
    pub async fn step_up(
        &self,
        server: &str,
        url: &str,
        www_authenticate: &str,
    ) -> Result<Option<String>, AuthError> {
        let sa = self.server(server, url);
        if !sa.enabled() {
            return Ok(None);
        }
        let challenge = BearerChallenge::parse(www_authenticate);
        let attempts = {
            let mut m = lock(&self.inner.step_ups);
            let n = m.entry(server.to_string()).or_insert(0);
            *n += 1;
            *n
        };
        let current = self.saved(server, url)?.and_then(|l| l.token.scope);
        let wider = union_scope(current.as_deref(), challenge.scope.as_deref());
        if attempts > MAX_STEP_UPS {
            return Err(AuthError::StepUpExhausted {
                server: server.into(),
                scope: wider.unwrap_or_else(|| "unknown".into()),
                attempts: MAX_AUTHORIZATIONS,
            });
        }
        let grant = sa.grant()?;
        let _one = self.inner.renewing.lock().await;
        let login = if grant.is_machine() {
            self.machine_login(&sa, None, wider).await?
        } else {
            let ui = lock(&self.inner.login_ui).clone();
            let Some(ui) = ui else {
                return Err(AuthError::Config(format!(
                    "`{server}` needs a wider scope ({}): run `switchboard mcp login {server}{}`",
                    wider.as_deref().unwrap_or("unknown"),
                    wider
                        .as_deref()
                        .map(|w| format!(" --scope \"{w}\""))
                        .unwrap_or_default()
                )));
            };
            let mut with_scope = ui.clone();
            with_scope.scopes = wider.as_ref().map(|w| vec![w.clone()]);
            self.authorize(&sa, wider, None, &with_scope).await?
        };
        self.inner.store.put(login.clone()).await?;
        self.cache_put(&login);
        Ok(Some(login.token.access_token))
    }

    /// Removes `server`'s saved login; whether there was one.
    pub async fn logout(&self, server: &str) -> Result<bool, AuthError> {
        self.cache_drop(server);
        self.inner.store.remove(server).await
    }

    /// The authorization state of `server` at `url` as far as the store knows.
    pub fn status(&self, server: &str, url: &str) -> Option<TokenStatus> {
        let sa = self.server(server, url);
        if !sa.enabled() {
            return None;
        }
        let now = now_ms();
        match self.saved(server, url) {
            Ok(Some(l)) if l.is_expired(now) => Some(TokenStatus::Expired),
            Ok(Some(_)) => Some(TokenStatus::Authenticated),
            Ok(None) => match sa.grant() {
                Ok(Grant::Google) => Some(if self.adc().is_ok() {
                    TokenStatus::Authenticated
                } else {
                    TokenStatus::NeedsLogin
                }),
                _ => None,
            },
            Err(_) => None,
        }
    }

    /// Every configured HTTP server and every saved login, with its state.
    pub fn summaries(&self) -> Result<Vec<AuthSummary>, AuthError> {
        let saved = self.inner.store.load_all()?;
        let now = now_ms();
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for sa in self.servers() {
            seen.insert(sa.name.clone());
            let login = saved
                .iter()
                .find(|l| l.server_name == sa.name && l.mcp_server_url == sa.url);
            out.push(summary(&sa, login, now));
        }
        for l in &saved {
            if seen.insert(l.server_name.clone()) {
                let sa = self
                    .configured(&l.server_name)
                    .unwrap_or_else(|| ServerAuth::adhoc(&l.server_name, &l.mcp_server_url));
                out.push(summary(&sa, Some(l), now));
            }
        }
        Ok(out)
    }
}

fn summary(sa: &ServerAuth, login: Option<&StoredLogin>, now: u64) -> AuthSummary {
    let grant = sa.grant().ok();
    let state = if !sa.enabled() {
        "off"
    } else {
        match login {
            Some(l) if l.is_expired(now) && l.token.refresh_token.is_some() => {
                "expired (will refresh)"
            }
            Some(l) if l.is_expired(now) => "expired",
            Some(_) => "authenticated",
            None => "not logged in",
        }
    };
    AuthSummary {
        server: sa.name.clone(),
        url: sa.url.clone(),
        grant,
        state,
        expires_at: login.and_then(|l| l.token.expires_at),
        scope: login.and_then(|l| l.token.scope.clone()),
        has_refresh_token: login.is_some_and(|l| l.token.refresh_token.is_some()),
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
#[allow(clippy::unwrap_used, clippy::expect_used)]
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
        assert_eq!(
            union_scope(Some("a b"), Some("b c")).as_deref(),
            Some("a b c")
        );
        assert_eq!(union_scope(None, None), None);
    }

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
