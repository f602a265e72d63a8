//! Grants with no runnable peer, against local servers that follow the RFCs' wire
//! formats exactly: `client_credentials` with `client_secret_basic` /
//! `client_secret_post` (RFC 6749 §4.4, §2.3.1), `private_key_jwt` with ES256
//! (RFC 7523 §2.2), the enterprise jwt-bearer flow (RFC 8693 token exchange for an
//! ID-JAG, then RFC 7523 §2.1), Google ADC (service account JWT, authorized-user
//! refresh) at the credential file's `token_uri`; the 2025-03-26 fallback endpoints;
//! and the error cases: a blocked metadata address, a mismatched resource, no client,
//! garbage from the token endpoint.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_lc_rs::digest;
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _,
    RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey,
};
use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use common::*;
use serde_json::{Value, json};
use switchboard_auth::{AuthError, JWT_BEARER_GRANT, ServerAuth, TokenStore};
use switchboard_config::{AuthProviderType, IdpConfig, OAuthConfig};
use switchboard_mcp::TokenStatus;

/// One request a fake server received.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: HashMap<String, String>,
    form: HashMap<String, String>,
}

type Log = Arc<Mutex<Vec<Seen>>>;

fn record(log: &Log, path: &str, headers: &HeaderMap, body: &str) -> Seen {
    let seen = Seen {
        path: path.into(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect(),
        form: url::form_urlencoded::parse(body.as_bytes())
            .into_owned()
            .collect(),
    };
    log.lock().unwrap().push(seen.clone());
    seen
}

fn token_json(token: &str) -> Response {
    (
        [
            ("content-type", "application/json"),
            ("cache-control", "no-store"),
        ],
        json!({"access_token": token, "token_type": "Bearer", "expires_in": 3600}).to_string(),
    )
        .into_response()
}

fn oauth_error(code: &str, desc: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [("content-type", "application/json")],
        json!({"error": code, "error_description": desc}).to_string(),
    )
        .into_response()
}

fn json_doc(v: Value) -> Response {
    ([("content-type", "application/json")], v.to_string()).into_response()
}

/// Serves `make(base)` on a free 127.0.0.1 port; the task ends with the test.
async fn serve(make: impl FnOnce(String) -> Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let app = make(base.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    base
}

/// The protected resource: 401 with `resource_metadata` on POST /mcp, and its RFC 9728
/// document naming `as_url` (or this server).
fn resource_routes(base: &str, as_url: Option<String>, resource: Option<String>) -> Router {
    let prm_url = format!("{base}/.well-known/oauth-protected-resource/mcp");
    let challenge = format!(r#"Bearer resource_metadata="{prm_url}", scope="tools""#);
    let doc = json!({
        "resource": resource.unwrap_or_else(|| format!("{base}/mcp")),
        "authorization_servers": [as_url.unwrap_or_else(|| base.to_string())],
        "scopes_supported": ["tools"],
    });
    Router::new()
        .route(
            "/mcp",
            post(move || {
                let c = challenge.clone();
                async move { (StatusCode::UNAUTHORIZED, [("www-authenticate", c)], "").into_response() }
            }),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(move || {
                let d = doc.clone();
                async move { json_doc(d) }
            }),
        )
}

fn as_metadata(base: &str, extra: Value) -> Value {
    let mut m = json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
    });
    if let (Some(m), Some(e)) = (m.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            m.insert(k.clone(), v.clone());
        }
    }
    m
}

fn metadata_route(doc: Value) -> Router {
    Router::new().route(
        "/.well-known/oauth-authorization-server",
        get(move || {
            let d = doc.clone();
            async move { json_doc(d) }
        }),
    )
}

fn machine_server(name: &str, url: &str, oauth: OAuthConfig) -> ServerAuth {
    let mut s = ServerAuth::adhoc(name, url);
    s.oauth = oauth;
    s
}

fn decode_jwt(jwt: &str) -> (Value, Value, Vec<u8>, String) {
    let parts: Vec<&str> = jwt.split('.').collect();
    assert_eq!(parts.len(), 3, "a compact JWS");
    let header = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
    let claims = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    let sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
    (header, claims, sig, format!("{}.{}", parts[0], parts[1]))
}

fn now_s() -> u64 {
    switchboard_auth::now_ms() / 1000
}

