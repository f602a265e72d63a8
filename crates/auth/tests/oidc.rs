//! OpenID Connect sign-in ([`OidcClient`]) against a real provider (npm `oidc-provider`,
//! started by the testkit and killed on drop): a full login with RS256 and with ES256
//! ID tokens, and the refusals a real provider can provoke (wrong nonce, wrong state,
//! a replayed code, a tampered signature, another client's token, an issuer that is
//! not the configured one, unverified and missing emails, a missing `iss`). Then a
//! hostile issuer on loopback (a raw HTTP server in this file) for what no honest
//! provider sends: `alg: none`, HMAC, an endless discovery body, an oversized JWKS,
//! unknown keys (reloaded at most once a minute), wrong `iss`/`aud`/`azp` claims.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// The test plays the browser and a hostile issuer with its own sockets and clients.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::guard;
use serde_json::{Value, json};
use switchboard_auth::{
    AuthError, AuthMethod, ClientSecret, Identity, OidcClient, OidcConfig, OidcError,
    PendingSignIn, SignInCallback,
};
use switchboard_testkit::{
    OIDC_CLIENT_ID, OIDC_ES256_CLIENT_ID, OIDC_OTHER_CLIENT_ID, OidcPeer, OidcPeerOptions,
    spawn_oidc_provider, spawn_oidc_provider_with,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use url::Url;

fn config(peer: &OidcPeer, client_id: &str) -> OidcConfig {
    let mut c = OidcConfig::new(
        Url::parse(&peer.issuer).unwrap(),
        client_id,
        Some(ClientSecret::new(peer.secret.clone())),
        Url::parse(&peer.redirect_uri).unwrap(),
    );
    if client_id == OIDC_ES256_CLIENT_ID {
        c.auth_method = Some(AuthMethod::ClientSecretPost);
    }
    c
}

async fn client(peer: &OidcPeer, client_id: &str) -> OidcClient {
    OidcClient::discover(config(peer, client_id), guard())
        .await
        .unwrap()
}

/// Begins a login, logs `account` in at the provider, and returns the callback and
/// what the caller kept.
async fn login(
    peer: &OidcPeer,
    client: &OidcClient,
    account: &str,
) -> (SignInCallback, PendingSignIn) {
    let start = client.begin().unwrap();
    let redirect = peer
        .drive_login(start.authorize_url.as_str(), account)
        .await;
    assert_eq!(redirect.state, start.state);
    (
        SignInCallback::from_query(&redirect.query),
        PendingSignIn::from(&start),
    )
}

fn sign_in_error(e: AuthError) -> OidcError {
    match e {
        AuthError::SignIn(e) => e,
        other => panic!("expected a sign-in error, got {other:?}: {other}"),
    }
}

fn assert_send<T: Send>(_: &T) {}
fn assert_shareable<T: Send + Sync>() {}

#[tokio::test]
async fn alice_signs_in_with_rs256_and_es256_id_tokens() {
    assert_shareable::<OidcClient>();
    let peer = spawn_oidc_provider().await;
    for client_id in [OIDC_CLIENT_ID, OIDC_ES256_CLIENT_ID] {
        let c = client(&peer, client_id).await;
        assert_eq!(c.issuer(), peer.issuer);
        let start = c.begin().unwrap();
        let q: std::collections::HashMap<_, _> =
            start.authorize_url.query_pairs().into_owned().collect();
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(q["scope"], "openid email profile");
        assert_eq!(q["client_id"], client_id);
        assert_eq!(q["nonce"], start.nonce);
        assert!(!start.authorize_url.as_str().contains(&start.pkce_verifier));
        let again = c.begin().unwrap();
        assert_ne!(again.state, start.state, "state is fresh each time");
        assert_ne!(again.nonce, start.nonce, "nonce is fresh each time");

        let (cb, pending) = login(&peer, &c, "alice").await;
        // A web handler awaits it on a multi-threaded runtime.
        let finishing = c.finish(&cb, &pending);
        assert_send(&finishing);
        let id = finishing.await.unwrap();
        assert_eq!(
            id,
            Identity {
                issuer: peer.issuer.clone(),
                subject: "alice".into(),
                email: "alice@example.com".into(),
                email_verified: true,
                name: Some("Alice Example".into()),
            },
            "{client_id}"
        );
    }
}

#[tokio::test]
async fn a_browser_without_login_hint_signs_in_the_default_account_at_any_redirect_uri() {
    let uris = vec![
        "http://127.0.0.1:9/a/callback".to_string(),
        "http://localhost:9/b/callback".to_string(),
    ];
    let peer = spawn_oidc_provider_with(OidcPeerOptions {
        redirect_uris: uris.clone(),
        default_account: Some("bob".into()),
        ..Default::default()
    })
    .await;
    assert_eq!(peer.redirect_uri, uris[0]);
    let mut cfg = config(&peer, OIDC_CLIENT_ID);
    cfg.redirect_uri = Url::parse(&uris[1]).unwrap();
    let c = OidcClient::discover(cfg, guard()).await.unwrap();
    let start = c.begin().unwrap();
    let redirect = peer.drive_default_login(start.authorize_url.as_str()).await;
    assert!(redirect.url.starts_with(&uris[1]), "{}", redirect.url);
    let id = c
        .finish(
            &SignInCallback::from_query(&redirect.query),
            &PendingSignIn::from(&start),
        )
        .await
        .unwrap();
    assert_eq!(id.email, "bob@other.org");
}

#[tokio::test]
async fn unverified_or_missing_emails_are_refused_with_the_fix() {
    let peer = spawn_oidc_provider().await;
    let c = client(&peer, OIDC_CLIENT_ID).await;
    let (cb, pending) = login(&peer, &c, "carol").await;
    let e = sign_in_error(c.finish(&cb, &pending).await.unwrap_err());
    assert!(
        matches!(e, OidcError::EmailNotVerified { ref email, claim_present: true } if email == "carol@example.com"),
        "{e:?}"
    );
    assert!(e.to_string().contains("not verified"), "{e}");

    let (cb, pending) = login(&peer, &c, "dave").await;
    let e = sign_in_error(c.finish(&cb, &pending).await.unwrap_err());
    assert!(matches!(e, OidcError::NoEmail { .. }), "{e:?}");
    assert!(e.to_string().contains("`email` scope"), "{e}");

    // Without the email scope the provider releases no email: the message says so.
    let mut cfg = config(&peer, OIDC_CLIENT_ID);
    cfg.scopes = vec!["openid".into(), "profile".into()];
    let c = OidcClient::discover(cfg, guard()).await.unwrap();
    let (cb, pending) = login(&peer, &c, "alice").await;
    let e = sign_in_error(c.finish(&cb, &pending).await.unwrap_err());
    assert!(matches!(e, OidcError::NoEmail { .. }), "{e:?}");
    assert!(
        e.to_string().contains("configured scopes: openid profile"),
        "{e}"
    );
}

#[tokio::test]
async fn a_wrong_nonce_is_refused() {
    let peer = spawn_oidc_provider().await;
    let c = client(&peer, OIDC_CLIENT_ID).await;
    let (cb, mut pending) = login(&peer, &c, "alice").await;
    let sent = pending.nonce.clone();
    pending.nonce = c.begin().unwrap().nonce;
    let e = sign_in_error(c.finish(&cb, &pending).await.unwrap_err());
    assert!(
        matches!(e, OidcError::NonceMismatch { missing: false }),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        !text.contains(&sent) && !text.contains(&pending.nonce),
        "{text}"
    );
}

#[tokio::test]
async fn a_wrong_state_or_issuer_in_the_callback_is_refused_before_the_exchange() {
    let peer = spawn_oidc_provider().await;
    let c = client(&peer, OIDC_CLIENT_ID).await;
    let (cb, pending) = login(&peer, &c, "alice").await;

    let mut forged = cb.clone();
    forged.state = Some(c.begin().unwrap().state);
    let e = sign_in_error(c.finish(&forged, &pending).await.unwrap_err());
    assert!(matches!(e, OidcError::StateMismatch), "{e:?}");
    let mut no_state = cb.clone();
    no_state.state = None;
    let e = sign_in_error(c.finish(&no_state, &pending).await.unwrap_err());
    assert!(matches!(e, OidcError::StateMismatch), "{e:?}");

    // oidc-provider announces RFC 9207 `iss`: a callback without it, or from another
    // issuer, is refused.
    let mut no_iss = cb.clone();
    no_iss.iss = None;
    let e = sign_in_error(c.finish(&no_iss, &pending).await.unwrap_err());
    assert!(
        matches!(e, OidcError::CallbackIssuer { got: None, .. }),
        "{e:?}"
    );
    let mut other_iss = cb.clone();
    other_iss.iss = Some("https://evil.example".into());
    let e = sign_in_error(c.finish(&other_iss, &pending).await.unwrap_err());
    assert!(
        matches!(e, OidcError::CallbackIssuer { got: Some(_), .. }),
        "{e:?}"
    );

    let denied =
        SignInCallback::from_query("error=access_denied&error_description=user%20said%20no");
    let e = sign_in_error(c.finish(&denied, &pending).await.unwrap_err());
    assert!(
        e.to_string().contains("access_denied") && e.to_string().contains("user said no"),
        "{e}"
    );

    // None of that used the code: it still signs in.
    assert_eq!(c.finish(&cb, &pending).await.unwrap().subject, "alice");
}

#[tokio::test]
async fn a_replayed_code_is_refused() {
    let peer = spawn_oidc_provider().await;
    let c = client(&peer, OIDC_CLIENT_ID).await;
    let (cb, pending) = login(&peer, &c, "alice").await;
    c.finish(&cb, &pending).await.unwrap();
    let e = c.finish(&cb, &pending).await.unwrap_err();
    let code = cb.code.clone().unwrap();
    match &e {
        AuthError::TokenRefused { error, hint, .. } => {
            assert_eq!(error.as_deref(), Some("invalid_grant"));
            assert!(hint.as_deref().unwrap().contains("already used"), "{e}");
        }
        other => panic!("expected the token endpoint's refusal, got {other:?}"),
    }
    assert!(
        !e.to_string().contains(&code),
        "the code is never shown: {e}"
    );
}

/// A real ID token for `client_id`, exchanged by the test itself.
async fn raw_id_token(peer: &OidcPeer, client_id: &str, account: &str) -> (String, String) {
    let c = client(peer, client_id).await;
    let (cb, pending) = login(peer, &c, account).await;
    let answer = peer
        .exchange_code(
            client_id,
            cb.code.as_deref().unwrap(),
            &pending.pkce_verifier,
        )
        .await;
    (
        answer["id_token"].as_str().unwrap().to_string(),
        pending.nonce,
    )
}

#[tokio::test]
async fn a_tampered_id_token_is_refused() {
    let peer = spawn_oidc_provider().await;
    let c = client(&peer, OIDC_CLIENT_ID).await;
    let (token, nonce) = raw_id_token(&peer, OIDC_CLIENT_ID, "alice").await;
    // The untouched token passes: what follows fails only for the tampering.
    assert_eq!(
        c.verify_id_token(&token, &nonce).await.unwrap().subject,
        "alice"
    );

    let parts: Vec<&str> = token.split('.').collect();
    // One flipped signature bit.
    let mut sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
    sig[10] ^= 1;
    let flipped = format!("{}.{}.{}", parts[0], parts[1], URL_SAFE_NO_PAD.encode(&sig));
    let e = sign_in_error(c.verify_id_token(&flipped, &nonce).await.unwrap_err());
    assert!(matches!(e, OidcError::BadSignature { .. }), "{e:?}");
    // Another email in the payload, the signature kept.
    let mut claims: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    claims["email"] = json!("root@example.com");
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        URL_SAFE_NO_PAD.encode(claims.to_string()),
        parts[2]
    );
    let e = sign_in_error(c.verify_id_token(&forged, &nonce).await.unwrap_err());
    assert!(matches!(e, OidcError::BadSignature { .. }), "{e:?}");
    assert!(
        !e.to_string().contains(parts[2]),
        "the token is never shown: {e}"
    );
}

