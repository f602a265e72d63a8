//! Unit tests for the schema normalizer and validators.

use super::*;
use serde_json::json;
use switchboard_model::{
    is_valid_function_name, validate_for_gemini, validate_function_declaration,
    validate_openapi_for_gemini,
};

/// Normalizes and insists the result is valid for Gemini in both forms.
fn norm(v: Value) -> Value {
    let n = normalize(&v);
    if let Err(e) = validate_for_gemini(&n.schema) {
        panic!("invalid output {e:#?}\nfrom {v:#}\nto {:#}", n.schema);
    }
    if let Err(e) = validate_openapi_for_gemini(&to_openapi(&n.schema)) {
        panic!("invalid OpenAPI output {e:#?}\nfrom {v:#}");
    }
    n.schema
}

fn prop(schema: &Value, name: &str) -> Value {
    schema["properties"][name].clone()
}

#[test]
fn empty_schema_becomes_empty_object() {
    assert_eq!(norm(json!({})), json!({"type": "object", "properties": {}}));
    assert_eq!(
        norm(json!(true)),
        json!({"type": "object", "properties": {}})
    );
    assert_eq!(
        norm(json!(null)),
        json!({"type": "object", "properties": {}})
    );
}

#[test]
fn object_without_properties_gets_empty_properties() {
    assert_eq!(
        norm(json!({"type": "object"})),
        json!({"type": "object", "properties": {}})
    );
}

#[test]
fn properties_without_type_is_an_object() {
    let out = norm(json!({"properties": {"a": {"type": "string"}}, "required": ["a"]}));
    assert_eq!(
        out,
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
    );
}

#[test]
fn meta_keywords_are_dropped() {
    let out = norm(json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": "urn:x",
        "$comment": "c",
        "type": "object",
        "properties": {"a": {"type": "string", "examples": ["x"], "deprecated": true,
                              "readOnly": true, "writeOnly": false,
                              "contentEncoding": "base64", "contentMediaType": "text/plain"}},
        "additionalProperties": false
    }));
    assert_eq!(
        out,
        json!({"type": "object", "properties": {"a": {"type": "string"}}})
    );
}

#[test]
fn description_title_enum_and_required_are_kept() {
    let out = norm(json!({
        "type": "object",
        "title": "Args",
        "description": "All args",
        "properties": {
            "mode": {"type": "string", "enum": ["a", "b"], "description": "Mode", "title": "M"},
            "n": {"type": "integer", "minimum": 1, "maximum": 5},
            "s": {"type": "string", "minLength": 1, "maxLength": 9, "pattern": "^a"},
            "l": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3}
        },
        "required": ["mode", "n"]
    }));
    assert_eq!(out["title"], "Args");
    assert_eq!(out["description"], "All args");
    assert_eq!(
        prop(&out, "mode"),
        json!({"type": "string", "enum": ["a", "b"], "description": "Mode", "title": "M"})
    );
    assert_eq!(
        prop(&out, "n"),
        json!({"type": "integer", "minimum": 1, "maximum": 5})
    );
    assert_eq!(
        prop(&out, "s"),
        json!({"type": "string", "minLength": 1, "maxLength": 9, "pattern": "^a"})
    );
    assert_eq!(
        prop(&out, "l"),
        json!({"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3})
    );
    assert_eq!(out["required"], json!(["mode", "n"]));
}

#[test]
fn required_is_filtered_and_deduplicated() {
    let out = norm(json!({
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a", "ghost", "a", 3]
    }));
    assert_eq!(out["required"], json!(["a"]));
    let out = norm(json!({"type": "object", "properties": {"a": {}}, "required": ["ghost"]}));
    assert!(out.get("required").is_none());
}

#[test]
fn defs_refs_are_inlined() {
    let out = norm(json!({
        "$defs": {"Color": {"type": "string", "enum": ["red", "blue"], "description": "A color"}},
        "type": "object",
        "properties": {"c": {"$ref": "#/$defs/Color"}}
    }));
    assert_eq!(
        prop(&out, "c"),
        json!({"type": "string", "enum": ["red", "blue"], "description": "A color"})
    );
    assert!(out.get("$defs").is_none());
}

#[test]
fn definitions_and_pointer_refs_are_inlined() {
    let out = norm(json!({
        "definitions": {"N": {"type": "integer"}},
        "type": "object",
        "properties": {
            "a": {"$ref": "#/definitions/N"},
            "b": {"type": "object", "properties": {"x": {"type": "boolean"}}},
            "c": {"$ref": "#/properties/b"},
            "d": {"$ref": "#/properties/b/properties/x"}
        }
    }));
    assert_eq!(prop(&out, "a"), json!({"type": "integer"}));
    assert_eq!(prop(&out, "c"), prop(&out, "b"));
    assert_eq!(prop(&out, "d"), json!({"type": "boolean"}));
}

#[test]
fn pointer_escapes_and_anchors_resolve() {
    let out = norm(json!({
        "$defs": {"a/b": {"type": "string"}, "t~x": {"type": "number"}, "anch": {"$anchor": "here", "type": "boolean"}},
        "type": "object",
        "properties": {
            "p": {"$ref": "#/$defs/a~1b"},
            "q": {"$ref": "#/$defs/t~0x"},
            "r": {"$ref": "#here"},
            "s": {"$ref": "#/$defs/a%2Fb"}
        }
    }));
    assert_eq!(prop(&out, "p"), json!({"type": "string"}));
    assert_eq!(prop(&out, "q"), json!({"type": "number"}));
    assert_eq!(prop(&out, "r"), json!({"type": "boolean"}));
    assert_eq!(prop(&out, "s"), json!({"type": "string"}));
}

#[test]
fn ref_siblings_override_the_target() {
    let out = norm(json!({
        "$defs": {"S": {"type": "string", "description": "generic"}},
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/S", "description": "specific"}}
    }));
    assert_eq!(
        prop(&out, "a"),
        json!({"type": "string", "description": "specific"})
    );
}

#[test]
fn chained_refs_resolve() {
    let out = norm(json!({
        "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/C"}, "C": {"type": "integer"}},
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/A"}}
    }));
    assert_eq!(prop(&out, "x"), json!({"type": "integer"}));
}

