//! `switchboard serve --team` as an operator runs it: the secret key and the issuer are
//! required (with the command to make a key), personal-only flags are refused, and the
//! real binary signs people in with a real OpenID provider, keeps their servers in the
//! team database (the default SQLite file, or PostgreSQL shared by two binaries) and
//! calls the demo server over Streamable HTTP for them; Ctrl-C stops it.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test plays the client or peer side of the network with its own sockets and HTTP
// clients; the one-network-door rule (clippy.toml) is for shipped code.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchboard_testkit::{OidcPeer, PgCluster, free_port};

const KEY_ENV: &str = "SWITCHBOARD_SECRET_KEY";

fn team_key() -> String {
    static KEY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    KEY.get_or_init(|| switchboard_store::SecretKeys::generate_base64().unwrap())
        .clone()
}

/// `switchboard ARGS` in `env` with `vars`, stdin closed; waits at most 60 s.
fn run_with(env: &common::Env, args: &[&str], vars: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    c.args(args)
        .env("HOME", env.home.path())
        .env("SWITCHBOARD_HOME", env.sb.path())
        .env_remove(KEY_ENV)
        .env_remove("SWITCHBOARD_SECRET_KEY_FILE")
        .env_remove("SWITCHBOARD_DATABASE_URL")
        .env_remove("SWITCHBOARD_OIDC_ISSUER")
        .env_remove("SWITCHBOARD_OIDC_CLIENT_ID")
        .env_remove("SWITCHBOARD_OIDC_CLIENT_SECRET")
        .env_remove("SWITCHBOARD_LOG")
        .current_dir(env.project.path())
        .stdin(Stdio::null());
    for (k, v) in vars {
        c.env(k, v);
    }
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("switchboard {args:?} did not exit within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn team_mode_names_what_it_needs_and_refuses_personal_only_flags() {
    let env = common::Env::new();
    let key = team_key();
    let issuer = ("SWITCHBOARD_OIDC_CLIENT_ID", "c");
    for (args, vars, wanted) in [
        (
            // Everything missing is named at once, each with how to set it.
            vec!["serve", "--team", "--port", "0"],
            vec![],
            vec![
                "missing 3 settings",
                "set SWITCHBOARD_SECRET_KEY to 32 random bytes in base64",
                "openssl rand -base64 32",
                "SWITCHBOARD_SECRET_KEY_FILE",
                "pass --oidc-issuer URL (or set SWITCHBOARD_OIDC_ISSUER)",
                "set SWITCHBOARD_OIDC_CLIENT_ID",
            ],
        ),
        (
            vec![
                "serve",
                "--team",
                "--port",
                "0",
                "--oidc-issuer",
                "http://127.0.0.1:9",
            ],
            vec![],
            vec![
                "missing 2 settings",
                "SWITCHBOARD_SECRET_KEY",
                "SWITCHBOARD_OIDC_CLIENT_ID",
            ],
        ),
        (
            vec!["serve", "--team", "--port", "0"],
            vec![(KEY_ENV, key.as_str())],
            vec!["--oidc-issuer", "SWITCHBOARD_OIDC_CLIENT_ID"],
        ),
        (
            vec![
                "serve",
                "--team",
                "--port",
                "0",
                "--oidc-issuer",
                "http://127.0.0.1:9",
            ],
            vec![(KEY_ENV, key.as_str())],
            vec!["SWITCHBOARD_OIDC_CLIENT_ID"],
        ),
        (
            vec![
                "serve",
                "--team",
                "--port",
                "0",
                "--host",
                "0.0.0.0",
                "--oidc-issuer",
                "http://127.0.0.1:9",
            ],
            vec![(KEY_ENV, key.as_str()), issuer],
            vec!["needs --public-origin"],
        ),
        (
            vec!["serve", "--team", "--sandbox-origin", "https://s.example"],
            vec![],
            vec!["--sandbox-origin"],
        ),
        (
            vec!["serve", "--allow-domain", "example.com"],
            vec![],
            vec!["--team"],
        ),
        (
            vec!["serve", "--team", "--database", "mysql://u@h/db"],
            vec![(KEY_ENV, key.as_str())],
            vec!["unsupported scheme `mysql`"],
        ),
    ] {
        let out = run_with(&env, &args, &vars);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded: {stderr}");
        assert!(!stderr.contains("to a key is"), "{stderr}");
        for w in wanted {
            assert!(stderr.contains(w), "{args:?}: `{w}` missing from: {stderr}");
        }
    }
}

/// How [`TeamServe::launch`] starts `serve --team`.
struct Launch<'a> {
    /// `SWITCHBOARD_DATABASE_URL` (default: the SQLite file in the home).
    database: Option<&'a str>,
    /// Flags after the usual ones.
    extra: &'a [&'a str],
    /// `--url-policy` (`None`: team mode's default, strict).
    url_policy: Option<&'a str>,
    /// The secret key (default: [`team_key`]).
    key: Option<&'a str>,
}

