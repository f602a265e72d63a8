//! The team gateway's authorization server against a hostile public: what anyone on the
//! network can send it. Dynamic registration (`POST /oauth/register`) is bounded per field
//! and per request (400 `invalid_client_metadata` naming the field, 413 past 8 KiB), per
//! address (429 with `Retry-After`), and in the number of clients waiting for their first
//! approval (the oldest purged first, counted in the store, so it holds across
//! instances). Client ID Metadata Documents: a client whose `client_id` is the URL of its
//! metadata document completes the flow with no registration (the document served on
//! 127.0.0.1 by the test, fetched once and cached); a document whose `client_id` differs,
//! that is too large, too slow, redirected, not JSON, carries a secret, or sits on an
//! address the URL policy refuses is refused on our own page (nothing is sent to the
//! client). The consent page shows a client name's bidi overrides as visible escapes.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use reqwest::Method;
use serde_json::{Value, json};
use switchboard_net::UrlPolicy;
use team_support::{Browser, Db, Instance, InstanceOptions, hidden_fields};

const REDIRECT: &str = "http://127.0.0.1:7/cb";

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The authorization request path for `client_id` sending the code to `redirect`.
fn authorize_path(client_id: &str, redirect: &str) -> String {
    format!(
        "/oauth/authorize?response_type=code&client_id={}&redirect_uri={}&code_challenge={}&code_challenge_method=S256&state=st",
        enc(client_id),
        enc(redirect),
        team_support::PKCE_CHALLENGE
    )
}

/// `GET /oauth/authorize` as the signed-in browser: status, `Location` (if any), page.
async fn authorize(browser: &Browser, base: &str, path: &str) -> (u16, Option<String>, String) {
    let r = browser
        .request(Method::GET, base, path)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let location = r
        .headers()
        .get("location")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, location, r.text().await.unwrap())
}

async fn form_post(base: &str, path: &str, form: &[(&str, &str)]) -> (u16, Value) {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form.iter())
        .finish();
    let r = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn register(base: &str, body: &Value) -> (u16, Option<String>, Value) {
    register_raw(base, body.to_string()).await
}

async fn register_raw(base: &str, body: String) -> (u16, Option<String>, Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}/oauth/register"))
        .header("Content-Type", "application/json")
        .body(body)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, retry, r.json().await.unwrap_or(Value::Null))
}

/// The consent page shows the client's name with bidi overrides and isolates made
/// visible (`\u{202e}`), the terminal's rule, so "Good\u{202e}exe.txt" cannot read as
/// another name; the raw characters are nowhere on the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consent_page_shows_bidi_overrides_as_escapes() {
    let db = Db::sqlite();
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let store = db.store().await;
    let (_, session) = team_support::sign_in(&store, "alice@example.com", false).await;
    let browser = Browser::new(app.origin(), Some(&session));
    let name = "Trusted \u{202e}txt.exe\u{2066}x\u{2069}\u{200f}\u{61c}";
    let (status, _, reg) = register(
        &app.base,
        &json!({"redirect_uris": [REDIRECT], "client_name": name}),
    )
    .await;
    assert_eq!(status, 201, "{reg}");
    let client = reg["client_id"].as_str().unwrap();
    let (status, _, html) = authorize(&browser, &app.base, &authorize_path(client, REDIRECT)).await;
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains("Trusted \\u{202e}txt.exe\\u{2066}x\\u{2069}\\u{200f}\\u{61c}"),
        "{html}"
    );
    for c in ['\u{202e}', '\u{2066}', '\u{2069}', '\u{200f}', '\u{61c}'] {
        assert!(!html.contains(c), "raw {c:?} on the page: {html}");
    }
    app.stop().await;
}

