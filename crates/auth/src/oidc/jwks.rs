//! The issuer's signing keys (RFC 7517 JWKS): read in two steps (raw serde, then
//! [`Jwk`] for RSA and P-256 keys only), fetched through the guard with a capped body,
//! and cached: reloaded when older than [`MAX_AGE`], or when an ID token names a key
//! the cache lacks, at most once per [`MIN_RELOAD`]. Owns signature verification on
//! aws-lc-rs; it must not decide anything about claims. Limits: at most [`MAX_KEYS`] (64)
//! keys, RSA moduli of 2048–8192 bits, P-256 only; reloaded after an hour, or at most
//! once a minute for an unknown `kid`. A token's key is the one its `kid` names; a token
//! without `kid` is checked only when exactly one key fits its `alg` (OIDC Core §10.1).
//!
//! Why not `jsonwebtoken`: its `aws_lc_rs` feature would add three crates and turn on
//! aws-lc-rs's default features, rebuilding rustls, reqwest and sqlx above it; what
//! sign-in needs is two aws-lc-rs calls (RSA from `n`/`e`, a P-256 point) plus the claim
//! checks `id_token.rs` has anyway.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED, RSA_PKCS1_2048_8192_SHA256, RsaPublicKeyComponents, UnparsedPublicKey,
};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;

use super::error::OidcError;
use crate::error::{AuthError, sanitize};
use crate::http::{Http, shown};

/// The most keys a key set may hold.
pub(crate) const MAX_KEYS: usize = 64;
/// Keys older than this are reloaded before use (so a key the provider withdrew stops
/// being trusted).
pub(crate) const MAX_AGE: Duration = Duration::from_secs(3600);
/// An unknown `kid` reloads the key set at most this often.
pub(crate) const MIN_RELOAD: Duration = Duration::from_secs(60);

/// The signature algorithms accepted for ID tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Alg {
    Rs256,
    Es256,
}

impl Alg {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Alg::Rs256 => "RS256",
            Alg::Es256 => "ES256",
        }
    }
}

/// A verification key.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Jwk {
    pub kid: Option<String>,
    pub alg: Option<String>,
    pub key: KeyMaterial,
}

impl std::fmt::Debug for Jwk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jwk")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

/// The public key itself.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum KeyMaterial {
    /// RSA modulus and exponent (big-endian).
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// A P-256 point, uncompressed (`04 || x || y`).
    P256 { point: Vec<u8> },
}

impl Jwk {
    /// Whether this key may verify `alg`.
    pub(crate) fn fits(&self, alg: Alg) -> bool {
        let kind = matches!(
            (&self.key, alg),
            (KeyMaterial::Rsa { .. }, Alg::Rs256) | (KeyMaterial::P256 { .. }, Alg::Es256)
        );
        kind && self.alg.as_deref().is_none_or(|a| a == alg.as_str())
    }

    /// Whether `signature` is this key's `alg` signature of `message`.
    pub(crate) fn verify(&self, alg: Alg, message: &[u8], signature: &[u8]) -> bool {
        match (&self.key, alg) {
            (KeyMaterial::Rsa { n, e }, Alg::Rs256) => RsaPublicKeyComponents { n, e }
                .verify(&RSA_PKCS1_2048_8192_SHA256, message, signature)
                .is_ok(),
            (KeyMaterial::P256 { point }, Alg::Es256) => {
                UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
                    .verify(message, signature)
                    .is_ok()
            }
            _ => false,
        }
    }
}

#[derive(Deserialize)]
struct RawJwks {
    keys: Vec<RawJwk>,
}

#[derive(Deserialize)]
struct RawJwk {
    kty: Option<String>,
    kid: Option<String>,
    alg: Option<String>,
    #[serde(rename = "use")]
    use_: Option<String>,
    n: Option<String>,
    e: Option<String>,
    crv: Option<String>,
    x: Option<String>,
    y: Option<String>,
}

fn b64(field: &'static str, v: Option<&str>) -> Result<Vec<u8>, String> {
    let v = v.ok_or_else(|| format!("a key has no `{field}`"))?;
    URL_SAFE_NO_PAD
        .decode(v.trim_end_matches('='))
        .map_err(|_| format!("a key's `{field}` is not base64url"))
}

