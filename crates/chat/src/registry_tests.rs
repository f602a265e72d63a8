//! Unit tests for the tool registry.

use super::*;
use serde_json::json;
use switchboard_model::{is_valid_function_name, validate_function_declaration};

fn tool(name: &str) -> Tool {
    serde_json::from_value(json!({
        "name": name,
        "description": format!("Does {name}."),
        "inputSchema": {"type": "object", "properties": {"x": {"type": ["string", "null"]}}}
    }))
    .unwrap()
}

fn tool_with(v: Value) -> Tool {
    serde_json::from_value(v).unwrap()
}

fn reg(servers: &[(&str, Vec<Tool>)]) -> ToolRegistry {
    let refs: Vec<(&str, &[Tool])> = servers.iter().map(|(s, t)| (*s, t.as_slice())).collect();
    ToolRegistry::new(&refs)
}

fn names(r: &ToolRegistry) -> Vec<(String, String, String)> {
    let mut v: Vec<_> = r
        .tools()
        .iter()
        .map(|t| (t.server.clone(), t.tool.name.to_string(), t.name.clone()))
        .collect();
    v.sort();
    v
}

fn hash8(server: &str, tool: &str) -> String {
    identity_hash(server, tool)[..8].to_string()
}

#[test]
fn simple_names() {
    let r = reg(&[("github", vec![tool("create_issue"), tool("getMe")])]);
    assert_eq!(
        r.name_of("github", "create_issue"),
        Some("mcp_github_create_issue")
    );
    assert_eq!(r.name_of("github", "getMe"), Some("mcp_github_getMe"));
    let t = r.resolve("mcp_github_getMe").unwrap();
    assert_eq!((t.server.as_str(), t.tool_name()), ("github", "getMe"));
    assert!(r.resolve("mcp_github_nope").is_none());
    assert!(r.resolve("getMe").is_none());
}

#[test]
fn invalid_characters_become_underscores_and_dashes_stay() {
    let r = reg(&[(
        "my server.v2",
        vec![tool("get-time"), tool("a.b/c d"), tool("naïve:x")],
    )]);
    assert_eq!(
        r.name_of("my server.v2", "get-time"),
        Some("mcp_my_server_v2_get-time")
    );
    assert_eq!(
        r.name_of("my server.v2", "a.b/c d"),
        Some("mcp_my_server_v2_a_b_c_d")
    );
    assert_eq!(
        r.name_of("my server.v2", "naïve:x"),
        Some("mcp_my_server_v2_na_ve_x")
    );
}

#[test]
fn sanitize_keeps_only_the_safe_set() {
    assert_eq!(sanitize("AZaz09_-"), "AZaz09_-");
    assert_eq!(sanitize("a.b:c/d e@f"), "a_b_c_d_e_f");
    assert_eq!(sanitize("日本"), "__");
    assert_eq!(sanitize(""), "");
}

#[test]
fn long_names_are_cut_in_the_middle() {
    let long_tool = format!("begin_{}_end", "x".repeat(80));
    let r = reg(&[("server", vec![tool(&long_tool)])]);
    let name = r.name_of("server", &long_tool).unwrap().to_string();
    assert_eq!(name.len(), MAX_NAME_LEN);
    let full = format!("mcp_server_{long_tool}");
    assert_eq!(
        name,
        format!("{}___{}", &full[..30], &full[full.len() - 30..])
    );
    assert!(name.starts_with("mcp_server_begin_"));
    assert!(name.ends_with("_end"));
    assert_eq!(r.resolve(&name).unwrap().tool_name(), long_tool);
}

#[test]
fn names_of_exactly_63_are_not_cut() {
    let t = "t".repeat(63 - "mcp_s_".len());
    let r = reg(&[("s", vec![tool(&t)])]);
    assert_eq!(r.name_of("s", &t), Some(format!("mcp_s_{t}").as_str()));
}

#[test]
fn underscore_servers_collide_and_both_get_suffixes() {
    let r = reg(&[
        ("my_server", vec![tool("tool")]),
        ("my", vec![tool("server_tool")]),
    ]);
    let a = r.name_of("my_server", "tool").unwrap();
    let b = r.name_of("my", "server_tool").unwrap();
    assert_eq!(
        a,
        format!("mcp_my_server_tool_{}", hash8("my_server", "tool"))
    );
    assert_eq!(
        b,
        format!("mcp_my_server_tool_{}", hash8("my", "server_tool"))
    );
    assert_ne!(a, b);
    let ta = r.resolve(a).unwrap();
    assert_eq!((ta.server.as_str(), ta.tool_name()), ("my_server", "tool"));
    let tb = r.resolve(b).unwrap();
    assert_eq!((tb.server.as_str(), tb.tool_name()), ("my", "server_tool"));
}

