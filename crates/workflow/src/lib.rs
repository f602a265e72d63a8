//! `switchboard-workflow`: repeatable jobs that call MCP tools directly and hand results
//! from step to step, without a person in the loop.
//!
//! Workflows use GemiHub's YAML format (also as a ```` ```workflow ```` block in
//! Markdown): `name`, and `nodes`, each with an `id`, a `type` and string properties;
//! the flow goes to `next` or the next node in the list.
//!
//! - [`Workflow`]: reading a file, every node and property with its line.
//! - [`validate`]: every problem at once, with line numbers (unknown types and
//!   properties, dangling `next`, duplicate ids, missing properties, variables used
//!   before they are set).
//! - [`Runner`]: runs a workflow against a [`switchboard_host::Host`]'s servers:
//!   `mcp`, `command` (the model), `variable`, `set`, `if`, `while`, `sleep`, `http`,
//!   `json` and `workflow` nodes, reporting each step as a [`RunEvent`].
//! - [`template`]: `{{var}}`, `{{a.b}}`, `{{arr[i]}}`, `{{var:json}}`, conditions.
//! - [`run_log`]: the saved-run format (`$SWITCHBOARD_HOME/runs/*.json`) that
//!   `switchboard run` writes and `switchboard serve` lists and shows.

mod command_node;
mod events;
mod graph;
mod http_node;
mod mcp_node;
mod parse;
mod problem;
mod run;
pub mod run_log;
mod spec;
pub mod template;
mod validate;
mod vars;

pub use events::{AppInfo, RunEvent, Step, StepStatus, WorkflowHooks, answer_without_person};
pub use graph::END;
pub use parse::{LoadError, Node, Prop, Workflow};
pub use problem::{Problem, did_you_mean};
pub use run::{
    DEFAULT_HTTP_TIMEOUT, DEFAULT_MCP_TIMEOUT, Failure, MAX_DEPTH, MAX_TOTAL_STEPS,
    MAX_WHILE_ITERATIONS, RunOptions, RunOutcome, Runner,
};
pub use spec::{GEMIHUB_ONLY_TYPES, NodeSpec, SPECS};
pub use validate::{ValidateOptions, validate};
pub use vars::{Variables, auto_number, format_number, value_text};
