//! Combining schemas: `allOf` merged into one node; `anyOf`/`oneOf` read as one union
//! whose parent constraints apply to every branch, with `null` branches turned into
//! `nullable`, unconstrained branches loosening the whole union, nested plain unions
//! flattened and string-enum branches collapsed into one `enum`.

use serde_json::{Value, json};

use super::Obj;
use super::keywords::{copy_text, is_text_keyword, keyword_type};
use super::names::Renames;
use super::node::Ctx;
use super::text::p;

impl Ctx<'_> {
    /// `allOf`: every branch merged into the node.
    pub(super) fn all_of(
        &mut self,
        m: &Obj,
        all: &[Value],
        depth: usize,
        path: &str,
    ) -> (Obj, Renames) {
        let mut base = m.clone();
        base.remove("allOf");
        let (mut out, mut renames) = self.node(&Value::Object(base), depth + 1, path);
        for (i, sub) in all.iter().enumerate() {
            let (o, r) = self.node(sub, depth + 1, &format!("{path}/allOf/{i}"));
            merge_schema_into(&mut out, o);
            renames.merge(r);
        }
        (out, renames)
    }

    /// `anyOf` / `oneOf` (both read as anyOf).
    pub(super) fn union(&mut self, m: &Obj, depth: usize, path: &str) -> (Obj, Renames) {
        let (parent, raw) = self.union_parts(m, path);
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
            let (bo, br) = self.union_branch(b, &constraints, parent_norm.as_ref(), depth, &bpath);
            renames.merge(br);
            push_branch(&mut branches, &mut nullable, &mut any_open, bo);
        }
        let mut out = self.union_result(branches, any_open, parent_norm, path);
        // The parent's text wins; a lone branch's text stays when the parent has none.
        copy_text(m, &mut out);
        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        self.fold_default(m, &mut out);
        (out, renames)
    }

    /// The union's parent (the node without `anyOf`/`oneOf`) and its raw branches.
    fn union_parts(&mut self, m: &Obj, path: &str) -> (Obj, Vec<Value>) {
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
        (parent, raw)
    }

    /// One branch, normalized with the parent's constraints applied.
    fn union_branch(
        &mut self,
        b: &Value,
        constraints: &Obj,
        parent_norm: Option<&Obj>,
        depth: usize,
        bpath: &str,
    ) -> (Obj, Renames) {
        match (b, parent_norm) {
            (Value::Object(bm), Some(_)) if !bm.contains_key("$ref") => {
                // Merge the raw parent constraints in first, so a branch's `required`
                // can name the parent's properties.
                let merged = raw_merge(constraints, bm);
                self.node(&Value::Object(merged), depth + 1, bpath)
            }
            (_, Some(po)) => {
                let (mut bo, br) = self.node(b, depth + 1, bpath);
                combine_with_parent(&mut bo, po);
                (bo, br)
            }
            (_, None) => self.node(b, depth + 1, bpath),
        }
    }

    /// The union's schema from its kept branches (before the parent's text is applied).
    fn union_result(
        &mut self,
        branches: Vec<Obj>,
        any_open: bool,
        parent_norm: Option<Obj>,
        path: &str,
    ) -> Obj {
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
        out
    }
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

/// Keeps a normalized branch: a `null`-only branch makes the union nullable, an
/// unconstrained one marks it open, exact duplicates are dropped.
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
    drop_keys_for_other_types(into);
}

/// After a merge: object-only keys leave a non-object schema, an object gets
/// `properties`, and an anyOf node keeps only its text.
fn drop_keys_for_other_types(into: &mut Obj) {
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
