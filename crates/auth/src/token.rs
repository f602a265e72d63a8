//! The token endpoint (RFC 6749 §3.2, §5): client authentication chosen from what the
//! server supports (`client_secret_basic`, `client_secret_post`, `none`,
//! `private_key_jwt` per RFC 7523 §2.2), requests for every grant, and strict reading
//! of the answer. Also dynamic client registration (RFC 7591). A `private_key_jwt`
//! assertion's `aud` is the authorization server's issuer (the token URL only when no
//! metadata named one).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::crypto::{SigningKey, random_token};
use crate::error::AuthError;
use crate::http::{Http, Reply, basic_auth, shown};
use crate::store::now_ms;

/// RFC 7523 client assertion type.
pub(crate) const JWT_ASSERTION_TYPE: &str =
    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// RFC 7523 §2.1 grant type (also the enterprise ID-JAG grant).
pub const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// RFC 8693 token exchange.
pub(crate) const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";

/// How the client proves itself at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    None,
    ClientSecretBasic,
    ClientSecretPost,
    PrivateKeyJwt,
}

impl AuthMethod {
    /// The RFC 7591 name.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::None => "none",
            AuthMethod::ClientSecretBasic => "client_secret_basic",
            AuthMethod::ClientSecretPost => "client_secret_post",
            AuthMethod::PrivateKeyJwt => "private_key_jwt",
        }
    }

    /// Parses an RFC 7591 name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "none" => AuthMethod::None,
            "client_secret_basic" => AuthMethod::ClientSecretBasic,
            "client_secret_post" => AuthMethod::ClientSecretPost,
            "private_key_jwt" => AuthMethod::PrivateKeyJwt,
            _ => return None,
        })
    }
}

/// Picks the token endpoint authentication method: the configured one, else the one
/// the registration confirmed, else from the credentials we have and what the server
/// lists (`client_secret_basic` preferred, the RFC 6749 default).
pub fn choose_auth_method(
    configured: Option<&str>,
    registered: Option<&str>,
    has_secret: bool,
    has_key: bool,
    supported: Option<&[String]>,
) -> Result<AuthMethod, AuthError> {
    let check = |m: AuthMethod, from: &str| -> Result<AuthMethod, AuthError> {
        match m {
            AuthMethod::ClientSecretBasic | AuthMethod::ClientSecretPost if !has_secret => {
                Err(AuthError::Config(format!(
                    "{from} `{}` needs `oauth.clientSecret`",
                    m.as_str()
                )))
            }
            AuthMethod::PrivateKeyJwt if !has_key => Err(AuthError::Config(format!(
                "{from} `private_key_jwt` needs `oauth.privateKeyFile`"
            ))),
            m => Ok(m),
        }
    };
    if let Some(c) = configured {
        let m = AuthMethod::parse(c).ok_or_else(|| {
            AuthError::Config(format!(
                "`oauth.tokenEndpointAuthMethod` `{c}` is not one of client_secret_basic, client_secret_post, private_key_jwt, none"
            ))
        })?;
        return check(m, "`oauth.tokenEndpointAuthMethod`");
    }
    let lists = |m: AuthMethod| supported.is_some_and(|s| s.iter().any(|x| x == m.as_str()));
    if let Some(m) = registered.and_then(AuthMethod::parse)
        && check(m, "the registered method").is_ok()
    {
        return Ok(m);
    }
    if has_key && (supported.is_none() || lists(AuthMethod::PrivateKeyJwt)) {
        return Ok(AuthMethod::PrivateKeyJwt);
    }
    if has_secret {
        if supported.is_none() || lists(AuthMethod::ClientSecretBasic) {
            return Ok(AuthMethod::ClientSecretBasic);
        }
        if lists(AuthMethod::ClientSecretPost) {
            return Ok(AuthMethod::ClientSecretPost);
        }
        return Ok(AuthMethod::ClientSecretBasic);
    }
    Ok(AuthMethod::None)
}

/// A client as the token endpoint sees it.
#[derive(Clone)]
pub struct ClientCreds {
    pub id: String,
    pub secret: Option<String>,
    pub method: AuthMethod,
    pub key: Option<Arc<SigningKey>>,
    /// The authorization server's issuer identifier (from its RFC 8414 metadata): the
    /// `aud` of a `private_key_jwt` client assertion. `None` only when no metadata was
    /// read (`oauth.tokenUrl` configured); the assertion is then addressed to the token
    /// endpoint URL, which RFC 7523 §3 also allows.
    pub issuer: Option<String>,
}

impl std::fmt::Debug for ClientCreds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCreds")
            .field("id", &self.id)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("method", &self.method)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

/// What the token endpoint gave.
#[derive(Clone)]
pub struct TokenResponse {
    pub access_token: String,
    pub token_type: String,
    pub expires_in: Option<u64>,
    pub refresh_token: Option<String>,
    pub scope: Option<String>,
    pub issued_token_type: Option<String>,
    /// The OpenID Connect ID token (OIDC Core §3.1.3.3), when the answer has one.
    pub id_token: Option<String>,
}

