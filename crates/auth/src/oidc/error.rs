//! [`OidcError`]: what can go wrong signing someone in with OpenID Connect, each message
//! naming what was wrong and what to do. No message contains a token, a code, a PKCE
//! verifier, a nonce or the client secret: claims are named, never quoted, except the
//! issuer, audiences, `kid`, `alg` and the email (which the admin needs to see).

use crate::error::sanitize;

/// Why a sign-in (discovery, the callback, the token exchange or the ID token) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OidcError {
    /// A setting of the sign-in client is missing or wrong.
    #[error("sign-in configuration: {0}")]
    Config(String),
    /// The issuer is not https (http is accepted on loopback only).
    #[error(
        "the issuer `{issuer}` is plain http off loopback: sign-in codes and ID tokens would cross the network unencrypted. Use the issuer's https URL, as the provider documents it (e.g. https://accounts.google.com); http is accepted only on a loopback address (127.0.0.1, ::1, localhost)"
    )]
    InsecureIssuer { issuer: String },
    /// The issuer did not answer within the sign-in time limit.
    #[error(
        "{what} at {url} did not answer within {} s; the issuer is down or unreachable from this server: try again, or check the issuer URL and this server's outbound network", .after.as_secs_f32()
    )]
    Timeout {
        what: &'static str,
        url: String,
        after: std::time::Duration,
    },
    /// The OpenID configuration names another issuer than the configured one.
    #[error(
        "the OpenID configuration at {url} is for issuer `{}`, not the configured `{configured}` (OpenID Discovery §4.3: they must be identical); set the issuer URL to exactly `{}` if that is the provider you mean", sanitize(.published), sanitize(.published)
    )]
    IssuerMismatch {
        url: String,
        configured: String,
        published: String,
    },
    /// The OpenID configuration lacks something sign-in needs.
    #[error(
        "the OpenID configuration at {url} is not usable: {reason}; check that the issuer URL names an OpenID Connect provider"
    )]
    Discovery { url: String, reason: String },
    /// The issuer's key set (JWKS) is unusable.
    #[error(
        "the issuer's key set at {url} is not usable: {reason}; no ID token can be checked until the provider publishes a valid JWKS"
    )]
    Jwks { url: String, reason: String },
    /// The provider answered the authorization request with an error.
    #[error("the provider refused the sign-in (`{}`){}; start the sign-in again", sanitize(.error), .description.as_deref().map(|d| format!(": {}", sanitize(d))).unwrap_or_default())]
    Denied {
        error: String,
        description: Option<String>,
    },
    /// The callback has no authorization code.
    #[error(
        "the sign-in callback has no authorization `code`; start the sign-in again from the sign-in page"
    )]
    NoCode,
    /// The callback's `state` is not the login's.
    #[error(
        "the sign-in callback's `state` does not belong to this login (a stale, replayed or forged callback); nothing was signed in: start the sign-in again"
    )]
    StateMismatch,
    /// The callback's `iss` (RFC 9207) is not the issuer, or is missing though the
    /// provider promises it.
    #[error(
        "the sign-in callback {}, expected `{expected}` (RFC 9207: the answer may come from another provider); nothing was signed in: start the sign-in again", .got.as_deref().map(|g| format!("came from issuer `{}`", sanitize(g))).unwrap_or_else(|| "has no `iss` parameter".into())
    )]
    CallbackIssuer {
        expected: String,
        got: Option<String>,
    },
    /// The token endpoint answered without an ID token.
    #[error(
        "the token endpoint {url} returned no `id_token`: the `openid` scope was not granted; make sure the client may use the `openid` scope at the provider"
    )]
    NoIdToken { url: String },
    /// The ID token is not a well-formed compact JWS.
    #[error("the ID token from {issuer} is malformed ({reason}); nothing was signed in")]
    MalformedIdToken { issuer: String, reason: String },
    /// The ID token is signed with an algorithm that is refused.
    #[error(
        "the ID token from {issuer} uses algorithm `{}`, which is refused ({why}); only RS256 and ES256 signatures are accepted", sanitize(.alg)
    )]
    AlgorithmRefused {
        issuer: String,
        alg: String,
        why: &'static str,
    },
    /// No key of the issuer's JWKS fits the ID token.
    #[error(
        "no key in the issuer's key set {url} fits the ID token (kid {}, alg {alg}), even after reloading it (at most once a minute); sign in again in a minute, and if it persists the provider's JWKS is wrong", .kid.as_deref().map(|k| format!("`{}`", sanitize(k))).unwrap_or_else(|| "absent".into())
    )]
    UnknownKey {
        url: String,
        kid: Option<String>,
        alg: &'static str,
    },
    /// The ID token's signature does not verify.
    #[error(
        "the ID token's signature does not verify against the issuer's key {} ({alg}): it was altered or not issued by {issuer}; nothing was signed in", .kid.as_deref().map(|k| format!("`{}`", sanitize(k))).unwrap_or_else(|| "(no kid)".into())
    )]
    BadSignature {
        issuer: String,
        kid: Option<String>,
        alg: &'static str,
    },
    /// The ID token's `iss` is not the issuer.
    #[error(
        "the ID token was issued by `{}`, not by `{expected}`; nothing was signed in", sanitize(.got)
    )]
    TokenIssuer { expected: String, got: String },
    /// The ID token is not for this client.
    #[error(
        "the ID token is for {}, not for this client `{client_id}`; nothing was signed in (check the configured client id)", .audiences.iter().map(|a| format!("`{}`", sanitize(a))).collect::<Vec<_>>().join(", ")
    )]
    WrongAudience {
        client_id: String,
        audiences: Vec<String>,
    },
    /// The ID token has several audiences and its `azp` is not this client.
    #[error(
        "the ID token has several audiences and its authorized party (`azp`) is {}, not `{client_id}`; nothing was signed in", .azp.as_deref().map(|a| format!("`{}`", sanitize(a))).unwrap_or_else(|| "absent".into())
    )]
    WrongAuthorizedParty {
        client_id: String,
        azp: Option<String>,
    },
    /// The ID token is expired, not yet valid, or issued at an odd time.
    #[error(
        "the ID token {what} (now {now}, allowed clock skew {skew} s); if this repeats, check this machine's and the provider's clocks"
    )]
    TokenTime { what: String, now: i64, skew: i64 },
    /// The ID token's `nonce` is not the one this login sent.
    #[error(
        "the ID token's `nonce` {} the one this sign-in sent (a replayed or injected ID token); nothing was signed in: start the sign-in again", if *.missing { "is missing, unlike" } else { "differs from" }
    )]
    NonceMismatch { missing: bool },
    /// A required claim is missing or of the wrong type.
    #[error("the ID token's `{claim}` claim {problem}; nothing was signed in")]
    Claim {
        claim: &'static str,
        problem: &'static str,
    },
    /// The ID token carries no email.
    #[error(
        "the provider gave no email for account `{}`: request the `email` scope (configured scopes: {scopes}) and make sure the provider releases the `email` and `email_verified` claims in the ID token", sanitize(.subject)
    )]
    NoEmail { subject: String, scopes: String },
    /// The ID token's email is not verified.
    #[error(
        "the email `{}` is not verified by the provider (`email_verified` is {}); the user must verify it with the provider, or the provider must release `email_verified` (with the `email` scope) before they can sign in", sanitize(.email), if *.claim_present { "false" } else { "absent" }
    )]
    EmailNotVerified { email: String, claim_present: bool },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_fix_and_hide_secrets() {
        let e = OidcError::NoEmail {
            subject: "1234".into(),
            scopes: "openid profile".into(),
        };
        let text = e.to_string();
        assert!(text.contains("`email` scope"), "{text}");
        assert!(text.contains("openid profile"), "{text}");
        let e = OidcError::NonceMismatch { missing: false };
        assert!(e.to_string().contains("start the sign-in again"));
        let e = OidcError::WrongAudience {
            client_id: "me".into(),
            audiences: vec!["them\nx".into()],
        };
        assert_eq!(
            e.to_string(),
            "the ID token is for `them x`, not for this client `me`; nothing was signed in (check the configured client id)"
        );
    }
}
