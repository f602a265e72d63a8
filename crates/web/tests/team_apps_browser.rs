//! MCP Apps in the team chat in real headless Chromium (Debian's `/usr/bin/chromium`,
//! through playwright-core, `tests/browser/run.mjs` scenario `team-apps`): a team app on
//! SQLite, the demo MCP server over Streamable HTTP, the fake Gemini calling the demo's
//! `clock` (its server allowed always in the chat). In the browser, signed in by a
//! session the test made: a message makes the model call the clock; the clock's app
//! renders in the chat from its app session in the store (after the turn the page reads
//! the chat back, apps included), receives the tool's input and result, and its Refresh
//! button calls the clock through the host; a tool its server lacks and a model-context
//! update are refused; the sandbox page runs in an opaque origin (no cookie, no access to
//! the page, no call to the team API); its model context goes with the next turn, and
//! its `ui/message` becomes that turn.
//! Afterwards the store holds the chat with both turns and the app session.
//! Screenshots go to `target/screenshots/team-apps-*.png` (look at them).
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use switchboard_model_fakes::FakeTurn;
use switchboard_model_fakes::gemini::{FakeGemini, FakeOptions};
use switchboard_store::{Approvals, Secret, ServerRecord, Transport};
use team_support::{Db, Instance, InstanceOptions, demo_http, gemini_at, sign_in};

const CHROMIUM: &str = "/usr/bin/chromium";
const MODEL_KEY: &str = "browser-apps-model-key-81c0";

/// This checkout's root (from this crate's manifest: a `target/` shared with another
/// checkout may hold a testkit built there).
fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..");
    root.canonicalize().unwrap_or(root)
}

fn browser_dir() -> PathBuf {
    repo_root().join("tests").join("browser")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn team_chat_shows_an_mcp_app_that_calls_its_tool() {
    // playwright-core comes from scripts/install-peers.sh (run by .ci/run), checked here
    // in this checkout (testkit's `ensure_peers` works on the checkout testkit was
    // built in).
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
    let gemini = FakeGemini::start_with(
        FakeOptions {
            api_key: MODEL_KEY.into(),
            ..FakeOptions::default()
        },
        vec![
            FakeTurn::call("mcp_demo_clock", json!({})),
            FakeTurn::text("Here is the clock."),
            FakeTurn::text("The app said hello."),
        ],
    )
    .await;
    let db = Db::sqlite();
    let app = Instance::start(
        &db,
        InstanceOptions {
            model: Some(gemini_at(&gemini.base_url)),
            ..Default::default()
        },
    )
    .await;
    let store = db.store().await;
    let (alice, cookie) = sign_in(&store, "alice@example.com", false).await;
    let us = store.for_user(&alice);
    let demo = demo_http().await;
    us.put_server(&ServerRecord {
        name: "demo".into(),
        url: demo,
        transport: Transport::Http,
        headers: Default::default(),
        enabled: true,
    })
    .await
    .unwrap();
    us.put_model_key("gemini", &Secret::new(MODEL_KEY))
        .await
        .unwrap();
    let chat = us.create_conversation("Clock").await.unwrap();
    us.set_approvals(
        &chat.id,
        &Approvals {
            tools: vec![],
            servers: vec!["demo".into()],
        },
    )
    .await
    .unwrap();

    let shots = repo_root().join("target").join("screenshots");
    let mut cmd = Command::new("node");
    cmd.arg(browser_dir().join("run.mjs"))
        .current_dir(browser_dir())
        .env("APP_URL", app.origin())
        .env("SCENARIO", "team-apps")
        .env("SCREENSHOT_DIR", &shots)
        .env("CHROMIUM", CHROMIUM)
        .env("SESSION_COOKIE", &cookie)
        .env("CHAT_ID", &chat.id);
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
        "browser scenario `team-apps` failed ({}):\n{stdout}\n{stderr}",
        output.status
    );

    // Both turns are saved; the app session is in the store.
    let saved = us.messages(&chat.id).await.unwrap().unwrap();
    let text =
        serde_json::to_string(&saved.iter().map(|m| &m.content).collect::<Vec<_>>()).unwrap();
    assert!(text.contains("Hello from the clock app"), "{text}");
    // The app's model context went to the model with that turn, wrapped as app data.
    let asked = gemini.requests().pop().unwrap().to_string();
    assert!(
        asked.contains("[Context from an app]") && asked.contains("The clock app shows UTC."),
        "{asked}"
    );
    let apps = us.app_sessions_of(&chat.id).await.unwrap();
    assert_eq!(apps.len(), 1, "{apps:?}");
    assert_eq!(apps[0].tool, "clock");
    assert!(
        apps[0]
            .csp_header
            .as_deref()
            .is_some_and(|c| c.starts_with("sandbox allow-scripts allow-forms;")),
        "{apps:?}"
    );
    assert_eq!(gemini.remaining(), 0);
    app.stop().await;
}