impl Default for Launch<'_> {
    fn default() -> Self {
        Self {
            database: None,
            extra: &[],
            url_policy: Some("local"),
            key: None,
        }
    }
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

impl TeamServe {
    /// `serve --team --port PORT --public-origin ORIGIN` with the sign-in of `peer`.
    async fn start(
        env: &common::Env,
        port: u16,
        origin: &str,
        peer: &OidcPeer,
        database: Option<&str>,
    ) -> Self {
        Self::start_with(env, port, origin, peer, (database, &[])).await
    }

    /// [`TeamServe::start`] with `extra` flags after the usual ones.
    async fn start_with(
        env: &common::Env,
        port: u16,
        origin: &str,
        peer: &OidcPeer,
        (database, extra): (Option<&str>, &[&str]),
    ) -> Self {
        let launch = Launch {
            database,
            extra,
            ..Launch::default()
        };
        Self::launch(env, port, origin, &peer.issuer, &peer.secret, launch).await
    }

    /// `serve --team` against `issuer` as `launch` says.
    async fn launch(
        env: &common::Env,
        port: u16,
        origin: &str,
        issuer: &str,
        client_secret: &str,
        launch: Launch<'_>,
    ) -> Self {
        let Launch {
            database,
            extra,
            url_policy,
            key,
        } = launch;
        let mut c = Command::new(env!("CARGO_BIN_EXE_switchboard"));
        let port_s = port.to_string();
        if let Some(policy) = url_policy {
            c.args(["--url-policy", policy]);
        }
        c.args([
            "serve",
            "--team",
            "--port",
            &port_s,
            "--public-origin",
            origin,
            "--oidc-issuer",
            issuer,
            "--allow-domain",
            "example.com",
            "--admin",
            "alice@example.com",
        ])
        .args(extra)
        .env("HOME", env.home.path())
        .env("SWITCHBOARD_HOME", env.sb.path())
        .env(KEY_ENV, key.map_or_else(team_key, str::to_owned))
        .env_remove("SWITCHBOARD_SECRET_KEY_PREVIOUS")
        .env(
            "SWITCHBOARD_OIDC_CLIENT_ID",
            switchboard_testkit::OIDC_CLIENT_ID,
        )
        .env("SWITCHBOARD_OIDC_CLIENT_SECRET", client_secret)
        .env_remove("SWITCHBOARD_DATABASE_URL")
        .env_remove("SWITCHBOARD_LOG")
        .current_dir(env.project.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
        if let Some(db) = database {
            c.env("SWITCHBOARD_DATABASE_URL", db);
        }
        let mut child = c.spawn().unwrap();
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
        assert_eq!(
            line.trim(),
            format!("Switchboard (team) is running at {origin}")
        );
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    /// SIGINT; a clean exit within 10 s.
    fn interrupt(mut self) {
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
                return;
            }
            assert!(
                Instant::now() < deadline,
                "serve --team did not stop on SIGINT"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The real provider, its clients registered for `origin`'s callback.
async fn provider_for(origin: &str) -> OidcPeer {
    switchboard_testkit::spawn_oidc_provider_with(switchboard_testkit::OidcPeerOptions {
        redirect_uris: vec![format!("{origin}/auth/callback")],
        default_account: None,
        ..Default::default()
    })
    .await
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

/// Signs `account` in: the login starts at `start` and the callback lands at `finish`.
/// Returns the session cookie (`name=value`).
async fn sign_in(peer: &OidcPeer, start: &str, finish: &str, account: &str) -> String {
    let r = http()
        .get(format!("{start}/auth/login"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let authorize = r.headers()["location"].to_str().unwrap().to_owned();
    // The login cookie ties the callback to this browser.
    let login = r.headers()["set-cookie"].to_str().unwrap();
    assert!(login.starts_with("switchboard_login="), "{login}");
    let login = login.split(';').next().unwrap().to_owned();
    let back = peer.drive_login(&authorize, account).await;
    let r = http()
        .get(format!("{finish}/auth/callback?{}", back.query))
        .header("Cookie", login)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let cookie = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .find(|c| c.starts_with("switchboard_session="))
        .unwrap()
        .to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    cookie.split(';').next().unwrap().to_owned()
}

/// A request as the app's page makes it.
async fn api(
    method: reqwest::Method,
    base: &str,
    path: &str,
    origin: &str,
    cookie: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut r = http()
        .request(method, format!("{base}{path}"))
        .header("Origin", origin)
        .header("Cookie", cookie);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_team_on_the_default_sqlite_file() {
    let env = common::Env::new();
    let port = free_port();
    let origin = format!("http://127.0.0.1:{port}");
    let peer = provider_for(&origin).await;
    let serve = TeamServe::start(&env, port, &origin, &peer, None).await;
    let base = serve.base.clone();

    for (path, status) in [("/healthz", "ok"), ("/readyz", "ready")] {
        let v: Value = http()
            .get(format!("{base}{path}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["status"], status);
    }
    let db = env.sb.path().join("team.db");
    let mode = std::fs::metadata(&db).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", db.display());

    let cookie = sign_in(&peer, &base, &base, "alice").await;
    let (status, v) = api(
        reqwest::Method::GET,
        &base,
        "/api/me",
        &origin,
        &cookie,
        None,
    )
    .await;
    assert_eq!((status, v["admin"].as_bool()), (200, Some(true)), "{v}");
    let demo = demo_http().await;
    let (status, v) = api(
        reqwest::Method::POST,
        &base,
        "/api/servers",
        &origin,
        &cookie,
        Some(json!({"name": "demo", "url": demo})),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    let (status, v) = api(
        reqwest::Method::POST,
        &base,
        "/api/servers/demo/call",
        &origin,
        &cookie,
        Some(json!({"tool": "echo", "args": {"message": "team"}})),
    )
    .await;
    assert_eq!(
        (status, v["result"]["content"][0]["text"].as_str()),
        (200, Some("Echo: team")),
        "{v}"
    );
    let (status, _) = api(
        reqwest::Method::POST,
        &base,
        "/api/servers",
        &origin,
        &cookie,
        Some(json!({"name": "sh", "command": "sh", "args": ["-c", "true"]})),
    )
    .await;
    assert_eq!(status, 400);
    serve.interrupt();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_binaries_share_one_postgres_database() {
    let cluster = PgCluster::start();
    let database = cluster.create_database("team");
    let env = common::Env::new();
    let (p1, p2) = (free_port(), free_port());
    // Both behind one public origin: the first one's address.
    let origin = format!("http://127.0.0.1:{p1}");
    let peer = provider_for(&origin).await;
    let one = TeamServe::start(&env, p1, &origin, &peer, Some(&database)).await;
    let two = TeamServe::start(&env, p2, &origin, &peer, Some(&database)).await;

    // Migrated at start: `db migrate` finds nothing to do.
    let out = run_with(&env, &["db", "migrate", "--database", &database], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("up to date"),
        "{stdout}"
    );
    assert!(!stdout.contains(switchboard_testkit::PG_PASSWORD));

    // Started on one, completed on two; the session works on both.
    let cookie = sign_in(&peer, &one.base, &two.base, "alice").await;
    let demo = demo_http().await;
    let (status, _) = api(
        reqwest::Method::POST,
        &one.base,
        "/api/servers",
        &origin,
        &cookie,
        Some(json!({"name": "demo", "url": demo})),
    )
    .await;
    assert_eq!(status, 201);
    let (status, v) = api(
        reqwest::Method::POST,
        &two.base,
        "/api/servers/demo/call",
        &origin,
        &cookie,
        Some(json!({"tool": "echo", "args": {"message": "two"}})),
    )
    .await;
    assert_eq!(
        (status, v["result"]["content"][0]["text"].as_str()),
        (200, Some("Echo: two")),
        "{v}"
    );
    let (status, _) = api(
        reqwest::Method::POST,
        &two.base,
        "/auth/logout",
        &origin,
        &cookie,
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = api(
        reqwest::Method::GET,
        &one.base,
        "/api/me",
        &origin,
        &cookie,
        None,
    )
    .await;
    assert_eq!(status, 401);
    one.interrupt();
    two.interrupt();
}

/// The team catalog with two real binaries on one PostgreSQL database: what an admin
/// publishes on one is on the other; a non-admin publishes nothing; stdio is refused by
/// the binary started without `--allow-catalog-stdio` (naming it) and run by the one
/// started with it; a user enables and calls catalog servers on either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_binaries_share_the_catalog() {
    let cluster = PgCluster::start();
    let database = cluster.create_database("team");
    let env = common::Env::new();
    let (p1, p2) = (free_port(), free_port());
    let origin = format!("http://127.0.0.1:{p1}");
    let peer = provider_for(&origin).await;
    let runner = TeamServe::start_with(
        &env,
        p1,
        &origin,
        &peer,
        (
            Some(&database),
            &["--allow-email", "bob@other.org", "--allow-catalog-stdio"],
        ),
    )
    .await;
    let plain = TeamServe::start_with(
        &env,
        p2,
        &origin,
        &peer,
        (Some(&database), &["--allow-email", "bob@other.org"]),
    )
    .await;
    let alice = sign_in(&peer, &runner.base, &plain.base, "alice").await;
    let bob = sign_in(&peer, &plain.base, &runner.base, "bob").await;
    let call =
        |base: &str, cookie: &str, method: reqwest::Method, path: &str, body: Option<Value>| {
            let (base, cookie, path, origin) = (
                base.to_owned(),
                cookie.to_owned(),
                path.to_owned(),
                origin.clone(),
            );
            async move { api(method, &base, &path, &origin, &cookie, body).await }
        };
    let demo = demo_http().await;
    let http_entry = json!({"name": "demo", "url": demo, "description": "Demo over HTTP"});
    let (status, v) = call(
        &runner.base,
        &bob,
        reqwest::Method::POST,
        "/api/admin/catalog",
        Some(http_entry.clone()),
    )
    .await;
    assert_eq!(status, 403, "bob is no admin: {v}");
    let (status, v) = call(
        &plain.base,
        &alice,
        reqwest::Method::POST,
        "/api/admin/catalog",
        Some(http_entry),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    let bin = switchboard_testkit::demo_server_bin().display().to_string();
    let stdio_entry = json!({"name": "local", "command": bin, "args": ["stdio"]});
    let (status, v) = call(
        &plain.base,
        &alice,
        reqwest::Method::POST,
        "/api/admin/catalog",
        Some(stdio_entry.clone()),
    )
    .await;
    assert_eq!(status, 403, "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("--allow-catalog-stdio"),
        "{v}"
    );
    let (status, v) = call(
        &runner.base,
        &alice,
        reqwest::Method::POST,
        "/api/admin/catalog",
        Some(stdio_entry),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    for base in [&runner.base, &plain.base] {
        let (status, v) = call(base, &bob, reqwest::Method::GET, "/api/catalog", None).await;
        assert_eq!(status, 200, "{v}");
        let names: Vec<&str> = v["servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["demo", "local"], "{v}");
        assert!(!v.to_string().contains(&bin), "{v}");
    }
    for name in ["demo", "local"] {
        let (status, _) = call(
            &plain.base,
            &bob,
            reqwest::Method::POST,
            &format!("/api/catalog/{name}/enable"),
            Some(json!({})),
        )
        .await;
        assert_eq!(status, 200);
        let (status, v) = call(
            &runner.base,
            &bob,
            reqwest::Method::POST,
            &format!("/api/catalog/{name}/call"),
            Some(json!({"tool": "echo", "args": {"message": name}})),
        )
        .await;
        assert_eq!(
            (status, v["result"]["content"][0]["text"].as_str()),
            (200, Some(format!("Echo: {name}").as_str())),
            "{v}"
        );
    }
    let (status, v) = call(
        &plain.base,
        &bob,
        reqwest::Method::GET,
        "/api/catalog/local/tools",
        None,
    )
    .await;
    assert_eq!(
        status, 403,
        "the binary without the flag runs no command: {v}"
    );
    let (status, v) = call(
        &plain.base,
        &bob,
        reqwest::Method::GET,
        "/api/catalog/demo/tools",
        None,
    )
    .await;
    assert_eq!(status, 200, "{v}");
    runner.interrupt();
    plain.interrupt();
}

/// A replica started with another secret key refuses to start, naming the key and the
/// fix, instead of answering every user with 503; with the old key as the previous one
/// it starts, and after `db reencrypt` the new key alone opens the database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_with_another_secret_key_refuses_to_start() {
    let env = common::Env::new();
    // The issuer only has to be named: one that does not answer is asked again later.
    let issuer = "http://127.0.0.1:9";
    let (port, origin) = {
        let p = free_port();
        (p, format!("http://127.0.0.1:{p}"))
    };
    let old = team_key();
    let first = TeamServe::launch(&env, port, &origin, issuer, "s", Launch::default()).await;
    first.interrupt();

    let new = switchboard_store::SecretKeys::generate_base64().unwrap();
    let serve = [
        "serve",
        "--team",
        "--port",
        "0",
        "--oidc-issuer",
        issuer,
        "--allow-domain",
        "example.com",
    ];
    let client = ("SWITCHBOARD_OIDC_CLIENT_ID", "c");
    let out = run_with(&env, &serve, &[(KEY_ENV, new.as_str()), client]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started with another key: {stderr}");
    for wanted in [
        "does not open what the team database holds",
        "SWITCHBOARD_SECRET_KEY",
        "SWITCHBOARD_SECRET_KEY_PREVIOUS",
        "switchboard db reencrypt",
    ] {
        assert!(stderr.contains(wanted), "`{wanted}` missing from: {stderr}");
    }
    assert!(!stderr.contains(&new) && !stderr.contains(&old), "{stderr}");

    // A rotation: the new key with the old one as the previous key starts …
    let rotating = [
        (KEY_ENV, new.as_str()),
        ("SWITCHBOARD_SECRET_KEY_PREVIOUS", old.as_str()),
    ];
    let launch = Launch {
        key: Some(&new),
        ..Launch::default()
    };
    let out = run_with(&env, &["db", "reencrypt"], &rotating);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // … and after `db reencrypt` the new key alone does.
    let again = TeamServe::launch(&env, port, &origin, issuer, "s", launch).await;
    let v: Value = http()
        .get(format!("{}/readyz", again.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["status"], "ready");
    again.interrupt();
    let out = run_with(&env, &serve, &[(KEY_ENV, old.as_str()), client]);
    assert!(
        !out.status.success(),
        "the old key alone opens a re-encrypted database"
    );
}

/// `/readyz` reports a stopped database within a second, not after a long timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_reports_a_stopped_database_at_once() {
    let mut cluster = PgCluster::start();
    let database = cluster.create_database("team");
    let env = common::Env::new();
    let port = free_port();
    let origin = format!("http://127.0.0.1:{port}");
    let launch = Launch {
        database: Some(&database),
        ..Launch::default()
    };
    let serve = TeamServe::launch(&env, port, &origin, "http://127.0.0.1:9", "s", launch).await;
    let readyz = || async {
        let started = Instant::now();
        let r = http()
            .get(format!("{}/readyz", serve.base))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), started.elapsed())
    };
    assert_eq!(readyz().await.0, 200);
    cluster.stop();
    for _ in 0..3 {
        let (status, took) = readyz().await;
        assert_eq!(status, 503);
        // A behaviour bound (the probe's limit is 500 ms), not a benchmark.
        assert!(took < Duration::from_millis(1500), "took {took:?}");
    }
    serve.interrupt();
}

/// A loopback identity provider works under team mode's default `strict` policy (its
/// origin is the operator's, trusted for sign-in only), while a server a user adds on
/// loopback is still refused by that policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_issuer_signs_in_under_strict_and_users_stay_strict() {
    let env = common::Env::new();
    let port = free_port();
    let origin = format!("http://127.0.0.1:{port}");
    let peer = provider_for(&origin).await;
    let launch = Launch {
        url_policy: None,
        ..Launch::default()
    };
    let serve = TeamServe::launch(&env, port, &origin, &peer.issuer, &peer.secret, launch).await;
    let base = serve.base.clone();
    let cookie = sign_in(&peer, &base, &base, "alice").await;
    let (status, v) = api(
        reqwest::Method::GET,
        &base,
        "/api/me",
        &origin,
        &cookie,
        None,
    )
    .await;
    assert_eq!(status, 200, "{v}");

    let demo = demo_http().await;
    let (status, v) = api(
        reqwest::Method::POST,
        &base,
        "/api/servers",
        &origin,
        &cookie,
        Some(json!({"name": "demo", "url": demo})),
    )
    .await;
    let (status, v) = if status == 201 {
        api(
            reqwest::Method::POST,
            &base,
            "/api/servers/demo/call",
            &origin,
            &cookie,
            Some(json!({"tool": "echo", "args": {"message": "x"}})),
        )
        .await
    } else {
        (status, v)
    };
    assert_eq!(status, 400, "{v}");
    assert!(
        v.to_string().contains("URL policy `strict`"),
        "a user's loopback server is judged by the policy: {v}"
    );
    serve.interrupt();
}
