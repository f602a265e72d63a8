//! Terminal safety. Text Switchboard does not control (server names, instructions,
//! tool names and descriptions, results, errors, prompts, elicitation messages, model
//! output) is printed with its control characters made visible: no ANSI/OSC escape, no
//! carriage return, backspace or bidi override reaches the terminal raw, whether or not
//! stdout is a TTY. Newlines and tabs pass. `--json` output does not come here: JSON
//! escapes control characters itself and keeps strings exact.
//!
//! Every human-readable line of the CLI goes out through `outln!`, `out!`,
//! `errln!` or `errout!` (or [`visible`] for a `write!` to a locked handle); the
//! CLI's own escapes (the progress lines `indicatif` draws, see the `progress` module) are
//! written apart from any text, which is made visible before it is handed to them.

/// The one visible-escaping rule (`switchboard_config::visible`), shared with the team
/// server's pages.
pub use switchboard_config::visible;

/// `println!` with [`visible`] applied to the formatted text.
macro_rules! outln {
    () => {
        println!()
    };
    ($($arg:tt)*) => {
        println!("{}", $crate::term::visible(&format!($($arg)*)))
    };
}

/// `print!` with [`visible`] applied.
macro_rules! out {
    ($($arg:tt)*) => {
        print!("{}", $crate::term::visible(&format!($($arg)*)))
    };
}

/// `eprintln!` with [`visible`] applied.
macro_rules! errln {
    () => {
        eprintln!()
    };
    ($($arg:tt)*) => {
        eprintln!("{}", $crate::term::visible(&format!($($arg)*)))
    };
}

/// `eprint!` with [`visible`] applied.
macro_rules! errout {
    ($($arg:tt)*) => {
        eprint!("{}", $crate::term::visible(&format!($($arg)*)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_terminal_controls_and_keeps_text() {
        assert!(matches!(
            visible("plain — ünïcode\n\tok"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(visible("ok\rFAKE"), "ok\\rFAKE");
        assert_eq!(visible("\u{202e}txt.exe"), "\\u{202e}txt.exe");
    }
}