#[test]
fn recursive_refs_become_bare_schemas_keeping_the_description() {
    let schema = json!({
        "$defs": {"Node": {
            "type": "object",
            "description": "A tree node",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
            },
            "required": ["name"]
        }},
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "required": ["root"]
    });
    let n = normalize(&schema);
    assert!(validate_for_gemini(&n.schema).is_ok());
    let root = &n.schema["properties"]["root"];
    assert_eq!(root["description"], "A tree node");
    assert_eq!(root["required"], json!(["name"]));
    // One unroll: children are nodes…
    let child = &root["properties"]["children"]["items"];
    assert_eq!(child["type"], "object");
    assert_eq!(child["properties"]["name"], json!({"type": "string"}));
    // …whose own children are bare schemas.
    let grandchild = &child["properties"]["children"]["items"];
    assert_eq!(
        grandchild,
        &json!({"type": "object", "description": "A tree node", "properties": {}})
    );
    assert!(
        n.notes.iter().any(|x| x.contains("recursive $ref")),
        "{:?}",
        n.notes
    );
}

#[test]
fn root_recursion_is_cut() {
    let schema = json!({
        "type": "object",
        "description": "expr",
        "properties": {"op": {"type": "string"}, "args": {"type": "array", "items": {"$ref": "#"}}}
    });
    let out = norm(schema);
    // The root is not entered through a $ref, so `#` unrolls twice before the bare schema.
    let inner = &out["properties"]["args"]["items"];
    assert_eq!(inner["type"], "object");
    let inner2 = &inner["properties"]["args"]["items"];
    assert_eq!(inner2["properties"]["op"], json!({"type": "string"}));
    assert_eq!(
        inner2["properties"]["args"]["items"],
        json!({"type": "object", "description": "expr", "properties": {}})
    );
}

#[test]
fn mutual_recursion_is_cut() {
    let out = norm(json!({
        "$defs": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
            "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}
        },
        "type": "object",
        "properties": {"start": {"$ref": "#/$defs/A"}}
    }));
    // Terminates, and every level is valid (checked by norm).
    assert_eq!(out["properties"]["start"]["type"], "object");
}

#[test]
fn unresolvable_and_remote_refs_are_loosened() {
    let n = normalize(&json!({
        "type": "object",
        "properties": {
            "a": {"$ref": "https://example.invalid/s.json", "description": "remote"},
            "b": {"$ref": "#/$defs/Missing"},
            "c": {"$ref": 5}
        }
    }));
    assert!(validate_for_gemini(&n.schema).is_ok());
    assert_eq!(
        n.schema["properties"]["a"],
        json!({"description": "remote"})
    );
    assert_eq!(n.schema["properties"]["b"], json!({}));
    assert!(
        n.notes
            .iter()
            .any(|x| x.contains("https://example.invalid"))
    );
}

