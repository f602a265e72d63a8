//! Team chat with the real `switchboard serve --team` binary, a real OpenID provider, the
//! demo MCP server over Streamable HTTP and the fake Gemini (answering slowly): a turn
//! starts on instance A, asks for a confirmation that is answered through instance B,
//! runs the demo server's `echo`, and A is killed (SIGKILL) while the model's next answer
//! is still streaming. Instance B then shows every message A saved and a new turn there
//! continues the conversation with that history. On PostgreSQL A and B run at once; on
//! SQLite (one instance at a time) B is started on the same file after A died. Neither
//! the team key nor the chat's text appears in any answer or in a dump of the database.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchboard_model_fakes::FakeTurn;
use switchboard_model_fakes::gemini::{FakeGemini, FakeOptions};
use switchboard_testkit::{OidcPeer, PgCluster, free_port};

const KEY_ENV: &str = "SWITCHBOARD_SECRET_KEY";
/// The team's model key (what the fake Gemini accepts).
const TEAM_MODEL_KEY: &str = "team-gemini-key-3c9d71e0";
/// The person's first message: stored sealed, never in the dump.
const FIRST_MESSAGE: &str = "please echo chat-text-58a2";

fn secret_key() -> String {
    static KEY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    KEY.get_or_init(|| switchboard_store::SecretKeys::generate_base64().unwrap())
        .clone()
}

/// A `serve --team` child, killed on drop.
struct TeamServe {
    child: Child,
    base: String,
}

impl Drop for TeamServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Setup<'a> {
    env: &'a common::Env,
    origin: &'a str,
    peer: &'a OidcPeer,
    database: &'a str,
    gemini: &'a str,
}

impl TeamServe {
    async fn start(s: &Setup<'_>, port: u16) -> Self {
        let port_s = port.to_string();
        let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args([
                "--url-policy",
                "local",
                "serve",
                "--team",
                "--port",
                &port_s,
                "--public-origin",
                s.origin,
                "--oidc-issuer",
                &s.peer.issuer,
                "--allow-domain",
                "example.com",
                "--admin",
                "alice@example.com",
            ])
            .env("HOME", s.env.home.path())
            .env("SWITCHBOARD_HOME", s.env.sb.path())
            .env(KEY_ENV, secret_key())
            .env("SWITCHBOARD_OIDC_CLIENT_ID", &s.peer.client_id)
            .env("SWITCHBOARD_OIDC_CLIENT_SECRET", &s.peer.secret)
            .env("SWITCHBOARD_DATABASE_URL", s.database)
            .env("GEMINI_BASE_URL", s.gemini)
            .env_remove("GEMINI_API_KEY")
            .env_remove("SWITCHBOARD_LOG")
            .current_dir(s.env.project.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let line = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).unwrap();
            line
        });
        let line = tokio::time::timeout(Duration::from_secs(60), line)
            .await
            .expect("the first line within 60 s")
            .unwrap();
        assert!(line.contains("is running at"), "{line}");
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    /// SIGKILL: no shutdown, no goodbye.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

async fn sign_in(peer: &OidcPeer, base: &str, account: &str) -> String {
    let r = http()
        .get(format!("{base}/auth/login"))
        .send()
        .await
        .unwrap();
    let authorize = r.headers()["location"].to_str().unwrap().to_owned();
    let login = r.headers()["set-cookie"].to_str().unwrap();
    let login = login.split(';').next().unwrap().to_owned();
    let back = peer.drive_login(&authorize, account).await;
    let r = http()
        .get(format!("{base}/auth/callback?{}", back.query))
        .header("Cookie", login)
        .send()
        .await
        .unwrap();
    let cookie = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .find(|c| c.starts_with("switchboard_session="))
        .unwrap()
        .to_owned();
    cookie.split(';').next().unwrap().to_owned()
}

/// The page's requests, with every answer's body kept for the secret scan.
struct Page {
    origin: String,
    cookie: String,
    seen: std::sync::Mutex<String>,
}

