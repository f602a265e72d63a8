//! Team chat's progress events and size caps, on SQLite and PostgreSQL, with the fake
//! Gemini: a long-running tool of the demo server (over Streamable HTTP) reports
//! progress, and the turn's event stream carries it (`tool-progress`, before the
//! call's `tool-end`); a chat near its byte cap refuses a send that cannot fit (409
//! naming the limit and "start a new chat"), a turn that fills it on the way stops
//! with the same words, and the model is sent only the newest turns within its budget
//! (a notice says how many older messages it does not see); a user at the cap on
//! chats cannot start another.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use reqwest::Method;
use serde_json::{Value, json};
use switchboard_model_fakes::FakeTurn;
use switchboard_model_fakes::gemini::{FakeGemini, FakeOptions};
use switchboard_store::{MAX_CHAT_BYTES, MAX_CHATS_PER_USER, MessageRole};
use team_support::{Browser, Db, Instance, InstanceOptions, demo_http, gemini_at, sign_in};

on_both!(
    tool_progress_reaches_the_page_while_the_call_runs,
    a_chat_and_a_user_stop_growing_at_their_caps
);

const MODEL_KEY: &str = "bounds-gemini-key-77aa";

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

async fn start(db: &Db, gemini: &FakeGemini) -> Instance {
    Instance::start(
        db,
        InstanceOptions {
            model: Some(gemini_at(&gemini.base_url)),
            ..Default::default()
        },
    )
    .await
}

async fn fake_gemini() -> FakeGemini {
    FakeGemini::start_with(
        FakeOptions {
            api_key: MODEL_KEY.into(),
            ..FakeOptions::default()
        },
        vec![],
    )
    .await
}

