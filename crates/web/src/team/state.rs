//! [`TeamState`]: what every team request shares — the store, the URL-guarded HTTP
//! client, the configuration fixed at start, the OpenID sign-in and this instance's
//! MCP client cache. Nothing in it is a user's state: that is in the store.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchboard_net::GuardedClient;
use switchboard_store::{Store, StoreError};

use super::cache::ClientCache;
use super::metrics::TeamMetrics;
use super::model_key::TeamModel;
use super::signin::SignIn;
use crate::error::ApiError;

/// Fixed at start.
#[derive(Debug, Clone)]
pub struct TeamConfig {
    /// The origin browsers use (the public origin, else `http://` + the bound address).
    pub app_origin: String,
    /// `Host` header values answered to (the public origin's and the bound address).
    pub allowed_hosts: Vec<String>,
    /// Cookies carry `Secure` (the public origin is https).
    pub secure_cookies: bool,
    /// How long a session lasts.
    pub session_ttl: Duration,
}

impl TeamConfig {
    /// The session cookie's name: `__Host-` prefixed behind https (the browser then
    /// insists on `Secure`, `Path=/` and no `Domain`).
    pub fn cookie_name(&self) -> &'static str {
        if self.secure_cookies {
            "__Host-switchboard_session"
        } else {
            "switchboard_session"
        }
    }

    /// The cookie that ties a login in flight to the browser that started it (its
    /// `state`), so a callback URL made by someone else does not sign this browser in.
    pub fn login_cookie_name(&self) -> &'static str {
        if self.secure_cookies {
            "__Host-switchboard_login"
        } else {
            "switchboard_login"
        }
    }

    /// The OAuth redirect URI of this app for MCP server logins (the Test's discovery
    /// hint and `oauth/start` register it).
    pub fn oauth_redirect_uri(&self) -> String {
        format!("{}{}", self.app_origin, super::mcp_oauth::CALLBACK_PATH)
    }
}

pub(crate) struct TeamShared {
    pub store: Store,
    pub guard: GuardedClient,
    pub cfg: TeamConfig,
    pub sign_in: Option<SignIn>,
    pub cache: ClientCache,
    pub metrics: TeamMetrics,
    pub model: Option<TeamModel>,
    /// Conversations with a turn running on this instance (only to answer a second send
    /// here with 409; nothing another instance needs).
    pub turns: Arc<Mutex<HashSet<String>>>,
    /// The operator allowed stdio catalog servers on this instance
    /// (`--allow-catalog-stdio`).
    pub allow_catalog_stdio: bool,
    /// The gateway's recently built per-user catalogs (a cache only).
    pub catalogs: super::gateway::CatalogCache,
    /// Gateway calls of clients on 2026-07-28 waiting on this instance for the
    /// client's answer to an upstream server's question.
    pub inputs: Arc<switchboard_gateway::InputTable>,
    /// Open gateway `subscriptions/listen` requests on this instance, by user id.
    pub listens: Mutex<HashMap<String, usize>>,
    /// Workflow runs running on this instance, with their live events (the store has
    /// each run's row and, once finished, its log: nothing another instance needs).
    pub runs: super::workflows::LiveRuns,
    /// The gateway's registration limits with this instance's per-address buckets, and
    /// the client metadata documents it fetched (caches and counters only).
    pub gateway_clients: super::gateway_auth::GatewayClients,
}

/// A turn running on this instance; dropping it ends the mark.
pub(crate) struct RunningTurn {
    turns: Arc<Mutex<HashSet<String>>>,
    id: String,
}

impl Drop for RunningTurn {
    fn drop(&mut self) {
        if let Ok(mut t) = self.turns.lock() {
            t.remove(&self.id);
        }
    }
}

/// The team app's state; cheap to clone.
#[derive(Clone)]
pub struct TeamState {
    pub(crate) inner: Arc<TeamShared>,
}

impl std::fmt::Debug for TeamState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeamState")
            .field("app_origin", &self.inner.cfg.app_origin)
            .field("store", &self.inner.store)
            .finish_non_exhaustive()
    }
}

impl TeamState {
    /// The team store.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub(crate) fn cfg(&self) -> &TeamConfig {
        &self.inner.cfg
    }

    pub(crate) fn guard(&self) -> &GuardedClient {
        &self.inner.guard
    }

    pub(crate) fn sign_in(&self) -> Option<&SignIn> {
        self.inner.sign_in.as_ref()
    }

    /// Whether this instance publishes and runs stdio catalog servers.
    pub(crate) fn allow_catalog_stdio(&self) -> bool {
        self.inner.allow_catalog_stdio
    }

    pub(crate) fn live_runs(&self) -> &super::workflows::LiveRuns {
        &self.inner.runs
    }

    pub(crate) fn gateway_clients(&self) -> &super::gateway_auth::GatewayClients {
        &self.inner.gateway_clients
    }

    pub(crate) fn catalogs(&self) -> &super::gateway::CatalogCache {
        &self.inner.catalogs
    }

    pub(crate) fn listens(&self) -> &Mutex<HashMap<String, usize>> {
        &self.inner.listens
    }

    pub(crate) fn inputs(&self) -> &Arc<switchboard_gateway::InputTable> {
        &self.inner.inputs
    }

    pub(crate) fn cache(&self) -> &ClientCache {
        &self.inner.cache
    }

    pub(crate) fn model(&self) -> Option<&TeamModel> {
        self.inner.model.as_ref()
    }

    /// Marks a turn of conversation `id` as running here; `None` when one already is.
    pub(crate) fn start_turn(&self, id: &str) -> Option<RunningTurn> {
        let mut t = self.inner.turns.lock().ok()?;
        t.insert(id.to_owned()).then(|| RunningTurn {
            turns: Arc::clone(&self.inner.turns),
            id: id.to_owned(),
        })
    }

    /// Whether a turn of conversation `id` runs on this instance.
    pub(crate) fn turn_running(&self, id: &str) -> bool {
        self.inner.turns.lock().is_ok_and(|t| t.contains(id))
    }

    /// How many MCP connections this instance holds open (for tests and operators).
    pub fn open_connections(&self) -> usize {
        self.inner.cache.len()
    }

    /// Close idle cached connections now (the background sweep does it periodically).
    pub fn sweep_idle(&self) {
        self.inner.cache.sweep();
    }
}

/// A store failure as an API answer: a value the schema refuses is the request's fault
/// (400, with the store's message), a write the acting user may not make is 403; anything else is the database's (503, logged).
pub(crate) fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::Invalid(why) => ApiError::bad_request(why),
        StoreError::Forbidden(why) => ApiError::forbidden(why),
        StoreError::Full(why) => ApiError::conflict(why),
        other => {
            tracing::warn!("team store: {other}");
            ApiError::unavailable("the team database did not answer; try again in a moment")
        }
    }
}
