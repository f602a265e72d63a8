//! OAuth from the command line, against real OAuth-protected servers: the Python SDK's
//! auth routes (`tests/peers/python/oauth_server.py`) and the TS SDK's `--oauth`
//! example. `$BROWSER` is a stand-in browser (`tests/peers/python/fake_browser.py`)
//! that follows the authorization redirect to the callback listener, on a free port.
//! Covers `mcp login/logout/auth`, the `mcp list` markers, tool calls with the token,
//! two processes refreshing a rotating refresh token at once, revocation, a forged
//! `state`, and that tokens never reach stdout, stderr or `mcp get`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test plays the client or peer side of the network with its own sockets and HTTP
// clients; the one-network-door rule (clippy.toml) is for shipped code.
#![allow(clippy::disallowed_methods)]

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_testkit::{fake_browser_command, free_port, spawn_oauth_python, spawn_ts_oauth};

struct Env {
    home: tempfile::TempDir,
    project: tempfile::TempDir,
    config: PathBuf,
}

impl Env {
    /// Settings with one HTTP server `name` at `url`, its callback on a free port.
    fn new(name: &str, url: &str) -> Self {
        let home = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let config = home.path().join("test-settings.json");
        let port = free_port();
        let settings = json!({
            "mcpServers": {
                name: {
                    "httpUrl": url,
                    "timeout": 20000,
                    "oauth": {"redirectUri": format!("http://localhost:{port}/oauth/callback")}
                }
            }
        });
        std::fs::write(&config, settings.to_string()).unwrap();
        Self {
            home,
            project,
            config,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_switchboard"));
        c.arg("--config")
            .arg(&self.config)
            .args(args)
            .env("SWITCHBOARD_HOME", self.home.path())
            .env("BROWSER", fake_browser_command())
            .env_remove("SWITCHBOARD_LOG")
            .env_remove("FAKE_BROWSER_STATE")
            .current_dir(self.project.path())
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn tokens_file(&self) -> PathBuf {
        self.home.path().join("mcp-oauth-tokens.json")
    }

    fn saved(&self, server: &str) -> Option<Value> {
        let text = std::fs::read_to_string(self.tokens_file()).ok()?;
        let v: Value = serde_json::from_str(&text).unwrap();
        v.as_array()?
            .iter()
            .find(|e| e["serverName"] == server)
            .cloned()
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn list_entry(env: &Env, name: &str) -> Value {
    let out = env.run(&["mcp", "list", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
        .unwrap()
}

#[tokio::test]
async fn login_call_list_auth_logout() {
    let peer = spawn_oauth_python(&[]).await;
    let env = Env::new("py", &peer.url);

    let before = list_entry(&env, "py");
    assert_eq!(before["status"], "disconnected");
    assert_eq!(before["auth"], "needs-login");
    assert!(
        before["hint"]
            .as_str()
            .unwrap()
            .contains("switchboard mcp login py"),
        "{before}"
    );

    let out = env.run(&["mcp", "login", "py", "--timeout", "30"]);
    assert!(out.status.success(), "{}\n{}", stderr(&out), peer.stderr());
    assert!(
        stdout(&out).contains("Logged in to `py`"),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains("/authorize?"),
        "the URL is shown: {}",
        stderr(&out)
    );
    let mode = std::fs::metadata(env.tokens_file())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let saved = env.saved("py").unwrap();
    let access = saved["token"]["accessToken"].as_str().unwrap().to_string();
    let refresh = saved["token"]["refreshToken"].as_str().unwrap().to_string();

    let out = env.run(&["-vv", "mcp", "call", "py", "echo", "message=hello"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("hello"), "{}", stdout(&out));

    let after = list_entry(&env, "py");
    assert_eq!(after["status"], "connected", "{after}");
    assert_eq!(after["auth"], "authenticated");
    let human = env.run(&["mcp", "list"]);
    assert!(
        stdout(&human).contains("OAuth: authenticated"),
        "{}",
        stdout(&human)
    );

    let auth = env.run(&["mcp", "auth", "--json"]);
    assert!(auth.status.success(), "{}", stderr(&auth));
    let v: Value = serde_json::from_str(&stdout(&auth)).unwrap();
    assert_eq!(v["servers"][0]["name"], "py");
    assert_eq!(v["servers"][0]["state"], "authenticated");
    assert_eq!(v["servers"][0]["refreshToken"], true);

    let get = env.run(&["mcp", "get", "py", "--json"]);
    // Tokens appear nowhere: not in any output, not in debug logs.
    for out in [&out, &human, &auth, &get] {
        for secret in [&access, &refresh] {
            assert!(!stdout(out).contains(secret.as_str()), "token on stdout");
            assert!(!stderr(out).contains(secret.as_str()), "token on stderr");
        }
    }

    let out = env.run(&["mcp", "logout", "py"]);
    assert!(
        stdout(&out).contains("Logged out of `py`"),
        "{}",
        stdout(&out)
    );
    assert_eq!(list_entry(&env, "py")["auth"], "needs-login");
    let auth = env.run(&["mcp", "auth"]);
    assert!(
        stdout(&auth).contains("needs login: run `switchboard mcp login py`"),
        "{}",
        stdout(&auth)
    );
}

#[tokio::test]
async fn two_processes_refreshing_at_once_keep_the_token() {
    // Refresh is due after 2 s; the refresh token rotates (the old one dies).
    let peer = spawn_oauth_python(&["--access-ttl", "4"]).await;
    let env = Env::new("py", &peer.url);
    let out = env.run(&["mcp", "login", "py"]);
    assert!(out.status.success(), "{}", stderr(&out));
    tokio::time::sleep(Duration::from_millis(2300)).await;

    let a = env
        .command(&["mcp", "call", "py", "echo", "message=a"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let b = env
        .command(&["mcp", "call", "py", "echo", "message=b"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(a.status.success(), "{}", stderr(&a));
    assert!(b.status.success(), "{}", stderr(&b));
    let s = switchboard_testkit::oauth_peer_stats(&peer.url).await;
    assert_eq!(
        s["refreshes"], 1,
        "one refresh, reused by the other process: {s}"
    );
    assert_eq!(s["refresh_failures"], 0, "{s}");

    // The saved (rotated) refresh token is the live one.
    tokio::time::sleep(Duration::from_millis(2300)).await;
    let out = env.run(&["mcp", "call", "py", "echo", "message=c"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        switchboard_testkit::oauth_peer_stats(&peer.url).await["refreshes"],
        2
    );
}

#[tokio::test]
async fn revoked_login_says_log_in_again() {
    let peer = spawn_oauth_python(&[]).await;
    let env = Env::new("py", &peer.url);
    assert!(env.run(&["mcp", "login", "py"]).status.success());
    let base = peer.url.trim_end_matches("/mcp").to_string();
    reqwest::Client::new()
        .post(format!("{base}/test/revoke-all"))
        .send()
        .await
        .unwrap();
    let out = env.run(&["mcp", "call", "py", "echo", "message=x"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("no longer valid"), "{err}");
    assert!(err.contains("switchboard mcp login py"), "{err}");
    assert!(env.saved("py").is_none(), "the dead login was removed");
}

#[tokio::test]
async fn forged_state_is_an_error() {
    let peer = spawn_oauth_python(&[]).await;
    let env = Env::new("py", &peer.url);
    let out = env
        .command(&["mcp", "login", "py", "--timeout", "30"])
        .env("FAKE_BROWSER_STATE", "forged")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("`state` does not match"),
        "{}",
        stderr(&out)
    );
    assert!(env.saved("py").is_none());
}

#[tokio::test]
async fn ts_sdk_example_login_and_call() {
    let peer = spawn_ts_oauth().await;
    let env = Env::new("ts", &peer.url);
    let out = env.run(&["mcp", "login", "ts"]);
    assert!(out.status.success(), "{}\n{}", stderr(&out), peer.stderr());
    let out = env.run(&["mcp", "call", "ts", "greet", "name=Switchboard"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("Switchboard"), "{}", stdout(&out));
    assert_eq!(list_entry(&env, "ts")["auth"], "authenticated");
}

#[test]
fn login_errors_name_the_fix() {
    let env = Env::new("py", "http://127.0.0.1:9/mcp");
    let out = env.run(&["mcp", "login", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no server named `nope`"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["mcp", "logout", "py"]);
    assert!(
        stdout(&out).contains("had no saved login"),
        "{}",
        stdout(&out)
    );
}

/// On a terminal (`script`, a pseudo-terminal), `mcp login` says what it waits for: the
/// browser sign-in coming back to its callback. Into a pipe it does not.
#[tokio::test(flavor = "multi_thread")]
async fn login_on_a_terminal_says_what_it_waits_for() {
    let has_script = Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_script {
        return;
    }
    let peer = spawn_oauth_python(&[]).await;
    let env = Env::new("py", &peer.url);
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(&env.config).unwrap()).unwrap();
    let callback = settings["mcpServers"]["py"]["oauth"]["redirectUri"]
        .as_str()
        .unwrap()
        .to_string();
    let piped = env.run(&["mcp", "login", "py", "--timeout", "30"]);
    assert!(piped.status.success(), "{}", stderr(&piped));
    assert!(!stderr(&piped).contains("Waiting"), "{}", stderr(&piped));
    assert!(env.run(&["mcp", "logout", "py"]).status.success());

    let bin = env!("CARGO_BIN_EXE_switchboard");
    let line = format!(
        "'{bin}' --config '{}' mcp login py --timeout 30",
        env.config.display()
    );
    // The same environment as `env.run`, the command line handed to `script`.
    let base = env.command(&[]);
    let script = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .envs(base.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .env("TERM", "xterm-256color")
        .current_dir(env.project.path())
        .output()
        .unwrap();
    let out = stdout(&script);
    assert!(script.status.success(), "{out}\n{}", peer.stderr());
    assert!(
        out.contains(&format!("Waiting for the browser sign-in at {callback}…")),
        "{out:?}"
    );
    assert!(out.contains("Logged in to `py`"), "{out:?}");
}