#[test]
fn shared_refs_do_not_explode() {
    // Each level references the next twice: 2^30 paths if inlined naively.
    let mut defs = Map::new();
    for i in 0..30 {
        defs.insert(
            format!("L{i}"),
            json!({"type": "object", "properties": {
                "x": {"$ref": format!("#/$defs/L{}", i + 1)},
                "y": {"$ref": format!("#/$defs/L{}", i + 1)}
            }}),
        );
    }
    defs.insert("L30".into(), json!({"type": "string"}));
    let schema =
        json!({"$defs": defs, "type": "object", "properties": {"root": {"$ref": "#/$defs/L0"}}});
    let n = normalize(&schema);
    assert!(validate_for_gemini(&n.schema).is_ok());
    assert!(n.schema.to_string().len() < 2_000_000);
}

#[test]
fn nullable_type_arrays_collapse() {
    let out = norm(json!({
        "type": "object",
        "properties": {
            "a": {"type": ["string", "null"], "description": "maybe"},
            "b": {"type": ["null", "integer"], "minimum": 0},
            "c": {"type": ["null"]},
            "d": {"type": "null"}
        }
    }));
    assert_eq!(
        prop(&out, "a"),
        json!({"type": "string", "description": "maybe", "nullable": true})
    );
    assert_eq!(
        prop(&out, "b"),
        json!({"type": "integer", "minimum": 0, "nullable": true})
    );
    assert_eq!(prop(&out, "c"), json!({"nullable": true}));
    assert_eq!(prop(&out, "d"), json!({"nullable": true}));
}

#[test]
fn multiple_types_become_typed_anyof() {
    let out = norm(json!({
        "type": "object",
        "properties": {
            "v": {"type": ["boolean", "string", "null"], "description": "flag", "minLength": 1,
                  "enum": [true, "yes", null]},
            "w": {"type": ["object", "array"], "properties": {"k": {"type": "string"}}, "items": {"type": "number"}}
        }
    }));
    assert_eq!(
        prop(&out, "v"),
        json!({"description": "flag", "anyOf": [
            {"type": "boolean", "description": "(must be true)"},
            {"type": "string", "enum": ["yes"], "minLength": 1}
        ], "nullable": true})
    );
    assert_eq!(
        prop(&out, "w"),
        json!({"anyOf": [
            {"type": "object", "properties": {"k": {"type": "string"}}},
            {"type": "array", "items": {"type": "number"}}
        ]})
    );
}

#[test]
fn anyof_with_null_collapses_to_nullable() {
    // pydantic's Optional[str] = None
    let out = norm(json!({
        "type": "object",
        "properties": {"contains": {
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "default": null,
            "description": "The commit sha",
            "title": "Contains"
        }}
    }));
    assert_eq!(
        prop(&out, "contains"),
        json!({"type": "string", "description": "The commit sha", "title": "Contains", "nullable": true})
    );
}

#[test]
fn optional_model_ref_collapses() {
    // pydantic's Optional[Model]
    let out = norm(json!({
        "$defs": {"Opts": {"type": "object", "title": "Opts", "properties": {"deep": {"type": "boolean"}}}},
        "type": "object",
        "properties": {"opts": {"anyOf": [{"$ref": "#/$defs/Opts"}, {"type": "null"}], "default": null}}
    }));
    assert_eq!(
        prop(&out, "opts"),
        json!({"type": "object", "title": "Opts", "properties": {"deep": {"type": "boolean"}}, "nullable": true})
    );
}

#[test]
fn oneof_is_read_as_anyof() {
    let out = norm(json!({
        "type": "object",
        "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "integer"}], "description": "id"}}
    }));
    assert_eq!(
        prop(&out, "x"),
        json!({"anyOf": [{"type": "string"}, {"type": "integer"}], "description": "id"})
    );
}

#[test]
fn anyof_with_an_unconstrained_branch_is_dropped() {
    let out = norm(json!({
        "type": "object",
        "properties": {"x": {"anyOf": [{"type": "string"}, {}], "description": "anything"}}
    }));
    assert_eq!(prop(&out, "x"), json!({"description": "anything"}));
}

#[test]
fn union_branches_inherit_parent_constraints() {
    // "one of these fields is required" on an object.
    let out = norm(json!({
        "type": "object",
        "properties": {"q": {
            "type": "object",
            "properties": {"id": {"type": "string"}, "name": {"type": "string"}},
            "anyOf": [{"required": ["id"]}, {"required": ["name"]}]
        }}
    }));
    assert_eq!(
        prop(&out, "q"),
        json!({"anyOf": [
            {"type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string"}}, "required": ["id"]},
            {"type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string"}}, "required": ["name"]}
        ]})
    );
}

