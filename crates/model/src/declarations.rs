//! What the Gemini API accepts in a `FunctionDeclaration`, checked the way the real API
//! does: the function-name rule (a letter or `_`, then letters, digits, `_ . : -`, at
//! most 64 characters; the chat registry stays one under it, as Gemini CLI does),
//! parameter names (`[A-Za-z0-9_]{1,64}`), and the schema subset of
//! `parametersJsonSchema` and of the OpenAPI-form `parameters`.
//!
//! This is the one copy of these rules: the chat side's schema normalizer writes to them,
//! the tool registry names tools by them, and the fake Gemini server in
//! `switchboard-model-fakes` rejects requests by them.

use std::collections::BTreeSet;

use serde_json::Value;

/// Longest parameter (property) name Gemini accepts.
pub const MAX_PROPERTY_NAME_LEN: usize = 64;

/// Longest function name the Gemini API accepts ("with a maximum length of 64"). The
/// tool registry names tools one shorter, as Gemini CLI does (`switchboard-chat`'s
/// `MAX_NAME_LEN`).
pub const MAX_FUNCTION_NAME_LEN: usize = 64;

/// The fields of a `FunctionDeclaration`; the API rejects any other ("Cannot find
/// field").
pub const FUNCTION_DECLARATION_FIELDS: &[&str] = &[
    "name",
    "description",
    "parameters",
    "parametersJsonSchema",
    "response",
    "responseJsonSchema",
    "behavior",
];

/// Keywords a normalized schema node may carry (JSON Schema form).
pub const ACCEPTED_KEYWORDS: &[&str] = &[
    "type",
    "nullable",
    "title",
    "description",
    "enum",
    "format",
    "properties",
    "required",
    "propertyOrdering",
    "items",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "anyOf",
];

/// Type names accepted in the JSON Schema form (lowercase) — `null` is expressed with
/// `nullable`.
pub const ACCEPTED_TYPES: &[&str] = &["string", "number", "integer", "boolean", "object", "array"];

/// String formats Gemini accepts.
pub const ACCEPTED_STRING_FORMATS: &[&str] = &["enum", "date-time"];

/// Whether `name` is a parameter (property) name Gemini accepts: `[A-Za-z0-9_]{1,64}`.
pub fn is_valid_property_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_PROPERTY_NAME_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

// ---------------------------------------------------------------------------------------
// Validation (what the real API rejects)
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum Form {
    JsonSchema,
    OpenApi,
}

/// Checks that `schema` is something Gemini accepts as `parametersJsonSchema`, the way
/// the real API does (and a bit stricter): the top level is `{"type": "object"}`; every
/// node uses only [`ACCEPTED_KEYWORDS`]; `type` is one string from [`ACCEPTED_TYPES`]
/// (no arrays, no `"null"`: use `nullable`); `enum` is a non-empty list of strings on a
/// string schema; `format` on strings is one of [`ACCEPTED_STRING_FORMATS`];
/// `properties` only on objects, with names matching `[A-Za-z0-9_]{1,64}`; `required`
/// lists existing properties once; arrays have a single-schema `items`; no `$ref`.
///
/// Returns every problem found, each starting with the JSON path of the offending node
/// (e.g. `properties.filter.anyOf[1]: keyword "const" is not supported`).
pub fn validate_for_gemini(schema: &Value) -> Result<(), Vec<String>> {
    validate(schema, Form::JsonSchema)
}

/// Like [`validate_for_gemini`] for the OpenAPI form (`FunctionDeclaration.parameters`):
/// type names are upper case (`OBJECT`, `STRING`, …).
pub fn validate_openapi_for_gemini(schema: &Value) -> Result<(), Vec<String>> {
    validate(schema, Form::OpenApi)
}

