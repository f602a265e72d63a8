//! The argument check before a tool call: the model's arguments are validated against
//! the tool's own `inputSchema` (the server's original schema, not the normalized one
//! sent to Gemini), so a violation goes back to the model as a function error it can
//! fix instead of reaching the server.
//!
//! Uses the `jsonschema` crate with its default features off: no remote `$ref` is ever
//! fetched (no HTTP, no files). A schema that does not compile (a remote `$ref`, an
//! unknown draft, a malformed keyword) is not held against the call: the arguments are
//! accepted and the problem is logged at debug level, and the server decides.

use serde_json::Value;

/// At most this many violations are listed in one message.
pub const MAX_LISTED_ERRORS: usize = 8;

/// Longest single violation text kept (long instance values are cut).
const MAX_ERROR_CHARS: usize = 300;

/// A compiled checker for one tool's `inputSchema`; build it once and reuse it for every
/// call of that tool.
pub struct ArgsChecker {
    validator: Option<jsonschema::Validator>,
}

impl std::fmt::Debug for ArgsChecker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgsChecker")
            .field("compiled", &self.validator.is_some())
            .finish()
    }
}

impl ArgsChecker {
    /// Compiles `input_schema`. A schema that does not compile gives a checker that
    /// accepts everything (logged at debug level).
    pub fn new(input_schema: &Value) -> Self {
        let validator = match jsonschema::options().build(input_schema) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::debug!(error = %e, "tool inputSchema does not compile; arguments will not be checked");
                None
            }
        };
        Self { validator }
    }

    /// Whether the schema compiled (and arguments are really checked).
    pub fn is_active(&self) -> bool {
        self.validator.is_some()
    }

    /// Checks `args` (a missing/`null` argument object counts as `{}`). On failure the
    /// message names each offending field and what is wrong, for the model to fix.
    pub fn check(&self, args: &Value) -> Result<(), String> {
        let Some(validator) = &self.validator else {
            return Ok(());
        };
        let empty = Value::Object(serde_json::Map::new());
        let args = if args.is_null() { &empty } else { args };
        let mut problems: Vec<String> = Vec::new();
        let mut total = 0usize;
        for err in validator.iter_errors(args) {
            total += 1;
            if problems.len() < MAX_LISTED_ERRORS {
                let path = err.instance_path().to_string();
                let at = if path.is_empty() {
                    "arguments".to_string()
                } else {
                    format!("argument `{}`", pointer_to_dotted(&path))
                };
                let mut msg = err.to_string();
                if msg.chars().count() > MAX_ERROR_CHARS {
                    msg = msg.chars().take(MAX_ERROR_CHARS).collect::<String>() + "…";
                }
                let line = format!("- {at}: {msg}");
                if !problems.contains(&line) {
                    problems.push(line);
                }
            }
        }
        if total == 0 {
            return Ok(());
        }
        let mut out = String::from(
            "The arguments do not match the tool's input schema, so the tool was not called:\n",
        );
        out.push_str(&problems.join("\n"));
        if total > problems.len() {
            out.push_str(&format!("\n- … and {} more", total - problems.len()));
        }
        out.push_str("\nFix the arguments and call the tool again.");
        Err(out)
    }
}

/// Checks `args` against `input_schema` (compiling the schema each time; use
/// [`ArgsChecker`] to compile once). See [`ArgsChecker::check`].
pub fn check_args(input_schema: &Value, args: &Value) -> Result<(), String> {
    ArgsChecker::new(input_schema).check(args)
}

