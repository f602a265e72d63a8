//! The Workflows API: workflow files in the project, saved runs newest first, one
//! run's log with the configured server that can render its UI step, and bad ids.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::SystemTime;

use common::{Api, Home, demo_http, start_app, wait_connected};
use serde_json::json;
use switchboard_testkit::repo_root;
use switchboard_workflow::run_log::{RunInfo, from_outcome, save_run};
use switchboard_workflow::{RunOptions, Runner, Variables, Workflow};

/// Runs `examples/demo-tour.yaml` on the app's own servers and saves it as
/// `switchboard run` does; returns the run id.
async fn save_demo_tour(app: &switchboard_web::RunningServer, home: &Home) -> String {
    let file = repo_root().join("examples").join("demo-tour.yaml");
    let wf = Workflow::load(&file).unwrap();
    let runner = Runner::new(app.state.host(), RunOptions::default());
    let mut inputs = Variables::new();
    inputs.set_assignment("name=Ada").unwrap();
    let started = SystemTime::now();
    let outcome = runner.run(&wf, inputs.clone()).await;
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
    log.id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflows_runs_and_one_run_log() {
    let demo = demo_http().await;
    let home = Home::new(Some(&json!({"mcpServers": {"demo": {"httpUrl": demo}}})));
    let project = home.load().project_dir;
    std::fs::create_dir_all(project.join(".switchboard/workflows")).unwrap();
    std::fs::create_dir_all(project.join("examples")).unwrap();
    std::fs::write(
        project.join(".switchboard/workflows/hello.yaml"),
        "name: hello\nnodes:\n  - id: a\n    type: variable\n    name: x\n    value: 1\n",
    )
    .unwrap();
    std::fs::write(project.join("examples/broken.yml"), "nodes: [").unwrap();
    std::fs::write(project.join("examples/notes.txt"), "not a workflow").unwrap();
    let app = start_app(&home, None).await;
    wait_connected(&app, &["demo"]).await;
    let api = Api::new(&app);

    let (status, body) = api.get("/api/workflows").await;
    assert_eq!(status, 200, "{body}");
    let list = body["workflows"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{body}");
    assert_eq!(list[0]["path"], ".switchboard/workflows/hello.yaml");
    assert_eq!(list[0]["name"], "hello");
    assert_eq!(list[0]["nodes"], 1);
    assert_eq!(
        list[0]["command"],
        "switchboard run .switchboard/workflows/hello.yaml"
    );
    assert_eq!(list[1]["path"], "examples/broken.yml");
    assert!(list[1]["error"].is_string(), "{body}");

    let (status, body) = api.get("/api/workflows/runs").await;
    assert_eq!(status, 200);
    assert_eq!(body["runs"], json!([]));

    let first = save_demo_tour(&app, &home).await;
    let second = save_demo_tour(&app, &home).await;
    let (_, body) = api.get("/api/workflows/runs").await;
    let runs = body["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{body}");
    assert_eq!(runs[0]["id"], second.as_str(), "newest first");
    assert_eq!(runs[1]["id"], first.as_str());
    assert_eq!(runs[0]["workflowName"], "demo-tour");
    assert_eq!(runs[0]["status"], "ok");
    assert_eq!(runs[0]["appNodes"], json!(["clock"]));
    assert!(runs[0].get("variables").is_none(), "the list is a summary");

    let (status, run) = api.get(&format!("/api/workflows/runs/{first}")).await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["id"], first.as_str());
    assert_eq!(run["inputs"], json!({"name": "Ada"}));
    assert_eq!(run["variables"]["greeting"], "Echo: Hello, Ada!");
    assert!(
        run["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["node"] == "clock")
    );
    let app0 = &run["apps"][0];
    assert_eq!(app0["node"], "clock");
    assert_eq!(app0["server"], "demo");
    assert_eq!(
        app0["appServer"], "demo",
        "rendered by the configured server"
    );
    assert_eq!(app0["resourceUri"], "ui://switchboard-demo/clock.html");
    assert!(app0["result"]["content"].is_array());

    // The app opens through the same API as the explorer's, bound to that server.
    let (status, opened) = api
        .post(
            "/api/apps",
            &json!({"server": app0["appServer"], "resourceUri": app0["resourceUri"], "tool": "clock"}),
        )
        .await;
    assert_eq!(status, 200, "{opened}");
    assert!(opened["html"].as_str().unwrap().contains("<html"));

    let (status, _) = api
        .get("/api/workflows/runs/20000101T000000.000Z-nope")
        .await;
    assert_eq!(status, 404);
    let (status, _) = api.get("/api/workflows/runs/..%2F..%2Fsettings").await;
    assert!(status == 400 || status == 404, "{status}");
    let r = api
        .http
        .get(format!("{}/api/workflows/runs", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "the token is required");
    app.shutdown().await;
}
