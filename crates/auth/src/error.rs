//! [`AuthError`]: everything that can go wrong authorizing, each message naming what
//! failed and what to do. No message ever contains a token, a code, a verifier or a
//! client secret: server-provided text is limited to the OAuth `error` code and its
//! `error_description`, and response bodies are described, never quoted.

use std::path::PathBuf;
use std::time::Duration;

/// Why authorizing with a server failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The URL guard refused a URL found during discovery (or a token, registration
    /// or authorization endpoint).
    #[error("{what} {url} is not allowed: {reason}")]
    Blocked {
        what: &'static str,
        url: String,
        reason: String,
    },
    /// An HTTP request failed before an answer came (connect, TLS, timeout).
    #[error("{what} request to {url} failed: {detail}")]
    Http {
        what: &'static str,
        url: String,
        detail: String,
    },
    /// A server answered with something that is not what the RFC says.
    #[error("{what} at {url} returned an invalid response: {reason}")]
    InvalidResponse {
        what: &'static str,
        url: String,
        reason: String,
    },
    /// No OAuth metadata could be found for a server.
    #[error(
        "no OAuth authorization server metadata found for {server_url} (tried {tried}); set `mcpServers.{server}.oauth.authorizationUrl` and `tokenUrl` if the server uses OAuth"
    )]
    NoMetadata {
        server: String,
        server_url: String,
        tried: String,
    },
    /// The protected-resource metadata names another resource than the server URL.
    #[error(
        "refusing to authorize `{server}`: its protected-resource metadata is for `{resource}`, not for the server URL {server_url} (a token for one resource must not be sent to another)"
    )]
    ResourceMismatch {
        server: String,
        server_url: String,
        resource: String,
    },
    /// The authorization server does not offer PKCE with S256.
    #[error(
        "the authorization server {issuer} does not support PKCE with S256 (code_challenge_methods_supported: {methods}); refusing to authorize"
    )]
    NoPkce { issuer: String, methods: String },
    /// No client id is configured and the server does not register clients.
    #[error(
        "no OAuth client for `{server}`: the authorization server {issuer} offers no dynamic client registration; register Switchboard there and set `mcpServers.{server}.oauth.clientId` (and `clientSecret` for a confidential client)"
    )]
    NoClient { server: String, issuer: String },
    /// Dynamic client registration was refused.
    #[error("client registration at {url} was refused (HTTP {status}{}){}", fmt_code(.error), fmt_desc(.description))]
    RegistrationRefused {
        url: String,
        status: u16,
        error: Option<String>,
        description: Option<String>,
    },
    /// The token endpoint refused a request.
    #[error("the token endpoint {url} refused the {grant} request (HTTP {status}{}){}{}", fmt_code(.error), fmt_desc(.description), fmt_hint(.hint))]
    TokenRefused {
        url: String,
        grant: &'static str,
        status: u16,
        error: Option<String>,
        description: Option<String>,
        hint: Option<String>,
    },
    /// The saved login cannot be used any more (refresh token revoked or expired).
    #[error(
        "the saved login for `{server}` is no longer valid ({reason}); log in again with `switchboard mcp login {server}`"
    )]
    LoginAgain { server: String, reason: String },
    /// There is no usable token and getting one needs the user.
    #[error("`{server}` needs a login: run `switchboard mcp login {server}`")]
    NeedsLogin { server: String },
    /// The authorization response's `state` is not the one sent.
    #[error(
        "the authorization response's `state` does not match the request (a stale or forged callback); nothing was saved: run `switchboard mcp login {server}` again"
    )]
    StateMismatch { server: String },
    /// A completion named a `state` with no authorization waiting for it.
    #[error(
        "no login is waiting for this `state`: it is unknown, expired or already used; nothing was saved: start the login again"
    )]
    UnknownState,
    /// The authorization response's `iss` is not the authorization server's issuer.
    #[error(
        "the authorization response came from issuer `{got}`, expected `{expected}` (RFC 9207); nothing was saved"
    )]
    IssuerMismatch { expected: String, got: String },
    /// The user (or the server) denied the authorization.
    #[error("authorization was denied{}{}", fmt_code(.error), fmt_desc(.description))]
    Denied {
        error: Option<String>,
        description: Option<String>,
    },
    /// The callback did not arrive in time.
    #[error(
        "no authorization response arrived at {redirect_uri} within {} s; open the URL shown above in a browser, or raise --timeout", .after.as_secs()
    )]
    CallbackTimeout {
        redirect_uri: String,
        after: Duration,
    },
    /// The callback listener could not be started.
    #[error(
        "cannot listen for the OAuth callback on {addr}: {detail}; choose another port with `mcpServers.{server}.oauth.redirectUri` (e.g. http://localhost:7778/oauth/callback)"
    )]
    Listen {
        server: String,
        addr: String,
        detail: String,
    },
    /// The token store could not be read or written.
    #[error("token store {}: {reason}", .path.display())]
    Store { path: PathBuf, reason: String },
    /// The token store (or its lock file) could not be replaced safely, e.g. it is a
    /// symbolic link.
    #[error("token store: {0}")]
    StoreFile(#[from] switchboard_config::ReplaceError),
    /// A setting is missing or wrong.
    #[error("{0}")]
    Config(String),
    /// A key file for `private_key_jwt` or a Google service account is unusable.
    #[error("{0}")]
    Key(String),
    /// Google Application Default Credentials are missing or unusable.
    #[error("Google credentials: {0}")]
    Google(String),
    /// The server does not ask for authorization.
    #[error(
        "{url} did not ask for authorization (HTTP {status}) and publishes no OAuth metadata: there is nothing to log in to"
    )]
    NotProtected { url: String, status: u16 },
    /// Step-up authorization was attempted too often.
    #[error(
        "`{server}` still answers 403 insufficient_scope (it asks for scope \"{}\") after {attempts} authorizations; giving up. Your account may not be allowed that scope: ask the server's administrator, or log in again with `switchboard mcp login {server} --scope \"{}\"`",
        sanitize(scope),
        sanitize(scope)
    )]
    StepUpExhausted {
        server: String,
        scope: String,
        attempts: u32,
    },
    /// An OpenID Connect sign-in failed (see [`crate::OidcError`]).
    #[error(transparent)]
    SignIn(#[from] crate::oidc::OidcError),
}

fn fmt_code(code: &Option<String>) -> String {
    code.as_deref()
        .map(|c| format!(", `{}`", sanitize(c)))
        .unwrap_or_default()
}

fn fmt_desc(desc: &Option<String>) -> String {
    desc.as_deref()
        .map(|d| format!(": {}", sanitize(d)))
        .unwrap_or_default()
}

fn fmt_hint(hint: &Option<String>) -> String {
    hint.as_deref()
        .map(|h| format!("; {h}"))
        .unwrap_or_default()
}

/// Server-provided text as it may appear in a message: one line, printable, at most
/// 300 characters.
pub(crate) fn sanitize(text: &str) -> String {
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(300)
        .collect();
    if text.chars().count() > 300 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_fix() {
        let e = AuthError::LoginAgain {
            server: "s".into(),
            reason: "invalid_grant".into(),
        };
        assert!(e.to_string().contains("switchboard mcp login s"), "{e}");
        let e = AuthError::TokenRefused {
            url: "http://as/token".into(),
            grant: "refresh_token",
            status: 400,
            error: Some("invalid_grant".into()),
            description: Some("line\nbreak".into()),
            hint: None,
        };
        assert_eq!(
            e.to_string(),
            "the token endpoint http://as/token refused the refresh_token request (HTTP 400, `invalid_grant`): line break"
        );
    }
}
