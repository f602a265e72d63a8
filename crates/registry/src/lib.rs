//! `switchboard-registry`: the official MCP Registry, for every front end.
//!
//! - [`Registry`] (`client.rs`): `/v0.1/servers?search=` with cursor pagination (active
//!   servers only), `/v0.1/servers/{name}/versions/{version|latest}` (an inactive
//!   server refused), through the caller's `switchboard-net` guarded client with a time
//!   limit and a size limit on every answer;
//! - [`ServerJson`] (`server_json.rs`): a `server.json` parsed in two steps (raw serde
//!   shape, then the validated type);
//! - [`download_bundle`], [`check_sha256`], [`unpack`], [`read_manifest`]
//!   (`bundle.rs`): an mcpb package, downloaded, checked, unpacked safely and turned into
//!   a stdio entry (the CLI installs bundles; the web app does not);
//! - [`Plan`] (`entry.rs`): a chosen package or remote → a settings entry, registry
//!   text escaped so it never expands the environment, and [`command_line`], the exact
//!   command a front end shows before it writes;
//! - `check.rs`: what each registry string may be in its role (environment and header
//!   names, image references, npm and PyPI names and versions) and the per-runner
//!   allow-list of runtime options.
//!
//! Must not: open a socket or build an HTTP client (only `switchboard-net`'s), ask a
//! person anything (the CLI prompts, the web app shows a form), or write settings.

mod bundle;
mod check;
mod client;
mod entry;
mod error;
mod server_json;

pub use bundle::{
    BUNDLE_TIMEOUT, BundleError, Limits, MAX_BUNDLE, Manifest, ServerType, check_sha256,
    download_bundle, read_manifest, unpack,
};
pub use check::{Runner, runner, shown};
pub use client::{DEFAULT_REGISTRY, Found, MAX_BODY, REQUEST_TIMEOUT, Registry, split_id};
pub use entry::{
    Choice, InputKind, Plan, command_line, image, known_runners, package_support, remote_support,
};
pub use error::RegistryError;
pub use server_json::{
    Argument, Input, Listing, Package, PackageKind, Remote, ServerJson, parse_listing, parse_server,
};