/// `/a/0/b~1c` → `a[0].b/c`.
fn pointer_to_dotted(pointer: &str) -> String {
    let mut out = String::new();
    for tok in pointer.trim_start_matches('/').split('/') {
        let tok = tok.replace("~1", "/").replace("~0", "~");
        if !tok.is_empty() && tok.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{tok}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&tok);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "count": {"type": "integer", "minimum": 1},
                "mode": {"type": "string", "enum": ["fast", "slow"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "nested": {"type": "object", "properties": {"a/b": {"type": "boolean"}}}
            },
            "required": ["name"],
            "additionalProperties": false
        })
    }

    #[test]
    fn valid_arguments_pass() {
        assert_eq!(
            check_args(&schema(), &json!({"name": "x", "count": 2, "mode": "fast"})),
            Ok(())
        );
    }

    #[test]
    fn missing_required_field_is_named() {
        let e = check_args(&schema(), &json!({"count": 2})).unwrap_err();
        assert!(e.contains("\"name\" is a required property"), "{e}");
        assert!(e.contains("- arguments:"), "{e}");
        assert!(e.contains("Fix the arguments"), "{e}");
    }

    #[test]
    fn wrong_type_names_the_field() {
        let e = check_args(&schema(), &json!({"name": "x", "count": "two"})).unwrap_err();
        assert!(e.contains("argument `count`"), "{e}");
        assert!(e.contains("integer"), "{e}");
    }

    #[test]
    fn enum_violation_lists_allowed_values() {
        let e = check_args(&schema(), &json!({"name": "x", "mode": "medium"})).unwrap_err();
        assert!(e.contains("argument `mode`"), "{e}");
        assert!(e.contains("fast") && e.contains("slow"), "{e}");
    }

    #[test]
    fn nested_paths_are_dotted_with_indexes() {
        let e = check_args(&schema(), &json!({"name": "x", "tags": ["a", 3]})).unwrap_err();
        assert!(e.contains("argument `tags[1]`"), "{e}");
        let e = check_args(&schema(), &json!({"name": "x", "nested": {"a/b": "no"}})).unwrap_err();
        assert!(e.contains("argument `nested.a/b`"), "{e}");
    }

    #[test]
    fn unexpected_property_is_reported() {
        let e = check_args(&schema(), &json!({"name": "x", "extra": 1})).unwrap_err();
        assert!(e.contains("extra"), "{e}");
    }

    #[test]
    fn several_violations_are_all_listed() {
        let e = check_args(&schema(), &json!({"count": 0, "mode": 1})).unwrap_err();
        assert!(e.matches("\n- ").count() >= 3, "{e}");
    }

    #[test]
    fn many_violations_are_capped() {
        let mut props = serde_json::Map::new();
        let mut args = serde_json::Map::new();
        for i in 0..20 {
            props.insert(format!("p{i}"), json!({"type": "integer"}));
            args.insert(format!("p{i}"), json!("x"));
        }
        let s = json!({"type": "object", "properties": props});
        let e = check_args(&s, &Value::Object(args)).unwrap_err();
        assert!(e.contains("and 12 more"), "{e}");
    }

    #[test]
    fn null_arguments_count_as_empty_object() {
        let s = json!({"type": "object", "properties": {}});
        assert_eq!(check_args(&s, &Value::Null), Ok(()));
        let e = check_args(&schema(), &Value::Null).unwrap_err();
        assert!(e.contains("required"), "{e}");
    }

    #[test]
    fn local_refs_are_followed() {
        let s = json!({
            "type": "object",
            "$defs": {"Pos": {"type": "integer", "minimum": 1}},
            "properties": {"n": {"$ref": "#/$defs/Pos"}}
        });
        assert_eq!(check_args(&s, &json!({"n": 3})), Ok(()));
        assert!(check_args(&s, &json!({"n": 0})).is_err());
    }

    #[test]
    fn remote_refs_are_never_fetched_and_the_call_is_accepted() {
        let s = json!({
            "type": "object",
            "properties": {"n": {"$ref": "http://127.0.0.1:9/never.json"}}
        });
        let c = ArgsChecker::new(&s);
        assert!(!c.is_active());
        assert_eq!(c.check(&json!({"n": "anything"})), Ok(()));
    }

    #[test]
    fn broken_schema_is_accepted() {
        let s = json!({"type": "object", "properties": {"n": {"type": 17}}});
        assert_eq!(check_args(&s, &json!({"n": 1})), Ok(()));
    }

    #[test]
    fn draft07_schemas_work() {
        let s = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"a": {"type": "number", "exclusiveMinimum": 0}},
            "required": ["a"]
        });
        assert_eq!(check_args(&s, &json!({"a": 1})), Ok(()));
        assert!(check_args(&s, &json!({"a": 0})).is_err());
    }

    #[test]
    fn long_values_are_cut_in_messages() {
        let long = "x".repeat(5000);
        let e = check_args(&schema(), &json!({"name": "a", "count": long})).unwrap_err();
        assert!(e.len() < 1000, "{}", e.len());
    }

    #[test]
    fn checker_is_reusable() {
        let c = ArgsChecker::new(&schema());
        assert!(c.is_active());
        assert!(c.check(&json!({"name": "a"})).is_ok());
        assert!(c.check(&json!({})).is_err());
        assert!(c.check(&json!({"name": "b"})).is_ok());
    }

    #[test]
    fn pointer_conversion() {
        assert_eq!(pointer_to_dotted("/a/0/b~1c/~0d"), "a[0].b/c.~d");
        assert_eq!(pointer_to_dotted("/0"), "[0]");
    }
}
