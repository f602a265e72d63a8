//! The OpenAPI form: a normalized schema → the OpenAPI 3.0 subset Gemini accepts in
//! `FunctionDeclaration.parameters`.

use serde_json::Value;

use super::Obj;

/// Converts a normalized schema (the output of [`normalize`](super::normalize)) to the
/// OpenAPI 3.0 subset Gemini accepts in `FunctionDeclaration.parameters`: the same
/// keywords, with type names in upper case (`OBJECT`, `STRING`, `NUMBER`, `INTEGER`,
/// `BOOLEAN`, `ARRAY`).
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