#[tokio::test]
async fn client_credentials_with_basic_auth_after_a_401() {
    let log: Log = Arc::default();
    let l = log.clone();
    let base = serve(move |base| {
        let token_url = format!("{base}/token");
        resource_routes(&base, None, None)
            .merge(metadata_route(as_metadata(
                &base,
                json!({
                    "grant_types_supported": ["client_credentials"],
                    "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                }),
            )))
            .route(
                "/token",
                post(move |headers: HeaderMap, body: String| {
                    let l = l.clone();
                    let base = token_url.trim_end_matches("/token").to_string();
                    async move {
                        let seen = record(&l, "/token", &headers, &body);
                        // RFC 6749 §2.3.1: form-encoded id and secret, then base64.
                        let want = format!("Basic {}", STANDARD.encode("c%2Fid:s%3Acret"));
                        if seen.headers.get("authorization") != Some(&want) {
                            return oauth_error("invalid_client", "bad basic auth");
                        }
                        if seen.headers.get("content-type").map(String::as_str)
                            != Some("application/x-www-form-urlencoded")
                        {
                            return oauth_error("invalid_request", "not a form");
                        }
                        if seen.form.get("grant_type").map(String::as_str) != Some("client_credentials")
                            || seen.form.get("scope").map(String::as_str) != Some("tools")
                            || seen.form.get("resource") != Some(&format!("{base}/mcp"))
                            || seen.form.contains_key("client_secret")
                        {
                            return oauth_error("invalid_request", "bad parameters");
                        }
                        token_json("cc-token")
                    }
                }),
            )
    })
    .await;
    let url = format!("{base}/mcp");
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(machine_server(
        "cc",
        &url,
        OAuthConfig {
            grant_type: Some("client_credentials".into()),
            client_id: Some("c/id".into()),
            client_secret: Some("s:cret".into()),
            ..Default::default()
        },
    ));
    // No token URL configured: nothing until the server's 401 names its metadata.
    assert_eq!(m.token("cc", &url).await.unwrap(), None);
    let challenge =
        format!(r#"Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp""#);
    let t = m
        .on_unauthorized("cc", &url, None, Some(&challenge))
        .await
        .unwrap();
    assert_eq!(t.as_deref(), Some("cc-token"), "{:?}", log.lock().unwrap());
    assert_eq!(
        m.token("cc", &url).await.unwrap().as_deref(),
        Some("cc-token")
    );
    assert_eq!(m.status("cc", &url), Some(TokenStatus::Authenticated));
    let saved = TokenStore::in_home(dir.path()).load("cc").unwrap().unwrap();
    assert_eq!(saved.grant_type.as_deref(), Some("client_credentials"));
    assert_eq!(
        saved.token_endpoint_auth_method.as_deref(),
        Some("client_secret_basic")
    );
    assert!(!format!("{saved:?}").contains("s:cret"));

    // `mcp login` does the same without a browser (it reads the 401 first).
    m.logout("cc").await.unwrap();
    let report = m
        .login("cc", &url, &login_opts(following_browser()))
        .await
        .unwrap();
    assert_eq!(report.grant.as_str(), "client_credentials");
}

#[tokio::test]
async fn client_secret_post_when_the_server_lists_only_post() {
    let log: Log = Arc::default();
    let l = log.clone();
    let base = serve(move |base| {
        resource_routes(&base, None, None)
            .merge(metadata_route(as_metadata(
                &base,
                json!({"token_endpoint_auth_methods_supported": ["client_secret_post"]}),
            )))
            .route(
                "/token",
                post(move |headers: HeaderMap, body: String| {
                    let l = l.clone();
                    async move {
                        let seen = record(&l, "/token", &headers, &body);
                        if seen.headers.contains_key("authorization")
                            || seen.form.get("client_id").map(String::as_str) != Some("cid")
                            || seen.form.get("client_secret").map(String::as_str) != Some("sec")
                        {
                            return oauth_error("invalid_client", "expected client_secret_post");
                        }
                        token_json("post-token")
                    }
                }),
            )
    })
    .await;
    let url = format!("{base}/mcp");
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(machine_server(
        "p",
        &url,
        OAuthConfig {
            grant_type: Some("client_credentials".into()),
            client_id: Some("cid".into()),
            client_secret: Some("sec".into()),
            ..Default::default()
        },
    ));
    let r = m.login("p", &url, &login_opts(following_browser())).await;
    assert!(r.is_ok(), "{r:?} {:?}", log.lock().unwrap());
    assert_eq!(
        m.token("p", &url).await.unwrap().as_deref(),
        Some("post-token")
    );
}

#[tokio::test]
async fn private_key_jwt_es256_client_assertion() {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
    let public = pair.public_key().as_ref().to_vec();
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("client-key.pem");
    std::fs::write(
        &key_file,
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            STANDARD.encode(pkcs8.as_ref())
        ),
    )
    .unwrap();

    let log: Log = Arc::default();
    let l = log.clone();
    let base = serve(move |base| {
        let token_url = format!("{base}/token");
        Router::new().route(
            "/token",
            post(move |headers: HeaderMap, body: String| {
                let (l, public, token_url) = (l.clone(), public.clone(), token_url.clone());
                async move {
                    let seen = record(&l, "/token", &headers, &body);
                    let f = &seen.form;
                    if f.get("client_assertion_type").map(String::as_str)
                        != Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
                        || f.contains_key("client_secret")
                        || seen.headers.contains_key("authorization")
                    {
                        return oauth_error("invalid_client", "expected private_key_jwt");
                    }
                    let (header, claims, sig, input) = decode_jwt(&f["client_assertion"]);
                    let key = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &public);
                    if header["alg"] != "ES256" || key.verify(input.as_bytes(), &sig).is_err() {
                        return oauth_error("invalid_client", "bad signature");
                    }
                    let exp = claims["exp"].as_u64().unwrap_or(0);
                    let iat = claims["iat"].as_u64().unwrap_or(0);
                    if claims["iss"] != "pk-client"
                        || claims["sub"] != "pk-client"
                        || claims["aud"] != token_url.as_str()
                        || claims["jti"].as_str().is_none_or(str::is_empty)
                        || exp <= now_s()
                        || exp - iat > 300
                    {
                        return oauth_error("invalid_client", "bad claims");
                    }
                    token_json("pkjwt-token")
                }
            }),
        )
    })
    .await;
    let m = manager(dir.path());
    let url = "http://127.0.0.1:9/mcp";
    m.add_server(machine_server(
        "pk",
        url,
        OAuthConfig {
            grant_type: Some("client_credentials".into()),
            client_id: Some("pk-client".into()),
            token_url: Some(format!("{base}/token")),
            token_endpoint_auth_method: Some("private_key_jwt".into()),
            private_key_file: Some(key_file.display().to_string()),
            signing_algorithm: Some("ES256".into()),
            ..Default::default()
        },
    ));
    // A configured token URL: the token comes before any request to the server.
    let t = m.token("pk", url).await;
    assert_eq!(
        t.as_ref().ok().cloned().flatten().as_deref(),
        Some("pkjwt-token"),
        "{t:?} {:?}",
        log.lock().unwrap()
    );
}

/// A fresh ES256 key: its public key and a PKCS#8 PEM file holding the private key.
fn es256_key(dir: &std::path::Path) -> (Vec<u8>, std::path::PathBuf) {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
    let key_file = dir.join("client-key.pem");
    std::fs::write(
        &key_file,
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            STANDARD.encode(pkcs8.as_ref())
        ),
    )
    .unwrap();
    (pair.public_key().as_ref().to_vec(), key_file)
}

