//! `switchboard run flow.yaml`: validate a workflow (every problem at once, with line
//! numbers; exit 2), run it against the configured servers (and the bundled demo
//! server as `demo` unless a configured server has that name, see
//! [`crate::ctx::demo_reachable`]) with a live step log on stderr, and print the final
//! variables as one JSON object on stdout with `--json`. A failing node stops the run:
//! exit 1, naming it.
//! Ctrl-C cancels the running step (exit 130).
//! Every run is saved as a run log ([`crate::run_log`]); UI steps get a link that
//! opens them in `switchboard serve`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use switchboard_host::{Host, HostOptions};
use switchboard_model::{ModelConfig, Provider};
use switchboard_workflow::{
    LoadError, RunEvent, RunOptions, Runner, StepStatus, Variables, Workflow, WorkflowHooks,
};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::ctx::{self, Globals};
use crate::run_log;

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The workflow: a YAML file, or Markdown with a ```workflow block.
    #[arg(add = crate::complete::workflow_files())]
    pub file: PathBuf,
    /// Set an input variable (repeatable); numbers are stored as numbers.
    #[arg(long = "var", value_name = "KEY=VALUE")]
    pub vars: Vec<String>,
    /// Input variables from a file holding one JSON object (`--var` wins).
    #[arg(long, value_name = "FILE")]
    pub vars_file: Option<PathBuf>,
    /// Print the final variables as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// In a Markdown file with several workflows: the one with this `name`.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
}

fn inputs(a: &RunArgs) -> Result<Variables> {
    let mut vars = match &a.vars_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --vars-file {}", path.display()))?;
            let value: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("--vars-file {} is not JSON", path.display()))?;
            Variables::from_json_object(&value)
                .map_err(|e| anyhow::anyhow!("--vars-file {}: {e}", path.display()))?
        }
        None => Variables::new(),
    };
    for assignment in &a.vars {
        vars.set_assignment(assignment)
            .map_err(|e| anyhow::anyhow!("--var {e}"))?;
    }
    Ok(vars)
}

fn ms(d: Duration) -> String {
    if d < Duration::from_secs(10) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// One log line for an event, or `None` for events not shown.
fn log_line(e: &RunEvent) -> Option<String> {
    Some(match e {
        RunEvent::NodeStarted { node, kind, detail } => {
            // Instant nodes get one line, when they finish.
            if matches!(kind.as_str(), "variable" | "set" | "if" | "while" | "json") {
                return None;
            }
            if detail.is_empty() {
                format!("▶ {node} ({kind})")
            } else {
                format!("▶ {node} ({kind}) {detail}")
            }
        }
        RunEvent::Progress {
            node,
            progress,
            total,
            message,
        } => {
            let total = total.map(|t| format!("/{t}")).unwrap_or_default();
            let message = message
                .as_deref()
                .map(|m| format!(" {m}"))
                .unwrap_or_default();
            format!("  … {node}: {progress}{total}{message}")
        }
        RunEvent::NodeFinished {
            node,
            kind,
            status,
            summary,
            elapsed,
        } => {
            let mark = match status {
                StepStatus::Ok => "✓",
                StepStatus::Failed => "✗",
                StepStatus::ContinuedAfterError => "!",
            };
            format!("{mark} {node} ({kind}, {}): {summary}", ms(*elapsed))
        }
        RunEvent::Elicitation {
            server,
            message,
            accepted,
        } => format!(
            "  ? server `{server}` asked: {message:?} — {}",
            if *accepted {
                "accepted with the defaults"
            } else {
                "declined (no person to answer; only requests whose fields all have defaults are accepted)"
            }
        ),
        RunEvent::App(app) => format!(
            "  ▣ {}: MCP App UI {}{}",
            app.node,
            app.resource_uri,
            app.server
                .as_deref()
                .map(|s| format!(" from server `{s}`"))
                .or_else(|| app.server_url.as_deref().map(|u| format!(" from {u}")))
                .unwrap_or_default()
        ),
        RunEvent::Notice { node, message } => match node {
            Some(n) => format!("  · {n}: {message}"),
            None => format!("  · {message}"),
        },
    })
}

pub async fn run(g: &Globals, a: RunArgs) -> Result<ExitCode> {
    let inputs = inputs(&a)?;
    let wf = match Workflow::load_named(&a.file, a.name.as_deref()) {
        Ok(wf) => wf,
        Err(LoadError::Invalid { path, problems }) => {
            errln!("error: {} is not a valid workflow:", path.display());
            for p in &problems {
                errln!("  {p}");
            }
            return Ok(ExitCode::from(2));
        }
        Err(e) => bail!(e),
    };
    let (specs, settings) = ctx::workflow_specs(g)?;
    let guard = ctx::guard(g, Some(&settings))?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let host = Host::new(
        specs,
        HostOptions {
            hooks: Arc::new(WorkflowHooks::new(Some(tx.clone()))),
            guard: Some(guard.clone()),
            transport_cache: ctx::transport_cache(),
            pins: ctx::pin_store(),
            ..Default::default()
        },
    );
    let provider = Provider::choose(None, settings.provider.as_deref())?;
    let mut model = ModelConfig::from_env().with_provider(provider);
    model.default_http(guard.inner());
    let cancel = CancellationToken::new();
    let runner = Runner::new(
        host.clone(),
        RunOptions {
            guard: Some(guard),
            model: Some(model),
            default_model: settings.model.clone(),
            events: Some(tx),
            cancel: cancel.clone(),
            ..Default::default()
        },
    );
    let problems = runner.validate(&wf, &inputs);
    if !problems.is_empty() {
        errln!(
            "error: {} has {} problem{}:",
            a.file.display(),
            problems.len(),
            if problems.len() == 1 { "" } else { "s" }
        );
        for p in &problems {
            errln!("  {p}");
        }
        return Ok(ExitCode::from(2));
    }

    let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
    let printer = tokio::spawn(async move {
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Some(ev) => {
                        if let Some(line) = log_line(&ev) {
                            errln!("{line}");
                        }
                    }
                    None => break,
                },
                _ = &mut stop_rx => {
                    while let Ok(ev) = rx.try_recv() {
                        if let Some(line) = log_line(&ev) {
                            errln!("{line}");
                        }
                    }
                    break;
                }
            }
        }
    });
    let ctrl_c = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                cancel.cancel();
            }
        })
    };
    let wf_name = wf.name.clone().unwrap_or_else(|| {
        a.file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "workflow".into())
    });
    errln!("Running workflow `{wf_name}` ({} nodes)", wf.nodes.len());
    let started = Instant::now();
    let started_at = SystemTime::now();
    let outcome = runner.run(&wf, inputs.clone()).await;
    let finished_at = SystemTime::now();
    ctrl_c.abort();
    host.shutdown().await;
    let _ = stop_tx.send(());
    let _ = printer.await;

    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&outcome.variables.to_json())?
        );
    }
    let log = run_log::build(
        &run_log::RunInfo {
            file: &a.file,
            name: wf_name,
            inputs: &inputs,
            started: started_at,
            finished: finished_at,
            cancelled: cancel.is_cancelled(),
        },
        &outcome,
    );
    let saved = match ctx::home_dir().and_then(|home| Ok(run_log::save(&home, log)?)) {
        Ok((id, path)) => {
            errln!("Run log: {}", path.display());
            Some(id)
        }
        Err(e) => {
            errln!("warning: could not save the run log: {e:#}");
            None
        }
    };
    if !outcome.apps.is_empty() {
        errln!("MCP App UIs produced by this run (open them with `switchboard serve`):");
        for app in &outcome.apps {
            let from = app
                .server
                .as_deref()
                .map(|s| format!("server `{s}`"))
                .or_else(|| app.server_url.clone())
                .unwrap_or_default();
            errln!("  {}: {} from {from}", app.node, app.resource_uri);
            if let Some(id) = &saved {
                errln!("    open: {}", run_log::app_link(id, &app.node));
            }
        }
        if saved.is_some() {
            errln!(
                "  (the links need `switchboard serve` running on its default port {}; if the browser has no access cookie yet, the page asks for the token link `switchboard serve` printed: open that first, or append `&token=…` to the link)",
                switchboard_web::DEFAULT_PORT
            );
        }
    }
    match &outcome.failure {
        None => {
            errln!(
                "Workflow finished: {} steps in {}",
                outcome.steps.len(),
                ms(started.elapsed())
            );
            Ok(ExitCode::SUCCESS)
        }
        Some(f) if cancel.is_cancelled() => {
            errln!("cancelled at node `{}` ({})", f.node, f.kind);
            Ok(ExitCode::from(130))
        }
        Some(f) => {
            errln!(
                "error: the workflow failed at node `{}` ({}): {}",
                f.node,
                f.kind,
                f.message
            );
            Ok(ExitCode::from(1))
        }
    }
}
