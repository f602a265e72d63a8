//! ID token validation (OIDC Core §3.1.3.7): the compact JWS is split and its header
//! read ([`parse`]), the signature checked with the issuer's key by the caller, then the
//! claims are read in two steps (raw serde, then [`Claims`]) and checked against what
//! this login expects ([`check_claims`]): `iss` (exactly the published issuer; Google's
//! documented bare `accounts.google.com` aside), `aud`/`azp`, `exp`/`iat`/`nbf` with a
//! small clock skew, `nonce`, then the email. Pure functions, no I/O.
//!
//! Header: `alg` RS256 or ES256 only (`none` and `HS*` refused: an HMAC key would be the
//! client secret), and a `crit` header refused. Limits: a token of at most 16 KiB
//! ([`MAX_LEN`]); `iat` at most [`MAX_AGE`] (10 min) ago; [`CLOCK_SKEW`] (60 s) for
//! `exp`, `iat` and `nbf`; the email must be verified (`email_verified` true, or the
//! string `"true"`). The `nonce` is compared without an early exit. Tokens and nonces
//! never appear in errors.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use serde_json::Value;

use super::Identity;
use super::error::OidcError;
use super::jwks::Alg;

/// The clock skew allowed between this machine and the issuer, in seconds.
pub(crate) const CLOCK_SKEW: i64 = 60;
/// An ID token issued longer ago than this (seconds) is refused: the code flow hands
/// over a fresh one.
pub(crate) const MAX_AGE: i64 = 600;
/// The largest ID token accepted, in bytes.
pub(crate) const MAX_LEN: usize = 16 * 1024;

/// A compact JWS, split.
pub(crate) struct Jws<'a> {
    pub alg: Alg,
    pub kid: Option<String>,
    /// `header.payload`, the signed bytes.
    pub signed: &'a str,
    pub payload: Vec<u8>,
    pub signature: Vec<u8>,
}

#[derive(Deserialize)]
struct RawHeader {
    alg: Option<String>,
    kid: Option<String>,
    crit: Option<Value>,
}

/// Splits `token` and reads its header; refuses `none`, HMAC and anything but RS256
/// and ES256.
pub(crate) fn parse<'a>(issuer: &str, token: &'a str) -> Result<Jws<'a>, OidcError> {
    let malformed = |reason: &str| OidcError::MalformedIdToken {
        issuer: issuer.to_string(),
        reason: reason.to_string(),
    };
    if token.len() > MAX_LEN {
        return Err(malformed("it is longer than 16 KiB"));
    }
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed(
            "it is not three dot-separated parts (a JWE or not a JWT)",
        ));
    };
    let decode = |part: &str, what: &str| {
        URL_SAFE_NO_PAD
            .decode(part)
            .map_err(|_| malformed(&format!("its {what} is not base64url")))
    };
    let header: RawHeader = serde_json::from_slice(&decode(h, "header")?)
        .map_err(|_| malformed("its header is not a JSON object"))?;
    if header.crit.is_some() {
        return Err(malformed(
            "its header has `crit` extensions, which are not understood",
        ));
    }
    let alg_name = header
        .alg
        .ok_or_else(|| malformed("its header has no `alg`"))?;
    let refused = |why: &'static str| OidcError::AlgorithmRefused {
        issuer: issuer.to_string(),
        alg: alg_name.clone(),
        why,
    };
    let alg = match alg_name.as_str() {
        "RS256" => Alg::Rs256,
        "ES256" => Alg::Es256,
        a if a.eq_ignore_ascii_case("none") => {
            return Err(refused("an unsigned token proves nothing"));
        }
        a if a.starts_with("HS") => {
            return Err(refused(
                "an HMAC token is keyed with the client secret, not the issuer's published keys",
            ));
        }
        _ => return Err(refused("not supported")),
    };
    let payload = decode(p, "payload")?;
    let signature = decode(s, "signature")?;
    Ok(Jws {
        alg,
        kid: header.kid,
        signed: &token[..h.len() + 1 + p.len()],
        payload,
        signature,
    })
}

