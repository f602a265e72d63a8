//! Where the CLI finds its settings and how it turns them (or an ad-hoc target) into
//! servers for the host, including the bundled demo server.
//!
//! The bundled demo server `demo` is *listed* (`mcp list`, `chat`, `serve`, the gateway)
//! only when there is no settings file at all, so that it never shows up among a user's
//! own servers. It stays *reachable by name* whenever no configured server is called
//! `demo` ([`demo_reachable`]): `mcp call/read/prompt demo …`, `mcp pins demo` and the
//! workflows of `run` (the README's `examples/*.yaml` use it) find it either way.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use switchboard_config::{EnvPolicy, LoadOptions, Settings, child_env, load};
use switchboard_host::{ServerSpec, spec_from_entry};
use switchboard_mcp::{StdioTarget, Target};
use switchboard_net::{ClientOptions, GuardedClient, PolicySources, UrlPolicy, choose_policy};

/// Global options every command shares.
#[derive(Debug, Clone, Default)]
pub struct Globals {
    pub config: Option<PathBuf>,
    /// `--url-policy`, when given.
    pub url_policy: Option<String>,
}

/// The URL policy in force: `--url-policy`, else `urlPolicy` in the user settings (or
/// `local`, the CLI's default), made stricter (never looser) by a trusted project's
/// `urlPolicy`. Warns when the result weakens the default or a project value was
/// ignored.
pub fn url_policy(g: &Globals, settings: Option<&Settings>) -> Result<UrlPolicy> {
    let default = UrlPolicy::Local;
    let choice = choose_policy(
        PolicySources {
            flag: g.url_policy.as_deref(),
            user: settings.and_then(|s| s.url_policy.as_deref()),
            project: settings.and_then(|s| s.project_url_policy.as_deref()),
        },
        default,
    )
    .map_err(anyhow::Error::msg)?;
    for w in &choice.warnings {
        errln!("warning: {w}");
    }
    let policy = choice.policy;
    if policy.is_weaker_than(default) {
        errln!(
            "warning: URL policy `{policy}` is weaker than the default `{default}`: requests to link-local and cloud metadata addresses are allowed"
        );
    }
    Ok(policy)
}

/// The guarded HTTP client every outbound request uses.
pub fn guard(g: &Globals, settings: Option<&Settings>) -> Result<GuardedClient> {
    let policy = url_policy(g, settings)?;
    let mut opts = ClientOptions::new(policy);
    opts.timeout = None;
    GuardedClient::new(opts).context("cannot build the HTTP client")
}

/// `$SWITCHBOARD_HOME`, else `~/.switchboard`.
pub fn home_dir() -> Result<PathBuf> {
    if let Some(h) = std::env::var_os("SWITCHBOARD_HOME")
        && !h.is_empty()
    {
        return Ok(PathBuf::from(h));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("neither SWITCHBOARD_HOME nor HOME is set: set SWITCHBOARD_HOME to a folder for Switchboard's settings")?;
    Ok(PathBuf::from(home).join(".switchboard"))
}

/// The user's home directory (`$HOME`), where other hosts keep their files.
pub fn user_home() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set: set it, or name the file with --from FILE")
}

pub fn project_dir() -> Result<PathBuf> {
    std::env::current_dir().context("cannot read the current directory")
}

/// Loads the settings layers (or the `--config` file), printing nothing.
pub fn read_settings(g: &Globals) -> Result<Settings> {
    let opts = LoadOptions {
        home: home_dir()?,
        project_dir: project_dir()?,
        config_file: g.config.clone(),
    };
    let env = |k: &str| std::env::var(k).ok();
    Ok(load(&opts, &env)?)
}

/// Loads the settings layers (or the `--config` file), with their warnings on stderr.
pub fn load_settings(g: &Globals) -> Result<Settings> {
    let settings = read_settings(g)?;
    for w in &settings.warnings {
        errln!("warning: {w}");
    }
    if let Some(ignored) = &settings.ignored_project {
        errln!("note: {}", ignored.message());
    }
    Ok(settings)
}

/// The bundled demo server, run by this very binary (`switchboard demo-server`).
pub fn demo_spec() -> Result<ServerSpec> {
    let exe = std::env::current_exe().context("cannot find the switchboard executable")?;
    let target = Target::Stdio(StdioTarget {
        program: exe.display().to_string(),
        args: vec!["demo-server".into()],
        env: child_env(EnvPolicy::Filtered, std::env::vars(), &Default::default()),
        cwd: None,
    });
    let mut spec = ServerSpec::adhoc(DEMO, "default", target);
    spec.trust = true;
    // Part of this binary: its tools change only with Switchboard itself.
    spec.pin_tools = false;
    spec.target_display = "switchboard demo-server (bundled)".into();
    Ok(spec)
}