/// Each field a registration may carry has a size; past it the registration is refused
/// with 400 `invalid_client_metadata` (`invalid_redirect_uri` for redirect URIs) naming
/// the field, and a request past 8 KiB is 413. Nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_fields_have_sizes() {
    let db = Db::sqlite();
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let long = |n: usize| "a".repeat(n);
    let cases = [
        (
            json!({"redirect_uris": [REDIRECT], "client_name": long(101)}),
            "invalid_client_metadata",
            "client_name",
        ),
        (
            json!({"redirect_uris": (0..9).map(|i| format!("http://127.0.0.1:{}/cb", 1000 + i)).collect::<Vec<_>>()}),
            "invalid_redirect_uri",
            "redirect_uris",
        ),
        (
            json!({"redirect_uris": [format!("https://app.example/{}", long(2100))]}),
            "invalid_redirect_uri",
            "redirect_uris",
        ),
        (
            json!({"redirect_uris": [REDIRECT], "scope": format!("mcp {}", long(300))}),
            "invalid_client_metadata",
            "scope",
        ),
        (
            json!({"redirect_uris": [REDIRECT], "software_id": long(300)}),
            "invalid_client_metadata",
            "software_id",
        ),
        (
            json!({"redirect_uris": [REDIRECT], "software_version": long(300)}),
            "invalid_client_metadata",
            "software_version",
        ),
        (
            json!({"redirect_uris": [REDIRECT], "logo_uri": format!("https://app.example/{}", long(2100))}),
            "invalid_client_metadata",
            "logo_uri",
        ),
        (
            json!({"redirect_uris": [REDIRECT], "contacts": (0..20).map(|i| format!("a{i}@example.com")).collect::<Vec<_>>()}),
            "invalid_client_metadata",
            "contacts",
        ),
    ];
    for (body, error, field) in cases {
        let (status, _, v) = register(&app.base, &body).await;
        assert_eq!((status, v["error"].as_str()), (400, Some(error)), "{v}");
        let why = v["error_description"].as_str().unwrap();
        assert!(why.contains(field), "{field}: {why}");
    }
    // The whole request: 8 KiB at most.
    let padded = json!({"redirect_uris": [REDIRECT], "x": long(9000)});
    let (status, _, v) = register(&app.base, &padded).await;
    assert_eq!(
        (status, v["error"].as_str()),
        (413, Some("invalid_client_metadata"))
    );
    assert!(
        v["error_description"].as_str().unwrap().contains("8 KiB"),
        "{v}"
    );
    // A good one still passes.
    let (status, _, v) = register(
        &app.base,
        &json!({"redirect_uris": [REDIRECT], "client_name": long(100), "scope": "mcp",
                "software_id": "sdk", "software_version": "1.0"}),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    app.stop().await;
}

/// The report's attack: 300 registrations of 16 KB from one address in a row. Every one
/// is refused: the first ones by the request size, the rest by the per-address limit
/// (429 with `Retry-After`), which then also refuses a well-formed registration; nothing
/// reaches the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_registrations_from_one_address_is_refused() {
    let db = Db::sqlite();
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let big = json!({"redirect_uris": [REDIRECT], "client_name": "flood",
                     "pad": "p".repeat(16_000)})
    .to_string();
    let started = Instant::now();
    let (mut too_large, mut limited, mut created) = (0, 0, 0);
    for _ in 0..300 {
        let (status, retry, v) = register_raw(&app.base, big.clone()).await;
        match status {
            413 => too_large += 1,
            429 => {
                limited += 1;
                let secs: u64 = retry.expect("Retry-After on a 429").parse().unwrap();
                assert!((1..=60).contains(&secs), "{secs}");
                assert!(
                    v["error_description"].as_str().unwrap().contains("address"),
                    "{v}"
                );
            }
            201 => created += 1,
            other => panic!("{other}: {v}"),
        }
    }
    assert_eq!(created, 0, "a 16 KB registration is stored");
    assert!(too_large <= 20, "{too_large} answered before the limit");
    assert!(limited >= 280, "only {limited} of 300 limited");
    assert!(started.elapsed() < Duration::from_secs(60));
    let (status, retry, v) = register(&app.base, &json!({"redirect_uris": [REDIRECT]})).await;
    assert_eq!(status, 429, "{v}");
    assert!(retry.is_some());
    app.stop().await;
}

/// What the test's document server answers, by path.
struct Docs {
    base: String,
    hits: AtomicUsize,
}

fn document(client_id: &str, name: &str) -> Value {
    json!({
        "client_id": client_id,
        "client_name": name,
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    })
}