#[tokio::test]
async fn another_clients_id_token_is_refused() {
    let peer = spawn_oidc_provider().await;
    let ours = client(&peer, OIDC_CLIENT_ID).await;
    let (token, nonce) = raw_id_token(&peer, OIDC_OTHER_CLIENT_ID, "alice").await;
    // Genuine, signed by the same issuer, right nonce; the other client accepts it.
    let theirs = client(&peer, OIDC_OTHER_CLIENT_ID).await;
    theirs.verify_id_token(&token, &nonce).await.unwrap();
    let e = sign_in_error(ours.verify_id_token(&token, &nonce).await.unwrap_err());
    match &e {
        OidcError::WrongAudience {
            client_id,
            audiences,
        } => {
            assert_eq!(client_id, OIDC_CLIENT_ID);
            assert_eq!(audiences, &vec![OIDC_OTHER_CLIENT_ID.to_string()]);
        }
        other => panic!("expected WrongAudience, got {other:?}"),
    }
}

#[tokio::test]
async fn an_issuer_that_is_not_the_configured_one_is_refused_at_discovery() {
    let peer = spawn_oidc_provider().await;
    // The provider publishes `http://127.0.0.1:P`; reached as `localhost` it is
    // another issuer identifier.
    let mut cfg = config(&peer, OIDC_CLIENT_ID);
    cfg.issuer = Url::parse(&peer.issuer.replace("127.0.0.1", "localhost")).unwrap();
    let e = sign_in_error(OidcClient::discover(cfg, guard()).await.unwrap_err());
    match &e {
        OidcError::IssuerMismatch { published, .. } => assert_eq!(published, &peer.issuer),
        other => panic!("expected IssuerMismatch, got {other:?}"),
    }
    assert!(
        e.to_string().contains("set the issuer URL to exactly"),
        "{e}"
    );

    // A path the provider does not have is no OpenID configuration at all.
    let mut cfg = config(&peer, OIDC_CLIENT_ID);
    cfg.issuer = Url::parse(&format!("{}/tenant", peer.issuer)).unwrap();
    let e = sign_in_error(OidcClient::discover(cfg, guard()).await.unwrap_err());
    assert!(matches!(e, OidcError::Discovery { .. }), "{e:?}");

    // Plain http is refused off loopback.
    let mut cfg = config(&peer, OIDC_CLIENT_ID);
    cfg.issuer = Url::parse("http://accounts.example.com").unwrap();
    let e = sign_in_error(OidcClient::discover(cfg, guard()).await.unwrap_err());
    assert!(matches!(e, OidcError::InsecureIssuer { .. }), "{e:?}");
}