impl std::fmt::Debug for TokenResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenResponse")
            .field("token_type", &self.token_type)
            .field("expires_in", &self.expires_in)
            .field("has_refresh_token", &self.refresh_token.is_some())
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl TokenResponse {
    /// Expiry in ms since the epoch.
    pub fn expires_at(&self, now: u64) -> Option<u64> {
        self.expires_in
            .map(|s| now.saturating_add(s.saturating_mul(1000)))
    }
}

/// The parameters and headers that authenticate `client`.
fn client_auth(
    client: &ClientCreds,
    token_url: &str,
    form: &mut Vec<(String, String)>,
) -> Result<Option<String>, AuthError> {
    form.push(("client_id".into(), client.id.clone()));
    match client.method {
        AuthMethod::None => Ok(None),
        AuthMethod::ClientSecretBasic => {
            Ok(client.secret.as_deref().map(|s| basic_auth(&client.id, s)))
        }
        AuthMethod::ClientSecretPost => {
            if let Some(s) = &client.secret {
                form.push(("client_secret".into(), s.clone()));
            }
            Ok(None)
        }
        AuthMethod::PrivateKeyJwt => {
            let key = client.key.as_ref().ok_or_else(|| {
                AuthError::Config("`private_key_jwt` needs `oauth.privateKeyFile`".into())
            })?;
            // RFC 7523bis / the MCP authorization guidance: the audience is the
            // authorization server's issuer identifier, not its token endpoint.
            let audience = client.issuer.as_deref().unwrap_or(token_url);
            let now = now_ms() / 1000;
            let claims = json!({
                "iss": client.id,
                "sub": client.id,
                "aud": audience,
                "jti": random_token(16)?,
                "iat": now,
                "exp": now + 300,
            });
            form.push(("client_assertion_type".into(), JWT_ASSERTION_TYPE.into()));
            form.push(("client_assertion".into(), key.sign_jwt(&claims, None)?));
            Ok(None)
        }
    }
}

/// The OAuth error fields of a failed answer.
pub(crate) fn oauth_error(reply: &Reply) -> (Option<String>, Option<String>) {
    match reply.json_object() {
        Ok(m) => (
            m.get("error").and_then(Value::as_str).map(str::to_string),
            m.get("error_description")
                .and_then(Value::as_str)
                .map(str::to_string),
        ),
        Err(_) => (None, None),
    }
}

/// Reads a successful token answer strictly.
fn parse_token_response(
    url: &str,
    reply: &Reply,
    expect_bearer: bool,
) -> Result<TokenResponse, AuthError> {
    let invalid = |reason: String| AuthError::InvalidResponse {
        what: "the token endpoint",
        url: shown(url),
        reason,
    };
    let m: Map<String, Value> = reply.json_object().map_err(invalid)?;
    let access_token = m
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| invalid("it has no `access_token`".into()))?
        .to_string();
    let token_type = match m.get("token_type") {
        Some(Value::String(s)) => s.clone(),
        None => "Bearer".into(),
        Some(_) => return Err(invalid("`token_type` is not a string".into())),
    };
    if expect_bearer && !token_type.eq_ignore_ascii_case("bearer") {
        return Err(invalid(format!(
            "token type `{}` is not supported (only Bearer)",
            crate::error::sanitize(&token_type)
        )));
    }
    let expires_in = match m.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(
            n.as_u64()
                .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
                .ok_or_else(|| invalid("`expires_in` is not a positive number".into()))?,
        ),
        Some(Value::String(s)) => Some(
            s.trim()
                .parse::<u64>()
                .map_err(|_| invalid("`expires_in` is not a number".into()))?,
        ),
        Some(_) => return Err(invalid("`expires_in` is not a number".into())),
    };
    let text = |k: &str| -> Result<Option<String>, AuthError> {
        match m.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(invalid(format!("`{k}` is not a string"))),
        }
    };
    Ok(TokenResponse {
        access_token,
        token_type,
        expires_in,
        refresh_token: text("refresh_token")?,
        scope: text("scope")?,
        issued_token_type: text("issued_token_type")?,
        id_token: text("id_token")?,
    })
}

/// One token request. `grant` is for messages (`authorization_code`,
/// `refresh_token`…); `params` hold the grant's own parameters.
pub(crate) async fn request_token(
    http: &Http,
    token_url: &str,
    grant: &'static str,
    mut params: Vec<(String, String)>,
    client: Option<&ClientCreds>,
    expect_bearer: bool,
) -> Result<TokenResponse, AuthError> {
    let basic = match client {
        Some(c) => client_auth(c, token_url, &mut params)?,
        None => None,
    };
    let reply = http
        .post_form("the token endpoint", token_url, &params, basic)
        .await?;
    if reply.is_success() {
        return parse_token_response(token_url, &reply, expect_bearer);
    }
    let (error, description) = oauth_error(&reply);
    let hint = match (grant, error.as_deref()) {
        ("authorization_code", Some("invalid_grant")) => Some(
            "the authorization code was refused (wrong PKCE code verifier, expired or already used code, or another redirect URI)".into(),
        ),
        (_, Some("invalid_client")) => Some(
            "the client was not accepted: check `oauth.clientId`, `clientSecret` and `tokenEndpointAuthMethod`".into(),
        ),
        (_, Some("unsupported_grant_type")) => {
            Some(format!("the authorization server does not allow the {grant} grant"))
        }
        _ => None,
    };
    Err(AuthError::TokenRefused {
        url: shown(token_url),
        grant,
        status: reply.status,
        error,
        description,
        hint,
    })
}

