//! Validation before a run: every problem at once, each with its line.
//!
//! - unknown node types (and GemiHub-only ones), unknown properties, missing required
//!   properties, values that cannot work (`timeout: soon`, a condition without an
//!   operator, `args` that is not JSON);
//! - duplicate ids, `next`/`trueNext`/`falseNext` pointing at no node, `next` jumping
//!   back to a node that is not a `while`;
//! - unknown server names (when the configured servers are known);
//! - a variable used before it is set: a must-be-set analysis over the flow graph,
//!   starting from the inputs (`--var`, `--vars-file`, a parent's `input`).

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::path::Path;

use serde_json::Value;

use crate::graph::{END, is_branch, successors};
use crate::parse::{Node, Workflow};
use crate::problem::{Problem, did_you_mean};
use crate::spec::{
    COMMON, GEMIHUB_ONLY_PROPS, GEMIHUB_ONLY_TYPES, NodeSpec, is_templated, kinds, spec,
};
use crate::template::{has_placeholders, placeholders, replace_placeholders};

/// What validation knows besides the file.
#[derive(Debug, Clone, Default)]
pub struct ValidateOptions {
    /// Variables set before the run starts.
    pub inputs: BTreeSet<String>,
    /// The configured servers' names, when known (checks `server` and `mcpServers`).
    pub servers: Option<Vec<String>>,
}

/// Every problem in `wf`, sorted by line. Empty when it can run.
pub fn validate(wf: &Workflow, opts: &ValidateOptions) -> Vec<Problem> {
    let mut problems = wf.read_problems.clone();
    let mut first_line: HashMap<&str, usize> = HashMap::new();
    for node in &wf.nodes {
        if let Some(line) = first_line.get(node.id.as_str()) {
            problems.push(Problem::node(
                node.line,
                &node.id,
                format!("duplicate id `{}` (first used on line {line})", node.id),
            ));
        } else {
            first_line.insert(&node.id, node.line);
        }
    }
    for (i, node) in wf.nodes.iter().enumerate() {
        check_node(wf, i, node, opts, &mut problems);
    }
    check_variables(wf, opts, &mut problems);
    problems.sort_by_key(|p| p.line.unwrap_or(0));
    problems
}

fn check_node(
    wf: &Workflow,
    i: usize,
    node: &Node,
    opts: &ValidateOptions,
    out: &mut Vec<Problem>,
) {
    let mut problem = |line: usize, msg: String| out.push(Problem::node(line, &node.id, msg));
    if node.kind.is_empty() {
        problem(
            node.line,
            format!("missing `type` (one of: {})", kinds().join(", ")),
        );
        return;
    }
    let Some(spec) = spec(&node.kind) else {
        if GEMIHUB_ONLY_TYPES.contains(&node.kind.as_str()) {
            problem(
                node.line,
                format!(
                    "`{}` is a GemiHub node type that Switchboard does not run (it needs Google Drive, GemiHub's UI or its script sandbox)",
                    node.kind
                ),
            );
        } else {
            problem(
                node.line,
                format!(
                    "unknown node type `{}`{}; Switchboard runs: {}",
                    node.kind,
                    did_you_mean(&node.kind, &kinds()),
                    kinds().join(", ")
                ),
            );
        }
        return;
    };
    check_props(node, spec, &mut problem);
    check_values(wf, node, opts, &mut problem);
    check_targets(wf, i, node, &mut problem);
}