async fn serve_doc(State(docs): State<Arc<Docs>>, Path(file): Path<String>) -> Response {
    docs.hits.fetch_add(1, Ordering::SeqCst);
    let own = format!("{}/{file}", docs.base);
    let json_answer = |v: Value| {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
        h.insert(header::CACHE_CONTROL, "max-age=60".parse().unwrap());
        (StatusCode::OK, h, v.to_string()).into_response()
    };
    match file.as_str() {
        "client.json" => json_answer(document(&own, "Doc Client")),
        "bidi.json" => json_answer(document(&own, "Doc \u{202e}gnp.exe")),
        "mismatch.json" => json_answer(document(&format!("{}/client.json", docs.base), "Impostor")),
        "big.json" => {
            let mut d = document(&own, "Big");
            d["padding"] = json!("b".repeat(70 * 1024));
            json_answer(d)
        }
        "slow.json" => {
            tokio::time::sleep(Duration::from_secs(20)).await;
            json_answer(document(&own, "Slow"))
        }
        "redirect.json" => (
            StatusCode::FOUND,
            [(header::LOCATION, format!("{}/client.json", docs.base))],
        )
            .into_response(),
        "page.json" => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/html")],
            document(&own, "Page").to_string(),
        )
            .into_response(),
        "secret.json" => {
            let mut d = document(&own, "Secret");
            d["client_secret"] = json!("s3cret");
            d["token_endpoint_auth_method"] = json!("client_secret_basic");
            json_answer(d)
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The test's document server on 127.0.0.1 (stopped when dropped).
struct DocServer {
    docs: Arc<Docs>,
    task: tokio::task::JoinHandle<()>,
}

impl DocServer {
    async fn start() -> Self {
        let port = switchboard_testkit::free_port();
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        let docs = Arc::new(Docs {
            base: format!("http://127.0.0.1:{port}"),
            hits: AtomicUsize::new(0),
        });
        let router = axum::Router::new()
            .route("/{file}", axum::routing::get(serve_doc))
            .with_state(Arc::clone(&docs));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self { docs, task }
    }

    fn url(&self, file: &str) -> String {
        format!("{}/{file}", self.docs.base)
    }
}

impl Drop for DocServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A client identified by its metadata document's URL: the authorization server says it
/// takes them, the consent page names the client and the document's host, the code is
/// exchanged and the refresh token spent with that URL as `client_id`, the user's list
/// of connected clients shows it, and the document was fetched once (cached). Nothing was
/// registered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_document_client_completes_the_flow() {
    let db = Db::sqlite();
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let docs = DocServer::start().await;
    let store = db.store().await;
    let (_, session) = team_support::sign_in(&store, "alice@example.com", false).await;
    let browser = Browser::new(app.origin(), Some(&session));
    let (status, meta) = Browser::new(app.origin(), None)
        .get(&app.base, "/.well-known/oauth-authorization-server")
        .await;
    assert_eq!(status, 200);
    assert_eq!(meta["client_id_metadata_document_supported"], json!(true));

    let client_id = docs.url("client.json");
    let (status, _, html) =
        authorize(&browser, &app.base, &authorize_path(&client_id, REDIRECT)).await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("Doc Client"), "{html}");
    let host = client_id
        .strip_prefix("http://")
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    assert!(
        html.contains(&host),
        "the document's host on the page: {html}"
    );
    let mut fields = hidden_fields(&html);
    fields.push(("decision".into(), "allow".into()));
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields.iter())
        .finish();
    let r = browser
        .request(Method::POST, &app.base, "/oauth/authorize")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let to = r.headers()["location"].to_str().unwrap().to_owned();
    assert!(to.starts_with(REDIRECT), "{to}");
    let code = url::Url::parse(&to)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "code")
        .unwrap()
        .1
        .into_owned();
    let (status, tokens) = form_post(
        &app.base,
        "/oauth/token",
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("client_id", &client_id),
            ("redirect_uri", REDIRECT),
            ("code_verifier", team_support::PKCE_VERIFIER),
        ],
    )
    .await;
    assert_eq!(status, 200, "{tokens}");
    let access = tokens["access_token"].as_str().unwrap();
    let (status, _, v) = team_support::mcp_request(
        &app.base,
        access,
        Method::POST,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    // Another client's id does not spend this client's refresh token.
    let refresh = tokens["refresh_token"].as_str().unwrap();
    let (status, _) = form_post(
        &app.base,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh),
            ("client_id", &docs.url("other.json")),
        ],
    )
    .await;
    assert_eq!(status, 400);
    let (status, v) = form_post(
        &app.base,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh),
            ("client_id", &client_id),
        ],
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let (status, grants) = browser.get(&app.base, "/api/gateway/grants").await;
    assert_eq!(status, 200);
    assert_eq!(grants["grants"][0]["client_name"], "Doc Client", "{grants}");
    assert_eq!(
        docs.docs.hits.load(Ordering::SeqCst),
        1,
        "fetched once for the page and the approval"
    );
    // A bidi override in a document's name is shown escaped too.
    let (status, _, html) = authorize(
        &browser,
        &app.base,
        &authorize_path(&docs.url("bidi.json"), REDIRECT),
    )
    .await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("Doc \\u{202e}gnp.exe"), "{html}");
    assert!(!html.contains('\u{202e}'), "{html}");
    app.stop().await;
}