#[test]
fn sanitizing_collisions_suffix_every_member_and_nobody_else() {
    let r = reg(&[(
        "s",
        vec![tool("a.b"), tool("a_b"), tool("a b"), tool("other")],
    )]);
    for raw in ["a.b", "a_b", "a b"] {
        assert_eq!(
            r.name_of("s", raw).unwrap(),
            format!("mcp_s_a_b_{}", hash8("s", raw))
        );
    }
    assert_eq!(r.name_of("s", "other"), Some("mcp_s_other"));
}

#[test]
fn truncation_collisions_are_suffixed_and_fit() {
    let head = "h".repeat(40);
    let tail = "t".repeat(40);
    let t1 = format!("{head}_one_{tail}");
    let t2 = format!("{head}_two_{tail}");
    let r = reg(&[("srv", vec![tool(&t1), tool(&t2)])]);
    let n1 = r.name_of("srv", &t1).unwrap();
    let n2 = r.name_of("srv", &t2).unwrap();
    assert_ne!(n1, n2);
    for (n, t) in [(n1, &t1), (n2, &t2)] {
        assert_eq!(n.len(), MAX_NAME_LEN);
        assert!(n.ends_with(&format!("_{}", hash8("srv", t))), "{n}");
        assert!(n.contains("___"));
        assert_eq!(r.resolve(n).unwrap().tool_name(), t.as_str());
    }
}

#[test]
fn a_suffixed_name_that_meets_a_real_name_escalates() {
    // "x.y" and "x_y" collide → mcp_s_x_y_<h>; a third tool is literally named so.
    let h = hash8("s", "x.y");
    let sneaky = format!("x_y_{h}");
    let r = reg(&[("s", vec![tool("x.y"), tool("x_y"), tool(&sneaky)])]);
    let all = names(&r);
    assert_eq!(all.len(), 3);
    let mut unique: Vec<&String> = all.iter().map(|(_, _, n)| n).collect();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 3, "{all:?}");
    for (s, t, n) in &all {
        let back = r.resolve(n).unwrap();
        assert_eq!((&back.server, back.tool_name()), (s, t.as_str()));
        assert!(n.len() <= MAX_NAME_LEN);
    }
    // The escalated members carry 16 hex characters.
    let xy = r.name_of("s", "x.y").unwrap();
    assert_eq!(
        xy,
        format!("mcp_s_x_y_{}", &identity_hash("s", "x.y")[..16])
    );
}

#[test]
fn names_do_not_depend_on_order() {
    let servers = [
        ("my_server", vec![tool("tool"), tool("b"), tool("a.b")]),
        ("my", vec![tool("server_tool"), tool("a_b")]),
        ("other", vec![tool("x"), tool(&"long".repeat(30))]),
        ("my_server_a", vec![tool("b")]),
    ];
    let base = names(&reg(&servers));
    // Every rotation of the servers, and each server's tools reversed.
    for rot in 0..servers.len() {
        let mut s: Vec<(&str, Vec<Tool>)> = servers.iter().map(|(n, t)| (*n, t.clone())).collect();
        s.rotate_left(rot);
        assert_eq!(names(&reg(&s)), base, "rotation {rot}");
        for (_, t) in s.iter_mut() {
            t.reverse();
        }
        assert_eq!(names(&reg(&s)), base, "rotation {rot} reversed");
    }
    // A server connecting late that collides with nobody changes no earlier name.
    let early = names(&reg(&servers));
    let mut with_late: Vec<(&str, Vec<Tool>)> =
        servers.iter().map(|(n, t)| (*n, t.clone())).collect();
    with_late.push(("late", vec![tool("z")]));
    let later = names(&reg(&with_late));
    for e in &early {
        assert!(later.contains(e), "{e:?}");
    }
}