async fn tool_progress_reaches_the_page_while_the_call_runs(db: Db) {
    let gemini = fake_gemini().await;
    let a = start(&db, &gemini).await;
    let store = db.store().await;
    let (_, cookie) = sign_in(&store, "pat@example.com", false).await;
    let pat = Browser::new(a.origin(), Some(&cookie));
    pat.put(&a.base, "/api/model-key", &json!({"key": MODEL_KEY}))
        .await;
    let demo = demo_http().await;
    let (status, _) = pat
        .post(
            &a.base,
            "/api/servers",
            &json!({"name": "demo", "url": demo}),
        )
        .await;
    assert_eq!(status, 201);
    let (_, v) = pat.post(&a.base, "/api/chats", &json!({})).await;
    let chat = v["chat"]["id"].as_str().unwrap().to_owned();
    gemini.push(FakeTurn::call(
        "mcp_demo_slow",
        json!({"seconds": 1, "steps": 3}),
    ));
    gemini.push(FakeTurn::text("finished"));
    let turn = pat
        .request(Method::POST, &a.base, &format!("/api/chats/{chat}/send"))
        .json(&json!({"message": "run slow"}))
        .send()
        .await
        .unwrap();
    let confirm = loop {
        let (_, v) = pat.get(&a.base, &format!("/api/chats/{chat}")).await;
        if let Some(id) = v["confirmations"][0]["id"].as_str() {
            break id.to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    pat.post(
        &a.base,
        &format!("/api/chats/{chat}/confirm"),
        &json!({"id": confirm, "decision": "once"}),
    )
    .await;
    let evs = parse_events(&turn.text().await.unwrap());
    let progress = of_type(&evs, "tool-progress");
    assert!(!progress.is_empty(), "{evs:?}");
    assert_eq!(
        (&progress[0]["server"], &progress[0]["tool"]),
        (&json!("demo"), &json!("slow")),
        "{evs:?}"
    );
    assert_eq!(progress.last().unwrap()["total"].as_f64(), Some(3.0));
    let start_at = evs.iter().position(|e| e["type"] == "tool-start").unwrap();
    let first = evs
        .iter()
        .position(|e| e["type"] == "tool-progress")
        .unwrap();
    let end_at = evs.iter().position(|e| e["type"] == "tool-end").unwrap();
    assert!(start_at < first && first < end_at, "{evs:?}");
    assert_eq!(progress[0]["id"], evs[start_at]["id"], "{evs:?}");
    assert_eq!(of_type(&evs, "done")[0]["text"], "finished");
    a.stop().await;
}

async fn a_chat_and_a_user_stop_growing_at_their_caps(db: Db) {
    let gemini = fake_gemini().await;
    let a = start(&db, &gemini).await;
    let store = db.store().await;
    let (quinn_id, cookie) = sign_in(&store, "quinn@example.com", false).await;
    let quinn = Browser::new(a.origin(), Some(&cookie));
    quinn
        .put(&a.base, "/api/model-key", &json!({"key": MODEL_KEY}))
        .await;
    let us = store.for_user(&quinn_id);
    let (_, v) = quinn.post(&a.base, "/api/chats", &json!({})).await;
    let chat = v["chat"]["id"].as_str().unwrap().to_owned();

    // Fill the chat to about 1000 bytes short of its cap with 8 large saved turns.
    let text_of = |n: usize| json!({"role": "user", "parts": [{"text": "y".repeat(n)}]});
    let big = switchboard_store::MAX_MESSAGE_BYTES - 100;
    us.append_message(&chat, MessageRole::User, &text_of(big))
        .await
        .unwrap();
    let first = us.chat_size(&chat).await.unwrap().unwrap();
    let overhead = first.bytes - text_of(big).to_string().len() as i64;
    for _ in 0..6 {
        us.append_message(&chat, MessageRole::User, &text_of(big))
            .await
            .unwrap();
    }
    let seven = us.chat_size(&chat).await.unwrap().unwrap();
    let room = MAX_CHAT_BYTES - seven.bytes;
    let json_len = |n: usize| text_of(n).to_string().len() as i64;
    let mut n = usize::try_from(room - overhead - 1000).unwrap();
    while json_len(n) + overhead > room - 1000 {
        n -= 1;
    }
    us.append_message(&chat, MessageRole::Model, &text_of(n))
        .await
        .unwrap();
    let left = MAX_CHAT_BYTES - us.chat_size(&chat).await.unwrap().unwrap().bytes;
    assert!((990..=1000).contains(&left), "{left}");

    // A message that cannot fit is refused before anything runs.
    let (status, v) = quinn
        .post(
            &a.base,
            &format!("/api/chats/{chat}/send"),
            &json!({"message": "z".repeat(600)}),
        )
        .await;
    assert_eq!(status, 409, "{v}");
    let msg = v["message"].as_str().unwrap();
    assert!(
        msg.contains("32 MiB") && msg.contains("start a new chat"),
        "{msg}"
    );

    // A short one runs; the model sees only the newest turn (with a notice), and the
    // reply that does not fit stops the turn with the same words.
    gemini.push(FakeTurn::text("w".repeat(2000)));
    let resp = quinn
        .request(Method::POST, &a.base, &format!("/api/chats/{chat}/send"))
        .json(&json!({"message": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let evs = parse_events(&resp.text().await.unwrap());
    let notices = of_type(&evs, "notice");
    assert!(
        notices
            .iter()
            .any(|n| n["text"].as_str().unwrap().contains("8 older messages")),
        "{evs:?}"
    );
    let sent = gemini.requests().pop().unwrap();
    assert_eq!(
        sent["contents"].as_array().unwrap().len(),
        1,
        "only the newest turn"
    );
    assert_eq!(sent["contents"][0]["parts"][0]["text"], "hi");
    let err = of_type(&evs, "error");
    let why = err[0]["message"].as_str().unwrap();
    assert!(
        why.contains("32 MiB") && why.contains("start a new chat"),
        "{evs:?}"
    );
    assert_eq!(
        us.messages(&chat).await.unwrap().unwrap().len(),
        9,
        "the person's message was saved, the reply was not"
    );

    // At the cap on chats, no new one.
    let have = us.conversations().await.unwrap().len() as i64;
    for i in have..MAX_CHATS_PER_USER {
        us.create_conversation(&format!("c{i}")).await.unwrap();
    }
    let (status, v) = quinn.post(&a.base, "/api/chats", &json!({})).await;
    assert_eq!(status, 409, "{v}");
    let msg = v["message"].as_str().unwrap();
    assert!(
        msg.contains("500 chats") && msg.contains("delete old chats"),
        "{msg}"
    );
    a.stop().await;
}