// ---------------------------------------------------------------------------------
// A hostile issuer.

/// What the hostile issuer serves.
#[derive(Clone)]
enum Body {
    Json(String),
    /// An endless body, as fast as the client reads.
    Endless,
    /// Headers and the first byte of the body, then nothing until the client leaves.
    Stall,
}

#[derive(Default)]
struct HostileState {
    discovery: Option<Body>,
    jwks: Option<Body>,
    /// Replaces the token endpoint's answer.
    token: Option<Body>,
    id_token: String,
    hits: Vec<String>,
}

struct Hostile {
    issuer: String,
    state: Arc<Mutex<HostileState>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Hostile {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let state = Arc::new(Mutex::new(HostileState::default()));
        let st = Arc::clone(&state);
        let task = tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(serve(conn, Arc::clone(&st)));
            }
        });
        let h = Self {
            issuer,
            state,
            task,
        };
        h.set_discovery(Body::Json(h.discovery_doc(&h.issuer).to_string()));
        h
    }

    fn discovery_doc(&self, issuer: &str) -> Value {
        json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{}/authorize", self.issuer),
            "token_endpoint": format!("{}/token", self.issuer),
            "jwks_uri": format!("{}/jwks", self.issuer),
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        })
    }

    fn set_discovery(&self, b: Body) {
        self.state.lock().unwrap().discovery = Some(b);
    }
    fn set_jwks(&self, b: Body) {
        self.state.lock().unwrap().jwks = Some(b);
    }
    fn set_id_token(&self, t: String) {
        self.state.lock().unwrap().id_token = t;
    }
    fn hits(&self, path: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .hits
            .iter()
            .filter(|p| *p == path)
            .count()
    }

    fn config(&self) -> OidcConfig {
        OidcConfig::new(
            Url::parse(&self.issuer).unwrap(),
            "me",
            Some(ClientSecret::new("s3cret")),
            Url::parse("http://127.0.0.1:9/cb").unwrap(),
        )
    }
}