#[test]
fn every_name_is_valid_for_gemini_and_openai() {
    let r = reg(&[
        ("", vec![tool("t")]),
        ("ünïcödé", vec![tool("工具"), tool("x")]),
        ("s", vec![tool(&"é".repeat(100)), tool("")]),
    ]);
    for t in r.tools() {
        assert!(is_valid_function_name(&t.name), "{}", t.name);
        assert!(
            t.name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        );
        assert!(t.name.len() <= MAX_NAME_LEN);
    }
}

#[test]
fn visibility_excludes_app_only_tools() {
    let app_only = tool_with(
        json!({"name": "app_only", "inputSchema": {"type": "object"},
        "_meta": {"ui": {"resourceUri": "ui://x", "visibility": ["app"]}}}),
    );
    let both = tool_with(json!({"name": "both", "inputSchema": {"type": "object"},
        "_meta": {"ui": {"visibility": ["model", "app"]}}}));
    let model = tool_with(json!({"name": "model", "inputSchema": {"type": "object"},
        "_meta": {"ui": {"visibility": ["model"]}}}));
    let none = tool_with(json!({"name": "none", "inputSchema": {"type": "object"},
        "_meta": {"ui": {"visibility": []}}}));
    let flat = tool_with(json!({"name": "flat", "inputSchema": {"type": "object"},
        "_meta": {"ui/visibility": ["app"]}}));
    let absent = tool_with(json!({"name": "absent", "inputSchema": {"type": "object"},
        "_meta": {"ui": {"resourceUri": "ui://y"}}}));
    let r = reg(&[(
        "s",
        vec![app_only, both, model, none, flat, absent, tool("plain")],
    )]);
    let visible: Vec<&str> = r.tools().iter().map(|t| t.tool_name()).collect();
    assert_eq!(visible, ["absent", "both", "model", "plain"]);
    assert_eq!(
        r.hidden(),
        [
            ("s".to_string(), "app_only".to_string()),
            ("s".to_string(), "flat".to_string()),
            ("s".to_string(), "none".to_string())
        ]
    );
    assert!(r.resolve("mcp_s_app_only").is_none());
}

#[test]
fn a_tool_listed_twice_is_kept_once() {
    let r = reg(&[("s", vec![tool("t"), tool("t")])]);
    assert_eq!(r.len(), 1);
    assert_eq!(r.name_of("s", "t"), Some("mcp_s_t"));
}

#[test]
fn descriptions_fall_back_to_title_then_a_generated_line() {
    let titled =
        tool_with(json!({"name": "a", "title": "Nice A", "inputSchema": {"type": "object"}}));
    let annotated = tool_with(
        json!({"name": "b", "inputSchema": {"type": "object"}, "annotations": {"title": "Nice B"}}),
    );
    let bare =
        tool_with(json!({"name": "c", "description": "  ", "inputSchema": {"type": "object"}}));
    let r = reg(&[("s", vec![titled, annotated, bare])]);
    assert_eq!(r.get("s", "a").unwrap().description, "Nice A");
    assert_eq!(r.get("s", "b").unwrap().description, "Nice B");
    assert_eq!(
        r.get("s", "c").unwrap().description,
        "Tool `c` of the MCP server `s`."
    );
}

#[test]
fn declarations_carry_normalized_schemas() {
    let r = reg(&[("s", vec![tool("t")])]);
    let (decls, omitted) = r.declarations(DEFAULT_MAX_DECLARATIONS);
    assert_eq!(omitted, Omitted::default());
    assert_eq!(omitted.notice(128), None);
    assert_eq!(decls.len(), 1);
    assert_eq!(
        decls[0].to_json(),
        json!({"name": "mcp_s_t", "description": "Does t.", "parametersJsonSchema":
            {"type": "object", "properties": {"x": {"type": "string", "nullable": true}}}})
    );
    assert_eq!(
        decls[0].to_openapi_json()["parameters"],
        json!({"type": "OBJECT", "properties": {"x": {"type": "STRING", "nullable": true}}})
    );
    assert!(validate_function_declaration(&decls[0].to_json()).is_ok());
    assert!(validate_function_declaration(&decls[0].to_openapi_json()).is_ok());
    let t = r.resolve("mcp_s_t").unwrap();
    assert_eq!(
        t.input_schema()["properties"]["x"]["type"],
        json!(["string", "null"])
    );
    assert_eq!(t.output_schema(), None);
}

