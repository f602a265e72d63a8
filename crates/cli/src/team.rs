//! `switchboard serve --team`: team mode (`switchboard_web::start_team`) from flags and
//! the environment — the database (`--database`, `SWITCHBOARD_DATABASE_URL`, else
//! `~/.switchboard/team.db`), the secret key (`SWITCHBOARD_SECRET_KEY[_FILE]`), the
//! OpenID Connect issuer and client (`--oidc-issuer`, `SWITCHBOARD_OIDC_CLIENT_ID`,
//! `SWITCHBOARD_OIDC_CLIENT_SECRET[_FILE]`), who may sign in (`--allow-domain`,
//! `--allow-email`, `--admin`), `--public-origin`, and the token a scraper needs for
//! `/metrics` (`SWITCHBOARD_METRICS_TOKEN[_FILE]`), how chats reach the model
//! (`--chat-provider`, `--chat-model`, the base URL from `GEMINI_BASE_URL` /
//! `OPENAI_BASE_URL`; keys only from the store). What is missing (key, issuer, client id)
//! is listed at once, each with how to set it. Migrations run at start, then the key is
//! checked against the database (another replica's key: refused, naming the fix). The
//! issuer's origin is trusted for sign-in only (`start_team`), so a loopback or
//! private-network issuer needs no weaker `--url-policy`. Messages to
//! the operator go through `logging::notice` (JSON lines with `--log-format json`).
//! The URL policy defaults to `strict` (a weaker `--url-policy` is warned about), and
//! `--allow-catalog-stdio` (stdio catalog servers run on this instance) warns at start.
//!
//! Must not: take a secret (key, client secret) from the command line, where other
//! users of the machine can read it.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use switchboard_auth::{ClientSecret, SignInPolicy};
use switchboard_model::{ModelConfig, Provider};
use switchboard_net::UrlPolicy;
use switchboard_store::{DatabaseUrl, SecretKeys, Store};
use switchboard_web::{MetricsToken, SignInOptions, TeamModel, TeamOptions};

use crate::ctx::{self, Globals};
use crate::logging::{Level, notice};
use crate::serve::ServeArgs;

/// The client secret, inline.
const CLIENT_SECRET_ENV: &str = "SWITCHBOARD_OIDC_CLIENT_SECRET";
/// A file holding the client secret.
const CLIENT_SECRET_FILE_ENV: &str = "SWITCHBOARD_OIDC_CLIENT_SECRET_FILE";
/// The bearer token `/metrics` asks of a scraper, inline.
const METRICS_TOKEN_ENV: &str = "SWITCHBOARD_METRICS_TOKEN";
/// A file holding it.
const METRICS_TOKEN_FILE_ENV: &str = "SWITCHBOARD_METRICS_TOKEN_FILE";

/// Team mode's flags (with `--team`). Those also read from the environment are ignored
/// without `--team` (a shell may export them for `switchboard db`), the others need it.
#[derive(Debug, Clone, Args)]
pub struct TeamArgs {
    /// The team database: sqlite://PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE
    /// (default: sqlite://~/.switchboard/team.db).
    #[arg(
        long,
        env = "SWITCHBOARD_DATABASE_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub database: Option<String>,
    /// The OpenID Connect issuer people sign in with, e.g. <https://accounts.google.com>.
    #[arg(long, env = "SWITCHBOARD_OIDC_ISSUER", value_name = "URL")]
    pub oidc_issuer: Option<String>,
    /// This app's client id at the issuer (its secret goes in
    /// SWITCHBOARD_OIDC_CLIENT_SECRET or SWITCHBOARD_OIDC_CLIENT_SECRET_FILE).
    #[arg(long, env = "SWITCHBOARD_OIDC_CLIENT_ID", value_name = "ID")]
    pub oidc_client_id: Option<String>,
    /// An email domain whose verified addresses may sign in (repeat for more).
    #[arg(long = "allow-domain", value_name = "DOMAIN", requires = "team")]
    pub allow_domains: Vec<String>,
    /// An address that may sign in (repeat for more).
    #[arg(long = "allow-email", value_name = "EMAIL", requires = "team")]
    pub allow_emails: Vec<String>,
    /// Who signs in as an admin (repeat for more): a verified address (the rights go
    /// with it if the issuer gives it to another account), or `sub:<id>` for the
    /// issuer's account `<id>` whatever its email.
    #[arg(long = "admin", value_name = "EMAIL|sub:ID", requires = "team")]
    pub admins: Vec<String>,
    /// The model API chats use: gemini, or openai for an OpenAI-compatible server
    /// (base URL from GEMINI_BASE_URL / OPENAI_BASE_URL; keys are set per user or by
    /// an admin in the app, never from the environment).
    #[arg(
        long,
        env = "SWITCHBOARD_CHAT_PROVIDER",
        value_name = "PROVIDER",
        default_value = "gemini"
    )]
    pub chat_provider: String,
    /// The model chats use (default: Gemini's default model; openai needs one).
    #[arg(long, env = "SWITCHBOARD_CHAT_MODEL", value_name = "MODEL")]
    pub chat_model: Option<String>,
    /// Let admins publish stdio catalog servers, which this instance then runs (one
    /// process per user who uses one, with the admin's arguments and environment only):
    /// the admins are responsible for those commands. Off by default.
    #[arg(long = "allow-catalog-stdio", requires = "team")]
    pub allow_catalog_stdio: bool,
}