async fn serve(mut conn: tokio::net::TcpStream, state: Arc<Mutex<HostileState>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let Ok(n) = conn.read(&mut chunk).await else {
            return;
        };
        if n == 0 || buf.len() > 64 * 1024 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let path = head.split(' ').nth(1).unwrap_or("").to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap_or(0))
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let Ok(n) = conn.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = {
        let mut s = state.lock().unwrap();
        s.hits.push(path.clone());
        match path.as_str() {
            "/.well-known/openid-configuration" => s.discovery.clone(),
            "/jwks" => s.jwks.clone(),
            "/token" => s.token.clone().or_else(|| {
                Some(Body::Json(
                    json!({"access_token": "at", "token_type": "Bearer", "id_token": s.id_token})
                        .to_string(),
                ))
            }),
            _ => None,
        }
    };
    match body {
        Some(Body::Json(text)) => {
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                text.len()
            );
            let _ = conn.write_all(reply.as_bytes()).await;
        }
        Some(Body::Endless) => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{\"keys\":[";
            if conn.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let filler = r#"{"kty":"oct","k":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},"#.repeat(100);
            while conn.write_all(filler.as_bytes()).await.is_ok() {}
        }
        Some(Body::Stall) => {
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{";
            if conn.write_all(head.as_bytes()).await.is_ok() {
                // Until the client gives up and closes.
                while matches!(conn.read(&mut chunk).await, Ok(n) if n > 0) {}
            }
        }
        None => {
            let _ = conn
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
        }
    }
}