fn many(n: usize) -> ToolRegistry {
    // Two servers, tools interleaved so sorting matters.
    let a: Vec<Tool> = (0..n / 2)
        .rev()
        .map(|i| tool(&format!("t{i:03}")))
        .collect();
    let b: Vec<Tool> = (n / 2..n).map(|i| tool(&format!("t{i:03}"))).collect();
    reg(&[("zeta", a), ("alpha", b)])
}

#[test]
fn all_tools_fit_without_search_tools() {
    let r = many(10);
    let (decls, omitted) = r.declarations(10);
    assert_eq!(decls.len(), 10);
    assert_eq!(omitted.count, 0);
    assert!(decls.iter().all(|d| d.name != SEARCH_TOOLS_NAME));
    // Sorted by server then tool.
    let names: Vec<&str> = decls.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names[0], "mcp_alpha_t005");
    assert_eq!(names[9], "mcp_zeta_t004");
}

#[test]
fn the_cap_leaves_tools_out_deterministically_and_adds_search_tools() {
    let r = many(200);
    let (decls, omitted) = r.declarations(DEFAULT_MAX_DECLARATIONS);
    assert_eq!(decls.len(), 128);
    assert_eq!(decls.last().unwrap().name, SEARCH_TOOLS_NAME);
    assert_eq!(omitted.count, 200 - 127);
    assert_eq!(omitted.names.len(), omitted.count);
    let mut sorted = omitted.names.clone();
    sorted.sort();
    assert_eq!(sorted, omitted.names);
    // First in (server, tool) order are kept: all of alpha (t100..t199), then zeta t000..t026.
    assert_eq!(decls[0].name, "mcp_alpha_t100");
    assert_eq!(decls[126].name, "mcp_zeta_t026");
    assert!(omitted.names.contains(&"mcp_zeta_t027".to_string()));
    assert_eq!(
        omitted.notice(128).unwrap(),
        "73 tools left out of this request (at most 128 declarations); the model can find and enable them with search_tools."
    );
    let (again, _) = r.declarations(DEFAULT_MAX_DECLARATIONS);
    assert_eq!(again, decls);
    // search_tools declaration is valid and mentions how many are hidden.
    let st = decls.last().unwrap();
    assert!(st.description.contains("73 more"));
    assert!(validate_function_declaration(&st.to_json()).is_ok());
    assert_eq!(st.parameters_json_schema["required"], json!(["query"]));
}

#[test]
fn tiny_caps() {
    let r = many(5);
    let (decls, omitted) = r.declarations(0);
    assert!(decls.is_empty());
    assert_eq!(omitted.count, 5);
    let (decls, omitted) = r.declarations(1);
    assert_eq!(decls.len(), 1);
    assert_eq!(decls[0].name, SEARCH_TOOLS_NAME);
    assert_eq!(omitted.count, 5);
    assert_eq!(omitted.notice(1).unwrap().split(' ').next(), Some("5"));
    let (decls, omitted) = r.declarations(2);
    assert_eq!(decls.len(), 2);
    assert_eq!(omitted.count, 4);
}

#[test]
fn enabled_tools_join_the_next_request() {
    let mut r = many(200);
    let (before, _) = r.declarations(128);
    assert!(!before.iter().any(|d| d.name == "mcp_zeta_t050"));
    let unknown = r.enable(["mcp_zeta_t050", "mcp_nope", "mcp_zeta_t060"]);
    assert_eq!(unknown, ["mcp_nope"]);
    assert_eq!(r.enabled(), ["mcp_zeta_t050", "mcp_zeta_t060"]);
    let (after, omitted) = r.declarations(128);
    assert_eq!(after.len(), 128);
    for n in ["mcp_zeta_t050", "mcp_zeta_t060"] {
        assert!(after.iter().any(|d| d.name == n), "{n}");
        assert!(!omitted.names.contains(&n.to_string()));
    }
    // Two tools made room: the last two of the default order are out now.
    assert!(omitted.names.contains(&"mcp_zeta_t026".to_string()));
    assert!(omitted.names.contains(&"mcp_zeta_t025".to_string()));
    assert_eq!(after.last().unwrap().name, SEARCH_TOOLS_NAME);
}

