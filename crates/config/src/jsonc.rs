//! Tolerant JSON reading: `//` and `/* */` comments and trailing commas are removed
//! before parsing (Gemini CLI settings files may contain them).
//!
//! Removed characters are replaced by spaces (newlines are kept), so the line and
//! column numbers reported by the JSON parser still point into the original file.

use std::path::Path;

use serde_json::Value;

use crate::error::ConfigError;

/// Where an unterminated block comment starts (1-based line and column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UnterminatedComment {
    pub line: usize,
    pub column: usize,
}

/// Removes comments and trailing commas outside of strings.
pub(crate) fn strip(input: &str) -> Result<String, UnterminatedComment> {
    let bytes = input.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let mut in_string = false;
    let mut pending_comma: Option<usize> = None;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            out.push(b);
            if b == b'\\' {
                if let Some(&next) = bytes.get(i + 1) {
                    out.push(next);
                    i += 1;
                }
            } else if b == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        match b {
            b'"' => {
                pending_comma = None;
                in_string = true;
                out.push(b);
                i += 1;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    out.push(if bytes[i] == b'\r' { b'\r' } else { b' ' });
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let start = i;
                out.extend_from_slice(b"  ");
                i += 2;
                loop {
                    if i >= bytes.len() {
                        let (line, column) = line_col(input, start);
                        return Err(UnterminatedComment { line, column });
                    }
                    if bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/') {
                        out.extend_from_slice(b"  ");
                        i += 2;
                        break;
                    }
                    out.push(if bytes[i] == b'\n' { b'\n' } else { b' ' });
                    i += 1;
                }
            }
            b',' => {
                pending_comma = Some(out.len());
                out.push(b);
                i += 1;
            }
            b'}' | b']' => {
                if let Some(pos) = pending_comma.take() {
                    out[pos] = b' ';
                }
                out.push(b);
                i += 1;
            }
            b' ' | b'\t' | b'\n' | b'\r' => {
                out.push(b);
                i += 1;
            }
            _ => {
                pending_comma = None;
                out.push(b);
                i += 1;
            }
        }
    }
    // Only ASCII bytes were replaced by ASCII bytes and multi-byte sequences inside
    // comments were replaced byte-for-byte by spaces, so the result is valid UTF-8.
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn line_col(input: &str, byte: usize) -> (usize, usize) {
    let before = &input.as_bytes()[..byte];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    (line, column)
}

/// Parses `text` (the contents of `path`) as JSON with comments.
pub(crate) fn parse(path: &Path, text: &str) -> Result<Value, ConfigError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let stripped = strip(text).map_err(|c| ConfigError::Parse {
        path: path.to_path_buf(),
        line: c.line,
        column: c.column,
        message: "unterminated `/*` comment".to_string(),
    })?;
    if stripped.trim().is_empty() {
        // An empty file is treated as an empty object.
        return Ok(Value::Object(serde_json::Map::new()));
    }
    serde_json::from_str(&stripped).map_err(|e| ConfigError::Parse {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })
}

/// Reads and parses a file. `Ok(None)` when it does not exist.
pub(crate) fn read(path: &Path) -> Result<Option<Value>, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(path, &text).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ConfigError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(s: &str) -> Value {
        parse(Path::new("x.json"), s).unwrap()
    }

    #[test]
    fn strips_line_and_block_comments() {
        let v = p("{\n // hi\n \"a\": 1, /* b */ \"b\": /* x\n y */ 2\n}");
        assert_eq!(v, json!({"a": 1, "b": 2}));
    }

    #[test]
    fn keeps_comment_markers_inside_strings() {
        let v = p(r#"{"u": "http://x/*y*/", "s": "a // b", "e": "q\"//"}"#);
        assert_eq!(
            v,
            json!({"u": "http://x/*y*/", "s": "a // b", "e": "q\"//"})
        );
    }

    #[test]
    fn removes_trailing_commas() {
        let v = p("{\"a\": [1, 2, ], \"b\": {\"c\": 3,}, // c\n}");
        assert_eq!(v, json!({"a": [1, 2], "b": {"c": 3}}));
    }

    #[test]
    fn comma_in_string_before_brace_is_kept() {
        let v = p(r#"{"a": ",}"}"#);
        assert_eq!(v, json!({"a": ",}"}));
    }

    #[test]
    fn invalid_json_reports_file_line_column() {
        let err = parse(
            Path::new("/t/settings.json"),
            "{\n  \"a\": 1,\n  \"b\" 2\n}",
        )
        .unwrap_err();
        match &err {
            ConfigError::Parse { line, column, .. } => {
                assert_eq!(*line, 3);
                assert!(*column >= 6, "column {column}");
            }
            other => panic!("unexpected {other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.starts_with("/t/settings.json:3:"), "{msg}");
    }

    #[test]
    fn line_numbers_survive_comments() {
        let err = parse(Path::new("f"), "{ /* one\ntwo */\n // three\n \"a\": }").unwrap_err();
        match err {
            ConfigError::Parse { line, .. } => assert_eq!(line, 4),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn unterminated_block_comment_is_an_error() {
        let err = parse(Path::new("f"), "{\n /* never").unwrap_err();
        match err {
            ConfigError::Parse {
                line,
                column,
                message,
                ..
            } => {
                assert_eq!((line, column), (2, 2));
                assert!(message.contains("unterminated"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn empty_file_is_empty_object() {
        assert_eq!(p("  \n// nothing\n"), json!({}));
    }
}
