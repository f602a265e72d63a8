//! Team chat's rules on two instances of one database (SQLite and PostgreSQL), with the
//! fake Gemini and the demo server: the user's own key wins over the team key (and no
//! answer ever holds either); a chat's server switch keeps that server's tools from the
//! model; a confirmation declined through the other instance goes back to the model as
//! a refusal; a cancel sent to the other instance stops a turn waiting for an answer;
//! a second send while a turn runs is refused, on either instance (the turn lease in the store); a user without an admin flag cannot set
//! the team key; an enabled team-catalog server's tools are offered (as `catalog:NAME`)
//! and called like the user's own, and a chat switch keeps them out.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use reqwest::Method;
use serde_json::{Value, json};
use switchboard_model_fakes::FakeTurn;
use switchboard_model_fakes::gemini::{
    FakeGemini, FakeOptions, declared_function_names, last_function_responses,
};
use team_support::{Browser, Db, Instance, InstanceOptions, demo_http, gemini_at, sign_in};

on_both!(
    chat_rules_hold_across_instances,
    enabled_catalog_servers_take_part_in_chats
);

const MODEL_KEY: &str = "user-gemini-key-19be4f";
const TEAM_KEY: &str = "team-gemini-key-wrong-77d0";

/// Reads a send's event stream to its end.
async fn events(b: &Browser, base: &str, chat: &str, message: &str) -> Vec<Value> {
    let resp = b
        .request(Method::POST, base, &format!("/api/chats/{chat}/send"))
        .json(&json!({"message": message}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    parse_events(&resp.text().await.unwrap())
}

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

async fn chat_rules_hold_across_instances(db: Db) {
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
    let (_, admin_cookie) = sign_in(&store, "admin@example.com", true).await;
    let (_, cookie) = sign_in(&store, "carol@example.com", false).await;
    let admin = Browser::new(a.origin(), Some(&admin_cookie));
    let carol = Browser::new(a.origin(), Some(&cookie));
    let mut seen = String::new();

    // Only an admin sets the team key; the user's own key wins over it.
    let (status, v) = carol
        .put(&a.base, "/api/admin/model-key", &json!({"key": "k"}))
        .await;
    assert_eq!(status, 403, "{v}");
    let (status, v) = admin
        .put(&a.base, "/api/admin/model-key", &json!({"key": TEAM_KEY}))
        .await;
    assert_eq!(status, 200, "{v}");
    seen.push_str(&v.to_string());
    let demo = demo_http().await;
    let (status, _) = carol
        .post(
            &a.base,
            "/api/servers",
            &json!({"name": "demo", "url": demo}),
        )
        .await;
    assert_eq!(status, 201);
    let (_, v) = carol.post(&a.base, "/api/chats", &json!({})).await;
    let chat = v["chat"]["id"].as_str().unwrap().to_owned();
    assert_eq!(v["chat"]["title"], "New chat");

    // With the team key (which the fake refuses), the turn fails at the model.
    gemini.push(FakeTurn::text("unreachable"));
    let evs = events(&carol, &a.base, &chat, "hello").await;
    let err = of_type(&evs, "error");
    assert_eq!(err.len(), 1, "{evs:?}");
    seen.push_str(&serde_json::to_string(&evs).unwrap());
    // Her own key wins.
    let (status, v) = carol
        .put(&b.base, "/api/model-key", &json!({"key": MODEL_KEY}))
        .await;
    assert_eq!(status, 200, "{v}");
    let (_, v) = carol.get(&a.base, "/api/model-key").await;
    assert_eq!(
        (&v["own"]["set"], &v["team"]["set"]),
        (&json!(true), &json!(true))
    );
    seen.push_str(&v.to_string());
    let evs = events(&carol, &b.base, &chat, "hello again").await;
    assert_eq!(of_type(&evs, "done")[0]["text"], "unreachable", "{evs:?}");
    seen.push_str(&serde_json::to_string(&evs).unwrap());

    // Switched off in this chat: the model is not offered the demo server's tools.
    let (status, v) = carol
        .put(
            &b.base,
            &format!("/api/chats/{chat}/servers"),
            &json!({"servers": {"demo": false}}),
        )
        .await;
    assert_eq!(
        (status, &v["chat"]["servers"]),
        (200, &json!({"demo": false}))
    );
    gemini.push(FakeTurn::text("no tools"));
    events(&carol, &a.base, &chat, "tools?").await;
    let last = gemini.requests().pop().unwrap();
    assert!(declared_function_names(&last).is_empty(), "{last}");
    carol
        .put(
            &a.base,
            &format!("/api/chats/{chat}/servers"),
            &json!({"servers": {}}),
        )
        .await;

    // A confirmation asked on A, declined through B: the model hears the refusal.
    gemini.push(FakeTurn::call("mcp_demo_echo", json!({"message": "x"})));
    gemini.push(FakeTurn::text("understood"));
    let resp = carol
        .request(Method::POST, &a.base, &format!("/api/chats/{chat}/send"))
        .json(&json!({"message": "echo x"}))
        .send()
        .await
        .unwrap();
    let ask = wait_for_confirmation(&carol, &b.base, &chat).await;
    // A second send while the turn waits is refused.
    let (status, v) = carol
        .post(
            &a.base,
            &format!("/api/chats/{chat}/send"),
            &json!({"message": "again"}),
        )
        .await;
    assert_eq!(status, 409, "{v}");
    // ...on the other instance too: the turn's lease is in the store.
    let (status, v) = carol
        .post(
            &b.base,
            &format!("/api/chats/{chat}/send"),
            &json!({"message": "again, elsewhere"}),
        )
        .await;
    assert_eq!(status, 409, "{v}");
    assert!(v.to_string().contains("another instance"), "{v}");
    let (status, _) = carol
        .post(
            &b.base,
            &format!("/api/chats/{chat}/confirm"),
            &json!({"id": ask, "decision": "cancel"}),
        )
        .await;
    assert_eq!(status, 200);
    let evs = parse_events(&resp.text().await.unwrap());
    assert_eq!(of_type(&evs, "done")[0]["text"], "understood", "{evs:?}");
    assert!(of_type(&evs, "tool-start").is_empty(), "{evs:?}");
    let last = gemini.requests().pop().unwrap();
    let responses = last_function_responses(&last);
    assert!(
        responses[0].to_string().contains("declined"),
        "{responses:?}"
    );

    // A cancel sent to B stops the turn waiting on A.
    gemini.push(FakeTurn::call("mcp_demo_echo", json!({"message": "y"})));
    let resp = carol
        .request(Method::POST, &a.base, &format!("/api/chats/{chat}/send"))
        .json(&json!({"message": "echo y"}))
        .send()
        .await
        .unwrap();
    wait_for_confirmation(&carol, &b.base, &chat).await;
    let (status, _) = carol
        .post(&b.base, &format!("/api/chats/{chat}/cancel"), &json!({}))
        .await;
    assert_eq!(status, 200);
    let evs = parse_events(&resp.text().await.unwrap());
    let err = of_type(&evs, "error");
    assert!(
        err[0]["message"].as_str().unwrap().contains("cancelled"),
        "{evs:?}"
    );
    let (_, v) = carol.get(&b.base, &format!("/api/chats/{chat}")).await;
    assert_eq!(v["confirmations"], json!([]), "{v}");
    let last_two: Vec<&str> = v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .take(2)
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        last_two,
        ["model", "user"],
        "the call and the message are saved"
    );
    seen.push_str(&v.to_string());

    // Rename, list, delete.
    let (status, _) = carol
        .put(
            &b.base,
            &format!("/api/chats/{chat}"),
            &json!({"title": "Renamed"}),
        )
        .await;
    assert_eq!(status, 200);
    let (_, v) = carol.get(&a.base, "/api/chats").await;
    assert_eq!(v["chats"][0]["title"], "Renamed");
    assert_eq!(
        carol.delete(&a.base, &format!("/api/chats/{chat}")).await.0,
        200
    );
    assert_eq!(
        carol.get(&b.base, &format!("/api/chats/{chat}")).await.0,
        404
    );

    for key in [MODEL_KEY, TEAM_KEY] {
        assert!(!seen.contains(key), "an answer showed `{key}`");
    }
    a.stop().await;
    b.stop().await;
}

/// The id of the first confirmation waiting in `chat`, read through `base`.
async fn wait_for_confirmation(b: &Browser, base: &str, chat: &str) -> String {
    for _ in 0..200 {
        let (_, v) = b.get(base, &format!("/api/chats/{chat}")).await;
        if let Some(id) = v["confirmations"][0]["id"].as_str() {
            return id.to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no confirmation appeared");
}

/// A catalog server the user enabled takes part in a chat under `catalog:NAME` (its
/// tools offered, a call confirmed and answered by it); one not enabled, or switched off
/// in the chat, is not offered.
async fn enabled_catalog_servers_take_part_in_chats(db: Db) {
    let gemini = FakeGemini::start_with(
        FakeOptions {
            api_key: MODEL_KEY.into(),
            ..FakeOptions::default()
        },
        vec![],
    )
    .await;
    let a = Instance::start(
        &db,
        InstanceOptions {
            model: Some(gemini_at(&gemini.base_url)),
            ..Default::default()
        },
    )
    .await;
    let store = db.store().await;
    let (_, admin_cookie) = sign_in(&store, "admin@example.com", true).await;
    let (_, cookie) = sign_in(&store, "dana@example.com", false).await;
    let admin = Browser::new(a.origin(), Some(&admin_cookie));
    let dana = Browser::new(a.origin(), Some(&cookie));
    let demo = demo_http().await;
    let (status, v) = admin
        .post(
            &a.base,
            "/api/admin/catalog",
            &json!({"name": "shared", "description": "Demo for all", "url": demo}),
        )
        .await;
    assert_eq!(status, 201, "{v}");
    let (status, v) = dana
        .put(&a.base, "/api/model-key", &json!({"key": MODEL_KEY}))
        .await;
    assert_eq!(status, 200, "{v}");
    let (_, v) = dana.post(&a.base, "/api/chats", &json!({})).await;
    let chat = v["chat"]["id"].as_str().unwrap().to_owned();

    // Not enabled: nothing offered.
    gemini.push(FakeTurn::text("none yet"));
    events(&dana, &a.base, &chat, "tools?").await;
    let last = gemini.requests().pop().unwrap();
    assert!(declared_function_names(&last).is_empty(), "{last}");

    // Enabled: its tools are offered and a call reaches it.
    let (status, v) = dana
        .post(&a.base, "/api/catalog/shared/enable", &json!({}))
        .await;
    assert_eq!(status, 200, "{v}");
    gemini.push(FakeTurn::text("listed"));
    events(&dana, &a.base, &chat, "tools now?").await;
    let last = gemini.requests().pop().unwrap();
    let names = declared_function_names(&last);
    let echo = names
        .iter()
        .find(|n| n.contains("shared") && n.ends_with("echo"))
        .unwrap_or_else(|| panic!("no echo of the catalog server in {names:?}"))
        .to_string();
    gemini.push(FakeTurn::call(
        &echo,
        json!({"message": "from the catalog"}),
    ));
    gemini.push(FakeTurn::text("done"));
    let resp = dana
        .request(Method::POST, &a.base, &format!("/api/chats/{chat}/send"))
        .json(&json!({"message": "echo it"}))
        .send()
        .await
        .unwrap();
    let ask = wait_for_confirmation(&dana, &a.base, &chat).await;
    let (status, _) = dana
        .post(
            &a.base,
            &format!("/api/chats/{chat}/confirm"),
            &json!({"id": ask, "decision": "once"}),
        )
        .await;
    assert_eq!(status, 200);
    let evs = parse_events(&resp.text().await.unwrap());
    let ends = of_type(&evs, "tool-end");
    assert_eq!(ends.len(), 1, "{evs:?}");
    assert!(
        ends[0].to_string().contains("Echo: from the catalog"),
        "{evs:?}"
    );
    assert!(ends[0].to_string().contains("catalog:shared"), "{evs:?}");

    // Switched off in this chat: not offered again.
    let (status, v) = dana
        .put(
            &a.base,
            &format!("/api/chats/{chat}/servers"),
            &json!({"servers": {"catalog:shared": false}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    gemini.push(FakeTurn::text("off"));
    events(&dana, &a.base, &chat, "and now?").await;
    let last = gemini.requests().pop().unwrap();
    assert!(declared_function_names(&last).is_empty(), "{last}");
    a.stop().await;
}
