//! A registry's answer: JSON bytes read as a list item (or a bare `server.json`), then
//! every package and remote planned and turned into a settings entry, with a value
//! given for each input a person would be asked for. Nothing may panic, and no string
//! of the entry may make Switchboard read an environment variable: what the registry
//! wrote is stored escaped, so expanding the entry looks nothing up.
#![no_main]

use std::cell::Cell;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use switchboard_config::expand_vars;
use switchboard_registry::{Choice, Plan, parse_listing};

fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => m.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let Some(listing) = parse_listing(&value) else {
        return;
    };
    let server = &listing.server;
    let _ = server.runs();
    let choices = (0..server.packages.len())
        .map(Choice::Package)
        .chain((0..server.remotes.len()).map(Choice::Remote))
        .chain([Choice::Auto]);
    for choice in choices {
        let Ok(plan) = Plan::new(server, choice, &["extra".to_string()]) else {
            continue;
        };
        let _ = plan.preview();
        let given: Vec<(String, String)> = plan
            .inputs()
            .iter()
            .filter(|i| i.needs_value())
            .map(|i| (i.name.clone(), "typed".to_string()))
            .collect();
        let Ok(entry) = plan.entry(&given) else {
            continue;
        };
        let mut all = Vec::new();
        strings(&Value::Object(entry), &mut all);
        for s in all {
            let looked_up = Cell::new(false);
            let env = |_: &str| {
                looked_up.set(true);
                Some(String::new())
            };
            let _ = expand_vars(&s, &env);
            assert!(!looked_up.get(), "`{s}` reads the environment");
        }
    }
});
