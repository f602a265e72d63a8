//! Shared helpers: hosts over the real peers, the demo server over HTTP in this
//! process, a runner whose events are collected.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::sync::Arc;
use std::time::Duration;

use switchboard_host::{Host, HostOptions, ServerSpec};
use switchboard_mcp::{StdioTarget, Target};
use switchboard_net::{ClientOptions, GuardedClient, UrlPolicy};
use switchboard_workflow::{
    RunEvent, RunOptions, RunOutcome, Runner, Variables, Workflow, WorkflowHooks,
};
use tokio::sync::mpsc;

/// No single test step may take longer than this.
pub const STEP: Duration = Duration::from_secs(60);

/// A stdio server spec inheriting this process's environment.
pub fn stdio_spec(name: &str, cmd: (String, Vec<String>)) -> ServerSpec {
    let (program, args) = cmd;
    let mut spec = ServerSpec::adhoc(
        name,
        "test",
        Target::Stdio(StdioTarget {
            program,
            args,
            env: std::env::vars().collect(),
            cwd: None,
        }),
    );
    spec.trust = true;
    spec
}

/// A Streamable HTTP server spec.
pub fn http_spec(name: &str, url: &str) -> ServerSpec {
    ServerSpec::adhoc(
        name,
        "test",
        Target::Http {
            url: url.into(),
            headers: Vec::new(),
        },
    )
}

/// The demo server over Streamable HTTP on a free loopback port; its `/mcp` URL.
pub async fn demo_http() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(switchboard_demo_server::serve_http(
        listener,
        switchboard_demo_server::DemoOptions::default(),
    ));
    format!("http://{addr}/mcp")
}

/// A URL guard with the CLI's default policy (`local`: loopback allowed).
pub fn local_guard() -> GuardedClient {
    guard(UrlPolicy::Local)
}

pub fn guard(policy: UrlPolicy) -> GuardedClient {
    let mut o = ClientOptions::new(policy);
    o.timeout = None;
    GuardedClient::new(o).unwrap()
}

/// A runner over `specs` (not started), collecting its events.
pub struct Harness {
    pub runner: Runner,
    rx: mpsc::UnboundedReceiver<RunEvent>,
}

impl Harness {
    pub fn new(specs: Vec<ServerSpec>) -> Self {
        Self::with(specs, |_| {})
    }

    pub fn with(specs: Vec<ServerSpec>, tweak: impl FnOnce(&mut RunOptions)) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let host = Host::new(
            specs,
            HostOptions {
                hooks: Arc::new(WorkflowHooks::new(Some(tx.clone()))),
                ..Default::default()
            },
        );
        let mut opts = RunOptions {
            guard: Some(local_guard()),
            events: Some(tx),
            ..Default::default()
        };
        tweak(&mut opts);
        Self {
            runner: Runner::new(host, opts),
            rx,
        }
    }

    /// Validates (must be clean) and runs `yaml` with `inputs`.
    pub async fn run(&mut self, yaml: &str, inputs: &[(&str, &str)]) -> RunOutcome {
        let wf = Workflow::from_yaml(yaml).unwrap();
        self.run_wf(&wf, inputs).await
    }

    pub async fn run_wf(&mut self, wf: &Workflow, inputs: &[(&str, &str)]) -> RunOutcome {
        let mut vars = Variables::new();
        for (k, v) in inputs {
            vars.set_assignment(&format!("{k}={v}")).unwrap();
        }
        let problems = self.runner.validate(wf, &vars);
        assert!(problems.is_empty(), "validation: {problems:#?}");
        tokio::time::timeout(STEP * 3, self.runner.run(wf, vars))
            .await
            .expect("the run finished in time")
    }

    /// Events so far.
    pub fn events(&mut self) -> Vec<RunEvent> {
        let mut out = Vec::new();
        while let Ok(e) = self.rx.try_recv() {
            out.push(e);
        }
        out
    }

    pub async fn shutdown(&self) {
        self.runner.host().shutdown().await;
    }
}

/// A variable's text.
pub fn text(o: &RunOutcome, name: &str) -> String {
    switchboard_workflow::value_text(
        o.variables
            .get(name)
            .unwrap_or_else(|| panic!("no variable `{name}` in {:?}", o.variables)),
    )
}
