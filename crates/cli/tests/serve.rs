//! `switchboard serve` as a user runs it: the printed link, token-protected API, the
//! bundled demo server on a fresh machine, Ctrl-C stops it.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test plays the client or peer side of the network with its own sockets and HTTP
// clients; the one-network-door rule (clippy.toml) is for shipped code.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Starts `switchboard serve --port 0` over `home`; returns the child and the link.
async fn start_serve(home: &Path, project: &Path) -> (Child, String) {
    start_serve_with(home, project, |_| {}).await
}

/// [`start_serve`] with more environment set by `env`.
async fn start_serve_with(
    home: &Path,
    project: &Path,
    env: impl FnOnce(&mut Command),
) -> (Child, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    command
        .args(["serve", "--port", "0"])
        .env("SWITCHBOARD_HOME", home)
        .env_remove("GEMINI_API_KEY")
        .env_remove("SWITCHBOARD_LOG")
        .env_remove("BROWSER")
        .current_dir(project)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    env(&mut command);
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line
    });
    let line = tokio::time::timeout(Duration::from_secs(30), line)
        .await
        .expect("the link within 30 s")
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("Switchboard is running at ")
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_string();
    (child, url)
}

/// Sends SIGINT and expects a clean exit within 10 s.
fn stop(child: &mut Child) {
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve did not stop on SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test]
async fn serve_prints_the_link_and_serves_the_demo_server_behind_the_token() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["serve", "--port", "0"])
        .env("SWITCHBOARD_HOME", home.path())
        .env_remove("GEMINI_API_KEY")
        .env_remove("SWITCHBOARD_LOG")
        .current_dir(project.path())
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
    let line = tokio::time::timeout(Duration::from_secs(30), line)
        .await
        .expect("the link within 30 s")
        .unwrap();
    let line = line.trim();
    let url = line
        .strip_prefix("Switchboard is running at ")
        .unwrap_or_else(|| panic!("unexpected first line: {line}"));
    let (base, token) = url.split_once("/?token=").unwrap();
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    assert_eq!(token.len(), 64);
    assert!(token.chars().all(|c| c.is_ascii_hexdigit()));

    let http = reqwest::Client::new();
    let r = http
        .get(format!("{base}/api/mcp/servers"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = http.get(format!("{base}/settings")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = http.get(url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("set-cookie").is_some());

    // A fresh machine gets the bundled demo server, as with `mcp list`.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v: Value = http
            .get(format!("{base}/api/mcp/servers"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let demo = v["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "demo")
            .cloned()
            .expect("the demo server is listed");
        if demo["status"] == "connected" {
            assert!(
                demo["tools"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|t| t["name"] == "clock")
            );
            break;
        }
        assert!(Instant::now() < deadline, "demo not connected: {demo}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let v: Value = http
        .get(format!("{base}/api/chat/status"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["available"], false);

    // Ctrl-C stops it cleanly.
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve did not stop on SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The OAuth popup flow in real headless Chromium against the Python-SDK OAuth server
/// (MCP server and authorization server in one process, auto-approving): Test says
/// the server needs OAuth, "Log in" opens the authorization URL in a popup, the
/// callback completes the login, the server connects and a tool call goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_logs_in_to_an_oauth_server_through_a_browser_popup() {
    use switchboard_testkit::{ensure_peers, free_port, repo_root, spawn_oauth_python};
    ensure_peers();
    let chromium = Path::new("/usr/bin/chromium");
    assert!(
        chromium.exists(),
        "/usr/bin/chromium is missing: `apt-get install -y chromium` (.ci/run does this)"
    );
    let peer = spawn_oauth_python(&[]).await;
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let callback = free_port();
    std::fs::write(
        home.path().join("settings.json"),
        serde_json::to_string_pretty(&json!({"mcpServers": {"secure": {
            "httpUrl": peer.url,
            "oauth": {"redirectUri": format!("http://localhost:{callback}/oauth/callback")},
        }}}))
        .unwrap(),
    )
    .unwrap();
    let (mut child, url) = start_serve(home.path(), project.path()).await;
    let browser = repo_root().join("tests").join("browser");
    let shots = repo_root().join("target").join("screenshots");
    let mut cmd = Command::new("node");
    cmd.arg(browser.join("run.mjs"))
        .current_dir(&browser)
        .env("APP_URL", &url)
        .env("SCENARIO", "oauth")
        .env("SCREENSHOT_DIR", &shots)
        .env("CHROMIUM", chromium);
    let output = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout);
    let err = String::from_utf8_lossy(&output.stderr);
    stop(&mut child);
    assert!(
        output.status.success(),
        "oauth scenario failed:\n{out}\n{err}"
    );
    assert!(out.contains("[oauth] ok"), "{out}");
    // The token is in the store `mcp login` uses, never in the settings file.
    let store = std::fs::read_to_string(home.path().join("mcp-oauth-tokens.json")).unwrap();
    assert!(store.contains("secure"), "{store}");
    let settings = std::fs::read_to_string(home.path().join("settings.json")).unwrap();
    assert!(!settings.to_lowercase().contains("access"), "{settings}");
    drop(peer);
}

/// The OAuth login that comes back to the web app itself, in real headless Chromium
/// against the Python-SDK OAuth server with dynamic registration: the registered
/// redirect is `{app}/auth/mcp-oauth-callback`; "Log in" opens a popup whose callback
/// page posts the code to the app, which exchanges it server-side; a tool call goes
/// through. Then, with `window.open` blocked, the same login in the tab itself resumes
/// at `/settings?mcp-oauth-return=1`. A replayed or forged `state` is refused with 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_logs_in_through_the_apps_own_oauth_callback() {
    use switchboard_testkit::{ensure_peers, repo_root, spawn_oauth_python};
    ensure_peers();
    let chromium = Path::new("/usr/bin/chromium");
    assert!(
        chromium.exists(),
        "/usr/bin/chromium is missing: `apt-get install -y chromium` (.ci/run does this)"
    );
    let peer = spawn_oauth_python(&[]).await;
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("settings.json"),
        serde_json::to_string_pretty(&json!({"mcpServers": {
            "popup": {"httpUrl": peer.url},
            "tab": {"httpUrl": peer.url},
        }}))
        .unwrap(),
    )
    .unwrap();
    let (mut child, url) = start_serve(home.path(), project.path()).await;
    let origin = url.split("/?token=").next().unwrap().to_string();
    let token = url.split("token=").nth(1).unwrap().to_string();

    // Straight to the token endpoint with a state nobody issued: 400, nothing saved.
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{origin}/api/settings/mcp-oauth-token"))
        .bearer_auth(&token)
        .json(&json!({"state": "forged", "code": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"], "unknown_state", "{v}");

    let browser = repo_root().join("tests").join("browser");
    let shots = repo_root().join("target").join("screenshots");
    let mut cmd = Command::new("node");
    cmd.arg(browser.join("run.mjs"))
        .current_dir(&browser)
        .env("APP_URL", &url)
        .env("SCENARIO", "oauth-callback")
        .env("SCREENSHOT_DIR", &shots)
        .env("CHROMIUM", chromium);
    let output = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout);
    let err = String::from_utf8_lossy(&output.stderr);
    stop(&mut child);
    assert!(
        output.status.success(),
        "oauth-callback scenario failed:\n{out}\n{err}"
    );
    assert!(out.contains("[oauth-callback] ok"), "{out}");
    let store = std::fs::read_to_string(home.path().join("mcp-oauth-tokens.json")).unwrap();
    assert!(store.contains("popup") && store.contains("tab"), "{store}");
    let settings = std::fs::read_to_string(home.path().join("settings.json")).unwrap();
    assert!(!settings.to_lowercase().contains("access"), "{settings}");
    // Two logins, each registered with the app's callback and exchanged once.
    let base = peer.url.trim_end_matches("/mcp");
    let stats: Value = http
        .get(format!("{base}/test/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["code_exchanges"], 2, "{stats}");
    drop(peer);
}

/// `switchboard serve` with `provider: "openai"` in the settings: the web chat uses the
/// OpenAI-compatible server named by OPENAI_BASE_URL (the fake), as `switchboard chat`
/// does, with no Gemini key.
#[tokio::test(flavor = "multi_thread")]
async fn serve_chats_with_an_openai_compatible_model_when_the_settings_say_so() {
    use switchboard_model_fakes::gemini::FakeTurn;
    use switchboard_model_fakes::openai::FakeOpenAi;
    let fake = FakeOpenAi::start(vec![FakeTurn::text("Hello from a local model.")]).await;
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("settings.json"),
        json!({"provider": "openai", "model": "local-model", "mcpServers": {}}).to_string(),
    )
    .unwrap();
    let (mut child, url) = start_serve_with(home.path(), project.path(), |c| {
        c.env_remove("GEMINI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
            .env("OPENAI_BASE_URL", &fake.base_url);
    })
    .await;
    let (base, token) = url.split_once("/?token=").unwrap();
    let http = reqwest::Client::new();
    let v: Value = http
        .get(format!("{base}/api/chat/status"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["available"], true, "{v}");
    assert_eq!(v["model"], "local-model", "{v}");
    let body = tokio::time::timeout(Duration::from_secs(30), async {
        http.post(format!("{base}/api/chat/send"))
            .bearer_auth(token)
            .header("Origin", base)
            .json(&json!({"message": "say hello"}))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    })
    .await
    .expect("the turn within 30 s");
    assert!(body.contains("Hello from a local model."), "{body}");
    assert!(body.contains(r#""type":"done""#), "{body}");
    let rec = fake.recorded();
    assert_eq!(rec.len(), 1);
    assert_eq!(rec[0].model, "local-model");
    stop(&mut child);
}
