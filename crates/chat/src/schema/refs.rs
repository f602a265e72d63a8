//! Local `$ref`s: resolving `#`, JSON pointers (`#/$defs/X`, escaped tokens) and
//! `#anchor`s against the document root, inlining the target with the `$ref`'s siblings
//! on top, and cutting a `$ref` that is open [`MAX_REF_REPEAT`] times on the current
//! path (recursion) to a bare schema. Nothing remote is ever fetched.

use serde_json::Value;
use switchboard_model::ACCEPTED_TYPES;

use super::keywords::copy_text;
use super::names::Renames;
use super::node::Ctx;
use super::text::p;
use super::{MAX_REF_REPEAT, Obj};

impl Ctx<'_> {
    /// A node with a `$ref`: the resolved target, normalized (or a bare schema, or a loosened
    /// node when it does not resolve).
    pub(super) fn reference(
        &mut self,
        m: &Obj,
        r: &Value,
        depth: usize,
        path: &str,
    ) -> (Obj, Renames) {
        let Some(r) = r.as_str() else {
            self.note(format!("{}: non-string $ref ignored", p(path)));
            let mut rest = m.clone();
            rest.remove("$ref");
            return self.node(&Value::Object(rest), depth + 1, path);
        };
        let Some(target) = resolve_local(self.root, r) else {
            self.note(format!(
                "{}: $ref `{r}` is not a local reference that resolves; loosened",
                p(path)
            ));
            let mut o = Obj::new();
            copy_text(m, &mut o);
            return (o, Renames::default());
        };
        let open = self.ref_stack.iter().filter(|x| x.as_str() == r).count();
        if open >= MAX_REF_REPEAT {
            self.note(format!(
                "{}: recursive $ref `{r}` cut to a bare schema",
                p(path)
            ));
            let ty = target
                .get("type")
                .and_then(Value::as_str)
                .filter(|t| ACCEPTED_TYPES.contains(t))
                .unwrap_or("object");
            let desc = m.get("description").or_else(|| target.get("description"));
            return (self.bare(ty, desc), Renames::default());
        }
        let merged = with_siblings(target, m);
        self.ref_stack.push(r.to_string());
        let out = self.node(&merged, depth + 1, path);
        self.ref_stack.pop();
        out
    }
}

/// The target, with the `$ref`'s siblings taking precedence (a non-object target gives
/// way to the siblings when there are any).
fn with_siblings(target: &Value, m: &Obj) -> Value {
    match target {
        Value::Object(t) => {
            let mut t = t.clone();
            for (k, v) in m {
                if k != "$ref" {
                    t.insert(k.clone(), v.clone());
                }
            }
            Value::Object(t)
        }
        other => {
            if m.len() > 1 {
                let mut rest = m.clone();
                rest.remove("$ref");
                Value::Object(rest)
            } else {
                other.clone()
            }
        }
    }
}

/// Resolves a local reference against the document root.
fn resolve_local<'v>(root: &'v Value, reference: &str) -> Option<&'v Value> {
    let frag = reference.strip_prefix('#')?;
    if frag.is_empty() {
        return Some(root);
    }
    if let Some(path) = frag.strip_prefix('/') {
        let mut cur = root;
        for tok in path.split('/') {
            let tok = unescape_pointer_token(tok);
            cur = match cur {
                Value::Object(m) => m.get(&tok)?,
                Value::Array(a) => a.get(tok.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(cur)
    } else {
        find_anchor(root, frag)
    }
}

/// Decodes one JSON-pointer token (`~1` → `/`, `~0` → `~`, percent-escapes).
fn unescape_pointer_token(tok: &str) -> String {
    let mut bytes = Vec::with_capacity(tok.len());
    let raw = tok.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' && i + 2 < raw.len() {
            let hex = std::str::from_utf8(&raw[i + 1..i + 3]).ok();
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                bytes.push(b);
                i += 3;
                continue;
            }
        }
        bytes.push(raw[i]);
        i += 1;
    }
    String::from_utf8_lossy(&bytes)
        .replace("~1", "/")
        .replace("~0", "~")
}

fn find_anchor<'v>(v: &'v Value, anchor: &str) -> Option<&'v Value> {
    match v {
        Value::Object(m) => {
            if m.get("$anchor").and_then(Value::as_str) == Some(anchor) {
                return Some(v);
            }
            m.values().find_map(|c| find_anchor(c, anchor))
        }
        Value::Array(a) => a.iter().find_map(|c| find_anchor(c, anchor)),
        _ => None,
    }
}
