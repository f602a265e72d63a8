//! Starting the web app: two listeners (the app, and the MCP Apps sandbox proxy on a
//! second loopback origin), the access token, the URL policy, and the router.
//!
//! - Binds `127.0.0.1:8765` by default (`port: 0` picks a free port). The proxy
//!   listens on another free port and is addressed as `http://localhost:PORT`: another
//!   host name than the app's `127.0.0.1`, so the app's cookies are out of its reach.
//! - Bound beyond loopback (`--host 0.0.0.0`), or with [`ServeOptions::remote`] or a
//!   public origin (behind a reverse proxy), the app is *remote*: the URL policy
//!   defaults to `strict` and stdio servers cannot be added or edited from the browser.
//!   The proxy listens on its own port on the same address; with
//!   [`ServeOptions::public_origin`] the browser reaches it under
//!   [`ServeOptions::sandbox_origin`], which must be another host name than the app's,
//!   so the access cookie (cookies ignore ports) is never sent to it.
//! - Sandbox responses always carry `frame-ancestors <app origin>`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use serde_json::json;
use switchboard_config::LoadOptions;
use switchboard_host::ServerSpec;
use switchboard_model::ModelConfig;
use switchboard_net::UrlPolicy;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::{ApiError, WebError};
use crate::state::{AppConfig, AppState};
use crate::{
    access, apps, assets, chat, events, explorer, oauth, registry, settings, test_conn, workflows,
};

/// The default port of `switchboard serve`.
pub const DEFAULT_PORT: u16 = 8765;

/// How to run the web app.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to bind (default 127.0.0.1).
    pub host: IpAddr,
    /// Port (default 8765; 0 picks a free one).
    pub port: u16,
    /// The sandbox proxy's port (default 0: a free one).
    pub proxy_port: u16,
    /// Open the browser at the printed URL.
    pub open: bool,
    /// Where the settings are (the same files as the CLI).
    pub load: LoadOptions,
    /// `--url-policy`, when given; else `urlPolicy` in settings; else `local` on
    /// loopback and `strict` beyond.
    pub url_policy: Option<UrlPolicy>,
    /// Servers to use when there is no settings file (the CLI's bundled demo).
    pub default_servers: Vec<ServerSpec>,
    /// The chat's model APIs (`GEMINI_API_KEY`, `GEMINI_BASE_URL`, `OPENAI_API_KEY`,
    /// `OPENAI_BASE_URL`); `provider` in the settings picks one. `None` disables the chat.
    pub model: Option<ModelConfig>,
    /// Where to remember which HTTP transport worked per URL.
    pub transport_cache: Option<PathBuf>,
    /// OAuth: the token source for connections and browser logins (the CLI wires
    /// `switchboard-auth` in). `None`: Test still reports `needsOAuth`, and the page
    /// points at `switchboard mcp login`.
    pub oauth: Option<crate::oauth::OAuthHandle>,
    /// Serve as reachable beyond loopback even when bound to it (a reverse proxy on
    /// this machine forwards to it): strict URL policy by default, no stdio edits.
    pub remote: bool,
    /// The origin browsers reach the app under (`https://switchboard.example.com`), when
    /// a reverse proxy sits in front; implies `remote` and needs `sandbox_origin`.
    pub public_origin: Option<String>,
    /// The origin browsers reach the sandbox listener under
    /// (`https://sandbox.switchboard.example.com`): another host name than
    /// `public_origin`'s.
    pub sandbox_origin: Option<String>,
}

impl ServeOptions {
    /// Defaults (127.0.0.1:8765, no browser) for these settings.
    pub fn new(load: LoadOptions) -> Self {
        Self {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: DEFAULT_PORT,
            proxy_port: 0,
            open: false,
            load,
            url_policy: None,
            default_servers: Vec::new(),
            model: None,
            transport_cache: None,
            oauth: None,
            remote: false,
            public_origin: None,
            sandbox_origin: None,
        }
    }

    /// Whether the app is served as reachable beyond loopback.
    pub fn is_remote(&self) -> bool {
        self.remote || self.public_origin.is_some() || !self.host.is_loopback()
    }
}

/// A configured public origin: `http(s)://host[:port]`, lower-cased, no path.
pub(crate) fn public_origin(flag: &str, value: &str) -> Result<String, WebError> {
    let bad = |why: &str| {
        WebError::Origins(format!(
            "{flag} `{value}`: {why}; give an origin such as `https://switchboard.example.com`"
        ))
    };
    let origin = crate::apps::csp_origin(value).map_err(|e| bad(&e.to_string()))?;
    if !(origin.starts_with("https://") || origin.starts_with("http://")) {
        return Err(bad("only http and https origins are allowed"));
    }
    if origin.contains('*') {
        return Err(bad("a wildcard is not an origin"));
    }
    Ok(origin)
}

