//! Team mode's API on one instance, each scenario on SQLite and on PostgreSQL: the
//! session middleware (401, Host, Origin, Sec-Fetch-Site), sign-out, a user's servers
//! (add, masked list, edit keeping saved secrets only for their URL, remove), stdio
//! refused, Test through the URL guard, tools and calls on the demo server over
//! Streamable HTTP through the client cache (reuse, a changed record replaces the
//! connection, idle eviction, the cap), `/healthz` and `/readyz`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use switchboard_web::CacheLimits;
use team_support::{Browser, COOKIE, Db, Instance, InstanceOptions, demo_http, sign_in};

on_both!(
    no_session_is_a_401_and_foreign_origins_are_refused,
    sign_out_ends_this_session_or_all_of_them,
    servers_are_added_listed_masked_edited_and_removed,
    stdio_servers_are_refused_everywhere,
    test_connects_through_the_url_guard,
    tools_and_calls_go_through_the_cache,
    the_cache_evicts_idle_connections_and_keeps_to_its_cap,
    health_and_readiness,
);

async fn no_session_is_a_401_and_foreign_origins_are_refused(db: Db) {
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let store = db.store().await;
    let (_, cookie) = sign_in(&store, "alice@example.com", false).await;

    // No cookie, an unknown cookie: 401 JSON naming where to sign in.
    for c in [None, Some("not-a-session")] {
        let b = Browser::new(app.origin(), c);
        let (status, v) = b.get(&app.base, "/api/me").await;
        assert_eq!(status, 401, "{v}");
        assert_eq!(v["error"], "unauthorized");
        assert!(
            v["message"].as_str().unwrap().contains("/auth/login"),
            "{v}"
        );
    }

    let alice = Browser::new(app.origin(), Some(&cookie));
    let (status, v) = alice.get(&app.base, "/api/me").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v,
        json!({"email": "alice@example.com", "name": "alice", "admin": false})
    );

    // Another origin's page, even with the cookie: refused before anything runs.
    let evil = Browser::new("http://evil.example", Some(&cookie));
    let (status, v) = evil
        .post(
            &app.base,
            "/api/servers",
            &json!({"name": "x", "url": "http://127.0.0.1:9/mcp"}),
        )
        .await;
    assert_eq!(
        (status, v["error"].as_str()),
        (403, Some("bad_origin")),
        "{v}"
    );
    let (status, _) = evil.get(&app.base, "/api/servers").await;
    assert_eq!(status, 403);
    // A cross-site fetch without Origin (a GET), and a POST without Origin.
    let r = alice
        .http
        .get(format!("{}/api/servers", app.base))
        .header("Cookie", format!("{COOKIE}={cookie}"))
        .header("Sec-Fetch-Site", "cross-site");
    let (status, v) = alice.send(r).await;
    assert_eq!(
        (status, v["error"].as_str()),
        (403, Some("cross_origin")),
        "{v}"
    );
    let r = alice
        .http
        .post(format!("{}/auth/logout", app.base))
        .header("Cookie", format!("{COOKIE}={cookie}"));
    let (status, v) = alice.send(r).await;
    assert_eq!(
        (status, v["error"].as_str()),
        (403, Some("missing_origin")),
        "{v}"
    );
    // A name that is not the app's (DNS rebinding).
    let r = alice
        .request(Method::GET, &app.base, "/api/me")
        .header("Host", "rebound.example:80");
    let (status, v) = alice.send(r).await;
    assert_eq!(
        (status, v["error"].as_str()),
        (403, Some("bad_host")),
        "{v}"
    );
    // Still signed in: the refused POST to /auth/logout did nothing.
    assert_eq!(alice.get(&app.base, "/api/me").await.0, 200);
    // API answers are not cached.
    let r = alice
        .request(Method::GET, &app.base, "/api/me")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["cache-control"], "no-store");
    app.stop().await;
}

