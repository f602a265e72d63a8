//! `switchboard-host`: many MCP connections at once.
//!
//! Turns validated settings into connections, starts every server concurrently (one
//! slow or broken server never delays the others), discovers tools, prompts and
//! resources, applies `includeTools`/`excludeTools`, keeps each server's status with a
//! reason, re-lists on `list_changed`, and (for long-lived hosts) reconnects dropped
//! connections with backoff. With a [`PinStore`] it pins each tool's definition and
//! withholds a changed one until the user accepts it (see [`PinStore`]).

mod cache;
mod host;
mod names;
mod pins;
mod status;
mod targets;

pub use host::{Host, HostEvent, HostOptions, ServerSpec};
pub use names::{cut_middle, identity_hash};
pub use pins::{
    Accept, MAX_TOOLS_PER_SERVER, PINS_FILE, PendingChange, PinError, PinStore, PinnedDefinition,
    Review, ServerKey, ServerPins, ToolPin, WithheldReason, WithheldTool, definition, fingerprint,
    fingerprint_of,
};
pub use status::{AuthStatus, ServerSnapshot, ServerStatus};
pub use targets::{spec_from_entry, specs_from_settings, target_from_config};