/// The host name of an origin (`https://a.example:8443` → `a.example`).
fn origin_host(origin: &str) -> &str {
    let rest = origin.split_once("://").map_or(origin, |(_, r)| r);
    if rest.starts_with('[') {
        return rest.split_inclusive(']').next().unwrap_or(rest);
    }
    rest.split(':').next().unwrap_or(rest)
}

/// The `host[:port]` part of an origin.
pub(crate) fn origin_authority(origin: &str) -> &str {
    origin.split_once("://").map_or(origin, |(_, r)| r)
}

/// `--public-origin` and `--sandbox-origin`: both or neither, on different host names.
fn configured_origins(opts: &ServeOptions) -> Result<Option<(String, String)>, WebError> {
    match (&opts.public_origin, &opts.sandbox_origin) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(WebError::Origins(
            "a public origin needs a sandbox origin too: the origin your reverse proxy serves the sandbox port under, on another host name (e.g. `https://sandbox.switchboard.example.com`)".into(),
        )),
        (None, Some(_)) => Err(WebError::Origins(
            "a sandbox origin needs the app's public origin too (e.g. `https://switchboard.example.com`)".into(),
        )),
        (Some(app), Some(sandbox)) => {
            let app = public_origin("public origin", app)?;
            let sandbox = public_origin("sandbox origin", sandbox)?;
            if origin_host(&app) == origin_host(&sandbox) {
                return Err(WebError::Origins(format!(
                    "the sandbox origin `{sandbox}` has the same host name as the app's `{app}`: browsers send cookies regardless of port, so the sandbox would receive the access cookie; serve it under another host name (e.g. `sandbox.{}`)",
                    origin_host(&app)
                )));
            }
            Ok(Some((app, sandbox)))
        }
    }
}

