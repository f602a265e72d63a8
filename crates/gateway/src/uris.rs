//! Downstream resource URIs and where a `resources/read` goes.
//!
//! Scheme:
//! - a resource URI offered by exactly one server is served unchanged, so links inside
//!   tool results (`resource_link`, embedded resources, MCP Apps' `ui://` URIs) keep
//!   working;
//! - a URI offered by two or more servers, or one that itself starts with [`PREFIX`], is
//!   served as `switchboard-gateway://{server}/{upstream URI}` (the server name
//!   percent-encoded, the upstream URI appended as is) for every one of them;
//! - a resource template is served unchanged unless another server has a template whose
//!   literal start (the text before its first `{`) is a prefix of its own, or the
//!   other way round (their URIs could overlap); then every such template gets the same
//!   prefix.
//!
//! Trust rule (a server must not receive, and answer with forged content, the reads of
//! another server's URIs): a URI goes to the server that listed it or returned it, and
//! a template never captures another server's **origin** ([`origin`]: scheme and
//! authority, `a://doc` of `a://doc/1`; `urn:` for a URI without `//`). A server owns
//! an origin when it lists a resource there or has a template whose literal start fixes
//! it (`a://doc/{id}` owns `a://doc`; `{+u}` and `a://{host}/x` own nothing). A read is
//! routed by, in order:
//! 1. the prefix;
//! 2. the exact URI of a listed resource (listed by several servers: refused, naming
//!    the qualified URIs);
//! 3. the server(s) that returned it ([`Returned`]: every `uri` in a result relayed from
//!    that server, bounded per server, oldest dropped; returned by several: refused);
//! 4. the one server whose unprefixed template matches, counting only templates of
//!    servers that are the URI's origin's only owner or where it has none;
//! 5. the owners of the URI's origin; with none, the servers whose listed URIs or
//!    templates use the same scheme.
//!
//! Anything else is an error naming the candidates ([`Unroutable`]): ambiguity is
//! refused, never guessed. [`UriTable::belongs`] applies the same rule to a tool's MCP
//! Apps resource (`_meta.ui.resourceUri`, checked in `crate::catalog`).
//!
//! This module must not know about connections: it is a pure function of the lists
//! (and of the [`Returned`] table its caller keeps).

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use serde_json::Value;

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

/// An RFC 3986 scheme: a letter, then letters, digits, `+`, `-` or `.`.
fn valid_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// A URI's origin, as ownership is decided by: `scheme://authority` (both lower-cased)
/// for a URI with `//` after its scheme, else `scheme:`; `None` without a scheme.
pub fn origin(uri: &str) -> Option<String> {
    let (scheme, rest) = uri.split_once(':')?;
    if !valid_scheme(scheme) {
        return None;
    }
    let scheme = scheme.to_ascii_lowercase();
    Some(match rest.strip_prefix("//") {
        Some(after) => {
            let end = after.find(['/', '?', '#']).unwrap_or(after.len());
            format!("{scheme}://{}", after[..end].to_ascii_lowercase())
        }
        None => format!("{scheme}:"),
    })
}

/// The origin every URI a template can match has, when its literal start fixes it
/// (`a://doc/{id}`, `urn:x:{id}`); `None` when a variable may change it (`{+u}`,
/// `a://{host}/x`, `a:{+rest}`).
pub fn template_origin(template: &str) -> Option<String> {
    let lit = literal_start(template);
    if lit.len() == template.len() {
        return origin(template);
    }
    let (scheme, rest) = lit.split_once(':')?;
    if !valid_scheme(scheme) {
        return None;
    }
    match rest.strip_prefix("//") {
        Some(after) if after.contains(['/', '?', '#']) => origin(lit),
        Some(_) => None,
        // `a:` or `a:/` followed by a variable could still become `a://…`.
        None if rest.is_empty() || rest == "/" => None,
        None => origin(lit),
    }
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
    /// Upstream URI → the servers listing it.
    listed: HashMap<String, BTreeSet<String>>,
    /// (server, upstream template) → downstream template.
    template_out: HashMap<(String, String), String>,
    /// Unprefixed templates: (server, template).
    plain_templates: Vec<(String, String)>,
    /// Every template: (server, template).
    templates: Vec<(String, String)>,
    /// Origin → the servers owning it (see the module's doc).
    owners: HashMap<String, BTreeSet<String>>,
    /// Scheme → servers offering a resource or template with it.
    schemes: HashMap<String, BTreeSet<String>>,
}

