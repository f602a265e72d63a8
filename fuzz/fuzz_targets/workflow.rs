//! Workflow files and their `{{…}}` templates are untrusted text (a shared workflow, a
//! tool result fed into a template): YAML and Markdown parsing, validation and template
//! rendering must never panic or loop, whatever the bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_workflow::{ValidateOptions, Variables, Workflow, template, validate};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let opts = ValidateOptions::default();
    if let Ok(wf) = Workflow::from_yaml(text) {
        let _ = validate(&wf, &opts);
    }
    if let Ok(wf) = Workflow::from_markdown(text, None) {
        let _ = validate(&wf, &opts);
    }
    let mut vars = Variables::default();
    vars.set("name", serde_json::json!("Ada"));
    vars.set("list", serde_json::json!([1, {"a": [2, "x"]}, "three"]));
    vars.set("idx", serde_json::json!(1));
    vars.set("obj", serde_json::json!({"a": {"b": [true, null]}}));
    let _ = template::placeholders(text);
    let _ = template::render(text, &vars);
    let _ = template::fenced_json(text);
});
