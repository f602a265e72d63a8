//! Browser tests: the web app in real headless Chromium (Debian's `/usr/bin/chromium`)
//! through playwright-core (pinned in `tests/browser/package-lock.json`), driven by
//! `tests/browser/run.mjs`. Each test starts the app and its MCP servers here, runs one
//! scenario, and fails with the script's output. Screenshots of every page go to
//! `target/screenshots/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Home, demo_http, fake_mcp, registry_with_demo, start_app, wait_connected};
use serde_json::json;
use switchboard_testkit::{PeerProcess, ensure_peers, free_port, peers_dir, repo_root};

const CHROMIUM: &str = "/usr/bin/chromium";

fn browser_dir() -> PathBuf {
    repo_root().join("tests").join("browser")
}

/// Runs one scenario of `tests/browser/run.mjs` against `app_url`.
async fn run_scenario(scenario: &str, app_url: &str, extra: &[(&str, String)]) {
    ensure_peers();
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install Debian's Chromium (`apt-get install -y chromium`; .ci/run does this)"
    );
    assert!(
        browser_dir()
            .join("node_modules")
            .join("playwright-core")
            .exists(),
        "playwright-core is not installed: run scripts/install-peers.sh"
    );
    let shots = repo_root().join("target").join("screenshots");
    let mut cmd = Command::new("node");
    cmd.arg(browser_dir().join("run.mjs"))
        .current_dir(browser_dir())
        .env("APP_URL", app_url)
        .env("SCENARIO", scenario)
        .env("SCREENSHOT_DIR", &shots)
        .env("CHROMIUM", CHROMIUM);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let output = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "browser scenario `{scenario}` failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains(&format!("[{scenario}] ok")), "{stdout}");
}