/// The client secret from the environment: inline or from a 0600 file; `None` for a
/// public client.
fn client_secret(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<ClientSecret>> {
    Ok(
        secret_from_env(env, CLIENT_SECRET_ENV, CLIENT_SECRET_FILE_ENV)?
            .map(|s| ClientSecret::new(s.trim())),
    )
}

/// The metrics token from the environment (inline or from a 0600 file); `None`: no
/// `/metrics`.
fn metrics_token(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<MetricsToken>> {
    secret_from_env(env, METRICS_TOKEN_ENV, METRICS_TOKEN_FILE_ENV)?
        .map(|t| MetricsToken::new(&t).context(METRICS_TOKEN_ENV))
        .transpose()
}

/// A secret from `inline_env`, or from the 0600 file `file_env` names (not both).
fn secret_from_env(
    env: &dyn Fn(&str) -> Option<String>,
    inline_env: &str,
    file_env: &str,
) -> Result<Option<String>> {
    let inline = env(inline_env).filter(|v| !v.trim().is_empty());
    let file = env(file_env).filter(|v| !v.trim().is_empty());
    match (inline, file) {
        (Some(_), Some(_)) => {
            bail!("both {inline_env} and {file_env} are set: keep one")
        }
        (Some(s), None) => Ok(Some(s.trim().to_owned())),
        (None, Some(path)) => {
            let path = Path::new(&path);
            let s =
                crate::gateway::read_private_file(path, &format!("{file_env}={}", path.display()))?;
            Ok(Some(s.trim().to_owned()))
        }
        (None, None) => Ok(None),
    }
}

/// Sign-in from the flags. `None` with what is missing pushed on `missing` (an issuer,
/// a client id), so that one start names every missing item at once.
fn sign_in_options(a: &TeamArgs, missing: &mut Vec<String>) -> Result<Option<SignInOptions>> {
    let issuer = a
        .oidc_issuer
        .as_deref()
        .map(str::trim)
        .filter(|i| !i.is_empty());
    let client_id = a
        .oidc_client_id
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty());
    if issuer.is_none() {
        missing.push(
            "the OpenID Connect issuer people sign in with: pass --oidc-issuer URL (or set SWITCHBOARD_OIDC_ISSUER), e.g. https://accounts.google.com".into(),
        );
    }
    if client_id.is_none() {
        missing.push(
            "the client registered at that issuer with the redirect URI <public origin>/auth/callback: set SWITCHBOARD_OIDC_CLIENT_ID (or pass --oidc-client-id), and its secret, if it has one, in SWITCHBOARD_OIDC_CLIENT_SECRET or SWITCHBOARD_OIDC_CLIENT_SECRET_FILE".into(),
        );
    }
    let (Some(issuer), Some(client_id)) = (issuer, client_id) else {
        return Ok(None);
    };
    let issuer = url::Url::parse(issuer)
        .with_context(|| format!("--oidc-issuer `{issuer}` is not a URL"))?;
    Ok(Some(SignInOptions {
        issuer,
        client_id: client_id.to_owned(),
        client_secret: client_secret(&|k| std::env::var(k).ok())?,
        scopes: Vec::new(),
        policy: SignInPolicy {
            allowed_domains: a.allow_domains.clone(),
            allowed_emails: a.allow_emails.clone(),
            admins: a.admins.clone(),
            allow_any: false,
        },
    }))
}

/// One error naming every missing item, each with how to set it.
fn missing_error(missing: &[String]) -> anyhow::Error {
    let mut text = format!(
        "switchboard serve --team is missing {}:",
        if missing.len() == 1 {
            "one setting".to_owned()
        } else {
            format!("{} settings", missing.len())
        }
    );
    for item in missing {
        text.push_str("\n  - ");
        text.push_str(item);
    }
    anyhow!(text)
}

pub async fn run(g: &Globals, a: ServeArgs) -> Result<ExitCode> {
    let t = &a.team_args;
    let url = match t.database.as_deref().filter(|u| !u.trim().is_empty()) {
        Some(url) => DatabaseUrl::parse(url)?,
        None => DatabaseUrl::default_sqlite(&ctx::home_dir()?)?,
    };
    let env = |k: &str| std::env::var(k).ok();
    let mut missing = Vec::new();
    let keys = if SecretKeys::is_configured(&env) {
        Some(SecretKeys::from_env(&env).context(
            "switchboard serve --team needs the secret key that encrypts tokens and keys in the database",
        )?)
    } else {
        missing.push(SecretKeys::missing_help());
        None
    };
    let sign_in = sign_in_options(t, &mut missing)?;
    let (Some(keys), Some(sign_in)) = (keys, sign_in) else {
        return Err(missing_error(&missing));
    };
    let metrics_token = metrics_token(&|k| std::env::var(k).ok())?;
    if t.allow_domains.is_empty() && t.allow_emails.is_empty() && t.admins.is_empty() {
        notice(
            Level::Warn,
            "warning: no --allow-domain, --allow-email or --admin: nobody can sign in yet",
        );
    }
    let url_policy = match &g.url_policy {
        Some(p) => p
            .parse::<UrlPolicy>()
            .map_err(|e| anyhow!("--url-policy: {e} (use strict, local or off)"))?,
        None => UrlPolicy::Strict,
    };
    if url_policy.is_weaker_than(UrlPolicy::Strict) {
        notice(
            Level::Warn,
            &format!(
                "warning: URL policy `{url_policy}` is weaker than team mode's default `strict`: servers people add may reach this machine's private network"
            ),
        );
    }
    let shown = url.to_string();
    let store = Store::open_url(url)
        .await
        .with_context(|| format!("opening the team database {shown}"))?
        .with_keys(keys);
    let mut opts = TeamOptions::new(store);
    opts.host = a.host;
    opts.port = a.port;
    opts.public_origin = a.public_origin.clone();
    opts.url_policy = url_policy;
    opts.sign_in = Some(sign_in);
    opts.metrics_token = metrics_token;
    let provider: Provider = t
        .chat_provider
        .parse()
        .map_err(|e| anyhow!("--chat-provider: {e}"))?;
    opts.model = Some(
        TeamModel::new(
            ModelConfig::from_env().with_provider(provider),
            t.chat_model.clone(),
        )
        .map_err(|e| anyhow!("--chat-model: {e}"))?,
    );
    opts.allow_catalog_stdio = t.allow_catalog_stdio;
    if t.allow_catalog_stdio {
        notice(
            Level::Warn,
            "warning: --allow-catalog-stdio: admins may publish commands that this instance runs for the users who enable them",
        );
    }
    notice(Level::Info, &format!("team database: {shown}"));
    let running = switchboard_web::start_team(opts)
        .await
        .context("switchboard serve --team")?;
    let interrupted = switchboard_web::interrupt();
    println!("Switchboard (team) is running at {}", running.app_origin);
    tracing::info!(target: "switchboard", origin = %running.app_origin, address = %running.addr, "team instance listening");
    interrupted.await;
    notice(Level::Info, "Stopping…");
    running.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_client_secret_comes_from_one_place_and_a_private_file() {
        let none = |_: &str| None;
        assert!(client_secret(&none).unwrap().is_none());
        let both = |k: &str| Some(format!("{k}-value"));
        assert!(
            client_secret(&both)
                .unwrap_err()
                .to_string()
                .contains("keep one")
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret");
        std::fs::write(&file, "s3cret\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let path = file.display().to_string();
        let from_file = |k: &str| (k == CLIENT_SECRET_FILE_ENV).then(|| path.clone());
        assert!(
            client_secret(&from_file)
                .unwrap_err()
                .to_string()
                .contains("chmod 600")
        );
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let secret = client_secret(&from_file).unwrap().unwrap();
        assert_eq!(secret.expose(), "s3cret");
    }
}