/// An ES256 key the test signs ID tokens with.
struct TestKey {
    pair: EcdsaKeyPair,
    kid: String,
}

impl TestKey {
    fn new(kid: &str) -> Self {
        Self {
            pair: EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap(),
            kid: kid.into(),
        }
    }

    fn jwk(&self) -> Value {
        let point = self.pair.public_key().as_ref();
        json!({
            "kty": "EC", "crv": "P-256", "kid": self.kid, "use": "sig",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        })
    }

    fn sign(&self, header: &Value, claims: &Value) -> String {
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let sig = self
            .pair
            .sign(&SystemRandom::new(), input.as_bytes())
            .unwrap();
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
    }

    fn token(&self, claims: &Value) -> String {
        self.sign(&json!({"alg": "ES256", "kid": self.kid}), claims)
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn claims(issuer: &str, nonce: &str) -> Value {
    json!({
        "iss": issuer, "sub": "u1", "aud": "me", "exp": now() + 300, "iat": now(),
        "nonce": nonce, "email": "alice@example.com", "email_verified": true,
    })
}

/// Begins a login at the hostile issuer and finishes it with whatever ID token it
/// serves.
async fn finish_with(
    c: &OidcClient,
    h: &Hostile,
    make: impl FnOnce(&str) -> String,
) -> Result<Identity, AuthError> {
    let start = c.begin().unwrap();
    h.set_id_token(make(&start.nonce));
    let cb = SignInCallback {
        code: Some("code-1".into()),
        state: Some(start.state.clone()),
        ..Default::default()
    };
    c.finish(&cb, &PendingSignIn::from(&start)).await
}

#[tokio::test]
async fn a_hostile_issuers_unsigned_or_hmac_tokens_are_refused() {
    let h = Hostile::start().await;
    let key = TestKey::new("k1");
    h.set_jwks(Body::Json(json!({"keys": [key.jwk()]}).to_string()));
    let c = OidcClient::discover(h.config(), guard()).await.unwrap();
    let iss = h.issuer.clone();

    // Control: a properly signed token from this issuer signs in.
    let id = finish_with(&c, &h, |n| key.token(&claims(&iss, n)))
        .await
        .unwrap();
    assert_eq!(id.email, "alice@example.com");

    let unsigned = |alg: &str| {
        let iss = iss.clone();
        let alg = alg.to_string();
        move |n: &str| {
            format!(
                "{}.{}.",
                URL_SAFE_NO_PAD.encode(json!({"alg": alg}).to_string()),
                URL_SAFE_NO_PAD.encode(claims(&iss, n).to_string())
            )
        }
    };
    for alg in ["none", "None"] {
        let e = sign_in_error(finish_with(&c, &h, unsigned(alg)).await.unwrap_err());
        assert!(
            matches!(e, OidcError::AlgorithmRefused { .. }),
            "{alg}: {e:?}"
        );
    }
    // HS256 keyed with the client secret: refused though the MAC would verify.
    let hmac = |n: &str| {
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(json!({"alg": "HS256"}).to_string()),
            URL_SAFE_NO_PAD.encode(claims(&iss, n).to_string())
        );
        let k = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, b"s3cret");
        let tag = aws_lc_rs::hmac::sign(&k, input.as_bytes());
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    };
    let e = sign_in_error(finish_with(&c, &h, hmac).await.unwrap_err());
    assert!(matches!(e, OidcError::AlgorithmRefused { .. }), "{e:?}");
    assert!(e.to_string().contains("HMAC"), "{e}");
    // An ES256 header over an RS256-only idea: the key's type decides, not the header.
    let e = sign_in_error(
        finish_with(&c, &h, |n| {
            key.sign(&json!({"alg": "RS256", "kid": "k1"}), &claims(&iss, n))
        })
        .await
        .unwrap_err(),
    );
    assert!(matches!(e, OidcError::UnknownKey { .. }), "{e:?}");
}

