//! Text Switchboard does not control, made safe to show: the one rule for every place a
//! person reads such text (the CLI's terminal output, the team server's consent page).
//! C0 controls other than newline and tab, DEL, C1 controls, and the bidirectional
//! formatting characters (U+061C, U+200E/F, U+202A–U+202E, U+2066–U+2069: "Trojan
//! Source") are written as visible escapes (`\r`, `\0`, `\u{1b}`, `\u{202e}`), so no
//! escape sequence, carriage return, backspace or bidi override reaches a terminal or a
//! page raw and text cannot read as something else.
//!
//! Must not: change text with nothing to escape (it is borrowed as it is), or escape
//! newlines and tabs. HTML escaping is the page's own step, after this one.

use std::borrow::Cow;

/// Whether `c` must not be shown raw: C0 controls other than newline and tab, DEL, C1
/// controls, and the bidirectional formatting characters.
pub fn is_unsafe_to_show(c: char) -> bool {
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

/// `text` with every character [`is_unsafe_to_show`] written as a visible escape: `\r`,
/// `\0`, `\u{1b}`, `\u{202e}`. Borrowed when there is nothing to escape.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe_to_show) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c if is_unsafe_to_show(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_controls_and_bidi_and_keeps_text() {
        assert!(matches!(visible("plain — ünïcode\n\tok"), Cow::Borrowed(_)));
        assert_eq!(
            visible("a\u{1b}]52;c;SGVsbG8=\u{7}b\u{1b}[2J"),
            "a\\u{1b}]52;c;SGVsbG8=\\u{7}b\\u{1b}[2J"
        );
        assert_eq!(visible("ok\rFAKE"), "ok\\rFAKE");
        assert_eq!(visible("x\u{8}\u{8}y"), "x\\u{8}\\u{8}y");
        assert_eq!(visible("\u{202e}txt.exe"), "\\u{202e}txt.exe");
        assert_eq!(visible("\u{2066}a\u{2069}"), "\\u{2066}a\\u{2069}");
        assert_eq!(
            visible("\u{202a}\u{202b}\u{202c}\u{202d}\u{2067}\u{2068}\u{200e}\u{200f}\u{61c}"),
            "\\u{202a}\\u{202b}\\u{202c}\\u{202d}\\u{2067}\\u{2068}\\u{200e}\\u{200f}\\u{61c}"
        );
        assert_eq!(visible("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(visible("nul\0"), "nul\\0");
    }
}
