//! `WWW-Authenticate` parsing (RFC 9110 §11.6.1): several challenges per header,
//! quoted strings with escapes; and the Bearer parameters OAuth uses (RFC 6750 §3,
//! RFC 9728 §5.1): `resource_metadata`, `scope`, `error`, `error_description`.

use std::collections::HashMap;

/// One challenge: a scheme and its parameters (names lower-cased).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Challenge {
    pub scheme: String,
    pub params: HashMap<String, String>,
}

/// What a server's Bearer challenge says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BearerChallenge {
    /// RFC 9728: where the protected-resource metadata is.
    pub resource_metadata: Option<String>,
    /// The scope the server wants (space-separated).
    pub scope: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
}

impl BearerChallenge {
    /// The Bearer challenge of a header value (or an empty one).
    pub fn parse(header: &str) -> Self {
        let challenges = parse_challenges(header);
        let Some(c) = challenges
            .iter()
            .find(|c| c.scheme.eq_ignore_ascii_case("bearer"))
        else {
            return Self::default();
        };
        let get = |k: &str| c.params.get(k).filter(|v| !v.is_empty()).cloned();
        Self {
            resource_metadata: get("resource_metadata"),
            scope: get("scope"),
            error: get("error"),
            error_description: get("error_description"),
        }
    }

    /// Whether this is a 403 step-up challenge.
    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// Splits `s` at commas outside quoted strings.
fn split_items(s: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    let mut escaped = false;
    for ch in s.chars() {
        if in_quotes {
            cur.push(ch);
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == '"' {
                in_quotes = false;
            }
            continue;
        }
        match ch {
            '"' => {
                in_quotes = true;
                cur.push(ch);
            }
            ',' => items.push(std::mem::take(&mut cur)),
            _ => cur.push(ch),
        }
    }
    items.push(cur);
    items
        .into_iter()
        .map(|i| i.trim().to_string())
        .filter(|i| !i.is_empty())
        .collect()
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    let Some(inner) = v.strip_prefix('"').and_then(|r| r.strip_suffix('"')) else {
        return v.to_string();
    };
    let mut out = String::new();
    let mut escaped = false;
    for ch in inner.chars() {
        if escaped {
            out.push(ch);
            escaped = false;
        } else if ch == '\\' {
            escaped = true;
        } else {
            out.push(ch);
        }
    }
    out
}

fn parse_param(item: &str) -> Option<(String, String)> {
    let (name, value) = item.split_once('=')?;
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    Some((name.to_ascii_lowercase(), unquote(value)))
}

/// Every challenge in a `WWW-Authenticate` value.
pub fn parse_challenges(header: &str) -> Vec<Challenge> {
    let mut out: Vec<Challenge> = Vec::new();
    for item in split_items(header) {
        // A new challenge starts with a scheme: a token not followed by `=`.
        let first_space = item.find(char::is_whitespace);
        let first_eq = item.find('=');
        let head = &item[..first_eq.unwrap_or(item.len())];
        let starts_challenge = first_eq.is_none() || head.trim_end().contains(char::is_whitespace);
        if starts_challenge {
            let (scheme, rest) = match first_space {
                Some(sp) => (&item[..sp], item[sp..].trim()),
                None => (item.as_str(), ""),
            };
            let mut c = Challenge {
                scheme: scheme.to_string(),
                params: HashMap::new(),
            };
            if let Some((k, v)) = parse_param(rest) {
                c.params.insert(k, v);
            }
            out.push(c);
        } else if let (Some(c), Some((k, v))) = (out.last_mut(), parse_param(&item)) {
            c.params.insert(k, v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_sdk_401() {
        let h = r#"Bearer error="invalid_token", error_description="Authentication required", resource_metadata="http://127.0.0.1:5/.well-known/oauth-protected-resource/mcp""#;
        let b = BearerChallenge::parse(h);
        assert_eq!(b.error.as_deref(), Some("invalid_token"));
        assert_eq!(
            b.resource_metadata.as_deref(),
            Some("http://127.0.0.1:5/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(b.scope, None);
    }

    #[test]
    fn several_challenges_quotes_and_escapes() {
        let h = r#"Basic realm="a, b", Bearer scope="read write", error="insufficient_scope", error_description="need \"write\"""#;
        let cs = parse_challenges(h);
        assert_eq!(cs.len(), 2, "{cs:?}");
        assert_eq!(cs[0].scheme, "Basic");
        assert_eq!(cs[0].params["realm"], "a, b");
        let b = BearerChallenge::parse(h);
        assert_eq!(b.scope.as_deref(), Some("read write"));
        assert!(b.is_insufficient_scope());
        assert_eq!(b.error_description.as_deref(), Some(r#"need "write""#));
    }

    #[test]
    fn bare_scheme_and_tokens() {
        assert_eq!(BearerChallenge::parse("Bearer"), BearerChallenge::default());
        let b = BearerChallenge::parse("bearer scope=mcp:tools,error=invalid_token");
        assert_eq!(b.scope.as_deref(), Some("mcp:tools"));
        assert_eq!(b.error.as_deref(), Some("invalid_token"));
        assert_eq!(BearerChallenge::parse(""), BearerChallenge::default());
    }
}