/// Checks a whole `FunctionDeclaration` JSON object the way the API does: `name` matches
/// `^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$`, `description` is a string, at most one of
/// `parameters` / `parametersJsonSchema` is present (never both), and that schema passes
/// [`validate_openapi_for_gemini`] / [`validate_for_gemini`]. Unknown fields are rejected.
pub fn validate_function_declaration(decl: &Value) -> Result<(), Vec<String>> {
    let mut errs = Vec::new();
    let Some(m) = decl.as_object() else {
        return Err(vec!["function declaration must be an object".into()]);
    };
    for k in m.keys() {
        if !FUNCTION_DECLARATION_FIELDS.contains(&k.as_str()) {
            errs.push(format!("unknown field \"{k}\" in function declaration"));
        }
    }
    match m.get("name").and_then(Value::as_str) {
        Some(n) if is_valid_function_name(n) => {}
        Some(n) => errs.push(format!(
            "function name \"{n}\" is invalid: must start with a letter or underscore, use only \
             a-z, A-Z, 0-9, underscores, dots, colons and dashes, at most {MAX_FUNCTION_NAME_LEN} characters"
        )),
        None => errs.push("function declaration has no name".into()),
    }
    if let Some(d) = m.get("description")
        && !d.is_string()
    {
        errs.push("description must be a string".into());
    }
    let prefix = m
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    match (m.get("parameters"), m.get("parametersJsonSchema")) {
        (Some(_), Some(_)) => errs.push(format!(
            "{prefix}: parameters and parametersJsonSchema are mutually exclusive"
        )),
        (Some(s), None) => {
            if let Err(e) = validate_openapi_for_gemini(s) {
                errs.extend(e.into_iter().map(|x| format!("{prefix}.parameters: {x}")));
            }
        }
        (None, Some(s)) => {
            if let Err(e) = validate_for_gemini(s) {
                errs.extend(
                    e.into_iter()
                        .map(|x| format!("{prefix}.parametersJsonSchema: {x}")),
                );
            }
        }
        (None, None) => {}
    }
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

/// Whether `name` is a valid Gemini function name.
pub fn is_valid_function_name(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || first == '_')
        && name.len() <= MAX_FUNCTION_NAME_LEN
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

fn validate(schema: &Value, form: Form) -> Result<(), Vec<String>> {
    let mut errs = Vec::new();
    match schema.as_object() {
        None => errs.push("(root): schema must be an object".to_string()),
        Some(m) => {
            let want = if form == Form::OpenApi {
                "OBJECT"
            } else {
                "object"
            };
            if m.get("type").and_then(Value::as_str) != Some(want) {
                errs.push(format!("(root): top-level type must be \"{want}\""));
            }
            if m.get("nullable") == Some(&Value::Bool(true)) {
                errs.push("(root): the top level cannot be nullable".into());
            }
            check_node(schema, "", form, 0, &mut errs);
        }
    }
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

fn at(path: &str) -> &str {
    if path.is_empty() { "(root)" } else { path }
}

fn join(path: &str, seg: &str) -> String {
    if path.is_empty() {
        seg.to_string()
    } else {
        format!("{path}.{seg}")
    }
}

fn check_node(v: &Value, path: &str, form: Form, depth: usize, errs: &mut Vec<String>) {
    let here = at(path).to_string();
    if depth > 64 {
        errs.push(format!("{here}: schema nested too deeply"));
        return;
    }
    let Some(m) = v.as_object() else {
        errs.push(format!("{here}: a schema must be a JSON object"));
        return;
    };
    for k in m.keys() {
        if !ACCEPTED_KEYWORDS.contains(&k.as_str()) {
            errs.push(format!("{here}: keyword \"{k}\" is not supported"));
        }
    }
    let ty: Option<String> = match m.get("type") {
        None => None,
        Some(Value::String(t)) => {
            let lower = t.to_ascii_lowercase();
            let ok_case = match form {
                Form::JsonSchema => *t == lower,
                Form::OpenApi => *t == t.to_ascii_uppercase(),
            };
            if !ACCEPTED_TYPES.contains(&lower.as_str()) || !ok_case {
                errs.push(format!("{here}: invalid type \"{t}\""));
                None
            } else {
                Some(lower)
            }
        }
        Some(Value::Array(_)) => {
            errs.push(format!(
                "{here}: type must be a single string (Proto field is not repeating); use nullable"
            ));
            None
        }
        Some(_) => {
            errs.push(format!("{here}: type must be a string"));
            None
        }
    };
    for k in ["description", "title", "pattern"] {
        if let Some(x) = m.get(k)
            && !x.is_string()
        {
            errs.push(format!("{here}: {k} must be a string"));
        }
    }
    if let Some(n) = m.get("nullable")
        && !n.is_boolean()
    {
        errs.push(format!("{here}: nullable must be a boolean"));
    }
    let ty_is = |t: &str| ty.as_deref() == Some(t);
    if let Some(e) = m.get("enum") {
        match e.as_array() {
            Some(a) if !a.is_empty() && a.iter().all(Value::is_string) => {}
            _ => errs.push(format!("{here}: enum must be a non-empty list of strings")),
        }
        if !ty_is("string") {
            errs.push(format!("{here}: enum is only supported on string schemas"));
        }
    }
    if let Some(f) = m.get("format") {
        match (f.as_str(), ty.as_deref()) {
            (Some(f), Some("string")) if ACCEPTED_STRING_FORMATS.contains(&f) => {}
            (Some("float" | "double"), Some("number")) => {}
            (Some("int32" | "int64"), Some("integer")) => {}
            (Some(f), _) => errs.push(format!("{here}: format \"{f}\" is not supported here")),
            (None, _) => errs.push(format!("{here}: format must be a string")),
        }
    }
    for k in ["minLength", "maxLength", "pattern"] {
        if m.contains_key(k) && !ty_is("string") {
            errs.push(format!("{here}: {k} is only supported on string schemas"));
        }
    }
    for k in ["minLength", "maxLength", "minItems", "maxItems"] {
        if let Some(x) = m.get(k)
            && x.as_u64().is_none()
        {
            errs.push(format!("{here}: {k} must be a non-negative integer"));
        }
    }
    for k in ["minimum", "maximum"] {
        if let Some(x) = m.get(k) {
            if !x.is_number() {
                errs.push(format!("{here}: {k} must be a number"));
            }
            if !(ty_is("number") || ty_is("integer")) {
                errs.push(format!(
                    "{here}: {k} is only supported on number and integer schemas"
                ));
            }
        }
    }
    for k in ["minItems", "maxItems"] {
        if m.contains_key(k) && !ty_is("array") {
            errs.push(format!("{here}: {k} is only supported on array schemas"));
        }
    }
    // items
    match (m.get("items"), ty_is("array")) {
        (Some(it), true) => {
            if it.is_array() {
                errs.push(format!("{here}: items must be a single schema"));
            } else {
                check_node(it, &join(path, "items"), form, depth + 1, errs);
            }
        }
        (Some(_), false) => errs.push(format!("{here}: items is only supported on array schemas")),
        (None, true) => errs.push(format!("{here}.items: missing field (arrays need items)")),
        (None, false) => {}
    }
    // properties / required
    let props = m.get("properties");
    if props.is_some() && !ty_is("object") {
        errs.push(format!(
            "{here}: properties is only supported on object schemas"
        ));
    }
    let mut names: Vec<&str> = Vec::new();
    if let Some(p) = props {
        match p.as_object() {
            Some(pm) => {
                for (k, pv) in pm {
                    if !is_valid_property_name(k) {
                        errs.push(format!(
                            "{here}: property name \"{k}\" is invalid (letters, digits and underscores, at most {MAX_PROPERTY_NAME_LEN})"
                        ));
                    }
                    names.push(k);
                    check_node(
                        pv,
                        &join(path, &format!("properties.{k}")),
                        form,
                        depth + 1,
                        errs,
                    );
                }
            }
            None => errs.push(format!("{here}: properties must be an object")),
        }
    }
    if let Some(r) = m.get("required") {
        if !ty_is("object") {
            errs.push(format!(
                "{here}: required is only supported on object schemas"
            ));
        }
        match r.as_array() {
            Some(a) => {
                let mut seen = BTreeSet::new();
                for x in a {
                    match x.as_str() {
                        Some(s) => {
                            if !names.contains(&s) {
                                errs.push(format!(
                                    "{here}: required property \"{s}\" is not defined in properties"
                                ));
                            }
                            if !seen.insert(s) {
                                errs.push(format!(
                                    "{here}: required property \"{s}\" is listed twice"
                                ));
                            }
                        }
                        None => errs.push(format!("{here}: required must list strings")),
                    }
                }
            }
            None => errs.push(format!("{here}: required must be a list")),
        }
    }
    if let Some(po) = m.get("propertyOrdering") {
        match po.as_array() {
            Some(a) => {
                for x in a {
                    if !x.as_str().is_some_and(|s| names.contains(&s)) {
                        errs.push(format!(
                            "{here}: propertyOrdering names an unknown property {x}"
                        ));
                    }
                }
            }
            None => errs.push(format!("{here}: propertyOrdering must be a list")),
        }
    }
    if let Some(a) = m.get("anyOf") {
        match a.as_array() {
            Some(branches) if !branches.is_empty() => {
                for (i, b) in branches.iter().enumerate() {
                    check_node(
                        b,
                        &join(path, &format!("anyOf[{i}]")),
                        form,
                        depth + 1,
                        errs,
                    );
                }
            }
            _ => errs.push(format!("{here}: anyOf must be a non-empty list of schemas")),
        }
    }
}