fn check_props(node: &Node, spec: &NodeSpec, problem: &mut impl FnMut(usize, String)) {
    let allowed: Vec<&str> = COMMON
        .iter()
        .chain(spec.required)
        .chain(spec.optional)
        .copied()
        .collect();
    for (key, prop) in &node.props {
        if allowed.contains(&key.as_str()) {
            continue;
        }
        if key == "next" && is_branch(&node.kind) {
            problem(
                prop.line,
                format!(
                    "`next` does not apply to an `{}` node: use `trueNext` and `falseNext`",
                    node.kind
                ),
            );
        } else if GEMIHUB_ONLY_PROPS.contains(&(node.kind.as_str(), key.as_str())) {
            if key == "driveToolMode" && prop.value == "none" {
                continue;
            }
            problem(
                prop.line,
                format!(
                    "`{key}` is a GemiHub-only property (Google Drive or image generation) that Switchboard does not support"
                ),
            );
        } else {
            problem(
                prop.line,
                format!(
                    "unknown property `{key}` for a `{}` node{}; it takes: {}",
                    node.kind,
                    did_you_mean(key, &allowed),
                    allowed
                        .iter()
                        .filter(|a| **a != "comment")
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
    }
    for req in spec.required {
        if node.get(req).is_none() {
            problem(node.line, format!("missing required property `{req}`"));
        }
    }
    if node.kind == "mcp" {
        match (node.get("url"), node.get("server")) {
            (None, None) => problem(
                node.line,
                "missing required property `url` (or `server`: the name of a configured server)"
                    .into(),
            ),
            (Some(_), Some(_)) => problem(
                node.line_of("server"),
                "give `url` or `server`, not both".into(),
            ),
            _ => {}
        }
    }
}

fn literal<'a>(node: &'a Node, key: &str) -> Option<(&'a str, usize)> {
    let prop = node.props.get(key)?;
    if prop.value.is_empty() || has_placeholders(&prop.value) {
        None
    } else {
        Some((prop.value.as_str(), prop.line))
    }
}

fn check_values(
    wf: &Workflow,
    node: &Node,
    opts: &ValidateOptions,
    problem: &mut impl FnMut(usize, String),
) {
    for key in [
        "throwOnError",
        "continueOnError",
        "confirm",
        "enableThinking",
    ] {
        if let Some((v, line)) = literal(node, key)
            && v != "true"
            && v != "false"
        {
            problem(
                line,
                format!("`{key}` must be \"true\" or \"false\", not `{v}`"),
            );
        }
    }
    if let Some((v, line)) = literal(node, "timeout")
        && v.trim().parse::<u64>().map_or(true, |n| n == 0)
    {
        problem(
            line,
            format!("`timeout` must be a positive number of milliseconds, not `{v}`"),
        );
    }
    if node.kind == "sleep"
        && let Some((v, line)) = literal(node, "duration")
        && v.trim().parse::<u64>().is_err()
    {
        problem(
            line,
            format!("`duration` must be a number of milliseconds, not `{v}`"),
        );
    }
    if let Some((v, line)) = literal(node, "method") {
        const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];
        if !METHODS.contains(&v.to_ascii_uppercase().as_str()) {
            problem(
                line,
                format!("unknown HTTP method `{v}` (use {})", METHODS.join(", ")),
            );
        }
    }
    if let Some((v, line)) = literal(node, "contentType") {
        const TYPES: &[&str] = &["json", "text", "form-data", "binary"];
        if !TYPES.contains(&v) {
            problem(
                line,
                format!(
                    "unknown contentType `{v}`{} (use {})",
                    did_you_mean(v, TYPES),
                    TYPES.join(", ")
                ),
            );
        }
    }
    if let Some((v, line)) = literal(node, "responseType") {
        const TYPES: &[&str] = &["auto", "text", "json", "binary"];
        if !TYPES.contains(&v) {
            problem(
                line,
                format!("unknown responseType `{v}` (use {})", TYPES.join(", ")),
            );
        }
    }
    if let Some(cond) = node.props.get("condition")
        && crate::template::parse_condition(&cond.value).is_none()
    {
        problem(
            cond.line,
            format!(
                "condition `{}` needs exactly one operator: == != < > <= >= or contains",
                cond.value
            ),
        );
    }
    if node.kind == "mcp" {
        for key in ["args", "headers"] {
            if let Some(prop) = node.props.get(key) {
                check_json_object(key, &prop.value, prop.line, problem);
            }
        }
        if let Some((url, line)) = literal(node, "url")
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            problem(
                line,
                format!(
                    "`url` must be an http:// or https:// URL, not `{url}` (use `server` for a configured server)"
                ),
            );
        }
        if let (Some(servers), Some((name, line))) = (&opts.servers, literal(node, "server")) {
            check_server(name, line, servers, problem);
        }
    }
    if node.kind == "command" {
        if let (Some(servers), Some(prop)) = (&opts.servers, node.props.get("mcpServers")) {
            for name in prop
                .value
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                check_server(name, prop.line, servers, problem);
            }
        }
        if let Some((v, line)) = literal(node, "ragSetting")
            && v != "__none__"
            && v != "__websearch__"
        {
            problem(
                line,
                format!(
                    "ragSetting `{v}`: RAG stores are GemiHub-only; use `__websearch__` for Google Search grounding or `__none__`"
                ),
            );
        }
    }
    if node.kind == "workflow"
        && let Some((path, line)) = literal(node, "path")
        && let Some(dir) = wf.path.as_ref().map(|_| wf.base_dir())
    {
        let full = dir.join(path);
        if !Path::new(&full).is_file() {
            problem(
                line,
                format!(
                    "sub-workflow `{path}` not found (looked for {})",
                    full.display()
                ),
            );
        }
    }
}