/// With the authorization server's metadata read (after the server's 401), the client
/// assertion is addressed to the issuer identifier, not to the token endpoint: a strict
/// authorization server (RFC 7523bis) accepts it.
#[tokio::test]
async fn private_key_jwt_audience_is_the_issuer() {
    let dir = tempfile::tempdir().unwrap();
    let (public, key_file) = es256_key(dir.path());
    let auds: Arc<Mutex<Vec<Value>>> = Arc::default();
    let seen_auds = auds.clone();
    let base = serve(move |base| {
        let issuer = base.clone();
        resource_routes(&base, None, None)
            .merge(metadata_route(as_metadata(
                &base,
                json!({
                    "grant_types_supported": ["client_credentials"],
                    "token_endpoint_auth_methods_supported": ["private_key_jwt"],
                    "token_endpoint_auth_signing_alg_values_supported": ["ES256"],
                }),
            )))
            .route(
                "/token",
                post(move |body: String| {
                    let (auds, public, issuer) =
                        (seen_auds.clone(), public.clone(), issuer.clone());
                    async move {
                        let form: HashMap<String, String> =
                            url::form_urlencoded::parse(body.as_bytes())
                                .into_owned()
                                .collect();
                        let Some(assertion) = form.get("client_assertion") else {
                            return oauth_error("invalid_client", "no client assertion");
                        };
                        let (_, claims, sig, input) = decode_jwt(assertion);
                        let key = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &public);
                        if key.verify(input.as_bytes(), &sig).is_err() {
                            return oauth_error("invalid_client", "bad signature");
                        }
                        auds.lock().unwrap().push(claims["aud"].clone());
                        if claims["aud"] != issuer.as_str() {
                            return oauth_error("invalid_client", "aud is not the issuer");
                        }
                        token_json("issuer-aud-token")
                    }
                }),
            )
    })
    .await;
    let m = manager(dir.path());
    let url = format!("{base}/mcp");
    m.add_server(machine_server(
        "pk",
        &url,
        OAuthConfig {
            grant_type: Some("client_credentials".into()),
            client_id: Some("pk-client".into()),
            token_endpoint_auth_method: Some("private_key_jwt".into()),
            private_key_file: Some(key_file.display().to_string()),
            signing_algorithm: Some("ES256".into()),
            ..Default::default()
        },
    ));
    let r = m.login("pk", &url, &login_opts(following_browser())).await;
    let auds = auds.lock().unwrap().clone();
    assert!(r.is_ok(), "{r:?} audiences sent: {auds:?}");
    assert_eq!(auds, vec![Value::from(base.clone())]);
    assert_ne!(auds[0], Value::from(format!("{base}/token")));
    assert_eq!(
        m.token("pk", &url).await.unwrap().as_deref(),
        Some("issuer-aud-token")
    );
}

