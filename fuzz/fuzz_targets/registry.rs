//! A registry's answer: JSON bytes read as a list item (or a bare `server.json`), then
//! every package and remote planned and turned into a settings entry, with a value
//! given for each input a person would be asked for. Nothing may panic, and:
//!
//! - no string of the entry may make Switchboard read an environment variable: what
//!   the registry wrote is stored escaped, so expanding the entry looks nothing up;
//! - every `env` name is a variable name and every `headers` name an HTTP token, and
//!   every oci `-e` argument is followed by a variable name;
//! - the runner's options (the arguments between the runner and the package) pass
//!   the runner's allow-list as written, and none is an option known to turn a runner
//!   into another program or widen a container (an oracle list kept here, apart from
//!   the allow-list), in any spelling (`--opt=value`, combined short flags);
//! - the exact command shown ([`command_line`]) carries every argument written.
#![no_main]

use std::cell::Cell;

use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};
use switchboard_config::{expand_vars, is_var_name};
use switchboard_registry::{
    Choice, Package, PackageKind, Plan, command_line, image, parse_listing, runner,
};

/// Options that must never reach a runner from a registry.
const NEVER: &[&str] = &[
    "--privileged",
    "--volume",
    "--mount",
    "--entrypoint",
    "--cap-add",
    "--pid",
    "--device",
    "--security-opt",
    "--user",
    "--userns",
    "--ipc",
    "--uts",
    "--volumes-from",
    "--add-host",
    "--call",
    "--node-options",
    "--package",
    "--index-url",
    "--extra-index-url",
    "--registry",
    "--shell-mode",
    "--with-editable",
    "--with-requirements",
];
/// Short options that must never reach a runner of a registry type (npx `-c`/`-p`,
/// docker `-v`/`-u`/`-w`), and the letters before which they are looked for (those
/// that take a value: what follows is the value).
fn never_short(kind: &PackageKind) -> (&'static [char], &'static [char]) {
    match kind {
        PackageKind::Npm => (&['c', 'p'], &[]),
        PackageKind::Oci => (&['v', 'u', 'w', 'p', 'P', 'h', 'l'], &['e', 'm']),
        _ => (&[], &['w', 'p']),
    }
}
/// Options that take a value, in any runner: the package's token right after one is
/// that value, not the package.
const TAKES_VALUE: &[&str] = &[
    "--from",
    "--with",
    "-w",
    "--python",
    "-p",
    "--spec",
    "-e",
    "--env",
    "--pull",
    "--network",
    "--cap-drop",
    "--memory",
    "-m",
    "--cpus",
    "--pids-limit",
    "--platform",
];

fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => m.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

fn header_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#%&'*+-.^_`|~".contains(c))
}

/// The package's own token as the plan writes it (escaped).
fn target(p: &Package) -> String {
    let ident = p.identifier.as_str();
    let t = match (&p.registry_type, p.version.as_deref()) {
        (PackageKind::Npm, Some(v)) => format!("{ident}@{v}"),
        (PackageKind::Pypi, Some(v)) => format!("{ident}=={v}"),
        (PackageKind::Oci, v) => image(ident, v),
        _ => ident.to_string(),
    };
    switchboard_config::escape_vars(&t)
}

fn check_runner_options(p: &Package, entry: &Map<String, Value>) {
    let command = entry["command"].as_str().unwrap_or_default();
    let args: Vec<&str> = entry["args"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let r = runner(p.registry_type.as_str(), command)
        .unwrap_or_else(|| panic!("`{command}` is not a known runner"));
    assert!(
        args.starts_with(r.first),
        "{args:?} does not start with {:?}",
        r.first
    );
    let want = target(p);
    let at = (r.first.len()..args.len())
        .find(|&i| args[i] == want && (i == 0 || !TAKES_VALUE.contains(&args[i - 1])))
        .unwrap_or_else(|| panic!("the package `{want}` is not in {args:?}"));
    let mut options: Vec<String> = args[r.first.len()..at]
        .iter()
        .map(|a| a.to_string())
        .collect();
    if r.end_of_options {
        assert_eq!(options.pop().as_deref(), Some("--"), "{args:?}");
    }
    if p.registry_type == PackageKind::Oci {
        let mut it = options.iter();
        while let Some(a) = it.next() {
            if a == "-e" {
                let name = it.next().map(String::as_str).unwrap_or_default();
                assert!(is_var_name(name), "`-e {name}` is not a variable name");
            }
        }
    }
    for o in &options {
        let name = o.split('=').next().unwrap_or_default();
        assert!(!NEVER.contains(&name), "`{o}` reached `{command}`");
        let (never, valued) = never_short(&p.registry_type);
        if let Some(shorts) = o.strip_prefix('-').filter(|s| !s.starts_with('-')) {
            for c in shorts.chars().take_while(|c| !valued.contains(c)) {
                assert!(!never.contains(&c), "`{o}` reached `{command}`");
            }
        }
    }
    // `-e NAME` flags aside, the options pass the allow-list as written.
    let unescaped: Vec<String> = options.iter().map(|o| o.replace("$$", "$")).collect();
    assert!(r.check(&unescaped, &p.identifier).is_ok(), "{options:?}");
    let line = command_line(entry).unwrap_or_default();
    assert!(line.starts_with(command), "{line}");
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
        if let Some(env) = entry.get("env").and_then(Value::as_object) {
            for k in env.keys() {
                assert!(is_var_name(k), "env name `{k}`");
            }
        }
        if let Some(headers) = entry.get("headers").and_then(Value::as_object) {
            for k in headers.keys() {
                assert!(header_name(k), "header name `{k}`");
            }
        }
        if let Choice::Package(i) = choice {
            check_runner_options(&server.packages[i], &entry);
        }
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
