//! Redirects and DNS checks against real local servers on 127.0.0.1. Every blocked
//! hop is refused before any connection; no test contacts a non-loopback address.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test plays the client or peer side of the network with its own sockets and HTTP
// clients; the one-network-door rule (clippy.toml) is for shipped code.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Server, redirect_server};
use switchboard_net::{
    BoxFuture, ClientOptions, GuardedClient, NameResolver, NetError, ProxySetting, StaticResolver,
    UrlPolicy, explain_with, find_blocked, http_client,
};

fn options(policy: UrlPolicy, resolver: Arc<dyn NameResolver>) -> ClientOptions {
    let mut o = ClientOptions::new(policy);
    // Whatever the environment says, these tests talk to 127.0.0.1 directly.
    o.proxy = ProxySetting::Disabled;
    o.use_ssl_cert_file = false;
    o.resolver = Some(resolver);
    o.connect_timeout = Duration::from_secs(5);
    o.timeout = Some(Duration::from_secs(20));
    o
}

fn names() -> StaticResolver {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    StaticResolver::new()
        .with("a.test", &[ip("127.0.0.1")])
        .with("b.test", &[ip("127.0.0.1")])
        .with("rebind.test", &[ip("169.254.169.254")])
        .with("meta6.test", &[ip("::ffff:169.254.169.254")])
}

fn client(policy: UrlPolicy) -> GuardedClient {
    GuardedClient::new(options(policy, Arc::new(names()))).unwrap()
}

fn to(server: &Server, target: &str) -> String {
    let enc: String = url::form_urlencoded::byte_serialize(target.as_bytes()).collect();
    server.url(&format!("/to?url={enc}"))
}

fn blocked_rule(err: &NetError) -> Option<&'static str> {
    err.blocked().map(|b| b.rule())
}

#[tokio::test]
async fn five_redirects_are_followed() {
    let a = redirect_server().await;
    let c = client(UrlPolicy::Local);
    let resp = c.send(c.get(&a.url("/chain/5"))).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "end");
    assert_eq!(a.log.paths().len(), 6);
}

#[tokio::test]
async fn the_sixth_redirect_is_refused() {
    let a = redirect_server().await;
    let c = client(UrlPolicy::Local);
    let err = c.send(c.get(&a.url("/chain/6"))).await.unwrap_err();
    assert_eq!(blocked_rule(&err), Some("too-many-redirects"), "{err}");
    assert!(err.to_string().contains("at most 5"), "{err}");
    // /chain/6 … /chain/1 were requested; the sixth redirect (to /chain/0) was not followed.
    let paths = a.log.paths();
    assert_eq!(paths.len(), 6, "{paths:?}");
    assert!(!paths.contains(&"/chain/0".to_owned()));
}

#[tokio::test]
async fn redirect_to_metadata_address_is_blocked() {
    let a = redirect_server().await;
    let c = client(UrlPolicy::Local);
    for (target, rule) in [
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://[::ffff:169.254.169.254]/", "metadata"),
        ("http://0xa9fea9fe/", "metadata"),
        ("http://169.254.1.1/", "link-local"),
        (
            "http://metadata.google.internal/computeMetadata/v1/",
            "metadata-host",
        ),
        ("http://user:pw@127.0.0.1/", "credentials"),
        ("file:///etc/passwd", "scheme"),
    ] {
        let err = c.send(c.get(&to(&a, target))).await.unwrap_err();
        assert_eq!(blocked_rule(&err), Some(rule), "{target}: {err}");
    }
}

#[tokio::test]
async fn redirect_to_a_name_resolving_to_metadata_is_blocked_by_the_resolver() {
    let a = redirect_server().await;
    let c = client(UrlPolicy::Local);
    let port = a.addr.port();
    for name in ["rebind.test", "meta6.test"] {
        // The hop passes the syntax stage; the resolver refuses before connecting.
        let target = format!("http://{name}:{port}/echo");
        let err = c.send(c.get(&to(&a, &target))).await.unwrap_err();
        assert_eq!(blocked_rule(&err), Some("metadata"), "{err}");
        assert!(matches!(err, NetError::Blocked(_)), "{err:?}");
        assert!(
            err.to_string().contains(&format!("`{name}` resolves to")),
            "{err}"
        );
    }
    assert!(!a.log.paths().iter().any(|p| p == "/echo"));
}

#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused_under_strict_before_connecting() {
    let c = client(UrlPolicy::Strict);
    let err = c.send(c.get("https://a.test:1/")).await.unwrap_err();
    assert_eq!(blocked_rule(&err), Some("loopback"), "{err}");
    let err = c.send(c.get("http://a.test:1/")).await.unwrap_err();
    assert_eq!(blocked_rule(&err), Some("scheme"), "{err}");
}