/// `aud`: one string or an array of strings.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawAudience {
    One(String),
    Many(Vec<String>),
}

/// `email_verified`: a boolean, or (some providers) the string "true"/"false".
#[derive(Deserialize)]
#[serde(untagged)]
enum RawBool {
    Bool(bool),
    Text(String),
}

#[derive(Deserialize)]
struct RawClaims {
    iss: Option<String>,
    sub: Option<String>,
    aud: Option<RawAudience>,
    azp: Option<String>,
    exp: Option<serde_json::Number>,
    iat: Option<serde_json::Number>,
    nbf: Option<serde_json::Number>,
    nonce: Option<String>,
    email: Option<String>,
    email_verified: Option<RawBool>,
    name: Option<String>,
}

/// What this login expects of the ID token.
pub(crate) struct Expected<'a> {
    pub issuer: &'a str,
    pub client_id: &'a str,
    pub nonce: &'a str,
    /// The configured scopes, for the message when the email is missing.
    pub scopes: &'a str,
    /// Now, in unix seconds.
    pub now: i64,
}

fn seconds(claim: &'static str, n: Option<&serde_json::Number>) -> Result<Option<i64>, OidcError> {
    match n {
        None => Ok(None),
        Some(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
            .map(Some)
            .ok_or(OidcError::Claim {
                claim,
                problem: "is not a number of seconds",
            }),
    }
}

/// Google documents `iss` as `https://accounts.google.com` or, in some ID tokens, the
/// bare `accounts.google.com`; every other issuer must match exactly (OIDC Core
/// §3.1.3.7).
const GOOGLE_ISSUER: &str = "https://accounts.google.com";

fn issuer_matches(issuer: &str, iss: &str) -> bool {
    iss == issuer || (issuer == GOOGLE_ISSUER && iss == "accounts.google.com")
}

/// Equal without an early exit on the first differing byte.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Checks the verified payload's claims and returns who signed in.
pub(crate) fn check_claims(payload: &[u8], want: &Expected<'_>) -> Result<Identity, OidcError> {
    let raw: RawClaims =
        serde_json::from_slice(payload).map_err(|_| OidcError::MalformedIdToken {
            issuer: want.issuer.to_string(),
            reason: "its payload is not a JSON object of the expected claim types".into(),
        })?;
    let iss = raw.iss.ok_or(OidcError::Claim {
        claim: "iss",
        problem: "is missing",
    })?;
    if !issuer_matches(want.issuer, &iss) {
        return Err(OidcError::TokenIssuer {
            expected: want.issuer.to_string(),
            got: iss,
        });
    }
    let audiences = match raw.aud {
        Some(RawAudience::One(a)) => vec![a],
        Some(RawAudience::Many(a)) => a,
        None => Vec::new(),
    };
    if !audiences.iter().any(|a| a == want.client_id) {
        return Err(OidcError::WrongAudience {
            client_id: want.client_id.to_string(),
            audiences,
        });
    }
    // OIDC Core §3.1.3.7 (4, 5): with several audiences `azp` must name us; when
    // present it must name us anyway.
    if (audiences.len() > 1 || raw.azp.is_some()) && raw.azp.as_deref() != Some(want.client_id) {
        return Err(OidcError::WrongAuthorizedParty {
            client_id: want.client_id.to_string(),
            azp: raw.azp,
        });
    }
    let time = |what: String| OidcError::TokenTime {
        what,
        now: want.now,
        skew: CLOCK_SKEW,
    };
    let exp = seconds("exp", raw.exp.as_ref())?.ok_or(OidcError::Claim {
        claim: "exp",
        problem: "is missing",
    })?;
    if exp <= want.now - CLOCK_SKEW {
        return Err(time(format!("expired at {exp}")));
    }
    let iat = seconds("iat", raw.iat.as_ref())?.ok_or(OidcError::Claim {
        claim: "iat",
        problem: "is missing",
    })?;
    if iat > want.now + CLOCK_SKEW {
        return Err(time(format!("claims to be issued in the future, at {iat}")));
    }
    if iat < want.now - MAX_AGE - CLOCK_SKEW {
        return Err(time(format!(
            "was issued at {iat}, more than {MAX_AGE} s ago (a fresh one comes with every sign-in)"
        )));
    }
    if let Some(nbf) = seconds("nbf", raw.nbf.as_ref())?
        && nbf > want.now + CLOCK_SKEW
    {
        return Err(time(format!("is not valid before {nbf}")));
    }
    match raw.nonce.as_deref() {
        None | Some("") => return Err(OidcError::NonceMismatch { missing: true }),
        Some(_) if want.nonce.is_empty() => {
            return Err(OidcError::NonceMismatch { missing: false });
        }
        Some(n) if !same(n, want.nonce) => {
            return Err(OidcError::NonceMismatch { missing: false });
        }
        Some(_) => {}
    }
    let subject = raw.sub.filter(|s| !s.is_empty()).ok_or(OidcError::Claim {
        claim: "sub",
        problem: "is missing or empty",
    })?;
    let email = raw
        .email
        .map(|e| e.trim().to_string())
        .filter(|e| e.contains('@'))
        .ok_or_else(|| OidcError::NoEmail {
            subject: subject.clone(),
            scopes: want.scopes.to_string(),
        })?;
    let verified = match raw.email_verified {
        Some(RawBool::Bool(b)) => Some(b),
        Some(RawBool::Text(t)) => Some(t.eq_ignore_ascii_case("true")),
        None => None,
    };
    if verified != Some(true) {
        return Err(OidcError::EmailNotVerified {
            email,
            claim_present: verified.is_some(),
        });
    }
    Ok(Identity {
        issuer: want.issuer.to_string(),
        subject,
        email,
        email_verified: true,
        name: raw.name.filter(|n| !n.trim().is_empty()),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const NOW: i64 = 1_800_000_000;

    fn want() -> Expected<'static> {
        Expected {
            issuer: "https://issuer.example",
            client_id: "me",
            nonce: "n-1",
            scopes: "openid email",
            now: NOW,
        }
    }

    fn good() -> Value {
        json!({
            "iss": "https://issuer.example", "sub": "42", "aud": "me",
            "exp": NOW + 300, "iat": NOW - 5, "nonce": "n-1",
            "email": "Alice@Example.com", "email_verified": true, "name": "Alice"
        })
    }

    fn check(claims: &Value) -> Result<Identity, OidcError> {
        check_claims(claims.to_string().as_bytes(), &want())
    }

    fn with(key: &str, value: Value) -> Value {
        let mut c = good();
        if value.is_null() {
            c.as_object_mut().unwrap().remove(key);
        } else {
            c[key] = value;
        }
        c
    }

    #[test]
    fn a_good_token_gives_the_identity() {
        let id = check(&good()).unwrap();
        assert_eq!(id.issuer, "https://issuer.example");
        assert_eq!(id.subject, "42");
        assert_eq!(id.email, "Alice@Example.com");
        assert!(id.email_verified);
        assert_eq!(id.name.as_deref(), Some("Alice"));
        // "true" as a string is accepted too.
        assert!(check(&with("email_verified", json!("true"))).is_ok());
        // Several audiences with azp = us.
        let mut c = with("aud", json!(["me", "other"]));
        c["azp"] = json!("me");
        assert!(check(&c).is_ok());
    }

    #[test]
    fn each_claim_rule_refuses() {
        let cases: Vec<(Value, &str)> = vec![
            (with("iss", json!("https://evil.example")), "issued by"),
            (with("iss", json!("https://issuer.example/")), "issued by"),
            (with("iss", Value::Null), "`iss` claim"),
            (with("aud", json!("other")), "not for this client"),
            (
                with("aud", json!(["other", "third"])),
                "not for this client",
            ),
            (with("aud", json!(["me", "other"])), "authorized party"),
            (with("azp", json!("other")), "authorized party"),
            (with("exp", json!(NOW - CLOCK_SKEW - 1)), "expired"),
            (with("exp", Value::Null), "`exp` claim"),
            (with("iat", json!(NOW + CLOCK_SKEW + 5)), "in the future"),
            (with("iat", json!(NOW - MAX_AGE - CLOCK_SKEW - 5)), "s ago"),
            (with("nbf", json!(NOW + CLOCK_SKEW + 5)), "not valid before"),
            (with("nonce", json!("n-2")), "differs"),
            (with("nonce", Value::Null), "is missing"),
            (with("nonce", json!("")), "is missing"),
            (with("sub", json!("")), "`sub` claim"),
            (with("email", Value::Null), "`email` scope"),
            (with("email_verified", json!(false)), "not verified"),
            (with("email_verified", Value::Null), "is absent"),
        ];
        for (claims, want) in cases {
            let e = check(&claims).expect_err(&claims.to_string()).to_string();
            assert!(e.contains(want), "{claims}: {e}");
            assert!(!e.contains("n-1"), "the nonce is never shown: {e}");
        }
        // A login kept without its nonce accepts nothing.
        let lost = Expected {
            nonce: "",
            ..want()
        };
        let e = check_claims(with("nonce", json!("")).to_string().as_bytes(), &lost).unwrap_err();
        assert!(matches!(e, OidcError::NonceMismatch { .. }), "{e}");
        let e = check_claims(good().to_string().as_bytes(), &lost).unwrap_err();
        assert!(matches!(e, OidcError::NonceMismatch { .. }), "{e}");
        // Within the skew is fine.
        assert!(check(&with("exp", json!(NOW - CLOCK_SKEW + 5))).is_ok());
    }

    #[test]
    fn only_google_may_leave_out_the_scheme() {
        assert!(issuer_matches(GOOGLE_ISSUER, "accounts.google.com"));
        assert!(issuer_matches(GOOGLE_ISSUER, GOOGLE_ISSUER));
        assert!(!issuer_matches(
            GOOGLE_ISSUER,
            "https://accounts.google.com/"
        ));
        assert!(!issuer_matches("https://login.example", "login.example"));
        assert!(!issuer_matches(GOOGLE_ISSUER, "evil.example"));
    }

    #[test]
    fn headers_are_read_strictly() {
        let enc = |v: Value| URL_SAFE_NO_PAD.encode(v.to_string());
        let token = |h: Value| format!("{}.{}.c2ln", enc(h), enc(json!({})));
        let alg = |a: &str| token(json!({"alg": a}));
        assert_eq!(parse("i", &alg("RS256")).unwrap().alg, Alg::Rs256);
        assert_eq!(parse("i", &alg("ES256")).unwrap().alg, Alg::Es256);
        for (t, want) in [
            (alg("none"), "unsigned"),
            (alg("NONE"), "unsigned"),
            (alg("HS256"), "HMAC"),
            (alg("PS512"), "not supported"),
            (token(json!({})), "no `alg`"),
            (token(json!({"alg": "RS256", "crit": ["exp"]})), "crit"),
            ("a.b".to_string(), "three"),
            ("a.b.c.d.e".to_string(), "three"),
            ("!!.e30.c2ln".to_string(), "base64url"),
            ("x".repeat(MAX_LEN + 1), "16 KiB"),
        ] {
            let e = parse("i", &t).err().unwrap().to_string();
            assert!(e.contains(want), "{t}: {e}");
        }
        let t = alg("RS256");
        let jws = parse("i", &t).unwrap();
        assert_eq!(jws.signature, b"sig");
        assert_eq!(format!("{}.c2ln", jws.signed), t);
    }
}
