//! The app's shared state: configuration fixed at start (token, origins, settings
//! location, URL policy), the current [`Host`], and the in-memory records of the
//! browser side (MCP App sessions, chat sessions, pending elicitations).
//!
//! Invariants:
//! - the host is swapped, never mutated: a settings change builds a new host from the
//!   settings files, starts it, and shuts the old one down; readers clone the current
//!   one out of a `std::sync::Mutex` (never held across `.await`);
//! - settings writes and host rebuilds are serialised by one async lock.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use switchboard_config::{LoadOptions, Settings, load};
use switchboard_host::{Host, HostEvent, HostOptions, ServerSpec, spec_from_entry};
use switchboard_model::{ModelClient, ModelConfig, ModelConfigError, Provider};
use switchboard_net::{GuardedClient, UrlPolicy};
use tokio::sync::broadcast;

use crate::apps::AppSession;
use crate::chat::ChatSession;
use crate::events::{ElicitationHub, WebHooks};

/// Everything fixed when the app starts.
#[derive(Debug, Clone)]
pub struct AppConfig {
    /// The access token (printed once; becomes the cookie).
    pub token: String,
    /// The port the app listens on (part of the cookie name).
    pub port: u16,
    /// The app's own origin, e.g. `http://127.0.0.1:8765`.
    pub app_origin: String,
    /// Bound to an unspecified address (`0.0.0.0`, `::`): the page may be reached under
    /// any address, so a request's `Origin` must equal `http://` + its own `Host`.
    pub origin_from_host: bool,
    /// The sandbox proxy's origin, e.g. `http://localhost:8766` on loopback, the
    /// configured sandbox origin behind a reverse proxy; bound to an unspecified
    /// address, the host name the page was reached under, with `proxy_port`.
    pub proxy_origin: String,
    /// The sandbox proxy's port.
    pub proxy_port: u16,
    /// Bound beyond loopback: stdio servers cannot be added or edited from the browser.
    pub remote: bool,
    /// `Host` header values accepted (DNS-rebinding defence); empty accepts any.
    pub allowed_hosts: Vec<String>,
    /// Where the settings are.
    pub load: LoadOptions,
    /// The URL policy every outbound request goes through.
    pub url_policy: UrlPolicy,
    /// Servers used when there is no settings file at all (the CLI's bundled demo).
    pub default_servers: Vec<ServerSpec>,
    /// How the chat builds its model client (both providers' keys and base URLs, from
    /// the environment); `provider` and `model` in the settings choose at each new chat,
    /// as in the CLI. `None` leaves the chat page explaining how to set `GEMINI_API_KEY`.
    pub model: Option<ModelConfig>,
    /// Where to remember which HTTP transport worked per URL.
    pub transport_cache: Option<PathBuf>,
    /// OAuth (token source and browser login), when the embedding program provides it.
    pub oauth: Option<crate::oauth::OAuthHandle>,
}

impl AppConfig {
    /// The cookie carrying the token; its name carries the port because cookies ignore
    /// ports (two apps on one host must not overwrite each other's).
    pub fn cookie_name(&self) -> String {
        format!("switchboard_token_{}", self.port)
    }

    /// The settings file new servers are written to: the `--config` file, else the
    /// user layer.
    pub fn write_path(&self) -> PathBuf {
        match &self.load.config_file {
            Some(f) => f.clone(),
            None => switchboard_config::user_settings_path(&self.load.home),
        }
    }
}

pub(crate) struct Shared {
    pub cfg: AppConfig,
    pub guard: GuardedClient,
    host: Mutex<Host>,
    generation: AtomicU64,
    pub events: broadcast::Sender<Value>,
    pub elicitations: Arc<ElicitationHub>,
    pub apps: Mutex<HashMap<String, AppSession>>,
    pub chats: Mutex<HashMap<String, Arc<ChatSession>>>,
    pub write_lock: tokio::sync::Mutex<()>,
    pub settings_warnings: Mutex<Vec<String>>,
}