/// Why a read could not be routed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unroutable {
    /// No server offers it.
    Unknown,
    /// Several servers could; the qualified URIs to use instead.
    Ambiguous(Vec<String>),
}

fn one_of<'a>(servers: impl IntoIterator<Item = &'a str>, uri: &str) -> Result<String, Unroutable> {
    let mut servers: Vec<&str> = servers.into_iter().collect();
    servers.sort_unstable();
    servers.dedup();
    match servers.as_slice() {
        [] => Err(Unroutable::Unknown),
        [one] => Ok(one.to_string()),
        many => Err(Unroutable::Ambiguous(
            many.iter().map(|s| qualify(s, uri)).collect(),
        )),
    }
}

impl UriTable {
    /// Builds the table from every connected server's resources and templates.
    pub fn build(resources: &[Offered<'_>], templates: &[Offered<'_>]) -> Self {
        let mut t = UriTable::default();
        for r in resources {
            t.listed
                .entry(r.uri.to_string())
                .or_default()
                .insert(r.server.to_string());
        }
        for r in resources {
            let shared = t.listed.get(r.uri).is_some_and(|o| o.len() > 1);
            // A listed URI that looks qualified would be routed by its prefix instead.
            let out = if shared || r.uri.starts_with(PREFIX) {
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
            let overlaps = tpl.uri.starts_with(PREFIX)
                || templates.iter().any(|o| {
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
            t.templates
                .push((tpl.server.to_string(), tpl.uri.to_string()));
        }
        let owned = resources
            .iter()
            .map(|r| (r.server, origin(r.uri)))
            .chain(templates.iter().map(|o| (o.server, template_origin(o.uri))));
        for (server, key) in owned {
            if let Some(key) = key {
                t.owners.entry(key).or_default().insert(server.to_string());
            }
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

    /// The servers owning `uri`'s origin (empty: none, or no origin).
    pub fn owners_of(&self, uri: &str) -> Vec<&str> {
        origin(uri)
            .and_then(|o| self.owners.get(&o))
            .map(|s| s.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// Whether a template of `server` may capture `uri`: no other server owns its origin.
    fn may_capture(&self, server: &str, uri: &str) -> bool {
        self.owners_of(uri).iter().all(|o| *o == server)
    }

    /// The server and upstream URI a downstream `resources/read` goes to, with no URI
    /// remembered as returned (the team gateway keeps nothing between requests).
    pub fn route(&self, uri: &str) -> Result<(String, String), Unroutable> {
        self.route_with(uri, &Returned::default())
    }

    /// The server and upstream URI a downstream `resources/read` goes to (the order is
    /// in the module's doc), `returned` saying which server returned which URI.
    pub fn route_with(
        &self,
        uri: &str,
        returned: &Returned,
    ) -> Result<(String, String), Unroutable> {
        if let Some(pair) = split(uri) {
            return Ok(pair);
        }
        if let Some((s, u)) = self.resources.get(uri) {
            return Ok((s.clone(), u.clone()));
        }
        if let Some(servers) = self.listed.get(uri) {
            return one_of(servers.iter().map(String::as_str), uri).map(|s| (s, uri.to_string()));
        }
        let by = returned.servers_of(uri);
        if !by.is_empty() {
            return one_of(by, uri).map(|s| (s, uri.to_string()));
        }
        let by_template: Vec<&str> = self
            .plain_templates
            .iter()
            .filter(|(s, tpl)| template_matches(tpl, uri) && self.may_capture(s, uri))
            .map(|(s, _)| s.as_str())
            .collect();
        let candidates = if !by_template.is_empty() {
            by_template
        } else {
            let owners = self.owners_of(uri);
            if !owners.is_empty() {
                owners
            } else {
                scheme(uri)
                    .and_then(|s| self.schemes.get(s))
                    .map(|set| set.iter().map(String::as_str).collect())
                    .unwrap_or_default()
            }
        };
        one_of(candidates, uri).map(|s| (s, uri.to_string()))
    }

    /// Whether `uri` is `server`'s own resource: listed by it, or matching one of its
    /// templates whose capture the trust rule allows (no other server owns the origin).
    pub fn belongs(&self, server: &str, uri: &str) -> bool {
        self.resource_out
            .contains_key(&(server.to_string(), uri.to_string()))
            || (self.may_capture(server, uri)
                && self
                    .templates
                    .iter()
                    .any(|(s, tpl)| s == server && template_matches(tpl, uri)))
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

/// At most this many returned URIs remembered per server (the oldest is dropped first),
/// so one server cannot push another's out.
pub const MAX_RETURNED_PER_SERVER: usize = 1024;
/// A returned URI longer than this is not remembered.
pub const MAX_RETURNED_URI_BYTES: usize = 2048;
/// At most this many URIs are taken from one result.
pub const MAX_URIS_PER_RESULT: usize = 64;

/// The URIs each server returned (in a tool result, a read, a prompt), for
/// [`UriTable::route_with`]: bounded per server, oldest dropped.
#[derive(Debug, Clone, Default)]
pub struct Returned {
    by_server: HashMap<String, (VecDeque<String>, HashSet<String>)>,
}

impl Returned {
    /// Remembers that `server` returned `uri`.
    pub fn record(&mut self, server: &str, uri: &str) {
        if uri.is_empty() || uri.len() > MAX_RETURNED_URI_BYTES {
            return;
        }
        let (order, set) = self.by_server.entry(server.to_string()).or_default();
        if !set.insert(uri.to_string()) {
            return;
        }
        order.push_back(uri.to_string());
        while order.len() > MAX_RETURNED_PER_SERVER {
            if let Some(old) = order.pop_front() {
                set.remove(&old);
            }
        }
    }

    /// The servers that returned `uri`.
    pub fn servers_of(&self, uri: &str) -> Vec<&str> {
        self.by_server
            .iter()
            .filter(|(_, (_, set))| set.contains(uri))
            .map(|(s, _)| s.as_str())
            .collect()
    }

    /// How many URIs are remembered for `server`.
    pub fn len_of(&self, server: &str) -> usize {
        self.by_server.get(server).map_or(0, |(o, _)| o.len())
    }
}

/// The URIs a result names: every string under a `uri` key (a `resource_link`, an
/// embedded resource, a read's contents), at most [`MAX_URIS_PER_RESULT`], looked for
/// at most 32 levels deep.
pub fn uris_in(result: &Value) -> Vec<String> {
    fn go(v: &Value, depth: u32, out: &mut Vec<String>) {
        if depth == 0 || out.len() >= MAX_URIS_PER_RESULT {
            return;
        }
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    match v {
                        Value::String(s) if k == "uri" => {
                            if out.len() < MAX_URIS_PER_RESULT {
                                out.push(s.clone());
                            }
                        }
                        _ => go(v, depth - 1, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| go(i, depth - 1, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    go(result, 32, &mut out);
    out
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

    #[test]
    fn a_catch_all_template_never_captures_another_servers_origin() {
        // a lists a://doc/1; b offers `{+u}` and answers every read (issue #26).
        let t = UriTable::build(&[o("a", "a://doc/1")], &[o("b", "{+u}")]);
        let mut returned = Returned::default();
        // Listed: a's.
        assert_eq!(t.route("a://doc/1"), Ok(("a".into(), "a://doc/1".into())));
        // Not listed, but in a's origin: a's, not b's template.
        assert_eq!(t.route("a://doc/2"), Ok(("a".into(), "a://doc/2".into())));
        // Returned by a (a `resource_link`) in an origin a does not list: a's.
        assert_eq!(t.route("x://made/1"), Ok(("b".into(), "x://made/1".into())));
        returned.record("a", "x://made/1");
        assert_eq!(
            t.route_with("x://made/1", &returned),
            Ok(("a".into(), "x://made/1".into()))
        );
        // An origin nobody owns: the template's.
        assert_eq!(t.route("c://x"), Ok(("b".into(), "c://x".into())));
        // A `{scheme}://…` template is no different.
        let t = UriTable::build(&[o("a", "a://doc/1")], &[o("b", "{s}://{+rest}")]);
        assert_eq!(t.route("a://doc/9"), Ok(("a".into(), "a://doc/9".into())));
        // Nor is one naming a's scheme with a variable authority.
        let t = UriTable::build(&[o("a", "a://doc/1")], &[o("b", "a://{host}/{+p}")]);
        assert_eq!(t.route("a://doc/9"), Ok(("a".into(), "a://doc/9".into())));
        assert_eq!(t.route("a://else/9"), Ok(("b".into(), "a://else/9".into())));
    }

    #[test]
    fn an_origin_owned_by_two_servers_is_refused_not_guessed() {
        let t = UriTable::build(
            &[o("a", "file:///home/a.txt")],
            &[o("b", "file:///{+path}")],
        );
        assert!(matches!(
            t.route("file:///home/b.txt"),
            Err(Unroutable::Ambiguous(v)) if v.len() == 2
        ));
        let qb = qualify("b", "file:///home/b.txt");
        assert_eq!(t.route(&qb), Ok(("b".into(), "file:///home/b.txt".into())));
        // Returned by both: refused.
        let mut returned = Returned::default();
        returned.record("a", "z://1");
        returned.record("b", "z://1");
        assert!(matches!(
            t.route_with("z://1", &returned),
            Err(Unroutable::Ambiguous(_))
        ));
        // A listed URI beats a returned one.
        returned.record("b", "file:///home/a.txt");
        assert_eq!(
            t.route_with("file:///home/a.txt", &returned),
            Ok(("a".into(), "file:///home/a.txt".into()))
        );
    }

    #[test]
    fn a_listed_uri_that_looks_qualified_is_qualified() {
        let forged = qualify("b", "b://secret");
        let t = UriTable::build(&[o("a", &forged)], &[]);
        let out = t.resource_uri("a", &forged).unwrap();
        assert_ne!(out, forged);
        assert_eq!(t.route(out), Ok(("a".into(), forged.clone())));
    }

    #[test]
    fn belongs_only_to_the_lister_or_a_template_allowed_to_capture() {
        let t = UriTable::build(
            &[o("a", "ui://a/app.html")],
            &[o("b", "{+u}"), o("c", "ui://c/{name}")],
        );
        assert!(t.belongs("a", "ui://a/app.html"));
        assert!(!t.belongs("b", "ui://a/app.html"));
        assert!(t.belongs("b", "ui://b/app.html"));
        assert!(t.belongs("c", "ui://c/app.html"));
        assert!(!t.belongs("b", "ui://c/app.html"));
    }

    #[test]
    fn origins() {
        assert_eq!(origin("A://Doc/1").as_deref(), Some("a://doc"));
        assert_eq!(origin("file:///x").as_deref(), Some("file://"));
        assert_eq!(origin("urn:isbn:1").as_deref(), Some("urn:"));
        assert_eq!(origin("no scheme"), None);
        assert_eq!(template_origin("a://doc/{id}").as_deref(), Some("a://doc"));
        assert_eq!(template_origin("a://{host}/x"), None);
        assert_eq!(template_origin("{+u}"), None);
        assert_eq!(template_origin("a:{+rest}"), None);
        assert_eq!(template_origin("urn:x:{id}").as_deref(), Some("urn:"));
    }

    #[test]
    fn returned_uris_are_bounded_per_server_oldest_first() {
        let mut r = Returned::default();
        for i in 0..MAX_RETURNED_PER_SERVER + 10 {
            r.record("b", &format!("b://{i}"));
        }
        r.record("a", "a://kept");
        r.record("a", &"x".repeat(MAX_RETURNED_URI_BYTES + 1));
        assert_eq!(r.len_of("b"), MAX_RETURNED_PER_SERVER);
        assert!(r.servers_of("b://0").is_empty());
        assert_eq!(
            r.servers_of(&format!("b://{}", MAX_RETURNED_PER_SERVER + 9)),
            ["b"]
        );
        assert_eq!(r.servers_of("a://kept"), ["a"]);
        assert_eq!(r.len_of("a"), 1);
    }

    #[test]
    fn uris_in_a_result() {
        let v = serde_json::json!({"content": [
            {"type": "resource_link", "uri": "a://1", "name": "x"},
            {"type": "resource", "resource": {"uri": "a://2", "text": "t"}},
            {"type": "text", "text": "a://3"}
        ]});
        assert_eq!(uris_in(&v), ["a://1", "a://2"]);
        let many = serde_json::json!({"contents": (0..500).map(|i| serde_json::json!({"uri": format!("u://{i}")})).collect::<Vec<_>>()});
        assert_eq!(uris_in(&many).len(), MAX_URIS_PER_RESULT);
    }
}