#[tokio::test]
async fn cross_origin_redirect_drops_credentials_and_custom_headers() {
    let a = redirect_server().await;
    let b = redirect_server().await;
    let c = client(UrlPolicy::Local);
    // Different port (and host name): another origin.
    let target = format!("http://b.test:{}/echo", b.addr.port());
    let resp = c
        .send(
            c.get(&to(&a, &target))
                .header("authorization", "Bearer secret-token")
                .header("x-api-key", "k-123")
                .header("cookie", "session=s")
                .header("proxy-authorization", "Basic eA==")
                .header("accept", "application/json"),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);

    let first = &a.log.all()[0];
    assert!(first.headers.contains_key("authorization"));
    assert!(first.headers.contains_key("x-api-key"));

    let seen = b.log.all();
    assert_eq!(seen.len(), 1);
    let h = &seen[0].headers;
    for dropped in [
        "authorization",
        "x-api-key",
        "cookie",
        "proxy-authorization",
    ] {
        assert!(
            !h.contains_key(dropped),
            "{dropped} reached the second server"
        );
    }
    assert_eq!(h.get("accept").unwrap(), "application/json");
}

#[tokio::test]
async fn cross_origin_307_keeps_the_body_but_not_the_credentials() {
    let a = redirect_server().await;
    let b = redirect_server().await;
    let c = client(UrlPolicy::Local);
    let target = b.url("/echo");
    let url = format!("{}&status=307", to(&a, &target));
    let resp = c
        .send(
            c.post(&url)
                .header("authorization", "Bearer secret-token")
                .header("mcp-session-id", "sess")
                .header("content-type", "application/json")
                .body("{\"x\":1}"),
        )
        .await
        .unwrap();
    assert_eq!(resp.text().await.unwrap(), "{\"x\":1}");
    let seen = &b.log.all()[0];
    assert_eq!(seen.method, "POST");
    assert_eq!(
        seen.headers.get("content-type").unwrap(),
        "application/json"
    );
    assert!(!seen.headers.contains_key("authorization"));
    assert!(!seen.headers.contains_key("mcp-session-id"));
}

#[tokio::test]
async fn same_origin_redirect_keeps_headers() {
    let a = redirect_server().await;
    let c = client(UrlPolicy::Local);
    let resp = c
        .send(
            c.get(&to(&a, "/echo"))
                .header("authorization", "Bearer t")
                .header("x-api-key", "k"),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let echo = &a.log.all()[1];
    assert_eq!(echo.path, "/echo");
    assert_eq!(echo.headers.get("authorization").unwrap(), "Bearer t");
    assert_eq!(echo.headers.get("x-api-key").unwrap(), "k");
}

#[tokio::test]
async fn see_other_after_post_becomes_get_without_body() {
    let a = redirect_server().await;
    let c = client(UrlPolicy::Local);
    let url = format!("{}&status=303", to(&a, "/echo"));
    let resp = c
        .send(
            c.post(&url)
                .header("content-type", "text/plain")
                .body("hello"),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let echo = &a.log.all()[1];
    assert_eq!(echo.method, "GET");
    assert!(echo.body.is_empty());
    assert!(!echo.headers.contains_key("content-type"));
}

#[tokio::test]
async fn a_redirect_without_location_is_returned() {
    let a = redirect_server().await;
    let c = client(UrlPolicy::Local);
    let resp = c.send(c.get(&a.url("/status/302"))).await.unwrap();
    assert_eq!(resp.status(), 302);
    assert_eq!(a.log.all().len(), 1);
}

#[tokio::test]
async fn a_streaming_body_is_not_replayed() {
    let a = redirect_server().await;
    let c = client(UrlPolicy::Local);
    let url = format!("{}&status=307", to(&a, "/echo"));
    let stream = futures::stream::iter(vec![Ok::<_, io::Error>("chunk")]);
    let err = c
        .send(c.post(&url).body(reqwest::Body::wrap_stream(stream)))
        .await
        .unwrap_err();
    assert!(matches!(err, NetError::Redirect { .. }), "{err:?}");
    assert!(err.to_string().contains("cannot be sent again"), "{err}");
}

#[tokio::test]
async fn invalid_request_urls_are_reported() {
    let c = client(UrlPolicy::Local);
    let err = c.send(c.get("not a url")).await.unwrap_err();
    assert!(matches!(err, NetError::InvalidRequest(_)), "{err:?}");
}

/// What reqwest does on its own (the reason `inner()` refuses cross-origin hops and
/// `execute` follows by hand): it drops `Authorization` and `Cookie` on a hop to
/// another host or port, but keeps custom headers.
#[tokio::test]
async fn plain_reqwest_keeps_custom_headers_across_origins() {
    let a = redirect_server().await;
    let b = redirect_server().await;
    let plain = reqwest::Client::builder().no_proxy().build().unwrap();
    let resp = plain
        .get(to(&a, &b.url("/echo")))
        .header("authorization", "Bearer t")
        .header("cookie", "s=1")
        .header("x-api-key", "k")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let h = &b.log.all()[0].headers;
    assert!(!h.contains_key("authorization"));
    assert!(!h.contains_key("cookie"));
    assert_eq!(h.get("x-api-key").unwrap(), "k");
}

/// A resolver that answers loopback first and the metadata address afterwards: the
/// DNS-rebinding attack.
#[derive(Debug, Default)]
struct Rebinding {
    calls: AtomicUsize,
}

impl NameResolver for Rebinding {
    fn lookup<'a>(&'a self, _host: &'a str) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            let ip = if n == 0 {
                "127.0.0.1"
            } else {
                "169.254.169.254"
            };
            Ok(vec![ip.parse().unwrap()])
        })
    }
}

