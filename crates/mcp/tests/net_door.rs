//! One door to the network: a destination the URL guard refuses is reported as
//! blocked (with the policy and the fix) on every HTTP transport and fallback, and
//! nothing else opens a socket to it to word the error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use switchboard_mcp::{ConnectError, ConnectOptions, Connection, Target};
use switchboard_net::{ClientOptions, GuardedClient, StaticResolver, UrlPolicy};
use switchboard_testkit::RecordingListener;

/// A guard whose resolver answers `name` with `addr` (as `/etc/hosts` or a rebinding
/// DNS server would).
fn guard(policy: UrlPolicy, name: &str, addr: IpAddr) -> GuardedClient {
    let mut opts = ClientOptions::new(policy);
    opts.resolver = Some(Arc::new(StaticResolver::new().with(name, &[addr])));
    opts.proxy = switchboard_net::ProxySetting::Disabled;
    GuardedClient::new(opts).unwrap()
}

fn targets(url: &str) -> Vec<Target> {
    vec![
        Target::Http {
            url: url.into(),
            headers: vec![],
        },
        Target::Sse {
            url: url.into(),
            headers: vec![],
        },
        Target::Auto {
            url: url.into(),
            headers: vec![],
        },
    ]
}

async fn connect(target: Target, guard: GuardedClient) -> ConnectError {
    let mut opts = ConnectOptions::new("rebound", target);
    opts.guard = Some(guard);
    opts.startup_timeout = Duration::from_secs(20);
    match Connection::connect(opts).await {
        Ok(_) => panic!("connected to a destination the guard refuses"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn a_name_resolving_to_a_blocked_address_is_reported_as_blocked_on_every_transport() {
    // Under `strict`, a public-looking name that resolves to loopback is refused by the
    // guard's resolver. The old code then opened a plain TCP connection to the same host
    // and port to word the error ("Connection refused"): a port-scan oracle that hid the
    // verdict.
    let witness = RecordingListener::start().await;
    let url = format!("https://rebound.example:{}/mcp", witness.port());
    for target in targets(&url) {
        let kind = format!("{:?}", std::mem::discriminant(&target));
        let e = connect(
            target,
            guard(
                UrlPolicy::Strict,
                "rebound.example",
                Ipv4Addr::LOCALHOST.into(),
            ),
        )
        .await;
        assert!(matches!(e, ConnectError::Blocked { .. }), "{kind}: {e:?}");
        let text = e.to_string();
        assert!(text.contains("blocked by URL policy `strict`"), "{text}");
        assert!(text.contains("127.0.0.1"), "{text}");
    }
    assert_eq!(
        witness.connections(),
        0,
        "something connected around the guard"
    );
}

#[tokio::test]
async fn cloud_metadata_behind_a_name_is_blocked_under_local_too() {
    let url = "http://innocent.example/mcp";
    for target in targets(url) {
        let e = connect(
            target,
            guard(
                UrlPolicy::Local,
                "innocent.example",
                Ipv4Addr::new(169, 254, 169, 254).into(),
            ),
        )
        .await;
        assert!(matches!(e, ConnectError::Blocked { .. }), "{e:?}");
        assert!(
            e.to_string().contains("blocked by URL policy `local`"),
            "{e}"
        );
    }
}

#[tokio::test]
async fn an_unreachable_allowed_destination_is_still_unreachable_not_blocked() {
    // A port nobody listens on, allowed by the policy: the real I/O error, no verdict.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut opts = ConnectOptions::new(
        "gone",
        Target::Http {
            url,
            headers: vec![],
        },
    );
    opts.startup_timeout = Duration::from_secs(20);
    let e = Connection::connect(opts)
        .await
        .expect_err("nothing listens");
    assert!(matches!(e, ConnectError::Unreachable { .. }), "{e:?}");
    assert!(
        e.to_string().to_ascii_lowercase().contains("refused"),
        "{e}"
    );
}
