//! Validation reports every problem at once, each with its line.

use switchboard_workflow::{ValidateOptions, Workflow, validate};

const BROKEN: &str = r#"name: broken
nodes:
  - id: start
    type: variable
    name: greeting
    value: "Hello {{who}}"
  - id: call
    type: mcp
    server: demo
    tool: echo
    args: '{"message": {{greeting:json}'
    saveTo: reply
    timout: 500
  - id: call
    type: mcpp
    tool: echo
  - id: branch
    type: if
    condition: "{{reply}} is long"
    trueNext: shout
    falseNext: fetch
  - id: shout
    type: set
    name: loud
    next: start
  - id: fetch
    type: http
    method: FETCH
    throwOnError: maybe
  - id: late
    type: command
    prompt: "Summarise {{summary}} and {{later}}"
    mcpServers: demo, nosuch
    driveToolMode: all
    next: nowhere
  - id: after
    type: variable
    name: later
    value: x
  - id: drive
    type: drive-read
    path: notes.md
"#;

fn render(yaml: &str, opts: &ValidateOptions) -> String {
    let wf = Workflow::from_yaml(yaml).expect("the YAML itself parses");
    validate(&wf, opts)
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_problem_at_once_with_line_numbers() {
    let opts = ValidateOptions {
        inputs: Default::default(),
        servers: Some(vec!["demo".into(), "everything".into()]),
    };
    insta::assert_snapshot!("broken_workflow", render(BROKEN, &opts));
}

#[test]
fn yaml_syntax_errors_have_a_line() {
    let e = Workflow::from_yaml("name: x\nnodes:\n  - id: a\n    type: sleep\n   duration: [1\n")
        .unwrap_err();
    let shown: Vec<String> = e.iter().map(ToString::to_string).collect();
    insta::assert_snapshot!("yaml_syntax_error", shown.join("\n"));
}

#[test]
fn structure_problems() {
    let e = Workflow::from_yaml("name: x\nsteps: []\n").unwrap_err();
    let shown: Vec<String> = e.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        vec![
            "line 2: unknown top-level key `steps` (expected name, nodes, options, trigger, positions, description)",
            "line 1: missing `nodes`: a workflow needs a list of nodes",
        ]
    );
    let e =
        Workflow::from_yaml("nodes:\n  - just text\n  - id: a\n    type: sleep\n    duration: 1\n")
            .unwrap();
    let p = validate(&e, &ValidateOptions::default());
    assert_eq!(p.len(), 1);
    assert_eq!(
        p[0].to_string(),
        "line 2: node #1 must be a mapping with `id` and `type`, not a scalar"
    );
}

#[test]
fn a_valid_workflow_has_no_problems() {
    let yaml = r#"
name: fine
nodes:
  - id: a
    type: mcp
    server: demo
    tool: echo
    args: '{"message": "{{msg:json}}", "n": {{n}}}'
    saveTo: out
  - id: b
    type: if
    condition: "{{out}} contains hi"
    trueNext: c
  - id: c
    type: variable
    name: done
    value: "{{out}}"
"#;
    let opts = ValidateOptions {
        inputs: ["msg".to_string(), "n".to_string()].into(),
        servers: Some(vec!["demo".into()]),
    };
    assert_eq!(render(yaml, &opts), "");
}