fn check_server(
    name: &str,
    line: usize,
    servers: &[String],
    problem: &mut impl FnMut(usize, String),
) {
    if servers.iter().any(|s| s == name) {
        return;
    }
    let names: Vec<&str> = servers.iter().map(String::as_str).collect();
    problem(
        line,
        format!(
            "no configured server named `{name}`{}; configured: {}",
            did_you_mean(name, &names),
            if names.is_empty() {
                "(none)".to_string()
            } else {
                names.join(", ")
            }
        ),
    );
}

fn check_json_object(key: &str, text: &str, line: usize, problem: &mut impl FnMut(usize, String)) {
    let trimmed = text.trim();
    let whole = placeholders(trimmed);
    if whole.len() == 1 && whole[0].start == 0 && whole[0].end == trimmed.len() {
        return;
    }
    let probe = replace_placeholders(trimmed, "0");
    match serde_json::from_str::<Value>(&probe) {
        Ok(Value::Object(_)) => {}
        Ok(_) => problem(
            line,
            format!("`{key}` must be a JSON object, like {{\"name\": \"value\"}}"),
        ),
        Err(e) => problem(line, format!("`{key}` is not valid JSON: {e}")),
    }
}

fn check_targets(wf: &Workflow, i: usize, node: &Node, problem: &mut impl FnMut(usize, String)) {
    let ids: Vec<&str> = wf.nodes.iter().map(|n| n.id.as_str()).collect();
    for key in ["next", "trueNext", "falseNext"] {
        if key == "next" && is_branch(&node.kind) {
            continue;
        }
        let Some(prop) = node.props.get(key) else {
            continue;
        };
        let target = prop.value.as_str();
        if target == END {
            continue;
        }
        match wf.index_of(target) {
            None => problem(
                prop.line,
                format!(
                    "`{key}` points to `{target}`, which is not a node id{} (use `end` to stop)",
                    did_you_mean(target, &ids)
                ),
            ),
            Some(j) if key == "next" && j <= i && wf.nodes[j].kind != "while" => problem(
                prop.line,
                format!(
                    "`next` jumps back to `{target}`, which is not a `while` node: only a `while` node can be a loop target"
                ),
            ),
            Some(_) => {}
        }
    }
}

/// A variable reference: satisfied when any of `names` is set.
struct Use {
    names: Vec<String>,
    var: String,
    shown: String,
    prop: String,
    line: usize,
}

fn uses(node: &Node) -> Vec<Use> {
    let mut out = Vec::new();
    if spec(&node.kind).is_none() {
        return out;
    }
    for (key, prop) in &node.props {
        if !is_templated(&node.kind, key) {
            continue;
        }
        for p in placeholders(&prop.value) {
            let shown = prop.value[p.start..p.end].to_string();
            let root = p.root().to_string();
            let mut names = vec![root.clone()];
            if p.path != root {
                names.push(p.path.clone());
            }
            out.push(Use {
                names,
                var: root,
                shown: shown.clone(),
                prop: key.clone(),
                line: prop.line,
            });
            for idx in p.index_vars() {
                out.push(Use {
                    names: vec![idx.to_string()],
                    var: idx.to_string(),
                    shown: shown.clone(),
                    prop: key.clone(),
                    line: prop.line,
                });
            }
        }
    }
    if node.kind == "json"
        && let Some(prop) = node.props.get("source")
        && !has_placeholders(&prop.value)
        && prop
            .value
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
        && !matches!(prop.value.as_str(), "true" | "false" | "null")
        && crate::vars::parse_number(&prop.value).is_none()
    {
        out.push(Use {
            names: vec![prop.value.clone()],
            var: prop.value.clone(),
            shown: prop.value.clone(),
            prop: "source".into(),
            line: prop.line,
        });
    }
    out
}

/// Variables a node sets; `None` when it may set any (a sub-workflow without `output`).
fn defs(node: &Node) -> Option<Vec<String>> {
    let names = |keys: &[&str]| -> Vec<String> {
        keys.iter()
            .filter_map(|k| node.get(k).map(str::to_string))
            .collect()
    };
    Some(match node.kind.as_str() {
        "variable" | "set" => names(&["name"]),
        "mcp" => names(&["saveTo", "saveUiTo"]),
        "http" => names(&["saveTo", "saveStatus"]),
        "json" | "command" => names(&["saveTo"]),
        "workflow" => {
            let output = node.get("output")?;
            if has_placeholders(output) {
                return None;
            }
            match serde_json::from_str::<Value>(output) {
                Ok(Value::Object(map)) => map.keys().cloned().collect(),
                _ => output
                    .split(',')
                    .filter_map(|pair| pair.split_once('='))
                    .map(|(k, _)| k.trim().to_string())
                    .filter(|k| !k.is_empty())
                    .collect(),
            }
        }
        _ => Vec::new(),
    })
}

