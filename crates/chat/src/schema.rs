//! MCP tool input schemas → what the Gemini API accepts.
//!
//! MCP servers describe their arguments with whatever JSON Schema their SDK writes:
//! draft-07 from zod, 2020-12 with `$defs`/`$ref` from pydantic, type arrays, `const`,
//! `propertyNames`, `exclusiveMinimum`, OpenAPI-derived `oneOf` trees. Gemini rejects
//! many of these (400 or `MALFORMED_FUNCTION_CALL`). [`normalize`] turns any such schema
//! into the subset Gemini accepts as `parametersJsonSchema`, keeping what matters to the
//! model (descriptions, enums, required fields) and folding what it cannot keep into
//! descriptions where that helps (defaults, non-string allowed values, formats):
//!
//! - local `$ref`s (`#/$defs/X`, `#/definitions/X`, any JSON pointer, `#anchor`) are
//!   inlined; a `$ref` that is already open [`MAX_REF_REPEAT`] times on the current path
//!   (recursion) becomes a stub `{"type": "object"}` keeping the description;
//! - `type: [T, "null"]` and `anyOf: [X, {"type": "null"}]` become `T`/`X` with
//!   `nullable: true`; several non-null types become an `anyOf` of typed schemas;
//! - `oneOf` is read as `anyOf`, `allOf` is merged, `const` becomes a one-value `enum`;
//! - property names outside `[A-Za-z0-9_]{1,64}` are renamed; [`Normalized::restore_args`]
//!   maps the model's arguments back to the server's names;
//! - the top level is always `{"type": "object", ...}`.
//!
//! [`to_openapi`] converts a normalized schema to the OpenAPI 3.0 subset used by the
//! `parameters` field. What the real API would reject is checked by
//! `switchboard_model`'s declaration rules (`validate_for_gemini`, …), the one copy the
//! fake Gemini server and the schema corpus test use too.
//!
//! The argument check before a call ([`crate::args`]) always uses the server's original
//! schema, so lossy steps here never let a bad argument through.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{Map, Value, json};
use switchboard_model::{
    ACCEPTED_STRING_FORMATS, ACCEPTED_TYPES, MAX_PROPERTY_NAME_LEN, is_valid_property_name,
};

/// How many times the same `$ref` may be open on one path before it becomes a stub.
/// `2` unrolls a recursive structure once (a tree node shows its children as nodes whose
/// own children are stubs).
pub const MAX_REF_REPEAT: usize = 2;

/// Nesting depth beyond which sub-schemas become stubs.
pub const MAX_DEPTH: usize = 32;

/// Upper bound on schema nodes produced for one tool (guards against exponential
/// inlining of shared `$ref`s); nodes past it become stubs.
pub const MAX_NODES: usize = 4_000;

/// The result of [`normalize`].
#[derive(Debug, Clone, PartialEq)]
pub struct Normalized {
    /// The schema to send as `parametersJsonSchema`; always `{"type":"object", ...}`.
    pub schema: Value,
    /// Property renames (model-facing name → the server's name), nested.
    pub renames: Renames,
    /// What was changed in a lossy way (sorted, deduplicated), for logs and debugging.
    pub notes: Vec<String>,
}

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

    fn merge(&mut self, other: Renames) {
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

/// Normalizes a tool's `inputSchema` to what Gemini accepts as `parametersJsonSchema`
/// (see the module docs for the rules). Never fails: anything unusable becomes a looser
/// schema, and the change is listed in [`Normalized::notes`].
pub fn normalize(schema: &Value) -> Normalized {
    let mut cx = Ctx {
        root: schema,
        ref_stack: Vec::new(),
        nodes: 0,
        notes: BTreeSet::new(),
    };
    let (mut out, renames) = cx.node(schema, 0, "");
    out = cx.force_object_root(out);
    Normalized {
        schema: Value::Object(out),
        renames,
        notes: cx.notes.into_iter().collect(),
    }
}

struct Ctx<'a> {
    root: &'a Value,
    ref_stack: Vec<String>,
    nodes: usize,
    notes: BTreeSet<String>,
}

type Obj = Map<String, Value>;

