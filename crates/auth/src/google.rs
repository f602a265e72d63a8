//! Google Application Default Credentials (`authProviderType: google_credentials`):
//! the JSON file named by `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's
//! `application_default_credentials.json`. A service account signs an RS256 JWT and
//! trades it at the file's `token_uri` (RFC 7523 §2.1 grant); an authorized user
//! trades its refresh token there. No browser, nothing stored by gcloud is changed.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::crypto::SigningKey;
use crate::error::AuthError;
use crate::http::Http;
use crate::store::now_ms;
use crate::token::{JWT_BEARER_GRANT, TokenResponse, request_token};

/// Google's token endpoint, when the file names none.
pub const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// The scope used when none is configured.
pub const DEFAULT_GOOGLE_SCOPES: &[&str] = &[
    "https://www.googleapis.com/auth/cloud-platform",
    "https://www.googleapis.com/auth/userinfo.email",
];

/// Loaded credentials.
pub(crate) enum Adc {
    ServiceAccount {
        client_email: String,
        key: SigningKey,
        key_id: Option<String>,
        token_uri: String,
    },
    AuthorizedUser {
        client_id: String,
        client_secret: String,
        refresh_token: String,
        token_uri: String,
    },
}

impl std::fmt::Debug for Adc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Adc::ServiceAccount { client_email, .. } => f
                .debug_struct("ServiceAccount")
                .field("client_email", client_email)
                .finish_non_exhaustive(),
            Adc::AuthorizedUser { client_id, .. } => f
                .debug_struct("AuthorizedUser")
                .field("client_id", client_id)
                .finish_non_exhaustive(),
        }
    }
}

impl Adc {
    pub fn token_uri(&self) -> &str {
        match self {
            Adc::ServiceAccount { token_uri, .. } | Adc::AuthorizedUser { token_uri, .. } => {
                token_uri
            }
        }
    }

    /// Who the token is for (for display).
    pub fn principal(&self) -> &str {
        match self {
            Adc::ServiceAccount { client_email, .. } => client_email,
            Adc::AuthorizedUser { client_id, .. } => client_id,
        }
    }
}

/// Where the credentials file is: `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's
/// default path (`$CLOUDSDK_CONFIG` or `~/.config/gcloud`).
pub fn adc_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GOOGLE_APPLICATION_CREDENTIALS").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let dir = match std::env::var_os("CLOUDSDK_CONFIG").filter(|p| !p.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME")?)
            .join(".config")
            .join("gcloud"),
    };
    Some(dir.join("application_default_credentials.json"))
}

/// Loads the credentials file (`path`, else [`adc_path`]).
pub(crate) fn load_adc(path: Option<PathBuf>) -> Result<(PathBuf, Adc), AuthError> {
    let path = path.or_else(adc_path).ok_or_else(|| {
        AuthError::Google(
            "no credentials: set GOOGLE_APPLICATION_CREDENTIALS or run `gcloud auth application-default login`".into(),
        )
    })?;
    let text = std::fs::read_to_string(&path).map_err(|e| {
        AuthError::Google(format!(
            "cannot read {} ({e}); set GOOGLE_APPLICATION_CREDENTIALS or run `gcloud auth application-default login`",
            path.display()
        ))
    })?;
    let adc = parse_adc(&text, &path.display().to_string())?;
    Ok((path, adc))
}

fn parse_adc(text: &str, origin: &str) -> Result<Adc, AuthError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|_| AuthError::Google(format!("{origin} is not a JSON credentials file")))?;
    let field = |k: &str| -> Result<String, AuthError> {
        v.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or_else(|| AuthError::Google(format!("{origin} has no `{k}`")))
    };
    let token_uri = v
        .get("token_uri")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(GOOGLE_TOKEN_URI)
        .to_string();
    match v.get("type").and_then(Value::as_str) {
        Some("service_account") => {
            let pem = field("private_key")?;
            let key = SigningKey::from_pem(&pem, Some("RS256"), &format!("{origin} private_key"))?;
            Ok(Adc::ServiceAccount {
                client_email: field("client_email")?,
                key,
                key_id: v
                    .get("private_key_id")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                token_uri,
            })
        }
        Some("authorized_user") => Ok(Adc::AuthorizedUser {
            client_id: field("client_id")?,
            client_secret: field("client_secret")?,
            refresh_token: field("refresh_token")?,
            token_uri,
        }),
        Some(other) => Err(AuthError::Google(format!(
            "{origin}: credentials of type `{other}` are not supported (use a service account key or `gcloud auth application-default login`)"
        ))),
        None => Err(AuthError::Google(format!("{origin} has no `type`"))),
    }
}

/// Gets an access token for `scopes`.
pub(crate) async fn fetch_token(
    http: &Http,
    adc: &Adc,
    scopes: &[String],
) -> Result<TokenResponse, AuthError> {
    match adc {
        Adc::ServiceAccount {
            client_email,
            key,
            key_id,
            token_uri,
        } => {
            let now = now_ms() / 1000;
            let claims = json!({
                "iss": client_email,
                "scope": scopes.join(" "),
                "aud": token_uri,
                "iat": now,
                "exp": now + 3600,
            });
            let assertion = key.sign_jwt(&claims, key_id.as_deref())?;
            let params = vec![
                ("grant_type".into(), JWT_BEARER_GRANT.into()),
                ("assertion".into(), assertion),
            ];
            request_token(http, token_uri, "jwt-bearer", params, None, true).await
        }
        Adc::AuthorizedUser {
            client_id,
            client_secret,
            refresh_token,
            token_uri,
        } => {
            let params = vec![
                ("grant_type".into(), "refresh_token".into()),
                ("client_id".into(), client_id.clone()),
                ("client_secret".into(), client_secret.clone()),
                ("refresh_token".into(), refresh_token.clone()),
            ];
            request_token(http, token_uri, "refresh_token", params, None, true).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_problems_are_clear() {
        let e = parse_adc("{", "adc.json").unwrap_err().to_string();
        assert!(e.contains("not a JSON credentials file"), "{e}");
        let e = parse_adc(r#"{"type":"external_account"}"#, "adc.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not supported"), "{e}");
        let e = parse_adc(r#"{"type":"authorized_user","client_id":"c"}"#, "adc.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("client_secret"), "{e}");
        let a = parse_adc(
            r#"{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r"}"#,
            "adc.json",
        )
        .unwrap();
        assert_eq!(a.token_uri(), GOOGLE_TOKEN_URI);
        assert!(!format!("{a:?}").contains("\"r\""));
    }
}
