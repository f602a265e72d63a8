//! The schema corpus: real tool schemas from public MCP servers
//! (`tests/fixtures/schemas/*.json`, sources in the README there). Each one must come out
//! of the normalizer valid for Gemini (both the `parametersJsonSchema` and the OpenAPI
//! `parameters` forms), with its properties, required fields, descriptions and enum
//! values kept, and the whole corpus must make a registry whose declarations the API
//! would accept.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use serde_json::Value;
use switchboard_chat::ToolRegistry;
use switchboard_chat::{normalize, to_openapi};
use switchboard_mcp::model::Tool;
use switchboard_model::{
    validate_for_gemini, validate_function_declaration, validate_openapi_for_gemini,
};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schemas")
}

/// `(server, tool JSON)` for every fixture, sorted by file name.
fn corpus() -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .expect("fixtures dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    entries.sort();
    for path in entries {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("file name")
            .to_string();
        let (server, _) = stem.split_once("__").expect("<server>__<tool>.json");
        let text = std::fs::read_to_string(&path).expect("read fixture");
        let tool: Value = serde_json::from_str(&text).expect("fixture is JSON");
        out.push((stem.clone(), server.to_string(), tool));
    }
    out
}

/// Resolves a local `$ref` (enough for the corpus: `#/...` pointers).
fn resolve<'a>(root: &'a Value, r: &str) -> Option<&'a Value> {
    let p = r.strip_prefix('#')?;
    if p.is_empty() {
        return Some(root);
    }
    root.pointer(p)
}

/// Every description string and every string enum/const value reachable from the root
/// through properties, items, unions and local refs (each ref followed once).
fn reachable_text(root: &Value) -> (BTreeSet<String>, BTreeSet<String>) {
    fn walk(
        root: &Value,
        v: &Value,
        seen: &mut HashSet<String>,
        descs: &mut BTreeSet<String>,
        enums: &mut BTreeSet<String>,
    ) {
        let Some(m) = v.as_object() else { return };
        if let Some(r) = m.get("$ref").and_then(Value::as_str)
            && seen.insert(r.to_string())
            && let Some(t) = resolve(root, r)
        {
            walk(root, t, seen, descs, enums);
        }
        if let Some(d) = m.get("description").and_then(Value::as_str)
            && !d.trim().is_empty()
        {
            descs.insert(d.to_string());
        }
        if let Some(Value::Array(e)) = m.get("enum") {
            enums.extend(e.iter().filter_map(Value::as_str).map(String::from));
        }
        if let Some(Value::String(c)) = m.get("const") {
            enums.insert(c.clone());
        }
        if let Some(Value::Object(props)) = m.get("properties") {
            for p in props.values() {
                walk(root, p, seen, descs, enums);
            }
        }
        for k in ["items", "additionalProperties"] {
            if let Some(x) = m.get(k) {
                if let Value::Array(a) = x {
                    for i in a {
                        walk(root, i, seen, descs, enums);
                    }
                } else {
                    walk(root, x, seen, descs, enums);
                }
            }
        }
        for k in ["anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(a)) = m.get(k) {
                for i in a {
                    walk(root, i, seen, descs, enums);
                }
            }
        }
    }
    let mut descs = BTreeSet::new();
    let mut enums = BTreeSet::new();
    walk(root, root, &mut HashSet::new(), &mut descs, &mut enums);
    (descs, enums)
}

#[test]
fn corpus_has_at_least_30_real_schemas_from_several_servers() {
    let c = corpus();
    assert!(c.len() >= 30, "only {} fixtures", c.len());
    let servers: BTreeSet<&str> = c.iter().map(|(_, s, _)| s.as_str()).collect();
    assert!(servers.len() >= 10, "{servers:?}");
}

