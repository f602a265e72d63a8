//! Downstream resource URIs and where a `resources/read` goes.
//!
//! Scheme:
//! - a resource URI offered by exactly one server is served unchanged, so links inside
//!   tool results (`resource_link`, embedded resources, MCP Apps' `ui://` URIs) keep
//!   working;
//! - a URI offered by two or more servers is served as
//!   `switchboard-gateway://{server}/{upstream URI}` (the server name percent-encoded,
//!   the upstream URI appended as is) for every one of them;
//! - a resource template is served unchanged unless another server has a template whose
//!   literal start (the text before its first `{`) is a prefix of its own, or the
//!   other way round (their URIs could overlap); then every such template gets the same
//!   prefix;
//! - a read is routed by, in order: the prefix; the exact URI of a listed resource; the
//!   one server whose unprefixed template matches; the one server whose listed URIs or
//!   templates use the same scheme. Anything else is an error naming the candidates.
//!
//! This module must not know about connections: it is a pure function of the lists.

use std::collections::{HashMap, HashSet};

/// The prefix of a server-qualified URI.
pub const PREFIX: &str = "switchboard-gateway://";

fn encode(server: &str) -> String {
    let mut out = String::new();
    for b in server.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `switchboard-gateway://{server}/{uri}`.
pub fn qualify(server: &str, uri: &str) -> String {
    format!("{PREFIX}{}/{uri}", encode(server))
}

/// The server and upstream URI of a qualified URI.
pub fn split(uri: &str) -> Option<(String, String)> {
    let rest = uri.strip_prefix(PREFIX)?;
    let (server, upstream) = rest.split_once('/')?;
    Some((decode(server)?, upstream.to_string()))
}

fn scheme(uri: &str) -> Option<&str> {
    uri.split_once(':').map(|(s, _)| s)
}

fn literal_start(template: &str) -> &str {
    template.split('{').next().unwrap_or(template)
}

/// Whether `uri` matches an RFC 6570 template: `{var}` matches text without `/`, `?`
/// or `#`; `{+var}` and `{#var}` match anything; `{?a,b}` and `{&a}` match the rest.
pub fn template_matches(template: &str, uri: &str) -> bool {
    enum Part<'a> {
        Lit(&'a str),
        Var { any: bool },
    }
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            parts.push(Part::Lit(&rest[..open]));
        }
        let Some(close) = rest[open..].find('}') else {
            parts.push(Part::Lit(&rest[open..]));
            rest = "";
            break;
        };
        let expr = &rest[open + 1..open + close];
        parts.push(Part::Var {
            any: expr.starts_with(['+', '#', '?', '&']),
        });
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Lit(rest));
    }
    fn go(parts: &[Part<'_>], s: &str, budget: &mut u32) -> bool {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        match parts.split_first() {
            None => s.is_empty(),
            Some((Part::Lit(l), more)) => s.strip_prefix(l).is_some_and(|r| go(more, r, budget)),
            Some((Part::Var { any }, more)) => {
                let stop = if *any {
                    s.len()
                } else {
                    s.find(['/', '?', '#']).unwrap_or(s.len())
                };
                (0..=stop)
                    .rev()
                    .filter(|&i| s.is_char_boundary(i))
                    .any(|i| go(more, &s[i..], budget))
            }
        }
    }
    // Bounded work for hostile templates and URIs.
    let mut budget = 10_000;
    go(&parts, uri, &mut budget)
}

/// One upstream item as the table sees it.
#[derive(Debug, Clone)]
pub struct Offered<'a> {
    pub server: &'a str,
    pub uri: &'a str,
}

/// Where a read goes, and the URIs served downstream.
#[derive(Debug, Clone, Default)]
pub struct UriTable {
    /// Downstream URI → (server, upstream URI), for listed resources.
    resources: HashMap<String, (String, String)>,
    /// (server, upstream URI) → downstream URI.
    resource_out: HashMap<(String, String), String>,
    /// (server, upstream template) → downstream template.
    template_out: HashMap<(String, String), String>,
    /// Unprefixed templates: (server, template).
    plain_templates: Vec<(String, String)>,
    /// Scheme → servers offering a resource or template with it.
    schemes: HashMap<String, HashSet<String>>,
}

/// Why a read could not be routed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unroutable {
    /// No server offers it.
    Unknown,
    /// Several servers could; the qualified URIs to use instead.
    Ambiguous(Vec<String>),
}

impl UriTable {
    /// Builds the table from every connected server's resources and templates.
    pub fn build(resources: &[Offered<'_>], templates: &[Offered<'_>]) -> Self {
        let mut t = UriTable::default();
        let mut owners: HashMap<&str, HashSet<&str>> = HashMap::new();
        for r in resources {
            owners.entry(r.uri).or_default().insert(r.server);
        }
        for r in resources {
            let shared = owners.get(r.uri).is_some_and(|o| o.len() > 1);
            let out = if shared {
                qualify(r.server, r.uri)
            } else {
                r.uri.to_string()
            };
            t.resources
                .insert(out.clone(), (r.server.to_string(), r.uri.to_string()));
            t.resource_out
                .insert((r.server.to_string(), r.uri.to_string()), out);
        }
        for tpl in templates {
            let start = literal_start(tpl.uri);
            let overlaps = templates.iter().any(|o| {
                o.server != tpl.server && {
                    let other = literal_start(o.uri);
                    other.starts_with(start) || start.starts_with(other)
                }
            });
            let out = if overlaps {
                qualify(tpl.server, tpl.uri)
            } else {
                t.plain_templates
                    .push((tpl.server.to_string(), tpl.uri.to_string()));
                tpl.uri.to_string()
            };
            t.template_out
                .insert((tpl.server.to_string(), tpl.uri.to_string()), out);
        }
        for o in resources.iter().chain(templates) {
            if let Some(s) = scheme(o.uri) {
                t.schemes
                    .entry(s.to_string())
                    .or_default()
                    .insert(o.server.to_string());
            }
        }
        t
    }

