//! Team workflows end to end, on SQLite and on PostgreSQL, with two instances on one
//! database: a workflow saved on one instance is listed, read and validated on the other;
//! a run started on one (calling the demo server's `echo` through the user's own server
//! and through an enabled catalog server) shows its live events there and its saved log
//! on the other; a cancel asked on the other stops it; an invalid workflow is refused
//! with its problems; the user's saved OAuth token goes to the user's server; `http`
//! nodes and one-off MCP URLs go through the team's URL guard (nothing reaches a private
//! address under the strict policy); and the raw database holds no workflow source
//! secret or run result in clear.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchboard_net::UrlPolicy;
use switchboard_store::{CatalogLaunch, CatalogServer, Secret, ServerRecord, Transport};
use switchboard_testkit::RecordingListener;
use team_support::{Browser, Db, Instance, InstanceOptions, demo_http, sign_in};

on_both!(
    a_workflow_saved_and_run_on_one_instance_shows_its_log_on_another,
    workflow_requests_go_through_the_team_url_guard,
    command_nodes_run_with_the_users_model_key,
    stdio_catalog_servers_run_only_where_allowed,
);

const SOURCE_SECRET: &str = "wf-source-secret-a81f3c";
const RESULT_SECRET: &str = "wf-result-secret-77d0e2";

fn echo_workflow(server: &str, message: &str) -> String {
    format!(
        "name: echo\nnodes:\n  - id: greet\n    type: variable\n    name: who\n    value: \"{message}\"\n  - id: call\n    type: mcp\n    server: \"{server}\"\n    tool: echo\n    args: '{{\"message\": \"{{{{who}}}}\"}}'\n    saveTo: out\n"
    )
}

fn server(name: &str, url: &str) -> ServerRecord {
    ServerRecord {
        name: name.into(),
        url: url.into(),
        transport: Transport::Http,
        headers: BTreeMap::new(),
        enabled: true,
    }
}