#[tokio::test]
async fn no_dns_rebinding_window() {
    let a = redirect_server().await;
    let resolver = Arc::new(Rebinding::default());
    let url = format!("http://flip.test:{}/echo", a.addr.port());
    // A check made ahead of time sees loopback and allows it...
    let verdict = explain_with(&url, UrlPolicy::Local, &*resolver).await;
    assert!(verdict.allowed);
    // ...but the connection resolves again, and the client checks exactly the
    // addresses it connects to.
    let c = GuardedClient::new(options(UrlPolicy::Local, resolver.clone())).unwrap();
    let err = c.send(c.get(&url)).await.unwrap_err();
    assert_eq!(blocked_rule(&err), Some("metadata"), "{err}");
    assert_eq!(resolver.calls.load(Ordering::SeqCst), 2);
    assert!(a.log.all().is_empty());
}

#[tokio::test]
async fn names_resolving_to_allowed_addresses_connect() {
    let a = redirect_server().await;
    let c = client(UrlPolicy::Local);
    let resp = c
        .send(c.get(&format!("http://a.test:{}/echo", a.addr.port())))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = c
        .send(c.get(&format!("http://api.localhost:{}/echo", a.addr.port())))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

// The library-facing client (`inner()` / `http_client`): reqwest follows redirects,
// the policy checks every hop and refuses other origins.

#[tokio::test]
async fn inner_client_checks_redirects() {
    let a = redirect_server().await;
    let b = redirect_server().await;
    let inner = http_client(options(UrlPolicy::Local, Arc::new(names()))).unwrap();

    let resp = inner.get(a.url("/chain/5")).send().await.unwrap();
    assert_eq!(resp.status(), 200);

    let err = inner.get(a.url("/chain/6")).send().await.unwrap_err();
    assert_eq!(
        find_blocked(&err).map(|b| b.rule()),
        Some("too-many-redirects"),
        "{err:?}"
    );

    let err = inner
        .get(to(&a, "http://169.254.169.254/latest/meta-data/"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        find_blocked(&err).map(|b| b.rule()),
        Some("metadata"),
        "{err:?}"
    );

    // A name resolving to a blocked address: refused by the resolver, no connection.
    let target = format!("http://rebind.test:{}/echo", a.addr.port());
    let err = inner.get(&target).send().await.unwrap_err();
    assert_eq!(
        find_blocked(&err).map(|b| b.rule()),
        Some("metadata"),
        "{err:?}"
    );
    // Redirected there: another origin, refused before the resolver is even asked.
    let err = inner.get(to(&a, &target)).send().await.unwrap_err();
    assert_eq!(
        find_blocked(&err).map(|b| b.rule()),
        Some("cross-origin-redirect"),
        "{err:?}"
    );

    let err = inner
        .get(to(&a, &b.url("/echo")))
        .header("x-api-key", "k")
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        find_blocked(&err).map(|b| b.rule()),
        Some("cross-origin-redirect"),
        "{err:?}"
    );
    assert!(b.log.all().is_empty(), "the other origin was contacted");

    let resp = inner
        .get(to(&a, "/echo"))
        .header("x-api-key", "k")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        a.log
            .all()
            .last()
            .unwrap()
            .headers
            .get("x-api-key")
            .unwrap(),
        "k"
    );
}

#[tokio::test]
async fn guarded_inner_and_preflight() {
    let a = redirect_server().await;
    let c = client(UrlPolicy::Local);
    // What the lead does before handing a URL to rmcp.
    assert!(c.preflight(&a.url("/echo")).await.is_ok());
    let err = c.preflight("http://169.254.169.254/").await.unwrap_err();
    assert_eq!(err.rule(), "metadata");
    let resp = c.inner().get(a.url("/echo")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
}

/// `send_without_redirects`: a 3xx comes back as it is and its target is never
/// requested; the request's own URL still passes the guard.
#[tokio::test]
async fn send_without_redirects_returns_the_redirect_unfollowed() {
    let a = redirect_server().await;
    let c = client(UrlPolicy::Local);
    let resp = c
        .send_without_redirects(c.get(&a.url("/chain/2")))
        .await
        .unwrap();
    assert!(resp.status().is_redirection(), "{}", resp.status());
    assert_eq!(a.log.paths(), ["/chain/2"]);
    let err = c
        .send_without_redirects(c.get("http://169.254.169.254/latest/meta-data/"))
        .await
        .unwrap_err();
    assert_eq!(blocked_rule(&err), Some("metadata"), "{err}");
    let strict = client(UrlPolicy::Strict);
    let err = strict
        .send_without_redirects(strict.get(&a.url("/chain/0")))
        .await
        .unwrap_err();
    assert!(err.blocked().is_some(), "{err}");
    assert_eq!(a.log.paths(), ["/chain/2"]);
}