/// The signing keys of a JWKS document. Keys of other types (or for encryption) are
/// skipped; a malformed RSA or P-256 key is an error.
pub(crate) fn parse_jwks(body: &[u8]) -> Result<Vec<Jwk>, String> {
    let raw: RawJwks = serde_json::from_slice(body)
        .map_err(|_| format!("it is not a JWKS document ({} bytes)", body.len()))?;
    if raw.keys.len() > MAX_KEYS {
        return Err(format!(
            "it has {} keys, more than the {MAX_KEYS} accepted",
            raw.keys.len()
        ));
    }
    let mut keys = Vec::new();
    for k in raw.keys {
        if k.use_.as_deref().is_some_and(|u| u != "sig") {
            continue;
        }
        let key = match (k.kty.as_deref(), k.crv.as_deref()) {
            (Some("RSA"), _) => {
                let n = b64("n", k.n.as_deref())?;
                let e = b64("e", k.e.as_deref())?;
                let bits = n.iter().skip_while(|b| **b == 0).count() * 8;
                if !(2048..=8192).contains(&bits) {
                    return Err(format!(
                        "an RSA key has a {bits}-bit modulus (2048 to 8192 accepted)"
                    ));
                }
                KeyMaterial::Rsa { n, e }
            }
            (Some("EC"), Some("P-256")) => {
                let x = b64("x", k.x.as_deref())?;
                let y = b64("y", k.y.as_deref())?;
                if x.len() != 32 || y.len() != 32 {
                    return Err("a P-256 key's `x` or `y` is not 32 bytes".into());
                }
                let mut point = Vec::with_capacity(65);
                point.push(4);
                point.extend_from_slice(&x);
                point.extend_from_slice(&y);
                KeyMaterial::P256 { point }
            }
            _ => continue,
        };
        keys.push(Jwk {
            kid: k.kid,
            alg: k.alg,
            key,
        });
    }
    Ok(keys)
}

#[derive(Default)]
struct CacheState {
    keys: Arc<Vec<Jwk>>,
    loaded_at: Option<Instant>,
    tried_at: Option<Instant>,
}

/// The issuer's keys, cached.
pub(crate) struct JwksCache {
    url: String,
    state: Mutex<CacheState>,
}

impl std::fmt::Debug for JwksCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwksCache")
            .field("url", &shown(&self.url))
            .finish_non_exhaustive()
    }
}

/// What [`JwksCache::find`] looks for.
pub(crate) struct KeyQuery<'a> {
    pub kid: Option<&'a str>,
    pub alg: Alg,
}

fn pick(keys: &[Jwk], q: &KeyQuery<'_>) -> Option<Jwk> {
    match q.kid {
        Some(kid) => keys
            .iter()
            .find(|k| k.kid.as_deref() == Some(kid) && k.fits(q.alg))
            .cloned(),
        None => {
            // No `kid`: only unambiguous when one key fits (OIDC Core §10.1).
            let mut fitting = keys.iter().filter(|k| k.fits(q.alg));
            match (fitting.next(), fitting.next()) {
                (Some(k), None) => Some(k.clone()),
                _ => None,
            }
        }
    }
}

/// What [`JwksCache::find`] does next.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// The cache is fresh and has the key.
    Use(Jwk),
    /// Load the key set (never loaded, older than [`MAX_AGE`], or the key is unknown
    /// and the last load was [`MIN_RELOAD`] ago or more).
    Reload,
    /// The key is unknown and the key set was loaded less than [`MIN_RELOAD`] ago.
    Unknown,
}

fn plan(s: &CacheState, q: &KeyQuery<'_>, now: Instant) -> Step {
    let fresh = s
        .loaded_at
        .is_some_and(|t| now.saturating_duration_since(t) < MAX_AGE);
    if !fresh {
        return Step::Reload;
    }
    if let Some(k) = pick(&s.keys, q) {
        return Step::Use(k);
    }
    let may_reload = s
        .tried_at
        .is_none_or(|t| now.saturating_duration_since(t) >= MIN_RELOAD);
    if may_reload {
        Step::Reload
    } else {
        Step::Unknown
    }
}