#[test]
fn union_of_consts_becomes_one_enum() {
    let out = norm(json!({
        "type": "object",
        "properties": {"dir": {"anyOf": [
            {"type": "number", "const": 1},
            {"type": "string", "const": "asc"},
            {"type": "string", "const": "desc"}
        ]}}
    }));
    assert_eq!(
        prop(&out, "dir"),
        json!({"anyOf": [
            {"type": "number", "description": "(must be 1)"},
            {"type": "string", "enum": ["asc", "desc"]}
        ]})
    );
}

#[test]
fn allof_is_merged() {
    let out = norm(json!({
        "type": "object",
        "properties": {"x": {
            "description": "merged",
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"type": "integer"}}, "required": ["b"]}
            ]
        }}
    }));
    assert_eq!(
        prop(&out, "x"),
        json!({"description": "merged", "type": "object",
               "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
               "required": ["a", "b"]})
    );
}

#[test]
fn allof_with_a_ref_is_merged() {
    let out = norm(json!({
        "$defs": {"Base": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
        "type": "object",
        "properties": {"x": {"allOf": [{"$ref": "#/$defs/Base"}], "description": "extended"}}
    }));
    assert_eq!(
        prop(&out, "x"),
        json!({"description": "extended", "type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]})
    );
}

#[test]
fn const_becomes_enum_or_description() {
    let out = norm(json!({
        "type": "object",
        "properties": {
            "s": {"type": "string", "const": "classic"},
            "u": {"const": "workspace"},
            "n": {"type": "integer", "const": 3, "description": "Three"},
            "b": {"const": true}
        }
    }));
    assert_eq!(
        prop(&out, "s"),
        json!({"type": "string", "enum": ["classic"]})
    );
    assert_eq!(
        prop(&out, "u"),
        json!({"type": "string", "enum": ["workspace"]})
    );
    assert_eq!(
        prop(&out, "n"),
        json!({"type": "integer", "description": "Three. (must be 3)"})
    );
    assert_eq!(
        prop(&out, "b"),
        json!({"type": "boolean", "description": "(must be true)"})
    );
}

#[test]
fn enums_are_strings_on_string_schemas_and_described_otherwise() {
    let out = norm(json!({
        "type": "object",
        "properties": {
            "s": {"type": "string", "enum": ["a", 1, true]},
            "i": {"type": "integer", "enum": [1, 2, 3], "description": "Level"},
            "x": {"enum": ["a", "b"]},
            "y": {"enum": [1, 2.5]},
            "z": {"enum": ["a", null]},
            "mixed": {"enum": ["a", 1]}
        }
    }));
    assert_eq!(
        prop(&out, "s"),
        json!({"type": "string", "enum": ["a", "1", "true"]})
    );
    assert_eq!(
        prop(&out, "i"),
        json!({"type": "integer", "description": "Level. (allowed values: 1, 2, 3)"})
    );
    assert_eq!(
        prop(&out, "x"),
        json!({"type": "string", "enum": ["a", "b"]})
    );
    assert_eq!(
        prop(&out, "y"),
        json!({"type": "number", "description": "(allowed values: 1, 2.5)"})
    );
    assert_eq!(
        prop(&out, "z"),
        json!({"type": "string", "enum": ["a"], "nullable": true})
    );
    assert_eq!(
        prop(&out, "mixed"),
        json!({"description": "(allowed values: \"a\", 1)"})
    );
}

#[test]
fn only_accepted_string_formats_are_kept() {
    let out = norm(json!({
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date-time"},
            "e": {"type": "string", "format": "enum", "enum": ["a"]},
            "url": {"type": "string", "format": "uri", "description": "URL to fetch"},
            "id": {"type": "string", "format": "uuid"},
            "n": {"type": "integer", "format": "int64"}
        }
    }));
    assert_eq!(
        prop(&out, "when"),
        json!({"type": "string", "format": "date-time"})
    );
    assert_eq!(
        prop(&out, "e"),
        json!({"type": "string", "enum": ["a"], "format": "enum"})
    );
    assert_eq!(
        prop(&out, "url"),
        json!({"type": "string", "description": "URL to fetch. (format: uri)"})
    );
    assert_eq!(
        prop(&out, "id"),
        json!({"type": "string", "description": "(format: uuid)"})
    );
    assert_eq!(prop(&out, "n"), json!({"type": "integer"}));
}

#[test]
fn exclusive_bounds_fold_into_min_max() {
    let out = norm(json!({
        "type": "object",
        "properties": {
            "w": {"type": "integer", "exclusiveMinimum": 0, "maximum": 9007199254740991u64, "description": "Page width"},
            "r": {"type": "number", "exclusiveMaximum": 1.5},
            "old": {"type": "number", "minimum": 0, "exclusiveMinimum": true}
        }
    }));
    assert_eq!(
        prop(&out, "w"),
        json!({"type": "integer", "description": "Page width. (must be greater than 0)", "minimum": 0, "maximum": 9007199254740991u64})
    );
    assert_eq!(
        prop(&out, "r"),
        json!({"type": "number", "maximum": 1.5, "description": "(must be less than 1.5)"})
    );
    assert_eq!(
        prop(&out, "old"),
        json!({"type": "number", "minimum": 0, "description": "(must be greater than 0)"})
    );
}

#[test]
fn rejected_keywords_are_dropped() {
    let n = normalize(&json!({
        "type": "object",
        "properties": {
            "m": {"type": "object", "propertyNames": {"type": "string"}, "additionalProperties": {"type": "string"},
                  "patternProperties": {"^x": {}}, "unevaluatedProperties": false, "minProperties": 1,
                  "maxProperties": 3, "dependentRequired": {"a": ["b"]}, "dependentSchemas": {}},
            "c": {"type": "string", "if": {"minLength": 1}, "then": {}, "else": {}, "not": {"const": ""}},
            "l": {"type": "array", "items": {"type": "integer", "multipleOf": 2}, "uniqueItems": true, "contains": {}}
        }
    }));
    assert!(validate_for_gemini(&n.schema).is_ok(), "{:#}", n.schema);
    assert_eq!(
        n.schema["properties"]["m"],
        json!({"type": "object", "properties": {}, "description": "(an object with free-form keys; each value: string)"})
    );
    assert_eq!(n.schema["properties"]["c"], json!({"type": "string"}));
    assert_eq!(
        n.schema["properties"]["l"],
        json!({"type": "array", "items": {"type": "integer"}})
    );
    for k in [
        "propertyNames",
        "if",
        "not",
        "uniqueItems",
        "multipleOf",
        "minProperties",
    ] {
        assert!(
            n.notes
                .iter()
                .any(|x| x.contains(&format!("`{k}` dropped"))),
            "{k}: {:?}",
            n.notes
        );
    }
}

#[test]
fn defaults_move_into_the_description() {
    let out = norm(json!({
        "type": "object",
        "properties": {
            "a": {"type": "integer", "default": 5000, "description": "Maximum number of characters"},
            "b": {"type": "boolean", "default": false},
            "c": {"type": "string", "default": "x", "description": "Defaults to x"},
            "d": {"type": "string", "default": null},
            "e": {"type": "string", "default": "y".repeat(200)},
            "f": {"anyOf": [{"type": "string"}, {"type": "integer"}], "default": "z"}
        }
    }));
    assert_eq!(
        prop(&out, "a")["description"],
        "Maximum number of characters. (default: 5000)"
    );
    assert_eq!(prop(&out, "b")["description"], "(default: false)");
    assert_eq!(prop(&out, "c")["description"], "Defaults to x");
    assert!(prop(&out, "d").get("description").is_none());
    assert!(prop(&out, "e").get("description").is_none());
    assert_eq!(prop(&out, "f")["description"], "(default: \"z\")");
    assert!(prop(&out, "f").get("default").is_none());
}

#[test]
fn arrays_always_have_items() {
    let out = norm(json!({
        "type": "object",
        "properties": {
            "a": {"type": "array"},
            "t": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
            "p": {"type": "array", "prefixItems": [{"type": "string"}]},
            "i": {"items": {"type": "string"}}
        }
    }));
    assert_eq!(prop(&out, "a"), json!({"type": "array", "items": {}}));
    assert_eq!(
        prop(&out, "t"),
        json!({"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}})
    );
    assert_eq!(
        prop(&out, "p"),
        json!({"type": "array", "items": {"type": "string"}})
    );
    assert_eq!(
        prop(&out, "i"),
        json!({"type": "array", "items": {"type": "string"}})
    );
}

#[test]
fn boolean_subschemas() {
    let n = normalize(&json!({"type": "object", "properties": {"t": true, "f": false}}));
    assert!(validate_for_gemini(&n.schema).is_ok());
    assert_eq!(n.schema["properties"]["t"], json!({}));
    assert_eq!(n.schema["properties"]["f"], json!({}));
    assert!(n.notes.iter().any(|x| x.contains("`false` schema")));
}

#[test]
fn unknown_types_are_loosened() {
    let out = norm(
        json!({"type": "object", "properties": {"f": {"type": "file", "description": "upload"}}}),
    );
    assert_eq!(prop(&out, "f"), json!({"description": "upload"}));
}

#[test]
fn invalid_property_names_are_renamed_and_restored() {
    let n = normalize(&json!({
        "type": "object",
        "properties": {
            "max-results": {"type": "integer"},
            "max_results": {"type": "integer"},
            "$meta": {"type": "string"},
            "ok": {"type": "object", "properties": {"a.b": {"type": "string"}}},
            "list": {"type": "array", "items": {"type": "object", "properties": {"x y": {"type": "string"}}}},
            "päd": {"type": "string"}
        },
        "required": ["max-results", "$meta"]
    }));
    assert!(validate_for_gemini(&n.schema).is_ok(), "{:#}", n.schema);
    let props: Vec<&String> = n.schema["properties"]
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    assert_eq!(
        props,
        ["max_results_2", "max_results", "_meta", "ok", "list", "p_d"]
    );
    assert_eq!(n.schema["required"], json!(["max_results_2", "_meta"]));
    assert_eq!(n.renames.original_of("max_results_2"), Some("max-results"));
    assert_eq!(n.renames.original_of("max_results"), None);
    assert_eq!(n.renames.original_of("ok"), None);
    let args = json!({
        "max_results_2": 3, "max_results": 4, "_meta": "m",
        "ok": {"a_b": "x"}, "list": [{"x_y": "1"}, {"x_y": "2"}], "p_d": "u", "extra": 1
    });
    assert_eq!(
        n.restore_args(&args),
        json!({
            "max-results": 3, "max_results": 4, "$meta": "m",
            "ok": {"a.b": "x"}, "list": [{"x y": "1"}, {"x y": "2"}], "päd": "u", "extra": 1
        })
    );
}

#[test]
fn long_property_names_are_cut_to_64() {
    let long = format!("a-{}", "b".repeat(100));
    let n = normalize(&json!({"type": "object", "properties": {long.clone(): {"type": "string"}}}));
    assert!(validate_for_gemini(&n.schema).is_ok());
    let key = n.schema["properties"]
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .unwrap_or_default();
    assert_eq!(key.len(), 64);
    assert_eq!(n.restore_args(&json!({key: 1})), json!({long: 1}));
}

#[test]
fn restore_args_is_identity_without_renames() {
    let n = normalize(&json!({"type": "object", "properties": {"a": {"type": "string"}}}));
    assert!(n.renames.is_empty());
    let args = json!({"a": "x", "b": [1, 2]});
    assert_eq!(n.restore_args(&args), args);
}

#[test]
fn renames_inside_refs_and_unions_are_restored() {
    let n = normalize(&json!({
        "$defs": {"S": {"type": "object", "properties": {"$meta": {"type": "string"}}}},
        "type": "object",
        "properties": {"sort": {"anyOf": [{"$ref": "#/$defs/S"}, {"type": "null"}]}}
    }));
    assert!(validate_for_gemini(&n.schema).is_ok());
    assert_eq!(
        n.restore_args(&json!({"sort": {"_meta": "x"}})),
        json!({"sort": {"$meta": "x"}})
    );
}

#[test]
fn top_level_union_of_objects_is_merged() {
    let out = norm(json!({
        "anyOf": [
            {"type": "object", "properties": {"id": {"type": "string"}, "k": {"type": "string"}}, "required": ["id", "k"]},
            {"type": "object", "properties": {"name": {"type": "string"}, "k": {"type": "string"}}, "required": ["name", "k"]}
        ],
        "description": "lookup"
    }));
    assert_eq!(
        out,
        json!({"description": "lookup", "type": "object",
               "properties": {"id": {"type": "string"}, "k": {"type": "string"}, "name": {"type": "string"}},
               "required": ["k"]})
    );
}

#[test]
fn top_level_non_object_becomes_object() {
    assert_eq!(
        norm(json!({"type": "string"})),
        json!({"type": "object", "properties": {}})
    );
    assert_eq!(
        norm(json!({"type": ["object", "null"], "properties": {"a": {"type": "string"}}})),
        json!({"type": "object", "properties": {"a": {"type": "string"}}})
    );
}

#[test]
fn deep_nesting_is_cut() {
    let mut s = json!({"type": "string"});
    for _ in 0..100 {
        s = json!({"type": "object", "properties": {"n": s}});
    }
    let n = normalize(&s);
    assert!(validate_for_gemini(&n.schema).is_ok());
    assert!(n.notes.iter().any(|x| x.contains("too deep")));
}

#[test]
fn normalizing_is_idempotent() {
    let inputs = [
        json!({"type": "object", "properties": {"a": {"type": ["string", "null"], "format": "uri", "default": "x"}}}),
        json!({"$defs": {"A": {"type": "integer", "exclusiveMinimum": 0}}, "properties": {"a": {"$ref": "#/$defs/A"}}}),
        json!({"type": "object", "properties": {"u": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}}}),
    ];
    for i in inputs {
        let once = norm(i);
        let twice = norm(once.clone());
        assert_eq!(once, twice);
    }
}

#[test]
fn to_openapi_uppercases_types_everywhere() {
    let n = normalize(&json!({
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "integer"}}}},
            "u": {"anyOf": [{"type": "string"}, {"type": "boolean"}]}
        }
    }));
    let o = to_openapi(&n.schema);
    assert_eq!(
        o,
        json!({"type": "OBJECT", "properties": {
            "a": {"type": "ARRAY", "items": {"type": "OBJECT", "properties": {"b": {"type": "INTEGER"}}}},
            "u": {"anyOf": [{"type": "STRING"}, {"type": "BOOLEAN"}]}
        }})
    );
    assert!(validate_openapi_for_gemini(&o).is_ok());
    assert!(validate_for_gemini(&o).is_err());
    assert!(validate_openapi_for_gemini(&n.schema).is_err());
}

