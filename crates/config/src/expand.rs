//! Shell-style variable expansion in settings values.
//!
//! Supported forms:
//! - `$VAR` and `${VAR}`: the variable's value (`VAR` is `[A-Za-z_][A-Za-z0-9_]*`);
//! - `${VAR:-default}`: the value, or `default` when `VAR` is unset **or empty**
//!   (as in a POSIX shell); the default is taken literally;
//! - `$$`: a literal `$`.
//!
//! A `$` not followed by a name, `{` or `$` is kept as is (`price: 5$`).
//! An unset variable with no default is an error (Gemini CLI would keep the literal
//! text; Switchboard refuses, so the server fails with a clear reason instead of
//! starting with a bogus value).

/// Why a value could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// The variable is not set and no default was given.
    #[error("variable `{0}` is not set; set it in the environment or write `${{{0}:-default}}`")]
    Unset(String),
    /// `${` without a closing `}`.
    #[error("unterminated `${{` (missing `}}`)")]
    Unterminated,
    /// `${...}` with something that is not a variable name.
    #[error("`${{{0}}}` is not a variable reference; use `${{NAME}}` or `${{NAME:-default}}`")]
    BadReference(String),
}

fn is_name_start(c: char) -> bool {
    c == '_' || c.is_ascii_alphabetic()
}

fn is_name_char(c: char) -> bool {
    c == '_' || c.is_ascii_alphanumeric()
}

/// Whether `s` is an environment variable name as references and `-e NAME` use it:
/// `[A-Za-z_][A-Za-z0-9_]*`. The one definition; every writer that takes a name from
/// someone else (a registry, a bundle, a person) checks it here.
pub fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(is_name_start) && chars.all(is_name_char)
}

/// Expands variables in `input`, looking them up with `env`.
pub fn expand_vars(
    input: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        let mut chars = after.chars();
        match chars.next() {
            Some('$') => {
                out.push('$');
                rest = &after[1..];
            }
            Some('{') => {
                let body_and_more = &after[1..];
                let close = body_and_more.find('}').ok_or(ExpandError::Unterminated)?;
                let body = &body_and_more[..close];
                let (name, default) = match body.find(":-") {
                    Some(i) => (&body[..i], Some(&body[i + 2..])),
                    None => (body, None),
                };
                if !is_var_name(name) {
                    return Err(ExpandError::BadReference(body.to_string()));
                }
                match (env(name), default) {
                    (Some(v), Some(d)) if v.is_empty() => out.push_str(d),
                    (Some(v), _) => out.push_str(&v),
                    (None, Some(d)) => out.push_str(d),
                    (None, None) => return Err(ExpandError::Unset(name.to_string())),
                }
                rest = &body_and_more[close + 1..];
            }
            Some(c) if is_name_start(c) => {
                let len = after
                    .char_indices()
                    .find(|&(_, c)| !is_name_char(c))
                    .map_or(after.len(), |(i, _)| i);
                let name = &after[..len];
                match env(name) {
                    Some(v) => out.push_str(&v),
                    None => return Err(ExpandError::Unset(name.to_string())),
                }
                rest = &after[len..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/u".into()),
            "EMPTY" => Some(String::new()),
            "TOKEN_1" => Some("abc".into()),
            _ => None,
        }
    }

    fn x(s: &str) -> Result<String, ExpandError> {
        expand_vars(s, &env)
    }

    #[test]
    fn plain_and_braced() {
        assert_eq!(x("$HOME/bin").unwrap(), "/home/u/bin");
        assert_eq!(x("${HOME}bin").unwrap(), "/home/ubin");
        assert_eq!(x("Bearer $TOKEN_1").unwrap(), "Bearer abc");
        assert_eq!(x("no vars").unwrap(), "no vars");
    }

    #[test]
    fn defaults() {
        assert_eq!(x("${NOPE:-x}").unwrap(), "x");
        assert_eq!(x("${EMPTY:-x}").unwrap(), "x");
        assert_eq!(x("${HOME:-x}").unwrap(), "/home/u");
        assert_eq!(x("${NOPE:-}").unwrap(), "");
        assert_eq!(x("${NOPE:-a b:c}").unwrap(), "a b:c");
    }

    #[test]
    fn empty_set_variable_without_default_is_empty() {
        assert_eq!(x("[$EMPTY]").unwrap(), "[]");
    }

    #[test]
    fn dollar_dollar_and_lone_dollars() {
        assert_eq!(x("$$HOME").unwrap(), "$HOME");
        assert_eq!(x("5$").unwrap(), "5$");
        assert_eq!(x("$1 $-").unwrap(), "$1 $-");
        assert_eq!(x("a$$$$b").unwrap(), "a$$b");
    }

    #[test]
    fn unset_is_an_error_naming_the_variable() {
        let e = x("--key=$API_KEY").unwrap_err();
        assert_eq!(e, ExpandError::Unset("API_KEY".into()));
        let msg = e.to_string();
        assert!(msg.contains("`API_KEY`"), "{msg}");
        assert!(msg.contains("${API_KEY:-default}"), "{msg}");
        assert_eq!(x("${NOPE}").unwrap_err(), ExpandError::Unset("NOPE".into()));
    }

    #[test]
    fn malformed() {
        assert_eq!(x("${HOME").unwrap_err(), ExpandError::Unterminated);
        assert!(matches!(
            x("${}").unwrap_err(),
            ExpandError::BadReference(_)
        ));
        assert!(matches!(
            x("${A-b}").unwrap_err(),
            ExpandError::BadReference(_)
        ));
    }

    #[test]
    fn unicode_around_vars() {
        assert_eq!(x("é$HOME€").unwrap(), "é/home/u€");
    }
}