impl JwksCache {
    pub(crate) fn new(url: String) -> Self {
        Self {
            url,
            state: Mutex::new(CacheState::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The key for `q`: from the cache when it is fresh and has it; else after a reload
    /// (at most one per [`MIN_RELOAD`] for an unknown key).
    pub(crate) async fn find(
        &self,
        http: &Http,
        limit: Duration,
        q: &KeyQuery<'_>,
    ) -> Result<Jwk, AuthError> {
        let step = plan(&self.lock(), q, Instant::now());
        let found = match step {
            Step::Use(k) => Some(k),
            Step::Reload => pick(&self.reload(http, limit).await?, q),
            Step::Unknown => None,
        };
        found.ok_or_else(|| {
            OidcError::UnknownKey {
                url: shown(&self.url),
                kid: q.kid.map(str::to_string),
                alg: q.alg.as_str(),
            }
            .into()
        })
    }

    async fn reload(&self, http: &Http, limit: Duration) -> Result<Arc<Vec<Jwk>>, AuthError> {
        self.lock().tried_at = Some(Instant::now());
        const WHAT: &str = "the issuer's key set (JWKS)";
        let reply = super::within(limit, WHAT, &self.url, http.get(WHAT, &self.url)).await?;
        let bad = |reason: String| OidcError::Jwks {
            url: shown(&self.url),
            reason,
        };
        if !reply.is_success() {
            return Err(bad(format!("HTTP {}", reply.status)).into());
        }
        let keys = Arc::new(parse_jwks(&reply.body).map_err(|r| bad(sanitize(&r)))?);
        let mut s = self.lock();
        s.keys = Arc::clone(&keys);
        s.loaded_at = Some(Instant::now());
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_strictly() {
        let ec = r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"e","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},{"kty":"OKP","crv":"Ed25519","x":"AA"},{"kty":"RSA","use":"enc","n":"AQAB","e":"AQAB"}]}"#;
        let keys = parse_jwks(ec.as_bytes()).unwrap();
        assert_eq!(keys.len(), 1, "only the P-256 signing key is kept");
        assert!(keys[0].fits(Alg::Es256));
        assert!(!keys[0].fits(Alg::Rs256));

        let small_rsa = r#"{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}"#;
        let e = parse_jwks(small_rsa.as_bytes()).unwrap_err();
        assert!(e.contains("modulus"), "{e}");
        let e = parse_jwks(b"<html>").unwrap_err();
        assert!(e.contains("not a JWKS"), "{e}");
        let many = format!(
            r#"{{"keys":[{}]}}"#,
            vec![r#"{"kty":"oct"}"#; MAX_KEYS + 1].join(",")
        );
        let e = parse_jwks(many.as_bytes()).unwrap_err();
        assert!(e.contains("more than"), "{e}");
    }

    #[test]
    fn reloads_when_stale_or_unknown_at_most_once_a_minute() {
        let key = Jwk {
            kid: Some("a".into()),
            alg: None,
            key: KeyMaterial::P256 { point: vec![4; 65] },
        };
        let t0 = Instant::now();
        let at = |secs: u64| t0 + Duration::from_secs(secs);
        let known = KeyQuery {
            kid: Some("a"),
            alg: Alg::Es256,
        };
        let unknown = KeyQuery {
            kid: Some("b"),
            alg: Alg::Es256,
        };
        let empty = CacheState::default();
        assert_eq!(plan(&empty, &known, t0), Step::Reload, "never loaded");
        let loaded = CacheState {
            keys: Arc::new(vec![key.clone()]),
            loaded_at: Some(t0),
            tried_at: Some(t0),
        };
        assert_eq!(plan(&loaded, &known, at(5)), Step::Use(key.clone()));
        assert_eq!(plan(&loaded, &unknown, at(5)), Step::Unknown);
        assert_eq!(plan(&loaded, &unknown, at(59)), Step::Unknown);
        assert_eq!(plan(&loaded, &unknown, at(60)), Step::Reload);
        assert_eq!(plan(&loaded, &known, at(3599)), Step::Use(key));
        assert_eq!(
            plan(&loaded, &known, at(3600)),
            Step::Reload,
            "stale keys are reloaded"
        );
        // A failed reload (tried, not loaded) also waits a minute for unknown keys.
        let failed = CacheState {
            tried_at: Some(at(30)),
            ..loaded
        };
        assert_eq!(plan(&failed, &unknown, at(60)), Step::Unknown);
        assert_eq!(plan(&failed, &unknown, at(90)), Step::Reload);
    }

    #[test]
    fn a_key_without_kid_is_used_only_when_unambiguous() {
        let k = |kid: Option<&str>| Jwk {
            kid: kid.map(str::to_string),
            alg: None,
            key: KeyMaterial::P256 { point: vec![4; 65] },
        };
        let q = KeyQuery {
            kid: None,
            alg: Alg::Es256,
        };
        assert!(pick(&[k(Some("a"))], &q).is_some());
        assert!(pick(&[k(Some("a")), k(Some("b"))], &q).is_none());
        let q = KeyQuery {
            kid: Some("b"),
            alg: Alg::Es256,
        };
        assert_eq!(
            pick(&[k(Some("a")), k(Some("b"))], &q)
                .unwrap()
                .kid
                .as_deref(),
            Some("b")
        );
        let q = KeyQuery {
            kid: Some("b"),
            alg: Alg::Rs256,
        };
        assert!(pick(&[k(Some("b"))], &q).is_none(), "alg must fit the key");
    }
}
