//! What JSON Schema keywords and values mean for the normalizer: the type a keyword
//! belongs to, the JSON type of a value, the type a schema implies when it names none,
//! the keywords that never constrain, and copying the keywords that are kept as they are.

use serde_json::{Value, json};

use super::Obj;

/// Keywords that make sense only for one type; used to split a multi-type schema.
pub(super) fn keyword_type(k: &str) -> Option<&'static str> {
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

pub(super) fn type_matches(keyword_ty: &str, ty: &str) -> bool {
    keyword_ty == ty || (keyword_ty == "number" && ty == "integer")
}

pub(super) fn json_type_of(v: &Value) -> &'static str {
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

/// Keywords that never constrain a union's branches.
pub(super) fn is_text_keyword(k: &str) -> bool {
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

/// The type a schema without `type` implies by its other keywords or allowed values.
pub(super) fn infer_type(m: &Obj) -> Option<String> {
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

/// Copies `title` and `description` when they are strings.
pub(super) fn copy_text(from: &Obj, to: &mut Obj) {
    for k in ["title", "description"] {
        if let Some(v @ Value::String(_)) = from.get(k) {
            to.insert(k.into(), v.clone());
        }
    }
}

/// Copies a count keyword (`minLength`, `maxItems`, …) when it is a whole number ≥ 0.
pub(super) fn copy_uint(from: &Obj, to: &mut Obj, key: &str) {
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
