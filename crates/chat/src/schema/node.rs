//! The walker: [`Ctx::node`] normalizes one schema node and recurses. It first handles
//! what replaces the node (the size cut, `$ref`, `allOf`, `anyOf`/`oneOf`), then reads
//! the declared types (several become an `anyOf` of typed schemas) and writes the node
//! by one step per type: strings and formats, numbers and bounds, arrays and items,
//! objects and properties, untyped values. [`Ctx::force_object_root`] makes the top
//! level an object.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Value, json};
use switchboard_model::{ACCEPTED_STRING_FORMATS, ACCEPTED_TYPES};

use super::keywords::{copy_text, copy_uint, infer_type, json_type_of, keyword_type, type_matches};
use super::names::Renames;
use super::text::{append_description, p, short_json, summarize};
use super::{MAX_DEPTH, MAX_NODES, Obj};

/// The walk over one tool's schema: the document root (for `$ref`s), the `$ref`s open
/// on the current path, the nodes produced so far and the notes.
pub(super) struct Ctx<'a> {
    pub(super) root: &'a Value,
    pub(super) ref_stack: Vec<String>,
    pub(super) nodes: usize,
    pub(super) notes: BTreeSet<String>,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(root: &'a Value) -> Self {
        Ctx {
            root,
            ref_stack: Vec::new(),
            nodes: 0,
            notes: BTreeSet::new(),
        }
    }
}

