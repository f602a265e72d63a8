//! MCP Apps in the team chat, on two instances of one database (SQLite and PostgreSQL),
//! with the fake Gemini and the demo server (its `clock` tool links
//! `ui://switchboard-demo/clock.html`): a chat turn on instance A that calls `clock`
//! opens an app session in the store; instance B opens it (the HTML read through the
//! user's own connection, the CSP stored), serves its sandbox page (an opaque origin,
//! framed only by the team origin) and runs the app's `tools/call`, `resources/read`,
//! lists, `ui/update-model-context` (taken by the next turn, on either instance) and
//! `ui/message` (a turn in the session's chat); a tool the server does not
//! have is refused; another user gets 404 for the session; the session survives a page
//! reload (listed per chat) and closing it ends it on every instance. The same for an
//! app of a team-catalog server (`catalog:NAME`), reached with the user's own
//! connection.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use std::collections::BTreeMap;

use reqwest::Method;
use serde_json::{Value, json};
use switchboard_model_fakes::FakeTurn;
use switchboard_model_fakes::gemini::{FakeGemini, FakeOptions, declared_function_names};
use switchboard_store::{Approvals, CatalogLaunch, CatalogServer, Transport};
use team_support::{Browser, Db, Instance, InstanceOptions, demo_http, gemini_at, sign_in};

on_both!(an_app_opened_on_one_instance_runs_on_the_other);

const MODEL_KEY: &str = "user-gemini-key-apps-4e1a";
const CLOCK_UI: &str = "ui://switchboard-demo/clock.html";

fn parse_events(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|block| {
            let data: String = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            (!data.is_empty()).then(|| serde_json::from_str(&data).unwrap())
        })
        .collect()
}

async fn stream(b: &Browser, base: &str, path: &str, body: Value) -> Vec<Value> {
    let resp = b
        .request(Method::POST, base, path)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    parse_events(&resp.text().await.unwrap())
}

