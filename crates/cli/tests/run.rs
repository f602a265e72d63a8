//! `switchboard run` as a user runs it: the bundled demo server (no settings, no API
//! key), the example workflows, `--json`, `--var`/`--vars-file`, validation errors
//! with line numbers, a failing node, and a `command` node against the fake Gemini.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};
use switchboard_model_fakes::gemini::{FakeGemini, FakeTurn, declared_function_names};

struct Env {
    home: tempfile::TempDir,
    project: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        Self {
            home: tempfile::tempdir().unwrap(),
            project: tempfile::tempdir().unwrap(),
        }
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.project.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
        c.arg("run")
            .args(args)
            .env("SWITCHBOARD_HOME", self.home.path())
            .env_remove("SWITCHBOARD_LOG")
            .env_remove("GEMINI_API_KEY")
            .env_remove("GEMINI_BASE_URL")
            .current_dir(self.project.path())
            .stdin(std::process::Stdio::null());
        c
    }

    async fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().await.unwrap()
    }
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..")
        .join("examples")
}

fn vars(o: &Output) -> Value {
    serde_json::from_str(&out(o)).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", out(o)))
}

#[tokio::test(flavor = "multi_thread")]
async fn example_demo_tour_runs_on_the_demo_server() {
    let env = Env::new();
    let file = examples().join("demo-tour.yaml");
    let o = env
        .run(&[file.to_str().unwrap(), "--var", "name=Ada", "--json"])
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let v = vars(&o);
    assert_eq!(v["greeting"], "Echo: Hello, Ada!");
    assert_eq!(v["total"], 21);
    assert_eq!(v["round"], 3);
    assert_eq!(v["verdict"], "21 is more than 20");
    assert!(v["time"].as_str().unwrap().starts_with("The time is "));
    let ui: Value = serde_json::from_str(v["clockUi"].as_str().unwrap()).unwrap();
    assert_eq!(ui["server"], "demo");
    assert!(ui["resourceUri"].as_str().unwrap().starts_with("ui://"));
    assert!(ui["content"].as_str().unwrap().contains("<html"));
    let log = err(&o);
    assert!(log.contains("▶ greet (mcp) demo.echo"), "{log}");
    assert!(log.contains("✓ greet (mcp, "), "{log}");
    assert!(log.contains("MCP App UIs produced by this run"), "{log}");
    assert!(log.contains("clock: ui://"), "{log}");
    assert!(log.contains("from server `demo`"), "{log}");
    assert!(log.contains("Workflow finished"), "{log}");

    // Without --var the variable node keeps "" and the branch fills in a default.
    let o = env.run(&[file.to_str().unwrap(), "--json"]).await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(vars(&o)["greeting"], "Echo: Hello, world!");
}

