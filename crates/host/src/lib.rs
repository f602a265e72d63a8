//! `switchboard-host`: many MCP connections at once.
//!
//! Turns validated settings into connections, starts every server concurrently (one
//! slow or broken server never delays the others), discovers tools, prompts and
//! resources, applies `includeTools`/`excludeTools`, keeps each server's status with a
//! reason, re-lists on `list_changed`, and (for long-lived hosts) reconnects dropped
//! connections with backoff.

mod cache;
mod host;
mod status;
mod targets;

pub use host::{Host, HostEvent, HostOptions, ServerSpec};
pub use status::{AuthStatus, ServerSnapshot, ServerStatus};
pub use targets::{spec_from_entry, specs_from_settings, target_from_config};