impl Page {
    async fn call(
        &self,
        method: reqwest::Method,
        base: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut r = http()
            .request(method, format!("{base}{path}"))
            .header("Origin", &self.origin)
            .header("Cookie", &self.cookie);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        self.seen.lock().unwrap().push_str(&text);
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// `POST …/send`: the event stream, read event by event.
    async fn send(&self, base: &str, chat: &str, message: &str) -> Events {
        let r = self.post_send(base, chat, message).await;
        assert_eq!(r.status(), 200);
        Events {
            response: r,
            buf: String::new(),
        }
    }

    async fn post_send(&self, base: &str, chat: &str, message: &str) -> reqwest::Response {
        http()
            .post(format!("{base}/api/chats/{chat}/send"))
            .header("Origin", &self.origin)
            .header("Cookie", &self.cookie)
            .timeout(Duration::from_secs(120))
            .json(&json!({"message": message}))
            .send()
            .await
            .unwrap()
    }

    /// `send`, after the turn lease a killed instance left has run out: 409 (naming the
    /// wait) until then, at most ~15 s.
    async fn send_when_free(&self, base: &str, chat: &str, message: &str) -> Events {
        let until = std::time::Instant::now() + Duration::from_secs(40);
        loop {
            let r = self.post_send(base, chat, message).await;
            if r.status() == 409 && std::time::Instant::now() < until {
                let text = r.text().await.unwrap();
                assert!(text.contains("already running"), "{text}");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            assert_eq!(r.status(), 200);
            return Events {
                response: r,
                buf: String::new(),
            };
        }
    }
}

struct Events {
    response: reqwest::Response,
    buf: String,
}

impl Events {
    /// The next event (`None` when the stream ended), within 60 s.
    async fn next(&mut self, seen: &Page) -> Option<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                seen.seen.lock().unwrap().push_str(&block);
                let data: String = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if data.is_empty() {
                    continue;
                }
                return Some(serde_json::from_str(&data).unwrap());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.response.chunk()).await {
                Ok(Ok(Some(bytes))) => self.buf.push_str(&String::from_utf8_lossy(&bytes)),
                Ok(Ok(None) | Err(_)) => return None,
                Err(_) => panic!("no chat event within 60 s"),
            }
        }
    }

    /// Events up to the first of type `kind` (which is returned).
    async fn until(&mut self, seen: &Page, kind: &str) -> Value {
        loop {
            let ev = self
                .next(seen)
                .await
                .unwrap_or_else(|| panic!("the stream ended before a `{kind}` event"));
            assert_ne!(ev["type"], "error", "{ev}");
            if ev["type"] == kind {
                return ev;
            }
        }
    }
}