/// `@modelcontextprotocol/server-basic-vanillajs` on a loopback port.
async fn spawn_basic_vanillajs() -> PeerProcess {
    ensure_peers();
    let node = peers_dir().join("node");
    let port = free_port();
    let mut command = Command::new("node");
    command
        .arg(
            node.join("node_modules")
                .join("@modelcontextprotocol")
                .join("server-basic-vanillajs")
                .join("dist")
                .join("index.js"),
        )
        .current_dir(&node)
        .env("PORT", port.to_string())
        .env(
            "NODE_OPTIONS",
            format!("--require \"{}\"", node.join("bind-loopback.cjs").display()),
        );
    let mut peer = PeerProcess::spawn("server-basic-vanillajs", command);
    peer.port = port;
    peer.url = format!("http://127.0.0.1:{port}/mcp");
    peer.wait_for_port(port, Duration::from_secs(30)).await;
    peer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_settings_add_test_save_and_call_from_the_explorer() {
    let demo = demo_http().await;
    let (program, args) = switchboard_testkit::everything_stdio_command();
    let home = Home::new(Some(&json!({"mcpServers": {
        "demo": {"httpUrl": demo},
        "everything": {"command": program, "args": args},
    }})));
    let app = start_app(&home, None).await;
    wait_connected(&app, &["demo", "everything"]).await;
    run_scenario(
        "settings",
        &app.url,
        &[
            ("DEMO_URL", demo.clone()),
            ("BAD_URL", "http://127.0.0.1:9/mcp".into()),
            ("ELICIT_SERVER", "everything".into()),
        ],
    )
    .await;
    // The browser's edits went to the settings file, masked header kept.
    let s = home.settings();
    assert!(
        s["mcpServers"].get("added").is_none(),
        "deleted at the end: {s}"
    );
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_mcp_apps_render_handshake_round_trip_and_isolation() {
    let demo = demo_http().await;
    let fake = fake_mcp(false).await;
    let basic = spawn_basic_vanillajs().await;
    let home = Home::new(Some(&json!({"mcpServers": {
        "demo": {"httpUrl": demo},
        "fake": {"httpUrl": fake},
        "basic": {"httpUrl": basic.url},
    }})));
    let app = start_app(&home, None).await;
    wait_connected(&app, &["demo", "fake", "basic"]).await;
    run_scenario(
        "apps",
        &app.url,
        &[
            ("FAKE_SERVER", "fake".into()),
            ("BASIC_SERVER", "basic".into()),
        ],
    )
    .await;
    app.shutdown().await;
    drop(basic);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_chat_with_fake_gemini_renders_an_app_from_a_tool_result() {
    use switchboard_model_fakes::gemini::{FakeGemini, FakeTurn, declared_function_names};
    let fake_gemini = FakeGemini::start(vec![
        FakeTurn::dynamic(|req| {
            let name = declared_function_names(req)
                .into_iter()
                .find(|n| n.ends_with("_clock"))
                .unwrap_or_else(|| "missing_clock".into());
            FakeTurn::call(name, json!({}))
        }),
        FakeTurn::text("The clock app shows the time."),
    ])
    .await;
    let demo = demo_http().await;
    let other = fake_mcp(false).await;
    let home = Home::new(Some(&json!({"mcpServers": {
        "demo": {"httpUrl": demo},
        "other": {"httpUrl": other},
    }})));
    let app = start_app(&home, Some(fake_gemini.options())).await;
    wait_connected(&app, &["demo", "other"]).await;
    run_scenario("chat", &app.url, &[]).await;
    // The model got the demo's tools but not the unchecked server's.
    let requests = fake_gemini.requests();
    let first = requests.first().expect("a model request");
    let names = declared_function_names(first);
    assert!(names.iter().any(|n| n.ends_with("_clock")), "{names:?}");
    assert!(!names.iter().any(|n| n.contains("other")), "{names:?}");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_workflows_page_shows_a_run_and_renders_its_clock_app() {
    use std::time::SystemTime;
    use switchboard_workflow::run_log::{RunInfo, from_outcome, save_run};
    use switchboard_workflow::{RunOptions, Runner, Variables, Workflow};

    let demo = demo_http().await;
    let home = Home::new(Some(&json!({"mcpServers": {"demo": {"httpUrl": demo}}})));
    let examples = home.load().project_dir.join("examples");
    std::fs::create_dir_all(&examples).unwrap();
    let file = examples.join("demo-tour.yaml");
    std::fs::copy(repo_root().join("examples").join("demo-tour.yaml"), &file).unwrap();
    let app = start_app(&home, None).await;
    wait_connected(&app, &["demo"]).await;
    // The run, saved as `switchboard run` saves it.
    let wf = Workflow::load(&file).unwrap();
    let inputs = Variables::new();
    let started = SystemTime::now();
    let outcome = Runner::new(app.state.host(), RunOptions::default())
        .run(&wf, inputs.clone())
        .await;
    assert!(outcome.is_ok(), "{:?}", outcome.failure);
    let mut log = from_outcome(
        &RunInfo {
            file: &file,
            name: "demo-tour".into(),
            inputs: &inputs,
            started,
            finished: SystemTime::now(),
            cancelled: false,
        },
        &outcome,
    );
    save_run(&home.load().home, &mut log).unwrap();
    run_scenario("workflows", &app.url, &[("RUN_ID", log.id.clone())]).await;
    app.shutdown().await;
}

/// Settings › Find in the MCP Registry against the local registry: search, the add
/// form (password field for the secret header), the added remote connects, the secret
/// never reaches the page, and a second add of the same name is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_settings_finds_and_adds_a_server_from_the_registry() {
    const SECRET: &str = "browser-typed-secret-5e1";
    let demo = demo_http().await;
    let registry = registry_with_demo(&demo);
    let home = Home::new(Some(
        &json!({"registryUrl": registry.url, "mcpServers": {}}),
    ));
    let app = start_app(&home, None).await;
    run_scenario("registry", &app.url, &[("REGISTRY_SECRET", SECRET.into())]).await;
    assert_eq!(
        home.settings()["mcpServers"],
        json!({"demo": {
            "httpUrl": demo,
            "headers": {"X-Demo-Key": SECRET, "X-Region": "us-east-1"},
            "description": "The bundled demo server over Streamable HTTP"
        }})
    );
    app.shutdown().await;
}

/// Tool pinning in the explorer: `echo` pinned with another definition is shown as
/// withheld with the reason; "Accept change" offers it again and it is called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_explorer_shows_a_withheld_tool_and_accepts_its_change() {
    let demo = demo_http().await;
    let home = Home::new(Some(&json!({"mcpServers": {"demo": {"httpUrl": demo}}})));
    let store = switchboard_host::PinStore::in_home(&home.load().home);
    let pinned: switchboard_mcp::model::Tool = serde_json::from_value(json!({
        "name": "echo",
        "description": "An older echo.",
        "inputSchema": {"type": "object"}
    }))
    .unwrap();
    let key = switchboard_host::ServerKey::new(
        "demo",
        &switchboard_mcp::Target::Http {
            url: demo.clone(),
            headers: Vec::new(),
        },
    );
    store.review(&key, &[pinned]).unwrap();
    let app = start_app(&home, None).await;
    wait_connected(&app, &["demo"]).await;
    run_scenario("pins", &app.url, &[]).await;
    let pins = std::fs::read_to_string(store.path()).unwrap();
    assert!(!pins.contains("An older echo."), "{pins}");
    app.shutdown().await;
}
