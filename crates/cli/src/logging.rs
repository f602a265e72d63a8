//! Logging on stderr for every command: the level from `-v` (or `SWITCHBOARD_LOG`, an
//! `EnvFilter` directive), the format from `--log-format text|json` (or
//! `SWITCHBOARD_LOG_FORMAT`). `text`, the default, is one human line per event; `json`
//! is one JSON object per line (`timestamp`, `level`, `target`, `fields` with `message`
//! and the event's own fields) for a log collector, and starts at `info` (what an
//! operator running `serve --team` wants to see) instead of `warn`.
//!
//! [`notice`] is for the messages a command writes to the operator on stderr outside
//! the log (start-up warnings, "Stopping…", the final error): a plain line in text
//! mode, a log event in JSON mode, so that stderr stays one JSON object per line.
//!
//! Must not: log a secret. Events carry no header value, cookie, token or key; the
//! secret types (`Secret`, `ClientSecret`, `SessionToken`) print redacted.

use std::io::IsTerminal;
use std::sync::OnceLock;

use clap::ValueEnum;

use crate::color::ColorChoice;

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum LogFormat {
    // One human line per event. (Plain comments: doc comments would turn `--help`
    // into its long form.)
    #[default]
    Text,
    // One JSON object per line.
    Json,
}

/// How loud an operator message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
}

static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// The default filter for `-v` repeated `verbose` times in `format`.
fn default_filter(verbose: u8, format: LogFormat) -> &'static str {
    match (verbose, format) {
        (0, LogFormat::Text) => "warn,rmcp=off",
        (0, LogFormat::Json) | (1, _) => "info,rmcp=error",
        _ => "debug",
    }
}

/// Set up the global subscriber (once; later calls change nothing).
pub fn init(verbose: u8, color: ColorChoice, format: LogFormat) {
    let _ = FORMAT.set(format);
    let filter = tracing_subscriber::EnvFilter::try_from_env("SWITCHBOARD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter(verbose, format)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(color.enabled(std::io::stderr().is_terminal()))
            .with_target(false)
            .try_init(),
        LogFormat::Json => builder
            .json()
            .with_ansi(false)
            .with_current_span(false)
            .with_span_list(false)
            .try_init(),
    };
}

/// Whether stderr carries JSON lines.
pub fn json() -> bool {
    FORMAT.get() == Some(&LogFormat::Json)
}

/// A message to the operator: `text` as a line on stderr, or (JSON) a log event with
/// it as the message.
pub fn notice(level: Level, text: &str) {
    if !json() {
        eprintln!("{text}");
        return;
    }
    let text = ["warning: ", "error: "]
        .iter()
        .find_map(|p| text.strip_prefix(p))
        .unwrap_or(text);
    match level {
        Level::Info => tracing::info!(target: "switchboard", "{text}"),
        Level::Warn => tracing::warn!(target: "switchboard", "{text}"),
        Level::Error => tracing::error!(target: "switchboard", "{text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_starts_at_info_and_v_still_raises_the_level() {
        assert_eq!(default_filter(0, LogFormat::Text), "warn,rmcp=off");
        assert_eq!(default_filter(0, LogFormat::Json), "info,rmcp=error");
        assert_eq!(default_filter(1, LogFormat::Text), "info,rmcp=error");
        assert_eq!(default_filter(2, LogFormat::Json), "debug");
    }
}