/// The web app's state; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub(crate) inner: Arc<Shared>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("app_origin", &self.inner.cfg.app_origin)
            .field("proxy_origin", &self.inner.cfg.proxy_origin)
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// Builds the state and the first host (not started yet: see [`AppState::start_host`]).
    pub fn new(cfg: AppConfig) -> Result<Self, crate::WebError> {
        let mut copts = switchboard_net::ClientOptions::new(cfg.url_policy);
        copts.timeout = None;
        let guard = GuardedClient::new(copts).map_err(|e| crate::WebError::Http(e.to_string()))?;
        let (events, _) = broadcast::channel(512);
        let elicitations = Arc::new(ElicitationHub::new(events.clone()));
        let placeholder = Host::new(Vec::new(), HostOptions::default());
        let state = AppState {
            inner: Arc::new(Shared {
                cfg,
                guard,
                host: Mutex::new(placeholder),
                generation: AtomicU64::new(0),
                events,
                elicitations,
                apps: Mutex::new(HashMap::new()),
                chats: Mutex::new(HashMap::new()),
                write_lock: tokio::sync::Mutex::new(()),
                settings_warnings: Mutex::new(Vec::new()),
            }),
        };
        Ok(state)
    }

    pub(crate) fn cfg(&self) -> &AppConfig {
        &self.inner.cfg
    }

    /// The current host.
    pub fn host(&self) -> Host {
        match self.inner.host.lock() {
            Ok(h) => h.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The app's origin as the browser behind `headers` reaches it (bound to an
    /// unspecified address, the `Host` header, if allowed; else the configured one).
    pub(crate) fn app_origin_for(&self, headers: &axum::http::HeaderMap) -> String {
        let cfg = &self.inner.cfg;
        if cfg.origin_from_host
            && let Some(host) = headers
                .get(axum::http::header::HOST)
                .and_then(|v| v.to_str().ok())
        {
            let origin = format!("http://{host}");
            if crate::access::origin_allowed(self, headers, &origin) {
                return origin;
            }
        }
        cfg.app_origin.clone()
    }

    /// The sandbox proxy's origin as the browser behind `headers` reaches it.
    pub(crate) fn proxy_origin_for(&self, headers: &axum::http::HeaderMap) -> String {
        let cfg = &self.inner.cfg;
        if !cfg.origin_from_host {
            return cfg.proxy_origin.clone();
        }
        let host = headers
            .get(axum::http::header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("127.0.0.1");
        let name = if let Some(rest) = host.strip_prefix('[') {
            rest.split(']')
                .next()
                .map(|h| format!("[{h}]"))
                .unwrap_or_default()
        } else {
            host.split(':').next().unwrap_or("127.0.0.1").to_string()
        };
        format!("http://{name}:{}", cfg.proxy_port)
    }

    /// Bumped on every host rebuild.
    pub(crate) fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::SeqCst)
    }

    /// Loads the settings now.
    pub(crate) fn load_settings(&self) -> Result<Settings, String> {
        let env = |k: &str| std::env::var(k).ok();
        load(&self.inner.cfg.load, &env).map_err(|e| e.to_string())
    }

    /// The chat's model client and model as the settings say now (`provider`, `model`;
    /// `requested` is a model the browser asked for), through the one factory.
    pub(crate) fn model_client(
        &self,
        requested: Option<&str>,
    ) -> Result<(Arc<dyn ModelClient>, String), ChatUnavailable> {
        let Some(cfg) = &self.inner.cfg.model else {
            return Err(ChatUnavailable::NoGeminiKey(
                "GEMINI_API_KEY is not set".into(),
            ));
        };
        let settings = self.load_settings().ok();
        let setting = |f: fn(&Settings) -> Option<String>| settings.as_ref().and_then(f);
        let provider = Provider::choose(None, setting(|s| s.provider.clone()).as_deref())
            .map_err(ChatUnavailable::Model)?;
        let model = provider
            .model([requested.map(str::to_owned), setting(|s| s.model.clone())])
            .map_err(ChatUnavailable::Model)?;
        let mut cfg = cfg.clone().with_provider(provider);
        cfg.default_http(self.inner.guard.inner());
        match cfg.build() {
            Ok(client) => Ok((client, model)),
            Err(ModelConfigError::Client {
                provider: Provider::Gemini,
                source: switchboard_model::ModelError::MissingApiKey,
            }) => Err(ChatUnavailable::NoGeminiKey(
                "GEMINI_API_KEY is not set".into(),
            )),
            Err(
                e @ ModelConfigError::Client {
                    provider: Provider::Gemini,
                    ..
                },
            ) => Err(ChatUnavailable::NoGeminiKey(e.to_string())),
            Err(e) => Err(ChatUnavailable::Model(e)),
        }
    }

    fn host_options(&self, settings: Option<&Settings>) -> HostOptions {
        let token_source = match (&self.inner.cfg.oauth, settings) {
            (Some(h), Some(s)) => h.0.token_source(s, &self.inner.guard),
            _ => None,
        };
        HostOptions {
            token_source,
            hooks: Arc::new(WebHooks::new(self.inner.elicitations.clone())),
            reconnect: true,
            ui_extension: true,
            guard: Some(self.inner.guard.clone()),
            transport_cache: self.inner.cfg.transport_cache.clone(),
            // The CLI's pins: a tool changed since pinned is withheld here too.
            pins: Some(switchboard_host::PinStore::in_home(
                &self.inner.cfg.load.home,
            )),
            ..Default::default()
        }
    }

    /// (Re)builds the host from the settings files and starts it in the background;
    /// the previous host is shut down. Returns once the new host is in place (servers
    /// are still connecting).
    pub async fn start_host(&self) -> Result<(), String> {
        let settings = self.load_settings();
        let (specs, warnings) = match &settings {
            Ok(s) => {
                let mut specs: Vec<ServerSpec> = s.servers.iter().map(spec_from_entry).collect();
                if s.no_settings_file {
                    specs.extend(self.inner.cfg.default_servers.iter().cloned());
                }
                (specs, s.warnings.clone())
            }
            Err(e) => (Vec::new(), vec![e.clone()]),
        };
        if let Ok(mut w) = self.inner.settings_warnings.lock() {
            *w = warnings;
        }
        let host = Host::new(specs, self.host_options(settings.as_ref().ok()));
        let old = {
            let mut guard = match self.inner.host.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            std::mem::replace(&mut *guard, host.clone())
        };
        let generation = self.inner.generation.fetch_add(1, Ordering::SeqCst) + 1;
        spawn_forwarder(self.clone(), host.clone(), generation);
        tokio::spawn(async move { old.shutdown().await });
        let starter = host.clone();
        tokio::spawn(async move { starter.start().await });
        let _ = self
            .inner
            .events
            .send(json!({"type": "servers-changed", "generation": generation}));
        settings.map(|_| ())
    }

    /// Shuts the current host down (every stdio server stops).
    pub async fn shutdown(&self) {
        self.inner.elicitations.cancel_all();
        self.host().shutdown().await;
    }
}

