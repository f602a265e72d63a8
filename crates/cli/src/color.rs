//! When the CLI colours what it writes: `--color auto|always|never` (global) and
//! `NO_COLOR` (<https://no-color.org>). `auto`, the default, colours a stream only when
//! it is a terminal and `NO_COLOR` is unset or empty; `always` colours even a pipe,
//! whatever `NO_COLOR` says; `never` colours nothing.
//!
//! The colour today comes from clap (help and usage errors) and from the log lines
//! `-v` turns on; both are set from here in `main`. Every output that gains colour asks
//! [`ColorChoice::enabled`] for its stream. `--json` documents are never coloured.

use std::ffi::OsString;

use clap::ValueEnum;

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ColorChoice {
    // Colour on a terminal, unless `NO_COLOR` is set to a non-empty value. (Plain
    // comments: doc comments here would turn `--help` into its long form.)
    #[default]
    Auto,
    // Always colour, even into a pipe or file.
    Always,
    // Never colour.
    Never,
}

impl ColorChoice {
    /// The `--color` on the command line, read before clap parses it: clap colours
    /// its own help and errors while parsing. Stops at `--`; a bad value is left for
    /// clap to report (and reads as `auto` meanwhile).
    pub fn from_args(args: impl IntoIterator<Item = OsString>) -> Self {
        let mut choice = Self::Auto;
        let mut it = args.into_iter().skip(1);
        while let Some(arg) = it.next() {
            let value = if arg == "--" {
                break;
            } else if arg == "--color" {
                it.next()
            } else if let Some(v) = arg.to_str().and_then(|a| a.strip_prefix("--color=")) {
                Some(OsString::from(v))
            } else {
                continue;
            };
            choice = value
                .and_then(|v| v.to_str().and_then(|v| Self::from_str(v, false).ok()))
                .unwrap_or(Self::Auto);
        }
        choice
    }

    /// Whether to colour a stream that is (or is not) a terminal.
    pub fn enabled(self, is_terminal: bool) -> bool {
        match self {
            Self::Always => true,
            Self::Never => false,
            Self::Auto => is_terminal && !no_color(std::env::var_os("NO_COLOR")),
        }
    }

    /// The same choice for clap's help and errors (clap checks the terminal itself).
    pub fn for_clap(self) -> clap::ColorChoice {
        match self {
            Self::Always => clap::ColorChoice::Always,
            Self::Never => clap::ColorChoice::Never,
            Self::Auto if no_color(std::env::var_os("NO_COLOR")) => clap::ColorChoice::Never,
            Self::Auto => clap::ColorChoice::Auto,
        }
    }
}

/// `NO_COLOR` disables colour when set to anything but the empty string.
fn no_color(value: Option<OsString>) -> bool {
    value.is_some_and(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_flag_is_read_in_both_forms_up_to_the_separator() {
        let c = ColorChoice::from_args;
        assert_eq!(c(args(&["sb", "mcp", "list"])), ColorChoice::Auto);
        assert_eq!(
            c(args(&["sb", "--color", "always", "mcp"])),
            ColorChoice::Always
        );
        assert_eq!(
            c(args(&["sb", "mcp", "list", "--color=never"])),
            ColorChoice::Never
        );
        assert_eq!(c(args(&["sb", "--color", "sometimes"])), ColorChoice::Auto);
        assert_eq!(
            c(args(&[
                "sb",
                "mcp",
                "prompt",
                "s",
                "p",
                "--",
                "--color=always"
            ])),
            ColorChoice::Auto
        );
        // `--color` as the first word is the flag, not the program name.
        assert_eq!(c(args(&["--color", "never"])), ColorChoice::Auto);
    }

    #[test]
    fn no_color_counts_only_when_non_empty() {
        assert!(!no_color(None));
        assert!(!no_color(Some("".into())));
        assert!(no_color(Some("1".into())));
        assert!(no_color(Some("false".into())));
        assert!(ColorChoice::Always.enabled(false));
        assert!(!ColorChoice::Never.enabled(true));
        assert!(!ColorChoice::Auto.enabled(false));
    }
}
