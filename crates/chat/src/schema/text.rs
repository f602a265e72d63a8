//! The words the normalizer writes: what it cannot keep as a keyword is folded into the
//! description (defaults, non-string allowed values, a free-form map's value schema),
//! and how its notes name the place in the schema.

use serde_json::Value;

use super::Obj;
use super::node::Ctx;

/// The place a note is about: the schema path, or "(top level)".
pub(super) fn p(path: &str) -> &str {
    if path.is_empty() { "(top level)" } else { path }
}

pub(super) fn short_json(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Appends a sentence to the description (or makes it the description).
pub(super) fn append_description(o: &mut Obj, extra: &str) {
    let merged = match o.get("description").and_then(Value::as_str) {
        Some(d) if !d.trim().is_empty() => {
            let d = d.trim_end();
            if d.ends_with(['.', '!', '?', ')', ':']) {
                format!("{d} {extra}")
            } else {
                format!("{d}. {extra}")
            }
        }
        _ => extra.to_string(),
    };
    o.insert("description".into(), Value::String(merged));
}

/// A one-line description of a normalized schema, for values that can only be described
/// (the values of a free-form map).
pub(super) fn summarize(s: &Obj) -> String {
    let mut out = match s.get("anyOf").and_then(Value::as_array) {
        Some(branches) => branches
            .iter()
            .filter_map(Value::as_object)
            .map(summarize)
            .collect::<Vec<_>>()
            .join(" or "),
        None => s
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("any")
            .to_string(),
    };
    if let Some(Value::Array(vals)) = s.get("enum") {
        let vals: Vec<String> = vals.iter().map(short_json).collect();
        out.push_str(&format!(", one of: {}", vals.join(", ")));
    }
    if let Some(d) = s.get("description").and_then(Value::as_str) {
        out.push_str(&format!(" {d}"));
    }
    out
}

impl Ctx<'_> {
    /// Non-string allowed values cannot be an `enum`: list them in the description.
    pub(super) fn values_to_description(
        &mut self,
        values: Option<Vec<Value>>,
        out: &mut Obj,
        path: &str,
    ) {
        let Some(vals) = values else { return };
        if vals.is_empty() {
            return;
        }
        let list: Vec<String> = vals.iter().map(Value::to_string).collect();
        let text = if list.len() == 1 {
            format!("(must be {})", list[0])
        } else {
            format!("(allowed values: {})", list.join(", "))
        };
        append_description(out, &text);
        self.note(format!(
            "{}: non-string enum/const moved to the description",
            p(path)
        ));
    }

    /// A short `default` goes into the description unless it already speaks of one.
    pub(super) fn fold_default(&mut self, m: &Obj, out: &mut Obj) {
        let Some(d) = m.get("default") else { return };
        if d.is_null() {
            return;
        }
        let text = d.to_string();
        if text.len() > 80 {
            return;
        }
        let mentions = out
            .get("description")
            .and_then(Value::as_str)
            .is_some_and(|s| s.to_ascii_lowercase().contains("default"));
        if !mentions {
            append_description(out, &format!("(default: {text})"));
        }
    }
}