/// A running web app.
#[derive(Debug)]
pub struct RunningServer {
    /// The link to open: `http://127.0.0.1:PORT/?token=TOKEN`.
    pub url: String,
    /// The app's origin (`http://127.0.0.1:PORT`).
    pub app_origin: String,
    /// The sandbox proxy's origin (`http://localhost:PORT2`).
    pub proxy_origin: String,
    /// The access token.
    pub token: String,
    /// The bound address.
    pub addr: SocketAddr,
    /// The state (host, sessions).
    pub state: AppState,
    /// A warning to show (a URL policy weaker than the default).
    pub warnings: Vec<String>,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningServer {
    /// Stops both listeners and every server the host started.
    pub async fn shutdown(self) {
        self.stop.cancel();
        for t in self.tasks {
            let abort = t.abort_handle();
            if tokio::time::timeout(Duration::from_secs(1), t)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        self.state.shutdown().await;
    }
}

fn host_for_url(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => format!("[{v6}]"),
        IpAddr::V4(v4) => v4.to_string(),
    }
}

fn resolve_policy(opts: &ServeOptions, remote: bool) -> Result<(UrlPolicy, Vec<String>), WebError> {
    let default = if remote {
        UrlPolicy::Strict
    } else {
        UrlPolicy::Local
    };
    let settings = switchboard_config::load(&opts.load, &|k| std::env::var(k).ok()).ok();
    let flag = opts.url_policy.map(UrlPolicy::as_str);
    let choice = switchboard_net::choose_policy(
        switchboard_net::PolicySources {
            flag,
            user: settings.as_ref().and_then(|s| s.url_policy.as_deref()),
            project: settings
                .as_ref()
                .and_then(|s| s.project_url_policy.as_deref()),
        },
        default,
    )
    .map_err(WebError::Settings)?;
    let policy = choice.policy;
    let mut warnings = choice.warnings;
    if let Some(ignored) = settings.as_ref().and_then(|s| s.ignored_project.as_ref()) {
        warnings.push(ignored.message());
    }
    if policy.is_weaker_than(default) {
        warnings.push(format!(
            "URL policy `{policy}` is weaker than the web app's default `{default}`{}",
            if remote {
                ": the app is reachable beyond loopback, so servers added in the browser may reach this machine's private network"
            } else {
                ": requests to link-local and cloud metadata addresses are allowed"
            }
        ));
    }
    Ok((policy, warnings))
}

/// Binds both listeners, builds the state and starts serving (and connecting the
/// servers) in the background.
pub async fn start(opts: ServeOptions) -> Result<RunningServer, WebError> {
    let remote = opts.is_remote();
    let configured = configured_origins(&opts)?;
    let addr = SocketAddr::new(opts.host, opts.port);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| WebError::Bind {
            addr: addr.to_string(),
            source,
        })?;
    let addr = listener.local_addr().map_err(WebError::Serve)?;
    let proxy_bind = if !opts.host.is_loopback() || configured.is_some() {
        SocketAddr::new(opts.host, opts.proxy_port)
    } else {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), opts.proxy_port)
    };
    let proxy_listener = TcpListener::bind(proxy_bind)
        .await
        .map_err(|source| WebError::Bind {
            addr: proxy_bind.to_string(),
            source,
        })?;
    let proxy_port = proxy_listener.local_addr().map_err(WebError::Serve)?.port();
    let token = crate::random::random_hex(32).map_err(WebError::Random)?;
    let unspecified = opts.host.is_unspecified() && configured.is_none();
    let shown_host = if unspecified {
        "127.0.0.1".to_string()
    } else {
        host_for_url(opts.host)
    };
    let bound_authority = format!("{}:{}", host_for_url(opts.host), addr.port());
    let (app_origin, proxy_origin, allowed_hosts) = match &configured {
        Some((app, sandbox)) => (
            app.clone(),
            sandbox.clone(),
            vec![origin_authority(app).to_string(), bound_authority],
        ),
        None => (
            format!("http://{bound_authority}"),
            if remote {
                format!("http://{shown_host}:{proxy_port}")
            } else {
                format!("http://localhost:{proxy_port}")
            },
            if unspecified {
                Vec::new()
            } else {
                vec![bound_authority]
            },
        ),
    };
    let (url_policy, warnings) = resolve_policy(&opts, remote)?;
    let cfg = AppConfig {
        token: token.clone(),
        port: addr.port(),
        app_origin: app_origin.clone(),
        origin_from_host: unspecified,
        proxy_origin: proxy_origin.clone(),
        proxy_port,
        remote,
        allowed_hosts,
        load: opts.load.clone(),
        url_policy,
        default_servers: opts.default_servers.clone(),
        model: opts.model.clone(),
        transport_cache: opts.transport_cache.clone(),
        oauth: opts.oauth.clone(),
    };
    let state = AppState::new(cfg)?;
    if let Err(e) = state.start_host().await {
        tracing::warn!("settings: {e}");
    }
    let stop = CancellationToken::new();
    let app_task = {
        let router = app(state.clone());
        let stop = stop.clone();
        tokio::spawn(async move {
            // TCP_NODELAY: answers (SSE events above all) are several small writes.
            let served = axum::serve(switchboard_net::no_delay(listener), router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
            if let Err(e) = served {
                tracing::warn!("the web app stopped: {e}");
            }
        })
    };
    let proxy_task = {
        let router = proxy_app(state.clone());
        let stop = stop.clone();
        tokio::spawn(async move {
            // TCP_NODELAY: answers (SSE events above all) are several small writes.
            let served = axum::serve(switchboard_net::no_delay(proxy_listener), router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
            if let Err(e) = served {
                tracing::warn!("the sandbox proxy stopped: {e}");
            }
        })
    };
    let url = match &configured {
        Some((app, _)) => format!("{app}/?token={token}"),
        None => format!("http://{shown_host}:{}/?token={token}", addr.port()),
    };
    Ok(RunningServer {
        url,
        app_origin,
        proxy_origin,
        token,
        addr,
        state,
        warnings,
        stop,
        tasks: vec![app_task, proxy_task],
    })
}

/// Ctrl-C (SIGINT), listened for from the moment this is called, not from the first
/// poll as `tokio::signal::ctrl_c` does: call it before printing that the server runs,
/// so a Ctrl-C that follows the line at once stops the server cleanly instead of killing
/// it with the default action.
pub fn interrupt() -> impl std::future::Future<Output = ()> + Send {
    use tokio::signal::unix::{SignalKind, signal};
    let registered = signal(SignalKind::interrupt());
    async move {
        match registered {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
}

/// Runs the web app until Ctrl-C: prints `Switchboard is running at URL` (and opens
/// the browser with `open`), then stops every server on the way out.
pub async fn serve(opts: ServeOptions) -> Result<(), WebError> {
    let open = opts.open;
    let remote = opts.is_remote();
    let running = start(opts).await?;
    for w in &running.warnings {
        eprintln!("warning: {w}");
    }
    if remote {
        eprintln!(
            "note: serving beyond loopback: the URL policy defaults to strict and stdio servers cannot be added or edited from the browser"
        );
        eprintln!(
            "note: MCP Apps sandbox at {} (port {}); put both ports behind TLS (see README, Remote deployment)",
            running.proxy_origin,
            running.state.cfg().proxy_port
        );
    }
    let interrupted = interrupt();
    println!("Switchboard is running at {}", running.url);
    if open {
        open_browser(&running.url);
    }
    interrupted.await;
    eprintln!("Stopping…");
    running.shutdown().await;
    Ok(())
}

fn open_browser(url: &str) {
    let program = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    match std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(_) => {}
        Err(e) => eprintln!("note: could not open a browser ({program}: {e}); open the link above"),
    }
}

/// `GET /api/config`: what the page needs to know.
async fn config(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> axum::Json<serde_json::Value> {
    let cfg = &state.inner.cfg;
    axum::Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "appOrigin": cfg.app_origin,
        "proxyOrigin": state.proxy_origin_for(&headers),
        "remote": cfg.remote,
        "urlPolicy": cfg.url_policy.as_str(),
        "writeFile": cfg.write_path().display().to_string(),
        "keepUnchanged": settings::KEEP_UNCHANGED,
        "chatAvailable": state.model_client(None).is_ok(),
        "oauthLogin": cfg.oauth.is_some(),
    }))
}

