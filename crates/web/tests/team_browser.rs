//! Team mode's pages in real headless Chromium (Debian's `/usr/bin/chromium`, through
//! playwright-core, `tests/browser/run.mjs` scenario `team`): a team app on SQLite with
//! the real OpenID provider (npm `oidc-provider`, default account alice, so the
//! browser's login needs no hint), the demo MCP server over Streamable HTTP, and a
//! server that wants OAuth (a listener answering 401). In the browser: `/` shows the
//! sign-in page; Sign in goes through the provider and back signed in as alice; she adds
//! the demo server with a secret header (shown masked), Tests it (connected, its tools
//! listed), opens its tools and calls `echo` with markup in the message (shown as text,
//! not as HTML); Test on a server answering 401 shows the sign-in hint; on an
//! OAuth-protected server (the Python MCP SDK's auth peer) "Sign in to this server"
//! opens a popup that completes the login and closes, after which the server is listed
//! signed in and its Test connects, and "Sign out of server" forgets it; a team catalog
//! server an admin published (the same OAuth peer) is enabled, Tested (needs OAuth) and
//! signed in to in a popup with alice's own login; in a second chat, server-everything's
//! elicitation (asked during its tool call) is a form typed from its schema (number,
//! email, checkbox, select), listed again when the page is reloaded mid-turn (the
//! stream gone, the turn still running), filled in and submitted there, and the server's
//! result shows the values (markup shown as text); on the Workflows tab a workflow with an
//! unknown server shows its problem with its line, one calling the demo server's `echo`
//! (markup in the message) is validated, saved, run, and its live log and saved result
//! are shown as text; a browser MCP client on another (loopback) origin registers, gets
//! alice's consent, exchanges its code and lists her tools through `/mcp` cross-origin
//! (CORS), while its fetches of a cookie route with credentials are blocked; the page
//! lists it under connected clients with its last use, and Revoke ends it (its token then
//! gets 401); Sign out shows the
//! sign-in page again, and after signing in again "Sign out everywhere" does too.
//! Afterwards the store holds alice's server with the header, and no session of hers.
//! Screenshots go to `target/screenshots/team-*.png`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)]

use crate::team_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use switchboard_net::UrlPolicy;
use switchboard_store::{CatalogLaunch, CatalogServer, ServerRef, Transport};
use switchboard_testkit::{
    CannedReply, OidcPeerOptions, RecordingListener, ensure_peers, free_port, repo_root,
    spawn_oauth_python, spawn_oidc_provider_with,
};
use switchboard_web::{TeamOptions, start_team};
use team_support::{Db, demo_http, sign_in_options};

const CHROMIUM: &str = "/usr/bin/chromium";
/// Alice's own model key, typed into the chat page (what the fake Gemini accepts).
const BROWSER_MODEL_KEY: &str = "browser-model-key-2f81";

fn browser_dir() -> PathBuf {
    repo_root().join("tests").join("browser")
}

