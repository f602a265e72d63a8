//! Test-only helpers for Switchboard: install, spawn and clean up the real MCP peers the
//! tests run against.
//!
//! Peers live under `tests/peers/` and are installed by `scripts/install-peers.sh`:
//! - `@modelcontextprotocol/server-everything` (Node) over stdio, SSE and Streamable HTTP
//!   ([`spawn_everything`], [`everything_stdio_command`]);
//! - a Python-SDK server (`tests/peers/python/server.py`) over stdio, SSE, Streamable HTTP,
//!   JSON replies and stateless ([`spawn_python`], [`python_stdio_command`]);
//! - misbehaving stdio peers (`tests/peers/python/bad/*.py`, [`bad_peer`]);
//! - OAuth-protected servers: the Python SDK's auth routes (`oauth_server.py`,
//!   [`spawn_oauth_python`]) and the TS SDK's `--oauth` example ([`spawn_ts_oauth`]),
//!   with a stand-in browser ([`fake_browser_command`]).
//! - a real OpenID provider (npm `oidc-provider`, `tests/peers/oidc/provider.mjs`,
//!   [`spawn_oidc_provider`]) with test clients and accounts, and a stand-in browser
//!   that logs an account in ([`OidcPeer::drive_login`]).
//! - a local MCP Registry with the documented API and real `server.json` examples,
//!   and hostile registries beside it ([`RegistryServer`]);
//! - a hostile-input witness: [`RecordingListener`] records every byte sent to it.
//! - a throwaway PostgreSQL cluster ([`PgCluster`]: Debian's server binaries, `initdb` +
//!   `pg_ctl` in a temp dir as `nobody` when run as root, stopped on drop).
//!
//! Every spawned peer is a [`PeerProcess`]: its own process group, output captured, the
//! whole group SIGKILLed and reaped on drop. HTTP peers bind 127.0.0.1 only.

// Test support plays peers and clients: it opens sockets and builds HTTP clients of its
// own, which the workspace's one-network-door rule (clippy.toml) forbids in shipped code.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod demo;
mod everything;
mod install;
mod oauth;
mod oidc;
mod postgres;
mod probe;
mod process;
mod python;
mod recorder;
mod registry;

pub use demo::demo_server_bin;
pub use everything::{EverythingMode, everything_bin, everything_stdio_command, spawn_everything};
pub use install::{ensure_peers, peers_dir, repo_root};
pub use oauth::{
    fake_browser_command, fake_browser_script, oauth_peer_stats, oauth_server_script,
    spawn_oauth_python, spawn_ts_oauth,
};
pub use oidc::{
    OIDC_CLIENT_ID, OIDC_ES256_CLIENT_ID, OIDC_OTHER_CLIENT_ID, OidcPeer, OidcPeerOptions,
    OidcRedirect, oidc_peer_dir, spawn_oidc_provider, spawn_oidc_provider_with,
};
pub use postgres::{PG_PASSWORD, PgCluster, pg_bin_dir};
pub use probe::{HttpInitReply, http_initialize, initialize_request, sse_initialize};
pub use process::{PeerProcess, free_port, process_group_alive, wait_group_gone};
pub use python::{
    PyMode, bad_peer, python_bin, python_server_script, python_stdio_command, spawn_bad_http,
    spawn_python,
};
pub use recorder::{CannedReply, RecordingListener};
pub use registry::{REGISTRY_PAGE, RegistryServer, default_registry_servers, registry_fixture};
