//! `mcp login`, `mcp logout` and `mcp auth`, and the OAuth token source every command
//! that connects to servers hands to the host.
//!
//! Logins live in `$SWITCHBOARD_HOME/mcp-oauth-tokens.json` (see `switchboard-auth`).
//! `mcp login` reads the server's 401 first, then runs the browser flow through a
//! loopback callback (`oauth.redirectUri`, default `http://localhost:7777/oauth/callback`),
//! opening `$BROWSER` (or the desktop's opener) and always printing the URL; machine
//! grants (`client_credentials`, jwt-bearer, Google credentials) need no browser. While
//! `mcp login` waits for the browser to come back, a spinner on a terminal says so
//! (see [`crate::progress`]).

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use switchboard_auth::{AuthSummary, LoginOptions, ServerAuth, now_ms};
use switchboard_config::Settings;
use switchboard_mcp::TokenSource;
use switchboard_net::GuardedClient;

use crate::ctx::{self, Globals};
use crate::tokens::manager;

/// `mcp login` options.
#[derive(Debug, clap::Args)]
pub struct LoginArgs {
    /// The server's name in settings, or its URL.
    #[arg(add = crate::complete::server_names())]
    pub server: String,
    /// Seconds to wait for the browser to come back.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub timeout: u64,
    /// Scope to ask for instead of the server's (repeatable; space-separated works too).
    #[arg(long = "scope", value_name = "SCOPE")]
    pub scopes: Vec<String>,
    /// Do not open a browser; only print the URL.
    #[arg(long)]
    pub no_browser: bool,
}

/// The token source for a host: OAuth tokens from the store (`None` when there is no
/// home folder to keep them in). With `interactive`, a 403 `insufficient_scope` may
/// open the browser for a wider scope (when there is a terminal or `$BROWSER`).
pub fn token_source(
    settings: Option<&Settings>,
    guard: &GuardedClient,
    interactive: bool,
) -> Option<Arc<dyn TokenSource>> {
    let m = crate::tokens::manager(settings, guard).ok()?;
    let can_ask = std::io::stderr().is_terminal() || std::env::var_os("BROWSER").is_some();
    if interactive && can_ask {
        m.set_login_ui(Some(login_options(
            Duration::from_secs(300),
            false,
            Vec::new(),
            None,
        )));
    }
    Some(Arc::new(m))
}

/// Where `mcp login` keeps its "waiting for the browser" spinner while the flow runs.
type Waiting = Arc<Mutex<Option<crate::progress::Spinner>>>;

/// What a person waits for once the browser is sent to `url`: the sign-in coming back
/// to the loopback callback named in its `redirect_uri`.
fn waiting_for(url: &str) -> String {
    let callback = url::Url::parse(url).ok().and_then(|u| {
        u.query_pairs()
            .find(|(k, _)| k == "redirect_uri")
            .map(|(_, v)| v.into_owned())
    });
    match callback {
        Some(cb) => format!(
            "Waiting for the browser sign-in at {}… (Ctrl-C to stop)",
            crate::term::visible(&cb)
        ),
        None => "Waiting for the browser sign-in… (Ctrl-C to stop)".to_string(),
    }
}

fn login_options(
    timeout: Duration,
    no_browser: bool,
    scopes: Vec<String>,
    waiting: Option<Waiting>,
) -> LoginOptions {
    LoginOptions {
        timeout,
        open_url: Arc::new(move |url: &str| {
            let opened = if no_browser {
                errln!("Open this URL in a browser to log in:\n  {url}");
                false
            } else {
                let opened = switchboard_auth::open_in_browser(url);
                if opened {
                    errln!("Opened the browser to log in. If it did not open, visit:\n  {url}");
                } else {
                    errln!("Open this URL in a browser to log in:\n  {url}");
                }
                opened
            };
            if let Some(w) = &waiting
                && let Ok(mut slot) = w.lock()
            {
                *slot = crate::progress::Spinner::start(false, waiting_for(url));
            }
            opened
        }),
        scopes: (!scopes.is_empty()).then_some(scopes),
        verifier_override: None,
    }
}