impl Ctx<'_> {
    pub(super) fn note(&mut self, s: impl Into<String>) {
        self.notes.insert(s.into());
    }

    /// A minimal schema of type `ty`, keeping a string description.
    pub(super) fn bare(&self, ty: &str, description: Option<&Value>) -> Obj {
        let mut o = Obj::new();
        o.insert("type".into(), Value::String(ty.to_string()));
        if let Some(d) = description.filter(|d| d.is_string()) {
            o.insert("description".into(), d.clone());
        }
        match ty {
            "object" => {
                o.insert("properties".into(), Value::Object(Obj::new()));
            }
            "array" => {
                o.insert("items".into(), Value::Object(Obj::new()));
            }
            _ => {}
        }
        o
    }

    /// Normalizes one schema node. `path` is only used in notes.
    pub(super) fn node(&mut self, s: &Value, depth: usize, path: &str) -> (Obj, Renames) {
        self.nodes += 1;
        let m = match s {
            Value::Object(m) => m,
            Value::Bool(true) => return (Obj::new(), Renames::default()),
            Value::Bool(false) => {
                self.note(format!("{}: `false` schema loosened to any value", p(path)));
                return (Obj::new(), Renames::default());
            }
            _ => {
                self.note(format!("{}: non-object schema ignored", p(path)));
                return (Obj::new(), Renames::default());
            }
        };
        if depth > MAX_DEPTH || self.nodes > MAX_NODES {
            return (self.cut(m, path), Renames::default());
        }
        if let Some(r) = m.get("$ref") {
            return self.reference(m, r, depth, path);
        }
        if let Some(Value::Array(all)) = m.get("allOf") {
            return self.all_of(m, all, depth, path);
        }
        if m.contains_key("anyOf") || m.contains_key("oneOf") {
            return self.union(m, depth, path);
        }
        let (types, nullable) = self.declared_types(m, path);
        if types.len() > 1 {
            return self.multi_type(m, &types, nullable, depth, path);
        }
        let ty = types.into_iter().next().or_else(|| infer_type(m));
        self.typed(m, ty.as_deref(), nullable, depth, path)
    }

    /// A node past [`MAX_DEPTH`] or [`MAX_NODES`]: a bare schema of its type.
    fn cut(&mut self, m: &Obj, path: &str) -> Obj {
        self.note(format!(
            "{}: schema too deep or too large; cut to a bare schema",
            p(path)
        ));
        let ty = m
            .get("type")
            .and_then(Value::as_str)
            .filter(|t| ACCEPTED_TYPES.contains(t))
            .unwrap_or("object");
        self.bare(ty, m.get("description"))
    }

    /// The node's accepted types (deduplicated, `null` taken out) and whether it is
    /// nullable.
    fn declared_types(&mut self, m: &Obj, path: &str) -> (Vec<String>, bool) {
        let mut nullable = m.get("nullable").and_then(Value::as_bool).unwrap_or(false);
        let mut types: Vec<String> = match m.get("type") {
            Some(Value::String(t)) => vec![t.clone()],
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
            _ => Vec::new(),
        };
        if types.iter().any(|t| t == "null") {
            nullable = true;
            types.retain(|t| t != "null");
        }
        let unknown: Vec<String> = types
            .iter()
            .filter(|t| !ACCEPTED_TYPES.contains(&t.as_str()))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            self.note(format!("{}: unknown type(s) {unknown:?} loosened", p(path)));
            types.retain(|t| ACCEPTED_TYPES.contains(&t.as_str()));
        }
        let mut dedup = Vec::new();
        for t in types {
            if !dedup.contains(&t) {
                dedup.push(t);
            }
        }
        (dedup, nullable)
    }

    /// Several types: an anyOf of typed schemas, each with its own keywords.
    fn multi_type(
        &mut self,
        m: &Obj,
        types: &[String],
        nullable: bool,
        depth: usize,
        path: &str,
    ) -> (Obj, Renames) {
        let mut branches = Vec::new();
        let mut renames = Renames::default();
        for t in types {
            let b = type_branch(m, t);
            let (o, r) = self.node(&Value::Object(b), depth + 1, path);
            renames.merge(r);
            branches.push(Value::Object(o));
        }
        let mut out = Obj::new();
        copy_text(m, &mut out);
        out.insert("anyOf".into(), Value::Array(branches));
        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        self.fold_default(m, &mut out);
        (out, renames)
    }

    /// A node of one type (`None`: no usable type), written by that type's step.
    fn typed(
        &mut self,
        m: &Obj,
        ty: Option<&str>,
        mut nullable: bool,
        depth: usize,
        path: &str,
    ) -> (Obj, Renames) {
        let mut out = Obj::new();
        copy_text(m, &mut out);
        let mut renames = Renames::default();
        let values = allowed_values(m, &mut nullable);
        match ty {
            Some("string") => self.string(m, values, &mut out, path),
            Some(t @ ("number" | "integer")) => {
                out.insert("type".into(), json!(t));
                self.numeric_bounds(m, &mut out, path);
                self.values_to_description(values, &mut out, path);
            }
            Some("boolean") => {
                out.insert("type".into(), json!("boolean"));
                self.values_to_description(values, &mut out, path);
            }
            Some("array") => renames = self.array(m, values, &mut out, depth, path),
            Some("object") => renames = self.object(m, values, &mut out, depth, path),
            _ => self.untyped(values, &mut out, path),
        }
        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        self.fold_default(m, &mut out);
        self.note_dropped(m, path);
        (out, renames)
    }

    /// `type: string`: string enum values, accepted formats (others go to the
    /// description), length bounds and pattern.
    fn string(&mut self, m: &Obj, values: Option<Vec<Value>>, out: &mut Obj, path: &str) {
        out.insert("type".into(), json!("string"));
        if let Some(vals) = values
            && !vals.is_empty()
        {
            let strs: Vec<Value> = vals.iter().map(|v| Value::String(short_json(v))).collect();
            out.insert("enum".into(), Value::Array(strs));
        }
        match m.get("format").and_then(Value::as_str) {
            Some(f) if ACCEPTED_STRING_FORMATS.contains(&f) => {
                out.insert("format".into(), json!(f));
            }
            Some(f) => {
                append_description(out, &format!("(format: {f})"));
                self.note(format!(
                    "{}: string format `{f}` moved to the description",
                    p(path)
                ));
            }
            None => {}
        }
        copy_uint(m, out, "minLength");
        copy_uint(m, out, "maxLength");
        if let Some(pat) = m.get("pattern").filter(|v| v.is_string()) {
            out.insert("pattern".into(), pat.clone());
        }
    }

    /// `minimum`/`maximum`, with exclusive bounds folded in and said in the description.
    fn numeric_bounds(&mut self, m: &Obj, out: &mut Obj, path: &str) {
        let num = |k: &str| m.get(k).filter(|v| v.is_number()).cloned();
        let mut minimum = num("minimum");
        let mut maximum = num("maximum");
        let mut notes = Vec::new();
        match m.get("exclusiveMinimum") {
            Some(v @ Value::Number(_)) => {
                notes.push(format!("must be greater than {v}"));
                minimum = Some(v.clone());
            }
            Some(Value::Bool(true)) => {
                if let Some(min) = &minimum {
                    notes.push(format!("must be greater than {min}"));
                }
            }
            _ => {}
        }
        match m.get("exclusiveMaximum") {
            Some(v @ Value::Number(_)) => {
                notes.push(format!("must be less than {v}"));
                maximum = Some(v.clone());
            }
            Some(Value::Bool(true)) => {
                if let Some(max) = &maximum {
                    notes.push(format!("must be less than {max}"));
                }
            }
            _ => {}
        }
        if let Some(v) = minimum {
            out.insert("minimum".into(), v);
        }
        if let Some(v) = maximum {
            out.insert("maximum".into(), v);
        }
        if !notes.is_empty() {
            self.note(format!(
                "{}: exclusive bounds folded into minimum/maximum",
                p(path)
            ));
            append_description(out, &format!("({})", notes.join(", ")));
        }
    }

    /// `type: array`: one `items` schema (a tuple is loosened to an anyOf of its
    /// entries) and the item-count bounds. Returns the renames inside the items.
    fn array(
        &mut self,
        m: &Obj,
        values: Option<Vec<Value>>,
        out: &mut Obj,
        depth: usize,
        path: &str,
    ) -> Renames {
        let mut renames = Renames::default();
        out.insert("type".into(), json!("array"));
        let items = match (m.get("items"), m.get("prefixItems")) {
            (Some(Value::Array(tuple)), _) | (None, Some(Value::Array(tuple))) => {
                self.note(format!("{}: tuple items loosened to anyOf", p(path)));
                Some(json!({ "anyOf": tuple }))
            }
            (Some(it), _) => Some(it.clone()),
            (None, _) => None,
        };
        let (items, r) = match items {
            Some(it) => self.node(&it, depth + 1, &format!("{path}/items")),
            None => (Obj::new(), Renames::default()),
        };
        if !r.is_empty() {
            renames.set_items(r);
        }
        out.insert("items".into(), Value::Object(items));
        copy_uint(m, out, "minItems");
        copy_uint(m, out, "maxItems");
        self.values_to_description(values, out, path);
        renames
    }

    /// `type: object`: its properties and required names; a free-form map's value schema
    /// is described. Returns the property renames.
    fn object(
        &mut self,
        m: &Obj,
        values: Option<Vec<Value>>,
        out: &mut Obj,
        depth: usize,
        path: &str,
    ) -> Renames {
        out.insert("type".into(), json!("object"));
        let (props, required, renames) = self.object_properties(m, depth, path);
        let has_props = !props.is_empty();
        out.insert("properties".into(), Value::Object(props));
        if !required.is_empty() {
            out.insert("required".into(), Value::Array(required));
        }
        if !has_props && let Some(ap @ Value::Object(_)) = m.get("additionalProperties") {
            let (vs, _) = self.node(ap, depth + 1, &format!("{path}/additionalProperties"));
            let hint = format!(
                "(an object with free-form keys; each value: {})",
                summarize(&vs)
            );
            append_description(out, &hint);
        }
        self.values_to_description(values, out, path);
        renames
    }

    /// `properties` + `required` of an object schema, with names made valid for Gemini.
    fn object_properties(
        &mut self,
        m: &Obj,
        depth: usize,
        path: &str,
    ) -> (Obj, Vec<Value>, Renames) {
        let mut renames = Renames::default();
        let mut props = Obj::new();
        let Some(Value::Object(src)) = m.get("properties") else {
            if m.get("required")
                .is_some_and(|r| r.as_array().is_some_and(|a| !a.is_empty()))
            {
                self.note(format!(
                    "{}: `required` without properties dropped",
                    p(path)
                ));
            }
            return (props, Vec::new(), renames);
        };
        let new_names = self.property_names(src, path);
        for (k, v) in src {
            let new_name = new_names
                .get(k.as_str())
                .cloned()
                .unwrap_or_else(|| k.clone());
            let (o, r) = self.node(v, depth + 1, &format!("{path}/properties/{k}"));
            if new_name != *k || !r.is_empty() {
                renames.insert_prop(new_name.clone(), k.clone(), r);
            }
            props.insert(new_name, Value::Object(o));
        }
        let required = self.required(m, &new_names, path);
        (props, required, renames)
    }

    /// `required`, in the model-facing names; names that are not properties are dropped.
    fn required(&mut self, m: &Obj, new_names: &HashMap<&str, String>, path: &str) -> Vec<Value> {
        let mut required = Vec::new();
        if let Some(Value::Array(req)) = m.get("required") {
            for r in req {
                let Some(name) = r.as_str() else { continue };
                match new_names.get(name) {
                    Some(n) => {
                        let v = Value::String(n.clone());
                        if !required.contains(&v) {
                            required.push(v);
                        }
                    }
                    None => self.note(format!(
                        "{}: required `{name}` is not a property; dropped",
                        p(path)
                    )),
                }
            }
        }
        required
    }

    /// No usable type: any value. Keep enums as a hint.
    fn untyped(&mut self, values: Option<Vec<Value>>, out: &mut Obj, path: &str) {
        if let Some(vals) = values
            && !vals.is_empty()
        {
            if vals.iter().all(Value::is_string) {
                out.insert("type".into(), json!("string"));
                out.insert("enum".into(), Value::Array(vals));
            } else {
                self.values_to_description(Some(vals), out, path);
            }
        }
    }

    /// Notes the keywords Gemini has no place for.
    fn note_dropped(&mut self, m: &Obj, path: &str) {
        for k in m.keys() {
            let dropped = matches!(
                k.as_str(),
                "propertyNames"
                    | "patternProperties"
                    | "unevaluatedProperties"
                    | "dependentRequired"
                    | "dependentSchemas"
                    | "dependencies"
                    | "if"
                    | "then"
                    | "else"
                    | "not"
                    | "contains"
                    | "uniqueItems"
                    | "multipleOf"
                    | "minProperties"
                    | "maxProperties"
            );
            if dropped {
                self.note(format!("{}: `{k}` dropped", p(path)));
            }
        }
    }

    /// Gemini needs an object at the top level.
    pub(super) fn force_object_root(&mut self, mut out: Obj) -> Obj {
        out.remove("nullable");
        if out.get("type").and_then(Value::as_str) == Some("object") {
            return out;
        }
        if let Some(Value::Array(branches)) = out.remove("anyOf") {
            // A union of objects at the top: one object with every property; required
            // only what every branch requires.
            let (props, required) = merge_object_branches(&branches);
            self.note("top level: union of objects merged into one object");
            let mut o = Obj::new();
            copy_text(&out, &mut o);
            o.insert("type".into(), json!("object"));
            o.insert("properties".into(), Value::Object(props));
            if let Some(req) = required.filter(|r| !r.is_empty()) {
                o.insert("required".into(), Value::Array(req));
            }
            return o;
        }
        if let Some(t) = out.get("type").and_then(Value::as_str) {
            self.note(format!("top level: type `{t}` replaced by object"));
        }
        let mut o = Obj::new();
        copy_text(&out, &mut o);
        o.insert("type".into(), json!("object"));
        o.insert("properties".into(), Value::Object(Obj::new()));
        o
    }
}