#[test]
fn most_recently_enabled_win_when_they_do_not_all_fit() {
    let mut r = many(20);
    r.enable(["mcp_zeta_t009", "mcp_zeta_t008", "mcp_zeta_t007"]);
    r.enable(["mcp_zeta_t009"]); // re-enabling moves it to the end
    assert_eq!(
        r.enabled(),
        ["mcp_zeta_t008", "mcp_zeta_t007", "mcp_zeta_t009"]
    );
    let (decls, _) = r.declarations(3);
    let names: Vec<&str> = decls.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["mcp_zeta_t007", "mcp_zeta_t009", SEARCH_TOOLS_NAME]);
}

#[test]
fn search_is_case_insensitive_and_ranked() {
    let r = reg(&[
        (
            "github",
            vec![
                tool_with(
                    json!({"name": "create_issue", "description": "Open a new GitHub issue.", "inputSchema": {"type": "object"}}),
                ),
                tool_with(
                    json!({"name": "list_issues", "description": "List issues.", "inputSchema": {"type": "object"}}),
                ),
                tool_with(
                    json!({"name": "get_me", "description": "Who am I. Can also create nothing.", "inputSchema": {"type": "object"}}),
                ),
            ],
        ),
        (
            "browser",
            vec![tool_with(
                json!({"name": "take_screenshot", "title": "Screenshot", "description": "Capture the page as PNG.", "inputSchema": {"type": "object"}}),
            )],
        ),
    ]);
    let hits = r.search("CREATE Issue");
    let names: Vec<&str> = hits.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names[0], "mcp_github_create_issue");
    assert!(names.contains(&"mcp_github_list_issues"));
    assert!(names.contains(&"mcp_github_get_me")); // "create" in the description
    assert!(!names.contains(&"mcp_browser_take_screenshot"));
    assert!(hits[0].score > hits[1].score);
    assert_eq!(hits[0].server, "github");
    assert_eq!(hits[0].tool, "create_issue");

    // Exact tool name beats everything.
    assert_eq!(r.search("list_issues")[0].name, "mcp_github_list_issues");
    // Description-only match.
    assert_eq!(r.search("png")[0].name, "mcp_browser_take_screenshot");
    // Server name and title are searched too.
    assert_eq!(r.search("browser").len(), 1);
    assert_eq!(
        r.search("screenshot")[0].name,
        "mcp_browser_take_screenshot"
    );
    assert!(r.search("kubernetes").is_empty());
    // Empty query: everything, by name.
    let all: Vec<String> = r.search("  ").into_iter().map(|h| h.name).collect();
    assert_eq!(all.len(), 4);
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted);
}

#[test]
fn handle_search_tools_enables_what_it_finds() {
    let mut r = many(200);
    let resp = r.handle_search_tools(&json!({"query": "t150"}), 10);
    assert_eq!(resp["output"]["tools"][0]["name"], "mcp_alpha_t150");
    assert!(resp["output"]["note"].as_str().unwrap().contains("enabled"));
    assert_eq!(r.enabled(), ["mcp_alpha_t150"]);

    let resp = r.handle_search_tools(&json!({"query": "zeta"}), 5);
    assert_eq!(resp["output"]["tools"].as_array().unwrap().len(), 5);
    assert!(
        resp["output"]["note"]
            .as_str()
            .unwrap()
            .contains("5 of 100")
    );
    assert_eq!(r.enabled().len(), 6);

    let resp = r.handle_search_tools(&json!({"query": "nothing-like-this"}), 5);
    assert_eq!(resp["output"]["tools"], json!([]));
    assert!(
        resp["output"]["note"]
            .as_str()
            .unwrap()
            .starts_with("No tool matched")
    );

    let resp = r.handle_search_tools(&json!({}), 5);
    assert!(resp["error"].as_str().unwrap().contains("query"));
}

#[test]
fn search_results_cut_long_descriptions() {
    let long = "word ".repeat(200);
    let mut r = reg(&[(
        "s",
        vec![tool_with(
            json!({"name": "t", "description": long, "inputSchema": {"type": "object"}}),
        )],
    )]);
    let resp = r.handle_search_tools(&json!({"query": "word"}), 5);
    let d = resp["output"]["tools"][0]["description"].as_str().unwrap();
    assert!(d.chars().count() <= 301);
    assert!(d.ends_with('…'));
}