#[tokio::test]
async fn a_hostile_issuers_claims_are_checked() {
    let h = Hostile::start().await;
    let key = TestKey::new("k1");
    h.set_jwks(Body::Json(json!({"keys": [key.jwk()]}).to_string()));
    let c = OidcClient::discover(h.config(), guard()).await.unwrap();
    let iss = h.issuer.clone();
    let with = |k: &str, v: Value| {
        let iss = iss.clone();
        let k = k.to_string();
        let key = &key;
        move |n: &str| {
            let mut cl = claims(&iss, n);
            cl[k] = v;
            key.token(&cl)
        }
    };
    let e = sign_in_error(
        finish_with(&c, &h, with("iss", json!("https://evil.example")))
            .await
            .unwrap_err(),
    );
    assert!(matches!(e, OidcError::TokenIssuer { .. }), "{e:?}");
    let e = sign_in_error(
        finish_with(&c, &h, with("aud", json!(["me", "other"])))
            .await
            .unwrap_err(),
    );
    assert!(
        matches!(e, OidcError::WrongAuthorizedParty { azp: None, .. }),
        "{e:?}"
    );
    let e = sign_in_error(
        finish_with(&c, &h, with("exp", json!(now() - 3600)))
            .await
            .unwrap_err(),
    );
    assert!(matches!(e, OidcError::TokenTime { .. }), "{e:?}");
    let e = sign_in_error(
        finish_with(&c, &h, with("nonce", json!("guessed")))
            .await
            .unwrap_err(),
    );
    assert!(matches!(e, OidcError::NonceMismatch { .. }), "{e:?}");
}

