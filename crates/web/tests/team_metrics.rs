//! Team mode's `/metrics` (team/metrics.rs) against real parts: the OpenID provider
//! (`tests/peers/oidc`) signs people in and the demo MCP server answers over Streamable
//! HTTP. A scrape with the token shows the sign-ins (one let in, one refused by the
//! policy), the MCP calls by outcome (ok, the tool's own error, a failure), the open
//! upstream session, the requests by route template and status class, and latency
//! histograms that counted them — and never an email, a server's URL or name, a raw
//! path or a cookie. Without the token, with a wrong one or with a session cookie the
//! scrape is refused; an instance without a token has no `/metrics`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use reqwest::Method;
use serde_json::json;
use team_support::{Browser, Db, Instance, InstanceOptions, demo_http, oidc_provider_for};

const TOKEN: &str = "metrics-test-token-0123456789abcdef";
/// A server name that must never show in the metrics.
const SERVER: &str = "zz-private-server-name";

/// One sample line: series name, labels, value.
type Sample = (String, Vec<(String, String)>, f64);

/// One scrape.
struct Scrape {
    text: String,
    samples: Vec<Sample>,
}

impl Scrape {
    fn parse(text: String) -> Self {
        assert!(text.ends_with("# EOF\n"), "not OpenMetrics: {text}");
        let mut samples = Vec::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (series, value) = line.rsplit_once(' ').unwrap();
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line}"));
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => {
                    let rest = rest.strip_suffix('}').unwrap();
                    let labels = rest
                        .split(',')
                        .map(|kv| {
                            let (k, v) = kv.split_once('=').unwrap();
                            (k.to_owned(), v.trim_matches('"').to_owned())
                        })
                        .collect();
                    (name.to_owned(), labels)
                }
                None => (series.to_owned(), Vec::new()),
            };
            samples.push((name, labels, value));
        }
        Self { text, samples }
    }

    /// The sum of `name`'s samples that carry every label in `want` (0 when none).
    fn value(&self, name: &str, want: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|(n, labels, _)| {
                n == name
                    && want
                        .iter()
                        .all(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(_, _, v)| v)
            .sum()
    }
}

async fn scrape(http: &reqwest::Client, base: &str) -> Scrape {
    let r = http
        .get(format!("{base}/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text"),
        "{:?}",
        r.headers()
    );
    Scrape::parse(r.text().await.unwrap())
}