#[tokio::test]
async fn enterprise_jwt_bearer_with_an_id_jag() {
    let log: Log = Arc::default();
    let (l1, l2) = (log.clone(), log.clone());
    let jag = format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"RS256","typ":"oauth-id-jag+jwt"}"#),
        URL_SAFE_NO_PAD.encode(r#"{"iss":"idp","sub":"u"}"#),
        URL_SAFE_NO_PAD.encode("sig")
    );
    let jag2 = jag.clone();
    let base = serve(move |base| {
        let b1 = base.clone();
        resource_routes(&base, None, None)
            .merge(metadata_route(as_metadata(
                &base,
                json!({"grant_types_supported": [JWT_BEARER_GRANT]}),
            )))
            .route(
                "/idp/token",
                post(move |headers: HeaderMap, body: String| {
                    let (l, jag, base) = (l1.clone(), jag.clone(), b1.clone());
                    async move {
                        let f = record(&l, "/idp/token", &headers, &body).form;
                        let want = [
                            (
                                "grant_type",
                                "urn:ietf:params:oauth:grant-type:token-exchange",
                            ),
                            (
                                "requested_token_type",
                                "urn:ietf:params:oauth:token-type:id-jag",
                            ),
                            ("subject_token", "the-id-token"),
                            (
                                "subject_token_type",
                                "urn:ietf:params:oauth:token-type:id_token",
                            ),
                            ("client_id", "idp-client"),
                        ];
                        if want
                            .iter()
                            .any(|(k, v)| f.get(*k).map(String::as_str) != Some(v))
                            || f.get("audience") != Some(&base)
                            || f.get("resource") != Some(&format!("{base}/mcp"))
                        {
                            return oauth_error("invalid_request", "bad token exchange");
                        }
                        json_doc(json!({
                            "access_token": jag,
                            "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                            "token_type": "N_A",
                            "expires_in": 300,
                        }))
                    }
                }),
            )
            .route(
                "/token",
                post(move |headers: HeaderMap, body: String| {
                    let (l, jag) = (l2.clone(), jag2.clone());
                    async move {
                        let seen = record(&l, "/token", &headers, &body);
                        let basic = format!("Basic {}", STANDARD.encode("mcp-client:s"));
                        if seen.form.get("grant_type").map(String::as_str) != Some(JWT_BEARER_GRANT)
                            || seen.form.get("assertion") != Some(&jag)
                            || seen.headers.get("authorization") != Some(&basic)
                        {
                            return oauth_error("invalid_grant", "bad jwt-bearer request");
                        }
                        token_json("enterprise-token")
                    }
                }),
            )
    })
    .await;
    let url = format!("{base}/mcp");
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(machine_server(
        "ent",
        &url,
        OAuthConfig {
            grant_type: Some(JWT_BEARER_GRANT.into()),
            client_id: Some("mcp-client".into()),
            client_secret: Some("s".into()),
            idp: Some(IdpConfig {
                issuer: Some(format!("{base}/idp")),
                token_endpoint: Some(format!("{base}/idp/token")),
                client_id: Some("idp-client".into()),
                id_token: Some("the-id-token".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
    ));
    let r = m.login("ent", &url, &login_opts(following_browser())).await;
    assert!(r.is_ok(), "{r:?} {:?}", log.lock().unwrap());
    assert_eq!(
        m.token("ent", &url).await.unwrap().as_deref(),
        Some("enterprise-token")
    );
    let paths: Vec<String> = log.lock().unwrap().iter().map(|s| s.path.clone()).collect();
    assert_eq!(paths, vec!["/idp/token", "/token"]);
}

#[tokio::test]
async fn google_adc_service_account_and_authorized_user() {
    let rsa = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
    let pkcs8 = AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&rsa).unwrap();
    let public = rsa.public_key().as_ref().to_vec();
    let log: Log = Arc::default();
    let l = log.clone();
    let base = serve(move |base| {
        let token_uri = format!("{base}/google/token");
        Router::new().route(
            "/google/token",
            post(move |headers: HeaderMap, body: String| {
                let (l, public, token_uri) = (l.clone(), public.clone(), token_uri.clone());
                async move {
                    let f = record(&l, "/google/token", &headers, &body).form;
                    match f.get("grant_type").map(String::as_str) {
                        Some(JWT_BEARER_GRANT) => {
                            let (header, claims, sig, input) = decode_jwt(&f["assertion"]);
                            let key = UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &public);
                            if header["alg"] != "RS256"
                                || header["kid"] != "key-1"
                                || key.verify(input.as_bytes(), &sig).is_err()
                                || claims["iss"] != "sa@proj.iam.gserviceaccount.com"
                                || claims["aud"] != token_uri.as_str()
                                || claims["scope"]
                                    != "https://www.googleapis.com/auth/cloud-platform"
                            {
                                return oauth_error("invalid_grant", "bad service account JWT");
                            }
                            token_json("ya29.service")
                        }
                        Some("refresh_token")
                            if f.get("client_id").map(String::as_str) == Some("uid")
                                && f.get("client_secret").map(String::as_str)
                                    == Some("usecret")
                                && f.get("refresh_token").map(String::as_str)
                                    == Some("1//user") =>
                        {
                            token_json("ya29.user")
                        }
                        _ => oauth_error("unsupported_grant_type", "?"),
                    }
                }
            }),
        )
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let sa_file = dir.path().join("sa.json");
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        STANDARD.encode(pkcs8.as_ref())
    );
    std::fs::write(
        &sa_file,
        json!({
            "type": "service_account",
            "client_email": "sa@proj.iam.gserviceaccount.com",
            "private_key": pem,
            "private_key_id": "key-1",
            "token_uri": format!("{base}/google/token"),
        })
        .to_string(),
    )
    .unwrap();
    let url = "http://127.0.0.1:9/mcp";
    let m = manager(dir.path());
    let mut s = ServerAuth::adhoc("g", url);
    s.provider = AuthProviderType::GoogleCredentials;
    s.oauth.scopes = Some(vec![
        "https://www.googleapis.com/auth/cloud-platform".into(),
    ]);
    m.add_server(s.clone());
    m.set_google_credentials_file(Some(sa_file));
    assert_eq!(m.status("g", url), Some(TokenStatus::Authenticated));
    let t = m.token("g", url).await;
    assert_eq!(
        t.as_ref().ok().cloned().flatten().as_deref(),
        Some("ya29.service"),
        "{t:?} {:?}",
        log.lock().unwrap()
    );

    let user_file = dir.path().join("user.json");
    std::fs::write(
        &user_file,
        json!({
            "type": "authorized_user",
            "client_id": "uid",
            "client_secret": "usecret",
            "refresh_token": "1//user",
            "token_uri": format!("{base}/google/token"),
        })
        .to_string(),
    )
    .unwrap();
    let m2 = manager(&dir.path().join("other"));
    m2.add_server(s);
    m2.set_google_credentials_file(Some(user_file));
    assert_eq!(
        m2.token("g", url).await.unwrap().as_deref(),
        Some("ya29.user")
    );

    // A missing file is a clear error.
    let m3 = manager(&dir.path().join("third"));
    let mut s3 = ServerAuth::adhoc("g", url);
    s3.provider = AuthProviderType::GoogleCredentials;
    m3.add_server(s3);
    m3.set_google_credentials_file(Some(dir.path().join("nope.json")));
    let e = m3.token("g", url).await.unwrap_err().to_string();
    assert!(
        e.contains("Google credentials") && e.contains("nope.json"),
        "{e}"
    );
}

/// An authorization server with `/authorize` (auto-approving, remembering the PKCE
/// challenge), `/token` (checking the verifier) and `/register`, at the default
/// 2025-03-26 paths.
fn code_flow_routes(log: Log, token_body: Option<&'static str>) -> Router {
    let challenges: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let (c1, c2) = (challenges.clone(), challenges);
    let (l1, l2, l3) = (log.clone(), log.clone(), log);
    Router::new()
        .route(
            "/register",
            post(move |headers: HeaderMap, body: String| {
                let l = l1.clone();
                async move {
                    record(&l, "/register", &headers, "");
                    let v: Value = serde_json::from_str(&body).unwrap_or_default();
                    if v["client_name"] != "Switchboard"
                        || v["token_endpoint_auth_method"] != "none"
                        || v["grant_types"] != json!(["authorization_code", "refresh_token"])
                    {
                        return oauth_error("invalid_client_metadata", "unexpected metadata");
                    }
                    (
                        StatusCode::CREATED,
                        [("content-type", "application/json")],
                        json!({"client_id": "dyn-client", "redirect_uris": v["redirect_uris"]}).to_string(),
                    )
                        .into_response()
                }
            }),
        )
        .route(
            "/authorize",
            get(
                move |headers: HeaderMap,
                      axum::extract::Query(q): axum::extract::Query<HashMap<String, String>>| {
                    let (l, c) = (l2.clone(), c1.clone());
                    async move {
                        record(&l, "/authorize", &headers, "");
                        if q.get("code_challenge_method").map(String::as_str) != Some("S256")
                            || q.get("response_type").map(String::as_str) != Some("code")
                        {
                            return oauth_error("invalid_request", "PKCE S256 required");
                        }
                        c.lock()
                            .unwrap()
                            .insert("code-1".into(), q["code_challenge"].clone());
                        let mut to = url::Url::parse(&q["redirect_uri"]).unwrap();
                        to.query_pairs_mut()
                            .append_pair("code", "code-1")
                            .append_pair("state", &q["state"]);
                        (StatusCode::FOUND, [("location", to.to_string())], "").into_response()
                    }
                },
            ),
        )
        .route(
            "/token",
            post(move |headers: HeaderMap, body: String| {
                let (l, c) = (l3.clone(), c2.clone());
                async move {
                    let f = record(&l, "/token", &headers, &body).form;
                    if let Some(garbage) = token_body {
                        return ([("content-type", "text/html")], garbage).into_response();
                    }
                    let want = c.lock().unwrap().get("code-1").cloned().unwrap_or_default();
                    let got = URL_SAFE_NO_PAD.encode(
                        digest::digest(&digest::SHA256, f["code_verifier"].as_bytes()).as_ref(),
                    );
                    if f.get("code").map(String::as_str) != Some("code-1") || got != want {
                        return oauth_error("invalid_grant", "PKCE verification failed");
                    }
                    token_json("legacy-token")
                }
            }),
        )
}

#[tokio::test]
async fn older_servers_use_the_default_endpoints() {
    let log: Log = Arc::default();
    let l = log.clone();
    let base = serve(move |_base| {
        code_flow_routes(l.clone(), None).route(
            "/mcp",
            post(|| async {
                (
                    StatusCode::UNAUTHORIZED,
                    [("www-authenticate", "Bearer")],
                    "",
                )
                    .into_response()
            }),
        )
    })
    .await;
    let url = format!("{base}/mcp");
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(server("old", &url));
    let r = m.login("old", &url, &login_opts(following_browser())).await;
    assert!(r.is_ok(), "{r:?} {:?}", log.lock().unwrap());
    let saved = TokenStore::in_home(dir.path())
        .load("old")
        .unwrap()
        .unwrap();
    assert_eq!(saved.token.access_token, "legacy-token");
    assert_eq!(saved.client_id.as_deref(), Some("dyn-client"));
    assert_eq!(
        saved.token_url.as_deref(),
        Some(format!("{base}/token").as_str())
    );
}

#[tokio::test]
async fn token_endpoint_garbage_is_a_clear_error() {
    let log: Log = Arc::default();
    let l = log.clone();
    let base = serve(move |base| {
        code_flow_routes(
            l.clone(),
            Some("<html>502 Bad Gateway from some proxy</html>"),
        )
        .merge(resource_routes(&base, None, None))
        .merge(metadata_route(as_metadata(
            &base,
            json!({"registration_endpoint": format!("{base}/register")}),
        )))
    })
    .await;
    let url = format!("{base}/mcp");
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(server("g", &url));
    let e = m
        .login("g", &url, &login_opts(following_browser()))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, AuthError::InvalidResponse { .. }), "{text}");
    assert!(text.contains("the token endpoint"), "{text}");
    assert!(text.contains("not JSON"), "{text}");
    assert!(
        !text.contains("Bad Gateway"),
        "bodies are not quoted: {text}"
    );
    assert!(TokenStore::in_home(dir.path()).load("g").unwrap().is_none());
}