fn errs(v: Value) -> Vec<String> {
    match validate_for_gemini(&v) {
        Ok(()) => Vec::new(),
        Err(e) => e,
    }
}

fn has(errors: &[String], needle: &str) -> bool {
    errors.iter().any(|e| e.contains(needle))
}

#[test]
fn validator_accepts_a_typical_schema() {
    assert!(
        validate_for_gemini(&json!({
            "type": "object",
            "properties": {"q": {"type": "string", "description": "d", "enum": ["a"]},
                           "l": {"type": "array", "items": {"type": "number"}, "minItems": 1},
                           "o": {"type": "object", "properties": {}, "nullable": true},
                           "any": {},
                           "u": {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]}},
            "required": ["q"],
            "propertyOrdering": ["q", "l"]
        }))
        .is_ok()
    );
}

#[test]
fn validator_rejects_what_gemini_rejects() {
    assert!(has(
        &errs(json!({"type": "string"})),
        "top-level type must be \"object\""
    ));
    assert!(has(&errs(json!([])), "schema must be an object"));
    assert!(has(
        &errs(json!({"type": "object", "nullable": true})),
        "cannot be nullable"
    ));
    let e = errs(json!({
        "type": "object",
        "$schema": "x",
        "properties": {
            "a": {"type": ["string", "null"]},
            "b": {"$ref": "#/$defs/B"},
            "c": {"type": "integer", "enum": [1, 2]},
            "d": {"type": "string", "format": "uri"},
            "e": {"type": "array"},
            "f": {"type": "number", "exclusiveMinimum": 0},
            "g": {"type": "object", "propertyNames": {"type": "string"}, "additionalProperties": {}},
            "h": {"type": "null"},
            "i": {"type": "string", "minItems": 1, "minimum": 2},
            "j-k": {"type": "string"},
            "l": {"type": "array", "items": [{"type": "string"}]},
            "m": {"type": "string", "const": "x", "default": "x"},
            "n": {"type": "STRING"},
            "o": {"anyOf": []},
            "p": {"type": "string", "properties": {}},
            "q": {"type": "string", "description": 5, "nullable": "yes"}
        },
        "required": ["a", "zz", "a"]
    }));
    for needle in [
        "(root): keyword \"$schema\" is not supported",
        "properties.a: type must be a single string",
        "properties.b: keyword \"$ref\" is not supported",
        "properties.c: enum must be a non-empty list of strings",
        "properties.c: enum is only supported on string schemas",
        "properties.d: format \"uri\" is not supported here",
        "properties.e.items: missing field",
        "properties.f: keyword \"exclusiveMinimum\" is not supported",
        "properties.g: keyword \"propertyNames\" is not supported",
        "properties.g: keyword \"additionalProperties\" is not supported",
        "properties.h: invalid type \"null\"",
        "properties.i: minItems is only supported on array schemas",
        "properties.i: minimum is only supported on number and integer schemas",
        "property name \"j-k\" is invalid",
        "properties.l: items must be a single schema",
        "properties.m: keyword \"const\" is not supported",
        "properties.m: keyword \"default\" is not supported",
        "properties.n: invalid type \"STRING\"",
        "properties.o: anyOf must be a non-empty list",
        "properties.p: properties is only supported on object schemas",
        "properties.q: description must be a string",
        "properties.q: nullable must be a boolean",
        "required property \"zz\" is not defined",
        "required property \"a\" is listed twice",
    ] {
        assert!(has(&e, needle), "missing {needle:?} in {e:#?}");
    }
}

