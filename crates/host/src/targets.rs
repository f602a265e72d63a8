//! From validated settings to what the host starts: one [`ServerSpec`] per server.

use std::time::Duration;

use switchboard_config::{EntryState, ServerConfig, ServerEntry, Settings, Transport, child_env};
use switchboard_mcp::{StdioTarget, Target};

use crate::host::{Initial, ServerSpec};

/// The connection target for a validated server config.
///
/// Stdio servers get the environment chosen by the server's `envPolicy` (see
/// `switchboard_config::child_env`), computed from this process's environment.
pub fn target_from_config(cfg: &ServerConfig) -> Target {
    match &cfg.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => Target::Stdio(StdioTarget {
            program: command.clone(),
            args: args.clone(),
            env: child_env(cfg.env_policy, std::env::vars(), env),
            cwd: cwd.clone(),
        }),
        Transport::Http { url, headers } => Target::Http {
            url: url.clone(),
            headers: pairs(headers),
        },
        Transport::Sse { url, headers } => Target::Sse {
            url: url.clone(),
            headers: pairs(headers),
        },
        Transport::AutoHttp { url, headers } => Target::Auto {
            url: url.clone(),
            headers: pairs(headers),
        },
    }
}

fn pairs(map: &indexmap::IndexMap<String, String>) -> Vec<(String, String)> {
    map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn transport_label(t: &Transport) -> &'static str {
    match t {
        Transport::Stdio { .. } => "stdio",
        Transport::Http { .. } => "http",
        Transport::Sse { .. } => "sse",
        Transport::AutoHttp { .. } => "http|sse",
    }
}

/// One settings entry as a spec the host can start (or report on).
pub fn spec_from_entry(entry: &ServerEntry) -> ServerSpec {
    let origin = format!("{:?}", entry.origin).to_lowercase();
    match &entry.config {
        Ok(cfg) => {
            let target = target_from_config(cfg);
            let initial = match &entry.state {
                EntryState::Enabled => Initial::Start,
                EntryState::Disabled => Initial::Disabled,
                EntryState::Blocked(reason) => Initial::Blocked(reason.clone()),
            };
            let cwd = match &cfg.transport {
                Transport::Stdio { cwd, .. } => cwd.as_ref().map(|p| p.display().to_string()),
                _ => None,
            };
            ServerSpec {
                name: entry.name.clone(),
                origin,
                transport_label: transport_label(&cfg.transport).into(),
                target_display: target.display(),
                target: Some(target),
                cwd,
                timeout: cfg.timeout,
                startup_timeout: cfg.startup_timeout,
                trust: cfg.trust,
                pin_tools: cfg.pin_tools,
                config: Some(cfg.clone()),
                initial,
            }
        }
        Err(reason) => ServerSpec {
            name: entry.name.clone(),
            origin,
            transport_label: "invalid".into(),
            target_display: entry.raw_target.clone().unwrap_or_default(),
            target: None,
            cwd: None,
            timeout: Duration::from_millis(600_000),
            startup_timeout: Duration::from_millis(30_000),
            trust: false,
            pin_tools: true,
            config: None,
            initial: match &entry.state {
                EntryState::Disabled => Initial::Disabled,
                EntryState::Blocked(r) => Initial::Blocked(r.clone()),
                EntryState::Enabled => Initial::Broken(reason.clone()),
            },
        },
    }
}

/// Every server in the settings, in the settings' order.
pub fn specs_from_settings(settings: &Settings) -> Vec<ServerSpec> {
    settings.servers.iter().map(spec_from_entry).collect()
}
