//! Starting a team instance: migrate the store, check that the secret key opens what it
//! holds (`Store::check_keys`: a replica with another key refuses to start), bind, fix the app's origin (the public
//! origin behind a reverse proxy, else `http://` + the loopback address), build the
//! identity provider for that origin's `/auth/callback`, serve (with each connection's
//! peer address, which the gateway's registration rate limit keys on), and sweep idle
//! cached connections and expired sessions in the background.
//!
//! The OpenID issuer is named by the operator, not by users: sign-in gets its own
//! guarded client on which exactly the issuer's origin passes whatever the URL policy
//! (`ClientOptions::trusted_origins`), so a loopback or private-network identity
//! provider needs no weaker `--url-policy`; every other URL (discovered endpoints on
//! other origins, every server users add) stays under the policy.
//!
//! Must not: start beyond loopback without a public origin (the issuer's redirect URI
//! and the `Origin` checks need one fixed origin).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use switchboard_net::{ClientOptions, GuardedClient, UrlPolicy};
use switchboard_store::Store;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::cache::{CacheLimits, ClientCache};
use super::gateway_auth::{GatewayClients, RegistrationLimits};
use super::metrics::{MetricsToken, TeamMetrics};
use super::model_key::TeamModel;
use super::signin::{SignIn, SignInOptions};
use super::state::{TeamConfig, TeamShared, TeamState};
use crate::error::WebError;
use crate::serve::{DEFAULT_PORT, origin_authority, public_origin};

/// Where the issuer sends the browser back (on the app's origin).
pub const SIGNIN_CALLBACK_PATH: &str = "/auth/callback";

/// How to run a team instance.
#[derive(Debug, Clone)]
pub struct TeamOptions {
    /// Address to bind (default 127.0.0.1).
    pub host: IpAddr,
    /// Port (default 8765; 0 picks a free one).
    pub port: u16,
    /// The team store, opened with the secret keys; migrated at start.
    pub store: Store,
    /// The origin browsers use behind a TLS reverse proxy (`https://team.example.com`):
    /// the redirect URI's origin, the only `Origin` accepted; https makes cookies `Secure`.
    pub public_origin: Option<String>,
    /// The URL policy for every outbound request (default `strict`).
    pub url_policy: UrlPolicy,
    /// OpenID Connect sign-in (the redirect URI is the app's origin + `/auth/callback`).
    /// `None`: `/auth/login` answers 503 (sessions can still be made by the embedding
    /// program through the store).
    pub sign_in: Option<SignInOptions>,
    /// The MCP client cache's limits.
    pub cache: CacheLimits,
    /// How long a session lasts.
    pub session_ttl: Duration,
    /// The bearer token `/metrics` asks of a scraper; `None`: `/metrics` answers 404.
    pub metrics_token: Option<MetricsToken>,
    /// How chats reach the model (provider, base URL, model); keys come from the store.
    /// `None`: the chat routes answer 503.
    pub model: Option<TeamModel>,
    /// Admins may publish stdio catalog servers, and this instance runs them (one process
    /// per user who uses one, under the publishing admin's responsibility). Off unless the
    /// operator passes `--allow-catalog-stdio`.
    pub allow_catalog_stdio: bool,
    /// How long a server's elicitation in a chat waits for the person's answer before
    /// the server is told `cancel` (default [`super::elicit::ELICITATION_TIMEOUT`]).
    pub elicitation_timeout: Duration,
    /// How much anonymous dynamic registration the gateway's authorization server takes
    /// (per address, and clients waiting for approval in the store).
    pub registration: RegistrationLimits,
}

impl TeamOptions {
    /// Defaults: 127.0.0.1:8765, strict URL policy, 12-hour sessions, no sign-in, `/metrics`
    /// off, no stdio catalog servers.
    pub fn new(store: Store) -> Self {
        Self {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: DEFAULT_PORT,
            store,
            public_origin: None,
            url_policy: UrlPolicy::Strict,
            sign_in: None,
            cache: CacheLimits::default(),
            session_ttl: Duration::from_secs(12 * 60 * 60),
            metrics_token: None,
            model: None,
            allow_catalog_stdio: false,
            elicitation_timeout: super::elicit::ELICITATION_TIMEOUT,
            registration: RegistrationLimits::default(),
        }
    }
}