#[test]
fn validator_checks_nested_nodes() {
    let e = errs(
        json!({"type": "object", "properties": {"a": {"type": "array", "items": {"anyOf": [{"type": "object", "properties": {"x": {"const": 1}}}]}}}}),
    );
    assert!(
        has(
            &e,
            "properties.a.items.anyOf[0].properties.x: keyword \"const\""
        ),
        "{e:#?}"
    );
}

#[test]
fn function_declarations_are_checked() {
    let ok = json!({"name": "mcp_s_t", "description": "d", "parametersJsonSchema": {"type": "object", "properties": {}}});
    assert!(validate_function_declaration(&ok).is_ok());
    let ok_openapi = json!({"name": "a.b:c-d", "parameters": {"type": "OBJECT", "properties": {}}});
    assert!(validate_function_declaration(&ok_openapi).is_ok());
    assert!(validate_function_declaration(&json!({"name": "x"})).is_ok());

    let both = json!({"name": "x", "parameters": {"type": "OBJECT"}, "parametersJsonSchema": {"type": "object"}});
    assert!(has(
        &validate_function_declaration(&both).unwrap_err(),
        "mutually exclusive"
    ));
    for bad in ["1abc", "has space", "", &"a".repeat(65), "a/b"] {
        let d = json!({"name": bad});
        assert!(
            has(
                &validate_function_declaration(&d).unwrap_err(),
                "is invalid"
            ),
            "{bad}"
        );
    }
    let unknown = json!({"name": "x", "strict": true});
    assert!(has(
        &validate_function_declaration(&unknown).unwrap_err(),
        "unknown field \"strict\""
    ));
    let bad_schema = json!({"name": "x", "parametersJsonSchema": {"type": "object", "properties": {"a": {"type": ["string", "null"]}}}});
    assert!(has(
        &validate_function_declaration(&bad_schema).unwrap_err(),
        "x.parametersJsonSchema: properties.a"
    ));
    let bad_openapi = json!({"name": "x", "parameters": {"type": "object"}});
    assert!(has(
        &validate_function_declaration(&bad_openapi).unwrap_err(),
        "x.parameters: (root)"
    ));
    assert!(validate_function_declaration(&json!("x")).is_err());
    assert!(has(
        &validate_function_declaration(&json!({})).unwrap_err(),
        "no name"
    ));
}