/// A client registered with RFC 7591.
#[derive(Clone)]
pub struct Registered {
    pub client_id: String,
    pub client_secret: Option<String>,
    pub auth_method: Option<String>,
}

impl std::fmt::Debug for Registered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registered")
            .field("client_id", &self.client_id)
            .field("auth_method", &self.auth_method)
            .finish_non_exhaustive()
    }
}

/// Registers Switchboard as a public client (RFC 7591 §3.1) with the
/// `authorization_code` and `refresh_token` grants.
pub(crate) async fn register(
    http: &Http,
    registration_url: &str,
    redirect_uri: &str,
    scope: Option<&str>,
) -> Result<Registered, AuthError> {
    let mut body = json!({
        "client_name": "Switchboard",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
        "software_id": "switchboard",
        "software_version": env!("CARGO_PKG_VERSION"),
    });
    if let Some(s) = scope.filter(|s| !s.is_empty()) {
        body["scope"] = Value::from(s);
    }
    let reply = http
        .post_json("client registration", registration_url, &body)
        .await?;
    if !reply.is_success() {
        let (error, description) = oauth_error(&reply);
        return Err(AuthError::RegistrationRefused {
            url: shown(registration_url),
            status: reply.status,
            error,
            description,
        });
    }
    let m = reply
        .json_object()
        .map_err(|reason| AuthError::InvalidResponse {
            what: "client registration",
            url: shown(registration_url),
            reason,
        })?;
    let client_id = m
        .get("client_id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| AuthError::InvalidResponse {
            what: "client registration",
            url: shown(registration_url),
            reason: "it has no `client_id`".into(),
        })?
        .to_string();
    Ok(Registered {
        client_id,
        client_secret: m
            .get("client_secret")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        auth_method: m
            .get("token_endpoint_auth_method")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderMap;

    use super::*;

    fn reply(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: HeaderMap::new(),
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn method_choice() {
        let both = vec![
            "client_secret_post".to_string(),
            "client_secret_basic".to_string(),
        ];
        let post = vec!["client_secret_post".to_string()];
        assert_eq!(
            choose_auth_method(None, None, true, false, Some(&both)).unwrap(),
            AuthMethod::ClientSecretBasic
        );
        assert_eq!(
            choose_auth_method(None, None, true, false, Some(&post)).unwrap(),
            AuthMethod::ClientSecretPost
        );
        assert_eq!(
            choose_auth_method(None, None, false, false, Some(&post)).unwrap(),
            AuthMethod::None
        );
        assert_eq!(
            choose_auth_method(None, Some("none"), false, false, Some(&post)).unwrap(),
            AuthMethod::None
        );
        assert_eq!(
            choose_auth_method(None, Some("client_secret_post"), true, false, None).unwrap(),
            AuthMethod::ClientSecretPost
        );
        assert_eq!(
            choose_auth_method(None, None, false, true, None).unwrap(),
            AuthMethod::PrivateKeyJwt
        );
        assert_eq!(
            choose_auth_method(Some("client_secret_post"), None, true, false, None).unwrap(),
            AuthMethod::ClientSecretPost
        );
        let e =
            choose_auth_method(Some("client_secret_basic"), None, false, false, None).unwrap_err();
        assert!(e.to_string().contains("clientSecret"), "{e}");
        let e = choose_auth_method(Some("tls_client_auth"), None, false, false, None).unwrap_err();
        assert!(e.to_string().contains("tokenEndpointAuthMethod"), "{e}");
    }

    #[test]
    fn token_answers_are_read_strictly() {
        let ok = parse_token_response(
            "http://as/token",
            &reply(
                200,
                r#"{"access_token":"a","token_type":"bearer","expires_in":"60","refresh_token":"r","scope":"x y"}"#,
            ),
            true,
        )
        .unwrap();
        assert_eq!(ok.expires_in, Some(60));
        assert_eq!(ok.refresh_token.as_deref(), Some("r"));
        for (body, want) in [
            ("<html>oops</html>", "not JSON"),
            ("[]", "expected a JSON object"),
            (r#"{"token_type":"Bearer"}"#, "no `access_token`"),
            (r#"{"access_token":"a","token_type":"mac"}"#, "only Bearer"),
            (r#"{"access_token":"a","expires_in":"soon"}"#, "expires_in"),
        ] {
            let e = parse_token_response("http://as/token", &reply(200, body), true).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(want), "{body}: {text}");
            assert!(!text.contains("oops"), "bodies are never quoted: {text}");
        }
    }
}