/// A server argument: a configured name, or a URL.
fn resolve(g: &Globals, server: &str) -> Result<(ServerAuth, Option<Settings>)> {
    if server.starts_with("http://") || server.starts_with("https://") {
        let settings = ctx::load_settings(g).ok();
        return Ok((ServerAuth::adhoc(server, server), settings));
    }
    let settings = ctx::load_settings(g)?;
    let entry = settings.server(server).with_context(|| {
        let names: Vec<&str> = settings
            .servers
            .iter()
            .filter(|e| e.config.as_ref().is_ok_and(|c| !c.transport.is_stdio()))
            .map(|e| e.name.as_str())
            .collect();
        if names.is_empty() {
            format!("no server named `{server}`, and no HTTP servers are configured")
        } else {
            format!(
                "no server named `{server}`; HTTP servers: {}",
                names.join(", ")
            )
        }
    })?;
    let cfg = match &entry.config {
        Ok(c) => c,
        Err(reason) => bail!("the settings entry of `{server}` is broken: {reason}"),
    };
    let Some(sa) = ServerAuth::from_config(cfg) else {
        bail!("`{server}` is a stdio server; OAuth is for HTTP servers");
    };
    Ok((sa, Some(settings)))
}

fn when(expires_at: Option<u64>) -> String {
    let Some(at) = expires_at else {
        return "no expiry given".into();
    };
    let now = now_ms();
    if at <= now {
        return "expired".into();
    }
    let secs = (at - now) / 1000;
    match secs {
        0..=119 => format!("expires in {secs} s"),
        120..=7199 => format!("expires in {} min", secs / 60),
        _ => format!("expires in {} h", secs / 3600),
    }
}

