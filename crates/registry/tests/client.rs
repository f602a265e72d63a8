//! The client against switchboard-testkit's local registry: pagination, versions,
//! inactive servers, and hostile answers (huge, never-ending, malformed, trickling)
//! that end in a bounded, worded error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use switchboard_net::{ClientOptions, GuardedClient, UrlPolicy};
use switchboard_registry::{Choice, Plan, Registry, RegistryError, split_id};
use switchboard_testkit::RegistryServer;

fn client(policy: UrlPolicy) -> GuardedClient {
    let mut opts = ClientOptions::new(policy);
    opts.timeout = None;
    GuardedClient::new(opts).unwrap()
}

fn registry(base: &str) -> Registry {
    Registry::new(base, client(UrlPolicy::Local)).unwrap()
}

#[tokio::test]
async fn search_pages_and_versions() {
    let reg = RegistryServer::start();
    let r = registry(&reg.url);
    let found = r.search("modelcontextprotocol", 10).await.unwrap();
    let names: Vec<&str> = found
        .servers
        .iter()
        .map(|l| l.server.name.as_str())
        .collect();
    assert_eq!(names.len(), 5, "{names:?}");
    assert!(!names.contains(&"io.modelcontextprotocol/everything-old"));
    assert!(!found.truncated);
    // Two pages allowed, three needed: cut and said so.
    let cut = r.search("modelcontextprotocol", 2).await.unwrap();
    assert!(cut.truncated);
    assert_eq!(cut.servers.len(), 4);

    let (id, v) = split_id("io.github.example/weather-mcp@0.5.0");
    let l = r.server(id, v).await.unwrap();
    assert_eq!(l.server.version, "0.5.0");
    assert_eq!(split_id("a/b@latest"), ("a/b", None));
    let err = r
        .server("io.github.example/weather-mcp", Some("9"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("at version 9"), "{err}");
    let err = r
        .server("io.modelcontextprotocol/everything-old", None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, RegistryError::Inactive { ref status, .. } if status == "deprecated"),
        "{err:?}"
    );

    let fs = r
        .server("io.modelcontextprotocol.anonymous/mcp-fs", None)
        .await
        .unwrap();
    let plan = Plan::new(&fs.server, Choice::Remote(0), &[]).unwrap();
    assert_eq!(plan.transport(), "http");
    assert_eq!(plan.inputs().len(), 2);
}

#[tokio::test]
async fn hostile_answers_end_in_bounded_errors() {
    let reg = RegistryServer::start();
    for (prefix, want) in [
        ("huge", "larger than 8 MiB"),
        ("endless", "larger than 8 MiB"),
        ("malformed", "is not JSON"),
    ] {
        let r = registry(&format!("{}/{prefix}", reg.url));
        let started = Instant::now();
        let err = r.search("x", 10).await.unwrap_err().to_string();
        assert!(err.contains(want), "{prefix}: {err}");
        assert!(err.contains("an MCP Registry?"), "{prefix}: {err}");
        assert!(started.elapsed() < Duration::from_secs(15), "{prefix}");
        let err = r.server("a/b", None).await.unwrap_err().to_string();
        assert!(
            err.contains(want) || err.contains("not JSON"),
            "{prefix}: {err}"
        );
    }
    // A body that trickles forever ends at the time limit, body included.
    let r = registry(&format!("{}/slow", reg.url)).with_timeout(Duration::from_millis(1500));
    let started = Instant::now();
    let err = r.search("x", 10).await.unwrap_err();
    assert!(matches!(err, RegistryError::Read { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn the_guard_refuses_before_anything_is_sent() {
    let reg = RegistryServer::start();
    let r = Registry::new(&reg.url, client(UrlPolicy::Strict)).unwrap();
    let err = r.search("x", 10).await.unwrap_err();
    assert!(matches!(err, RegistryError::Unreachable { .. }), "{err:?}");
    assert!(reg.seen().is_empty());
    for bad in ["ftp://x", "not a url", "data:text/plain,x"] {
        assert!(
            matches!(
                Registry::new(bad, client(UrlPolicy::Local)),
                Err(RegistryError::BadUrl { .. })
            ),
            "{bad}"
        );
    }
}
