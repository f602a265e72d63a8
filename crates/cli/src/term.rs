//! Terminal safety. Text Switchboard does not control (server names, instructions,
//! tool names and descriptions, results, errors, prompts, elicitation messages, model
//! output) is printed with its control characters made visible: no ANSI/OSC escape, no
//! carriage return, backspace or bidi override reaches the terminal raw, whether or not
//! stdout is a TTY. Newlines and tabs pass. `--json` output does not come here: JSON
//! escapes control characters itself and keeps strings exact.
//!
//! Every human-readable line of the CLI goes out through `outln!`, `out!`,
//! `errln!` or `errout!` (or [`visible`] for a `write!` to a locked handle); the
//! CLI's own escapes (the progress lines `indicatif` draws, see the `progress` module;
//! the line editor's printer that `chat` announces servers through) are written apart
//! from any text, which is made visible before it is handed to them.
//!
//! Also here: [`count`] ("1 tool", "2 tools") for counts in sentences, and [`read_key`],
//! one key from the terminal without Enter (Ctrl-C read as a key, not a signal), for
//! prompts that look like a single keypress.

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

/// `n` and the word, plural when `n` is not 1: `count(1, "tool")` is "1 tool",
/// `count(2, "tool")` "2 tools".
pub fn count(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// One key read from the terminal without waiting for Enter ([`read_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A printable character.
    Char(char),
    Enter,
    Escape,
    /// Ctrl-C (read as a key: the terminal sends no signal while a key is read).
    Interrupt,
    /// Ctrl-D.
    EndOfFile,
    /// Anything else (arrows, function keys, other control keys).
    Other,
}

/// Reads one key from stdin, a terminal, without echo and without waiting for Enter
/// (the terminal's settings are restored before returning). Gives `Ok(None)` once
/// `stop` is set (checked every 100 ms), so a prompt given up elsewhere does not keep
/// the key the line editor reads next. An error when stdin is not a terminal or its
/// settings cannot be changed (the caller then reads a line).
#[cfg(unix)]
pub fn read_key(stop: &std::sync::atomic::AtomicBool) -> std::io::Result<Option<Key>> {
    use rustix::termios::{LocalModes, OptionalActions, SpecialCodeIndex, tcgetattr, tcsetattr};
    use std::sync::atomic::Ordering;

    /// Puts the terminal's settings back however the read ends.
    struct Restore(rustix::termios::Termios);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, &self.0);
        }
    }

    let stdin = std::io::stdin();
    let before = tcgetattr(&stdin)?;
    let mut keys = before.clone();
    // No line buffering, no echo, and Ctrl-C as a key rather than a signal; a read
    // returns after at most 100 ms (VMIN 0, VTIME 1) so that `stop` is seen.
    keys.local_modes
        .remove(LocalModes::ICANON | LocalModes::ECHO | LocalModes::ISIG);
    keys.special_codes[SpecialCodeIndex::VMIN] = 0;
    keys.special_codes[SpecialCodeIndex::VTIME] = 1;
    tcsetattr(&stdin, OptionalActions::Now, &keys)?;
    let _restore = Restore(before);
    let mut buf = [0u8; 16];
    loop {
        if stop.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let n = match rustix::io::read(&stdin, &mut buf) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            continue;
        }
        return Ok(Some(key_of(&buf[..n])));
    }
}

/// Reads one key: not available on this system (the caller reads a line).
#[cfg(not(unix))]
pub fn read_key(_stop: &std::sync::atomic::AtomicBool) -> std::io::Result<Option<Key>> {
    Err(std::io::Error::other(
        "single keys cannot be read on this system",
    ))
}

/// The first key in the bytes of one terminal read (keys typed or pasted together
/// arrive in one read; the rest are dropped).
fn key_of(bytes: &[u8]) -> Key {
    match bytes {
        [b'\r' | b'\n', ..] => Key::Enter,
        [0x03, ..] => Key::Interrupt,
        [0x04, ..] => Key::EndOfFile,
        [0x1b] => Key::Escape,
        // An escape sequence: an arrow, a function key…
        [0x1b, ..] => Key::Other,
        _ => match String::from_utf8_lossy(bytes).chars().next() {
            Some(c) if !c.is_control() && c != char::REPLACEMENT_CHARACTER => Key::Char(c),
            _ => Key::Other,
        },
    }
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

    #[test]
    fn counts_are_pluralised() {
        assert_eq!(count(0, "tool"), "0 tools");
        assert_eq!(count(1, "tool"), "1 tool");
        assert_eq!(count(2, "tool"), "2 tools");
    }

    #[test]
    fn terminal_bytes_are_keys() {
        assert_eq!(key_of(b"y"), Key::Char('y'));
        assert_eq!(key_of(b"S"), Key::Char('S'));
        assert_eq!(key_of(b"\r"), Key::Enter);
        assert_eq!(key_of(&[3]), Key::Interrupt);
        assert_eq!(key_of(&[4]), Key::EndOfFile);
        assert_eq!(key_of(&[0x1b]), Key::Escape);
        assert_eq!(key_of(b"\x1b[A"), Key::Other);
        assert_eq!(key_of("é".as_bytes()), Key::Char('é'));
        assert_eq!(key_of(b"y\r"), Key::Char('y'));
        assert_eq!(key_of(&[0x7f]), Key::Other);
    }
}