/// Documents that must not make a client: each is refused on our own page (400, no
/// redirect to the client), saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_metadata_documents_are_refused() {
    let db = Db::sqlite();
    let app = Instance::start(&db, InstanceOptions::default()).await;
    let docs = DocServer::start().await;
    let store = db.store().await;
    let (_, session) = team_support::sign_in(&store, "alice@example.com", false).await;
    let browser = Browser::new(app.origin(), Some(&session));
    let cases = [
        (
            docs.url("mismatch.json"),
            REDIRECT,
            "is not the URL it was fetched from",
        ),
        (docs.url("big.json"), REDIRECT, "larger than 64 KiB"),
        (docs.url("redirect.json"), REDIRECT, "redirect"),
        (docs.url("page.json"), REDIRECT, "application/json"),
        (docs.url("secret.json"), REDIRECT, "client_secret"),
        (docs.url("missing.json"), REDIRECT, "404"),
        (
            docs.url("client.json"),
            "http://127.0.0.1:8/elsewhere",
            "not one of the client",
        ),
        // The URL guard: a cloud metadata address stays blocked under `local`.
        (
            "http://169.254.169.254/latest/client.json".to_owned(),
            REDIRECT,
            "URL policy",
        ),
        // A URL without a path is no client id.
        (docs.docs.base.clone(), REDIRECT, "path"),
    ];
    for (client_id, redirect, why) in cases {
        let (status, location, html) =
            authorize(&browser, &app.base, &authorize_path(&client_id, redirect)).await;
        assert_eq!(status, 400, "{client_id}: {html}");
        assert!(location.is_none(), "{client_id}");
        assert!(
            html.contains(why),
            "{client_id}: expected {why:?} in {html}"
        );
    }
    // A document that does not come within 5 s.
    let started = Instant::now();
    let (status, _, html) = authorize(
        &browser,
        &app.base,
        &authorize_path(&docs.url("slow.json"), REDIRECT),
    )
    .await;
    assert_eq!(status, 400, "{html}");
    assert!(html.contains("within 5 s"), "{html}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // Nothing refused was cached: the redirect was not followed (one hit per request).
    let hits = docs.docs.hits.load(Ordering::SeqCst);
    assert_eq!(
        hits, 8,
        "one fetch per document, none for the blocked address or redirect target"
    );
    app.stop().await;

    // Under the default `strict` policy: http is not a client id, and loopback is blocked.
    let strict = Instance::start(
        &db,
        InstanceOptions {
            url_policy: Some(UrlPolicy::Strict),
            ..Default::default()
        },
    )
    .await;
    let browser = Browser::new(strict.origin(), Some(&session));
    let port = docs.docs.base.rsplit(':').next().unwrap().to_owned();
    for (client_id, why) in [
        (docs.url("client.json"), "https"),
        (
            format!("https://127.0.0.1:{port}/client.json"),
            "URL policy",
        ),
    ] {
        let (status, location, html) = authorize(
            &browser,
            &strict.base,
            &authorize_path(&client_id, REDIRECT),
        )
        .await;
        assert_eq!(status, 400, "{client_id}: {html}");
        assert!(location.is_none());
        assert!(
            html.contains(why),
            "{client_id}: expected {why:?} in {html}"
        );
    }
    assert_eq!(
        docs.docs.hits.load(Ordering::SeqCst),
        hits,
        "nothing fetched under strict"
    );
    strict.stop().await;
}

/// The instance's cap on registered clients nobody approved (here 5): twelve
/// registrations leave the newest five, the oldest are purged first; the store's count
/// says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_registrations_never_exceed_the_cap() {
    let db = Db::sqlite();
    let mut o = switchboard_web::TeamOptions::new(db.store().await);
    o.port = 0;
    o.url_policy = UrlPolicy::Local;
    o.registration = switchboard_web::RegistrationLimits {
        per_address_burst: 100,
        per_address_every: Duration::from_millis(1),
        max_pending_clients: 5,
    };
    let running = switchboard_web::start_team(o).await.unwrap();
    let base = format!("http://{}", running.addr);
    let store = db.store().await;
    let mut ids = Vec::new();
    for i in 0..12 {
        let (status, _, v) = register(
            &base,
            &json!({"redirect_uris": [REDIRECT], "client_name": format!("c{i}")}),
        )
        .await;
        assert_eq!(status, 201, "{v}");
        ids.push(v["client_id"].as_str().unwrap().to_owned());
        assert!(store.pending_gateway_clients().await.unwrap() <= 5);
    }
    assert_eq!(store.pending_gateway_clients().await.unwrap(), 5);
    for (i, id) in ids.iter().enumerate() {
        let kept = store.gateway_client(id).await.unwrap().is_some();
        assert_eq!(kept, i >= 7, "client {i}");
    }
    running.shutdown().await;
}
