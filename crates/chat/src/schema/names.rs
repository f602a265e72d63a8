//! Property names Gemini accepts: invalid names sanitized to `[A-Za-z0-9_]` and made
//! unique (`Ctx::property_names`), and the [`Renames`] table that maps the model's
//! arguments back to the server's names ([`Normalized::restore_args`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{Map, Value};
use switchboard_model::{MAX_PROPERTY_NAME_LEN, is_valid_property_name};

use super::Normalized;
use super::node::Ctx;
use super::text::p;

impl Normalized {
    /// Maps the model's arguments back to the server's property names (identity when no
    /// property had to be renamed).
    pub fn restore_args(&self, args: &Value) -> Value {
        if self.renames.is_empty() {
            return args.clone();
        }
        self.renames.restore(args)
    }
}

/// Property renames for one schema level: model-facing name → the server's name, plus
/// renames inside each property and inside array items.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Renames {
    props: BTreeMap<String, PropRename>,
    items: Option<Box<Renames>>,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct PropRename {
    original: String,
    inner: Renames,
}

impl Renames {
    /// Whether nothing at all was renamed.
    pub fn is_empty(&self) -> bool {
        self.props.is_empty() && self.items.as_ref().is_none_or(|i| i.is_empty())
    }

    /// The server's name for a top-level model-facing property name, if it was renamed.
    pub fn original_of(&self, model_name: &str) -> Option<&str> {
        self.props
            .get(model_name)
            .filter(|p| p.original != model_name)
            .map(|p| p.original.as_str())
    }

    /// Records property `original`, sent to the model as `model_name`, with the renames
    /// inside it.
    pub(super) fn insert_prop(&mut self, model_name: String, original: String, inner: Renames) {
        self.props
            .insert(model_name, PropRename { original, inner });
    }

    /// Records the renames inside array items.
    pub(super) fn set_items(&mut self, items: Renames) {
        self.items = Some(Box::new(items));
    }

    fn restore(&self, v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut out = Map::with_capacity(m.len());
                for (k, val) in m {
                    match self.props.get(k) {
                        Some(p) => {
                            out.insert(p.original.clone(), p.inner.restore(val));
                        }
                        None => {
                            out.insert(k.clone(), val.clone());
                        }
                    }
                }
                Value::Object(out)
            }
            Value::Array(a) => match &self.items {
                Some(items) => Value::Array(a.iter().map(|x| items.restore(x)).collect()),
                None => v.clone(),
            },
            _ => v.clone(),
        }
    }

    /// Adds `other`'s renames (the first one recorded for a name wins).
    pub(super) fn merge(&mut self, other: Renames) {
        for (k, p) in other.props {
            match self.props.get_mut(&k) {
                Some(existing) if existing.original == p.original => existing.inner.merge(p.inner),
                Some(_) => {}
                None => {
                    self.props.insert(k, p);
                }
            }
        }
        if let Some(items) = other.items {
            match &mut self.items {
                Some(mine) => mine.merge(*items),
                None => self.items = Some(items),
            }
        }
    }
}

impl Ctx<'_> {
    /// The model-facing name of every property in `src`: valid ones keep theirs; the
    /// others are sanitized and made unique.
    pub(super) fn property_names<'s>(
        &mut self,
        src: &'s Map<String, Value>,
        path: &str,
    ) -> HashMap<&'s str, String> {
        let mut taken: BTreeSet<String> = src
            .keys()
            .filter(|k| is_valid_property_name(k))
            .cloned()
            .collect();
        let mut new_names: HashMap<&str, String> = HashMap::new();
        for k in src.keys() {
            if is_valid_property_name(k) {
                new_names.insert(k.as_str(), k.clone());
                continue;
            }
            let base = sanitize_property_name(k);
            let mut candidate = base.clone();
            let mut n = 2;
            while taken.contains(&candidate) {
                let suffix = format!("_{n}");
                let mut b = base.clone();
                b.truncate(MAX_PROPERTY_NAME_LEN - suffix.len());
                candidate = format!("{b}{suffix}");
                n += 1;
            }
            self.note(format!(
                "{}: property `{k}` renamed to `{candidate}`",
                p(path)
            ));
            taken.insert(candidate.clone());
            new_names.insert(k.as_str(), candidate);
        }
        new_names
    }
}

fn sanitize_property_name(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        s.push('_');
    }
    s.truncate(MAX_PROPERTY_NAME_LEN);
    s
}
