//! The OAuth tokens a host sends upstream: the user's token store behind an
//! `AuthManager` that knows every configured HTTP server. Shared by `switchboard` and
//! the lean `switchboard-gateway` binary, which never logs in interactively.
//!
//! Must not: open a browser or prompt (interactive logins are `auth_cmd`'s).

use std::sync::Arc;

use anyhow::Result;
use switchboard_auth::{AuthManager, TokenStore};
use switchboard_config::Settings;
use switchboard_mcp::TokenSource;
use switchboard_net::GuardedClient;

use crate::ctx;

/// The auth manager over the user's token store, knowing every HTTP server of
/// `settings`.
pub fn manager(settings: Option<&Settings>, guard: &GuardedClient) -> Result<AuthManager> {
    let store = TokenStore::from_env(&ctx::home_dir()?);
    let m = AuthManager::new(store, guard.clone());
    if let Some(s) = settings {
        m.add_configs(s.servers.iter().filter_map(|e| e.config.as_ref().ok()));
    }
    Ok(m)
}

/// The stored OAuth tokens as a host's token source, with no interactive login
/// (`None` when there is no home folder to keep them in).
pub fn stored(settings: Option<&Settings>, guard: &GuardedClient) -> Option<Arc<dyn TokenSource>> {
    manager(settings, guard)
        .ok()
        .map(|m| Arc::new(m) as Arc<dyn TokenSource>)
}
