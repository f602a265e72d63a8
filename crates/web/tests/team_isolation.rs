//! The isolation rule (team/mod.rs) on every route of the team app: bob has servers
//! with a secret header and saved OAuth tokens, one of them connected; alice, signed in,
//! tries each route on bob's things and gets nothing of his — no name, URL, email or
//! secret in any answer, no change to his servers, tokens, sessions or connections, and
//! no secret of his sent anywhere on her behalf. The routes come from
//! `switchboard_web::route_table()` (the list the router is built from), so a new route
//! without a case here fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

mod team_support;

use std::collections::BTreeMap;

use reqwest::Method;
use serde_json::{Value, json};
use switchboard_store::{
    NewServerLogin, Secret, ServerLoginClient, ServerRecord, Store, Transport, UserId,
};
use switchboard_testkit::RecordingListener;
use switchboard_web::{RouteAccess, route_table};
use team_support::{
    Browser, Db, Instance, InstanceOptions, demo_http, oidc_provider_for, sign_in, sign_in_options,
};

on_both!(alice_reaches_nothing_of_bobs_by_any_route);

const BOB_HEADER: &str = "Bearer bob-header-secret-91f2";
const BOB_ACCESS: &str = "bob-access-token-77ac";
const METRICS_TOKEN: &str = "isolation-metrics-token-5d1c0e9a";

fn bob_server(name: &str, url: &str) -> ServerRecord {
    ServerRecord {
        name: name.into(),
        url: url.into(),
        transport: Transport::Http,
        headers: BTreeMap::from([("Authorization".to_owned(), Secret::new(BOB_HEADER))]),
        enabled: true,
    }
}

/// Everything of bob's that must never reach alice.
struct Bob {
    id: UserId,
    cookie: String,
    servers: Vec<ServerRecord>,
    leaks: Vec<String>,
}

impl Bob {
    /// His servers, tokens and session are exactly as they were.
    async fn unchanged(&self, store: &Store, app: &Instance) {
        let us = store.for_user(&self.id);
        assert_eq!(
            us.servers().await.unwrap(),
            self.servers,
            "bob's servers changed"
        );
        for s in &self.servers {
            let t = us
                .oauth_tokens(&s.name)
                .await
                .unwrap()
                .expect("bob's tokens are gone");
            assert!(t.tokens.expose().contains(BOB_ACCESS));
        }
        let bob = Browser::new(app.origin(), Some(&self.cookie));
        let (status, v) = bob.get(&app.base, "/api/me").await;
        assert_eq!(
            (status, v["email"].as_str()),
            (200, Some("bob@example.com")),
            "{v}"
        );
    }

    fn assert_no_leak(&self, what: &str, body: &str) {
        for leak in &self.leaks {
            assert!(
                !body.contains(leak.as_str()),
                "{what} showed alice `{leak}`: {body}"
            );
        }
    }
}