/// Keywords that make sense only for one type; used to split a multi-type schema.
fn keyword_type(k: &str) -> Option<&'static str> {
    match k {
        "properties"
        | "required"
        | "additionalProperties"
        | "propertyNames"
        | "patternProperties"
        | "minProperties"
        | "maxProperties"
        | "dependentRequired"
        | "dependentSchemas"
        | "unevaluatedProperties"
        | "dependencies" => Some("object"),
        "items" | "prefixItems" | "additionalItems" | "minItems" | "maxItems" | "uniqueItems"
        | "contains" | "minContains" | "maxContains" | "unevaluatedItems" => Some("array"),
        "minLength" | "maxLength" | "pattern" | "format" | "contentEncoding"
        | "contentMediaType" => Some("string"),
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => {
            Some("number")
        }
        _ => None,
    }
}

fn type_matches(keyword_ty: &str, ty: &str) -> bool {
    keyword_ty == ty || (keyword_ty == "number" && ty == "integer")
}

fn json_type_of(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

fn short_json(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn append_description(o: &mut Obj, extra: &str) {
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

impl Ctx<'_> {
    fn note(&mut self, s: impl Into<String>) {
        self.notes.insert(s.into());
    }

    fn stub(&self, ty: &str, description: Option<&Value>) -> Obj {
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
    fn node(&mut self, s: &Value, depth: usize, path: &str) -> (Obj, Renames) {
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
            self.note(format!(
                "{}: schema too deep or too large; cut to a stub",
                p(path)
            ));
            let ty = m
                .get("type")
                .and_then(Value::as_str)
                .filter(|t| ACCEPTED_TYPES.contains(t))
                .unwrap_or("object");
            return (self.stub(ty, m.get("description")), Renames::default());
        }
        if let Some(r) = m.get("$ref") {
            return self.reference(m, r, depth, path);
        }

        // allOf: merge every branch into the node.
        if let Some(Value::Array(all)) = m.get("allOf") {
            let mut base = m.clone();
            base.remove("allOf");
            let (mut out, mut renames) = self.node(&Value::Object(base), depth + 1, path);
            for (i, sub) in all.iter().enumerate() {
                let (o, r) = self.node(sub, depth + 1, &format!("{path}/allOf/{i}"));
                merge_schema_into(&mut out, o);
                renames.merge(r);
            }
            return (out, renames);
        }

        if m.contains_key("anyOf") || m.contains_key("oneOf") {
            return self.union(m, depth, path);
        }

        // Types.
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
        let types = dedup;

        if types.len() > 1 {
            // Several types: an anyOf of typed schemas, each with its own keywords.
            let mut branches = Vec::new();
            let mut renames = Renames::default();
            for t in &types {
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
                b.insert("type".into(), Value::String(t.clone()));
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
            return (out, renames);
        }

        let ty: Option<String> = types.into_iter().next().or_else(|| infer_type(m));
        let mut out = Obj::new();
        copy_text(m, &mut out);
        let mut renames = Renames::default();

        // const / enum
        let mut values: Option<Vec<Value>> = match (m.get("enum"), m.get("const")) {
            (Some(Value::Array(a)), _) => Some(a.clone()),
            (_, Some(c)) => Some(vec![c.clone()]),
            _ => None,
        };
        if let Some(vals) = &mut values
            && vals.iter().any(Value::is_null)
        {
            vals.retain(|v| !v.is_null());
            nullable = true;
        }

        match ty.as_deref() {
            Some("string") => {
                out.insert("type".into(), json!("string"));
                if let Some(vals) = values
                    && !vals.is_empty()
                {
                    let strs: Vec<Value> =
                        vals.iter().map(|v| Value::String(short_json(v))).collect();
                    out.insert("enum".into(), Value::Array(strs));
                }
                match m.get("format").and_then(Value::as_str) {
                    Some(f) if ACCEPTED_STRING_FORMATS.contains(&f) => {
                        out.insert("format".into(), json!(f));
                    }
                    Some(f) => {
                        append_description(&mut out, &format!("(format: {f})"));
                        self.note(format!(
                            "{}: string format `{f}` moved to the description",
                            p(path)
                        ));
                    }
                    None => {}
                }
                copy_uint(m, &mut out, "minLength");
                copy_uint(m, &mut out, "maxLength");
                if let Some(pat) = m.get("pattern").filter(|v| v.is_string()) {
                    out.insert("pattern".into(), pat.clone());
                }
            }
            Some(t @ ("number" | "integer")) => {
                out.insert("type".into(), json!(t));
                self.numeric_bounds(m, &mut out, path);
                self.values_to_description(values, &mut out, path);
            }
            Some("boolean") => {
                out.insert("type".into(), json!("boolean"));
                self.values_to_description(values, &mut out, path);
            }
            Some("array") => {
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
                    renames.items = Some(Box::new(r));
                }
                out.insert("items".into(), Value::Object(items));
                copy_uint(m, &mut out, "minItems");
                copy_uint(m, &mut out, "maxItems");
                self.values_to_description(values, &mut out, path);
            }
            Some("object") => {
                out.insert("type".into(), json!("object"));
                let (props, required, r) = self.object_properties(m, depth, path);
                renames = r;
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
                    append_description(&mut out, &hint);
                }
                self.values_to_description(values, &mut out, path);
            }
            _ => {
                // No usable type: any value. Keep enums as a hint.
                if let Some(vals) = values
                    && !vals.is_empty()
                {
                    if vals.iter().all(Value::is_string) {
                        out.insert("type".into(), json!("string"));
                        out.insert("enum".into(), Value::Array(vals));
                    } else {
                        self.values_to_description(Some(vals), &mut out, path);
                    }
                }
            }
        }
        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        self.fold_default(m, &mut out);
        self.note_dropped(m, path);
        (out, renames)
    }

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

    fn reference(&mut self, m: &Obj, r: &Value, depth: usize, path: &str) -> (Obj, Renames) {
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
            self.note(format!("{}: recursive $ref `{r}` cut to a stub", p(path)));
            let ty = target
                .get("type")
                .and_then(Value::as_str)
                .filter(|t| ACCEPTED_TYPES.contains(t))
                .unwrap_or("object");
            let desc = m.get("description").or_else(|| target.get("description"));
            return (self.stub(ty, desc), Renames::default());
        }
        // The target, with the $ref's siblings taking precedence.
        let merged = match target {
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
        };
        self.ref_stack.push(r.to_string());
        let out = self.node(&merged, depth + 1, path);
        self.ref_stack.pop();
        out
    }

    /// `anyOf` / `oneOf` (both read as anyOf).
    fn union(&mut self, m: &Obj, depth: usize, path: &str) -> (Obj, Renames) {
        let mut parent = m.clone();
        let mut raw: Vec<Value> = Vec::new();
        for key in ["anyOf", "oneOf"] {
            if let Some(v) = parent.remove(key) {
                match v {
                    Value::Array(a) => raw.extend(a),
                    _ => self.note(format!("{}: non-array `{key}` ignored", p(path))),
                }
            }
        }
        // The parent's own constraints apply to every branch (JSON Schema semantics).
        let constraints: Obj = parent
            .iter()
            .filter(|(k, _)| !is_text_keyword(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut nullable = parent
            .get("nullable")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let mut renames = Renames::default();
        let parent_norm = if constraints.is_empty() {
            None
        } else {
            let (po, pr) = self.node(&Value::Object(constraints.clone()), depth + 1, path);
            renames.merge(pr);
            Some(po)
        };
        let mut branches: Vec<Obj> = Vec::new();
        let mut any_open = false;
        for (i, b) in raw.iter().enumerate() {
            let bpath = format!("{path}/anyOf/{i}");
            let (bo, br) = match (b, &parent_norm) {
                (Value::Object(bm), Some(_)) if !bm.contains_key("$ref") => {
                    // Merge the raw parent constraints in first, so a branch's `required`
                    // can name the parent's properties.
                    let merged = raw_merge(&constraints, bm);
                    self.node(&Value::Object(merged), depth + 1, &bpath)
                }
                (_, Some(po)) => {
                    let (mut bo, br) = self.node(b, depth + 1, &bpath);
                    combine_with_parent(&mut bo, po);
                    (bo, br)
                }
                (_, None) => self.node(b, depth + 1, &bpath),
            };
            renames.merge(br);
            push_branch(&mut branches, &mut nullable, &mut any_open, bo);
        }

        let mut out = Obj::new();
        if any_open || branches.is_empty() {
            // Some branch accepts anything (or every branch was `null`): the union adds
            // no constraint beyond the parent's.
            if any_open {
                self.note(format!(
                    "{}: anyOf with an unconstrained branch loosened",
                    p(path)
                ));
            }
            if let Some(po) = parent_norm {
                out = po;
            }
        } else {
            let branches = collapse_string_enums(flatten_unions(branches));
            if branches.len() == 1 {
                out = branches.into_iter().next().unwrap_or_default();
            } else {
                out.insert(
                    "anyOf".into(),
                    Value::Array(branches.into_iter().map(Value::Object).collect()),
                );
            }
        }
        // The parent's text wins; a lone branch's text stays when the parent has none.
        copy_text(m, &mut out);
        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        self.fold_default(m, &mut out);
        (out, renames)
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
        // Names: valid ones keep theirs; the others are sanitized and made unique.
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
        for (k, v) in src {
            let new_name = new_names
                .get(k.as_str())
                .cloned()
                .unwrap_or_else(|| k.clone());
            let (o, r) = self.node(v, depth + 1, &format!("{path}/properties/{k}"));
            if new_name != *k || !r.is_empty() {
                renames.props.insert(
                    new_name.clone(),
                    PropRename {
                        original: k.clone(),
                        inner: r,
                    },
                );
            }
            props.insert(new_name, Value::Object(o));
        }
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
        (props, required, renames)
    }

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

    /// Non-string allowed values cannot be an `enum`: list them in the description.
    fn values_to_description(&mut self, values: Option<Vec<Value>>, out: &mut Obj, path: &str) {
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

    fn fold_default(&mut self, m: &Obj, out: &mut Obj) {
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

    /// Gemini needs an object at the top level.
    fn force_object_root(&mut self, mut out: Obj) -> Obj {
        out.remove("nullable");
        if out.get("type").and_then(Value::as_str) == Some("object") {
            return out;
        }
        if let Some(Value::Array(branches)) = out.remove("anyOf") {
            // A union of objects at the top: one object with every property; required
            // only what every branch requires.
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

/// Keywords that never constrain a union's branches.
fn is_text_keyword(k: &str) -> bool {
    matches!(
        k,
        "description"
            | "title"
            | "default"
            | "examples"
            | "$comment"
            | "deprecated"
            | "nullable"
            | "$schema"
            | "$id"
            | "$defs"
            | "definitions"
            | "readOnly"
            | "writeOnly"
    )
}

/// Raw (un-normalized) merge of a union parent's constraints into one branch: the
/// branch's keys win, `properties` and `required` are unioned; when the branch names a
/// different type, the parent's keywords for its own type are left out.
fn raw_merge(parent: &Obj, branch: &Obj) -> Obj {
    let mut merged = parent.clone();
    let types_differ = match (parent.get("type"), branch.get("type")) {
        (Some(pt), Some(bt)) => pt != bt,
        _ => false,
    };
    if types_differ {
        merged.retain(|k, _| keyword_type(k).is_none());
    }
    for (k, v) in branch {
        match (k.as_str(), merged.get_mut(k.as_str()), v) {
            ("properties", Some(Value::Object(mp)), Value::Object(bp)) => {
                for (pk, pv) in bp {
                    mp.insert(pk.clone(), pv.clone());
                }
            }
            ("required", Some(Value::Array(mr)), Value::Array(br)) => {
                for x in br {
                    if !mr.contains(x) {
                        mr.push(x.clone());
                    }
                }
            }
            _ => {
                merged.insert(k.clone(), v.clone());
            }
        }
    }
    merged
}

/// Applies a normalized union parent to a normalized branch that came from a `$ref`.
fn combine_with_parent(bo: &mut Obj, po: &Obj) {
    let open = !bo.contains_key("type") && !bo.contains_key("anyOf") && !bo.contains_key("enum");
    if open {
        let text: Obj = bo
            .iter()
            .filter(|(k, _)| matches!(k.as_str(), "description" | "title" | "nullable"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        *bo = po.clone();
        for (k, v) in text {
            bo.insert(k, v);
        }
        return;
    }
    if bo.contains_key("anyOf") {
        return;
    }
    if bo.get("type") == po.get("type") {
        merge_schema_into(bo, po.clone());
    }
}

fn push_branch(branches: &mut Vec<Obj>, nullable: &mut bool, any_open: &mut bool, mut bo: Obj) {
    let only_null = bo.get("nullable") == Some(&Value::Bool(true))
        && bo
            .keys()
            .all(|k| matches!(k.as_str(), "nullable" | "description" | "title"));
    if only_null {
        *nullable = true;
        return;
    }
    if bo.remove("nullable") == Some(Value::Bool(true)) {
        *nullable = true;
    }
    let open = !bo.contains_key("type") && !bo.contains_key("anyOf") && !bo.contains_key("enum");
    if open {
        *any_open = true;
        return;
    }
    // Drop exact duplicates.
    if !branches.contains(&bo) {
        branches.push(bo);
    }
}

/// A one-line description of a normalized schema, for values that can only be described
/// (the values of a free-form map).
fn summarize(s: &Obj) -> String {
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

fn p(path: &str) -> &str {
    if path.is_empty() { "(top level)" } else { path }
}

fn copy_text(from: &Obj, to: &mut Obj) {
    for k in ["title", "description"] {
        if let Some(v @ Value::String(_)) = from.get(k) {
            to.insert(k.into(), v.clone());
        }
    }
}

fn copy_uint(from: &Obj, to: &mut Obj, key: &str) {
    let Some(v) = from.get(key) else { return };
    let n = v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 9.0e15)
            .map(|f| f as u64)
    });
    if let Some(n) = n {
        to.insert(key.into(), json!(n));
    }
}

fn infer_type(m: &Obj) -> Option<String> {
    let has = |k: &str| m.contains_key(k);
    if has("properties")
        || m.get("additionalProperties").is_some_and(Value::is_object)
        || has("propertyNames")
        || has("patternProperties")
    {
        return Some("object".into());
    }
    if has("items") || has("prefixItems") || has("minItems") || has("maxItems") {
        return Some("array".into());
    }
    let vals: Vec<&Value> = match (m.get("enum"), m.get("const")) {
        (Some(Value::Array(a)), _) => a.iter().filter(|v| !v.is_null()).collect(),
        (_, Some(c)) => vec![c],
        _ => Vec::new(),
    };
    if !vals.is_empty() {
        let first = json_type_of(vals[0]);
        if vals.iter().all(|v| v.is_string()) {
            return Some("string".into());
        }
        if vals.iter().all(|v| v.is_number()) {
            return Some(if vals.iter().all(|v| json_type_of(v) == "integer") {
                "integer".into()
            } else {
                "number".into()
            });
        }
        if vals.iter().all(|v| json_type_of(v) == first) {
            return Some(first.into());
        }
        return None;
    }
    if has("minLength") || has("maxLength") || has("pattern") || has("format") {
        return Some("string".into());
    }
    if has("minimum") || has("maximum") || has("exclusiveMinimum") || has("exclusiveMaximum") {
        return Some("number".into());
    }
    None
}

/// Merges a normalized schema into another (used for `allOf` and for a `$ref` branch
/// with parent constraints): properties and required are unioned, other keys filled in
/// where missing.
fn merge_schema_into(into: &mut Obj, from: Obj) {
    for (k, v) in from {
        match k.as_str() {
            "properties" => {
                let mut props = into
                    .get("properties")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                if let Value::Object(fp) = v {
                    for (pk, pv) in fp {
                        props.entry(pk).or_insert(pv);
                    }
                }
                into.insert(k, Value::Object(props));
            }
            "required" => {
                let mut req = into
                    .get("required")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if let Value::Array(fr) = v {
                    for x in fr {
                        if !req.contains(&x) {
                            req.push(x);
                        }
                    }
                }
                into.insert(k, Value::Array(req));
            }
            "type" => {
                if !into.contains_key("type") && !into.contains_key("anyOf") {
                    into.insert(k, v);
                }
            }
            _ => {
                into.entry(k).or_insert(v);
            }
        }
    }
    // Object-only keys on a non-object schema would be invalid.
    if into
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| t != "object")
    {
        into.remove("properties");
        into.remove("required");
    } else if into.get("type").and_then(Value::as_str) == Some("object")
        && !into.contains_key("properties")
    {
        into.insert("properties".into(), Value::Object(Obj::new()));
    }
    if into.contains_key("anyOf") {
        // An anyOf node keeps only its text; typed keys belong in the branches.
        let keep: Vec<String> = into
            .keys()
            .filter(|k| matches!(k.as_str(), "anyOf" | "description" | "title" | "nullable"))
            .cloned()
            .collect();
        into.retain(|k, _| keep.contains(k));
    }
}

/// Splices branches that are themselves plain unions into the outer union.
fn flatten_unions(branches: Vec<Obj>) -> Vec<Obj> {
    let mut flat: Vec<Obj> = Vec::with_capacity(branches.len());
    for b in branches {
        let plain_union = b
            .keys()
            .all(|k| matches!(k.as_str(), "anyOf" | "description" | "title"));
        if plain_union && let Some(Value::Array(inner)) = b.get("anyOf") {
            for x in inner {
                if let Value::Object(o) = x
                    && !flat.contains(o)
                {
                    flat.push(o.clone());
                }
            }
            continue;
        }
        if !flat.contains(&b) {
            flat.push(b);
        }
    }
    flat
}

/// Merges anyOf branches that are only a string enum into one string enum branch
/// (`const` unions from zod/pydantic become one `enum`).
fn collapse_string_enums(branches: Vec<Obj>) -> Vec<Obj> {
    let is_plain_enum = |b: &Obj| {
        b.get("type").and_then(Value::as_str) == Some("string")
            && b.contains_key("enum")
            && b.keys()
                .all(|k| matches!(k.as_str(), "type" | "enum" | "description" | "title"))
    };
    let count = branches.iter().filter(|b| is_plain_enum(b)).count();
    if count < 2 {
        return branches;
    }
    let mut values: Vec<Value> = Vec::new();
    let mut descs: Vec<String> = Vec::new();
    let mut out: Vec<Obj> = Vec::new();
    let mut slot = None;
    for b in branches {
        if is_plain_enum(&b) {
            if let Some(Value::Array(vs)) = b.get("enum") {
                for v in vs {
                    if !values.contains(v) {
                        values.push(v.clone());
                    }
                }
            }
            if let Some(d) = b.get("description").and_then(Value::as_str)
                && !descs.iter().any(|x| x == d)
            {
                descs.push(d.to_string());
            }
            if slot.is_none() {
                slot = Some(out.len());
                out.push(Obj::new());
            }
        } else {
            out.push(b);
        }
    }
    if let Some(i) = slot {
        let mut merged = Obj::new();
        merged.insert("type".into(), json!("string"));
        merged.insert("enum".into(), Value::Array(values));
        if !descs.is_empty() {
            merged.insert("description".into(), Value::String(descs.join(" / ")));
        }
        out[i] = merged;
    }
    out
}

// ---------------------------------------------------------------------------------------
// OpenAPI form
// ---------------------------------------------------------------------------------------

/// Converts a normalized schema (the output of [`normalize`]) to the OpenAPI 3.0 subset
/// Gemini accepts in `FunctionDeclaration.parameters`: the same keywords, with type names
/// in upper case (`OBJECT`, `STRING`, `NUMBER`, `INTEGER`, `BOOLEAN`, `ARRAY`).
pub fn to_openapi(normalized: &Value) -> Value {
    match normalized {
        Value::Object(m) => {
            let mut out = Obj::new();
            for (k, v) in m {
                let v = match k.as_str() {
                    "type" => match v.as_str() {
                        Some(t) => Value::String(t.to_ascii_uppercase()),
                        None => v.clone(),
                    },
                    "items" => to_openapi(v),
                    "anyOf" => match v {
                        Value::Array(a) => Value::Array(a.iter().map(to_openapi).collect()),
                        _ => v.clone(),
                    },
                    "properties" => match v {
                        Value::Object(props) => Value::Object(
                            props
                                .iter()
                                .map(|(pk, pv)| (pk.clone(), to_openapi(pv)))
                                .collect(),
                        ),
                        _ => v.clone(),
                    },
                    _ => v.clone(),
                };
                out.insert(k.clone(), v);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