#[tokio::test(flavor = "multi_thread")]
async fn example_tolerate_failure_continues_after_the_error() {
    let env = Env::new();
    let file = examples().join("tolerate-failure.yaml");
    let o = env.run(&[file.to_str().unwrap(), "--json"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let v = vars(&o);
    assert!(
        v["result"]
            .as_str()
            .unwrap()
            .starts_with("Echo: fallback after: "),
        "{v}"
    );
    assert_eq!(v["status"], "handled");
    assert!(err(&o).contains("! try (mcp, "), "{}", err(&o));
}

#[tokio::test(flavor = "multi_thread")]
async fn example_markdown_with_progress_and_a_sub_workflow() {
    let env = Env::new();
    let file = examples().join("progress.md");
    let o = env.run(&[file.to_str().unwrap(), "--json"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let v = vars(&o);
    assert_eq!(v["loud"], "Echo: Done: 4 steps in 1 seconds.!!");
    let log = err(&o);
    assert!(log.contains("… work: "), "progress lines: {log}");
    assert!(log.contains("shout/echo"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn vars_file_and_var_set_inputs() {
    let env = Env::new();
    let flow = env.write(
        "flow.yaml",
        r#"
name: inputs
nodes:
  - id: sum
    type: mcp
    server: demo
    tool: add
    args: '{"a": {{a}}, "b": {{b}}}'
    saveTo: sum
  - id: say
    type: variable
    name: said
    value: "{{who}} got {{sum}}"
"#,
    );
    let vf = env.write("vars.json", r#"{"a": 1, "b": 2, "who": "file"}"#);
    let o = env
        .run(&[
            flow.to_str().unwrap(),
            "--vars-file",
            vf.to_str().unwrap(),
            "--var",
            "b=40",
            "--json",
        ])
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let v = vars(&o);
    assert_eq!(
        v,
        json!({"a": 1, "b": 40, "who": "file", "sum": "41", "said": "file got 41"})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_tool_exits_1_naming_the_node() {
    let env = Env::new();
    let flow = env.write(
        "fail.yaml",
        r#"
nodes:
  - id: first
    type: mcp
    server: demo
    tool: echo
    args: '{"message": "ok"}'
    saveTo: first
  - id: boom
    type: mcp
    server: demo
    tool: fail
    args: '{"message": "kaput"}'
  - id: never
    type: variable
    name: never
    value: x
"#,
    );
    let o = env.run(&[flow.to_str().unwrap(), "--json"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let log = err(&o);
    assert!(
        log.contains("error: the workflow failed at node `boom` (mcp): `fail` on `demo` returned an error: kaput"),
        "{log}"
    );
    assert!(log.contains("✗ boom (mcp, "), "{log}");
    // The variables as they were when it stopped.
    assert_eq!(vars(&o), json!({"first": "Echo: ok"}));
}

#[tokio::test(flavor = "multi_thread")]
async fn validation_errors_exit_2_with_line_numbers() {
    let env = Env::new();
    let flow = env.write(
        "bad.yaml",
        r#"name: bad
nodes:
  - id: call
    type: mcp
    server: demoo
    tool: echo
    args: '{"message": "{{msg}}"}'
    saveTo: out
  - id: loop
    type: whilee
    condition: "{{out}} == x"
  - id: jump
    type: set
    name: y
    value: 1
    next: nowhere
"#,
    );
    let o = env.run(&[flow.to_str().unwrap()]).await;
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    let shown = err(&o).replace(flow.to_str().unwrap(), "bad.yaml");
    insta::assert_snapshot!("run_validation_errors", shown);

    let o = env.run(&[flow.to_str().unwrap(), "--var", "msg=hi"]).await;
    assert!(
        !err(&o).contains("`msg`"),
        "inputs count as set: {}",
        err(&o)
    );

    let broken = env.write("broken.yaml", "nodes:\n  - id: a\n    type: [unclosed\n");
    let o = env.run(&[broken.to_str().unwrap()]).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("line 4: invalid YAML"), "{}", err(&o));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_node_talks_to_the_fake_gemini_with_demo_tools() {
    let fake = FakeGemini::start(vec![
        FakeTurn::call("mcp_demo_add", json!({"a": 20, "b": 22})),
        FakeTurn::text("The answer is 42."),
    ])
    .await;
    let env = Env::new();
    let flow = env.write(
        "ask.yaml",
        r#"
nodes:
  - id: ask
    type: command
    prompt: "What is {{q}}?"
    mcpServers: demo
    saveTo: answer
  - id: show
    type: mcp
    server: demo
    tool: echo
    args: '{"message": "{{answer:json}}"}'
    saveTo: shown
"#,
    );
    let o = env
        .command(&[flow.to_str().unwrap(), "--var", "q=20+22", "--json"])
        .env("GEMINI_API_KEY", fake.api_key())
        .env("GEMINI_BASE_URL", &fake.base_url)
        .output()
        .await
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    let v = vars(&o);
    assert_eq!(v["answer"], "The answer is 42.");
    assert_eq!(v["shown"], "Echo: The answer is 42.");
    let reqs = fake.requests();
    assert!(declared_function_names(&reqs[0]).contains(&"mcp_demo_add".to_string()));
    assert!(err(&o).contains("model calls demo.add"), "{}", err(&o));

    // Without a key the command node fails, saying what to set.
    let o = env.run(&[flow.to_str().unwrap(), "--var", "q=x"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("failed at node `ask` (command)"),
        "{}",
        err(&o)
    );
    assert!(err(&o).contains("GEMINI_API_KEY"), "{}", err(&o));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_is_saved_as_a_run_log_with_its_ui_step_and_a_link() {
    let env = Env::new();
    let file = examples().join("demo-tour.yaml");
    let o = env
        .run(&[file.to_str().unwrap(), "--var", "name=Ada"])
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let runs = env.home.path().join("runs");
    let files: Vec<PathBuf> = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.ends_with("-demo-tour.json"), "{name}");
    let id = name.trim_end_matches(".json");
    let log: Value = serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_eq!(log["id"], id);
    assert_eq!(log["workflowName"], "demo-tour");
    assert!(
        log["workflowPath"]
            .as_str()
            .unwrap()
            .ends_with("demo-tour.yaml")
    );
    assert_eq!(log["inputs"], json!({"name": "Ada"}));
    assert_eq!(log["status"], "ok");
    assert!(log["failure"].is_null());
    assert!(log["started"].as_str().unwrap().ends_with('Z'));
    assert!(log["finished"].as_str().unwrap() >= log["started"].as_str().unwrap());
    let steps = log["steps"].as_array().unwrap();
    let greet = steps.iter().find(|s| s["node"] == "greet").unwrap();
    assert_eq!(greet["kind"], "mcp");
    assert_eq!(greet["status"], "ok");
    assert!(greet["durationMs"].is_u64());
    assert_eq!(log["variables"]["greeting"], "Echo: Hello, Ada!");
    let apps = log["apps"].as_array().unwrap();
    assert_eq!(apps.len(), 1, "{apps:?}");
    let app = &apps[0];
    assert_eq!(app["node"], "clock");
    assert_eq!(app["server"], "demo");
    assert_eq!(app["tool"], "clock");
    assert!(app["resourceUri"].as_str().unwrap().starts_with("ui://"));
    assert!(app["result"]["content"].is_array(), "{app}");
    let log_text = err(&o);
    let link = format!("open: http://127.0.0.1:8765/workflows?run={id}&step=clock");
    assert!(log_text.contains(&link), "{log_text}");
    assert!(
        log_text.contains("`switchboard serve` running"),
        "{log_text}"
    );
    assert!(log_text.contains("token link"), "{log_text}");

    // A failed run is saved too, naming the failing node.
    let flow = env.write(
        "broken.yaml",
        "name: broken\nnodes:\n  - id: boom\n    type: mcp\n    server: demo\n    tool: no-such-tool\n",
    );
    let o = env.run(&[flow.to_str().unwrap()]).await;
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let failed = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_str().unwrap().ends_with("-broken.json"))
        .unwrap();
    let log: Value = serde_json::from_str(&std::fs::read_to_string(failed).unwrap()).unwrap();
    assert_eq!(log["status"], "failed");
    assert_eq!(log["failure"]["node"], "boom");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_node_uses_an_openai_compatible_model_when_the_settings_say_so() {
    use switchboard_model_fakes::openai::{FakeOpenAi, last_user_text};
    let fake = FakeOpenAi::start(vec![FakeTurn::text("Hello from a local model.")]).await;
    let env = Env::new();
    std::fs::write(
        env.home.path().join("settings.json"),
        json!({"provider": "openai", "model": "local-model", "mcpServers": {}}).to_string(),
    )
    .unwrap();
    let flow = env.write(
        "ask.yaml",
        "nodes:\n  - id: ask\n    type: command\n    prompt: \"say {{word}}\"\n    saveTo: answer\n",
    );
    let o = env
        .command(&[flow.to_str().unwrap(), "--var", "word=hello", "--json"])
        .env_remove("OPENAI_API_KEY")
        .env("OPENAI_BASE_URL", &fake.base_url)
        .output()
        .await
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(vars(&o)["answer"], "Hello from a local model.");
    let rec = fake.recorded();
    assert_eq!(rec.len(), 1);
    assert_eq!(rec[0].model, "local-model");
    assert_eq!(rec[0].api_key, None);
    assert_eq!(last_user_text(&rec[0].body), "say hello");
    assert!(err(&o).contains("OpenAI-compatible"), "{}", err(&o));

    // Without a model, the node fails naming the provider and the fix, not Gemini.
    std::fs::write(
        env.home.path().join("settings.json"),
        json!({"provider": "openai", "mcpServers": {}}).to_string(),
    )
    .unwrap();
    let o = env
        .command(&[flow.to_str().unwrap(), "--var", "word=x"])
        .env_remove("OPENAI_API_KEY")
        .env("OPENAI_BASE_URL", &fake.base_url)
        .output()
        .await
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("OpenAI-compatible provider"),
        "{}",
        err(&o)
    );
    assert!(err(&o).contains("`model`"), "{}", err(&o));
    assert!(!err(&o).contains("GEMINI_API_KEY"), "{}", err(&o));
    assert_eq!(fake.recorded().len(), 1);
}