/// `None` = every variable (no constraint yet, or after a node that may set any).
type Set = Option<BTreeSet<String>>;

fn meet(a: &Set, b: &Set) -> Set {
    match (a, b) {
        (None, x) | (x, None) => x.clone(),
        (Some(a), Some(b)) => Some(a.intersection(b).cloned().collect()),
    }
}

fn check_variables(wf: &Workflow, opts: &ValidateOptions, out: &mut Vec<Problem>) {
    let n = wf.nodes.len();
    if n == 0 {
        return;
    }
    let succ: Vec<Vec<usize>> = (0..n).map(|i| successors(wf, i)).collect();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, s) in succ.iter().enumerate() {
        for &j in s {
            preds[j].push(i);
        }
    }
    let mut reachable = vec![false; n];
    let mut queue = VecDeque::from([0usize]);
    reachable[0] = true;
    while let Some(i) = queue.pop_front() {
        for &j in &succ[i] {
            if !reachable[j] {
                reachable[j] = true;
                queue.push_back(j);
            }
        }
    }
    let node_defs: Vec<Option<Vec<String>>> = wf.nodes.iter().map(defs).collect();
    let mut out_sets: Vec<Set> = vec![None; n];
    let mut in_sets: Vec<Set> = vec![None; n];
    // Must-be-set analysis: iterate to a fixed point (sets only shrink).
    let mut changed = true;
    let mut rounds = 0;
    while changed && rounds < 10 * n + 10 {
        changed = false;
        rounds += 1;
        for i in (0..n).filter(|&i| reachable[i]) {
            let mut input: Set = if i == 0 {
                Some(opts.inputs.clone())
            } else {
                None
            };
            for &p in preds[i].iter().filter(|&&p| reachable[p]) {
                input = meet(&input, &out_sets[p]);
            }
            let output = match (&input, &node_defs[i]) {
                (_, None) => None,
                (None, Some(_)) => None,
                (Some(set), Some(d)) => {
                    let mut s = set.clone();
                    s.extend(d.iter().cloned());
                    Some(s)
                }
            };
            if output != out_sets[i] || input != in_sets[i] {
                changed = true;
                out_sets[i] = output;
                in_sets[i] = input;
            }
        }
    }
    let anywhere: HashSet<String> = node_defs.iter().flatten().flatten().cloned().collect();
    let any_unknown = node_defs.iter().any(Option::is_none);
    for i in (0..n).filter(|&i| reachable[i]) {
        let Some(set) = &in_sets[i] else { continue };
        let node = &wf.nodes[i];
        let mut reported = HashSet::new();
        for u in uses(node) {
            if u.names.iter().any(|name| set.contains(name)) || !reported.insert(u.var.clone()) {
                continue;
            }
            let message = if anywhere.contains(&u.var) || any_unknown {
                format!(
                    "`{}` in `{}` uses variable `{}` before it is set on every path to this node",
                    u.shown, u.prop, u.var
                )
            } else {
                format!(
                    "`{}` in `{}` uses variable `{}`, which is never set: set it in an earlier node or pass --var {}=…",
                    u.shown, u.prop, u.var, u.var
                )
            };
            out.push(Problem::node(u.line, &node.id, message));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(yaml: &str) -> Vec<String> {
        let wf = Workflow::from_yaml(yaml).unwrap();
        validate(&wf, &ValidateOptions::default())
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn loop_counter_is_set_before_use() {
        let p = problems(
            r#"
name: loop
nodes:
  - id: init
    type: variable
    name: i
    value: 0
  - id: loop
    type: while
    condition: "{{i}} < 3"
    trueNext: inc
    falseNext: done
  - id: inc
    type: set
    name: i
    value: "{{i}} + 1"
    next: loop
  - id: done
    type: variable
    name: out
    value: "{{i}}"
"#,
        );
        assert!(p.is_empty(), "{p:?}");
    }

    #[test]
    fn set_on_one_branch_only() {
        let p = problems(
            r#"
nodes:
  - id: check
    type: if
    condition: "1 == 1"
    trueNext: a
    falseNext: b
  - id: a
    type: variable
    name: x
    value: 1
  - id: b
    type: variable
    name: y
    value: "{{x}}"
"#,
        );
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("before it is set on every path"), "{p:?}");
    }
}
