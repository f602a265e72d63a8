//! [`RegistryError`]: what went wrong asking the registry or turning its answer into a
//! settings entry. Messages name what was wrong and what to do, without naming a front
//! end's flags; the CLI and the web app add their own words where they need them
//! (the variants carry the parts).

use crate::entry::InputKind;

/// Why a registry request or an entry failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The registry URL cannot be used.
    #[error(
        "`{url}` is not a registry URL ({why}); give one like https://registry.modelcontextprotocol.io"
    )]
    BadUrl { url: String, why: String },
    /// The request failed: refused by the URL guard, unreachable, timed out.
    #[error(
        "cannot reach the MCP Registry at {base}: {source}; check the address and your network"
    )]
    Unreachable {
        base: String,
        #[source]
        source: switchboard_net::NetError,
    },
    /// Reading the answer failed midway (the connection broke, the time limit passed).
    #[error("reading the registry's answer from {url} failed: {source}")]
    Read {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// The answer was larger than the limit.
    #[error(
        "the registry's answer from {url} is larger than {limit_mib} MiB; is {base} an MCP Registry?"
    )]
    TooLarge {
        url: String,
        base: String,
        limit_mib: usize,
    },
    /// The registry answered an error status.
    #[error("the MCP Registry answered {status} for {url}: {detail}")]
    Status {
        status: u16,
        url: String,
        detail: String,
    },
    /// The answer is not JSON, or not the documented shape.
    #[error("the answer from {url} is not {what}; is {base} an MCP Registry?")]
    Malformed {
        url: String,
        base: String,
        what: &'static str,
    },
    /// `/v0.1/servers` is missing.
    #[error("{base} has no /v0.1/servers: is it an MCP Registry?")]
    NotARegistry { base: String },
    /// No such server (or version).
    #[error("the MCP Registry at {base} has no server `{id}`{}", .version.as_deref().map(|v| format!(" at version {v}")).unwrap_or_default())]
    NotFound {
        base: String,
        id: String,
        version: Option<String>,
    },
    /// The server is listed, but not as active.
    #[error("`{id}` is {status} in the registry and is not installed; pick another server")]
    Inactive { id: String, status: String },
    /// The chosen package or remote does not exist.
    #[error("this server has no {what} number {index} (it has {count})")]
    NoSuchChoice {
        what: &'static str,
        index: usize,
        count: usize,
    },
    /// Nothing the server offers can run here.
    #[error("no way to run this server that Switchboard supports: {}", .skipped.join("; "))]
    Unsupported { skipped: Vec<String> },
    /// The server lists neither packages nor remotes.
    #[error("the registry lists no package or remote for this server{}; see its website or repository to install it", if .problems.is_empty() { String::new() } else { format!(" that can be used ({})", .problems.join("; ")) })]
    NothingToRun { problems: Vec<String> },
    /// A required argument has no value in the registry.
    #[error("{} argument `{label}`{} has no value in the registry", if *.package { "package" } else { "runtime" }, .about.as_deref().map(|a| format!(" ({a})")).unwrap_or_default())]
    ArgumentWithoutValue {
        /// A package argument (which may be given by the person), else a runtime one.
        package: bool,
        label: String,
        about: Option<String>,
    },
    /// An argument needs a `{variable}` the registry gives no default for.
    #[error(
        "argument `{label}` needs `{var}`, which cannot be filled from the registry; add the server by hand"
    )]
    ArgumentVariable { label: String, var: String },
    /// The remote URL has `{variables}`.
    #[error(
        "the remote URL `{url}` has `{{variables}}` that cannot be filled from the registry; add it by hand with its URL"
    )]
    UrlVariables { url: String },
    /// A `runtimeHint` that is not a known runner for its package type.
    #[error(
        "the registry says to run this {kind} package with `{hint}`, which is not a known runner for {kind} packages ({known}); add the server by hand if you trust that command"
    )]
    UnknownRunner {
        kind: String,
        hint: String,
        known: String,
    },
    /// A string from the registry does not fit its role (an environment variable
    /// name, a header name, an image reference, a package name or version).
    #[error(
        "the registry's {field} `{value}` is not {what}, so this server cannot be added from the registry; tell its publisher, or add it by hand if you trust it"
    )]
    BadField {
        /// Where it was (`environmentVariables[].name`, `identifier`…).
        field: &'static str,
        /// The value, escaped and cut for reading.
        value: String,
        /// What it should have been.
        what: &'static str,
    },
    /// A runtime argument that is not on its runner's allow-list.
    #[error(
        "the registry asks to run `{runner}` with `{option}`, which {why}. If you trust this server, add it by hand: {by_hand}"
    )]
    RunnerOption {
        runner: String,
        /// The argument as given (with its value), escaped and cut.
        option: String,
        why: String,
        /// The command that adds the entry as the registry describes it.
        by_hand: String,
    },
    /// A name the person gave (an environment variable or header) does not fit.
    #[error("`{name}` is not {}", match .kind { InputKind::Env => "an environment variable name (letters, digits and _, not starting with a digit)", InputKind::Header => "an HTTP header name (letters, digits and !#%&'*+-.^_`|~)" })]
    BadName { kind: InputKind, name: String },
    /// A remote URL that is not http(s).
    #[error("the remote URL `{url}` is not an http(s):// URL")]
    RemoteUrl { url: String },
    /// A remote transport other than Streamable HTTP or SSE.
    #[error("remote type `{kind}` is not supported (only streamable-http and sse)")]
    RemoteKind { kind: String },
    /// Required values are missing (each `NAME (description)`).
    #[error("the server needs {} {}", .kind.plural(), .names.join(", "))]
    Missing { kind: InputKind, names: Vec<String> },
}
