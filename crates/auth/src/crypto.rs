//! Randomness, PKCE (RFC 7636, S256 only) and compact JWS signing (ES256, RS256) for
//! client assertions (RFC 7523) and Google service accounts, on aws-lc-rs.

use std::path::Path;

use aws_lc_rs::digest;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, RSA_PKCS1_SHA256, RsaKeyPair,
};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::error::AuthError;

/// base64url without padding.
pub(crate) fn b64url(data: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(data)
}

/// `n` random bytes, base64url-encoded.
pub(crate) fn random_token(n: usize) -> Result<String, AuthError> {
    let mut buf = vec![0u8; n];
    aws_lc_rs::rand::fill(&mut buf)
        .map_err(|_| AuthError::Config("the system random number generator failed".into()))?;
    Ok(b64url(&buf))
}

/// A PKCE verifier and its S256 challenge.
pub(crate) struct Pkce {
    pub verifier: String,
    pub challenge: String,
}

impl std::fmt::Debug for Pkce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pkce { .. }")
    }
}

/// A fresh verifier (64 characters from 48 random bytes) and its challenge.
pub(crate) fn pkce() -> Result<Pkce, AuthError> {
    let verifier = random_token(48)?;
    let challenge = pkce_challenge(&verifier);
    Ok(Pkce {
        verifier,
        challenge,
    })
}

/// `BASE64URL(SHA256(verifier))`.
pub(crate) fn pkce_challenge(verifier: &str) -> String {
    b64url(digest::digest(&digest::SHA256, verifier.as_bytes()).as_ref())
}

/// A key that signs JWTs.
pub(crate) enum SigningKey {
    Es256(EcdsaKeyPair),
    Rs256(RsaKeyPair),
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SigningKey::Es256(_) => "SigningKey(ES256)",
            SigningKey::Rs256(_) => "SigningKey(RS256)",
        })
    }
}

impl SigningKey {
    /// The JWS `alg`.
    pub(crate) fn alg(&self) -> &'static str {
        match self {
            SigningKey::Es256(_) => "ES256",
            SigningKey::Rs256(_) => "RS256",
        }
    }

    /// A key from PEM text (`PRIVATE KEY`, `EC PRIVATE KEY` or `RSA PRIVATE KEY`).
    /// `alg` (`ES256` or `RS256`) must fit the key when given.
    pub(crate) fn from_pem(pem: &str, alg: Option<&str>, origin: &str) -> Result<Self, AuthError> {
        let (label, der) = pem_decode(pem)
            .ok_or_else(|| AuthError::Key(format!("{origin}: no PEM private key found")))?;
        let want = alg.map(str::to_ascii_uppercase);
        let wrong = |what: &str| AuthError::Key(format!("{origin}: {what}"));
        match want.as_deref() {
            Some("ES256") | None if label != "RSA PRIVATE KEY" => {
                match EcdsaKeyPair::from_private_key_der(&ECDSA_P256_SHA256_FIXED_SIGNING, &der) {
                    Ok(k) => return Ok(SigningKey::Es256(k)),
                    Err(_) if want.is_some() => {
                        return Err(wrong("not a P-256 EC private key (needed for ES256)"));
                    }
                    Err(_) => {}
                }
            }
            Some("ES256") => return Err(wrong("an RSA key cannot sign ES256")),
            Some("RS256") | None => {}
            Some(other) => {
                return Err(wrong(&format!(
                    "signing algorithm `{other}` is not supported (use ES256 or RS256)"
                )));
            }
        }
        let rsa = if label == "RSA PRIVATE KEY" {
            RsaKeyPair::from_der(&der)
        } else {
            RsaKeyPair::from_pkcs8(&der)
        };
        rsa.map(SigningKey::Rs256).map_err(|_| {
            wrong("not a usable private key (expected a P-256 EC key for ES256 or an RSA key of 2048 bits or more for RS256, PEM-encoded)")
        })
    }

    /// A key from a PEM file.
    pub(crate) fn from_file(path: &Path, alg: Option<&str>) -> Result<Self, AuthError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            AuthError::Key(format!(
                "cannot read the private key file {}: {e}",
                path.display()
            ))
        })?;
        Self::from_pem(&text, alg, &path.display().to_string())
    }

    /// A compact JWS of `claims`, with `kid` in the header when given.
    pub(crate) fn sign_jwt(&self, claims: &Value, kid: Option<&str>) -> Result<String, AuthError> {
        let mut header = json!({"alg": self.alg(), "typ": "JWT"});
        if let Some(kid) = kid {
            header["kid"] = Value::from(kid);
        }
        let input = format!(
            "{}.{}",
            b64url(header.to_string().as_bytes()),
            b64url(claims.to_string().as_bytes())
        );
        let rng = SystemRandom::new();
        let failed = || AuthError::Key("signing the JWT failed".into());
        let sig = match self {
            SigningKey::Es256(k) => k
                .sign(&rng, input.as_bytes())
                .map_err(|_| failed())?
                .as_ref()
                .to_vec(),
            SigningKey::Rs256(k) => {
                let mut sig = vec![0u8; k.public_modulus_len()];
                k.sign(&RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut sig)
                    .map_err(|_| failed())?;
                sig
            }
        };
        Ok(format!("{input}.{}", b64url(&sig)))
    }
}

