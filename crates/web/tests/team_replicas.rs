//! Stateless replicas: two team instances on one PostgreSQL database behind one origin,
//! requests alternating between them — a session is valid on both, a server added on
//! one is listed, tested and called on the other, an edit on one is used by the other's
//! next call, a removal on one is a 404 on the other, sign-out on one ends the session
//! on both (this session, or everywhere), and stopping one instance loses nothing. The
//! same suite runs on SQLite with one instance.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use reqwest::Method;
use serde_json::json;
use team_support::{Browser, Db, Instance, InstanceOptions, demo_http, sign_in};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_postgres_database() {
    let db = Db::postgres();
    alternating(&db, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_on_sqlite() {
    let db = Db::sqlite();
    alternating(&db, 1).await;
}

/// `n` instances behind one origin (the first one's), each with its own store pool.
async fn instances(db: &Db, n: usize) -> Vec<Instance> {
    let first = Instance::start(db, InstanceOptions::default()).await;
    let origin = first.origin().to_owned();
    let mut all = vec![first];
    for _ in 1..n {
        all.push(
            Instance::start(
                db,
                InstanceOptions {
                    public_origin: Some(origin.clone()),
                    ..Default::default()
                },
            )
            .await,
        );
    }
    all
}

async fn alternating(db: &Db, n: usize) {
    let mut apps = instances(db, n).await;
    let origin = apps[0].origin().to_owned();
    // Request i goes to instance i % n.
    let bases: Vec<String> = apps.iter().map(|a| a.base.clone()).collect();
    let at = |i: usize| bases[i % n].as_str();
    let store = db.store().await;
    let demo = demo_http().await;

    let (_, cookie) = sign_in(&store, "alice@example.com", false).await;
    let alice = Browser::new(&origin, Some(&cookie));
    for i in 0..2 {
        let (status, v) = alice.get(at(i), "/api/me").await;
        assert_eq!(
            (status, v["email"].as_str()),
            (200, Some("alice@example.com")),
            "{i}: {v}"
        );
    }

    // Added on one, listed, tested and called on the other.
    let (status, v) = alice
        .post(
            at(0),
            "/api/servers",
            &json!({"name": "demo", "url": demo, "headers": {"X-K": "1"}}),
        )
        .await;
    assert_eq!(status, 201, "{v}");
    let (status, v) = alice.get(at(1), "/api/servers").await;
    assert_eq!(
        (status, v["servers"][0]["name"].as_str()),
        (200, Some("demo")),
        "{v}"
    );
    let (status, v) = alice
        .post(at(1), "/api/mcp-test", &json!({"name": "demo"}))
        .await;
    assert_eq!((status, v["success"].as_bool()), (200, Some(true)), "{v}");
    for i in 0..4 {
        let (status, v) = alice
            .post(
                at(i),
                "/api/servers/demo/call",
                &json!({"tool": "echo", "args": {"message": i.to_string()}}),
            )
            .await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["result"]["content"][0]["text"], format!("Echo: {i}"));
    }
    for app in &apps {
        assert_eq!(
            app.running.state.open_connections(),
            1,
            "one cached connection per instance"
        );
    }

    // Edited on one: the other's next call uses the new record (a new cache key).
    let (status, v) = alice
        .put(
            at(1),
            "/api/servers/demo",
            &json!({"headers": {"X-K": "2"}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let (status, _) = alice
        .post(
            at(0),
            "/api/servers/demo/call",
            &json!({"tool": "echo", "args": {"message": "x"}}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(apps[0].running.state.open_connections(), 1);

    // Removed on one: gone on the other, whatever it had cached.
    let (status, _) = alice.delete(at(0), "/api/servers/demo").await;
    assert_eq!(status, 200);
    let (status, v) = alice
        .post(
            at(1),
            "/api/servers/demo/call",
            &json!({"tool": "echo", "args": {"message": "x"}}),
        )
        .await;
    assert_eq!(status, 404, "{v}");
    assert_eq!(alice.get(at(1), "/api/servers/demo/tools").await.0, 404);

    // Sign-out on one ends the session on all.
    let (status, _) = alice
        .send(alice.request(Method::POST, at(1), "/auth/logout"))
        .await;
    assert_eq!(status, 200);
    for i in 0..2 {
        assert_eq!(
            alice.get(at(i), "/api/me").await.0,
            401,
            "instance {}",
            i % n
        );
    }
    let (_, c1) = sign_in(&store, "alice@example.com", false).await;
    let (_, c2) = sign_in(&store, "alice@example.com", false).await;
    let (b1, b2) = (
        Browser::new(&origin, Some(&c1)),
        Browser::new(&origin, Some(&c2)),
    );
    let (status, v) = b1
        .send(b1.request(Method::POST, at(0), "/auth/logout?everywhere=1"))
        .await;
    assert_eq!((status, v["ended"].as_u64()), (200, Some(2)), "{v}");
    assert_eq!(b2.get(at(1), "/api/me").await.0, 401);

    // One instance stops: the other still has everything (sessions, servers).
    let (_, cookie) = sign_in(&store, "alice@example.com", false).await;
    let alice = Browser::new(&origin, Some(&cookie));
    alice
        .post(at(0), "/api/servers", &json!({"name": "demo", "url": demo}))
        .await;
    alice.get(at(0), "/api/servers/demo/tools").await;
    let last = apps.pop().unwrap();
    let survivor_base = if n == 1 {
        // One instance: stop and start it again on the same database.
        last.stop().await;
        apps.push(Instance::start(db, InstanceOptions::default()).await);
        apps[0].base.clone()
    } else {
        last.stop().await;
        apps[0].base.clone()
    };
    let alice = Browser::new(apps[0].origin(), Some(&cookie));
    let (status, v) = alice
        .post(
            &survivor_base,
            "/api/servers/demo/call",
            &json!({"tool": "echo", "args": {"message": "after"}}),
        )
        .await;
    assert_eq!(
        (status, v["result"]["content"][0]["text"].as_str()),
        (200, Some("Echo: after")),
        "{v}"
    );
    for app in apps {
        app.stop().await;
    }
}