/// All servers to show or start: the settings' servers, or the demo server when there
/// is no settings file at all.
pub fn all_specs(g: &Globals, announce_demo: bool) -> Result<(Vec<ServerSpec>, Settings)> {
    let settings = load_settings(g)?;
    let mut specs: Vec<ServerSpec> = settings.servers.iter().map(spec_from_entry).collect();
    if settings.no_settings_file {
        if announce_demo {
            errln!(
                "note: no settings file found ({}), so Switchboard uses its bundled demo server `demo`; add your own with `switchboard mcp add`",
                switchboard_config::user_settings_path(&home_dir()?).display()
            );
        }
        specs.push(demo_spec()?);
    }
    Ok((specs, settings))
}

/// The name of the bundled demo server.
pub const DEMO: &str = "demo";

/// Whether the name `demo` means the bundled demo server: no configured server (in the
/// settings that apply) has that name.
pub fn demo_reachable(settings: &Settings) -> bool {
    settings.server(DEMO).is_none()
}

/// The servers a workflow may use: [`all_specs`], plus the bundled demo server under its
/// name when it is not listed but [`demo_reachable`]. A workflow's host connects a
/// server only when a step uses it, so the demo starts only for a workflow that names it.
pub fn workflow_specs(g: &Globals) -> Result<(Vec<ServerSpec>, Settings)> {
    let (mut specs, settings) = all_specs(g, false)?;
    add_reachable_demo(&mut specs, &settings)?;
    Ok((specs, settings))
}

/// Adds the bundled demo server to `specs` when [`demo_reachable`] and not there yet.
fn add_reachable_demo(specs: &mut Vec<ServerSpec>, settings: &Settings) -> Result<()> {
    if demo_reachable(settings) && !specs.iter().any(|s| s.name == DEMO) {
        specs.push(demo_spec()?);
    }
    Ok(())
}

/// How an ad-hoc target was asked for.
#[derive(Debug, Clone, Default)]
pub struct AdHoc {
    pub stdio: Option<String>,
    pub transport: Option<String>,
}

/// Resolves a server argument: a configured name, an `http(s)://` URL, or `--stdio`.
pub fn resolve_one(
    g: &Globals,
    server: Option<&str>,
    adhoc: &AdHoc,
) -> Result<(ServerSpec, Option<Settings>)> {
    if let Some(cmdline) = &adhoc.stdio {
        let parts = shlex::split(cmdline)
            .filter(|p| !p.is_empty())
            .with_context(|| {
                format!("cannot split --stdio command line `{cmdline}` (check the quotes)")
            })?;
        let (program, args) = parts
            .split_first()
            .map(|(p, a)| (p.clone(), a.to_vec()))
            .context("--stdio needs a command")?;
        let target = Target::Stdio(StdioTarget {
            program,
            args,
            env: child_env(EnvPolicy::Filtered, std::env::vars(), &Default::default()),
            cwd: None,
        });
        return Ok((ServerSpec::adhoc("stdio", "ad-hoc", target), None));
    }
    let Some(server) = server else {
        bail!(
            "name a server (see `switchboard mcp list`), a URL, or use --stdio \"<command line>\""
        );
    };
    if server.starts_with("http://") || server.starts_with("https://") {
        let headers = Vec::new();
        let target = match adhoc.transport.as_deref() {
            None => Target::Auto {
                url: server.into(),
                headers,
            },
            Some("http") => Target::Http {
                url: server.into(),
                headers,
            },
            Some("sse") => Target::Sse {
                url: server.into(),
                headers,
            },
            Some(other) => bail!("--transport `{other}` is not valid for a URL: use http or sse"),
        };
        return Ok((ServerSpec::adhoc(server, "ad-hoc", target), None));
    }
    let (mut specs, settings) = all_specs(g, false)?;
    if server == DEMO {
        add_reachable_demo(&mut specs, &settings)?;
    }
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let spec = specs
        .into_iter()
        .find(|s| s.name == server)
        .with_context(|| {
            if let Some(ignored) = settings
                .ignored_project
                .as_ref()
                .filter(|i| i.servers.iter().any(|n| n == server))
            {
                return format!(
                    "`{server}` is defined in {}, which is ignored because the folder is not trusted; review it, then run `{}`",
                    ignored.file.display(),
                    ignored.fix()
                );
            }
            if names.is_empty() {
                format!("no server named `{server}`: no servers are configured (add one with `switchboard mcp add`)")
            } else {
                let mut candidates: Vec<&str> = names.iter().map(String::as_str).collect();
                if demo_reachable(&settings) {
                    candidates.push(DEMO);
                }
                format!(
                    "no server named `{server}`{}; configured: {}",
                    switchboard_config::did_you_mean(server, &candidates),
                    names.join(", ")
                )
            }
        })?;
    Ok((spec, Some(settings)))
}

/// The tool pins every command judges tools by (`$SWITCHBOARD_HOME/pins.json`).
pub fn pin_store() -> Option<switchboard_host::PinStore> {
    home_dir()
        .ok()
        .map(|h| switchboard_host::PinStore::in_home(&h))
}

/// Where the CLI remembers which HTTP transport worked per URL.
pub fn transport_cache() -> Option<PathBuf> {
    home_dir().ok().map(|h| h.join("transport-cache.json"))
}