#[tokio::test]
async fn metadata_pointing_at_a_blocked_address_is_refused() {
    let base =
        serve(|base| resource_routes(&base, Some("http://169.254.169.254/".into()), None)).await;
    let url = format!("{base}/mcp");
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(server("b", &url));
    let e = m
        .login("b", &url, &login_opts(following_browser()))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, AuthError::Blocked { .. }), "{text}");
    assert!(text.contains("169.254.169.254"), "{text}");
    assert!(text.contains("blocked by URL policy `local`"), "{text}");
}

#[tokio::test]
async fn a_resource_for_another_server_is_refused() {
    let log: Log = Arc::default();
    let l = log.clone();
    let base = serve(move |base| {
        let l = l.clone();
        resource_routes(&base, None, Some("http://127.0.0.1:1/elsewhere".into())).route(
            "/.well-known/oauth-authorization-server",
            get(move |headers: HeaderMap| {
                let l = l.clone();
                async move {
                    record(&l, "/.well-known/oauth-authorization-server", &headers, "");
                    StatusCode::NOT_FOUND
                }
            }),
        )
    })
    .await;
    let url = format!("{base}/mcp");
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(server("r", &url));
    let e = m
        .login("r", &url, &login_opts(following_browser()))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, AuthError::ResourceMismatch { .. }), "{text}");
    assert!(text.contains("http://127.0.0.1:1/elsewhere"), "{text}");
    assert!(
        log.lock().unwrap().is_empty(),
        "the authorization server was not contacted"
    );
}

