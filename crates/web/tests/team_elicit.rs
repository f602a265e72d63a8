//! Elicitation in team chats, on SQLite and on PostgreSQL, with the fake Gemini and a
//! real server-everything over Streamable HTTP (its `trigger-elicitation-request` tool
//! asks for a form during the call): the request asked by the turn on instance A is
//! listed and answered through instance B (another user cannot see or answer it; an
//! answer outside the requested schema is refused and the request keeps waiting), and
//! the server gets the accepted content; a decline reaches the server as a decline;
//! with no answer within the instance's elicitation timeout the server hears `cancel`
//! and a late answer is a 404; the turn's cancel ends a waiting elicitation too.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use switchboard_model_fakes::FakeTurn;
use switchboard_model_fakes::gemini::{FakeGemini, FakeOptions, declared_function_names};
use switchboard_testkit::{EverythingMode, spawn_everything};
use team_support::{Browser, Db, Instance, InstanceOptions, gemini_at, sign_in};

on_both!(elicitations_are_asked_in_the_store_and_answered_anywhere);

const MODEL_KEY: &str = "elicit-gemini-key-5c1e";

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

fn of_type<'a>(evs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    evs.iter().filter(|e| e["type"] == kind).collect()
}

fn send(b: &Browser, base: &str, chat: &str, message: &str) -> reqwest::RequestBuilder {
    b.request(Method::POST, base, &format!("/api/chats/{chat}/send"))
        .json(&json!({"message": message}))
}