#[test]
fn enabled_tools_carry_over_to_a_rebuilt_registry() {
    let mut old = reg(&[("my_server", vec![tool("tool")]), ("s", vec![tool("a")])]);
    old.enable(["mcp_my_server_tool", "mcp_s_a"]);
    // A new server makes `my_server/tool` collide: its name changes, it stays enabled.
    let mut new = reg(&[
        ("my_server", vec![tool("tool")]),
        ("s", vec![tool("a")]),
        ("my", vec![tool("server_tool")]),
    ]);
    new.carry_enabled_from(&old);
    let renamed = new.name_of("my_server", "tool").unwrap().to_string();
    assert_ne!(renamed, "mcp_my_server_tool");
    assert_eq!(new.enabled(), [renamed.as_str(), "mcp_s_a"]);
}

#[test]
fn normalized_schema_and_renames_are_available_for_calls() {
    let r = reg(&[(
        "s",
        vec![tool_with(json!({
            "name": "t",
            "inputSchema": {"type": "object", "properties": {"max-results": {"type": "integer"}}},
            "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}
        }))],
    )]);
    let t = r.resolve("mcp_s_t").unwrap();
    assert!(t.normalized.schema["properties"]["max_results"].is_object());
    assert_eq!(
        t.normalized.restore_args(&json!({"max_results": 3})),
        json!({"max-results": 3})
    );
    assert_eq!(
        t.output_schema().unwrap()["properties"]["n"]["type"],
        "integer"
    );
}

#[test]
fn empty_registry() {
    let r = ToolRegistry::new(&[]);
    assert!(r.is_empty());
    let (decls, omitted) = r.declarations(128);
    assert!(decls.is_empty());
    assert_eq!(omitted.count, 0);
    assert!(r.search("x").is_empty());
}

#[test]
fn a_thousand_tools_build_quickly_enough_to_not_matter() {
    // Not a benchmark (see BENCHMARKS.md); just a guard against quadratic blow-ups.
    let tools: Vec<Tool> = (0..1000).map(|i| tool(&format!("tool.{i}"))).collect();
    let start = std::time::Instant::now();
    let r = reg(&[("s", tools)]);
    assert_eq!(r.len(), 1000);
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
}

// ------------------------------------------------------------ the schema cache

use crate::schema_cache::{DEFAULT_CAPACITY, SchemaCache};

fn tool_schema(name: &str, schema: Value) -> Tool {
    tool_with(json!({"name": name, "inputSchema": schema}))
}

fn prop_schema(prop: &str) -> Value {
    json!({"type": "object", "properties": {prop: {"type": ["integer", "null"]}}})
}

fn reg_cached(cache: &SchemaCache, servers: &[(&str, Vec<Tool>)]) -> ToolRegistry {
    let refs: Vec<(&str, &[Tool])> = servers.iter().map(|(s, t)| (*s, t.as_slice())).collect();
    ToolRegistry::with_cache(&refs, cache)
}

fn shares(a: &ToolRegistry, b: &ToolRegistry, name: &str) -> bool {
    Arc::ptr_eq(
        &a.resolve(name).unwrap().normalized,
        &b.resolve(name).unwrap().normalized,
    )
}

#[test]
fn each_schema_is_normalized_once_and_again_only_when_it_changes() {
    let cache = SchemaCache::new(DEFAULT_CAPACITY);
    let tools = vec![
        tool_schema("a", prop_schema("x")),
        tool_schema("b", prop_schema("y")),
        tool_schema("c", prop_schema("z")),
        // The same content as `a`, in its own `Arc`.
        tool_schema("same_as_a", prop_schema("x")),
    ];
    let first = reg_cached(&cache, &[("s", tools.clone())]);
    assert_eq!(cache.normalizations(), 3, "a and same_as_a share one");
    assert!(shares(&first, &first, "mcp_s_a"));
    assert!(Arc::ptr_eq(
        &first.resolve("mcp_s_a").unwrap().normalized,
        &first.resolve("mcp_s_same_as_a").unwrap().normalized
    ));

    // The same tools again (the same `Arc`s, as the host's snapshots hand out).
    let second = reg_cached(&cache, &[("s", tools.clone())]);
    assert_eq!(cache.normalizations(), 3);
    for name in ["mcp_s_a", "mcp_s_b", "mcp_s_c", "mcp_s_same_as_a"] {
        assert!(shares(&first, &second, name), "{name}");
    }

    // Listed again by the server: new `Arc`s, the same content.
    let relisted: Vec<Tool> = tools
        .iter()
        .map(|t| serde_json::from_value(serde_json::to_value(t).unwrap()).unwrap())
        .collect();
    assert!(!Arc::ptr_eq(
        &relisted[1].input_schema,
        &tools[1].input_schema
    ));
    let third = reg_cached(&cache, &[("s", relisted.clone())]);
    assert_eq!(cache.normalizations(), 3);
    assert!(shares(&first, &third, "mcp_s_b"));

    // One schema changes: one more normalization, and only that tool's result is new.
    let mut changed = relisted;
    changed[1] = tool_schema("b", prop_schema("y2"));
    let fourth = reg_cached(&cache, &[("s", changed)]);
    assert_eq!(cache.normalizations(), 4);
    assert!(!shares(&third, &fourth, "mcp_s_b"));
    let b = fourth.resolve("mcp_s_b").unwrap();
    assert!(b.normalized.schema["properties"]["y2"].is_object());
    let (decls, _) = fourth.declarations(DEFAULT_MAX_DECLARATIONS);
    let decl_b = decls.iter().find(|d| d.name == "mcp_s_b").unwrap();
    assert_eq!(*decl_b.parameters_json_schema, b.normalized.schema);
    for name in ["mcp_s_a", "mcp_s_c", "mcp_s_same_as_a"] {
        assert!(shares(&third, &fourth, name), "{name}");
    }
}