/// Polls the run's events on `base` until it is no longer running; the events seen and
/// the last answer.
async fn wait_for_end(browser: &Browser, base: &str, id: &str) -> (Vec<Value>, Value) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut events = Vec::new();
    let mut after = 0;
    loop {
        let (status, v) = browser
            .get(
                base,
                &format!("/api/workflow-runs/{id}/events?after={after}"),
            )
            .await;
        assert_eq!(status, 200, "{v}");
        events.extend(v["events"].as_array().unwrap().iter().cloned());
        after = v["next"].as_u64().unwrap() as usize;
        if v["run"]["state"] != "running" && !v["live"].as_bool().unwrap() {
            return (events, v);
        }
        assert!(Instant::now() < deadline, "the run did not end: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn raw_bytes(db: &Db) -> Vec<u8> {
    match db {
        Db::Postgres(cluster, url) => cluster.dump(url.rsplit('/').next().unwrap()),
        Db::Sqlite(dir, _) => ["", "-wal", "-shm"]
            .iter()
            .filter_map(|s| std::fs::read(dir.path().join(format!("team.db{s}"))).ok())
            .flatten()
            .collect(),
    }
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

async fn a_workflow_saved_and_run_on_one_instance_shows_its_log_on_another(db: Db) {
    let origin = format!("http://127.0.0.1:{}", switchboard_testkit::free_port());
    let opts = || InstanceOptions {
        public_origin: Some(origin.clone()),
        ..Default::default()
    };
    let a = Instance::start(&db, opts()).await;
    let b = Instance::start(&db, opts()).await;
    let store = db.store().await;
    let demo = demo_http().await;
    let trap = RecordingListener::start().await;
    let (alice_id, cookie) = sign_in(&store, "alice@example.com", false).await;
    let us = store.for_user(&alice_id);
    us.put_server(&server("demo", &demo)).await.unwrap();
    // A server of hers that records what reaches it, with her saved OAuth token.
    us.put_server(&server("tokened", &trap.url("/mcp")))
        .await
        .unwrap();
    us.put_oauth_tokens(
        "tokened",
        &Secret::new(
            json!({"accessToken": "alice-wf-token-5c2e", "tokenType": "Bearer"}).to_string(),
        ),
        None,
    )
    .await
    .unwrap();
    // A catalog server (the demo) she enabled.
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
    let alice = Browser::new(a.origin(), Some(&cookie));

    // Saved on A (with a secret in its source), listed and read on B.
    let source = format!(
        "{}  - id: note\n    type: set\n    name: key\n    value: \"{SOURCE_SECRET}\"\n",
        echo_workflow("demo", RESULT_SECRET)
    );
    let (status, v) = alice
        .put(&a.base, "/api/workflows/echo", &json!({"source": source}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["problems"], json!([]), "{v}");
    let (status, v) = alice.get(&b.base, "/api/workflows").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["workflows"][0]["name"], "echo", "{v}");
    assert!(
        !v.to_string().contains(SOURCE_SECRET),
        "a list has no source"
    );
    let (_, v) = alice.get(&b.base, "/api/workflows/echo").await;
    assert_eq!(v["source"], source);
    // Validation names problems with their lines (an unknown server, a missing tool).
    let bad = "name: bad\nnodes:\n  - id: x\n    type: mcp\n    server: nope\n  - id: y\n    type: workflow\n    path: /etc/passwd\n";
    let (status, v) = alice
        .post(&b.base, "/api/validate-workflow", &json!({"source": bad}))
        .await;
    assert_eq!(status, 200, "{v}");
    let problems = v["problems"].as_array().unwrap();
    assert!(problems.iter().any(|p| p["line"].as_u64().is_some()), "{v}");
    assert!(v.to_string().contains("nope"), "{v}");
    assert!(v.to_string().contains("team mode"), "{v}");
    let (status, v) = alice
        .post(
            &b.base,
            "/api/validate-workflow",
            &json!({"source": echo_workflow("catalog:shared", "x")}),
        )
        .await;
    assert_eq!((status, &v["problems"]), (200, &json!([])), "{v}");
    // An invalid workflow is saved but not run: 422 with its problems.
    alice
        .put(&a.base, "/api/workflows/bad", &json!({"source": bad}))
        .await;
    let (status, v) = alice
        .post(&a.base, "/api/workflows/bad/run", &json!({}))
        .await;
    assert_eq!(status, 422, "{v}");
    assert!(v["problems"].as_array().unwrap().len() >= 2, "{v}");

    // Run on A: live events there, the saved log on B.
    let (status, v) = alice
        .post(&a.base, "/api/workflows/echo/run", &json!({}))
        .await;
    assert_eq!(status, 202, "{v}");
    let id = v["run"]["id"].as_str().unwrap().to_owned();
    let (events, end) = wait_for_end(&alice, &a.base, &id).await;
    assert_eq!(end["run"]["state"], "ok", "{end}");
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "node-end" && e["node"] == "call" && e["status"] == "ok"),
        "{events:?}"
    );
    assert!(events.iter().any(|e| e["type"] == "done"), "{events:?}");
    let (status, v) = alice
        .get(&b.base, &format!("/api/workflow-runs/{id}"))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["run"]["state"], "ok");
    let out = v["log"]["variables"]["out"].to_string();
    assert!(out.contains(&format!("Echo: {RESULT_SECRET}")), "{v}");
    assert_eq!(v["log"]["workflowPath"], "", "no server path in the log");
    let (_, v) = alice.get(&b.base, "/api/workflow-runs?workflow=echo").await;
    assert_eq!(v["runs"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["runs"][0]["id"], id.as_str());
    // B has no live events of A's run, only its saved state.
    let (_, v) = alice
        .get(&b.base, &format!("/api/workflow-runs/{id}/events"))
        .await;
    assert_eq!(
        (v["live"].as_bool(), v["events"].as_array().map(Vec::len)),
        (Some(false), Some(0)),
        "{v}"
    );
    assert_eq!(v["log"]["status"], "ok", "{v}");

    // Through the catalog server, named `catalog:shared`.
    alice
        .put(
            &a.base,
            "/api/workflows/via-catalog",
            &json!({"source": echo_workflow("catalog:shared", "from the catalog")}),
        )
        .await;
    let (status, v) = alice
        .post(&b.base, "/api/workflows/via-catalog/run", &json!({}))
        .await;
    assert_eq!(status, 202, "{v}");
    let cid = v["run"]["id"].as_str().unwrap().to_owned();
    let (_, end) = wait_for_end(&alice, &b.base, &cid).await;
    assert_eq!(end["run"]["state"], "ok", "{end}");
    assert!(
        end["log"]["variables"]["out"]
            .to_string()
            .contains("Echo: from the catalog"),
        "{end}"
    );

    // Her saved token goes to her server (the run fails: the trap speaks no MCP).
    alice
        .put(
            &a.base,
            "/api/workflows/tokened",
            &json!({"source": echo_workflow("tokened", "x")}),
        )
        .await;
    let (_, v) = alice
        .post(&a.base, "/api/workflows/tokened/run", &json!({}))
        .await;
    let tid = v["run"]["id"].as_str().unwrap().to_owned();
    let (_, end) = wait_for_end(&alice, &a.base, &tid).await;
    assert_eq!(end["run"]["state"], "failed", "{end}");
    assert!(
        trap.received().contains("Bearer alice-wf-token-5c2e"),
        "{}",
        trap.received()
    );

    // A long run started on A, cancelled through B.
    let slow = "name: slow\nnodes:\n  - id: wait\n    type: sleep\n    duration: \"30000\"\n";
    alice
        .put(&a.base, "/api/workflows/slow", &json!({"source": slow}))
        .await;
    let (_, v) = alice
        .post(&a.base, "/api/workflows/slow/run", &json!({}))
        .await;
    let sid = v["run"]["id"].as_str().unwrap().to_owned();
    let (_, v) = alice
        .get(&b.base, &format!("/api/workflow-runs/{sid}"))
        .await;
    assert_eq!(v["run"]["state"], "running", "B sees it running: {v}");
    let started = Instant::now();
    let (status, v) = alice
        .post(
            &b.base,
            &format!("/api/workflow-runs/{sid}/cancel"),
            &json!({}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let (_, end) = wait_for_end(&alice, &a.base, &sid).await;
    assert_eq!(end["run"]["state"], "cancelled", "{end}");
    assert!(started.elapsed() < Duration::from_secs(20));
    let (status, _) = alice
        .post(
            &b.base,
            &format!("/api/workflow-runs/{sid}/cancel"),
            &json!({}),
        )
        .await;
    assert_eq!(status, 409, "an ended run");

    // Deleting the workflow drops its runs.
    let (status, _) = alice.delete(&b.base, "/api/workflows/echo").await;
    assert_eq!(status, 200);
    let (status, _) = alice
        .get(&a.base, &format!("/api/workflow-runs/{id}"))
        .await;
    assert_eq!(status, 404);

    // Nothing of the source's secret or the run's results is in the database in clear;
    // what is stored in clear (her email, the workflow's name) is.
    let raw = raw_bytes(&db);
    assert!(contains(&raw, "alice@example.com"));
    assert!(contains(&raw, "via-catalog"));
    for secret in [
        SOURCE_SECRET,
        RESULT_SECRET,
        "from the catalog",
        "alice-wf-token-5c2e",
    ] {
        assert!(
            !contains(&raw, secret),
            "`{secret}` is in the database in clear"
        );
    }
    a.stop().await;
    b.stop().await;
    let raw = raw_bytes(&db);
    assert!(!contains(&raw, "from the catalog"), "after stopping");
}

async fn workflow_requests_go_through_the_team_url_guard(db: Db) {
    let app = Instance::start(
        &db,
        InstanceOptions {
            url_policy: Some(UrlPolicy::Strict),
            ..Default::default()
        },
    )
    .await;
    let store = db.store().await;
    let trap = RecordingListener::start().await;
    let (_, cookie) = sign_in(&store, "alice@example.com", false).await;
    let alice = Browser::new(app.origin(), Some(&cookie));
    for (name, node) in [
        (
            "http-private",
            format!("    type: http\n    url: \"{}\"\n", trap.url("/steal")),
        ),
        (
            "http-metadata",
            "    type: http\n    url: \"https://169.254.169.254/latest/meta-data\"\n".to_owned(),
        ),
        (
            "mcp-private",
            format!(
                "    type: mcp\n    url: \"{}\"\n    tool: echo\n",
                trap.url("/mcp")
            ),
        ),
    ] {
        let source = format!("name: {name}\nnodes:\n  - id: reach\n{node}");
        let (status, v) = alice
            .put(
                &app.base,
                &format!("/api/workflows/{name}"),
                &json!({"source": source}),
            )
            .await;
        assert_eq!((status, &v["problems"]), (200, &json!([])), "{v}");
        let (status, v) = alice
            .post(&app.base, &format!("/api/workflows/{name}/run"), &json!({}))
            .await;
        assert_eq!(status, 202, "{v}");
        let id = v["run"]["id"].as_str().unwrap().to_owned();
        let (_, end) = wait_for_end(&alice, &app.base, &id).await;
        assert_eq!(end["run"]["state"], "failed", "{name}: {end}");
        assert_eq!(end["log"]["failure"]["node"], "reach", "{name}: {end}");
    }
    assert_eq!(trap.connections(), 0, "{}", trap.received());
    app.stop().await;
}

/// A `command` node asks the team's model with the caller's own key (the fake Gemini
/// accepts only that key); without a key the run is refused before it starts.
async fn command_nodes_run_with_the_users_model_key(db: Db) {
    const KEY: &str = "alice-wf-model-key-9e41";
    let gemini = switchboard_model_fakes::gemini::FakeGemini::start_with(
        switchboard_model_fakes::gemini::FakeOptions {
            api_key: KEY.into(),
            ..Default::default()
        },
        vec![switchboard_model_fakes::FakeTurn::text(
            "The model says hello.",
        )],
    )
    .await;
    let app = Instance::start(
        &db,
        InstanceOptions {
            model: Some(team_support::gemini_at(&gemini.base_url)),
            ..Default::default()
        },
    )
    .await;
    let store = db.store().await;
    let (alice_id, cookie) = sign_in(&store, "alice@example.com", false).await;
    let alice = Browser::new(app.origin(), Some(&cookie));
    let source = "name: ask\nnodes:\n  - id: ask\n    type: command\n    prompt: Say hello\n    saveTo: answer\n";
    alice
        .put(&app.base, "/api/workflows/ask", &json!({"source": source}))
        .await;
    let (status, v) = alice
        .post(&app.base, "/api/workflows/ask/run", &json!({}))
        .await;
    assert_eq!(status, 503, "no key yet: {v}");
    assert!(v["message"].as_str().unwrap().contains("model key"), "{v}");
    store
        .for_user(&alice_id)
        .put_model_key("gemini", &Secret::new(KEY))
        .await
        .unwrap();
    let (status, v) = alice
        .post(&app.base, "/api/workflows/ask/run", &json!({}))
        .await;
    assert_eq!(status, 202, "{v}");
    let id = v["run"]["id"].as_str().unwrap().to_owned();
    let (_, end) = wait_for_end(&alice, &app.base, &id).await;
    assert_eq!(end["run"]["state"], "ok", "{end}");
    assert_eq!(
        end["log"]["variables"]["answer"], "The model says hello.",
        "{end}"
    );
    assert_eq!(gemini.remaining(), 0);
    assert!(
        !end.to_string().contains(KEY),
        "the key never reaches the page"
    );
    app.stop().await;
}

/// A stdio catalog server (the demo server's binary, the admin's argv and env) is usable
/// by a workflow only on an instance started with `--allow-catalog-stdio`; elsewhere the
/// workflow does not validate (no such server) and is not run.
async fn stdio_catalog_servers_run_only_where_allowed(db: Db) {
    let origin = format!("http://127.0.0.1:{}", switchboard_testkit::free_port());
    let runner = Instance::start(
        &db,
        InstanceOptions {
            public_origin: Some(origin.clone()),
            allow_catalog_stdio: true,
            ..Default::default()
        },
    )
    .await;
    let plain = Instance::start(
        &db,
        InstanceOptions {
            public_origin: Some(origin),
            ..Default::default()
        },
    )
    .await;
    let store = db.store().await;
    let (admin_id, _) = sign_in(&store, "admin@example.com", true).await;
    store
        .publish_catalog_server(
            &admin_id,
            &CatalogServer {
                name: "local".into(),
                description: "Runs on the server".into(),
                launch: CatalogLaunch::Stdio {
                    command: switchboard_testkit::demo_server_bin().display().to_string(),
                    args: vec!["stdio".into()],
                    cwd: None,
                    env: BTreeMap::new(),
                },
            },
        )
        .await
        .unwrap();
    let (alice_id, cookie) = sign_in(&store, "alice@example.com", false).await;
    assert!(
        store
            .for_user(&alice_id)
            .enable_catalog_server("local")
            .await
            .unwrap()
    );
    let alice = Browser::new(runner.origin(), Some(&cookie));
    alice
        .put(
            &runner.base,
            "/api/workflows/local",
            &json!({"source": echo_workflow("catalog:local", "over stdio")}),
        )
        .await;
    let (status, v) = alice
        .post(&plain.base, "/api/workflows/local/run", &json!({}))
        .await;
    assert_eq!(status, 422, "not on an instance without the flag: {v}");
    assert!(v.to_string().contains("catalog:local"), "{v}");
    let (status, v) = alice
        .post(&runner.base, "/api/workflows/local/run", &json!({}))
        .await;
    assert_eq!(status, 202, "{v}");
    let id = v["run"]["id"].as_str().unwrap().to_owned();
    let (_, end) = wait_for_end(&alice, &runner.base, &id).await;
    assert_eq!(end["run"]["state"], "ok", "{end}");
    assert!(
        end["log"]["variables"]["out"]
            .to_string()
            .contains("Echo: over stdio"),
        "{end}"
    );
    runner.stop().await;
    plain.stop().await;
}