#[tokio::test]
async fn an_unknown_key_reloads_the_jwks_at_most_once_a_minute() {
    let h = Hostile::start().await;
    let known = TestKey::new("k1");
    let rotated = TestKey::new("k2");
    h.set_jwks(Body::Json(json!({"keys": [known.jwk()]}).to_string()));
    let c = OidcClient::discover(h.config(), guard()).await.unwrap();
    let iss = h.issuer.clone();
    assert_eq!(h.hits("/jwks"), 0, "keys are loaded when first needed");

    finish_with(&c, &h, |n| known.token(&claims(&iss, n)))
        .await
        .unwrap();
    assert_eq!(h.hits("/jwks"), 1);
    // Cached: a second sign-in does not fetch.
    finish_with(&c, &h, |n| known.token(&claims(&iss, n)))
        .await
        .unwrap();
    assert_eq!(h.hits("/jwks"), 1);

    // The issuer now publishes k2 too, but the keys were loaded less than a minute ago:
    // an unknown kid does not make every sign-in fetch the key set.
    h.set_jwks(Body::Json(
        json!({"keys": [known.jwk(), rotated.jwk()]}).to_string(),
    ));
    for _ in 0..3 {
        let e = sign_in_error(
            finish_with(&c, &h, |n| rotated.token(&claims(&iss, n)))
                .await
                .unwrap_err(),
        );
        assert!(
            matches!(e, OidcError::UnknownKey { kid: Some(ref k), .. } if k == "k2"),
            "{e:?}"
        );
        assert!(e.to_string().contains("at most once a minute"), "{e}");
    }
    assert_eq!(h.hits("/jwks"), 1);

    // A fresh client (as after a minute) reloads once on the unknown kid and accepts it.
    let fresh = OidcClient::discover(h.config(), guard()).await.unwrap();
    finish_with(&fresh, &h, |n| rotated.token(&claims(&iss, n)))
        .await
        .unwrap();
    assert_eq!(h.hits("/jwks"), 2);
}

#[tokio::test]
async fn an_oversized_jwks_is_refused_quickly() {
    let h = Hostile::start().await;
    let key = TestKey::new("k1");
    let c = OidcClient::discover(h.config(), guard()).await.unwrap();
    let iss = h.issuer.clone();

    // An endless key set: read up to the cap, then refused.
    h.set_jwks(Body::Endless);
    let t = Instant::now();
    let e = finish_with(&c, &h, |n| key.token(&claims(&iss, n)))
        .await
        .unwrap_err();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    assert!(matches!(e, AuthError::InvalidResponse { .. }), "{e:?}");
    assert!(e.to_string().contains("larger than"), "{e}");

    // Too many keys in a body under the cap.
    let many: Vec<Value> = (0..65)
        .map(|i| {
            let mut k = key.jwk();
            k["kid"] = json!(format!("k{i}"));
            k
        })
        .collect();
    h.set_jwks(Body::Json(json!({"keys": many}).to_string()));
    let fresh = OidcClient::discover(h.config(), guard()).await.unwrap();
    let e = sign_in_error(
        finish_with(&fresh, &h, |n| key.token(&claims(&iss, n)))
            .await
            .unwrap_err(),
    );
    assert!(matches!(e, OidcError::Jwks { .. }), "{e:?}");
    assert!(e.to_string().contains("more than the 64"), "{e}");
}

#[tokio::test]
async fn an_endless_or_wrong_discovery_document_is_refused_quickly() {
    let h = Hostile::start().await;
    h.set_discovery(Body::Endless);
    let t = Instant::now();
    let e = OidcClient::discover(h.config(), guard()).await.unwrap_err();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    assert!(matches!(e, AuthError::InvalidResponse { .. }), "{e:?}");
    assert!(e.to_string().contains("larger than"), "{e}");

    // Another issuer's document.
    h.set_discovery(Body::Json(
        h.discovery_doc("https://accounts.google.com").to_string(),
    ));
    let e = sign_in_error(OidcClient::discover(h.config(), guard()).await.unwrap_err());
    assert!(matches!(e, OidcError::IssuerMismatch { .. }), "{e:?}");

    // No jwks_uri.
    let mut doc = h.discovery_doc(&h.issuer);
    doc.as_object_mut().unwrap().remove("jwks_uri");
    h.set_discovery(Body::Json(doc.to_string()));
    let e = sign_in_error(OidcClient::discover(h.config(), guard()).await.unwrap_err());
    assert!(e.to_string().contains("jwks_uri"), "{e}");
}