#[test]
fn every_corpus_schema_normalizes_to_a_valid_gemini_schema() {
    let mut failures = Vec::new();
    for (stem, _, tool) in corpus() {
        let input = &tool["inputSchema"];
        let n = normalize(input);
        if let Err(e) = validate_for_gemini(&n.schema) {
            failures.push(format!("{stem}: parametersJsonSchema: {e:#?}"));
        }
        if let Err(e) = validate_openapi_for_gemini(&to_openapi(&n.schema)) {
            failures.push(format!("{stem}: parameters: {e:#?}"));
        }
        // Normalizing again changes nothing.
        let again = normalize(&n.schema);
        if again.schema != n.schema {
            failures.push(format!("{stem}: not idempotent"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_awkward_ones_really_are_awkward() {
    // The corpus is only a good test if the raw schemas would be rejected as they are.
    let rejected: Vec<String> = corpus()
        .into_iter()
        .filter(|(_, _, t)| validate_for_gemini(&t["inputSchema"]).is_err())
        .map(|(stem, _, _)| stem)
        .collect();
    assert!(rejected.len() >= 25, "{rejected:?}");
    let all: String = corpus()
        .iter()
        .map(|(_, _, t)| t["inputSchema"].to_string())
        .collect();
    for feature in [
        "\"$defs\"",
        "\"$ref\"",
        "\"anyOf\"",
        "\"oneOf\"",
        "\"const\"",
        "\"propertyNames\"",
        "\"exclusiveMinimum\"",
        "\"additionalProperties\":{",
        "{\"type\":\"null\"}",
        "\"type\":[",
        "\"$meta\"",
    ] {
        assert!(all.contains(feature), "no fixture has {feature}");
    }
}

#[test]
fn properties_and_required_fields_are_kept() {
    for (stem, _, tool) in corpus() {
        let input = &tool["inputSchema"];
        let n = normalize(input);
        let out_props = n.schema["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let raw_props = input["properties"].as_object().cloned().unwrap_or_default();
        for name in raw_props.keys() {
            let found = out_props.contains_key(name)
                || out_props
                    .keys()
                    .any(|k| n.renames.original_of(k) == Some(name.as_str()));
            assert!(found, "{stem}: property {name} lost");
        }
        let raw_req: BTreeSet<&str> = input["required"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .filter(|r| raw_props.contains_key(*r))
                    .collect()
            })
            .unwrap_or_default();
        let out_req: BTreeSet<&str> = n.schema["required"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(|r| n.renames.original_of(r).unwrap_or(r))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(raw_req, out_req, "{stem}: required changed");
    }
}

#[test]
fn descriptions_and_enum_values_survive() {
    for (stem, _, tool) in corpus() {
        let input = &tool["inputSchema"];
        let (descs, enums) = reachable_text(input);
        let n = normalize(input);
        let out = n.schema.to_string();
        for d in &descs {
            let quoted = serde_json::to_string(d).expect("string");
            let needle = &quoted[1..quoted.len() - 1];
            assert!(out.contains(needle), "{stem}: description lost: {d:?}");
        }
        for e in &enums {
            // As an enum value, or listed in a description (map values, non-string enums).
            let quoted = serde_json::to_string(e).expect("string");
            let escaped = &quoted[1..quoted.len() - 1];
            assert!(out.contains(escaped), "{stem}: enum value lost: {e:?}");
        }
    }
}

#[test]
fn specific_corpus_shapes() {
    let by_stem = |s: &str| -> Value {
        corpus()
            .into_iter()
            .find(|(stem, _, _)| stem == s)
            .map(|(_, _, t)| t)
            .unwrap_or_else(|| panic!("no fixture {s}"))
    };
    // pydantic Optional[str] → nullable string.
    let git = normalize(&by_stem("git__git_branch")["inputSchema"]).schema;
    assert_eq!(git["properties"]["contains"]["type"], "string");
    assert_eq!(git["properties"]["contains"]["nullable"], true);

    // Recursive pydantic model: inlined once, then a bare schema.
    let q = normalize(&by_stem("python-sdk__query")["inputSchema"]);
    let wh = &q.schema["properties"]["where"];
    assert_eq!(wh["type"], "object");
    assert_eq!(wh["nullable"], true);
    let sub = &wh["properties"]["all_of"]["items"];
    assert_eq!(sub["type"], "object");
    assert_eq!(sub["properties"]["all_of"]["items"]["type"], "object");
    assert!(
        q.notes.iter().any(|n| n.contains("recursive $ref")),
        "{:?}",
        q.notes
    );
    assert_eq!(
        q.schema["properties"]["page"]["properties"]["size"]["minimum"],
        0
    );

    // Type arrays (zod's boolean-or-string coercion).
    let st = normalize(&by_stem("sequential-thinking__sequentialthinking")["inputSchema"]).schema;
    assert!(st["properties"]["nextThoughtNeeded"]["anyOf"].is_array());

    // `$meta` is not a valid parameter name: renamed, and restored on the way back.
    let find = normalize(&by_stem("mongodb__find")["inputSchema"]);
    let args = serde_json::json!({"sort": {"x": {"_meta": "textScore"}}});
    let _ = find.restore_args(&args);
    assert!(validate_for_gemini(&find.schema).is_ok());
}

#[test]
fn corpus_registry_declarations_are_accepted() {
    let corpus = corpus();
    let mut per_server: Vec<(String, Vec<Tool>)> = Vec::new();
    for (_, server, tool) in &corpus {
        let t: Tool = serde_json::from_value(tool.clone()).expect("fixture is an MCP tool");
        match per_server.iter_mut().find(|(s, _)| s == server) {
            Some((_, v)) => v.push(t),
            None => per_server.push((server.clone(), vec![t])),
        }
    }
    let refs: Vec<(&str, &[Tool])> = per_server
        .iter()
        .map(|(s, t)| (s.as_str(), t.as_slice()))
        .collect();
    let reg = ToolRegistry::new(&refs);
    assert_eq!(reg.len() + reg.hidden().len(), corpus.len());
    let (decls, omitted) = reg.declarations(128);
    assert_eq!(omitted.count, 0);
    let mut names = HashSet::new();
    for d in &decls {
        assert!(names.insert(d.name.clone()), "duplicate {}", d.name);
        if let Err(e) = validate_function_declaration(&d.to_json()) {
            panic!("{e:#?}");
        }
        if let Err(e) = validate_function_declaration(&d.to_openapi_json()) {
            panic!("{e:#?}");
        }
        let back = reg.resolve(&d.name).expect("name maps back");
        assert_eq!(
            reg.name_of(&back.server, &back.tool.name),
            Some(d.name.as_str())
        );
    }
    // A small cap: search_tools joins and everything is still valid.
    let (decls, omitted) = reg.declarations(10);
    assert_eq!(decls.len(), 10);
    assert_eq!(omitted.count, reg.len() - 9);
    for d in &decls {
        assert!(validate_function_declaration(&d.to_json()).is_ok());
    }
}
