//! The isolation rule (team/mod.rs) on every route of the team app: bob has servers
//! with a secret header and saved OAuth tokens, one of them connected; alice, signed in,
//! tries each route on bob's things and gets nothing of his — no name, URL, email or
//! secret in any answer, no change to his servers, tokens, sessions or connections, and
//! no secret of his sent anywhere on her behalf. The routes come from
//! `switchboard_web::route_table()` (the list the router is built from), so a new route
//! without a case here fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use std::collections::BTreeMap;

use reqwest::Method;
use serde_json::{Value, json};
use switchboard_store::{
    CatalogLaunch, CatalogServer, NewServerLogin, Secret, ServerLoginClient, ServerRecord,
    ServerRef, Store, Transport, UserId,
};
use switchboard_testkit::RecordingListener;
use switchboard_web::{RouteAccess, route_table};
use team_support::{
    Browser, Db, Instance, InstanceOptions, PKCE_CHALLENGE, PKCE_VERIFIER, demo_http,
    gateway_client, gateway_tokens, mcp_request, oidc_provider_for, sign_in, sign_in_options,
};

on_both!(alice_reaches_nothing_of_bobs_by_any_route);

const BOB_HEADER: &str = "Bearer bob-header-secret-91f2";
const BOB_ACCESS: &str = "bob-access-token-77ac";
const METRICS_TOKEN: &str = "isolation-metrics-token-5d1c0e9a";
const BOB_CHAT_TEXT: &str = "bob-chat-secret-6e1d";
const BOB_MODEL_KEY: &str = "bob-model-key-secret-a4c2";
const TEAM_KEY: &str = "team-model-key-secret-0b7e";
const BOB_WF_SECRET: &str = "bob-workflow-secret-3d9a";
const BOB_RUN_SECRET: &str = "bob-run-log-secret-c15f";
const BOB_APP_INPUT: &str = "bob-app-input-secret-3f9a";
const BOB_APP_CSP: &str = "sandbox allow-scripts allow-forms; default-src 'none'";

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
    chat: String,
    confirmation: String,
    /// His saved workflow's source, a finished run (with its log) and a running one.
    workflow: String,
    finished_run: String,
    running_run: String,
    /// His MCP App session (on `bobs`, in his chat, opened: its CSP stored).
    app: String,
    elicitation: String,
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
        let msgs = us
            .messages(&self.chat)
            .await
            .unwrap()
            .expect("bob's chat is gone");
        assert_eq!(msgs.len(), 1, "bob's chat changed");
        assert_eq!(
            us.conversation(&self.chat).await.unwrap().unwrap().title,
            "Bob's plans"
        );
        assert!(
            us.conversation(&self.chat)
                .await
                .unwrap()
                .unwrap()
                .cancel_requested_at
                .is_none(),
            "bob's turn was cancelled"
        );
        let pending = us.pending_confirmations(&self.chat).await.unwrap();
        assert_eq!(pending.len(), 1, "bob's confirmation was answered");
        assert_eq!(pending[0].id, self.confirmation);
        let bob_app = us
            .app_session(&self.app)
            .await
            .unwrap()
            .expect("bob's app session is gone");
        assert!(
            us.take_app_contexts(&self.chat).await.unwrap().is_empty(),
            "a model context was left on bob's app session"
        );
        assert_eq!(
            bob_app.server,
            ServerRef::own("bobs"),
            "bob's app session changed"
        );
        assert_eq!(
            bob_app.csp_header.as_deref(),
            Some(BOB_APP_CSP),
            "bob's app session changed"
        );
        let asked = us.pending_elicitations(&self.chat).await.unwrap();
        assert_eq!(asked.len(), 1, "bob's elicitation was answered");
        assert_eq!(asked[0].id, self.elicitation);
        assert_eq!(
            us.model_key().await.unwrap().unwrap().key.expose(),
            BOB_MODEL_KEY
        );
        let (team, _) = us.chat_model_key().await.unwrap().unwrap();
        assert_eq!(team.key.expose(), BOB_MODEL_KEY, "bob's own key wins");
        assert_eq!(
            us.team_model_key_info().await.unwrap().unwrap().provider,
            "gemini"
        );
        // His enablement of the catalog server and his own tokens for it.
        let catalog = us
            .catalog_server("shared")
            .await
            .unwrap()
            .expect("published");
        assert!(catalog.enabled, "bob's catalog enablement changed");
        let t = us
            .tokens(&ServerRef::catalog("shared"))
            .await
            .unwrap()
            .expect("bob's catalog tokens are gone");
        assert!(t.tokens.expose().contains(BOB_ACCESS));
        // His workflow and runs.
        assert_eq!(
            us.workflow("plans")
                .await
                .unwrap()
                .expect("bob's workflow is gone")
                .source,
            self.workflow,
            "bob's workflow changed"
        );
        assert_eq!(us.workflows().await.unwrap().len(), 1);
        let (run, log) = us
            .workflow_run(&self.finished_run)
            .await
            .unwrap()
            .expect("bob's run is gone");
        assert_eq!(run.state, switchboard_store::RunState::Ok);
        assert!(log.unwrap().to_string().contains(BOB_RUN_SECRET));
        let (running, _) = us
            .workflow_run(&self.running_run)
            .await
            .unwrap()
            .expect("bob's running run is gone");
        assert_eq!(running.state, switchboard_store::RunState::Running);
        assert!(
            running.cancel_requested_at.is_none(),
            "bob's run was cancelled"
        );
        assert_eq!(us.workflow_runs(None).await.unwrap().len(), 2);
        let grants = us.gateway_grants().await.unwrap();
        assert_eq!(grants.len(), 1, "bob's gateway grants changed: {grants:?}");
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
            model: Some(team_support::gemini_at("http://127.0.0.1:9")),
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
    // Bob's chat (a message, a confirmation waiting), his model key; the team key.
    let bs = store.for_user(&bob_id);
    let chat = bs.create_conversation("Bob's plans").await.unwrap();
    bs.append_message(
        &chat.id,
        switchboard_store::MessageRole::User,
        &json!({"role": "user", "parts": [{"text": BOB_CHAT_TEXT}]}),
    )
    .await
    .unwrap();
    let confirmation = bs
        .ask_confirmation(
            &chat.id,
            &json!({"server": "bobs", "tool": "echo", "args": {"message": BOB_CHAT_TEXT}}),
            std::time::Duration::from_secs(3600),
        )
        .await
        .unwrap()
        .unwrap();
    let elicitation = bs
        .ask_elicitation(
            &chat.id,
            &json!({"server": "bobs", "mode": "form", "message": BOB_CHAT_TEXT,
                "requestedSchema": {"type": "object", "properties": {"a": {"type": "string"}}}}),
            std::time::Duration::from_secs(3600),
        )
        .await
        .unwrap()
        .unwrap();
    bs.put_model_key("gemini", &Secret::new(BOB_MODEL_KEY))
        .await
        .unwrap();
    let (admin_id, _) = sign_in(&store, "admin@example.com", true).await;
    assert!(
        store
            .for_user(&admin_id)
            .put_team_model_key("gemini", &Secret::new(TEAM_KEY))
            .await
            .unwrap()
    );
    // Bob's workflow (a secret in its source), a finished run with its log, a running one.
    let bob_workflow = format!(
        "name: plans\nnodes:\n  - id: k\n    type: set\n    name: key\n    value: \"{BOB_WF_SECRET}\"\n"
    );
    assert!(bs.put_workflow("plans", &bob_workflow).await.unwrap());
    let finished_run = bs
        .start_workflow_run("plans", std::time::Duration::from_secs(3600))
        .await
        .unwrap()
        .unwrap();
    assert!(
        bs.finish_workflow_run(
            &finished_run,
            switchboard_store::RunState::Ok,
            &json!({"status": "ok", "variables": {"key": BOB_RUN_SECRET}}),
        )
        .await
        .unwrap()
    );
    let running_run = bs
        .start_workflow_run("plans", std::time::Duration::from_secs(3600))
        .await
        .unwrap()
        .unwrap();
    let bob_app_id = bs
        .create_app_session(&switchboard_store::NewAppSession {
            conversation_id: chat.id.clone(),
            server: ServerRef::own("bobs"),
            tool: "clock".into(),
            call_id: "call-0".into(),
            resource_uri: "ui://switchboard-demo/clock.html".into(),
            allowed: vec![
                "tools/call".into(),
                "resources/read".into(),
                "ui/message".into(),
            ],
            input: json!({"note": BOB_APP_INPUT}),
            result: json!({"content": [{"type": "text", "text": BOB_APP_INPUT}]}),
        })
        .await
        .unwrap()
        .unwrap();
    assert!(bs.set_app_csp(&bob_app_id, BOB_APP_CSP).await.unwrap());
    // Bob's own page opens and drives it (the session is live, not just absent).
    let (status, v) = bob_browser
        .post(
            &app.base,
            &format!("/api/apps/{bob_app_id}/tools/call"),
            &json!({"name": "echo", "arguments": {"message": "bob"}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    // Even with bob's cookie, a request from the sandbox's opaque origin is refused.
    let sandboxed = Browser::new("null", Some(&bob_cookie));
    let (status, v) = sandboxed
        .post(
            &app.base,
            &format!("/api/apps/{bob_app_id}/tools/call"),
            &json!({"name": "echo", "arguments": {"message": "x"}}),
        )
        .await;
    assert_eq!(status, 403, "{v}");
    let bob = Bob {
        id: bob_id,
        cookie: bob_cookie,
        servers,
        leaks: vec![
            "bob@example.com".into(),
            demo.clone(),
            "bob-header-secret".into(),
            BOB_ACCESS.into(),
            BOB_CHAT_TEXT.into(),
            BOB_MODEL_KEY.into(),
            TEAM_KEY.into(),
            "Bob's plans".into(),
            BOB_WF_SECRET.into(),
            BOB_RUN_SECRET.into(),
            BOB_APP_INPUT.into(),
            "clock.html".into(),
        ],
        chat: chat.id.clone(),
        confirmation,
        workflow: bob_workflow,
        finished_run,
        running_run,
        app: bob_app_id,
        elicitation,
    };
    let bob_app = format!("/api/apps/{}", bob.app);
    let bob_chat = format!("/api/chats/{}", bob.chat);

    // The catalog: an admin published `shared` (its URL records what reaches it); bob
    // enabled it and has his own tokens for it.
    let (admin_id, _) = sign_in(&store, "admin@example.com", true).await;
    store
        .publish_catalog_server(
            &admin_id,
            &CatalogServer {
                name: "shared".into(),
                description: "Shared".into(),
                launch: CatalogLaunch::Http {
                    url: trap_url.clone(),
                    transport: Transport::Http,
                    headers: BTreeMap::new(),
                },
            },
        )
        .await
        .unwrap();
    let bob_catalog = store.for_user(&bob.id);
    assert!(bob_catalog.enable_catalog_server("shared").await.unwrap());
    bob_catalog
        .put_tokens(&ServerRef::catalog("shared"), &tokens, None)
        .await
        .unwrap();
    let catalog_before = store.catalog_servers().await.unwrap();

    // Bob uses the gateway too: a client of his, a grant with tokens. None of it may
    // serve alice (his own use, checked at the end, reaches his trap server).
    let gateway = format!("{}/mcp", app.origin());
    let redirect = "http://127.0.0.1:9/callback";
    let bob_client = gateway_client(&store, redirect).await;
    let (bob_gw_access, bob_gw_refresh) = gateway_tokens(
        &store,
        &bob.cookie,
        &bob_client,
        &gateway,
        std::time::Duration::from_secs(600),
    )
    .await;
    let bob_grant = store.for_user(&bob.id).gateway_grants().await.unwrap()[0]
        .id
        .as_str()
        .to_owned();
    let list_tools = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
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
            ("GET", "/api/model-key") => {
                // Her status only: bob's own key is not hers; the team key is set.
                let (status, v) = alice.get(&app.base, "/api/model-key").await;
                assert_eq!(status, 200, "{what}: {v}");
                assert_eq!(
                    (&v["own"]["set"], &v["team"]["set"], &v["available"]),
                    (&json!(false), &json!(true), &json!(true)),
                    "{what}: {v}"
                );
                answers.push((status, v));
            }
            ("PUT", "/api/model-key") => {
                let (status, v) = alice
                    .put(
                        &app.base,
                        "/api/model-key",
                        &json!({"key": "alice-own-key-1"}),
                    )
                    .await;
                assert_eq!(status, 200, "{what}: {v}");
                assert!(!v.to_string().contains("alice-own-key-1"), "{v}");
                assert_eq!(
                    alice_store.model_key().await.unwrap().unwrap().key.expose(),
                    "alice-own-key-1"
                );
                answers.push((status, v));
                let (status, v) = alice
                    .put(
                        &app.base,
                        "/api/model-key",
                        &json!({"key": "k", "provider": "openai"}),
                    )
                    .await;
                assert_eq!(status, 400, "{what}: {v}");
                answers.push((status, v));
            }
            ("DELETE", "/api/model-key") => {
                let (status, v) = alice.delete(&app.base, "/api/model-key").await;
                assert_eq!(status, 200, "{what}: {v}");
                assert!(alice_store.model_key().await.unwrap().is_none());
                answers.push((status, v));
            }
            ("PUT", "/api/admin/model-key") => {
                let (status, v) = alice
                    .put(
                        &app.base,
                        "/api/admin/model-key",
                        &json!({"key": "alice-team-key"}),
                    )
                    .await;
                assert_eq!(status, 403, "{what}: {v}");
                answers.push((status, v));
            }
            ("DELETE", "/api/admin/model-key") => {
                let (status, v) = alice.delete(&app.base, "/api/admin/model-key").await;
                assert_eq!(status, 403, "{what}: {v}");
                answers.push((status, v));
            }
            ("GET", "/api/chats") => {
                let (status, v) = alice.get(&app.base, "/api/chats").await;
                assert_eq!((status, &v["chats"]), (200, &json!([])), "{what}: {v}");
                answers.push((status, v));
            }
            ("POST", "/api/chats") => {
                let (status, v) = alice
                    .post(&app.base, "/api/chats", &json!({"title": "Alice's"}))
                    .await;
                assert_eq!(status, 201, "{what}: {v}");
                let id = v["chat"]["id"].as_str().unwrap().to_owned();
                assert_ne!(id, bob.chat);
                assert!(alice_store.delete_conversation(&id).await.unwrap());
                answers.push((status, v));
            }
            ("GET", "/api/chats/{id}") => {
                let (status, v) = alice.get(&app.base, &bob_chat).await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
            }
            ("PUT", "/api/chats/{id}") => {
                let (status, v) = alice
                    .put(&app.base, &bob_chat, &json!({"title": "mine now"}))
                    .await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
            }
            ("DELETE", "/api/chats/{id}") => {
                let (status, v) = alice.delete(&app.base, &bob_chat).await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
            }
            ("PUT", "/api/chats/{id}/servers") => {
                let (status, v) = alice
                    .put(
                        &app.base,
                        &format!("{bob_chat}/servers"),
                        &json!({"servers": {"bobs": false}}),
                    )
                    .await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
            }
            ("POST", "/api/chats/{id}/send") => {
                // Her own key is set for this case: the 404 is about the chat, not a key.
                let (status, v) = alice
                    .post(
                        &app.base,
                        &format!("{bob_chat}/send"),
                        &json!({"message": "read me bob's chat"}),
                    )
                    .await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
            }
            ("POST", "/api/chats/{id}/confirm") => {
                for decision in ["server", "cancel"] {
                    let (status, v) = alice
                        .post(
                            &app.base,
                            &format!("{bob_chat}/confirm"),
                            &json!({"id": bob.confirmation, "decision": decision}),
                        )
                        .await;
                    assert_eq!(status, 404, "{what}: {v}");
                    answers.push((status, v));
                }
            }
            ("POST", "/api/chats/{id}/elicitation") => {
                for body in [
                    json!({"id": bob.elicitation, "action": "accept", "content": {"a": "x"}}),
                    json!({"id": bob.elicitation, "action": "decline"}),
                    json!({"id": bob.elicitation, "action": "cancel"}),
                ] {
                    let (status, v) = alice
                        .post(&app.base, &format!("{bob_chat}/elicitation"), &body)
                        .await;
                    assert_eq!(status, 404, "{what}: {v}");
                    answers.push((status, v));
                }
            }
            ("POST", "/api/chats/{id}/cancel") => {
                let (status, v) = alice
                    .post(&app.base, &format!("{bob_chat}/cancel"), &json!({}))
                    .await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
            }
            ("GET", "/api/workflows") => {
                let (status, v) = alice.get(&app.base, "/api/workflows").await;
                assert_eq!((status, &v["workflows"]), (200, &json!([])), "{what}: {v}");
                answers.push((status, v));
            }
            ("GET", "/api/workflows/{name}") => {
                let (status, v) = alice.get(&app.base, "/api/workflows/plans").await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
            }
            ("PUT", "/api/workflows/{name}") => {
                // Saving under his workflow's name makes one of her own; his is untouched.
                let (status, v) = alice
                    .put(
                        &app.base,
                        "/api/workflows/plans",
                        &json!({"source": "name: mine\nnodes:\n  - id: a\n    type: mcp\n    server: bobs\n    tool: echo\n"}),
                    )
                    .await;
                assert_eq!(status, 200, "{what}: {v}");
                // His server is no server of hers.
                assert!(
                    v["problems"].to_string().contains("no configured server")
                        || v["problems"].to_string().contains("unknown server")
                        || v["problems"].to_string().contains("bobs"),
                    "{what}: {v}"
                );
                assert_eq!(
                    alice_store
                        .workflow("plans")
                        .await
                        .unwrap()
                        .unwrap()
                        .source
                        .lines()
                        .next(),
                    Some("name: mine")
                );
                // Running it cannot reach his server: it does not validate.
                let (status, run) = alice
                    .post(&app.base, "/api/workflows/plans/run", &json!({}))
                    .await;
                assert_eq!(status, 422, "{what}: {run}");
                assert!(alice_store.delete_workflow("plans").await.unwrap());
                answers.push((status, v));
                answers.push((status, run));
            }
            ("DELETE", "/api/workflows/{name}") => {
                let (status, v) = alice.delete(&app.base, "/api/workflows/plans").await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
            }
            ("POST", "/api/validate-workflow") => {
                let (status, v) = alice
                    .post(
                        &app.base,
                        "/api/validate-workflow",
                        &json!({"source": "name: t\nnodes:\n  - id: a\n    type: mcp\n    server: trap\n    tool: echo\n"}),
                    )
                    .await;
                assert_eq!(status, 200, "{what}: {v}");
                assert_eq!(v["problems"].as_array().unwrap().len(), 1, "{what}: {v}");
                answers.push((status, v));
            }
            ("POST", "/api/workflows/{name}/run") => {
                let (status, v) = alice
                    .post(&app.base, "/api/workflows/plans/run", &json!({}))
                    .await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
            }
            ("GET", "/api/workflow-runs") => {
                for path in ["/api/workflow-runs", "/api/workflow-runs?workflow=plans"] {
                    let (status, v) = alice.get(&app.base, path).await;
                    assert_eq!((status, &v["runs"]), (200, &json!([])), "{what}: {v}");
                    answers.push((status, v));
                }
            }
            ("GET", "/api/workflow-runs/{id}") | ("GET", "/api/workflow-runs/{id}/events") => {
                for run in [&bob.finished_run, &bob.running_run] {
                    let path = route.path.replace("{id}", run);
                    let (status, v) = alice.get(&app.base, &path).await;
                    assert_eq!(status, 404, "{what}: {v}");
                    answers.push((status, v));
                }
            }
            ("POST", "/api/workflow-runs/{id}/cancel") => {
                for run in [&bob.finished_run, &bob.running_run] {
                    let (status, v) = alice
                        .post(
                            &app.base,
                            &format!("/api/workflow-runs/{run}/cancel"),
                            &json!({}),
                        )
                        .await;
                    assert_eq!(status, 404, "{what}: {v}");
                    answers.push((status, v));
                }
            }
            ("GET", "/api/chats/{id}/apps") => {
                let (status, v) = alice.get(&app.base, &format!("{bob_chat}/apps")).await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
            }
            ("POST", "/api/apps/{id}/open")
            | ("POST", "/api/apps/{id}/tools/call")
            | ("POST", "/api/apps/{id}/resources/read")
            | ("POST", "/api/apps/{id}/message")
            | ("POST", "/api/apps/{id}/context") => {
                // Bob's session id, alice's session: not there (404), nothing run.
                let path = route.path.replace("/api/apps/{id}", &bob_app);
                let (status, v) = alice
                    .post(
                        &app.base,
                        &path,
                        &json!({"name": "echo", "arguments": {"message": "x"},
                            "uri": "ui://switchboard-demo/clock.html", "message": "hi bob",
                            "content": [{"type": "text", "text": "alice's context"}]}),
                    )
                    .await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
            }
            ("GET", "/api/apps/{id}/lists") => {
                let (status, v) = alice.get(&app.base, &format!("{bob_app}/lists")).await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
            }
            ("DELETE", "/api/apps/{id}") => {
                let (status, v) = alice.delete(&app.base, &bob_app).await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
            }
            ("GET", "/apps/{id}/sandbox") => {
                // No page of bob's app for alice (its CSP is stored: it would serve bob).
                let r = send(Method::GET, &format!("/apps/{}/sandbox", bob.app), None)
                    .send()
                    .await
                    .unwrap();
                let status = r.status().as_u16();
                let body = r.text().await.unwrap();
                assert_eq!(status, 404, "{what}: {body}");
                assert!(!body.contains("sandbox-proxy-ready"), "{what}: {body}");
                answers.push((status, json!({"body": body})));
                let r = Browser::new(app.origin(), Some(&bob.cookie))
                    .request(
                        Method::GET,
                        &app.base,
                        &format!("/apps/{}/sandbox", bob.app),
                    )
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200, "{what}: bob's own page");
            }
            ("GET", "/api/admin/catalog")
            | ("POST", "/api/admin/catalog")
            | ("PUT", "/api/admin/catalog/{name}")
            | ("DELETE", "/api/admin/catalog/{name}") => {
                // Alice is no admin: 403, nothing about the catalog, nothing changed.
                let path = route.path.replace("{name}", "shared");
                let body = json!({"name": "shared", "url": alice_demo});
                let body =
                    (route.method != Method::GET && route.method != Method::DELETE).then_some(body);
                let (status, v) = alice.send(send(route.method.clone(), &path, body)).await;
                assert_eq!(
                    (status, v["message"].as_str()),
                    (403, Some("only a team admin may do this")),
                    "{what}: {v}"
                );
                assert!(!v.to_string().contains(&trap_url), "{what}: {v}");
                assert_eq!(store.catalog_servers().await.unwrap(), catalog_before);
                answers.push((status, v));
            }
            ("GET", "/api/catalog") => {
                // The shared server, but not bob's enablement or login.
                let (status, v) = alice.get(&app.base, "/api/catalog").await;
                assert_eq!(status, 200, "{what}: {v}");
                assert_eq!(v["servers"][0]["enabled"], false, "{what}: {v}");
                assert_eq!(v["servers"][0]["oauth"]["signedIn"], false, "{what}: {v}");
                answers.push((status, v));
            }
            ("POST", "/api/catalog/{name}/enable") | ("POST", "/api/catalog/{name}/disable") => {
                let (status, v) = alice
                    .send(send(
                        Method::POST,
                        &route.path.replace("{name}", "shared"),
                        Some(json!({})),
                    ))
                    .await;
                assert_eq!(status, 200, "{what}: {v}");
                assert_eq!(v["oauth"]["signedIn"], false, "{what}: {v}");
                answers.push((status, v));
                let (status, v) = alice
                    .send(send(
                        Method::POST,
                        &route.path.replace("{name}", "bobs"),
                        Some(json!({})),
                    ))
                    .await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
                alice_store.disable_catalog_server("shared").await.unwrap();
            }
            ("GET", "/api/catalog/{name}/tools")
            | ("POST", "/api/catalog/{name}/call")
            | ("POST", "/api/catalog/{name}/test") => {
                // Not enabled by her: refused without connecting anywhere.
                let path = route.path.replace("{name}", "shared");
                let body = (route.method == Method::POST)
                    .then(|| json!({"tool": "echo", "args": {"message": "x"}}));
                let before = trap.connections();
                let (status, v) = alice
                    .send(send(route.method.clone(), &path, body.clone()))
                    .await;
                assert_eq!(status, 409, "{what}: {v}");
                assert!(
                    v.to_string().contains("enable it first"),
                    "{what}: {status} {v}"
                );
                assert_eq!(trap.connections(), before, "{what} connected for alice");
                answers.push((status, v));
                // Enabled by her: she connects with HER credentials (none); bob's token
                // never reaches the server on her behalf.
                alice_store.enable_catalog_server("shared").await.unwrap();
                let (status, v) = alice.send(send(route.method.clone(), &path, body)).await;
                assert!(trap.connections() > before, "{what}: {status} {v}");
                trap.assert_never_saw(BOB_ACCESS);
                answers.push((status, v));
                alice_store.disable_catalog_server("shared").await.unwrap();
                assert_eq!(
                    app.running.state.open_connections(),
                    1,
                    "only bob's connection"
                );
            }
            ("POST", "/api/catalog/{name}/oauth/start") => {
                let (status, v) = alice
                    .send(send(
                        Method::POST,
                        "/api/catalog/shared/oauth/start",
                        Some(json!({})),
                    ))
                    .await;
                assert_eq!(status, 409, "{what}: {v}");
                answers.push((status, v));
            }
            ("POST", "/api/catalog/{name}/oauth/logout") => {
                // Her logout removes nothing of bob's.
                let (status, v) = alice
                    .send(send(
                        Method::POST,
                        "/api/catalog/shared/oauth/logout",
                        Some(json!({})),
                    ))
                    .await;
                assert_eq!((status, &v["removed"]), (200, &json!(false)), "{what}: {v}");
                answers.push((status, v));
            }
            ("GET", "/.well-known/oauth-protected-resource")
            | ("GET", "/.well-known/oauth-protected-resource/mcp")
            | ("GET", "/.well-known/oauth-authorization-server") => {
                let (status, v) = alice.send(send(Method::GET, route.path, None)).await;
                assert_eq!(status, 200, "{what}: {v}");
                answers.push((status, v));
            }
            ("POST", "/oauth/register") => {
                let (status, v) = alice
                    .post(
                        &app.base,
                        "/oauth/register",
                        &json!({"redirect_uris": [redirect], "client_name": "alice's"}),
                    )
                    .await;
                assert_eq!(status, 201, "{what}: {v}");
                assert_ne!(v["client_id"], json!(bob_client));
                answers.push((status, v));
            }
            ("GET", "/oauth/authorize") => {
                // Bob's client, alice's session: the consent names alice only.
                let q = format!(
                    "/oauth/authorize?response_type=code&client_id={bob_client}&redirect_uri={}&code_challenge={PKCE_CHALLENGE}&code_challenge_method=S256&state=s1",
                    url::form_urlencoded::byte_serialize(redirect.as_bytes()).collect::<String>()
                );
                let r = send(Method::GET, &q, None).send().await.unwrap();
                let status = r.status().as_u16();
                assert_eq!(status, 200, "{what}");
                let body = r.text().await.unwrap();
                assert!(body.contains("alice@example.com"), "{what}: {body}");
                answers.push((status, json!({"body": body})));
            }
            ("POST", "/oauth/authorize") => {
                // Alice's approval makes a code that is hers: exchanged, its token lists
                // her servers, not bob's.
                let form = url::form_urlencoded::Serializer::new(String::new())
                    .extend_pairs([
                        ("response_type", "code"),
                        ("client_id", bob_client.as_str()),
                        ("redirect_uri", redirect),
                        ("code_challenge", PKCE_CHALLENGE),
                        ("code_challenge_method", "S256"),
                        ("decision", "allow"),
                    ])
                    .finish();
                let r = send(Method::POST, "/oauth/authorize", None)
                    .header("Content-Type", "application/x-www-form-urlencoded")
                    .body(form)
                    .send()
                    .await
                    .unwrap();
                let status = r.status().as_u16();
                assert_eq!(status, 303, "{what}");
                let to = r.headers()["location"].to_str().unwrap().to_owned();
                let code = url::Url::parse(&to)
                    .unwrap()
                    .query_pairs()
                    .find(|(k, _)| k == "code")
                    .unwrap()
                    .1
                    .into_owned();
                let (status, v) = alice
                    .send(
                        alice
                            .request(Method::POST, &app.base, "/oauth/token")
                            .header("Content-Type", "application/x-www-form-urlencoded")
                            .body(
                                url::form_urlencoded::Serializer::new(String::new())
                                    .extend_pairs([
                                        ("grant_type", "authorization_code"),
                                        ("code", code.as_str()),
                                        ("client_id", bob_client.as_str()),
                                        ("redirect_uri", redirect),
                                        ("code_verifier", PKCE_VERIFIER),
                                    ])
                                    .finish(),
                            ),
                    )
                    .await;
                assert_eq!(status, 200, "{what}: {v}");
                let token = v["access_token"].as_str().unwrap().to_owned();
                let (status, _, v) =
                    mcp_request(&app.base, &token, Method::POST, list_tools.clone()).await;
                assert_eq!(status, 200, "{what}: {v}");
                assert!(!v.to_string().contains("bobs__"), "{what}: {v}");
                answers.push((status, v));
            }
            ("POST", "/oauth/token") => {
                // Bob's refresh token under another client id: refused, and left unspent.
                let alices_client = gateway_client(&store, redirect).await;
                let body = |client: &str| {
                    url::form_urlencoded::Serializer::new(String::new())
                        .extend_pairs([
                            ("grant_type", "refresh_token"),
                            ("refresh_token", bob_gw_refresh.as_str()),
                            ("client_id", client),
                        ])
                        .finish()
                };
                let (status, v) = alice
                    .send(
                        alice
                            .request(Method::POST, &app.base, "/oauth/token")
                            .header("Content-Type", "application/x-www-form-urlencoded")
                            .body(body(&alices_client)),
                    )
                    .await;
                assert_eq!(
                    (status, v["error"].as_str()),
                    (400, Some("invalid_grant")),
                    "{what}"
                );
                answers.push((status, v));
                let still = store
                    .refresh_gateway_tokens(
                        &bob_gw_refresh,
                        &bob_client,
                        switchboard_store::TokenLifetimes {
                            access: std::time::Duration::from_secs(60),
                            refresh: std::time::Duration::from_secs(60),
                        },
                    )
                    .await
                    .unwrap();
                assert!(
                    matches!(still, switchboard_store::RefreshOutcome::Issued(_)),
                    "{what}: alice's attempt spent bob's refresh token"
                );
            }
            ("POST", "/oauth/revoke") => {
                // Bob's tokens presented under alice's own client: refused, left alone.
                let alices_client = gateway_client(&store, redirect).await;
                for token in [bob_gw_access.as_str(), bob_gw_refresh.as_str()] {
                    let (status, v) = alice
                        .send(
                            alice
                                .request(Method::POST, &app.base, "/oauth/revoke")
                                .header("Content-Type", "application/x-www-form-urlencoded")
                                .body(
                                    url::form_urlencoded::Serializer::new(String::new())
                                        .extend_pairs([
                                            ("token", token),
                                            ("client_id", alices_client.as_str()),
                                        ])
                                        .finish(),
                                ),
                        )
                        .await;
                    assert_eq!(
                        (status, v["error"].as_str()),
                        (400, Some("unauthorized_client")),
                        "{what}"
                    );
                    answers.push((status, v));
                }
                let (status, _, v) =
                    mcp_request(&app.base, &bob_gw_access, Method::POST, list_tools.clone()).await;
                assert_eq!(status, 200, "{what}: bob's token was revoked: {v}");
            }
            ("GET", "/api/gateway/grants") => {
                // Alice sees her own grant, never bob's.
                let (_, session) = sign_in(&store, "alice@example.com", false).await;
                gateway_tokens(
                    &store,
                    &session,
                    &bob_client,
                    &gateway,
                    std::time::Duration::from_secs(600),
                )
                .await;
                let (status, v) = alice.get(&app.base, "/api/gateway/grants").await;
                assert_eq!(status, 200, "{what}: {v}");
                let grants = v["grants"].as_array().unwrap();
                assert!(!grants.is_empty(), "{what}: {v}");
                for g in grants {
                    assert_ne!(g["id"].as_str(), Some(bob_grant.as_str()), "{what}: {v}");
                }
                answers.push((status, v));
            }
            ("DELETE", "/api/gateway/grants/{id}") => {
                // Bob's grant is "not found" for alice; her own goes.
                let (status, v) = alice
                    .delete(&app.base, &format!("/api/gateway/grants/{bob_grant}"))
                    .await;
                assert_eq!(status, 404, "{what}: {v}");
                answers.push((status, v));
                let (status, _, v) =
                    mcp_request(&app.base, &bob_gw_access, Method::POST, list_tools.clone()).await;
                assert_eq!(status, 200, "{what}: bob's grant ended: {v}");
                let before: Vec<String> = alice_store
                    .gateway_grants()
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|g| g.id.as_str().to_owned())
                    .collect();
                let (_, session) = sign_in(&store, "alice@example.com", false).await;
                let (token, _) = gateway_tokens(
                    &store,
                    &session,
                    &bob_client,
                    &gateway,
                    std::time::Duration::from_secs(600),
                )
                .await;
                // The grant this token belongs to: the one that was not there before
                // (grants made within the same second have no order between them).
                let own = alice_store.gateway_grants().await.unwrap();
                let newest = own
                    .iter()
                    .find(|g| !before.iter().any(|b| b == g.id.as_str()))
                    .expect("the new grant is listed")
                    .id
                    .as_str()
                    .to_owned();
                let (status, v) = alice
                    .delete(&app.base, &format!("/api/gateway/grants/{newest}"))
                    .await;
                assert_eq!(status, 200, "{what}: {v}");
                let (status, _, _) =
                    mcp_request(&app.base, &token, Method::POST, list_tools.clone()).await;
                assert_eq!(status, 401, "{what}: alice's own revoked grant");
            }
            ("POST", "/mcp") => {
                let (_, session) = sign_in(&store, "alice@example.com", false).await;
                let (token, _) = gateway_tokens(
                    &store,
                    &session,
                    &bob_client,
                    &gateway,
                    std::time::Duration::from_secs(600),
                )
                .await;
                let (status, _, v) =
                    mcp_request(&app.base, &token, Method::POST, list_tools.clone()).await;
                assert_eq!(status, 200, "{what}: {v}");
                assert!(!v.to_string().contains("bobs__"), "{what}: {v}");
                answers.push((status, v));
                for name in ["bobs__echo", "trap__echo"] {
                    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": name, "arguments": {"message": "x"}}});
                    let (status, _, v) = mcp_request(&app.base, &token, Method::POST, call).await;
                    assert!(
                        v["error"].is_object() && v["result"].is_null(),
                        "{what}: {v}"
                    );
                    answers.push((status, v));
                }
                let read = json!({"jsonrpc": "2.0", "id": 3, "method": "resources/list"});
                let (status, _, v) = mcp_request(&app.base, &token, Method::POST, read).await;
                assert!(!v.to_string().contains("bobs"), "{what}: {v}");
                answers.push((status, v));
            }
            ("GET", "/mcp") | ("DELETE", "/mcp") => {
                let (_, session) = sign_in(&store, "alice@example.com", false).await;
                let (token, _) = gateway_tokens(
                    &store,
                    &session,
                    &bob_client,
                    &gateway,
                    std::time::Duration::from_secs(600),
                )
                .await;
                let (status, _, v) =
                    mcp_request(&app.base, &token, route.method.clone(), json!({})).await;
                assert_eq!(status, 405, "{what}: {v}");
                answers.push((status, v));
            }
            _ => panic!(
                "route {what} has no isolation case: add one to tests/team_isolation.rs proving alice cannot reach bob's data through it"
            ),
        }
        if matches!(route.access, RouteAccess::Session | RouteAccess::Admin) {
            // Without a session the route answers 401 and nothing else.
            let anon = Browser::new(app.origin(), None);
            let path = route
                .path
                .replace("{name}", "bobs")
                .replace("{id}", &bob.chat);
            let (status, v) = anon
                .send(anon.request(route.method.clone(), &app.base, &path))
                .await;
            assert_eq!(status, 401, "{what} without a session: {v}");
            answers.push((status, v));
        }
        if route.access == RouteAccess::McpToken {
            // Without a token, or with a session cookie instead: 401 and nothing else.
            let (status, www, v) =
                mcp_request(&app.base, "", route.method.clone(), json!({})).await;
            assert_eq!(status, 401, "{what} without a token: {v}");
            assert!(www.contains("resource_metadata="), "{what}: {www}");
            let r = alice
                .request(route.method.clone(), &app.base, "/mcp")
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 401, "{what} with a session cookie");
            answers.push((status, v));
        }
        for (_, body) in &answers {
            bob.assert_no_leak(&what, &body.to_string());
        }
        bob.unchanged(&store, &app).await;
    }
    // Bob's gateway token still serves him, and only him.
    let (status, _, v) = mcp_request(&app.base, &bob_gw_access, Method::POST, list_tools).await;
    assert_eq!(status, 200, "{v}");
    assert!(v.to_string().contains("bobs__echo"), "{v}");
    trap.assert_never_saw("alice");
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