/// The first elicitation waiting in `chat`, read through `base`.
async fn wait_for_elicitation(b: &Browser, base: &str, chat: &str) -> Value {
    for _ in 0..400 {
        let (_, v) = b.get(base, &format!("/api/chats/{chat}")).await;
        if v["elicitations"][0]["id"].is_string() {
            return v["elicitations"][0].clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no elicitation appeared");
}

async fn answer(b: &Browser, base: &str, chat: &str, body: &Value) -> (u16, Value) {
    b.post(base, &format!("/api/chats/{chat}/elicitation"), body)
        .await
}

async fn elicitations_are_asked_in_the_store_and_answered_anywhere(db: Db) {
    let gemini = FakeGemini::start_with(
        FakeOptions {
            api_key: MODEL_KEY.into(),
            ..FakeOptions::default()
        },
        vec![],
    )
    .await;
    let opts = |timeout: Option<Duration>| InstanceOptions {
        model: Some(gemini_at(&gemini.base_url)),
        elicitation_timeout: timeout,
        ..Default::default()
    };
    let a = Instance::start(&db, opts(None)).await;
    let b = Instance::start(
        &db,
        InstanceOptions {
            public_origin: Some(a.origin().to_owned()),
            ..opts(None)
        },
    )
    .await;
    let everything = spawn_everything(EverythingMode::StreamableHttp).await;
    let store = db.store().await;
    let (_, cookie) = sign_in(&store, "erin@example.com", false).await;
    let (_, other_cookie) = sign_in(&store, "mallory@example.com", false).await;
    let erin = Browser::new(a.origin(), Some(&cookie));
    let mallory = Browser::new(a.origin(), Some(&other_cookie));
    let (status, v) = erin
        .put(&a.base, "/api/model-key", &json!({"key": MODEL_KEY}))
        .await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = erin
        .post(
            &a.base,
            "/api/servers",
            &json!({"name": "everything", "url": everything.url}),
        )
        .await;
    assert_eq!(status, 201, "{v}");
    let (_, v) = erin.post(&a.base, "/api/chats", &json!({})).await;
    let chat = v["chat"]["id"].as_str().unwrap().to_owned();

    // The tool's name as the model sees it.
    gemini.push(FakeTurn::text("listed"));
    let resp = send(&erin, &a.base, &chat, "tools?").send().await.unwrap();
    parse_events(&resp.text().await.unwrap());
    let names = declared_function_names(&gemini.requests().pop().unwrap());
    let tool = names
        .iter()
        .find(|n| {
            n.contains("elicitation")
                && n.contains("trigger")
                && !n.contains("url")
                && !n.contains("async")
        })
        .unwrap_or_else(|| panic!("no elicitation tool in {names:?}"))
        .to_string();

    // Asked on A (after the call's confirmation), answered through B.
    gemini.push(FakeTurn::call(&tool, json!({})));
    gemini.push(FakeTurn::text("thanks"));
    let turn = send(&erin, &a.base, &chat, "ask me").send().await.unwrap();
    let confirm = loop {
        let (_, v) = erin.get(&b.base, &format!("/api/chats/{chat}")).await;
        if let Some(id) = v["confirmations"][0]["id"].as_str() {
            break id.to_owned();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (status, _) = erin
        .post(
            &b.base,
            &format!("/api/chats/{chat}/confirm"),
            &json!({"id": confirm, "decision": "server"}),
        )
        .await;
    assert_eq!(status, 200);
    let asked = wait_for_elicitation(&erin, &b.base, &chat).await;
    let id = asked["id"].as_str().unwrap().to_owned();
    assert_eq!(asked["request"]["server"], "everything", "{asked}");
    assert_eq!(asked["request"]["mode"], "form", "{asked}");
    assert!(
        asked["request"]["requestedSchema"]["properties"]["name"].is_object(),
        "{asked}"
    );
    // Another user: nothing listed, nothing answered.
    let (status, _) = mallory.get(&b.base, &format!("/api/chats/{chat}")).await;
    assert_eq!(status, 404);
    let (status, _) = answer(
        &mallory,
        &b.base,
        &chat,
        &json!({"id": id, "action": "decline"}),
    )
    .await;
    assert_eq!(status, 404);
    // Outside the requested schema: refused, naming the field; still waiting.
    for (bad, why) in [
        (json!({"check": true}), "`name` is required"),
        (json!({"name": "Ada", "integer": 1000}), "at most 100"),
        (
            json!({"name": "Ada", "untitledSingleSelectEnum": "Gunther"}),
            "one of",
        ),
        (json!({"name": "Ada", "nickname": "x"}), "not a field"),
    ] {
        let (status, v) = answer(
            &erin,
            &b.base,
            &chat,
            &json!({"id": id, "action": "accept", "content": bad}),
        )
        .await;
        assert_eq!(status, 400, "{v}");
        assert!(v.to_string().contains(why), "{v}");
    }
    let (status, v) = answer(
        &erin,
        &b.base,
        &chat,
        &json!({"id": id, "action": "decline", "content": {}}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    let huge = "x".repeat(switchboard_web::CHAT_ELICITATION_MAX_BYTES + 1);
    let (status, v) = answer(
        &erin,
        &b.base,
        &chat,
        &json!({"id": id, "action": "accept", "content": {"name": huge}}),
    )
    .await;
    assert_eq!(status, 413, "{v}");
    let (status, v) = answer(
        &erin,
        &b.base,
        &chat,
        &json!({"id": id, "action": "accept", "content": {"name": "Ada Lovelace", "check": true, "integer": 7}}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let (status, _) = answer(
        &erin,
        &a.base,
        &chat,
        &json!({"id": id, "action": "decline"}),
    )
    .await;
    assert_eq!(status, 404, "answered once");
    let evs = parse_events(&turn.text().await.unwrap());
    let shown = of_type(&evs, "elicitation");
    assert_eq!(shown.len(), 1, "{evs:?}");
    assert_eq!(shown[0]["id"], id.as_str());
    assert!(shown[0]["requestedSchema"].is_object(), "{evs:?}");
    let done = of_type(&evs, "elicitation-done");
    assert_eq!(done[0]["action"], "accept", "{evs:?}");
    let end = of_type(&evs, "tool-end");
    assert!(end[0].to_string().contains("Ada Lovelace"), "{evs:?}");
    assert_eq!(of_type(&evs, "done")[0]["text"], "thanks", "{evs:?}");
    let (_, v) = erin.get(&a.base, &format!("/api/chats/{chat}")).await;
    assert_eq!(v["elicitations"], json!([]), "{v}");

    // Declined through A: the server hears a decline.
    gemini.push(FakeTurn::call(&tool, json!({})));
    gemini.push(FakeTurn::text("ok then"));
    let turn = send(&erin, &b.base, &chat, "ask again")
        .send()
        .await
        .unwrap();
    let asked = wait_for_elicitation(&erin, &a.base, &chat).await;
    let (status, _) = answer(
        &erin,
        &a.base,
        &chat,
        &json!({"id": asked["id"], "action": "decline"}),
    )
    .await;
    assert_eq!(status, 200);
    let evs = parse_events(&turn.text().await.unwrap());
    let end = of_type(&evs, "tool-end");
    assert!(end[0].to_string().contains("declined"), "{evs:?}");
    assert_eq!(of_type(&evs, "elicitation-done")[0]["action"], "decline");

    // The turn's cancel (sent to A) ends an elicitation waiting on B.
    gemini.push(FakeTurn::call(&tool, json!({})));
    let turn = send(&erin, &b.base, &chat, "and cancel")
        .send()
        .await
        .unwrap();
    let asked = wait_for_elicitation(&erin, &a.base, &chat).await;
    let (status, _) = erin
        .post(&a.base, &format!("/api/chats/{chat}/cancel"), &json!({}))
        .await;
    assert_eq!(status, 200);
    let evs = parse_events(&turn.text().await.unwrap());
    assert_eq!(
        of_type(&evs, "elicitation-done")[0]["action"],
        "cancel",
        "{evs:?}"
    );
    assert!(
        of_type(&evs, "error")[0]["message"]
            .as_str()
            .unwrap()
            .contains("cancelled"),
        "{evs:?}"
    );
    let (status, _) = answer(
        &erin,
        &a.base,
        &chat,
        &json!({"id": asked["id"], "action": "decline"}),
    )
    .await;
    assert_eq!(status, 404);

    // No answer within the elicitation timeout (3 s on instance C): the server hears
    // `cancel`, and a late answer is a 404.
    let c = Instance::start(
        &db,
        InstanceOptions {
            public_origin: Some(a.origin().to_owned()),
            ..opts(Some(Duration::from_secs(3)))
        },
    )
    .await;
    gemini.push(FakeTurn::call(&tool, json!({})));
    gemini.push(FakeTurn::text("too slow"));
    let turn = send(&erin, &c.base, &chat, "ask, I'll wait")
        .send()
        .await
        .unwrap();
    assert_eq!(turn.status(), 200);
    let asked = wait_for_elicitation(&erin, &a.base, &chat).await;
    let evs = parse_events(&turn.text().await.unwrap());
    let end = of_type(&evs, "tool-end");
    assert!(end[0].to_string().contains("cancelled"), "{evs:?}");
    assert_eq!(of_type(&evs, "elicitation-done")[0]["action"], "cancel");
    let (status, _) = answer(
        &erin,
        &b.base,
        &chat,
        &json!({"id": asked["id"], "action": "accept", "content": {"name": "late"}}),
    )
    .await;
    assert_eq!(status, 404);
    a.stop().await;
    b.stop().await;
    c.stop().await;
}