async fn sign_out_ends_this_session_or_all_of_them(db: Db) {
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let store = db.store().await;
    let (_, phone) = sign_in(&store, "alice@example.com", false).await;
    let (_, laptop) = sign_in(&store, "alice@example.com", false).await;
    let (_, tablet) = sign_in(&store, "alice@example.com", false).await;
    let (_, bob) = sign_in(&store, "bob@example.com", false).await;
    let b = |c: &str| Browser::new(app.origin(), Some(c));

    let r = b(&phone)
        .request(Method::POST, &app.base, "/auth/logout")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let set = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        set.starts_with(&format!("{COOKIE}=;")) && set.contains("Max-Age=0"),
        "{set}"
    );
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["ended"], 1);
    assert_eq!(b(&phone).get(&app.base, "/api/me").await.0, 401);
    assert_eq!(b(&laptop).get(&app.base, "/api/me").await.0, 200);

    let (status, v) = b(&laptop)
        .send(b(&laptop).request(Method::POST, &app.base, "/auth/logout?everywhere=1"))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["ended"].as_u64(), v["everywhere"].as_bool()),
        (Some(2), Some(true))
    );
    assert_eq!(b(&laptop).get(&app.base, "/api/me").await.0, 401);
    assert_eq!(b(&tablet).get(&app.base, "/api/me").await.0, 401);
    // Another user's session is not "everywhere".
    assert_eq!(b(&bob).get(&app.base, "/api/me").await.0, 200);
    app.stop().await;
}

