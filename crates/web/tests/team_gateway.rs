//! The team gateway (`/mcp`) and its authorization server, with real parts: the TS SDK
//! client's own OAuth flow (RFC 9728 discovery from the 401, RFC 8414, dynamic
//! registration, PKCE S256, code exchange) against two `serve --team` instances on one
//! PostgreSQL behind one public origin, every request of the client alternating between
//! them; the user's browser step (sign-in at a real `oidc-provider`, consent) done by
//! following redirects with cookies, also alternating. The client lists alice's tools
//! (the demo server, named `{server}__{tool}`) and calls echo; bob's server is never
//! reached. Then: the refresh token is rotated (the old one, spent, ends the grant), and a
//! token for another resource, an expired token and a token whose sign-in session ended
//! are refused with 401 and the RFC 9728 pointer. RFC 7009 revocation: the SDK client
//! finds the endpoint in the metadata and revokes its access token (then refreshes); direct
//! requests revoke access and refresh tokens. The same on SQLite with one instance.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use switchboard_store::{GatewayApproval, Secret, ServerRecord, Store, TokenLifetimes, Transport};
use switchboard_testkit::RecordingListener;
use team_support::{Browser, COOKIE, Db, Instance, InstanceOptions, demo_http, hidden_fields};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ts_sdk_client_through_two_instances_on_postgres() {
    gateway_flow(Db::postgres(), 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ts_sdk_client_on_sqlite_with_one_instance() {
    gateway_flow(Db::sqlite(), 1).await;
}

fn server(name: &str, url: &str, header: Option<&str>) -> ServerRecord {
    ServerRecord {
        name: name.into(),
        url: url.into(),
        transport: Transport::Http,
        headers: header
            .map(|h| BTreeMap::from([("Authorization".to_owned(), Secret::new(h))]))
            .unwrap_or_default(),
        enabled: true,
    }
}

fn set_cookie(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with(&format!("{name}=")))
        .map(|c| c.split(';').next().unwrap().to_owned())
}

fn location(r: &reqwest::Response) -> String {
    r.headers()
        .get("location")
        .unwrap_or_else(|| panic!("no Location: {} {:?}", r.status(), r.headers()))
        .to_str()
        .unwrap()
        .to_owned()
}

/// The browser step: the authorization URL opened without a session, the sign-in at the
/// provider, the callback, the consent page and its POST — each request sent to the next
/// instance. Returns the final redirect to the client (with the code).
async fn browser_step(
    authorize: &str,
    origin: &str,
    at: &dyn Fn(usize) -> String,
    peer: &switchboard_testkit::OidcPeer,
    account: &str,
) -> String {
    let anonymous = Browser::new(origin, None);
    let path = authorize.strip_prefix(origin).unwrap();
    let r = anonymous
        .http
        .get(format!("{}{path}", at(0)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303, "{:?}", r.headers());
    let login = location(&r);
    assert!(login.starts_with("/auth/login?return="), "{login}");
    let r = anonymous
        .http
        .get(format!("{}{login}", at(1)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let login_cookie = set_cookie(&r, "switchboard_login").unwrap();
    let back = peer.drive_login(&location(&r), account).await;
    let r = anonymous
        .http
        .get(format!("{}/auth/callback?{}", at(2), back.query))
        .header("Cookie", &login_cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303, "{:?}", r.headers());
    let session = set_cookie(&r, COOKIE).unwrap();
    let consent_path = location(&r);
    assert!(
        consent_path.starts_with("/oauth/authorize?"),
        "{consent_path}"
    );
    let r = anonymous
        .http
        .get(format!("{}{consent_path}", at(3)))
        .header("Cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    let html = r.text().await.unwrap();
    assert!(html.contains(&format!("{account}@example.com")), "{html}");
    assert!(html.contains("TS SDK team driver"), "{html}");
    let mut fields = hidden_fields(&html);
    fields.push(("decision".into(), "allow".into()));
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields.iter())
        .finish();
    // Without the app's Origin (a form posted from another site) the consent is refused.
    let r = anonymous
        .http
        .post(format!("{}/oauth/authorize", at(4)))
        .header("Cookie", &session)
        .header("Origin", "http://evil.example")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = anonymous
        .http
        .post(format!("{}/oauth/authorize", at(5)))
        .header("Cookie", &session)
        .header("Origin", origin)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303, "{:?}", r.headers());
    location(&r)
}

/// `tools/list` straight over HTTP with `token`: the status and the WWW-Authenticate.
/// Alice signed in with her own `servers` (name, URL) and a gateway access token (10
/// minutes) for `resource`: her id, her session cookie and the token.
async fn alice_with_token(
    store: &Store,
    servers: &[(&str, &str)],
    resource: &str,
) -> (switchboard_store::UserId, String, String) {
    let (alice, cookie) = team_support::sign_in(store, "alice@example.com", false).await;
    for (name, url) in servers {
        store
            .for_user(&alice)
            .put_server(&server(name, url, None))
            .await
            .unwrap();
    }
    let client_id = team_support::gateway_client(store, "http://127.0.0.1:9/cb").await;
    let (access, _) = team_support::gateway_tokens(
        store,
        &cookie,
        &client_id,
        resource,
        Duration::from_secs(600),
    )
    .await;
    (alice, cookie, access)
}

/// Runs a client driver (`program driver '<plan>'`), killed after `secs`; its last
/// stdout line, as JSON.
async fn run_driver(
    program: &std::ffi::OsStr,
    driver: &std::path::Path,
    plan: &Value,
    secs: u64,
) -> Value {
    let out = tokio::time::timeout(
        Duration::from_secs(secs),
        tokio::process::Command::new(program)
            .arg(driver)
            .arg(plan.to_string())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("the driver finished within {secs} s"))
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or_default()).unwrap()
}

async fn list_with(base: &str, token: &str) -> (u16, String, Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let www = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = r.text().await.unwrap();
    (
        status,
        www,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

async fn token_request(base: &str, form: &[(&str, &str)]) -> (u16, Value) {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form.iter())
        .finish();
    let r = reqwest::Client::new()
        .post(format!("{base}/oauth/token"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn revoke_request(base: &str, form: &[(&str, &str)]) -> (u16, Value) {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form.iter())
        .finish();
    let r = reqwest::Client::new()
        .post(format!("{base}/oauth/revoke"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// A token for alice issued straight through the store (another resource, or a short life).
async fn store_token(
    store: &Store,
    session: &str,
    client_id: &str,
    resource: &str,
    access: Duration,
) -> String {
    let approval = GatewayApproval {
        client_id: client_id.into(),
        redirect_uri: "http://127.0.0.1:1/cb".into(),
        code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM".into(),
        resource: resource.into(),
        scope: "mcp".into(),
    };
    let code = store
        .approve_gateway_grant(session, &approval, Duration::from_secs(60))
        .await
        .unwrap();
    let taken = store.take_gateway_code(&code).await.unwrap().unwrap();
    store
        .issue_gateway_tokens(
            &taken.grant,
            TokenLifetimes {
                access,
                refresh: Duration::from_secs(600),
            },
        )
        .await
        .unwrap()
        .access_token
}

async fn gateway_flow(db: Db, n: usize) {
    let origin = format!("http://127.0.0.1:{}", switchboard_testkit::free_port());
    let peer = team_support::oidc_provider_for(&format!("{origin}/auth/callback")).await;
    let mut apps = Vec::new();
    for _ in 0..n {
        apps.push(
            Instance::start(
                &db,
                InstanceOptions {
                    public_origin: Some(origin.clone()),
                    sign_in: Some(team_support::sign_in_options(&peer, "admin@example.com")),
                    ..Default::default()
                },
            )
            .await,
        );
    }
    let bases: Vec<String> = apps.iter().map(|a| a.base.clone()).collect();
    let at = |i: usize| bases[i % n].clone();
    let store = db.store().await;

    // Public metadata, from any instance.
    let anon = Browser::new(&origin, None);
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let (status, v) = anon.get(&at(1), path).await;
        assert_eq!(status, 200);
        assert_eq!(v["resource"], format!("{origin}/mcp"));
        assert_eq!(v["authorization_servers"], json!([origin]));
    }
    let (status, v) = anon
        .get(&at(0), "/.well-known/oauth-authorization-server")
        .await;
    assert_eq!(status, 200);
    assert_eq!(v["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(
        v["registration_endpoint"],
        format!("{origin}/oauth/register")
    );
    assert_eq!(v["revocation_endpoint"], format!("{origin}/oauth/revoke"));
    // Registration refuses a redirect URI that is neither https nor loopback http.
    let (status, v) = anon
        .post(
            &at(0),
            "/oauth/register",
            &json!({"redirect_uris": ["http://evil.example/cb"]}),
        )
        .await;
    assert_eq!(
        (status, v["error"].as_str()),
        (400, Some("invalid_redirect_uri"))
    );

    // Bob signs in first and has a server whose URL records whatever reaches it.
    let trap = RecordingListener::start().await;
    let bob_secret = "Bearer bob-header-secret-4411";
    let (bob_id, _) = team_support::sign_in(&store, "bob@example.com", false).await;
    store
        .for_user(&bob_id)
        .put_server(&server("bobs", &trap.url("/mcp"), Some(bob_secret)))
        .await
        .unwrap();
    // Alice's own server: the demo server. She signs in through the browser step below,
    // so her user exists from then on; her server is added through the store as soon as
    // the sign-in made her (the page would do it through /api/servers).
    let demo = demo_http().await;

    let sdk = switchboard_testkit::peers_dir().join("node/node_modules/@modelcontextprotocol/sdk");
    switchboard_testkit::ensure_peers();
    let driver = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/drivers/team_gateway_client.mjs");
    let redirect_url = format!(
        "http://127.0.0.1:{}/callback",
        switchboard_testkit::free_port()
    );
    let plan = json!({
        "sdk": sdk,
        "public": origin,
        "bases": bases,
        "redirectUrl": redirect_url,
        "echo": "demo__echo",
        "calls": 4,
        "revoke": true,
    });
    let mut child = tokio::process::Command::new("node")
        .arg(&driver)
        .arg(plan.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = match tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await
    {
        Ok(Ok(Some(line))) => serde_json::from_str(&line).unwrap(),
        other => {
            let out = child.wait_with_output().await.unwrap();
            panic!(
                "the driver printed no authorization URL ({other:?}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    let authorize = first["authorize"].as_str().unwrap().to_owned();
    assert!(
        authorize.starts_with(&format!("{origin}/oauth/authorize?")),
        "{authorize}"
    );
    assert!(
        authorize.contains("code_challenge_method=S256"),
        "{authorize}"
    );
    assert!(
        authorize.contains(&format!(
            "resource={}",
            url::form_urlencoded::byte_serialize(format!("{origin}/mcp").as_bytes())
                .collect::<String>()
        )),
        "{authorize}"
    );

    let code_redirect = browser_step(&authorize, &origin, &at, &peer, "alice").await;
    assert!(
        code_redirect.starts_with(&format!("{redirect_url}?")),
        "{code_redirect}"
    );
    let alice = store
        .sign_in_user(
            &team_support::provider_account(&peer, "alice", "alice@example.com"),
            "alice",
            false,
        )
        .await
        .unwrap();
    store
        .for_user(&alice.id)
        .put_server(&server("demo", &demo, None))
        .await
        .unwrap();
    stdin
        .write_all(format!("{code_redirect}\n").as_bytes())
        .await
        .unwrap();
    let done = tokio::time::timeout(Duration::from_secs(90), lines.next_line()).await;
    let out: Value = match done {
        Ok(Ok(Some(line))) => serde_json::from_str(&line).unwrap(),
        other => {
            let out = child.wait_with_output().await.unwrap();
            panic!(
                "the driver did not finish ({other:?}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    let _ = child.wait().await;

    // Alice's tools, named through the gateway's table; echo answered every time.
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(tools.contains(&"demo__echo"), "{tools:?}");
    assert!(tools.iter().all(|t| t.starts_with("demo__")), "{tools:?}");
    for i in 0..4 {
        assert_eq!(out["echoes"][i], format!("Echo: call {i}"), "{out}");
    }
    // Every instance answered requests of this one client.
    let hits = out["hits"].as_object().unwrap();
    assert_eq!(hits.len(), n, "{out}");
    assert!(hits.values().all(|h| h.as_u64().unwrap() >= 3), "{out}");
    // ...and MCP requests themselves (initialize, lists, calls) went to each instance.
    let requests: Vec<&str> = out["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    for base in &bases {
        let mcp = requests
            .iter()
            .filter(|r| **r == format!("POST /mcp -> {base}"))
            .count();
        assert!(mcp >= 3, "{base} answered {mcp} MCP requests: {requests:?}");
    }
    // Bob's server was never reached, with anything.
    assert_eq!(trap.connections(), 0, "{}", trap.received());

    // The SDK found the revocation endpoint and revoked its access token; the gateway
    // then refused it and the SDK refreshed (a new access token) and listed again.
    assert_eq!(out["revocationEndpoint"], format!("{origin}/oauth/revoke"));
    assert_eq!(out["revokeStatus"], 200, "{out}");
    assert_eq!(out["toolsAfterRevoke"], json!(tools.len()), "{out}");
    let revoked = out["revokedAccess"].as_str().unwrap();
    assert_ne!(out["accessToken"].as_str().unwrap(), revoked);
    assert_eq!(list_with(&at(0), revoked).await.0, 401);

    let access = out["accessToken"].as_str().unwrap().to_owned();
    let refresh = out["refreshToken"].as_str().unwrap().to_owned();
    let client_id = out["clientId"].as_str().unwrap().to_owned();
    let (status, _, v) = list_with(&at(1), &access).await;
    assert_eq!(status, 200, "{v}");

    // The stored rows hold hashes, never the tokens.
    let dump = format!(
        "{:?}",
        store
            .gateway_access(&access)
            .await
            .unwrap()
            .map(|a| a.resource)
    );
    assert!(!dump.contains(&access));

    // Refresh: rotated on the other instance; the spent refresh token again ends the grant.
    let (status, v) = token_request(
        &at(1),
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &refresh),
            ("client_id", &client_id),
            ("resource", &format!("{origin}/mcp")),
        ],
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let new_access = v["access_token"].as_str().unwrap().to_owned();
    assert_ne!(v["refresh_token"].as_str().unwrap(), refresh);
    assert_eq!(list_with(&at(0), &new_access).await.0, 200);
    let (status, v) = token_request(
        &at(0),
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &refresh),
            ("client_id", &client_id),
        ],
    )
    .await;
    assert_eq!((status, v["error"].as_str()), (400, Some("invalid_grant")));
    let (status, www, _) = list_with(&at(1), &new_access).await;
    assert_eq!(status, 401, "a reused refresh token ends its grant");
    assert!(www.contains("error=\"invalid_token\""), "{www}");

    // Without a token: 401 pointing at the RFC 9728 metadata.
    let (status, www, _) = list_with(&at(0), "").await;
    assert_eq!(status, 401);
    assert!(
        www.contains(&format!(
            "resource_metadata=\"{origin}/.well-known/oauth-protected-resource/mcp\""
        )),
        "{www}"
    );
    // A token for another resource, and an expired one: 401.
    let (_, session) = team_support::sign_in(&store, "alice@example.com", false).await;
    let other = store_token(
        &store,
        &session,
        &client_id,
        "http://other.example/mcp",
        Duration::from_secs(600),
    )
    .await;
    assert_eq!(list_with(&at(0), &other).await.0, 401);
    // A token for another resource cannot be asked for either.
    let (status, v) = token_request(
        &at(1),
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", "whatever"),
            ("client_id", &client_id),
            ("resource", "http://other.example/mcp"),
        ],
    )
    .await;
    assert_eq!((status, v["error"].as_str()), (400, Some("invalid_target")));
    let expired = store_token(
        &store,
        &session,
        &client_id,
        &format!("{origin}/mcp"),
        Duration::ZERO,
    )
    .await;
    assert_eq!(list_with(&at(0), &expired).await.0, 401);
    // A good token stops working when the sign-in session that approved it ends.
    let live = store_token(
        &store,
        &session,
        &client_id,
        &format!("{origin}/mcp"),
        Duration::from_secs(600),
    )
    .await;
    assert_eq!(list_with(&at(1), &live).await.0, 200);

    // RFC 7009 by direct requests on either instance.
    let (acc, refr) = team_support::gateway_tokens(
        &store,
        &session,
        &client_id,
        &format!("{origin}/mcp"),
        Duration::from_secs(600),
    )
    .await;
    let (status, v) = revoke_request(&at(0), &[("token", &acc)]).await;
    assert_eq!((status, v["error"].as_str()), (401, Some("invalid_client")));
    let (status, v) = revoke_request(&at(0), &[("client_id", &client_id)]).await;
    assert_eq!(
        (status, v["error"].as_str()),
        (400, Some("invalid_request"))
    );
    let (status, v) = revoke_request(&at(1), &[("token", &acc), ("client_id", "sbc_other")]).await;
    assert_eq!(
        (status, v["error"].as_str()),
        (400, Some("unauthorized_client"))
    );
    assert_eq!(
        list_with(&at(0), &acc).await.0,
        200,
        "another client's revocation is refused"
    );
    let unknown = [
        ("token", "sbat_never_issued"),
        ("client_id", client_id.as_str()),
    ];
    assert_eq!(revoke_request(&at(0), &unknown).await.0, 200);
    let (status, _) = revoke_request(
        &at(1),
        &[
            ("token", &acc),
            ("token_type_hint", "access_token"),
            ("client_id", &client_id),
        ],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        list_with(&at(0), &acc).await.0,
        401,
        "a revoked access token"
    );
    // The grant lives on: its refresh token still buys a pair...
    let (status, v) = token_request(
        &at(0),
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &refr),
            ("client_id", &client_id),
        ],
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let acc2 = v["access_token"].as_str().unwrap().to_owned();
    let refr2 = v["refresh_token"].as_str().unwrap().to_owned();
    assert_eq!(list_with(&at(1), &acc2).await.0, 200);
    // ...until the refresh token is revoked (with a wrong hint): the whole grant ends.
    let (status, _) = revoke_request(
        &at(1),
        &[
            ("token", &refr2),
            ("token_type_hint", "access_token"),
            ("client_id", &client_id),
        ],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        list_with(&at(0), &acc2).await.0,
        401,
        "the grant's access token ended"
    );
    let (status, v) = token_request(
        &at(1),
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &refr2),
            ("client_id", &client_id),
        ],
    )
    .await;
    assert_eq!((status, v["error"].as_str()), (400, Some("invalid_grant")));
    assert_eq!(
        list_with(&at(1), &live).await.0,
        200,
        "other grants are untouched"
    );

    let signed_out = Browser::new(&origin, Some(&session));
    let (status, _) = signed_out
        .send(signed_out.request(Method::POST, &at(0), "/auth/logout"))
        .await;
    assert!(status < 300, "{status}");
    assert_eq!(list_with(&at(1), &live).await.0, 401);

    trap.assert_never_saw("bob-header-secret");
    for app in apps {
        app.stop().await;
    }
}

/// Gemini CLI (tests/peers/clients, pinned), in a throwaway HOME, shows the team gateway
/// connected with a user's access token, and not connected without one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_lists_the_team_gateway_connected_with_a_token() {
    switchboard_testkit::ensure_peers();
    let gemini = switchboard_testkit::peers_dir().join("clients/node_modules/.bin/gemini");
    assert!(gemini.exists(), "run scripts/install-peers.sh (Gemini CLI)");
    let db = Db::sqlite();
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let store = db.store().await;
    let (alice, session) = team_support::sign_in(&store, "alice@example.com", false).await;
    store
        .for_user(&alice)
        .put_server(&server("demo", &demo_http().await, None))
        .await
        .unwrap();
    let client = team_support::gateway_client(&store, "http://127.0.0.1:7/cb").await;
    let url = format!("{}/mcp", app.origin());
    let (access, _) =
        team_support::gateway_tokens(&store, &session, &client, &url, Duration::from_secs(600))
            .await;
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("work");
    std::fs::create_dir_all(home.path().join(".gemini")).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        home.path().join(".gemini/trustedFolders.json"),
        json!({work.display().to_string(): "TRUST_FOLDER"}).to_string(),
    )
    .unwrap();
    std::fs::write(
        home.path().join(".gemini/settings.json"),
        json!({"mcpServers": {
            "team": {"httpUrl": url, "headers": {"Authorization": format!("Bearer {access}")}},
            "teamnotoken": {"httpUrl": url},
        }})
        .to_string(),
    )
    .unwrap();
    let home_path = home.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("timeout")
            .arg("120")
            .arg(&gemini)
            .args(["mcp", "list"])
            .env("HOME", &home_path)
            .env_remove("GEMINI_API_KEY")
            .current_dir(&work)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |name: &str| {
        text.lines()
            .find(|l| l.contains(&format!("{name}:")))
            .unwrap_or_else(|| panic!("{name} not listed: {text}"))
            .to_string()
    };
    assert!(line("team").contains("Connected"), "{text}");
    assert!(!line("teamnotoken").contains("- Connected"), "{text}");
    app.stop().await;
}

/// The authorization endpoint's refusals and the consent page: an unknown client or an
/// unregistered redirect URI get our own page (nothing is sent there); `plain` PKCE and
/// another resource go back to the client as errors; the client's name is text on a page
/// that runs no script and cannot be framed; "deny" is `access_denied`; a code works once,
/// and a wrong verifier spends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorize_refuses_bad_requests_and_the_consent_page_is_inert() {
    let db = Db::sqlite();
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let store = db.store().await;
    let (_, session) = team_support::sign_in(&store, "alice@example.com", false).await;
    let browser = Browser::new(app.origin(), Some(&session));
    let redirect = "http://127.0.0.1:7/cb";
    let (status, reg) = browser
        .post(
            &app.base,
            "/oauth/register",
            &json!({"redirect_uris": [redirect], "client_name": "<img src=x onerror=alert(1)>"}),
        )
        .await;
    assert_eq!(status, 201, "{reg}");
    let client = reg["client_id"].as_str().unwrap().to_owned();
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let query = |client: &str, redirect: &str, method: &str, extra: &str| {
        format!(
            "/oauth/authorize?response_type=code&client_id={client}&redirect_uri={}&code_challenge={}&code_challenge_method={method}&state=st{extra}",
            enc(redirect),
            team_support::PKCE_CHALLENGE
        )
    };
    let get = |path: String| {
        let b = browser.clone();
        let base = app.base.clone();
        async move { b.request(Method::GET, &base, &path).send().await.unwrap() }
    };
    // Our own page, no redirect.
    for path in [
        query("sbc_unknown", redirect, "S256", ""),
        query(&client, "http://127.0.0.1:8/elsewhere", "S256", ""),
    ] {
        let r = get(path).await;
        assert_eq!(r.status(), 400);
        assert!(r.headers().get("location").is_none());
    }
    // Errors back to the client.
    for (path, error) in [
        (query(&client, redirect, "plain", ""), "invalid_request"),
        (
            query(
                &client,
                redirect,
                "S256",
                &format!("&resource={}", enc("https://other.example/mcp")),
            ),
            "invalid_target",
        ),
        (
            query(&client, redirect, "S256", "&scope=admin"),
            "invalid_scope",
        ),
    ] {
        let r = get(path).await;
        assert_eq!(r.status(), 303);
        let to = location(&r);
        assert!(
            to.starts_with(redirect)
                && to.contains(&format!("error={error}"))
                && to.contains("state=st"),
            "{to}"
        );
    }
    // The consent page: the name as text, no script, no framing, nothing cached.
    let r = get(query(&client, redirect, "S256", "")).await;
    assert_eq!(r.status(), 200);
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.starts_with("default-src 'none'"), "{csp}");
    assert!(!csp.contains("script-src"), "{csp}");
    assert_eq!(r.headers()["x-frame-options"], "DENY");
    assert_eq!(r.headers()["cache-control"], "no-store");
    let html = r.text().await.unwrap();
    assert!(
        html.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{html}"
    );
    assert!(!html.contains("<img"), "{html}");
    // Deny.
    let form = |decision: &str| {
        let mut f = hidden_fields(&html);
        f.push(("decision".into(), decision.into()));
        url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(f.iter())
            .finish()
    };
    let post = |body: String| {
        browser
            .request(Method::POST, &app.base, "/oauth/authorize")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body)
    };
    let r = post(form("deny")).send().await.unwrap();
    assert!(location(&r).contains("error=access_denied"));
    // Allow: a code that works once, with the right verifier only.
    let code_of = |to: String| {
        url::Url::parse(&to)
            .unwrap()
            .query_pairs()
            .find(|(k, _)| k == "code")
            .unwrap()
            .1
            .into_owned()
    };
    let exchange = |code: String, verifier: &'static str| {
        let base = app.base.clone();
        let client = client.clone();
        async move {
            token_request(
                &base,
                &[
                    ("grant_type", "authorization_code"),
                    ("code", &code),
                    ("client_id", &client),
                    ("redirect_uri", redirect),
                    ("code_verifier", verifier),
                ],
            )
            .await
        }
    };
    let code = code_of(location(&post(form("allow")).send().await.unwrap()));
    let wrong = "wrong-verifier-wrong-verifier-wrong-verifier-0";
    let (status, v) = exchange(code.clone(), wrong).await;
    assert_eq!((status, v["error"].as_str()), (400, Some("invalid_grant")));
    let (status, v) = exchange(code, team_support::PKCE_VERIFIER).await;
    assert_eq!(
        (status, v["error"].as_str()),
        (400, Some("invalid_grant")),
        "spent by the wrong verifier"
    );
    let code = code_of(location(&post(form("allow")).send().await.unwrap()));
    let (status, v) = exchange(code.clone(), team_support::PKCE_VERIFIER).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["token_type"], "Bearer");
    let (status, _) = exchange(code, team_support::PKCE_VERIFIER).await;
    assert_eq!(status, 400, "a code works once");
    app.stop().await;
}

/// A team-catalog server the user enabled joins their gateway as `catalog:NAME` (named
/// `catalog_NAME__tool` downstream) with the user's own connection; one they did not
/// enable is absent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enabled_catalog_servers_join_the_gateway() {
    let db = Db::sqlite();
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let store = db.store().await;
    let (_, admin_cookie) = team_support::sign_in(&store, "admin@example.com", true).await;
    let (_, session) = team_support::sign_in(&store, "alice@example.com", false).await;
    let admin = Browser::new(app.origin(), Some(&admin_cookie));
    let alice = Browser::new(app.origin(), Some(&session));
    let demo = demo_http().await;
    for name in ["shared", "unused"] {
        let (status, v) = admin
            .post(
                &app.base,
                "/api/admin/catalog",
                &json!({"name": name, "description": "Demo", "url": demo}),
            )
            .await;
        assert_eq!(status, 201, "{v}");
    }
    let (status, v) = alice
        .post(&app.base, "/api/catalog/shared/enable", &json!({}))
        .await;
    assert_eq!(status, 200, "{v}");
    let registered: Value = reqwest::Client::new()
        .post(format!("{}/oauth/register", app.base))
        .json(
            &json!({"redirect_uris": ["http://127.0.0.1:1/cb"], "client_name": "test",
                      "token_endpoint_auth_method": "none"}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let client_id = registered["client_id"].as_str().unwrap().to_owned();
    let token = store_token(
        &store,
        &session,
        &client_id,
        &format!("{}/mcp", app.origin()),
        Duration::from_secs(600),
    )
    .await;

    let (status, _, v) = list_with(&app.base, &token).await;
    assert_eq!(status, 200, "{v}");
    let names: Vec<&str> = v["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let echo = names
        .iter()
        .find(|n| n.contains("shared") && n.ends_with("__echo"))
        .unwrap_or_else(|| panic!("no catalog echo in {names:?}"))
        .to_string();
    assert!(!names.iter().any(|n| n.contains("unused")), "{names:?}");

    let called: Value = reqwest::Client::new()
        .post(format!("{}/mcp", app.base))
        .bearer_auth(&token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": echo, "arguments": {"message": "via the catalog"}}}))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        called["result"]["content"][0]["text"], "Echo: via the catalog",
        "{called}"
    );
    app.stop().await;
}

/// CORS for browser MCP clients, by explicit requests: preflights of `/mcp` and the
/// public OAuth endpoints are answered for any origin (no credentials), their answers are
/// readable cross-origin with `WWW-Authenticate` and `Mcp-Session-Id` exposed; the cookie
/// routes get no CORS header, and another origin's request carrying the session cookie
/// is still refused (the grant it aimed at lives on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_opens_the_bearer_endpoints_and_no_cookie_route() {
    let db = Db::sqlite();
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let store = db.store().await;
    let demo = demo_http().await;
    let resource = format!("{}/mcp", app.origin());
    let (alice, cookie, access) = alice_with_token(&store, &[("demo", &demo)], &resource).await;
    let grant = store.for_user(&alice).gateway_grants().await.unwrap()[0]
        .id
        .as_str()
        .to_owned();
    let other = "http://elsewhere.example:8080";
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let header = |r: &reqwest::Response, name: &str| {
        r.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };

    for (path, method) in [
        ("/mcp", "POST"),
        ("/mcp", "DELETE"),
        ("/.well-known/oauth-protected-resource/mcp", "GET"),
        ("/.well-known/oauth-authorization-server", "GET"),
        ("/oauth/register", "POST"),
        ("/oauth/token", "POST"),
        ("/oauth/revoke", "POST"),
    ] {
        let r = http
            .request(Method::OPTIONS, format!("{}{path}", app.base))
            .header("Origin", other)
            .header("Access-Control-Request-Method", method)
            .header(
                "Access-Control-Request-Headers",
                "authorization, content-type, mcp-protocol-version",
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 204, "preflight of {method} {path}");
        assert_eq!(
            header(&r, "access-control-allow-origin").as_deref(),
            Some("*")
        );
        let allowed = header(&r, "access-control-allow-headers").unwrap();
        for h in ["Authorization", "Content-Type", "Mcp-Protocol-Version"] {
            assert!(allowed.contains(h), "{path}: {allowed}");
        }
        assert!(
            header(&r, "access-control-allow-methods")
                .unwrap()
                .contains(method)
        );
        assert_eq!(header(&r, "access-control-allow-credentials"), None);
    }

    // A cross-origin call: 401 without a token (the pointer readable), 200 with one.
    let call = |token: Option<&str>| {
        let mut r = http
            .post(format!("{}/mcp", app.base))
            .header("Origin", other)
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-06-18")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send()
    };
    let r = call(None).await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(
        header(&r, "access-control-allow-origin").as_deref(),
        Some("*")
    );
    let exposed = header(&r, "access-control-expose-headers").unwrap();
    for h in ["WWW-Authenticate", "Mcp-Session-Id", "Mcp-Protocol-Version"] {
        assert!(exposed.contains(h), "{exposed}");
    }
    let r = call(Some(&access)).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        header(&r, "access-control-allow-origin").as_deref(),
        Some("*")
    );
    assert_eq!(header(&r, "access-control-allow-credentials"), None);
    let v: Value = r.json().await.unwrap();
    assert!(v.to_string().contains("demo__echo"), "{v}");
    let r = http
        .get(format!(
            "{}/.well-known/oauth-authorization-server",
            app.base
        ))
        .header("Origin", other)
        .send()
        .await
        .unwrap();
    assert_eq!(
        header(&r, "access-control-allow-origin").as_deref(),
        Some("*")
    );

    // Cookie routes: no CORS, and another origin's request with the cookie is refused.
    let session = format!("{COOKIE}={cookie}");
    for path in [
        "/api/gateway/grants".to_owned(),
        format!("/api/gateway/grants/{grant}"),
        "/api/servers".to_owned(),
        "/oauth/authorize".to_owned(),
    ] {
        let r = http
            .request(Method::OPTIONS, format!("{}{path}", app.base))
            .header("Origin", other)
            .header("Access-Control-Request-Method", "DELETE")
            .send()
            .await
            .unwrap();
        assert_eq!(header(&r, "access-control-allow-origin"), None, "{path}");
        assert_ne!(r.status(), 204, "{path}");
    }
    let r = http
        .get(format!("{}/api/gateway/grants", app.base))
        .header("Origin", other)
        .header("Sec-Fetch-Site", "cross-site")
        .header("Cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(header(&r, "access-control-allow-origin"), None);
    let r = http
        .delete(format!("{}/api/gateway/grants/{grant}", app.base))
        .header("Origin", other)
        .header("Cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(header(&r, "access-control-allow-origin"), None);
    assert_eq!(
        store.for_user(&alice).gateway_grants().await.unwrap().len(),
        1
    );
    assert_eq!(list_with(&app.base, &access).await.0, 200);
    // The same request from the app's own origin ends it.
    let (status, v) = Browser::new(app.origin(), Some(&cookie))
        .delete(&app.base, &format!("/api/gateway/grants/{grant}"))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(list_with(&app.base, &access).await.0, 401);
    app.stop().await;
}

/// Progress through the stateless team gateway: the TS SDK client calls
/// server-everything's long-running tool (alice's own server, Streamable HTTP) with an
/// `onprogress` callback; each upstream progress notification reaches it, under its own
/// token, before the result. A raw request shows the shape: with a `progressToken` the
/// answer is an SSE stream of `notifications/progress` then the result; without one, a
/// plain JSON answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_ts_sdk_client_through_the_stateless_gateway() {
    use switchboard_testkit::{EverythingMode, spawn_everything};
    switchboard_testkit::ensure_peers();
    let db = Db::sqlite();
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let store = db.store().await;
    let everything = spawn_everything(EverythingMode::StreamableHttp).await;
    let resource = format!("{}/mcp", app.origin());
    let (_, _, access) =
        alice_with_token(&store, &[("everything", &everything.url)], &resource).await;
    let slow = "everything__trigger-long-running-operation";

    let sdk = switchboard_testkit::peers_dir().join("node/node_modules/@modelcontextprotocol/sdk");
    let driver = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/drivers/team_gateway_progress.mjs");
    let plan = json!({
        "sdk": sdk,
        "url": format!("{}/mcp", app.base),
        "token": access,
        "name": slow,
        "arguments": {"duration": 1, "steps": 3},
    });
    let v = run_driver(std::ffi::OsStr::new("node"), &driver, &plan, 90).await;
    let events = v["events"].as_array().unwrap();
    let progress: Vec<&Value> = events
        .iter()
        .filter(|e| e.get("progress").is_some())
        .collect();
    // All three, in order, all before the result (switchboard-mcp routes progress as
    // its transport reads it, so none can fall behind the upstream result).
    assert_eq!(progress.len(), 3, "{v}");
    for (i, p) in progress.iter().enumerate() {
        assert_eq!(p["progress"], json!(i + 1), "{v}");
        assert_eq!(p["total"], json!(3), "{v}");
    }
    let last = events.last().unwrap();
    assert!(
        last["result"]
            .as_str()
            .is_some_and(|t| t.contains("Long running operation completed")),
        "the result comes after every progress notification: {v}"
    );

    // The same call by hand: an SSE stream with the client's own token.
    let call = |meta: Value| {
        reqwest::Client::new()
            .post(format!("{}/mcp", app.base))
            .bearer_auth(&access)
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-06-18")
            .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": slow, "arguments": {"duration": 1, "steps": 3}, "_meta": meta}}))
            .timeout(Duration::from_secs(60))
            .send()
    };
    let r = call(json!({"progressToken": "mine-42"})).await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let body = r.text().await.unwrap();
    let messages: Vec<Value> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect();
    let kinds: Vec<&str> = messages
        .iter()
        .map(|m| m["method"].as_str().unwrap_or("result"))
        .collect();
    assert!(kinds.len() >= 3, "{body}");
    assert_eq!(kinds.last(), Some(&"result"), "{body}");
    assert!(
        kinds[..kinds.len() - 1]
            .iter()
            .all(|k| *k == "notifications/progress"),
        "{body}"
    );
    assert_eq!(messages[0]["params"]["progressToken"], "mine-42");
    assert_eq!(messages.last().unwrap()["id"], 7);
    let r = call(json!({})).await.unwrap();
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let v: Value = r.json().await.unwrap();
    assert!(v["result"]["content"].is_array(), "{v}");
    app.stop().await;
}

/// Whether a text of the driver's `elicit` call (the tool's answer) holds `name`: the
/// client's answer to the elicitation reached the tool.
fn elicit_got(v: &Value, name: &str) -> bool {
    v["elicit"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t.as_str().unwrap().contains(name))
}

/// The Python SDK's default client (`mcp.Client`, on 2026-07-28 with a server that
/// speaks it) through the team gateway: results carry `resultType`, progress arrives,
/// an upstream's elicitation, sampling and `roots/list` come back as
/// `InputRequiredResult`s the client answers by retrying (the call waits on the
/// instance), a resource is read, and a change of the user's lists reaches its
/// `subscriptions/listen` stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_default_client_on_2026_07_28_through_the_team_gateway() {
    use switchboard_testkit::{EverythingMode, PyMode, spawn_everything, spawn_python};
    switchboard_testkit::ensure_peers();
    let db = Db::sqlite();
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let store = db.store().await;
    let everything = spawn_everything(EverythingMode::StreamableHttp).await;
    let rug = spawn_python(
        PyMode::StreamableHttp,
        &[
            ("SWITCHBOARD_PY_RUG_PULL", "1"),
            ("SWITCHBOARD_PY_RESOLVE", "1"),
        ],
    )
    .await;
    let servers = [
        ("everything", everything.url.as_str()),
        ("rug", rug.url.as_str()),
    ];
    let resource = format!("{}/mcp", app.origin());
    let (_, _, access) = alice_with_token(&store, &servers, &resource).await;
    let driver = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gateway/tests/drivers/py_modern_client.py");
    let plan = json!({
        "transport": "http",
        "url": format!("{}/mcp", app.base),
        "token": access,
        "echo": "everything__echo",
        "slow": {"name": "everything__trigger-long-running-operation",
                 "arguments": {"duration": 1, "steps": 3}},
        "elicit": {"name": "everything__trigger-elicitation-request"},
        "elicitContent": {"name": "Ada Lovelace"},
        "sample": {"name": "everything__trigger-sampling-request",
                   "arguments": {"prompt": "hello", "maxTokens": 20}},
        // The client declares roots; the Python server's `where` asks for them (through
        // its own InputRequiredResult, so across two hops) and answers with them.
        "roots": ["file:///home/alice/project"],
        "more": [{"name": "rug__where"}],
        "resource": "py://item/7",
        "listen": {"name": "rug__rug_pull", "arguments": {"text": "changed under you"}},
        // A change after the client last listed but before its listen began (here: its
        // own call, done before listening) is reported as soon as it listens: the first
        // catalog is compared with the one the client last saw, not only later ones,
        // so a change racing the subscription's acknowledgement is not lost.
        "listenAfter": {"name": "rug__rug_pull", "arguments": {"text": "changed again"}, "wait": 5},
    });
    let python = switchboard_testkit::python_bin();
    let v = run_driver(python.as_os_str(), &driver, &plan, 120).await;
    assert_eq!(v["listenAfter"], json!(["ToolsListChanged"]), "{v}");
    assert_eq!(v["version"], "2026-07-28", "{v}");
    assert_eq!(v["echo"][0], "Echo: hi", "{v}");
    assert!(v["slow"]["progress"].as_array().unwrap().len() >= 2, "{v}");
    let asked: Vec<&str> = v["asked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    // server-everything also asks for roots when its connection opens, which is during
    // the first call when nothing opened it before: that ask may come first.
    let asked = asked.strip_prefix(&["roots"]).unwrap_or(&asked);
    assert_eq!(asked, ["elicitation", "sampling", "roots"], "{v}");
    assert!(
        elicit_got(&v, "Ada Lovelace"),
        "the answer reached the tool: {v}"
    );
    // The server's sampling request reached this client (team connections declare
    // sampling; it is answered only through a gateway call), and its answer the tool.
    assert!(
        v["sample"][0]
            .as_str()
            .unwrap()
            .contains("sampled by the python client"),
        "{v}"
    );
    // The server saw the client's roots: not none, and never the team instance's own
    // working directory.
    assert_eq!(v["more"][0][0], r#"["file:///home/alice/project"]"#, "{v}");
    assert_eq!(v["resource"][0], "item 7", "{v}");
    assert_eq!(v["listen"], json!(["ToolsListChanged"]), "{v}");
    app.stop().await;
}

/// The same client behind a load balancer without affinity: two instances on one
/// PostgreSQL, every HTTP request of the client sent to the other instance than the one
/// before. The elicitation's retry reaches the instance that does not hold the call: it
/// hands the answer over through the store, the holding instance relays on, and the
/// result comes back through the store; no row is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_required_retry_on_another_instance_reaches_the_waiting_call() {
    use switchboard_testkit::{EverythingMode, PyMode, spawn_everything, spawn_python};
    switchboard_testkit::ensure_peers();
    let db = Db::postgres();
    let origin = format!("http://127.0.0.1:{}", switchboard_testkit::free_port());
    let mut apps = Vec::new();
    for _ in 0..2 {
        apps.push(
            Instance::start(
                &db,
                InstanceOptions {
                    public_origin: Some(origin.clone()),
                    ..Default::default()
                },
            )
            .await,
        );
    }
    let store = db.store().await;
    let everything = spawn_everything(EverythingMode::StreamableHttp).await;
    // On 2026-07-28 itself: `greet_slowly` asks the name, then reports progress.
    let py = spawn_python(PyMode::StreamableHttp, &[("SWITCHBOARD_PY_RESOLVE", "1")]).await;
    let resource = format!("{origin}/mcp");
    let servers = [
        ("everything", everything.url.as_str()),
        ("py", py.url.as_str()),
    ];
    let (_, _, access) = alice_with_token(&store, &servers, &resource).await;
    let driver = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../gateway/tests/drivers/py_modern_client.py");
    let bases: Vec<String> = apps.iter().map(|a| a.base.clone()).collect();
    let plan = json!({
        "transport": "http",
        "url": format!("{origin}/mcp"),
        "bases": bases,
        "token": access,
        "echo": "everything__echo",
        "elicit": {"name": "everything__trigger-elicitation-request"},
        "elicitContent": {"name": "Grace Hopper"},
        "sample": null,
        // Asks (the retry goes to the other instance), then reports progress while the
        // call relays on the instance holding it: the progress goes through the store.
        "slow": {"name": "py__greet_slowly", "arguments": {}},
    });
    let python = switchboard_testkit::python_bin();
    for round in 0..2 {
        // Two rounds: the elicitation's first leg lands on one instance, then the other.
        let mut plan = plan.clone();
        if round == 1 {
            plan["echo"] = Value::Null;
        }
        let v = run_driver(python.as_os_str(), &driver, &plan, 120).await;
        assert_eq!(v["version"], "2026-07-28", "{v}");
        assert_eq!(v["asked"][0]["kind"], "elicitation", "{v}");
        assert!(
            elicit_got(&v, "Grace Hopper"),
            "the answer handed over through the store reached the tool: {v}"
        );
        assert_eq!(v["slow"]["text"][0], "hello slowly Grace Hopper", "{v}");
        let progress: Vec<f64> = v["slow"]["progress"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_f64().unwrap())
            .collect();
        assert!(
            progress.windows(2).all(|w| w[0] < w[1]) && progress.last() == Some(&3.0),
            "the progress of the call relaying on the other instance reached the client, \
             increasing, up to the last step: {v}"
        );
        let per_base = v["perBase"].as_array().unwrap();
        assert!(
            per_base.iter().all(|n| n.as_u64().unwrap() >= 2),
            "both instances answered: {v}"
        );
    }
    let Db::Postgres(cluster, _) = &db else {
        unreachable!("started on PostgreSQL")
    };
    let dump = String::from_utf8_lossy(&cluster.dump("team")).into_owned();
    let rows = dump
        .split("COPY public.gateway_inputs")
        .nth(1)
        .expect("the table is in the dump")
        .lines()
        .skip(1)
        .take_while(|l| *l != "\\.")
        .count();
    assert_eq!(rows, 0, "every handed-over outcome was taken");
    for app in apps {
        app.stop().await;
    }
}