/// A running team instance.
#[derive(Debug)]
pub struct RunningTeam {
    /// The bound address.
    pub addr: SocketAddr,
    /// The app's origin (public origin, or `http://` + the bound address).
    pub app_origin: String,
    /// The state (store, cache).
    pub state: TeamState,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningTeam {
    /// Stop listening and close every cached connection.
    pub async fn shutdown(self) {
        self.stop.cancel();
        for t in self.tasks {
            let abort = t.abort_handle();
            if tokio::time::timeout(Duration::from_secs(2), t)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        self.state.inner.cache.clear();
    }
}

/// How often expired sessions and logins in flight are deleted.
const PURGE_EVERY: Duration = Duration::from_secs(10 * 60);

/// Migrate the store, bind, and serve in the background.
///
/// # Errors
/// A migration that fails, a secret key that does not open what the store holds, an
/// unusable public origin, a non-loopback address without a
/// public origin, a port in use, or an identity provider that cannot be built.
pub async fn start_team(opts: TeamOptions) -> Result<RunningTeam, WebError> {
    let report = opts
        .store
        .migrate()
        .await
        .map_err(|e| WebError::Store(e.to_string()))?;
    for m in &report.applied {
        tracing::info!(version = m.version, "applied migration: {}", m.description);
    }
    // A replica with another key would start and then fail every user's request.
    opts.store
        .check_keys()
        .await
        .map_err(|e| WebError::Store(e.to_string()))?;
    let configured = opts
        .public_origin
        .as_deref()
        .map(|o| public_origin("--public-origin", o))
        .transpose()?;
    if configured.is_none() && !opts.host.is_loopback() {
        return Err(WebError::Origins(format!(
            "team mode bound to {} needs --public-origin: the origin browsers use (e.g. `https://switchboard.example.com`), which is also the sign-in redirect's origin",
            opts.host
        )));
    }
    let addr = SocketAddr::new(opts.host, opts.port);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| WebError::Bind {
            addr: addr.to_string(),
            source,
        })?;
    let addr = listener.local_addr().map_err(WebError::Serve)?;
    let bound = match addr.ip() {
        IpAddr::V6(v6) => format!("[{v6}]:{}", addr.port()),
        IpAddr::V4(v4) => format!("{v4}:{}", addr.port()),
    };
    let app_origin = configured
        .clone()
        .unwrap_or_else(|| format!("http://{bound}"));
    let mut allowed_hosts = vec![bound];
    if let Some(o) = &configured {
        allowed_hosts.push(origin_authority(o).to_owned());
    }
    let cfg = TeamConfig {
        secure_cookies: app_origin.starts_with("https://"),
        app_origin: app_origin.clone(),
        allowed_hosts,
        session_ttl: opts.session_ttl,
    };
    let mut copts = ClientOptions::new(opts.url_policy);
    copts.timeout = None;
    let guard = GuardedClient::new(copts).map_err(|e| WebError::Http(e.to_string()))?;
    let sign_in = match opts.sign_in {
        Some(o) => {
            let redirect = format!("{app_origin}{SIGNIN_CALLBACK_PATH}");
            let redirect = url::Url::parse(&redirect)
                .map_err(|e| WebError::SignIn(format!("redirect URI `{redirect}`: {e}")))?;
            // The issuer is the operator's: its exact origin passes the guard on a
            // client for sign-in only, whatever --url-policy says for users' servers.
            let mut sopts = ClientOptions::new(opts.url_policy);
            sopts.timeout = None;
            sopts.trusted_origins = vec![o.issuer.clone()];
            let signin_guard =
                GuardedClient::new(sopts).map_err(|e| WebError::Http(e.to_string()))?;
            tracing::info!(
                "sign-in: the issuer's origin {} is trusted (named by the operator); other URLs stay under URL policy `{}`",
                o.issuer.origin().ascii_serialization(),
                opts.url_policy
            );
            let sign_in = SignIn::new(o, redirect, signin_guard);
            // Discovered now to report a wrong issuer at once; an issuer that is down is
            // asked again at the first sign-in.
            if let Err(e) = sign_in.client().await {
                // A log event only (shown at the default level): stderr stays one JSON
                // object per line under `--log-format json`.
                tracing::warn!("sign-in: {e} (asked again at the first sign-in)");
            }
            Some(sign_in)
        }
        None => None,
    };
    let cache = ClientCache::new(guard.clone(), opts.cache).with_elicitations(Arc::new(
        super::elicit::ElicitRouter::new(opts.elicitation_timeout),
    ));
    let metrics = TeamMetrics::new(opts.metrics_token, cache.open_gauge());
    let state = TeamState {
        inner: Arc::new(TeamShared {
            store: opts.store,
            cache,
            metrics,
            guard,
            cfg,
            sign_in,
            model: opts.model,
            turns: Arc::default(),
            allow_catalog_stdio: opts.allow_catalog_stdio,
            catalogs: Default::default(),
            inputs: switchboard_gateway::InputTable::new(opts.elicitation_timeout),
            listens: Default::default(),
            runs: Default::default(),
            gateway_clients: GatewayClients::new(opts.registration),
        }),
    };
    let stop = CancellationToken::new();
    let serve_task = {
        // Each request carries its connection's peer address (`ConnectInfo`).
        let router =
            super::team_app(state.clone()).into_make_service_with_connect_info::<SocketAddr>();
        let stop = stop.clone();
        tokio::spawn(async move {
            // TCP_NODELAY: an answer is several small writes.
            let served = axum::serve(switchboard_net::no_delay(listener), router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
            if let Err(e) = served {
                tracing::warn!("the team app stopped: {e}");
            }
        })
    };
    let housekeeping = {
        let state = state.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut sweep = tokio::time::interval(state.cache().sweep_every());
            let mut purge = tokio::time::interval(PURGE_EVERY);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = sweep.tick() => state.cache().sweep(),
                    _ = purge.tick() => {
                        if let Err(e) = state.store().purge_expired().await {
                            tracing::warn!("purging expired sessions: {e}");
                        }
                        if let Err(e) = state.store().purge_gateway_expired().await {
                            tracing::warn!("purging expired gateway codes and tokens: {e}");
                        }
                    }
                }
            }
        })
    };
    Ok(RunningTeam {
        addr,
        app_origin,
        state,
        stop,
        tasks: vec![serve_task, housekeeping],
    })
}

/// Run a team instance until Ctrl-C: prints `Switchboard (team) is running at ORIGIN`.
///
/// # Errors
/// As [`start_team`].
pub async fn serve_team(opts: TeamOptions) -> Result<(), WebError> {
    let running = start_team(opts).await?;
    let interrupted = crate::interrupt();
    println!("Switchboard (team) is running at {}", running.app_origin);
    interrupted.await;
    eprintln!("Stopping…");
    running.shutdown().await;
    Ok(())
}
