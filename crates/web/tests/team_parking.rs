//! The team gateway's calls parked for a client's input (clients on 2026-07-28) are
//! bounded per user, not only per instance: member A, whose servers (a real
//! server-everything over Streamable HTTP, one server entry per call) ask for input and
//! whose client never answers, parks calls until A's own limit
//! (`switchboard_gateway::MAX_PARKED_PER_USER`), and the next call is refused with an
//! error saying it is A's own limit, how many wait, and to answer or cancel them; member
//! B's elicitation still reaches B (an `InputRequiredResult`, not declined). Answering
//! one of A's parked calls frees its place. On SQLite with one instance (the instance's
//! own count), and on PostgreSQL with two instances, A's calls alternating between them
//! (each instance holds fewer than the limit: the bound is counted in the store).
//!
//! The instance's connection cache is shared the same way: a member with more servers
//! than their share of it (`CacheLimits::per_user`) closes only their own least
//! recently used connections, never the one another member's parked call waits on.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_gateway::MAX_PARKED_PER_USER;
use switchboard_store::{ServerRecord, Store, Transport, UserId};
use switchboard_testkit::{EverythingMode, spawn_everything};
use team_support::{Db, Instance, InstanceOptions};

on_both!(one_member_at_their_parking_limit_leaves_the_others_theirs);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_members_many_servers_leave_anothers_connection_open() {
    switchboard_testkit::ensure_peers();
    let db = Db::sqlite();
    let opts = InstanceOptions {
        cache: switchboard_web::CacheLimits {
            max_entries: 16,
            idle: Duration::from_secs(600),
        },
        ..Default::default()
    };
    let app = Instance::start(&db, opts).await;
    let store = db.store().await;
    let everything = spawn_everything(EverythingMode::StreamableHttp).await;
    let resource = format!("{}/mcp", app.origin());
    let (_, a) = member(&store, "a@example.com", 20, &everything.url, &resource).await;
    let (_, b) = member(&store, "b@example.com", 1, &everything.url, &resource).await;
    // B's call waits for B's answer on B's connection.
    let v = call(&app.base, &b, &format!("s0__{ELICIT}"), None).await;
    let (state, key) = asked(&v).unwrap_or_else(|| panic!("B's call parked: {v}"));
    // A lists: the gateway connects all 20 of A's servers, more than the cache holds.
    let (status, _, listed) = team_support::mcp_request(
        &app.base,
        &a,
        reqwest::Method::POST,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    assert_eq!(status, 200, "{listed}");
    // B's answer still reaches B's server, on the connection it asked on.
    let answer = json!({ key.as_str(): {"action": "decline"} });
    let v = call(
        &app.base,
        &b,
        &format!("s0__{ELICIT}"),
        Some((&state, answer)),
    )
    .await;
    assert_eq!(
        v["result"]["resultType"], "complete",
        "B's parked call survived A's servers: {v}"
    );
    app.stop().await;
}

const ELICIT: &str = "trigger-elicitation-request";

/// A member with `servers` entries named `s0`, `s1`, … all on `url`, and a gateway
/// access token for `resource`.
async fn member(
    store: &Store,
    email: &str,
    servers: usize,
    url: &str,
    resource: &str,
) -> (UserId, String) {
    let (id, cookie) = team_support::sign_in(store, email, false).await;
    for i in 0..servers {
        store
            .for_user(&id)
            .put_server(&ServerRecord {
                name: format!("s{i}"),
                url: url.into(),
                transport: Transport::Http,
                headers: Default::default(),
                enabled: true,
            })
            .await
            .unwrap();
    }
    let client = team_support::gateway_client(store, "http://127.0.0.1:9/cb").await;
    let (access, _) =
        team_support::gateway_tokens(store, &cookie, &client, resource, Duration::from_secs(600))
            .await;
    (id, access)
}

/// A `tools/call` of a client on 2026-07-28 that declares elicitation, straight over
/// HTTP; `retry` is `(requestState, inputResponses)`. The JSON-RPC answer (the last
/// message of an event stream).
async fn call(base: &str, token: &str, tool: &str, retry: Option<(&str, Value)>) -> Value {
    let mut params = json!({
        "name": tool,
        "arguments": {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "never-answers", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        },
    });
    if let Some((state, responses)) = retry {
        params["requestState"] = json!(state);
        params["inputResponses"] = responses;
    }
    let r = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", tool)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}))
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert!(status.is_success(), "{status}: {text}");
    let last = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .rfind(|d| d.contains("\"id\""))
        .unwrap_or(text.trim());
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The `requestState` of an answer that asks for an elicitation, and the key the
/// elicitation is asked under.
fn asked(v: &Value) -> Option<(String, String)> {
    let r = &v["result"];
    let key = r["inputRequests"]
        .as_object()?
        .iter()
        .find(|(_, q)| q["method"] == "elicitation/create")?
        .0
        .clone();
    let state = r["requestState"].as_str()?.to_owned();
    (r["resultType"] == "input_required").then_some((state, key))
}

async fn one_member_at_their_parking_limit_leaves_the_others_theirs(db: Db) {
    switchboard_testkit::ensure_peers();
    let n = if db.is_postgres() { 2 } else { 1 };
    let origin = format!("http://127.0.0.1:{}", switchboard_testkit::free_port());
    let mut apps = Vec::new();
    for _ in 0..n {
        let opts = InstanceOptions {
            public_origin: Some(origin.clone()),
            ..Default::default()
        };
        apps.push(Instance::start(&db, opts).await);
    }
    let store = db.store().await;
    let everything = spawn_everything(EverythingMode::StreamableHttp).await;
    let resource = format!("{origin}/mcp");
    let limit = MAX_PARKED_PER_USER;
    let (_, a) = member(
        &store,
        "a@example.com",
        limit + 2,
        &everything.url,
        &resource,
    )
    .await;
    let (_, b) = member(&store, "b@example.com", 1, &everything.url, &resource).await;
    let base = |i: usize| apps[i % n].base.clone();

    // A's client never answers: each call parks, each on its own server (two calls of
    // one user on one server at once cannot be told apart, so the second is declined).
    let mut states = Vec::new();
    for i in 0..limit {
        let v = call(&base(i), &a, &format!("s{i}__{ELICIT}"), None).await;
        let parked = asked(&v).unwrap_or_else(|| panic!("call {i} of A parked: {v}"));
        states.push(parked);
    }
    // One more: refused, and A is told it is A's own limit and what to do.
    let v = call(&base(limit), &a, &format!("s{limit}__{ELICIT}"), None).await;
    let message = v["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("A's call beyond its own limit is refused with an error: {v}"));
    assert!(message.contains(&format!("{limit} calls")), "{message}");
    assert!(message.contains("your own limit"), "{message}");
    assert!(message.contains("answer or cancel"), "{message}");

    // B's elicitation still reaches B, on every instance.
    for i in 0..n {
        let v = call(&base(i), &b, &format!("s0__{ELICIT}"), None).await;
        assert!(asked(&v).is_some(), "B's elicitation reached B: {v}");
    }

    // A answers one of its calls (declines it): that call ends, and its place is free.
    let (state, key) = &states[0];
    let answer = json!({ key.as_str(): {"action": "decline"} });
    let v = call(
        &base(0),
        &a,
        &format!("s0__{ELICIT}"),
        Some((state, answer)),
    )
    .await;
    assert_eq!(v["result"]["resultType"], "complete", "{v}");
    let v = call(&base(1), &a, &format!("s{}__{ELICIT}", limit + 1), None).await;
    assert!(asked(&v).is_some(), "a freed place takes a new call: {v}");

    for app in apps {
        app.stop().await;
    }
}