    /// The downstream URI of a listed resource.
    pub fn resource_uri(&self, server: &str, uri: &str) -> Option<&str> {
        self.resource_out
            .get(&(server.to_string(), uri.to_string()))
            .map(String::as_str)
    }

    /// The downstream form of a template.
    pub fn template_uri(&self, server: &str, template: &str) -> Option<&str> {
        self.template_out
            .get(&(server.to_string(), template.to_string()))
            .map(String::as_str)
    }

    /// The server and upstream URI a downstream `resources/read` goes to.
    pub fn route(&self, uri: &str) -> Result<(String, String), Unroutable> {
        if let Some(pair) = split(uri) {
            return Ok(pair);
        }
        if let Some((s, u)) = self.resources.get(uri) {
            return Ok((s.clone(), u.clone()));
        }
        let mut servers: Vec<&str> = self
            .plain_templates
            .iter()
            .filter(|(_, tpl)| template_matches(tpl, uri))
            .map(|(s, _)| s.as_str())
            .collect();
        servers.sort();
        servers.dedup();
        if servers.is_empty()
            && let Some(set) = scheme(uri).and_then(|s| self.schemes.get(s))
        {
            servers = set.iter().map(String::as_str).collect();
            servers.sort();
        }
        match servers.as_slice() {
            [] => Err(Unroutable::Unknown),
            [one] => Ok((one.to_string(), uri.to_string())),
            many => Err(Unroutable::Ambiguous(
                many.iter().map(|s| qualify(s, uri)).collect(),
            )),
        }
    }

    /// The server a template completion (`ref/resource`) goes to: the downstream
    /// template as served, mapped back.
    pub fn route_template(&self, template: &str) -> Option<(String, String)> {
        if let Some(pair) = split(template) {
            return Some(pair);
        }
        self.template_out
            .iter()
            .find(|(_, out)| out.as_str() == template)
            .map(|((s, t), _)| (s.clone(), t.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o<'a>(server: &'a str, uri: &'a str) -> Offered<'a> {
        Offered { server, uri }
    }

    #[test]
    fn unique_uris_stay_and_shared_ones_are_qualified() {
        let t = UriTable::build(
            &[
                o("demo", "demo://readme"),
                o("a", "file:///x"),
                o("b", "file:///x"),
            ],
            &[],
        );
        assert_eq!(
            t.resource_uri("demo", "demo://readme"),
            Some("demo://readme")
        );
        let qa = t.resource_uri("a", "file:///x").unwrap();
        assert_eq!(qa, "switchboard-gateway://a/file:///x");
        assert_eq!(t.route(qa), Ok(("a".into(), "file:///x".into())));
        assert_eq!(
            t.route("demo://readme"),
            Ok(("demo".into(), "demo://readme".into()))
        );
        assert!(matches!(t.route("file:///x"), Err(Unroutable::Ambiguous(v)) if v.len() == 2));
    }

    #[test]
    fn server_names_with_slashes_round_trip() {
        let q = qualify("my/srv %", "x://y/z");
        assert_eq!(split(&q), Some(("my/srv %".into(), "x://y/z".into())));
    }

    #[test]
    fn templates_route_reads_and_overlapping_ones_are_qualified() {
        let t = UriTable::build(
            &[],
            &[
                o("demo", "demo://greeting/{name}"),
                o("py", "py://item/{id}"),
                o("a", "notes://{id}"),
                o("b", "notes://shared/{id}"),
            ],
        );
        assert_eq!(
            t.template_uri("demo", "demo://greeting/{name}"),
            Some("demo://greeting/{name}")
        );
        assert_eq!(
            t.route("demo://greeting/Ada"),
            Ok(("demo".into(), "demo://greeting/Ada".into()))
        );
        assert_eq!(
            t.route("py://item/7"),
            Ok(("py".into(), "py://item/7".into()))
        );
        let qa = t.template_uri("a", "notes://{id}").unwrap();
        assert!(qa.starts_with(PREFIX));
        assert_eq!(
            t.route_template(qa),
            Some(("a".into(), "notes://{id}".into()))
        );
        assert!(matches!(
            t.route("notes://1"),
            Err(Unroutable::Ambiguous(_))
        ));
        assert_eq!(t.route("nothing://1"), Err(Unroutable::Unknown));
    }

    #[test]
    fn template_matching() {
        assert!(template_matches("a://{x}/b", "a://1/b"));
        assert!(!template_matches("a://{x}/b", "a://1/2/b"));
        assert!(template_matches("a://{+x}/b", "a://1/2/b"));
        assert!(template_matches("a://x{?q,r}", "a://x?q=1&r=2"));
        let hostile = "{a}{b}{c}{d}{e}{f}{g}{h}!".to_string();
        assert!(!template_matches(&hostile, &"z".repeat(5000)));
    }
}
