//! `switchboard serve`: the web app (crates/web) over the same settings as the CLI.
//! Prints `Switchboard is running at http://127.0.0.1:PORT/?token=TOKEN` and runs until
//! Ctrl-C. `serve --team` runs team mode instead (`team.rs`).

use std::net::IpAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use futures::future::BoxFuture;
use switchboard_auth::{AuthError, AuthManager, LoginOptions, PendingAuthorizations, TokenStore};
use switchboard_config::{LoadOptions, Settings};
use switchboard_mcp::TokenSource;
use switchboard_model::ModelConfig;
use switchboard_net::{GuardedClient, UrlPolicy};
use switchboard_web::{
    BeganLogin, CompleteError, CompletedLogin, DEFAULT_PORT, OAuthHandle, OAuthHooks, OpenUrlFn,
    ServeOptions,
};

use crate::ctx::{self, Globals};

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Address to bind. Beyond loopback the URL policy defaults to strict and stdio
    /// servers cannot be added or edited from the browser.
    #[arg(long, default_value = "127.0.0.1", value_name = "ADDR")]
    pub host: IpAddr,
    /// Open the app in the default browser.
    #[arg(long)]
    pub open: bool,
    /// Port of the MCP Apps sandbox listener (0 picks a free one); in remote mode your
    /// reverse proxy forwards the sandbox origin to it.
    #[arg(long, default_value_t = 0)]
    pub proxy_port: u16,
    /// Serve as reachable beyond loopback although bound to it (a reverse proxy on
    /// this machine forwards to it): strict URL policy, no stdio edits from the browser.
    #[arg(long)]
    pub remote: bool,
    /// The origin browsers use for the app behind your TLS reverse proxy, e.g.
    /// <https://switchboard.example.com> (implies --remote; needs --sandbox-origin). With
    /// --team: the sign-in redirect's origin; https makes cookies `Secure`.
    #[arg(long, value_name = "URL")]
    pub public_origin: Option<String>,
    /// The origin browsers use for the sandbox listener, on another host name than
    /// --public-origin, e.g. <https://sandbox.switchboard.example.com>.
    #[arg(long, value_name = "URL", requires = "public_origin")]
    pub sandbox_origin: Option<String>,
    /// Team mode: people sign in with OpenID Connect and each has their own HTTP/SSE
    /// servers in the team database (see README, Team mode).
    #[arg(long, conflicts_with_all = ["sandbox_origin", "remote", "open"])]
    pub team: bool,
    #[command(flatten)]
    pub team_args: crate::team::TeamArgs,
}

pub async fn run(g: &Globals, a: ServeArgs) -> Result<ExitCode> {
    if a.team {
        return crate::team::run(g, a).await;
    }
    let load = LoadOptions {
        home: ctx::home_dir()?,
        project_dir: ctx::project_dir()?,
        config_file: g.config.clone(),
    };
    let url_policy = match &g.url_policy {
        Some(p) => Some(
            p.parse::<UrlPolicy>()
                .map_err(|e| anyhow!("--url-policy: {e} (use strict, local or off)"))?,
        ),
        None => None,
    };
    let mut opts = ServeOptions::new(load);
    opts.host = a.host;
    opts.port = a.port;
    opts.open = a.open;
    opts.proxy_port = a.proxy_port;
    opts.remote = a.remote;
    opts.public_origin = a.public_origin;
    opts.sandbox_origin = a.sandbox_origin;
    opts.url_policy = url_policy;
    opts.default_servers = vec![ctx::demo_spec()?];
    opts.model = Some(ModelConfig::from_env());
    opts.transport_cache = ctx::transport_cache();
    opts.oauth = Some(OAuthHandle(Arc::new(WebOAuth {
        store: TokenStore::from_env(&ctx::home_dir()?),
        pending: PendingAuthorizations::default(),
    })));
    switchboard_web::serve(opts)
        .await
        .context("switchboard serve")?;
    Ok(ExitCode::SUCCESS)
}

/// OAuth for the web app through `switchboard-auth`: the same token store as
/// `mcp login`, and browser logins whose authorization URL goes to the page. Logins
/// that come back to the app's callback page wait in `pending` (verifier and client
/// secret, keyed by `state`) between `begin_login` and `complete_login`.
struct WebOAuth {
    store: TokenStore,
    pending: PendingAuthorizations,
}

impl WebOAuth {
    fn manager(&self, settings: &Settings, guard: &GuardedClient) -> AuthManager {
        let m = AuthManager::with_pending(self.store.clone(), guard.clone(), self.pending.clone());
        m.add_configs(
            settings
                .servers
                .iter()
                .filter_map(|e| e.config.as_ref().ok()),
        );
        m
    }
}

impl OAuthHooks for WebOAuth {
    fn token_source(
        &self,
        settings: &Settings,
        guard: &GuardedClient,
    ) -> Option<Arc<dyn TokenSource>> {
        Some(Arc::new(self.manager(settings, guard)))
    }

    fn login(
        &self,
        settings: &Settings,
        guard: &GuardedClient,
        server: &str,
        url: &str,
        open: OpenUrlFn,
    ) -> BoxFuture<'static, Result<String, String>> {
        let m = self.manager(settings, guard);
        let (server, url) = (server.to_string(), url.to_string());
        let open: Arc<OpenUrlFn> = Arc::new(open);
        let opts = LoginOptions {
            timeout: Duration::from_secs(300),
            open_url: Arc::new(move |u: &str| {
                open(u);
                true
            }),
            scopes: None,
            verifier_override: None,
        };
        Box::pin(async move {
            m.login(&server, &url, &opts)
                .await
                .map(|r| format!("Logged in to `{}`.", r.server))
                .map_err(|e| e.to_string())
        })
    }

    fn begin_login(
        &self,
        settings: &Settings,
        guard: &GuardedClient,
        server: &str,
        url: &str,
        redirect_uri: &str,
    ) -> BoxFuture<'static, Result<Option<BeganLogin>, String>> {
        let m = self.manager(settings, guard);
        let (server, url, redirect_uri) = (
            server.to_string(),
            url.to_string(),
            redirect_uri.to_string(),
        );
        Box::pin(async move {
            // A client registered with the loopback redirect, or no browser at all.
            if m.needs_loopback(&server, &url) || m.is_machine_grant(&server, &url) {
                return Ok(None);
            }
            m.begin_authorization(&server, &url, &redirect_uri, None)
                .await
                .map(|a| {
                    Some(BeganLogin {
                        authorization_url: a.authorize_url,
                        state: a.state,
                    })
                })
                .map_err(|e| e.to_string())
        })
    }

    fn complete_login(
        &self,
        settings: &Settings,
        guard: &GuardedClient,
        state: &str,
        code: &str,
        iss: Option<&str>,
    ) -> BoxFuture<'static, Result<CompletedLogin, CompleteError>> {
        let m = self.manager(settings, guard);
        let (state, code, iss) = (state.to_string(), code.to_string(), iss.map(str::to_string));
        Box::pin(async move {
            match m
                .complete_authorization(&state, &code, iss.as_deref())
                .await
            {
                Ok(done) => Ok(CompletedLogin {
                    server: done.server,
                    expires_at: done.expires_at,
                }),
                Err(e @ AuthError::UnknownState) => Err(CompleteError::UnknownState(e.to_string())),
                Err(e) => Err(CompleteError::Failed(e.to_string())),
            }
        })
    }
}