fn roles(chat: &Value) -> Vec<String> {
    chat["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect()
}

/// The fake's script: turn 1 calls `echo`, then answers slowly (A dies meanwhile); turn
/// 2 (on B) answers only if the history holds turn 1's saved messages.
fn script() -> Vec<FakeTurn> {
    vec![
        FakeTurn::call("mcp_demo_echo", json!({"message": "from A"})),
        FakeTurn::text("this answer is still streaming when instance A is killed"),
        FakeTurn::dynamic(|request| {
            let all = request["contents"].to_string();
            let saw = all.contains(FIRST_MESSAGE)
                && all.contains("functionCall")
                && all.contains("Echo: from A")
                && all.contains("and now?");
            if saw {
                FakeTurn::text("B continues with the saved history")
            } else {
                FakeTurn::error(400, format!("history lost: {all}"))
            }
        }),
    ]
}

/// The database as stored: `pg_dump` of PostgreSQL, or the SQLite file and its log.
fn dump(database: &str) -> Vec<u8> {
    if database.starts_with("postgres") {
        let bin = switchboard_testkit::pg_bin_dir().unwrap();
        let out = Command::new(bin.join("pg_dump"))
            .args(["--data-only", "--dbname", database])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    } else {
        let file = database
            .trim_start_matches("sqlite://")
            .split('?')
            .next()
            .unwrap();
        let mut all = Vec::new();
        for suffix in ["", "-wal"] {
            if let Ok(bytes) = std::fs::read(format!("{file}{suffix}")) {
                all.extend(bytes);
            }
        }
        assert!(!all.is_empty());
        all
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

async fn chat_survives_a_killed_instance(database: String, both_at_once: bool) {
    let env = common::Env::new();
    let (pa, pb) = (free_port(), free_port());
    let origin = format!("http://127.0.0.1:{pa}");
    let peer =
        switchboard_testkit::spawn_oidc_provider_with(switchboard_testkit::OidcPeerOptions {
            redirect_uris: vec![format!("{origin}/auth/callback")],
            default_account: None,
            numbered_users: 0,
        })
        .await;
    let gemini = FakeGemini::start_with(
        FakeOptions {
            api_key: TEAM_MODEL_KEY.into(),
            chunk_delay: Duration::from_secs(3),
        },
        script(),
    )
    .await;
    let setup = Setup {
        env: &env,
        origin: &origin,
        peer: &peer,
        database: &database,
        gemini: &gemini.base_url,
    };
    let a = TeamServe::start(&setup, pa).await;
    let mut b = if both_at_once {
        Some(TeamServe::start(&setup, pb).await)
    } else {
        None
    };
    let page = Page {
        origin: origin.clone(),
        cookie: sign_in(&peer, &a.base, "alice").await,
        seen: std::sync::Mutex::new(String::new()),
    };
    let get = reqwest::Method::GET;
    let post = reqwest::Method::POST;
    let put = reqwest::Method::PUT;

    // No key yet: the chat says how to get one. The admin sets the team key.
    let (status, v) = page
        .call(
            post.clone(),
            &a.base,
            "/api/chats",
            Some(json!({"title": "Trip"})),
        )
        .await;
    assert_eq!(status, 201, "{v}");
    let chat = v["chat"]["id"].as_str().unwrap().to_owned();
    let (status, v) = page
        .call(
            post.clone(),
            &a.base,
            &format!("/api/chats/{chat}/send"),
            Some(json!({"message": "hi"})),
        )
        .await;
    assert_eq!(status, 503, "{v}");
    assert!(v["message"].to_string().contains("team key"), "{v}");
    let (status, v) = page
        .call(
            put.clone(),
            &a.base,
            "/api/admin/model-key",
            Some(json!({"key": TEAM_MODEL_KEY})),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let (_, v) = page
        .call(get.clone(), &a.base, "/api/model-key", None)
        .await;
    assert_eq!(
        (&v["team"]["set"], &v["available"]),
        (&json!(true), &json!(true)),
        "{v}"
    );
    let demo = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(switchboard_demo_server::serve_http(
            listener,
            switchboard_demo_server::DemoOptions::default(),
        ));
        format!("http://{addr}/mcp")
    };
    let (status, _) = page
        .call(
            post.clone(),
            &a.base,
            "/api/servers",
            Some(json!({"name": "demo", "url": demo})),
        )
        .await;
    assert_eq!(status, 201);

    // The turn on A: the confirmation it asks is answered through B (or, with one
    // instance, through A).
    let mut events = page.send(&a.base, &chat, FIRST_MESSAGE).await;
    let saved = events.until(&page, "saved").await;
    assert_eq!(
        (saved["seq"].as_i64(), saved["role"].as_str()),
        (Some(1), Some("user"))
    );
    let ask = events.until(&page, "confirm").await;
    assert_eq!(
        (ask["server"].as_str(), ask["tool"].as_str()),
        (Some("demo"), Some("echo"))
    );
    let answer_at = b.as_ref().map_or(a.base.clone(), |b| b.base.clone());
    let (_, v) = page
        .call(get.clone(), &answer_at, &format!("/api/chats/{chat}"), None)
        .await;
    assert_eq!(v["confirmations"][0]["id"], ask["id"], "{v}");
    let (status, v) = page
        .call(
            post.clone(),
            &answer_at,
            &format!("/api/chats/{chat}/confirm"),
            Some(json!({"id": ask["id"], "decision": "server"})),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let end = events.until(&page, "tool-end").await;
    assert_eq!(
        end["display"].as_str().map(|d| d.contains("Echo: from A")),
        Some(true),
        "{end}"
    );
    // The tool result is saved, the model's next answer is streaming slowly: kill A.
    let saved = events.until(&page, "saved").await;
    assert_eq!(
        (saved["seq"].as_i64(), saved["role"].as_str()),
        (Some(3), Some("tool"))
    );
    let text = events.until(&page, "text").await;
    assert!(text["text"].is_string());
    a.kill();
    assert!(events.next(&page).await.is_none_or(|e| e["type"] != "done"));

    let b = match b.take() {
        Some(b) => b,
        None => TeamServe::start(&setup, pb).await,
    };
    let (status, v) = page
        .call(get.clone(), &b.base, &format!("/api/chats/{chat}"), None)
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(roles(&v), ["user", "model", "tool"], "{v}");
    assert_eq!(
        v["messages"][0]["content"]["parts"][0]["text"],
        FIRST_MESSAGE
    );
    assert!(
        v["messages"][1]["content"]
            .to_string()
            .contains("mcp_demo_echo"),
        "{v}"
    );
    assert!(
        v["messages"][2]["content"]
            .to_string()
            .contains("Echo: from A"),
        "{v}"
    );
    assert_eq!(v["confirmations"], json!([]), "{v}");

    // A new turn on B continues the conversation (the fake checks the history).
    // (The killed turn's lease holds the chat for at most 15 s.)
    let mut events = page.send_when_free(&b.base, &chat, "and now?").await;
    let done = events.until(&page, "done").await;
    assert_eq!(done["text"], "B continues with the saved history");
    let (_, v) = page
        .call(get.clone(), &b.base, &format!("/api/chats/{chat}"), None)
        .await;
    assert_eq!(roles(&v), ["user", "model", "tool", "user", "model"], "{v}");
    let (_, v) = page.call(get.clone(), &b.base, "/api/chats", None).await;
    assert_eq!(v["chats"][0]["title"], "Trip", "{v}");
    // Every request to the model carried the team key; nothing else did.
    assert_eq!(gemini.remaining(), 0);

    // Nothing secret in any answer or in the database as stored.
    let seen = page.seen.lock().unwrap().clone();
    assert!(
        !seen.contains(TEAM_MODEL_KEY),
        "an answer showed the team key"
    );
    let dump = dump(&database);
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    for secret in [TEAM_MODEL_KEY, FIRST_MESSAGE, "Echo: from A"] {
        assert!(
            !contains(&dump, secret.as_bytes()),
            "`{secret}` is in the dump"
        );
        assert!(
            !contains(&dump, hex(secret).as_bytes()),
            "`{secret}` is in the dump (hex)"
        );
    }
    assert!(
        contains(&dump, b"Trip"),
        "the dump is readable (titles are in clear)"
    );
    drop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_two_instances_one_killed_mid_turn() {
    let cluster = PgCluster::start();
    let database = cluster.create_database("team");
    chat_survives_a_killed_instance(database, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_one_instance_killed_mid_turn_and_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}/team.db?mode=rwc", dir.path().display());
    chat_survives_a_killed_instance(database, false).await;
    drop(dir);
}
