//! Operating `switchboard serve --team`: `--log-format json` (and
//! `SWITCHBOARD_LOG_FORMAT=json`) makes every stderr line one JSON object with a level,
//! a target and the message in `fields` — through a real sign-in (the npm
//! `oidc-provider`), a server added and called (the demo server over Streamable HTTP),
//! a scrape of `/metrics`, a sign-out and Ctrl-C, at the debug level — and none of those
//! lines holds a secret (session cookie, login state, client secret, secret key, metrics
//! token, the provider's code). `/metrics` answers with `SWITCHBOARD_METRICS_TOKEN` and
//! refuses without it; a short token stops the start. A failing command's error is a
//! JSON line too; text stays the default.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test plays the client or peer side of the network with its own sockets and HTTP
// clients; the one-network-door rule (clippy.toml) is for shipped code.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchboard_testkit::{OidcPeer, free_port};

const KEY_ENV: &str = "SWITCHBOARD_SECRET_KEY";
const CLIENT_SECRET: &str = "ops-oidc-client-secret-4e7f";
const METRICS_TOKEN: &str = "ops-metrics-token-9b3a61c0d2e84f57";

fn key() -> String {
    static KEY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    KEY.get_or_init(|| switchboard_store::SecretKeys::generate_base64().unwrap())
        .clone()
}

/// `switchboard` with a throwaway home and none of the team variables of the caller.
fn command(env: &common::Env) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    c.env("HOME", env.home.path())
        .env("SWITCHBOARD_HOME", env.sb.path())
        .env_remove(KEY_ENV)
        .env_remove("SWITCHBOARD_SECRET_KEY_FILE")
        .env_remove("SWITCHBOARD_DATABASE_URL")
        .env_remove("SWITCHBOARD_OIDC_ISSUER")
        .env_remove("SWITCHBOARD_OIDC_CLIENT_ID")
        .env_remove("SWITCHBOARD_OIDC_CLIENT_SECRET")
        .env_remove("SWITCHBOARD_METRICS_TOKEN")
        .env_remove("SWITCHBOARD_METRICS_TOKEN_FILE")
        .env_remove("SWITCHBOARD_LOG")
        .env_remove("SWITCHBOARD_LOG_FORMAT")
        .current_dir(env.project.path())
        .stdin(Stdio::null());
    c
}

/// Waits at most 60 s for `c` to exit.
fn output(mut c: Command) -> std::process::Output {
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("switchboard did not exit within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// Every line of `stderr` is a JSON object with a level, a target and a message.
fn json_lines(stderr: &str) -> Vec<Value> {
    assert!(!stderr.trim().is_empty(), "nothing on stderr");
    stderr
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            assert!(v["level"].is_string(), "no level: {line}");
            assert!(v["target"].is_string(), "no target: {line}");
            assert!(v["timestamp"].is_string(), "no timestamp: {line}");
            assert!(v["fields"].is_object(), "no fields: {line}");
            v
        })
        .collect()
}

fn has_message(lines: &[Value], level: &str, needle: &str) -> bool {
    lines.iter().any(|l| {
        l["level"] == level
            && l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(needle))
    })
}

/// A `serve --team` child, killed on drop; its stderr goes to a file.
struct TeamServe {
    child: Child,
    base: String,
    stderr: std::path::PathBuf,
}

impl Drop for TeamServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TeamServe {
    /// SIGINT, a clean exit within 10 s; returns stderr.
    fn interrupt(mut self) -> String {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-INT", &pid])
                .status()
                .unwrap()
                .success()
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "{status}");
                break;
            }
            assert!(Instant::now() < deadline, "serve --team did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::fs::read_to_string(&self.stderr).unwrap()
    }
}