/// The raw schema of one branch of a multi-type node: type `t` with the keywords that
/// apply to it, and only the allowed values of that type.
fn type_branch(m: &Obj, t: &str) -> Obj {
    let mut b = Obj::new();
    for (k, v) in m {
        if matches!(k.as_str(), "type" | "nullable" | "description" | "title") {
            continue;
        }
        if let Some(kt) = keyword_type(k)
            && !type_matches(kt, t)
        {
            continue;
        }
        if k == "enum" || k == "const" {
            // keep only values of this type
            let vals: Vec<Value> = match (k.as_str(), v) {
                ("enum", Value::Array(a)) => a.clone(),
                ("const", v) => vec![v.clone()],
                _ => Vec::new(),
            };
            let vals: Vec<Value> = vals
                .into_iter()
                .filter(|x| type_matches(t, json_type_of(x)))
                .collect();
            if !vals.is_empty() {
                b.insert("enum".into(), Value::Array(vals));
            }
            continue;
        }
        b.insert(k.clone(), v.clone());
    }
    b.insert("type".into(), Value::String(t.to_string()));
    b
}

/// The allowed values (`enum`, or `const` as one value) without `null`; a `null` among
/// them makes the node nullable.
fn allowed_values(m: &Obj, nullable: &mut bool) -> Option<Vec<Value>> {
    let mut values: Option<Vec<Value>> = match (m.get("enum"), m.get("const")) {
        (Some(Value::Array(a)), _) => Some(a.clone()),
        (_, Some(c)) => Some(vec![c.clone()]),
        _ => None,
    };
    if let Some(vals) = &mut values
        && vals.iter().any(Value::is_null)
    {
        vals.retain(|v| !v.is_null());
        *nullable = true;
    }
    values
}

/// Every property of a union of objects (the first branch naming one wins), and the
/// names every branch requires (`None` when no branch is an object).
fn merge_object_branches(branches: &[Value]) -> (Obj, Option<Vec<Value>>) {
    let objs: Vec<&Obj> = branches.iter().filter_map(Value::as_object).collect();
    let mut props = Obj::new();
    let mut required: Option<Vec<Value>> = None;
    for b in &objs {
        if let Some(Value::Object(bp)) = b.get("properties") {
            for (k, v) in bp {
                if !props.contains_key(k) {
                    props.insert(k.clone(), v.clone());
                }
            }
        }
        let req = b
            .get("required")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        required = Some(match required {
            None => req,
            Some(prev) => prev.into_iter().filter(|x| req.contains(x)).collect(),
        });
    }
    (props, required)
}