async fn servers_are_added_listed_masked_edited_and_removed(db: Db) {
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let store = db.store().await;
    let (alice_id, cookie) = sign_in(&store, "alice@example.com", false).await;
    let alice = Browser::new(app.origin(), Some(&cookie));
    let demo = demo_http().await;

    let (status, v) = alice
        .post(
            &app.base,
            "/api/servers",
            &json!({"name": "demo", "url": demo, "headers": {"X-Api-Key": "sk-alice-secret"}}),
        )
        .await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["headers"]["X-Api-Key"], "<unchanged>");
    let (status, v) = alice
        .post(
            &app.base,
            "/api/servers",
            &json!({"name": "demo", "url": demo}),
        )
        .await;
    assert_eq!(
        (status, v["error"].as_str()),
        (409, Some("conflict")),
        "{v}"
    );
    for bad in [
        json!({"url": demo}),
        json!({"name": "demo2"}),
        json!({"name": "has space", "url": demo}),
        json!({"name": "d", "url": "ftp://x.example/"}),
        json!({"name": "d", "url": demo, "transport": "websocket"}),
    ] {
        let (status, v) = alice.post(&app.base, "/api/servers", &bad).await;
        assert_eq!(status, 400, "{bad}: {v}");
    }

    let (status, v) = alice.get(&app.base, "/api/servers").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["servers"],
        json!([{"name": "demo", "url": demo, "transport": "http",
                "headers": {"X-Api-Key": "<unchanged>"}, "enabled": true,
                "oauth": {"signedIn": false}}])
    );
    assert!(!v.to_string().contains("sk-alice-secret"));

    // Edit: the kept header keeps its value; a new one is added.
    let (status, v) = alice
        .put(
            &app.base,
            "/api/servers/demo",
            &json!({"url": demo, "headers": {"X-Api-Key": "<unchanged>", "X-Team": "blue"}, "enabled": false}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert!(!v.to_string().contains("blue"), "{v}");
    let saved = store
        .for_user(&alice_id)
        .server("demo")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(saved.headers["X-Api-Key"].expose(), "sk-alice-secret");
    assert_eq!(saved.headers["X-Team"].expose(), "blue");
    assert!(!saved.enabled);

    // A kept secret does not follow a new URL; renaming is refused; unknown is 404.
    let (status, v) = alice
        .put(
            &app.base,
            "/api/servers/demo",
            &json!({"url": "http://127.0.0.1:9/mcp", "headers": {"X-Api-Key": "<unchanged>"}}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("URL changed"),
        "{v}"
    );
    let (status, _) = alice
        .put(&app.base, "/api/servers/demo", &json!({"name": "other"}))
        .await;
    assert_eq!(status, 400);
    let (status, v) = alice
        .put(&app.base, "/api/servers/nope", &json!({"url": demo}))
        .await;
    assert_eq!(
        (status, v["error"].as_str()),
        (404, Some("not_found")),
        "{v}"
    );
    let (status, v) = alice
        .send(
            alice
                .request(Method::PUT, &app.base, "/api/servers/demo")
                .body("{nope"),
        )
        .await;
    assert_eq!(
        (status, v["error"].as_str()),
        (400, Some("malformed_json")),
        "{v}"
    );

    let (status, _) = alice.delete(&app.base, "/api/servers/demo").await;
    assert_eq!(status, 200);
    let (status, _) = alice.delete(&app.base, "/api/servers/demo").await;
    assert_eq!(status, 404);
    let (_, v) = alice.get(&app.base, "/api/servers").await;
    assert_eq!(v["servers"], json!([]));
    app.stop().await;
}

async fn stdio_servers_are_refused_everywhere(db: Db) {
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let store = db.store().await;
    let (_, cookie) = sign_in(&store, "alice@example.com", false).await;
    let alice = Browser::new(app.origin(), Some(&cookie));
    let demo = demo_http().await;
    assert_eq!(
        alice
            .post(
                &app.base,
                "/api/servers",
                &json!({"name": "demo", "url": demo})
            )
            .await
            .0,
        201
    );
    let marker = tempfile::tempdir().unwrap();
    let touched = marker.path().join("ran");
    let command = json!({"command": "touch", "args": [touched.display().to_string()]});
    let mut add = command.clone();
    add["name"] = json!("local");
    for (method, path, body) in [
        (Method::POST, "/api/servers", add),
        (Method::PUT, "/api/servers/demo", command.clone()),
        (Method::POST, "/api/mcp-test", command.clone()),
        (
            Method::POST,
            "/api/servers",
            json!({"name": "s", "url": demo, "transport": "stdio"}),
        ),
    ] {
        let (status, v) = alice
            .send(alice.request(method.clone(), &app.base, path).json(&body))
            .await;
        assert_eq!(status, 400, "{method} {path}: {v}");
        assert!(
            v["message"].as_str().unwrap().contains("runs no commands"),
            "{v}"
        );
    }
    assert!(!touched.exists(), "a command ran");
    app.stop().await;
}

async fn test_connects_through_the_url_guard(db: Db) {
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let store = db.store().await;
    let (_, cookie) = sign_in(&store, "alice@example.com", false).await;
    let alice = Browser::new(app.origin(), Some(&cookie));
    let demo = demo_http().await;

    let (status, v) = alice
        .post(&app.base, "/api/mcp-test", &json!({"url": demo}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["success"], true, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .starts_with("Connected. Found"),
        "{v}"
    );
    assert!(
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo")
    );

    // A saved server by name alone; a name that is not one of hers.
    alice
        .post(
            &app.base,
            "/api/servers",
            &json!({"name": "demo", "url": demo, "headers": {"X-K": "v"}}),
        )
        .await;
    let (status, v) = alice
        .post(&app.base, "/api/mcp-test", &json!({"name": "demo"}))
        .await;
    assert_eq!((status, v["success"].as_bool()), (200, Some(true)), "{v}");
    let (status, v) = alice
        .post(&app.base, "/api/mcp-test", &json!({"name": "nope"}))
        .await;
    assert_eq!((status, v["success"].as_bool()), (404, Some(false)), "{v}");
    // A kept header with a new URL is refused before anything is sent.
    let (status, v) = alice
        .post(
            &app.base,
            "/api/mcp-test",
            &json!({"name": "demo", "url": "http://127.0.0.1:9/mcp", "headers": {"X-K": "<unchanged>"}}),
        )
        .await;
    assert_eq!(status, 400, "{v}");

    // Cloud metadata is blocked by the URL guard even under the `local` policy.
    let (status, v) = alice
        .post(
            &app.base,
            "/api/mcp-test",
            &json!({"url": "http://169.254.169.254/latest/mcp"}),
        )
        .await;
    assert_eq!(
        (status, v["error"].as_str()),
        (400, Some("SSRF blocked")),
        "{v}"
    );
    // Nothing listens: a 500 naming it, not a hang.
    let port = switchboard_testkit::free_port();
    let (status, v) = alice
        .post(
            &app.base,
            "/api/mcp-test",
            &json!({"url": format!("http://127.0.0.1:{port}/mcp")}),
        )
        .await;
    assert_eq!((status, v["success"].as_bool()), (500, Some(false)), "{v}");
    app.stop().await;
}

async fn tools_and_calls_go_through_the_cache(db: Db) {
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let store = db.store().await;
    let (_, cookie) = sign_in(&store, "alice@example.com", false).await;
    let alice = Browser::new(app.origin(), Some(&cookie));
    let demo = demo_http().await;
    alice
        .post(
            &app.base,
            "/api/servers",
            &json!({"name": "demo", "url": demo, "headers": {"X-K": "1"}}),
        )
        .await;
    let state = &app.running.state;
    assert_eq!(state.open_connections(), 0);

    let (status, v) = alice.get(&app.base, "/api/servers/demo/tools").await;
    assert_eq!(status, 200, "{v}");
    assert!(
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo"),
        "{v}"
    );
    assert_eq!(state.open_connections(), 1);
    let (status, v) = alice
        .post(
            &app.base,
            "/api/servers/demo/call",
            &json!({"tool": "echo", "args": {"message": "hi"}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["content"][0]["text"], "Echo: hi");
    assert_eq!(
        state.open_connections(),
        1,
        "the second request reuses the connection"
    );

    // A changed record is a new key: the stale connection is replaced, not kept beside it.
    alice
        .put(
            &app.base,
            "/api/servers/demo",
            &json!({"headers": {"X-K": "2"}}),
        )
        .await;
    let (status, _) = alice
        .post(
            &app.base,
            "/api/servers/demo/call",
            &json!({"tool": "echo", "args": {"message": "again"}}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(state.open_connections(), 1);

    // Errors: bad args, an unknown tool (the server's error), an unknown server.
    let (status, _) = alice
        .post(
            &app.base,
            "/api/servers/demo/call",
            &json!({"tool": "echo", "args": [1]}),
        )
        .await;
    assert_eq!(status, 400);
    let (status, v) = alice
        .post(
            &app.base,
            "/api/servers/demo/call",
            &json!({"tool": "no_such_tool"}),
        )
        .await;
    assert_eq!(status, 502, "{v}");
    assert_eq!(alice.get(&app.base, "/api/servers/nope/tools").await.0, 404);

    // Removing the server closes its connection.
    alice.delete(&app.base, "/api/servers/demo").await;
    assert_eq!(state.open_connections(), 0);
    app.stop().await;
}

async fn the_cache_evicts_idle_connections_and_keeps_to_its_cap(db: Db) {
    let app = Instance::start(
        &db,
        InstanceOptions {
            cache: CacheLimits {
                max_entries: 1,
                idle: Duration::from_millis(300),
            },
            ..Default::default()
        },
    )
    .await;
    let store = db.store().await;
    let (_, cookie) = sign_in(&store, "alice@example.com", false).await;
    let alice = Browser::new(app.origin(), Some(&cookie));
    let demo = demo_http().await;
    for name in ["one", "two"] {
        alice
            .post(
                &app.base,
                "/api/servers",
                &json!({"name": name, "url": demo}),
            )
            .await;
    }
    let state = &app.running.state;
    assert_eq!(alice.get(&app.base, "/api/servers/one/tools").await.0, 200);
    assert_eq!(alice.get(&app.base, "/api/servers/two/tools").await.0, 200);
    assert_eq!(state.open_connections(), 1, "the cap is one");
    // Idle: the background sweep closes it (it runs every idle/2).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while state.open_connections() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the idle connection was never closed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Losing the cache costs a reconnect only.
    let (status, v) = alice
        .post(
            &app.base,
            "/api/servers/one/call",
            &json!({"tool": "echo", "args": {"message": "back"}}),
        )
        .await;
    assert_eq!(
        (status, v["result"]["content"][0]["text"].as_str()),
        (200, Some("Echo: back")),
        "{v}"
    );
    app.stop().await;
}

async fn health_and_readiness(db: Db) {
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let anyone = Browser::new(app.origin(), None);
    let (status, v) = anyone.get(&app.base, "/healthz").await;
    assert_eq!((status, v["status"].as_str()), (200, Some("ok")));
    let (status, v) = anyone.get(&app.base, "/readyz").await;
    assert_eq!((status, v["status"].as_str()), (200, Some("ready")));
    assert_eq!(anyone.get(&app.base, "/nope").await.0, 404);
    if let Db::Postgres(mut cluster, url) = db {
        cluster.stop();
        let (status, v) = anyone.get(&app.base, "/readyz").await;
        assert_eq!(
            (status, v["status"].as_str()),
            (503, Some("unavailable")),
            "{v}"
        );
        assert!(!v.to_string().contains(switchboard_testkit::PG_PASSWORD));
        let (status, _) = anyone.get(&app.base, "/healthz").await;
        assert_eq!(
            status, 200,
            "the process is up although the database is not"
        );
        drop(url);
    }
    app.stop().await;
}