/// Runs scenario `team` of `tests/browser/run.mjs` against `app_url`.
async fn run_scenario(app_url: &str, extra: &[(&str, String)]) {
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
        .env("SCENARIO", "team")
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
        "browser scenario `team` failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("[team] ok"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn team_browser_sign_in_add_test_call_and_sign_out() {
    // The app's port is chosen first: the provider registers its callback.
    let port = free_port();
    let origin = format!("http://127.0.0.1:{port}");
    let peer = spawn_oidc_provider_with(OidcPeerOptions {
        redirect_uris: vec![format!("{origin}/auth/callback")],
        default_account: Some("alice".into()),
        ..Default::default()
    })
    .await;
    let db = Db::sqlite();
    let mut opts = TeamOptions::new(db.store().await);
    opts.port = port;
    opts.url_policy = UrlPolicy::Local;
    opts.sign_in = Some(sign_in_options(&peer, "admin@example.com"));
    let gemini = switchboard_model_fakes::gemini::FakeGemini::start_with(
        switchboard_model_fakes::gemini::FakeOptions {
            api_key: BROWSER_MODEL_KEY.into(),
            ..Default::default()
        },
        vec![
            switchboard_model_fakes::FakeTurn::call(
                "mcp_demo_echo",
                serde_json::json!({"message": "from the browser"}),
            ),
            switchboard_model_fakes::FakeTurn::text("The echo answered."),
            switchboard_model_fakes::FakeTurn::call(
                "mcp_everything_trigger-elicitation-request",
                serde_json::json!({}),
            ),
            switchboard_model_fakes::FakeTurn::text("Thanks, Grace."),
        ],
    )
    .await;
    opts.model = Some(team_support::gemini_at(&gemini.base_url));
    let running = start_team(opts).await.unwrap();
    assert_eq!(running.app_origin, origin);
    let demo = demo_http().await;
    let mut locked = CannedReply::new(401, r#"{"error":"invalid_token"}"#);
    locked
        .headers
        .push(("WWW-Authenticate".into(), "Bearer".into()));
    let locked = RecordingListener::with_reply(locked).await;
    let secure = spawn_oauth_python(&[]).await;
    // The browser MCP client's origin: a page on another loopback port.
    let mut page = CannedReply::new(
        200,
        "<!doctype html><title>MCP client</title><h1>A browser MCP client</h1>",
    );
    page.headers
        .push(("Content-Type".into(), "text/html; charset=utf-8".into()));
    let client_page = RecordingListener::with_reply(page).await;
    let everything =
        switchboard_testkit::spawn_everything(switchboard_testkit::EverythingMode::StreamableHttp)
            .await;
    // An admin published the OAuth-protected server in the team catalog.
    let store = db.store().await;
    let admin = store
        .sign_in_user(
            &team_support::provider_account(&peer, "admin", "admin@example.com"),
            "Admin",
            true,
        )
        .await
        .unwrap();
    store
        .publish_catalog_server(
            &admin.id,
            &CatalogServer {
                name: "teamsecure".into(),
                description: "Published for the team".into(),
                launch: CatalogLaunch::Http {
                    url: secure.url.clone(),
                    transport: Transport::Http,
                    headers: std::collections::BTreeMap::new(),
                },
            },
        )
        .await
        .unwrap();

    run_scenario(
        &origin,
        &[
            ("DEMO_URL", demo.clone()),
            ("LOCKED_URL", locked.url("/mcp")),
            ("SECURE_URL", secure.url.clone()),
            ("MODEL_KEY", BROWSER_MODEL_KEY.to_owned()),
            ("CLIENT_URL", client_page.url("/callback")),
            ("EVERYTHING_URL", everything.url.clone()),
        ],
    )
    .await;

    // What the browser did is in the store: alice's server with its header, her own
    // tokens for the catalog server, and no session of hers left after "sign out
    // everywhere".
    let alice = store
        .sign_in_user(
            &team_support::provider_account(&peer, "alice", "alice@example.com"),
            "Alice Example",
            false,
        )
        .await
        .unwrap();
    let server = store
        .for_user(&alice.id)
        .server("demo")
        .await
        .unwrap()
        .expect("alice's demo server");
    assert_eq!(server.url, demo);
    assert_eq!(server.headers["X-Team-Key"].expose(), "browser-secret-5c1e");
    assert_eq!(
        store
            .for_user(&alice.id)
            .model_key()
            .await
            .unwrap()
            .unwrap()
            .key
            .expose(),
        BROWSER_MODEL_KEY
    );
    let chats = store.for_user(&alice.id).conversations().await.unwrap();
    assert_eq!(chats.len(), 2, "the echo chat and the elicitation chat");
    for chat in &chats {
        let saved = store
            .for_user(&alice.id)
            .messages(&chat.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            saved.len(),
            4,
            "user, model call, tool result, model answer"
        );
    }
    // The form's answer reached the server (its result is saved with the call).
    let elicited = chats
        .iter()
        .map(|c| {
            let us = store.for_user(&alice.id);
            let id = c.id.clone();
            async move { us.messages(&id).await.unwrap().unwrap() }
        })
        .collect::<Vec<_>>();
    let mut found = false;
    for f in elicited {
        found |= f.await.iter().any(|m| {
            let t = m.content.to_string();
            t.contains("Grace <b>Hopper</b>") && t.contains("Agreed to terms: true")
        });
    }
    assert!(found, "the accepted form values reached the server");
    assert_eq!(gemini.remaining(), 0);
    let us = store.for_user(&alice.id);
    assert!(
        us.catalog_server("teamsecure")
            .await
            .unwrap()
            .unwrap()
            .enabled
    );
    assert!(
        us.tokens(&ServerRef::catalog("teamsecure"))
            .await
            .unwrap()
            .is_some(),
        "alice's own catalog tokens"
    );
    // Her workflow and its finished run, with the echo in its saved log.
    let wf = us
        .workflow("greet")
        .await
        .unwrap()
        .expect("alice's workflow");
    assert!(wf.source.contains("server: demo"), "{}", wf.source);
    let runs = us.workflow_runs(Some("greet")).await.unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let (run, log) = us.workflow_run(&runs[0].id).await.unwrap().unwrap();
    assert_eq!(run.state, switchboard_store::RunState::Ok);
    assert!(
        log.unwrap()["variables"]["out"]
            .to_string()
            .contains("Echo: from a <b>workflow</b>")
    );
    let ended = store.end_all_sessions(&alice.id).await.unwrap();
    assert_eq!(ended, 0, "signed out everywhere: no session left");
    running.shutdown().await;
}
