//! With a proxy the proxy resolves the target, so the guard resolves and checks the
//! target itself before sending; the proxy's own host is configuration and exempt.
//! The fake proxy on 127.0.0.1 never forwards anything.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use common::fake_proxy;
use switchboard_net::{ClientOptions, GuardedClient, ProxySetting, StaticResolver, UrlPolicy};

fn names() -> StaticResolver {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    StaticResolver::new()
        .with("proxy.test", &[ip("127.0.0.1")])
        .with("fine.test", &[ip("127.0.0.1")])
        .with("direct.test", &[ip("127.0.0.1")])
        .with("public.test", &[ip("93.184.216.34")])
        .with("private.test", &[ip("10.0.0.5")])
        .with("blocked.test", &[ip("169.254.169.254")])
}

fn client(policy: UrlPolicy, proxy_url: String, no_proxy: Option<&str>) -> GuardedClient {
    let mut o = ClientOptions::new(policy);
    o.proxy = ProxySetting::Explicit {
        url: proxy_url,
        no_proxy: no_proxy.map(str::to_owned),
    };
    o.use_ssl_cert_file = false;
    o.resolver = Some(Arc::new(names()));
    o.connect_timeout = Duration::from_secs(5);
    o.timeout = Some(Duration::from_secs(20));
    GuardedClient::new(o).unwrap()
}

#[tokio::test]
async fn proxied_targets_are_checked_before_sending() {
    let (addr, lines) = fake_proxy().await;
    let c = client(UrlPolicy::Local, format!("http://{addr}"), None);

    let resp = c.send(c.get("http://fine.test/x")).await.unwrap();
    assert_eq!(resp.text().await.unwrap(), "proxied");
    assert_eq!(
        lines.lock().unwrap().clone(),
        ["GET http://fine.test/x HTTP/1.1"]
    );

    for (url, rule) in [
        ("http://blocked.test/", "metadata"),
        ("http://169.254.169.254/", "metadata"),
        ("http://metadata.google.internal/", "metadata-host"),
        ("http://unknown.test/", "resolution"),
    ] {
        let err = c.send(c.get(url)).await.unwrap_err();
        assert_eq!(err.blocked().map(|b| b.rule()), Some(rule), "{url}: {err}");
        assert!(c.preflight(url).await.is_err());
    }
    assert_eq!(
        lines.lock().unwrap().len(),
        1,
        "a blocked target reached the proxy"
    );
}

#[tokio::test]
async fn strict_policy_can_use_a_loopback_proxy() {
    let (addr, lines) = fake_proxy().await;
    // The proxy is named, so its name goes through the resolver: exempt, even though
    // it is loopback and the policy is strict.
    let c = client(
        UrlPolicy::Strict,
        format!("http://proxy.test:{}", addr.port()),
        None,
    );
    let err = c.send(c.get("https://private.test/")).await.unwrap_err();
    assert_eq!(err.blocked().map(|b| b.rule()), Some("private"), "{err}");
    assert!(lines.lock().unwrap().is_empty());

    // An allowed public target is tunnelled through the proxy (which refuses it, so
    // nothing beyond loopback is contacted).
    let err = c.send(c.get("https://public.test/")).await.unwrap_err();
    assert!(err.blocked().is_none(), "{err}");
    assert_eq!(
        lines.lock().unwrap().clone(),
        ["CONNECT public.test:443 HTTP/1.1"]
    );
}

#[tokio::test]
async fn no_proxy_hosts_go_direct_and_are_checked_by_the_resolver() {
    let (addr, lines) = fake_proxy().await;
    let c = client(
        UrlPolicy::Local,
        format!("http://{addr}"),
        Some("direct.test"),
    );
    // direct.test resolves (checked) to 127.0.0.1, where the fake proxy listens: it
    // sees an origin-form request, so the request went direct.
    let url = format!("http://direct.test:{}/d", addr.port());
    let resp = c.send(c.get(&url)).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(lines.lock().unwrap().clone(), ["GET /d HTTP/1.1"]);
    assert!(!c.is_proxied(&url.parse().unwrap()));
    assert!(c.is_proxied(&"http://fine.test/".parse().unwrap()));
}