async fn provider_for(origin: &str) -> OidcPeer {
    switchboard_testkit::ensure_peers();
    let dir = switchboard_testkit::oidc_peer_dir();
    let port = free_port();
    let redirect_uri = format!("{origin}/auth/callback");
    let mut command = Command::new("node");
    command
        .arg(dir.join("provider.mjs"))
        .arg("--port")
        .arg(port.to_string())
        .current_dir(&dir)
        .env("OIDC_REDIRECT_URI", &redirect_uri)
        .env("OIDC_CLIENT_SECRET", CLIENT_SECRET);
    let mut process = switchboard_testkit::PeerProcess::spawn("oidc-provider", command);
    process.port = port;
    process.url = format!("http://127.0.0.1:{port}");
    process.wait_for_port(port, Duration::from_secs(30)).await;
    OidcPeer {
        issuer: format!("http://127.0.0.1:{port}"),
        client_id: switchboard_testkit::OIDC_CLIENT_ID.into(),
        secret: CLIENT_SECRET.into(),
        redirect_uris: vec![redirect_uri.clone()],
        redirect_uri,
        process,
    }
}

async fn demo_http() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = switchboard_demo_server::serve_http(
            listener,
            switchboard_demo_server::DemoOptions::default(),
        )
        .await;
    });
    format!("http://{addr}/mcp")
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// `(name, value)` of the first `Set-Cookie` for `name`.
fn set_cookie(r: &reqwest::Response, name: &str) -> String {
    r.headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .find(|c| c.starts_with(&format!("{name}=")))
        .and_then(|c| c.split(';').next())
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_of_a_team_instance_are_json_lines_without_secrets() {
    let env = common::Env::new();
    let port = free_port();
    let origin = format!("http://127.0.0.1:{port}");
    let peer = provider_for(&origin).await;
    let stderr = env.project.path().join("stderr.jsonl");
    let mut c = command(&env);
    c.args([
        "-vv",
        "--url-policy",
        "local",
        "serve",
        "--team",
        "--port",
        &port.to_string(),
        "--public-origin",
        &origin,
        "--oidc-issuer",
        &peer.issuer,
        "--allow-domain",
        "example.com",
    ])
    .env("SWITCHBOARD_LOG_FORMAT", "json")
    .env(KEY_ENV, key())
    .env("SWITCHBOARD_OIDC_CLIENT_ID", &peer.client_id)
    .env("SWITCHBOARD_OIDC_CLIENT_SECRET", CLIENT_SECRET)
    .env("SWITCHBOARD_METRICS_TOKEN", METRICS_TOKEN)
    .stdout(Stdio::piped())
    .stderr(std::fs::File::create(&stderr).unwrap());
    let mut child = c.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let serve = TeamServe {
        child,
        base: format!("http://127.0.0.1:{port}"),
        stderr,
    };
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line
    });
    let line = tokio::time::timeout(Duration::from_secs(60), line)
        .await
        .expect("the first line within 60 s")
        .unwrap();
    assert_eq!(
        line.trim(),
        format!("Switchboard (team) is running at {origin}")
    );
    let base = serve.base.clone();

    // Sign in: the login cookie, the provider's code, the session cookie.
    let r = http()
        .get(format!("{base}/auth/login"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let login = set_cookie(&r, "switchboard_login");
    let authorize = r.headers()["location"].to_str().unwrap().to_owned();
    let back = peer.drive_login(&authorize, "alice").await;
    let code = back
        .query
        .split('&')
        .find_map(|kv| kv.strip_prefix("code="))
        .unwrap()
        .to_owned();
    let r = http()
        .get(format!("{base}/auth/callback?{}", back.query))
        .header("Cookie", &login)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let cookie = set_cookie(&r, "switchboard_session");
    let api = |method: reqwest::Method, path: &str, body: Option<Value>| {
        let mut r = http()
            .request(method, format!("{base}{path}"))
            .header("Origin", &origin)
            .header("Cookie", &cookie);
        if let Some(b) = body {
            r = r.json(&b);
        }
        async move {
            let resp = r.send().await.unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let demo = demo_http().await;
    let (status, v) = api(
        reqwest::Method::POST,
        "/api/servers",
        Some(json!({"name": "demo", "url": demo, "headers": {"X-Api-Key": "ops-header-secret-c3d4"}})),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    let (status, v) = api(
        reqwest::Method::POST,
        "/api/servers/demo/call",
        Some(json!({"tool": "echo", "args": {"message": "logged"}})),
    )
    .await;
    assert_eq!(status, 200, "{v}");

    // /metrics with the token, and not without it.
    let r = http()
        .get(format!("{base}/metrics"))
        .bearer_auth(METRICS_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(
        text.contains("switchboard_signins_total{outcome=\"ok\"} 1"),
        "{text}"
    );
    assert!(text.contains("switchboard_mcp_calls_total{method=\"tools/call\",outcome=\"ok\"} 1"));
    let r = http().get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 401);

    let (status, _) = api(reqwest::Method::POST, "/auth/logout", None).await;
    assert_eq!(status, 200);
    let stderr = serve.interrupt();

    let lines = json_lines(&stderr);
    assert!(
        has_message(&lines, "INFO", "team database: sqlite://"),
        "{stderr}"
    );
    assert!(
        has_message(&lines, "INFO", "team instance listening"),
        "{stderr}"
    );
    assert!(has_message(&lines, "INFO", "Stopping"), "{stderr}");
    assert!(
        has_message(&lines, "WARN", "URL policy `local` is weaker"),
        "{stderr}"
    );
    assert!(
        lines.iter().any(|l| l["level"] == "DEBUG"),
        "-vv logs at debug: {stderr}"
    );
    let session = cookie.split_once('=').unwrap().1;
    let state = login.split_once('=').unwrap().1;
    for secret in [
        session,
        state,
        code.as_str(),
        CLIENT_SECRET,
        METRICS_TOKEN,
        key().as_str(),
        "ops-header-secret-c3d4",
    ] {
        assert!(
            !stderr.contains(secret),
            "a secret (`{secret}`) is in the log:\n{stderr}"
        );
    }
}

#[test]
fn a_failing_command_logs_its_error_as_json_and_text_stays_the_default() {
    let env = common::Env::new();
    // No secret key: the error, as a JSON line (flag and variable alike).
    let mut c = command(&env);
    c.args(["--log-format", "json", "serve", "--team", "--port", "0"]);
    let out = output(c);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines = json_lines(&stderr);
    assert!(
        has_message(&lines, "ERROR", "SWITCHBOARD_SECRET_KEY"),
        "{stderr}"
    );
    // A metrics token too short to be safe stops the start, and is not printed.
    let mut c = command(&env);
    c.args([
        "serve",
        "--team",
        "--port",
        "0",
        "--oidc-issuer",
        "http://127.0.0.1:9",
    ])
    .env("SWITCHBOARD_LOG_FORMAT", "json")
    .env(KEY_ENV, key())
    .env("SWITCHBOARD_OIDC_CLIENT_ID", "c")
    .env("SWITCHBOARD_METRICS_TOKEN", "short-tok");
    let out = output(c);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines = json_lines(&stderr);
    assert!(
        has_message(&lines, "ERROR", "SWITCHBOARD_METRICS_TOKEN")
            && has_message(&lines, "ERROR", "at least 24"),
        "{stderr}"
    );
    assert!(!stderr.contains("short-tok"), "{stderr}");
    // `db migrate` logs JSON too (its report stays on stdout).
    let db = env.project.path().join("t.db");
    let url = format!("sqlite://{}?mode=rwc", db.display());
    let mut c = command(&env);
    c.args([
        "--log-format=json",
        "-v",
        "db",
        "migrate",
        "--database",
        &url,
    ]);
    let out = output(c);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
    // Without the flag: the same error as a plain line.
    let mut c = command(&env);
    c.args(["serve", "--team", "--port", "0"]);
    let out = output(c);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(serde_json::from_str::<Value>(stderr.lines().next().unwrap()).is_err());
    // A format that does not exist is named.
    let mut c = command(&env);
    c.args(["--log-format", "xml", "url-check", "https://example.com"]);
    let out = output(c);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("xml"));
}