async fn alice_reaches_nothing_of_bobs_by_any_route(db: Db) {
    let origin = format!("http://127.0.0.1:{}", switchboard_testkit::free_port());
    let peer = oidc_provider_for(&format!("{origin}/auth/callback")).await;
    let app = Instance::start(
        &db,
        InstanceOptions {
            public_origin: Some(origin),
            sign_in: Some(sign_in_options(&peer, "admin@example.com")),
            metrics_token: Some(METRICS_TOKEN.into()),
            ..Default::default()
        },
    )
    .await;
    let store = db.store().await;
    let demo = demo_http().await;
    let trap = RecordingListener::start().await;
    let trap_url = trap.url("/mcp");

    // Bob: a connected server and a second one whose URL records whatever reaches it.
    let (bob_id, bob_cookie) = sign_in(&store, "bob@example.com", false).await;
    let bob_browser = Browser::new(app.origin(), Some(&bob_cookie));
    let tokens = Secret::new(json!({"accessToken": BOB_ACCESS, "tokenType": "Bearer"}).to_string());
    let servers = vec![bob_server("bobs", &demo), bob_server("trap", &trap_url)];
    for s in &servers {
        store.for_user(&bob_id).put_server(s).await.unwrap();
        store
            .for_user(&bob_id)
            .put_oauth_tokens(&s.name, &tokens, None)
            .await
            .unwrap();
    }
    let (status, v) = bob_browser.get(&app.base, "/api/servers/bobs/tools").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(app.running.state.open_connections(), 1);
    let bob = Bob {
        id: bob_id,
        cookie: bob_cookie,
        servers,
        leaks: vec![
            "bob@example.com".into(),
            demo.clone(),
            "bob-header-secret".into(),
            BOB_ACCESS.into(),
        ],
    };

    // Alice has a server of her own, on another demo server.
    let alice_demo = demo_http().await;
    let (alice_id, _) = sign_in(&store, "alice@example.com", false).await;
    let alice_store = store.for_user(&alice_id);

    let routes = route_table();
    assert!(routes.len() >= 18, "{routes:?}");
    for route in routes {
        // A fresh session for each case (one case signs alice out).
        let (_, cookie) = sign_in(&store, "alice@example.com", false).await;
        let alice = Browser::new(app.origin(), Some(&cookie));
        let what = format!("{} {}", route.method, route.path);
        let send = |method: Method, path: &str, body: Option<Value>| {
            let mut r = alice.request(method, &app.base, path);
            if let Some(b) = body {
                r = r.json(&b);
            }
            r
        };
        let mut answers: Vec<(u16, Value)> = Vec::new();
        match (route.method.as_str(), route.path) {
            ("GET", "/") => {
                // A static page either way: the app shell with a live session, the
                // sign-in page without; nothing of anyone's data is written into it.
                for (browser, want) in [
                    (alice.clone(), "/assets/team.js"),
                    (Browser::new(app.origin(), None), "/auth/login"),
                    (
                        Browser::new(app.origin(), Some(&bob.cookie)),
                        "/assets/team.js",
                    ),
                ] {
                    let r = browser
                        .request(Method::GET, &app.base, "/")
                        .send()
                        .await
                        .unwrap();
                    let status = r.status().as_u16();
                    let csp = r.headers()["content-security-policy"]
                        .to_str()
                        .unwrap()
                        .to_owned();
                    assert!(
                        csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
                        "{what}: {csp}"
                    );
                    let body = r.text().await.unwrap();
                    assert_eq!(status, 200, "{what}: {body}");
                    assert!(body.contains(want), "{what}: {body}");
                    assert!(!body.contains("alice@example.com"), "{what}: {body}");
                    answers.push((status, json!({"body": body})));
                }
            }
            ("GET", "/assets/{file}") => {
                for (path, want) in [
                    ("/assets/team.js", 200),
                    ("/assets/team.css", 200),
                    ("/assets/..%2Fteam.rs", 404),
                    ("/assets/index.html", 404),
                ] {
                    let r = send(Method::GET, path, None).send().await.unwrap();
                    let status = r.status().as_u16();
                    let body = r.text().await.unwrap();
                    assert_eq!(status, want, "{what} {path}: {body}");
                    answers.push((status, json!({"body": body})));
                }
            }
            ("GET", "/healthz") | ("GET", "/readyz") => {
                let (status, v) = alice.send(send(Method::GET, route.path, None)).await;
                assert_eq!(status, 200, "{what}: {v}");
                answers.push((status, v));
            }
            ("GET", "/metrics") => {
                // A session is not the metrics token...
                let (status, v) = alice.get(&app.base, "/metrics").await;
                assert_eq!(status, 401, "{what}: {v}");
                answers.push((status, v));
                // ...and what the scraper reads names nobody: bob's email, URL, server
                // names and secrets (he has a connection open) appear nowhere in it.
                let r = alice
                    .http
                    .get(format!("{}/metrics", app.base))
                    .bearer_auth(METRICS_TOKEN)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200, "{what}");
                let text = r.text().await.unwrap();
                assert!(
                    text.contains("switchboard_mcp_sessions_open 1"),
                    "{what}: {text}"
                );
                bob.assert_no_leak(&what, &text);
                for name in [
                    "/api/servers/bobs",
                    "/api/servers/trap",
                    "alice@example.com",
                ] {
                    assert!(!text.contains(name), "{what} shows `{name}`: {text}");
                }
            }
            ("GET", "/auth/login") => {
                // A redirect to the issuer and a login cookie, whoever asks; never a session.
                let r = send(
                    Method::GET,
                    "/auth/login?return=/api/servers/bobs/tools",
                    None,
                )
                .send()
                .await
                .unwrap();
                let cookies: Vec<String> = r
                    .headers()
                    .get_all("set-cookie")
                    .iter()
                    .map(|v| v.to_str().unwrap().to_owned())
                    .collect();
                assert!(
                    cookies.len() == 1 && cookies[0].starts_with("switchboard_login="),
                    "{what}: {cookies:?}"
                );
                let status = r.status().as_u16();
                assert_eq!(status, 303, "{what}");
                let location = r.headers()["location"].to_str().unwrap().to_owned();
                assert!(location.starts_with(&peer.issuer), "{location}");
                answers.push((status, json!({"location": location})));
            }
            ("GET", "/auth/callback") => {
                let r = send(
                    Method::GET,
                    "/auth/callback?state=guessed&code=stolen",
                    None,
                )
                .send()
                .await
                .unwrap();
                assert!(r.headers().get("set-cookie").is_none(), "{what}");
                let status = r.status().as_u16();
                assert_eq!(status, 400, "{what}");
                answers.push((status, r.json().await.unwrap()));
            }
            ("POST", "/auth/logout") => {
                for path in ["/auth/logout", "/auth/logout?everywhere=1"] {
                    let (_, cookie) = sign_in(&store, "alice@example.com", false).await;
                    let alice = Browser::new(app.origin(), Some(&cookie));
                    let (status, v) = alice
                        .send(alice.request(Method::POST, &app.base, path))
                        .await;
                    assert_eq!(status, 200, "{what}: {v}");
                    assert_eq!(alice.get(&app.base, "/api/me").await.0, 401);
                    answers.push((status, v));
                }
            }
            ("GET", "/api/me") => {
                let (status, v) = alice.get(&app.base, "/api/me").await;
                assert_eq!(
                    (status, v["email"].as_str()),
                    (200, Some("alice@example.com"))
                );
                answers.push((status, v));
            }
            ("GET", "/api/servers") => {
                let (status, v) = alice.get(&app.base, "/api/servers").await;
                assert_eq!((status, &v["servers"]), (200, &json!([])), "{what}");
                answers.push((status, v));
            }
            ("POST", "/api/servers") => {
                // Bob's saved header cannot be borrowed by naming his server...
                let (status, v) = alice
                    .post(
                        &app.base,
                        "/api/servers",
                        &json!({"name": "bobs", "url": demo, "headers": {"Authorization": "<unchanged>"}}),
                    )
                    .await;
                assert_eq!(status, 400, "{what}: {v}");
                answers.push((status, v));
                // ...and a server of hers under the same name is hers alone.
                let (status, v) = alice
                    .post(
                        &app.base,
                        "/api/servers",
                        &json!({"name": "bobs", "url": alice_demo}),
                    )
                    .await;
                assert_eq!(status, 201, "{what}: {v}");
                let (status, v) = alice
                    .post(
                        &app.base,
                        "/api/servers/bobs/call",
                        &json!({"tool": "echo", "args": {"message": "mine"}}),
                    )
                    .await;
                assert_eq!(
                    (status, v["result"]["content"][0]["text"].as_str()),
                    (200, Some("Echo: mine"))
                );
                assert_eq!(alice.delete(&app.base, "/api/servers/bobs").await.0, 200);
                assert!(alice_store.server("bobs").await.unwrap().is_none());
                answers.push((status, json!({"result": v["result"]})));
            }
            ("PUT", "/api/servers/{name}") => {
                for name in ["bobs", "trap"] {
                    let (status, v) = alice
                        .put(
                            &app.base,
                            &format!("/api/servers/{name}"),
                            &json!({"url": alice_demo, "enabled": false}),
                        )
                        .await;
                    assert_eq!(status, 404, "{what}: {v}");
                    answers.push((status, v));
                }
            }
            ("DELETE", "/api/servers/{name}") => {
                let (status, v) = alice.delete(&app.base, "/api/servers/bobs").await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
            }
            ("POST", "/api/mcp-test") => {
                let (status, v) = alice
                    .post(&app.base, "/api/mcp-test", &json!({"name": "trap"}))
                    .await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
                let (status, v) = alice
                    .post(
                        &app.base,
                        "/api/mcp-test",
                        &json!({"name": "trap", "url": trap_url, "headers": {"Authorization": "<unchanged>"}}),
                    )
                    .await;
                assert_eq!(status, 400, "{what}: {v}");
                answers.push((status, v));
                // Her own test of bob's URL under his server's name: sent without his secrets.
                let (status, v) = alice
                    .post(
                        &app.base,
                        "/api/mcp-test",
                        &json!({"name": "trap", "url": trap_url}),
                    )
                    .await;
                assert_eq!(v["success"], false, "{what}: {v}");
                trap.assert_never_saw("bob-header-secret");
                trap.assert_never_saw(BOB_ACCESS);
                assert!(trap.connections() >= 1, "the test did reach the URL");
                answers.push((status, json!({"success": v["success"]})));
            }
            ("GET", "/api/servers/{name}/tools") => {
                let (status, v) = alice.get(&app.base, "/api/servers/bobs/tools").await;
                assert_eq!(status, 404, "{what}: {v}");
                assert_eq!(
                    app.running.state.open_connections(),
                    1,
                    "only bob's connection"
                );
                answers.push((status, v));
            }
            ("POST", "/api/servers/{name}/call") => {
                let (status, v) = alice
                    .post(
                        &app.base,
                        "/api/servers/bobs/call",
                        &json!({"tool": "echo", "args": {"message": "x"}}),
                    )
                    .await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
            }
            ("POST", "/api/servers/{name}/oauth/start") => {
                for name in ["bobs", "trap"] {
                    let (status, v) = alice
                        .post(
                            &app.base,
                            &format!("/api/servers/{name}/oauth/start"),
                            &json!({}),
                        )
                        .await;
                    assert_eq!(status, 404, "{what}: {v}");
                    answers.push((status, v));
                }
            }
            ("GET", "/oauth/mcp/callback") => {
                // Bob has a login in flight whose token endpoint is the trap; alice brings
                // his state with her session: refused, no code sent anywhere, and his
                // login is still there for him.
                let bobs_login = store
                    .for_user(&bob.id)
                    .start_server_login(
                        &NewServerLogin {
                            server_name: "trap".into(),
                            server_url: trap_url.clone(),
                            client: ServerLoginClient {
                                client_id: "bob-client".into(),
                                token_url: trap_url.clone(),
                                redirect_uri: format!("{}/oauth/mcp/callback", app.origin()),
                                resource: None,
                                scopes: vec![],
                                issuer: None,
                                iss_required: false,
                            },
                        },
                        std::time::Duration::from_secs(600),
                    )
                    .await
                    .unwrap();
                for path in [
                    format!(
                        "/oauth/mcp/callback?code=stolen-code-5521&state={}",
                        bobs_login.state
                    ),
                    "/oauth/mcp/callback?code=stolen-code-5521&state=guessed".to_owned(),
                ] {
                    let r = send(Method::GET, &path, None).send().await.unwrap();
                    assert!(r.headers().get("set-cookie").is_none(), "{what}");
                    let status = r.status().as_u16();
                    assert_eq!(status, 400, "{what}");
                    let page = r.text().await.unwrap();
                    assert!(page.contains("\"ok\":false"), "{what}: {page}");
                    answers.push((status, json!({"page": page})));
                }
                trap.assert_never_saw("stolen-code-5521");
                assert!(
                    store
                        .for_user(&bob.id)
                        .take_server_login(&bobs_login.state)
                        .await
                        .unwrap()
                        .is_some(),
                    "alice's attempt used bob's login up"
                );
            }
            ("POST", "/api/servers/{name}/oauth/logout") => {
                for name in ["bobs", "trap"] {
                    let (status, v) = alice
                        .post(
                            &app.base,
                            &format!("/api/servers/{name}/oauth/logout"),
                            &json!({}),
                        )
                        .await;
                    assert_eq!(status, 404, "{what}: {v}");
                    answers.push((status, v));
                }
            }
            _ => panic!(
                "route {what} has no isolation case: add one to tests/team_isolation.rs proving alice cannot reach bob's data through it"
            ),
        }
        if route.access == RouteAccess::Session {
            // Without a session the route answers 401 and nothing else.
            let anon = Browser::new(app.origin(), None);
            let path = route.path.replace("{name}", "bobs");
            let (status, v) = anon
                .send(anon.request(route.method.clone(), &app.base, &path))
                .await;
            assert_eq!(status, 401, "{what} without a session: {v}");
            answers.push((status, v));
        }
        for (_, body) in &answers {
            bob.assert_no_leak(&what, &body.to_string());
        }
        bob.unchanged(&store, &app).await;
    }
    // Bob still uses his server, through his cached connection.
    let (status, v) = Browser::new(app.origin(), Some(&bob.cookie))
        .post(
            &app.base,
            "/api/servers/bobs/call",
            &json!({"tool": "echo", "args": {"message": "still mine"}}),
        )
        .await;
    assert_eq!(
        v["result"]["content"][0]["text"], "Echo: still mine",
        "{status} {v}"
    );
    app.stop().await;
}