/// The first PEM block's label and DER bytes.
pub(crate) fn pem_decode(text: &str) -> Option<(String, Vec<u8>)> {
    let start = text.find("-----BEGIN ")?;
    let rest = &text[start + 11..];
    let label_end = rest.find("-----")?;
    let label = rest[..label_end].to_string();
    let body_start = label_end + 5;
    let end_marker = format!("-----END {label}-----");
    let body_end = rest.find(&end_marker)?;
    let body: String = rest
        .get(body_start..body_end)?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    STANDARD.decode(body).ok().map(|der| (label, der))
}

#[cfg(test)]
mod tests {
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, KeyPair, UnparsedPublicKey};

    use super::*;

    #[test]
    fn pkce_challenge_is_base64url_sha256() {
        // Expected value computed independently (Python hashlib + base64.urlsafe_b64encode).
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mJ92IZ8gfnYkXy3WoSFLq6iW4gQ-cM"),
            "2rnlvjfu61Kw1nGia8p7uKAsyP_f2XoBlSxo9eaGQ7o"
        );
        let p = pkce().unwrap();
        assert_eq!(p.verifier.len(), 64);
        assert_eq!(p.challenge, pkce_challenge(&p.verifier));
    }

    #[test]
    fn es256_jwt_verifies() {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            STANDARD.encode(pkcs8.as_ref())
        );
        let key = SigningKey::from_pem(&pem, Some("ES256"), "test").unwrap();
        let jwt = key.sign_jwt(&json!({"iss": "me"}), Some("k1")).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["kid"], "k1");
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        let public = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, pair.public_key().as_ref());
        let sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        assert_eq!(sig.len(), 64, "JWS ES256 signatures are r||s");
        public
            .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &sig)
            .unwrap();
        // SEC1 (`EC PRIVATE KEY`) works too.
        let sec1 = pair.private_key().as_der().unwrap();
        let pem = format!(
            "-----BEGIN EC PRIVATE KEY-----\n{}\n-----END EC PRIVATE KEY-----\n",
            STANDARD.encode(sec1.as_ref())
        );
        assert!(matches!(
            SigningKey::from_pem(&pem, None, "t").unwrap(),
            SigningKey::Es256(_)
        ));
    }

    #[test]
    fn bad_keys_are_clear() {
        let e = SigningKey::from_pem("nothing", None, "key.pem").unwrap_err();
        assert!(e.to_string().contains("no PEM private key"), "{e}");
        let e = SigningKey::from_pem(
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----",
            Some("ES256"),
            "key.pem",
        )
        .unwrap_err();
        assert!(e.to_string().contains("P-256"), "{e}");
        let e = SigningKey::from_pem(
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----",
            Some("HS256"),
            "key.pem",
        )
        .unwrap_err();
        assert!(e.to_string().contains("not supported"), "{e}");
    }
}