#[test]
fn cached_schemas_keep_their_own_property_renames() {
    let cache = SchemaCache::new(DEFAULT_CAPACITY);
    let tools = vec![
        tool_schema("dash", prop_schema("max-results")),
        tool_schema("dot", prop_schema("max.results")),
        tool_schema("plain", prop_schema("max_results")),
    ];
    for _ in 0..2 {
        let r = reg_cached(&cache, &[("s", tools.clone())]);
        let restore = |name: &str| {
            r.resolve(name)
                .unwrap()
                .normalized
                .restore_args(&json!({"max_results": 3}))
        };
        assert_eq!(restore("mcp_s_dash"), json!({"max-results": 3}));
        assert_eq!(restore("mcp_s_dot"), json!({"max.results": 3}));
        assert_eq!(restore("mcp_s_plain"), json!({"max_results": 3}));
    }
    assert_eq!(cache.normalizations(), 3);
}

#[test]
fn the_schema_cache_stays_bounded() {
    let cache = SchemaCache::new(2);
    let five: Vec<Tool> = (0..5)
        .map(|i| tool_schema(&format!("t{i}"), prop_schema(&format!("p{i}"))))
        .collect();
    // A build larger than the capacity is cached whole…
    let _ = reg_cached(&cache, &[("s", five.clone())]);
    assert_eq!(cache.normalizations(), 5);
    assert_eq!(cache.sizes(), (5, 5));
    let _ = reg_cached(&cache, &[("s", five.clone())]);
    assert_eq!(cache.normalizations(), 5);

    // …until the next build: then only it and the most recently used others are kept,
    // up to the capacity.
    let _ = reg_cached(&cache, &[("s", vec![five[0].clone()])]);
    assert_eq!(cache.normalizations(), 5);
    let (schemas, arcs) = cache.sizes();
    assert_eq!(schemas, 2);
    assert!((1..=2).contains(&arcs), "{arcs} identities kept");

    // Tools that are gone (their `Arc`s dropped) leave no identity behind.
    drop(five);
    let other = vec![tool_schema("u", prop_schema("q"))];
    let _ = reg_cached(&cache, &[("s", other.clone())]);
    assert_eq!(cache.normalizations(), 6);
    let (schemas, arcs) = cache.sizes();
    assert!(schemas <= 2, "{schemas} schemas kept");
    assert_eq!(arcs, 1, "only `u`'s schema is still alive");

    // Many builds of many different schemas never grow it past the capacity plus the
    // latest build.
    for round in 0..20 {
        let tools: Vec<Tool> = (0..3)
            .map(|i| tool_schema(&format!("t{i}"), prop_schema(&format!("r{round}_{i}"))))
            .collect();
        let _ = reg_cached(&cache, &[("s", tools)]);
        let (schemas, arcs) = cache.sizes();
        assert!(
            schemas <= 3 && arcs <= 3,
            "round {round}: {schemas}, {arcs}"
        );
    }
    assert_eq!(cache.normalizations(), 6 + 60);
}