/// Signs `account` in through `/auth/login`, the provider and `/auth/callback`: the
/// callback's status and the session cookie value, if one was set.
async fn real_sign_in(
    anonymous: &Browser,
    base: &str,
    peer: &switchboard_testkit::OidcPeer,
    account: &str,
) -> (u16, Option<String>) {
    let r = anonymous
        .request(Method::GET, base, "/auth/login")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let login = r.headers()["set-cookie"].to_str().unwrap();
    let login = login.split(';').next().unwrap().to_owned();
    let authorize = r.headers()["location"].to_str().unwrap().to_owned();
    let back = peer.drive_login(&authorize, account).await;
    let r = anonymous
        .request(Method::GET, base, &format!("/auth/callback?{}", back.query))
        .header("Cookie", login)
        .send()
        .await
        .unwrap();
    let session = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .find(|c| c.starts_with(&format!("{}=", team_support::COOKIE)))
        .and_then(|c| c.split(';').next())
        .and_then(|c| c.split_once('='))
        .map(|(_, v)| v.to_owned())
        .filter(|v| !v.is_empty());
    (r.status().as_u16(), session)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_sign_ins_and_mcp_calls_and_name_nobody() {
    let db = Db::sqlite();
    let origin = format!("http://127.0.0.1:{}", switchboard_testkit::free_port());
    let peer = oidc_provider_for(&format!("{origin}/auth/callback")).await;
    let app = Instance::start(
        &db,
        InstanceOptions {
            public_origin: Some(origin.clone()),
            sign_in: Some(team_support::sign_in_options(&peer, "admin@example.com")),
            metrics_token: Some(TOKEN.into()),
            ..Default::default()
        },
    )
    .await;
    let anonymous = Browser::new(&origin, None);
    let http = anonymous.http.clone();

    // Refused: no token, a wrong one, a Basic credential made of it.
    let url = format!("{}/metrics", app.base);
    for r in [
        http.get(&url),
        http.get(&url)
            .bearer_auth("metrics-test-token-0123456789abcdeX"),
        http.get(&url).basic_auth("x", Some(TOKEN)),
    ] {
        let r = r.send().await.unwrap();
        assert_eq!(r.status(), 401);
        assert_eq!(
            r.headers()["www-authenticate"],
            "Bearer realm=\"switchboard-metrics\""
        );
        assert!(!r.text().await.unwrap().contains("switchboard_"));
    }
    let before = scrape(&http, &app.base).await;
    for outcome in ["ok", "refused", "invalid", "failed"] {
        assert!(
            before.text.contains(&format!(
                "switchboard_signins_total{{outcome=\"{outcome}\"}} 0"
            )),
            "{}",
            before.text
        );
    }

    // alice@example.com is let in; bob@other.org is outside the allowed domain.
    let (status, cookie) = real_sign_in(&anonymous, &app.base, &peer, "alice").await;
    assert_eq!(status, 303);
    let cookie = cookie.expect("a session for alice");
    let (status, none) = real_sign_in(&anonymous, &app.base, &peer, "bob").await;
    assert_eq!((status, none), (403, None));

    // A session cookie is not the metrics token either.
    let alice = Browser::new(&origin, Some(&cookie));
    assert_eq!(alice.get(&app.base, "/metrics").await.0, 401);

    // Her server on the demo server: tools listed, echo (ok), fail (the tool's own
    // error), a tool that does not exist (an error answer: failed).
    let demo = demo_http().await;
    let (status, v) = alice
        .post(
            &app.base,
            "/api/servers",
            &json!({"name": SERVER, "url": demo}),
        )
        .await;
    assert_eq!(status, 201, "{v}");
    let (status, v) = alice
        .get(&app.base, &format!("/api/servers/{SERVER}/tools"))
        .await;
    assert_eq!(status, 200, "{v}");
    let call = |tool: &'static str, args: serde_json::Value| {
        let alice = alice.clone();
        let base = app.base.clone();
        async move {
            alice
                .post(
                    &base,
                    &format!("/api/servers/{SERVER}/call"),
                    &json!({"tool": tool, "args": args}),
                )
                .await
        }
    };
    let (status, v) = call("echo", json!({"message": "counted"})).await;
    assert_eq!(
        (status, v["result"]["content"][0]["text"].as_str()),
        (200, Some("Echo: counted")),
        "{v}"
    );
    let (status, v) = call("fail", json!({"message": "on purpose"})).await;
    assert_eq!(
        (status, &v["result"]["isError"]),
        (200, &json!(true)),
        "{v}"
    );
    let (status, v) = call("no-such-tool", json!({})).await;
    assert_eq!(status, 502, "{v}");
    // A server she does not have is no MCP call at all.
    let (status, _) = alice.get(&app.base, "/api/servers/nobody/tools").await;
    assert_eq!(status, 404);
    // A path outside the route table.
    let (status, _) = alice.get(&app.base, "/no/such/path/4242").await;
    assert_eq!(status, 404);

    let after = scrape(&http, &app.base).await;
    let delta = |name: &str, labels: &[(&str, &str)]| {
        after.value(name, labels) - before.value(name, labels)
    };
    assert_eq!(
        delta("switchboard_signins_total", &[("outcome", "ok")]),
        1.0
    );
    assert_eq!(
        delta("switchboard_signins_total", &[("outcome", "refused")]),
        1.0
    );
    assert_eq!(
        delta("switchboard_signins_total", &[("outcome", "invalid")]),
        0.0
    );
    for (method, outcome, n) in [
        ("tools/list", "ok", 1.0),
        ("tools/call", "ok", 1.0),
        ("tools/call", "tool_error", 1.0),
        ("tools/call", "failed", 1.0),
        ("tools/call", "timeout", 0.0),
        ("tools/list", "failed", 0.0),
    ] {
        assert_eq!(
            delta(
                "switchboard_mcp_calls_total",
                &[("method", method), ("outcome", outcome)]
            ),
            n,
            "{method} {outcome}: {}",
            after.text
        );
    }
    assert_eq!(
        delta(
            "switchboard_mcp_call_duration_seconds_count",
            &[("method", "tools/call")]
        ),
        3.0
    );
    assert!(
        delta(
            "switchboard_mcp_call_duration_seconds_sum",
            &[("method", "tools/call")]
        ) > 0.0
    );
    assert_eq!(after.value("switchboard_mcp_sessions_open", &[]), 1.0);
    let call_route = [("method", "POST"), ("route", "/api/servers/{name}/call")];
    assert_eq!(
        delta(
            "switchboard_http_requests_total",
            &[call_route[0], call_route[1], ("status", "2xx")]
        ),
        2.0
    );
    assert_eq!(
        delta(
            "switchboard_http_requests_total",
            &[call_route[0], call_route[1], ("status", "5xx")]
        ),
        1.0
    );
    assert_eq!(
        delta(
            "switchboard_http_request_duration_seconds_count",
            &call_route
        ),
        3.0
    );
    assert_eq!(
        delta(
            "switchboard_http_requests_total",
            &[("route", "/auth/callback"), ("status", "3xx")]
        ),
        1.0
    );
    assert_eq!(
        delta(
            "switchboard_http_requests_total",
            &[("route", "unmatched"), ("status", "4xx")]
        ),
        1.0
    );
    // Refused scrapes are requests too (alice's; the scrape that produced `after` is
    // counted after it answered).
    assert_eq!(
        delta(
            "switchboard_http_requests_total",
            &[("route", "/metrics"), ("status", "4xx")]
        ),
        1.0
    );

    // Nothing of anyone's: no email, URL, server name, raw path, cookie or token.
    let demo_authority = demo.trim_start_matches("http://").trim_end_matches("/mcp");
    for secret in [
        "alice@example.com",
        "bob@other.org",
        "admin@example.com",
        demo.as_str(),
        demo_authority,
        SERVER,
        "/no/such/path",
        "nobody",
        "no-such-tool",
        "echo",
        cookie.as_str(),
        TOKEN,
        &peer.issuer,
    ] {
        assert!(
            !after.text.contains(secret),
            "`{secret}` in: {}",
            after.text
        );
    }
    // Every label value is one of the fixed sets.
    let routes: Vec<&str> = switchboard_web::route_table()
        .iter()
        .map(|r| r.path)
        .collect();
    for (name, labels, _) in &after.samples {
        for (k, v) in labels {
            let known = match k.as_str() {
                "route" => v == "unmatched" || routes.contains(&v.as_str()),
                "method" => [
                    "GET",
                    "POST",
                    "PUT",
                    "DELETE",
                    "HEAD",
                    "OPTIONS",
                    "PATCH",
                    "other",
                    "tools/list",
                    "tools/call",
                ]
                .contains(&v.as_str()),
                "status" => ["1xx", "2xx", "3xx", "4xx", "5xx"].contains(&v.as_str()),
                "outcome" => [
                    "ok",
                    "tool_error",
                    "failed",
                    "timeout",
                    "refused",
                    "invalid",
                ]
                .contains(&v.as_str()),
                "le" => v == "+Inf" || v.parse::<f64>().is_ok(),
                _ => false,
            };
            assert!(known, "{name}: label {k}={v}");
        }
    }

    // Removing her server closes its session.
    assert_eq!(
        alice
            .delete(&app.base, &format!("/api/servers/{SERVER}"))
            .await
            .0,
        200
    );
    let last = scrape(&http, &app.base).await;
    assert_eq!(last.value("switchboard_mcp_sessions_open", &[]), 0.0);
    app.stop().await;

    // An instance without a token has no /metrics.
    let plain = Instance::start(&db, InstanceOptions::default()).await;
    let r = http
        .get(format!("{}/metrics", plain.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("SWITCHBOARD_METRICS_TOKEN")
    );
    plain.stop().await;
}