/// The app session a turn's `tool-end` named.
fn app_of(evs: &[Value]) -> String {
    let end = evs
        .iter()
        .find(|e| e["type"] == "tool-end")
        .unwrap_or_else(|| panic!("no tool-end in {evs:?}"));
    assert_eq!(end["isError"], false, "{end}");
    end["app"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no app in {end}"))
        .to_owned()
}

async fn an_app_opened_on_one_instance_runs_on_the_other(db: Db) {
    let gemini = FakeGemini::start_with(
        FakeOptions {
            api_key: MODEL_KEY.into(),
            ..FakeOptions::default()
        },
        vec![],
    )
    .await;
    let opts = || InstanceOptions {
        model: Some(gemini_at(&gemini.base_url)),
        ..Default::default()
    };
    let a = Instance::start(&db, opts()).await;
    let b = Instance::start(
        &db,
        InstanceOptions {
            public_origin: Some(a.origin().to_owned()),
            ..opts()
        },
    )
    .await;
    let store = db.store().await;
    let (carol_id, cookie) = sign_in(&store, "carol@example.com", false).await;
    let (_, dave_cookie) = sign_in(&store, "dave@example.com", false).await;
    let carol = Browser::new(a.origin(), Some(&cookie));
    let dave = Browser::new(a.origin(), Some(&dave_cookie));
    let demo = demo_http().await;
    let (status, _) = carol
        .post(
            &a.base,
            "/api/servers",
            &json!({"name": "demo", "url": demo}),
        )
        .await;
    assert_eq!(status, 201);
    let (status, _) = carol
        .put(&a.base, "/api/model-key", &json!({"key": MODEL_KEY}))
        .await;
    assert_eq!(status, 200);
    let (_, v) = carol.post(&a.base, "/api/chats", &json!({})).await;
    let chat = v["chat"]["id"].as_str().unwrap().to_owned();
    let us = store.for_user(&carol_id);
    us.set_approvals(
        &chat,
        &Approvals {
            tools: vec![],
            servers: vec!["demo".into(), "catalog:shared".into()],
        },
    )
    .await
    .unwrap();

    // The turn runs on A; the clock's result opens an app session.
    gemini.push(FakeTurn::call("mcp_demo_clock", json!({})));
    gemini.push(FakeTurn::text("there is the clock"));
    let evs = stream(
        &carol,
        &a.base,
        &format!("/api/chats/{chat}/send"),
        json!({"message": "what time is it?"}),
    )
    .await;
    let app = app_of(&evs);
    let stored = us.app_session(&app).await.unwrap().expect("in the store");
    assert_eq!(
        (stored.resource_uri.as_str(), stored.tool.as_str()),
        (CLOCK_UI, "clock")
    );
    assert_eq!(stored.conversation_id, chat);
    assert!(stored.allows("tools/call") && stored.allows("ui/message"));

    // Instance B: not open yet, no sandbox page.
    let sandbox = format!("/apps/{app}/sandbox");
    let r = carol
        .request(Method::GET, &b.base, &sandbox)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    // Opened on B: the HTML through carol's connection, the CSP stored.
    let (status, opened) = carol
        .post(&b.base, &format!("/api/apps/{app}/open"), &json!({}))
        .await;
    assert_eq!(status, 200, "{opened}");
    assert!(
        opened["html"].as_str().unwrap().contains("refresh"),
        "{opened}"
    );
    assert_eq!(opened["server"], "demo");
    assert_eq!(opened["toolDef"]["name"], "clock");
    assert_eq!(opened["proxyOrigin"], "null");
    assert!(
        opened["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("The time is"),
        "{opened}"
    );
    let csp = opened["cspHeader"].as_str().unwrap();
    assert!(
        csp.starts_with("sandbox allow-scripts allow-forms; default-src 'none';"),
        "{csp}"
    );
    assert!(
        csp.ends_with(&format!("frame-ancestors {}", a.origin())),
        "{csp}"
    );
    // The sandbox page, served by A from the store's CSP.
    let r = carol
        .request(Method::GET, &a.base, &sandbox)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-security-policy"], csp);
    assert_eq!(r.headers()["cache-control"], "no-store");
    assert!(r.headers().get("x-frame-options").is_none());
    let page = r.text().await.unwrap();
    assert!(
        page.contains(&format!("var HOST = \"{}\"", a.origin())),
        "{page}"
    );

    // The app's requests, alternating instances.
    let (status, v) = carol
        .post(
            &b.base,
            &format!("/api/apps/{app}/tools/call"),
            &json!({"name": "clock", "arguments": {}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert!(v["result"]["structuredContent"]["time"].is_string(), "{v}");
    let (status, v) = carol
        .post(
            &a.base,
            &format!("/api/apps/{app}/tools/call"),
            &json!({"name": "no_such_tool", "arguments": {}}),
        )
        .await;
    assert_eq!(status, 403, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("own server's tools"),
        "{v}"
    );
    let (status, v) = carol
        .post(
            &a.base,
            &format!("/api/apps/{app}/resources/read"),
            &json!({"uri": CLOCK_UI}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["contents"][0]["uri"], CLOCK_UI, "{v}");
    let (status, v) = carol.get(&b.base, &format!("/api/apps/{app}/lists")).await;
    assert_eq!(status, 200, "{v}");
    assert!(v["resources"].to_string().contains(CLOCK_UI), "{v}");
    assert!(
        v["prompts"].as_array().is_some_and(|p| !p.is_empty()),
        "{v}"
    );

    // Another user: the session is not there, on any route.
    for (method, path) in [
        (Method::POST, format!("/api/apps/{app}/open")),
        (Method::GET, sandbox.clone()),
        (Method::POST, format!("/api/apps/{app}/tools/call")),
        (Method::GET, format!("/api/apps/{app}/lists")),
        (Method::DELETE, format!("/api/apps/{app}")),
    ] {
        let r = dave
            .request(method.clone(), &b.base, &path)
            .json(&json!({"name": "clock", "uri": CLOCK_UI}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{method} {path}");
    }

    // ui/update-model-context through A: kept in the store, the next turn (on B) takes it.
    let (status, v) = carol
        .post(
            &a.base,
            &format!("/api/apps/{app}/context"),
            &json!({"content": [{"type": "text", "text": "the clock reads noon"}]}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        dave.post(
            &a.base,
            &format!("/api/apps/{app}/context"),
            &json!({"content": [{"type": "text", "text": "dave's"}]}),
        )
        .await
        .0,
        404
    );
    // ui/message through B: a turn in the session's chat.
    gemini.push(FakeTurn::text("heard the app"));
    let evs = stream(
        &carol,
        &b.base,
        &format!("/api/apps/{app}/message"),
        json!({"message": "the app says hi"}),
    )
    .await;
    let done: Vec<&Value> = evs.iter().filter(|e| e["type"] == "done").collect();
    assert_eq!(done[0]["text"], "heard the app", "{evs:?}");
    let (_, v) = carol.get(&a.base, &format!("/api/chats/{chat}")).await;
    assert!(v["messages"].to_string().contains("the app says hi"), "{v}");
    let asked = gemini.requests().pop().unwrap().to_string();
    assert!(
        asked.contains("[Context from an app]") && asked.contains("the clock reads noon"),
        "{asked}"
    );
    assert!(!asked.contains("dave's"), "{asked}");

    // A reloaded page finds the session; closing it ends it everywhere.
    let (status, v) = carol.get(&b.base, &format!("/api/chats/{chat}/apps")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["apps"][0]["id"], app.as_str(), "{v}");
    assert_eq!(v["apps"][0]["afterSeq"], 2, "{v}");
    assert_eq!(
        dave.get(&b.base, &format!("/api/chats/{chat}/apps"))
            .await
            .0,
        404
    );
    assert_eq!(
        carol.delete(&b.base, &format!("/api/apps/{app}")).await.0,
        200
    );
    let (status, _) = carol
        .post(&a.base, &format!("/api/apps/{app}/open"), &json!({}))
        .await;
    assert_eq!(status, 404);

    // A team-catalog server's app: the session names `catalog:shared`, carol's own
    // connection serves it.
    let (admin_id, _) = sign_in(&store, "admin@example.com", true).await;
    store
        .publish_catalog_server(
            &admin_id,
            &CatalogServer {
                name: "shared".into(),
                description: "Shared demo".into(),
                launch: CatalogLaunch::Http {
                    url: demo.clone(),
                    transport: Transport::Http,
                    headers: BTreeMap::new(),
                },
            },
        )
        .await
        .unwrap();
    assert!(us.enable_catalog_server("shared").await.unwrap());
    gemini.push(FakeTurn::text("listed"));
    stream(
        &carol,
        &a.base,
        &format!("/api/chats/{chat}/send"),
        json!({"message": "tools?"}),
    )
    .await;
    let names = declared_function_names(&gemini.requests().pop().unwrap());
    let clock = names
        .iter()
        .find(|n| n.contains("shared") && n.ends_with("clock"))
        .unwrap_or_else(|| panic!("no catalog clock in {names:?}"))
        .to_string();
    gemini.push(FakeTurn::call(&clock, json!({})));
    gemini.push(FakeTurn::text("catalog clock"));
    let evs = stream(
        &carol,
        &b.base,
        &format!("/api/chats/{chat}/send"),
        json!({"message": "the shared clock"}),
    )
    .await;
    let app = app_of(&evs);
    let stored = us.app_session(&app).await.unwrap().unwrap();
    assert_eq!(
        stored.server,
        switchboard_store::ServerRef::catalog("shared")
    );
    let (status, opened) = carol
        .post(&a.base, &format!("/api/apps/{app}/open"), &json!({}))
        .await;
    assert_eq!(status, 200, "{opened}");
    assert_eq!(opened["server"], "catalog:shared");
    let (status, v) = carol
        .post(
            &b.base,
            &format!("/api/apps/{app}/tools/call"),
            &json!({"name": "clock"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["server"], "catalog:shared");
    a.stop().await;
    b.stop().await;
}