async fn api_not_found() -> Response {
    ApiError::not_found("no such API route").into_response()
}

/// The app's router: pages, assets and `/api` (behind `access::api_guard`).
pub fn app(state: AppState) -> Router {
    let api = Router::new()
        .route("/config", get(config))
        .route("/events", get(events::events))
        .route("/elicitation/{id}", post(events::answer))
        .route(
            "/settings/mcp-servers",
            get(settings::list).post(settings::add),
        )
        .route(
            "/settings/mcp-servers/{name}",
            put(settings::edit).delete(settings::delete),
        )
        .route(
            "/settings/mcp-servers/{name}/enabled",
            post(settings::set_enabled),
        )
        .route("/settings/mcp-test", post(test_conn::mcp_test))
        .route("/registry/search", get(registry::search))
        .route("/registry/add", post(registry::add))
        .route("/settings/mcp-login", post(oauth::login))
        .route("/settings/mcp-oauth-token", post(oauth::token))
        .route("/mcp/servers", get(explorer::servers))
        .route("/mcp/servers/{name}/restart", post(explorer::restart))
        .route("/mcp/servers/{name}/pins", get(explorer::pending_pins))
        .route(
            "/mcp/servers/{name}/pins/accept",
            post(explorer::accept_pins),
        )
        .route("/mcp/tool-call", post(explorer::tool_call))
        .route("/mcp/resource-read", post(explorer::resource_read))
        .route("/mcp/prompt-get", post(explorer::prompt_get))
        .route("/apps", post(apps::open))
        .route("/apps/{id}", delete(apps::close))
        .route("/apps/{id}/lists", get(apps::lists))
        .route("/chat/status", get(chat::status))
        .route("/chat/send", post(chat::send))
        .route("/chat/confirm", post(chat::confirm))
        .route("/chat/cancel", post(chat::cancel))
        .route("/chat/reset", post(chat::reset))
        .route("/chat/context", post(chat::context))
        .route("/workflows", get(workflows::list))
        .route("/workflows/runs", get(workflows::runs))
        .route("/workflows/runs/{id}", get(workflows::run))
        .fallback(api_not_found)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            access::api_guard,
        ));
    Router::new()
        .nest("/api", api)
        .route("/", get(assets::page))
        .route("/explorer", get(assets::page))
        .route("/chat", get(assets::page))
        .route("/settings", get(assets::page))
        .route(oauth::CALLBACK_PATH, get(oauth::callback_page))
        .route("/workflows", get(assets::page))
        .route("/assets/{file}", get(assets::asset))
        .with_state(state)
}

/// The sandbox proxy's router (the second listener).
pub fn proxy_app(state: AppState) -> Router {
    Router::new()
        .route("/sandbox/{id}", get(apps::sandbox_page))
        .layer(middleware::from_fn(apps::sandbox_default_csp))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(dir: &std::path::Path) -> ServeOptions {
        ServeOptions::new(LoadOptions {
            home: dir.join("home"),
            project_dir: dir.join("project"),
            config_file: None,
        })
    }

    #[test]
    fn policy_defaults_to_local_on_loopback_and_strict_beyond() {
        let tmp = tempfile::tempdir().unwrap();
        let o = opts(tmp.path());
        assert_eq!(resolve_policy(&o, false).unwrap().0, UrlPolicy::Local);
        assert_eq!(resolve_policy(&o, true).unwrap().0, UrlPolicy::Strict);
        let mut o = opts(tmp.path());
        o.url_policy = Some(UrlPolicy::Local);
        let (p, warnings) = resolve_policy(&o, true).unwrap();
        assert_eq!(p, UrlPolicy::Local);
        assert_eq!(
            warnings.len(),
            1,
            "a weaker explicit policy is warned about"
        );
    }

    #[test]
    fn urls_bracket_ipv6() {
        assert_eq!(host_for_url("::1".parse().unwrap()), "[::1]");
        assert_eq!(host_for_url("127.0.0.1".parse().unwrap()), "127.0.0.1");
    }
}
