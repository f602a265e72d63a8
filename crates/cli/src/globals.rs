//! The options every command takes (`--config`, `--url-policy`, `--color`, `-v`,
//! `--log-format`), one clap definition shared by `switchboard` and the lean
//! `switchboard-gateway` binary, so that both accept exactly the same flags.
//!
//! Also the final error line both binaries print ([`error_text`], [`error_line`]): the
//! error and its causes, each cause printed once.
//!
//! Must not: hold anything a command alone needs (that goes in the command's args).

use std::path::PathBuf;

use crate::{color, ctx, logging};

#[derive(Debug, clap::Args)]
pub struct GlobalArgs {
    /// Use this settings file only (instead of the user and project layers).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Which URLs may be contacted: strict (public https only), local (default for the
    /// CLI: also loopback and private networks), or off.
    #[arg(long, global = true, value_name = "strict|local|off")]
    pub url_policy: Option<String>,
    /// When to colour output (auto: only on a terminal, and not when NO_COLOR is set).
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = color::ColorChoice::Auto)]
    pub color: color::ColorChoice,
    /// More logging on stderr (repeat for more).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// How log lines on stderr look: text (for people) or json (one JSON object per
    /// line, for a log collector; starts at the info level).
    #[arg(long, global = true, value_enum, value_name = "FORMAT", env = "SWITCHBOARD_LOG_FORMAT", default_value_t = logging::LogFormat::Text)]
    pub log_format: logging::LogFormat,
}

impl GlobalArgs {
    /// Starts logging as `-v`, `--color` and `--log-format` say.
    pub fn init_logging(&self) {
        logging::init(self.verbose, self.color, self.log_format);
    }

    /// What the commands read from the global options.
    pub fn globals(self) -> ctx::Globals {
        ctx::Globals {
            config: self.config,
            url_policy: self.url_policy,
        }
    }
}

/// `error: ` and the error with its causes, joined by `: `, leaving out a cause whose
/// text is already in what is printed before it (many errors repeat their source in
/// their own message: "…: No such file or directory: No such file or directory").
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::from("error: ");
    let mut first = true;
    for cause in e.chain() {
        let part = cause.to_string();
        if first {
            text.push_str(&part);
            first = false;
        } else if !part.is_empty() && !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
    }
    text
}

/// The final error: as always in text mode (coloured like the rest), a log event in JSON.
pub fn error_line(text: &str) {
    if logging::json() {
        logging::notice(logging::Level::Error, text);
    } else {
        errln!("{text}");
    }
}

/// `switchboard demo-server`: the bundled demo MCP server on stdio, the default server
/// when there is no settings file (both binaries answer it: `ctx::demo_spec` runs the
/// current executable).
pub fn run_demo(startup_delay_ms: u64) -> std::process::ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let opts = switchboard_demo_server::DemoOptions::default()
        .with_startup_delay(std::time::Duration::from_millis(startup_delay_ms));
    match runtime.block_on(switchboard_demo_server::serve_stdio(opts)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            errln!("demo server error: {e}");
            std::process::ExitCode::from(1)
        }
    }
}