#[test]
fn valid_function_names() {
    assert!(is_valid_function_name("_x"));
    assert!(is_valid_function_name("mcp_my-server_tool.v2:x"));
    assert!(is_valid_function_name(&"a".repeat(64)));
    assert!(!is_valid_function_name(&"a".repeat(65)));
    assert!(!is_valid_function_name("-x"));
    assert!(!is_valid_function_name("é"));
}

#[test]
fn notes_explain_lossy_changes() {
    let n = normalize(&json!({
        "type": "object",
        "properties": {
            "a": {"type": "string", "format": "email"},
            "b": {"type": "number", "exclusiveMinimum": 0},
            "c": {"type": "integer", "enum": [1]}
        },
        "required": ["zz"]
    }));
    let all = n.notes.join("\n");
    assert!(
        all.contains("/properties/a: string format `email` moved to the description"),
        "{all}"
    );
    assert!(all.contains("/properties/b: exclusive bounds"), "{all}");
    assert!(
        all.contains("/properties/c: non-string enum/const"),
        "{all}"
    );
    assert!(
        all.contains("(top level): required `zz` is not a property"),
        "{all}"
    );
}

#[test]
fn nested_unions_are_flattened() {
    let out = norm(json!({
        "$defs": {"Block": {"anyOf": [{"type": "object", "properties": {"p": {"type": "string"}}}, {"type": "integer"}]}},
        "type": "object",
        "properties": {"x": {"anyOf": [{"$ref": "#/$defs/Block"}, {"type": "string"}, {"type": "integer"}]}}
    }));
    assert_eq!(
        prop(&out, "x"),
        json!({"anyOf": [
            {"type": "object", "properties": {"p": {"type": "string"}}},
            {"type": "integer"},
            {"type": "string"}
        ]})
    );
}

#[test]
fn free_form_maps_describe_their_values() {
    let out = norm(json!({
        "type": "object",
        "properties": {"sort": {
            "type": "object",
            "description": "Sort order.",
            "additionalProperties": {"anyOf": [{"const": 1}, {"const": -1}, {"type": "string", "enum": ["asc", "desc"]}]}
        }}
    }));
    assert_eq!(
        prop(&out, "sort")["description"],
        "Sort order. (an object with free-form keys; each value: integer (must be 1) or integer (must be -1) or string, one of: asc, desc)"
    );
}