#[tokio::test]
async fn no_registration_and_no_client_id_names_the_field() {
    let base = serve(|base| {
        resource_routes(&base, None, None).merge(metadata_route(as_metadata(&base, json!({}))))
    })
    .await;
    let url = format!("{base}/mcp");
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    m.add_server(server("n", &url));
    let e = m
        .login("n", &url, &login_opts(following_browser()))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(text.contains("mcpServers.n.oauth.clientId"), "{text}");
}

#[tokio::test]
async fn a_client_id_metadata_document_is_sent_as_the_client_id() {
    let log: Log = Arc::default();
    let l = log.clone();
    let base = serve(move |base| {
        code_flow_routes(l.clone(), None)
            .merge(resource_routes(&base, None, None))
            .merge(metadata_route(as_metadata(
                &base,
                json!({"client_id_metadata_document_supported": true}),
            )))
    })
    .await;
    let url = format!("{base}/mcp");
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    let mut s = server("cimd", &url);
    s.oauth.client_id = Some("https://switchboard.example/client.json".into());
    m.add_server(s);
    let r = m
        .login("cimd", &url, &login_opts(following_browser()))
        .await;
    assert!(r.is_ok(), "{r:?}");
    let seen = log.lock().unwrap().clone();
    assert!(
        seen.iter().all(|s| s.path != "/register"),
        "no registration"
    );
    let token = seen.iter().find(|s| s.path == "/token").unwrap();
    assert_eq!(
        token.form.get("client_id").map(String::as_str),
        Some("https://switchboard.example/client.json")
    );
    assert_eq!(
        token.form.get("resource").map(String::as_str),
        Some(url.as_str()),
        "RFC 8707 resource"
    );
}
