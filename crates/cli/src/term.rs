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

use std::borrow::Cow;

/// Whether `c` must not reach a terminal raw: C0 controls other than newline and tab,
/// DEL, C1 controls, and the bidirectional formatting characters (Trojan Source).
pub fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}'
        | '\u{b}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200e}'
        | '\u{200f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}'
    )
}

/// `text` with every unsafe character written as a visible escape: `\r`, `\u{1b}`,
/// `\u{202e}`. Borrowed when there is nothing to escape.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c if is_unsafe(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

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
        assert!(matches!(visible("plain — ünïcode\n\tok"), Cow::Borrowed(_)));
        assert_eq!(
            visible("a\u{1b}]52;c;SGVsbG8=\u{7}b\u{1b}[2J"),
            "a\\u{1b}]52;c;SGVsbG8=\\u{7}b\\u{1b}[2J"
        );
        assert_eq!(visible("ok\rFAKE"), "ok\\rFAKE");
        assert_eq!(visible("x\u{8}\u{8}y"), "x\\u{8}\\u{8}y");
        assert_eq!(visible("\u{202e}txt.exe"), "\\u{202e}txt.exe");
        assert_eq!(visible("\u{2066}a\u{2069}"), "\\u{2066}a\\u{2069}");
        assert_eq!(visible("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(visible("nul\0"), "nul\\0");
    }
}
