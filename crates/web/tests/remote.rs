//! Remote mode: the MCP Apps sandbox on its own port (or its own host name behind a
//! reverse proxy), `frame-ancestors <app origin>` on every sandbox answer, and the
//! access cookie never accepted from the sandbox's (or any other) origin.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test plays the client or peer side of the network with its own sockets and HTTP
// clients; the one-network-door rule (clippy.toml) is for shipped code.
#![allow(clippy::disallowed_methods)]

use crate::common;

use common::{Api, FAKE_APP_URI, Home, fake_mcp, wait_connected};
use serde_json::{Value, json};
use switchboard_net::UrlPolicy;
use switchboard_web::{AppConfig, AppState, ServeOptions};

fn port_of(origin: &str) -> u16 {
    origin.rsplit(':').next().unwrap().parse().unwrap()
}

fn csp_of(r: &reqwest::Response) -> String {
    r.headers()
        .get("content-security-policy")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn remote_mode_serves_the_sandbox_on_its_own_port_framed_only_by_the_app() {
    let fake = fake_mcp(false).await;
    let home = Home::new(Some(&json!({"mcpServers": {"fake": {"httpUrl": fake}}})));
    let mut opts = ServeOptions::new(home.load());
    opts.port = 0;
    opts.remote = true;
    // The fake server is on loopback, which strict (remote's default) refuses.
    opts.url_policy = Some(UrlPolicy::Local);
    let app = switchboard_web::start(opts).await.unwrap();
    wait_connected(&app, &["fake"]).await;
    let api = Api::new(&app);

    let (status, cfg) = api.get("/api/config").await;
    assert_eq!(status, 200);
    assert_eq!(cfg["remote"], true);
    assert_eq!(cfg["proxyOrigin"], app.proxy_origin);
    assert!(app.proxy_origin.starts_with("http://127.0.0.1:"));
    assert_ne!(
        port_of(&app.proxy_origin),
        app.addr.port(),
        "the sandbox has its own port"
    );

    let (status, opened) = api
        .post(
            "/api/apps",
            &json!({"server": "fake", "resourceUri": FAKE_APP_URI, "tool": "visible"}),
        )
        .await;
    assert_eq!(status, 200, "{opened}");
    let proxy_url = opened["proxyUrl"].as_str().unwrap();
    assert!(proxy_url.starts_with(&format!("{}/sandbox/", app.proxy_origin)));
    let r = api.http.get(proxy_url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let csp = csp_of(&r);
    assert!(
        csp.ends_with(&format!("; frame-ancestors {}", app.app_origin)),
        "{csp}"
    );
    assert!(r.headers().get("set-cookie").is_none());
    let body = r.text().await.unwrap();
    assert!(body.contains(&format!("\"{}\"", app.app_origin)), "{body}");
    assert!(!body.contains(&app.token));

    // The sandbox page is not on the app's port, and its own errors cannot be framed.
    let on_app_port = proxy_url.replace(&app.proxy_origin, &app.app_origin);
    let r = api.http.get(&on_app_port).send().await.unwrap();
    assert_ne!(r.status(), 200);
    let r = api
        .http
        .get(proxy_url)
        .header("Host", format!("127.0.0.1:{}", app.addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(csp_of(&r).contains("frame-ancestors 'none'"));

    // Browsers send the cookie to every port of the host, so the API refuses any
    // request the sandbox's page (or any other origin's) makes, even a GET.
    let cookie = format!("switchboard_token_{}={}", app.addr.port(), app.token);
    let get = |extra: (&'static str, String)| {
        api.http
            .get(format!("{}/api/mcp/servers", app.app_origin))
            .header("Cookie", &cookie)
            .header(extra.0, extra.1)
            .send()
    };
    let r = get(("Sec-Fetch-Site", "same-origin".into())).await.unwrap();
    assert_eq!(r.status(), 200, "the app's own page gets in");
    let r = get(("Origin", app.proxy_origin.clone())).await.unwrap();
    assert_eq!(r.status(), 403);
    let v: Value = r.json().await.unwrap();
    assert!(v["message"].as_str().unwrap().contains("sandbox"), "{v}");
    let r = get(("Sec-Fetch-Site", "same-site".into())).await.unwrap();
    assert_eq!(r.status(), 403, "an <img> or form from the sandbox port");
    let r = api
        .http
        .get(format!("{}/api/mcp/servers", app.app_origin))
        .bearer_auth(&app.token)
        .header("Origin", &app.proxy_origin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "not even with the token as a bearer");
    app.shutdown().await;
}

#[tokio::test]
async fn bound_to_any_address_the_sandbox_is_still_framed_only_by_the_app() {
    // `--host 0.0.0.0` in miniature: origins come from the Host header.
    let fake = fake_mcp(false).await;
    let home = Home::new(Some(&json!({"mcpServers": {"fake": {"httpUrl": fake}}})));
    let app_l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let app_addr = app_l.local_addr().unwrap();
    let proxy_port = proxy_l.local_addr().unwrap().port();
    let cfg = AppConfig {
        token: "t0ken".into(),
        port: app_addr.port(),
        app_origin: format!("http://0.0.0.0:{}", app_addr.port()),
        origin_from_host: true,
        proxy_origin: format!("http://127.0.0.1:{proxy_port}"),
        proxy_port,
        remote: true,
        allowed_hosts: Vec::new(),
        load: home.load(),
        url_policy: UrlPolicy::Local,
        default_servers: Vec::new(),
        model: None,
        transport_cache: None,
        oauth: None,
    };
    let state = AppState::new(cfg).unwrap();
    state.start_host().await.unwrap();
    let (a, p) = (state.clone(), state.clone());
    tokio::spawn(async move {
        let _ = axum::serve(app_l, switchboard_web::app(a)).await;
    });
    tokio::spawn(async move {
        let _ = axum::serve(proxy_l, switchboard_web::proxy_app(p)).await;
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !state
        .host()
        .snapshot()
        .iter()
        .any(|s| s.status == switchboard_host::ServerStatus::Connected)
    {
        assert!(std::time::Instant::now() < deadline, "fake never connected");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let page = format!("http://{app_addr}");
    let api = Api {
        base: page.clone(),
        token: "t0ken".into(),
        origin: page.clone(),
        http: reqwest::Client::new(),
    };
    let (status, opened) = api
        .post(
            "/api/apps",
            &json!({"server": "fake", "resourceUri": FAKE_APP_URI}),
        )
        .await;
    assert_eq!(status, 200, "{opened}");
    let proxy_url = opened["proxyUrl"].as_str().unwrap();
    assert_eq!(
        proxy_url,
        format!(
            "http://127.0.0.1:{proxy_port}/sandbox/{}",
            opened["appId"].as_str().unwrap()
        )
    );
    let r = api.http.get(proxy_url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let csp = csp_of(&r);
    assert!(csp.ends_with(&format!("; frame-ancestors {page}")), "{csp}");
    let body = r.text().await.unwrap();
    assert!(
        body.contains(&format!("var HOST = \"{page}\"")),
        "the sandbox relays only messages from the page that opened it"
    );
    state.shutdown().await;
}

#[tokio::test]
async fn behind_a_reverse_proxy_the_sandbox_has_its_own_host_name() {
    let home = Home::new(Some(&json!({"mcpServers": {}})));
    let start = |public: &str, sandbox: Option<&str>| {
        let mut opts = ServeOptions::new(home.load());
        opts.port = 0;
        opts.public_origin = Some(public.into());
        opts.sandbox_origin = sandbox.map(str::to_string);
        switchboard_web::start(opts)
    };
    for (public, sandbox, says) in [
        (
            "https://sb.example.com",
            Some("https://sb.example.com:8443"),
            "same host name",
        ),
        ("https://sb.example.com", None, "needs a sandbox origin"),
        (
            "https://sb.example.com/app",
            Some("https://sandbox.example.com"),
            "only an origin",
        ),
        (
            "https:",
            Some("https://sandbox.example.com"),
            "public origin",
        ),
    ] {
        let e = start(public, sandbox).await.unwrap_err().to_string();
        assert!(e.contains(says), "{public} {sandbox:?}: {e}");
    }

    let app = start(
        "https://sb.example.com",
        Some("https://sandbox.example.com"),
    )
    .await
    .unwrap();
    assert_eq!(app.app_origin, "https://sb.example.com");
    assert_eq!(app.proxy_origin, "https://sandbox.example.com");
    assert!(
        app.url.starts_with("https://sb.example.com/?token="),
        "{}",
        app.url
    );
    let local = format!("http://127.0.0.1:{}", app.addr.port());
    let http = reqwest::Client::new();
    // The reverse proxy passes the public Host through.
    let r = http
        .get(format!("{local}/?token={}", app.token))
        .header("Host", "sb.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.contains("; Secure"), "{cookie}");
    let r = http
        .get(format!("{local}/api/config"))
        .header("Host", "sb.example.com")
        .bearer_auth(&app.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let cfg: Value = r.json().await.unwrap();
    assert_eq!(cfg["proxyOrigin"], "https://sandbox.example.com");
    assert_eq!(cfg["remote"], true);
    let r = http
        .get(format!("{local}/api/config"))
        .header("Host", "evil.example.com")
        .bearer_auth(&app.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "DNS-rebinding defence still holds");
    app.shutdown().await;
}
