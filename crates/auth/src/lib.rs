//! `switchboard-auth`: OAuth 2.1 for MCP servers.
//!
//! - [`AuthManager`]: tokens per server, the [`switchboard_mcp::TokenSource`] that
//!   HTTP connections ask before every request; logins ([`AuthManager::login`]),
//!   refresh (before expiry and after a 401), step-up on `insufficient_scope`,
//!   logout and status.
//! - Discovery ([`DiscoveryClient::discover`]): RFC 9728 protected-resource metadata, RFC 8414 /
//!   OpenID authorization-server metadata, the 2025-03-26 fallbacks; the metadata's
//!   `resource` must match the server URL.
//! - Clients: configured `oauth.clientId` (an `https://` id is a Client ID Metadata
//!   Document), else RFC 7591 registration as the public client "Switchboard".
//! - Grants: authorization code with PKCE S256, `state` and RFC 8707 `resource`
//!   through a loopback callback ([`CallbackListener`]), or split in two for an app's
//!   own callback page ([`AuthManager::begin_authorization`] /
//!   [`AuthManager::complete_authorization`], the verifier and secret kept here,
//!   keyed by `state`); refresh token;
//!   `client_credentials`; the enterprise jwt-bearer grant (an ID-JAG from the
//!   configured identity provider); Google Application Default Credentials.
//! - Token endpoint authentication: `client_secret_basic`, `client_secret_post`,
//!   `none`, `private_key_jwt` (ES256 or RS256 from `oauth.privateKeyFile`).
//! - [`TokenStore`]: `$SWITCHBOARD_HOME/mcp-oauth-tokens.json`, mode 0600, atomic
//!   writes, an exclusive `flock` held across every refresh; with the `keyring` feature
//!   and `SWITCHBOARD_TOKEN_STORE=keyring`, secrets in the OS keyring instead
//!   ([`TokenStore::from_env`]).
//!
//! - Sign-in with OpenID Connect ([`OidcClient`]: discovery, authorization code with
//!   PKCE, ID token validation against the issuer's JWKS) and who may enter
//!   ([`SignInPolicy`]), for the team server.
//!
//! Every request goes through the URL guard ([`switchboard_net::GuardedClient`]).
//! Tokens never appear in logs, `Debug` output or error messages.

mod browser;
mod browser_client;
mod callback;
mod challenge;
mod crypto;
mod discovery;
mod error;
mod google;
mod http;
#[cfg(feature = "keyring")]
mod keyring;
mod manager;
mod oidc;
mod store;
mod token;

pub use browser::open_in_browser;
pub use browser_client::{
    BrowserClientConfig, BrowserClientOptions, FALLBACK_CLIENT_ID, OAuthDiscovery,
};
pub use callback::{CallbackListener, CallbackParams, DEFAULT_REDIRECT_URI};
pub use challenge::{BearerChallenge, Challenge, parse_challenges};
pub use discovery::{
    Discovery, MetadataSource, Overrides, ResourceMetadata, ServerMetadata, resource_matches,
};
pub use error::AuthError;
pub use google::{DEFAULT_GOOGLE_SCOPES, GOOGLE_TOKEN_URI, adc_path};
pub use manager::{
    AuthManager, AuthSummary, Authorization, CompletedAuthorization, Grant, LoginOptions,
    LoginReport, MAX_AUTHORIZATIONS, MAX_STEP_UPS, OpenUrl, PENDING_TTL, PendingAuthorizations,
    ServerAuth,
};
pub use oidc::{
    Access, ClientSecret, DEFAULT_SIGN_IN_SCOPES, Identity, LoginStart, OidcClient, OidcConfig,
    OidcError, PendingSignIn, Refusal, SignInCallback, SignInPolicy,
};
pub use store::{
    KEYRING_SERVICE, REFRESH_MARGIN, SecretBackend, Stamp, StoreLock, StoredLogin, TOKEN_FILE,
    TOKEN_STORE_ENV, TokenSet, TokenStore, keyring_account, now_ms,
};
pub use token::{AuthMethod, JWT_BEARER_GRANT, choose_auth_method};

/// OAuth discovery through the URL guard.
#[derive(Debug, Clone)]
pub struct DiscoveryClient(http::Http);

impl DiscoveryClient {
    /// A discovery client over `client`.
    pub fn new(client: switchboard_net::GuardedClient) -> Self {
        Self(http::Http::new(client))
    }

    /// Runs discovery for `server` at `server_url` after `challenge`.
    pub async fn discover(
        &self,
        server: &str,
        server_url: &str,
        challenge: BearerChallenge,
        overrides: &Overrides,
    ) -> Result<Discovery, AuthError> {
        discovery::discover(&self.0, server, server_url, challenge, overrides).await
    }

    /// Everything a browser needs to start an authorization-code login with `server`
    /// at `server_url` after its 401 (`www_authenticate`): discovery, then the
    /// client (configured, registered for `redirect_uri`, or [`FALLBACK_CLIENT_ID`]).
    /// GemiHub's `oauthDiscovery` object; it holds no secret.
    pub async fn browser_client(
        &self,
        server: &str,
        server_url: &str,
        www_authenticate: Option<&str>,
        redirect_uri: &str,
        options: &BrowserClientOptions,
    ) -> Result<OAuthDiscovery, AuthError> {
        browser_client::browser_client(
            &self.0,
            server,
            server_url,
            www_authenticate,
            redirect_uri,
            options,
        )
        .await
    }
}