#[tokio::test]
async fn configuration_mistakes_are_named_before_any_request() {
    // Nothing listens here: a request would fail as HTTP, not as configuration.
    let base = OidcConfig::new(
        Url::parse(&format!(
            "http://127.0.0.1:{}",
            switchboard_testkit::free_port()
        ))
        .unwrap(),
        "me",
        None,
        Url::parse("http://127.0.0.1:9/cb").unwrap(),
    );
    let mut empty_id = base.clone();
    empty_id.client_id = " ".into();
    let mut post_without_secret = base.clone();
    post_without_secret.auth_method = Some(AuthMethod::ClientSecretPost);
    let mut jwt = base.clone();
    jwt.auth_method = Some(AuthMethod::PrivateKeyJwt);
    let mut query = base.clone();
    query.issuer.set_query(Some("x=1"));
    for (cfg, want) in [
        (empty_id, "client id is empty"),
        (post_without_secret, "needs the client secret"),
        (jwt, "private_key_jwt"),
        (query, "no query"),
    ] {
        let e = sign_in_error(OidcClient::discover(cfg, guard()).await.unwrap_err());
        assert!(matches!(e, OidcError::Config(_)), "{e:?}");
        assert!(e.to_string().contains(want), "{e}");
    }
    // A public client (no secret) is fine until the request: the failure names the URL.
    let e = OidcClient::discover(base, guard()).await.unwrap_err();
    assert!(matches!(e, AuthError::Http { .. }), "{e:?}");
    assert!(
        e.to_string().contains("/.well-known/openid-configuration"),
        "{e}"
    );
}

#[tokio::test]
async fn a_stalled_issuer_is_given_up_on_within_the_time_limit() {
    let h = Hostile::start().await;
    let key = TestKey::new("k1");
    let iss = h.issuer.clone();
    let limit = Duration::from_millis(800);
    let cfg = || {
        let mut c = h.config();
        c.timeout = limit;
        c
    };
    let quick = |t: Instant| {
        let took = t.elapsed();
        assert!(took >= limit && took < limit * 4, "took {took:?}");
    };

    h.set_discovery(Body::Stall);
    let t = Instant::now();
    let e = sign_in_error(OidcClient::discover(cfg(), guard()).await.unwrap_err());
    quick(t);
    assert!(matches!(e, OidcError::Timeout { .. }), "{e:?}");
    assert!(e.to_string().contains("did not answer within 0.8 s"), "{e}");

    h.set_discovery(Body::Json(h.discovery_doc(&h.issuer).to_string()));
    let c = OidcClient::discover(cfg(), guard()).await.unwrap();
    h.set_jwks(Body::Stall);
    let t = Instant::now();
    let e = sign_in_error(
        finish_with(&c, &h, |n| key.token(&claims(&iss, n)))
            .await
            .unwrap_err(),
    );
    quick(t);
    assert!(
        matches!(e, OidcError::Timeout { what, .. } if what.contains("JWKS")),
        "{e:?}"
    );

    h.set_jwks(Body::Json(json!({"keys": [key.jwk()]}).to_string()));
    h.state.lock().unwrap().token = Some(Body::Stall);
    let c = OidcClient::discover(cfg(), guard()).await.unwrap();
    let t = Instant::now();
    let e = sign_in_error(
        finish_with(&c, &h, |n| key.token(&claims(&iss, n)))
            .await
            .unwrap_err(),
    );
    quick(t);
    assert!(
        matches!(
            e,
            OidcError::Timeout {
                what: "the token endpoint",
                ..
            }
        ),
        "{e:?}"
    );
}