/// `switchboard mcp login <server>`.
pub async fn login(g: &Globals, args: LoginArgs) -> Result<ExitCode> {
    let (sa, settings) = resolve(g, &args.server)?;
    let guard = ctx::guard(g, settings.as_ref())?;
    let m = manager(settings.as_ref(), &guard)?;
    m.add_server(sa.clone());
    let scopes: Vec<String> = args
        .scopes
        .iter()
        .flat_map(|s| s.split_whitespace())
        .map(str::to_string)
        .collect();
    let waiting: Waiting = Arc::default();
    let opts = login_options(
        Duration::from_secs(args.timeout),
        args.no_browser,
        scopes,
        Some(waiting.clone()),
    );
    let report = m.login(&sa.name, &sa.url, &opts).await;
    // Clear the spinner before anything else is printed.
    if let Ok(mut slot) = waiting.lock() {
        slot.take();
    }
    let report = report?;
    let mut details = vec![when(report.expires_at)];
    if report.has_refresh_token {
        details.push("refreshed automatically".into());
    }
    if let Some(s) = &report.scope {
        details.push(format!("scope: {s}"));
    }
    outln!(
        "Logged in to `{}` ({}). The token is saved in {}.",
        sa.name,
        details.join("; "),
        m.store().path().display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `switchboard mcp logout <server>`.
pub async fn logout(g: &Globals, server: &str) -> Result<ExitCode> {
    let settings = ctx::load_settings(g).ok();
    let guard = ctx::guard(g, settings.as_ref())?;
    let m = manager(settings.as_ref(), &guard)?;
    if m.logout(server).await? {
        outln!("Logged out of `{server}`: its saved token is deleted.");
    } else {
        outln!("`{server}` had no saved login.");
    }
    Ok(ExitCode::SUCCESS)
}

/// The state word `mcp auth --json` prints.
fn state_key(s: &AuthSummary, probed: Option<&Result<bool, String>>) -> &'static str {
    match s.state {
        "authenticated" => "authenticated",
        "expired" => "expired",
        "expired (will refresh)" => "expired",
        "off" => "off",
        _ if s.grant.is_some_and(|g| g.is_machine()) => "no-token",
        _ => match probed {
            Some(Ok(true)) => "needs-login",
            Some(Ok(false)) => "not-required",
            Some(Err(_)) => "unknown",
            None => "needs-login",
        },
    }
}

/// `switchboard mcp auth`: every HTTP server and saved login, with its state. Servers
/// with no saved login are asked (briefly) whether they require authorization.
pub async fn auth(g: &Globals, as_json: bool) -> Result<ExitCode> {
    let settings = ctx::load_settings(g).ok();
    let guard = ctx::guard(g, settings.as_ref())?;
    let m = manager(settings.as_ref(), &guard)?;
    let summaries = m.summaries()?;
    let probes = futures::future::join_all(summaries.iter().map(|s| {
        let m = m.clone();
        let (state, url, grant) = (s.state, s.url.clone(), s.grant);
        async move {
            if state != "not logged in" || grant.is_some_and(|g| g.is_machine()) {
                return None;
            }
            let r = tokio::time::timeout(Duration::from_secs(5), m.requires_auth(&url)).await;
            Some(match r {
                Ok(Ok(b)) => Ok(b),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("no answer within 5 s".to_string()),
            })
        }
    }))
    .await;
    if as_json {
        let list: Vec<Value> = summaries
            .iter()
            .zip(&probes)
            .map(|(s, p)| {
                json!({
                    "name": s.server,
                    "url": s.url,
                    "grant": s.grant.map(|g| g.as_str()),
                    "state": state_key(s, p.as_ref()),
                    "expiresAt": s.expires_at,
                    "scope": s.scope,
                    "refreshToken": s.has_refresh_token,
                })
            })
            .collect();
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({ "servers": list }))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    if summaries.is_empty() {
        outln!("No HTTP servers are configured and no logins are saved.");
        return Ok(ExitCode::SUCCESS);
    }
    let width = summaries.iter().map(|s| s.server.len()).max().unwrap_or(0);
    for (s, p) in summaries.iter().zip(&probes) {
        let text = match state_key(s, p.as_ref()) {
            "authenticated" => {
                let mut parts = vec![when(s.expires_at)];
                if s.has_refresh_token {
                    parts.push("refresh token".into());
                }
                if let Some(sc) = &s.scope {
                    parts.push(format!("scope: {sc}"));
                }
                format!("authenticated ({})", parts.join("; "))
            }
            "expired" if s.has_refresh_token => "expired (refreshed on next use)".to_string(),
            "expired" => format!("expired: run `switchboard mcp login {}`", s.server),
            "off" => "OAuth off (oauth.enabled: false, or an Authorization header)".to_string(),
            "not-required" => "no authorization required".to_string(),
            "no-token" => format!(
                "no token yet ({}: fetched on first use, or now with `switchboard mcp login {}`)",
                s.grant.map(|g| g.as_str()).unwrap_or("?"),
                s.server
            ),
            "unknown" => format!(
                "unknown (could not ask the server: {})",
                p.as_ref()
                    .and_then(|r| r.as_ref().err())
                    .map(String::as_str)
                    .unwrap_or("?")
            ),
            _ => format!("needs login: run `switchboard mcp login {}`", s.server),
        };
        outln!("{:width$}  {}  {}", s.server, s.url, text);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_names_the_callback_and_keeps_it_safe() {
        let url = "https://as.example/authorize?client_id=c&redirect_uri=\
                   http%3A%2F%2F127.0.0.1%3A7777%2Foauth%2Fcallback&state=s";
        assert_eq!(
            waiting_for(url),
            "Waiting for the browser sign-in at http://127.0.0.1:7777/oauth/callback… \
             (Ctrl-C to stop)"
        );
        let hostile = "https://as.example/authorize?redirect_uri=http%3A%2F%2Fx%1B%5B2J";
        assert!(!waiting_for(hostile).contains('\u{1b}'));
        assert_eq!(
            waiting_for("not a url"),
            "Waiting for the browser sign-in… (Ctrl-C to stop)"
        );
    }
}