/// Forwards one host's events to the browsers while it is the current host.
fn spawn_forwarder(state: AppState, host: Host, generation: u64) {
    let mut rx = host.subscribe();
    drop(host);
    tokio::spawn(async move {
        loop {
            let ev = match rx.recv().await {
                Ok(ev) => ev,
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return,
            };
            if state.generation() != generation {
                return;
            }
            let value = match ev {
                HostEvent::Status {
                    server,
                    status,
                    error,
                } => {
                    json!({"type": "status", "server": server, "status": status.as_str(), "error": error})
                }
                HostEvent::ListsUpdated { server } => json!({"type": "lists", "server": server}),
                HostEvent::Reconnecting {
                    server,
                    attempt,
                    delay,
                } => {
                    json!({"type": "reconnecting", "server": server, "attempt": attempt, "delayMs": delay.as_millis() as u64})
                }
                HostEvent::Log {
                    server,
                    level,
                    data,
                } => json!({"type": "log", "server": server, "level": level, "data": data}),
            };
            let _ = state.inner.events.send(value);
        }
    });
}

/// Why the chat cannot start, worded for the chat page.
#[derive(Debug)]
pub(crate) enum ChatUnavailable {
    /// Gemini without a usable key (the reason).
    NoGeminiKey(String),
    /// Anything else about the model: an unknown provider, no model for `openai`, a bad
    /// base URL. The message names the provider.
    Model(ModelConfigError),
}

impl std::fmt::Display for ChatUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoGeminiKey(why) => write!(
                f,
                "Chat needs a Gemini API key ({why}). Create one at https://aistudio.google.com/apikey, then restart with it set: `GEMINI_API_KEY=… switchboard serve`. (GEMINI_BASE_URL points at a proxy; `provider: \"openai\"` in the settings with OPENAI_BASE_URL uses a local OpenAI-compatible model.) The explorer works without a key."
            ),
            Self::Model(e) => write!(
                f,
                "Chat is unavailable: {e} ({}). The explorer works without it.",
                e.hint()
            ),
        }
    }
}
