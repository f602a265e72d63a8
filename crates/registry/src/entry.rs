//! From a [`ServerJson`] to a settings entry: [`Plan::new`] picks a package or remote
//! ([`Choice`]) and works out its command line; [`Plan::inputs`] are the environment
//! variables or headers it declares, for the front end to ask about; [`Plan::entry`]
//! takes the person's values and gives the entry (`command`/`args`/`env`, or
//! `httpUrl` / `url` + `type: "sse"` with `headers`); [`Plan::preview`] and
//! [`command_line`] are the exact command a front end shows before it writes.
//!
//! npm runs through `npx -y id@version`, pypi through `uvx id==version`, oci through
//! `docker run -i --rm … -e NAME image`, each unless the package's `runtimeHint` names
//! another known runner (`check.rs`: `pnpm dlx`, `yarn dlx`, `bun x`, `npm exec … --`,
//! `uv tool run`, `pipx run`, `podman run`); an mcpb bundle is not planned here
//! (`bundle.rs` installs it for the CLI; the message says how, and how by hand with its
//! SHA-256).
//!
//! Before anything is planned, every registry string is checked for its role
//! (`check.rs`): declared environment variable names and header names, the identifier
//! and version against the package registry's grammar (an image reference for oci),
//! and the runtime arguments against the runner's allow-list (no operands). A refusal
//! names the field or option, the value (escaped, cut) and why, and for a runner option
//! the exact `switchboard mcp add NAME …` line that adds it by hand. The names the
//! person gives get the same name check in [`Plan::entry`], so an oci `-e` argument
//! only ever carries a variable name.
//!
//! Every string that comes from the registry is written with `$` escaped
//! (`switchboard_config::escape_vars`), so a registry cannot make an entry expand this
//! machine's environment variables; the values the person gives are written as given
//! (each front end decides whether `${VAR}` is a reference or text). Must not: ask a
//! person, read or write files.

use serde_json::{Map, Value, json};
use switchboard_config::escape_vars;

use crate::check::{self, shown};
use crate::error::RegistryError;
use crate::server_json::{Argument, Input, Package, PackageKind, Remote, ServerJson};

/// Which way of running the server to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// The first package that runs over stdio, else the first remote (the CLI).
    Auto,
    /// `packages[i]`.
    Package(usize),
    /// `remotes[i]`.
    Remote(usize),
}

/// What a server's declared values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// Environment variables of a package.
    Env,
    /// HTTP headers of a remote.
    Header,
}

impl InputKind {
    /// `environment variables` / `headers`.
    pub fn plural(self) -> &'static str {
        match self {
            Self::Env => "environment variables",
            Self::Header => "headers",
        }
    }
}

/// The chosen way, with its command line worked out.
#[derive(Debug, Clone)]
pub struct Plan<'a> {
    chosen: Chosen<'a>,
}

#[derive(Debug, Clone)]
enum Chosen<'a> {
    Package {
        package: &'a Package,
        command: String,
        /// Arguments before the environment flags (oci) or all of them (others).
        args: Vec<String>,
        /// Package arguments (after the image for oci).
        tail: Vec<String>,
    },
    Remote(&'a Remote),
}

/// Whether a package can be installed, and why not.
pub fn package_support(p: &Package) -> Result<(), String> {
    if p.transport != "stdio" {
        return Err(format!(
            "{} ({} transport)",
            p.registry_type.as_str(),
            p.transport
        ));
    }
    match &p.registry_type {
        PackageKind::Npm | PackageKind::Pypi | PackageKind::Oci => Ok(()),
        PackageKind::Mcpb => Err(format!(
            "mcpb (a bundle is code downloaded and run on this machine, so only the command line installs it, after checking its SHA-256: `switchboard mcp add NAME --from-registry ID`; or download {}{}, unpack it and add its command by hand)",
            p.identifier,
            p.file_sha256
                .as_deref()
                .map(|h| format!(", check its SHA-256 is {h}"))
                .unwrap_or_default()
        )),
        PackageKind::Other(other) => Err(format!("{other} (not supported)")),
    }
}

/// Whether a remote can be added, and why not.
pub fn remote_support(r: &Remote) -> Result<&'static str, RegistryError> {
    if r.url.contains('{') {
        return Err(RegistryError::UrlVariables { url: r.url.clone() });
    }
    if !url::Url::parse(&r.url).is_ok_and(|u| matches!(u.scheme(), "http" | "https")) {
        return Err(RegistryError::RemoteUrl { url: r.url.clone() });
    }
    match r.kind.as_str() {
        "sse" => Ok("sse"),
        "streamable-http" => Ok("http"),
        other => Err(RegistryError::RemoteKind {
            kind: other.to_string(),
        }),
    }
}

/// `value` with its `{var}` variables replaced by their defaults.
fn substitute(value: &str, arg: &Argument) -> Result<String, RegistryError> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let var = &rest[start + 1..start + len];
        let Some(default) = arg
            .variables
            .get(var)
            .and_then(|v| v.default.as_deref().or(v.value.as_deref()))
        else {
            return Err(RegistryError::ArgumentVariable {
                label: arg.label().to_string(),
                var: var.to_string(),
            });
        };
        out.push_str(&rest[..start]);
        out.push_str(default);
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Argument tokens as the registry wrote them (escaped where they land): `{var}`
/// variables filled from their defaults; a required one without a value is an error,
/// except a package argument when `given_after`.
fn arguments(
    list: &[Argument],
    package: bool,
    given_after: bool,
) -> Result<Vec<String>, RegistryError> {
    let mut out = Vec::new();
    for a in list {
        let value = a
            .value
            .as_deref()
            .or_else(|| a.required.then_some(a.default.as_deref()).flatten());
        let Some(value) = value else {
            if a.required && !(package && given_after) {
                return Err(RegistryError::ArgumentWithoutValue {
                    package,
                    label: a.label().to_string(),
                    about: a.description.clone(),
                });
            }
            continue;
        };
        let value = substitute(value, a)?;
        if a.named
            && let Some(n) = &a.name
        {
            out.push(n.clone());
        }
        out.push(value);
    }
    Ok(out)
}

/// The OCI image reference: the identifier when it carries a tag or digest, else
/// `identifier:version`.
pub fn image(identifier: &str, version: Option<&str>) -> String {
    let last = identifier.rsplit('/').next().unwrap_or(identifier);
    match version {
        Some(v) if !last.contains(':') && !last.contains('@') => format!("{identifier}:{v}"),
        _ => identifier.to_string(),
    }
}

/// The runners a package's `runtimeHint` may name, per registry type, the default
/// first: a registry cannot make an entry run any other program.
pub fn known_runners(kind: &PackageKind) -> Vec<&'static str> {
    check::runners(kind.as_str())
        .iter()
        .map(|r| r.name)
        .collect()
}

/// A registry string that does not fit its role.
fn bad(field: &'static str, value: &str, what: &'static str) -> RegistryError {
    RegistryError::BadField {
        field,
        value: shown(value),
        what,
    }
}

/// Every declared environment variable (package) or header (remote) name checked.
fn check_names(inputs: &[Input], kind: InputKind) -> Result<(), RegistryError> {
    for i in inputs {
        match kind {
            InputKind::Env if !check::is_env_name(&i.name) => {
                return Err(bad(
                    "environmentVariables[].name",
                    &i.name,
                    "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
                ));
            }
            InputKind::Header if !check::is_header_name(&i.name) => {
                return Err(bad(
                    "headers[].name",
                    &i.name,
                    "an HTTP header name (an RFC 9110 token)",
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// What runs the package: the identifier (and version) checked against its
/// registry's grammar, as the runner takes it.
fn target(p: &Package) -> Result<String, RegistryError> {
    let ident = p.identifier.as_str();
    let version = p.version.as_deref();
    if let Some(v) = version
        && p.registry_type != PackageKind::Oci
        && !check::is_version(v)
    {
        return Err(bad("version", v, "a package version"));
    }
    Ok(match p.registry_type {
        PackageKind::Npm => {
            if !check::is_npm_name(ident) {
                return Err(bad("identifier", ident, "an npm package name"));
            }
            match version {
                Some(v) => format!("{ident}@{v}"),
                None => ident.to_string(),
            }
        }
        PackageKind::Pypi => {
            if !check::is_pypi_name(ident) {
                return Err(bad("identifier", ident, "a PyPI package name"));
            }
            match version {
                Some(v) => format!("{ident}=={v}"),
                None => ident.to_string(),
            }
        }
        _ => {
            let reference = image(ident, version);
            if !check::is_image_ref(&reference) {
                return Err(bad(
                    "identifier and version",
                    &reference,
                    "an OCI image reference (host[:port]/path[:tag][@sha256:digest])",
                ));
            }
            reference
        }
    })
}

fn package_plan<'a>(p: &'a Package, extra_args: &[String]) -> Result<Chosen<'a>, RegistryError> {
    package_support(p).map_err(|why| RegistryError::Unsupported { skipped: vec![why] })?;
    let kind = p.registry_type.as_str();
    let runner = match p.runtime_hint.as_deref() {
        None => check::runners(kind).first().copied(),
        Some(h) => check::runner(kind, h),
    };
    let Some(runner) = runner else {
        return Err(RegistryError::UnknownRunner {
            kind: kind.to_string(),
            hint: shown(p.runtime_hint.as_deref().unwrap_or_default()),
            known: known_runners(&p.registry_type).join(", "),
        });
    };
    check_names(&p.environment_variables, InputKind::Env)?;
    let target = target(p)?;
    let runtime = arguments(&p.runtime_arguments, false, false)?;
    let mut tail = vec![target];
    tail.extend(arguments(
        &p.package_arguments,
        true,
        !extra_args.is_empty(),
    )?);
    let mut args: Vec<String> = runner.first.iter().map(|a| a.to_string()).collect();
    // npx and `npm exec` ask before installing unless told yes; stdin is the server's.
    if matches!(runner.name, "npx" | "npm") && !runtime.iter().any(|a| a == "-y" || a == "--yes") {
        args.push("-y".into());
    }
    if let Err(refused) = runner.check(&runtime, &p.identifier) {
        let mut line = vec![
            "switchboard".to_string(),
            "mcp".into(),
            "add".into(),
            "NAME".into(),
            runner.name.into(),
            "--".into(),
        ];
        line.extend(args.iter().chain(&runtime).chain(&tail).cloned());
        return Err(RegistryError::RunnerOption {
            runner: runner.name.to_string(),
            option: shown(&refused.option),
            why: refused.why,
            by_hand: check::shell_line(&line),
        });
    }
    args.extend(runtime);
    if runner.end_of_options {
        args.push("--".into());
    }
    tail.extend(extra_args.iter().cloned());
    Ok(Chosen::Package {
        package: p,
        command: escape_vars(runner.name),
        args: args.iter().map(|a| escape_vars(a)).collect(),
        tail: tail
            .iter()
            .enumerate()
            .map(|(i, a)| {
                // The person's own arguments are written as given.
                if i + extra_args.len() >= tail.len() {
                    a.clone()
                } else {
                    escape_vars(a)
                }
            })
            .collect(),
    })
}

/// An entry's command line (`command` then `args`), as a person reads it before it is
/// written: every argument, `-e NAME` flags included, with `$$` shown as the `$` it
/// stands for; `None` for an entry without a command.
pub fn command_line(entry: &Map<String, Value>) -> Option<String> {
    let command = entry.get("command")?.as_str()?;
    let mut words = vec![command.replace("$$", "$")];
    for a in entry
        .get("args")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        words.push(a.as_str().unwrap_or_default().replace("$$", "$"));
    }
    Some(check::shell_line(&words))
}

impl<'a> Plan<'a> {
    /// Picks a way to run `server`. `extra_args` are package arguments the person gave
    /// (written after the registry's; they stand in for a required one without value).
    pub fn new(
        server: &'a ServerJson,
        choice: Choice,
        extra_args: &[String],
    ) -> Result<Self, RegistryError> {
        let chosen = match choice {
            Choice::Package(i) => {
                let p = server.packages.get(i).ok_or(RegistryError::NoSuchChoice {
                    what: "package",
                    index: i,
                    count: server.packages.len(),
                })?;
                package_plan(p, extra_args)?
            }
            Choice::Remote(i) => {
                let r = server.remotes.get(i).ok_or(RegistryError::NoSuchChoice {
                    what: "remote",
                    index: i,
                    count: server.remotes.len(),
                })?;
                remote_support(r)?;
                check_names(&r.headers, InputKind::Header)?;
                Chosen::Remote(r)
            }
            Choice::Auto => {
                let mut skipped = Vec::new();
                let mut found = None;
                for p in &server.packages {
                    match package_support(p) {
                        Ok(()) => {
                            found = Some(package_plan(p, extra_args)?);
                            break;
                        }
                        Err(why) => skipped.push(why),
                    }
                }
                match (found, server.remotes.first()) {
                    (Some(c), _) => c,
                    (None, Some(r)) => {
                        remote_support(r)?;
                        check_names(&r.headers, InputKind::Header)?;
                        Chosen::Remote(r)
                    }
                    (None, None) if skipped.is_empty() => {
                        return Err(RegistryError::NothingToRun {
                            problems: server.problems.clone(),
                        });
                    }
                    (None, None) => return Err(RegistryError::Unsupported { skipped }),
                }
            }
        };
        Ok(Self { chosen })
    }

    /// The transport written: `stdio`, `http` or `sse`.
    pub fn transport(&self) -> &'static str {
        match &self.chosen {
            Chosen::Package { .. } => "stdio",
            Chosen::Remote(r) => remote_support(r).unwrap_or("http"),
        }
    }

    /// What the entry will run or contact, for a person to read before adding it: the
    /// exact command line ([`command_line`]) of the entry written when the person gives
    /// the values it needs (an oci package's `-e NAME` flags included), or the URL.
    pub fn preview(&self) -> String {
        match &self.chosen {
            Chosen::Package {
                command,
                args,
                tail,
                ..
            } => {
                let given: Vec<(String, String)> = self
                    .inputs()
                    .iter()
                    .filter(|i| i.needs_value())
                    .map(|i| (i.name.clone(), String::new()))
                    .collect();
                self.entry(&given)
                    .ok()
                    .and_then(|e| command_line(&e))
                    .unwrap_or_else(|| {
                        let words: Vec<String> = std::iter::once(command)
                            .chain(args)
                            .chain(tail)
                            .map(|a| a.replace("$$", "$"))
                            .collect();
                        check::shell_line(&words)
                    })
            }
            Chosen::Remote(r) => r.url.clone(),
        }
    }

    /// Whether the entry runs a command on this machine.
    pub fn runs_locally(&self) -> bool {
        matches!(self.chosen, Chosen::Package { .. })
    }

    /// Environment variables (package) or headers (remote).
    pub fn input_kind(&self) -> InputKind {
        match self.chosen {
            Chosen::Package { .. } => InputKind::Env,
            Chosen::Remote(_) => InputKind::Header,
        }
    }

    /// The values the chosen way declares.
    pub fn inputs(&self) -> &'a [Input] {
        match self.chosen {
            Chosen::Package { package, .. } => &package.environment_variables,
            Chosen::Remote(r) => &r.headers,
        }
    }

    /// The settings entry with `given` values (name → value as it is to be written).
    /// A declared value is the one given, else the registry's fixed value, else, when
    /// required, its default; given names that are not declared are added too. A
    /// required value with none of these is [`RegistryError::Missing`].
    pub fn entry(&self, given: &[(String, String)]) -> Result<Map<String, Value>, RegistryError> {
        let kind = self.input_kind();
        for (name, _) in given {
            let fits = match kind {
                InputKind::Env => check::is_env_name(name),
                InputKind::Header => check::is_header_name(name),
            };
            if !fits {
                return Err(RegistryError::BadName {
                    kind,
                    name: shown(name),
                });
            }
        }
        let mut values = Map::new();
        let mut missing = Vec::new();
        for d in self.inputs() {
            if let Some((_, v)) = given.iter().find(|(k, _)| *k == d.name) {
                values.insert(d.name.clone(), json!(v));
            } else if let Some(v) = &d.value {
                values.insert(d.name.clone(), json!(escape_vars(v)));
            } else if d.required {
                match &d.default {
                    Some(v) => {
                        values.insert(d.name.clone(), json!(escape_vars(v)));
                    }
                    None => missing.push(d.label()),
                }
            }
        }
        for (k, v) in given {
            if !values.contains_key(k) {
                values.insert(k.clone(), json!(v));
            }
        }
        if !missing.is_empty() {
            return Err(RegistryError::Missing {
                kind: self.input_kind(),
                names: missing,
            });
        }
        let mut entry = Map::new();
        match &self.chosen {
            Chosen::Package {
                package,
                command,
                args,
                tail,
            } => {
                let mut args = args.clone();
                if package.registry_type == PackageKind::Oci {
                    // Names only (each checked above): the values stay in `env`.
                    for k in values.keys() {
                        args.push("-e".into());
                        args.push(k.clone());
                    }
                }
                args.extend(tail.iter().cloned());
                entry.insert("command".into(), json!(command));
                entry.insert("args".into(), json!(args));
                if !values.is_empty() {
                    entry.insert("env".into(), Value::Object(values));
                }
            }
            Chosen::Remote(r) => {
                let url = escape_vars(&r.url);
                if remote_support(r)? == "sse" {
                    entry.insert("url".into(), json!(url));
                    entry.insert("type".into(), json!("sse"));
                } else {
                    entry.insert("httpUrl".into(), json!(url));
                }
                if !values.is_empty() {
                    entry.insert("headers".into(), Value::Object(values));
                }
            }
        }
        Ok(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_json::parse_server;

    fn server(v: Value) -> ServerJson {
        let mut v = v;
        v["name"] = json!("io.example/x");
        parse_server(&v).unwrap()
    }

    #[test]
    fn a_runtime_hint_replaces_the_default_runner() {
        let s = server(json!({"packages": [{
            "registryType": "npm", "identifier": "@a/b", "version": "1.0.0",
            "runtimeHint": "bunx", "transport": {"type": "stdio"},
            "packageArguments": [{"type": "named", "name": "--mode", "value": "local"}]
        }]}));
        let plan = Plan::new(&s, Choice::Auto, &[]).unwrap();
        assert_eq!(plan.transport(), "stdio");
        let entry = plan.entry(&[]).unwrap();
        assert_eq!(entry["command"], "bunx");
        assert_eq!(entry["args"], json!(["@a/b@1.0.0", "--mode", "local"]));
    }

    #[test]
    fn a_required_argument_without_a_value_is_named() {
        let s = server(json!({"packages": [{
            "registryType": "npm", "identifier": "@a/b", "version": "1.0.0",
            "transport": {"type": "stdio"},
            "packageArguments": [{"type": "positional", "valueHint": "database_name",
                "description": "Name of the database", "isRequired": true}]
        }]}));
        let err = Plan::new(&s, Choice::Auto, &[]).unwrap_err();
        assert!(
            matches!(&err, RegistryError::ArgumentWithoutValue { package: true, label, .. } if label == "database_name"),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .contains("`database_name` (Name of the database)"),
            "{err}"
        );
        let plan = Plan::new(&s, Choice::Auto, &["sales".into()]).unwrap();
        assert_eq!(
            plan.entry(&[]).unwrap()["args"],
            json!(["-y", "@a/b@1.0.0", "sales"])
        );
    }

    #[test]
    fn only_known_runners_and_web_urls_are_taken() {
        let s = server(json!({"packages": [{
            "registryType": "npm", "identifier": "x", "runtimeHint": "sh",
            "runtimeArguments": [{"type": "positional", "value": "-c"}]
        }], "remotes": [{"type": "streamable-http", "url": "file:///etc/passwd"}]}));
        let err = Plan::new(&s, Choice::Package(0), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("`sh`") && err.contains("npx"), "{err}");
        let err = Plan::new(&s, Choice::Remote(0), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("file:///etc/passwd"), "{err}");
        let s = server(
            json!({"packages": [{"registryType": "pypi", "identifier": "w", "version": "1",
            "runtimeArguments": [{"type": "named", "name": "--from", "value": "w[cli]"}]}]}),
        );
        assert_eq!(
            Plan::new(&s, Choice::Auto, &[]).unwrap().preview(),
            "uvx --from 'w[cli]' w==1"
        );
    }

    #[test]
    fn image_keeps_a_tag_and_adds_the_version_otherwise() {
        assert_eq!(
            image("docker.io/mcp/fs:1.0.2", Some("1.0.2")),
            "docker.io/mcp/fs:1.0.2"
        );
        assert_eq!(image("ghcr.io/a/b", Some("2")), "ghcr.io/a/b:2");
        assert_eq!(image("localhost:5000/a", Some("2")), "localhost:5000/a:2");
    }

    #[test]
    fn variables_take_defaults_or_fail_naming_the_variable() {
        let s = server(json!({"packages": [{
            "registryType": "oci", "identifier": "a/b:1",
            "runtimeArguments": [{"type": "named", "name": "--platform", "value": "linux/{a}",
                "variables": {"a": {"default": "amd64"}}}]
        }]}));
        let entry = Plan::new(&s, Choice::Auto, &[])
            .unwrap()
            .entry(&[])
            .unwrap();
        assert_eq!(
            entry["args"],
            json!(["run", "-i", "--rm", "--platform", "linux/amd64", "a/b:1"])
        );
        let s = server(json!({"packages": [{
            "registryType": "oci", "identifier": "a/b:1",
            "runtimeArguments": [{"type": "named", "name": "--platform", "value": "linux/{s}",
                "variables": {"a": {"default": "amd64"}}}]
        }]}));
        let err = Plan::new(&s, Choice::Auto, &[]).unwrap_err().to_string();
        assert!(err.contains("`s`") && err.contains("--platform"), "{err}");
    }

    /// A registry cannot make an entry read this machine's environment: its strings
    /// are escaped, the person's values are written as given.
    #[test]
    fn registry_strings_never_become_references() {
        let s = server(json!({"packages": [{
            "registryType": "npm", "identifier": "@a/b", "version": "1",
            "packageArguments": [{"type": "positional", "value": "$OPENAI_API_KEY"}],
            "environmentVariables": [
                {"name": "FIXED", "value": "${GEMINI_API_KEY}"},
                {"name": "KEY", "isRequired": true, "isSecret": true}
            ]
        }], "remotes": [{"type": "streamable-http", "url": "https://x.example/$USER",
            "headers": [{"name": "Authorization", "isRequired": true, "default": "Bearer ${GITHUB_TOKEN}"}]}]}));
        let entry = Plan::new(&s, Choice::Package(0), &[])
            .unwrap()
            .entry(&[("KEY".into(), "${KEY}".into())])
            .unwrap();
        assert_eq!(entry["args"], json!(["-y", "@a/b@1", "$$OPENAI_API_KEY"]));
        assert_eq!(
            entry["env"],
            json!({"FIXED": "$${GEMINI_API_KEY}", "KEY": "${KEY}"})
        );
        let remote = Plan::new(&s, Choice::Remote(0), &[]).unwrap();
        assert!(!remote.runs_locally());
        let entry = remote.entry(&[]).unwrap();
        assert_eq!(entry["httpUrl"], "https://x.example/$$USER");
        assert_eq!(entry["headers"]["Authorization"], "Bearer $${GITHUB_TOKEN}");
    }

    #[test]
    fn choices_out_of_range_and_missing_values_are_named() {
        let s = server(
            json!({"remotes": [{"type": "sse", "url": "https://x.example/sse",
            "headers": [{"name": "X-Key", "description": "the key", "isRequired": true, "isSecret": true}]}]}),
        );
        let err = Plan::new(&s, Choice::Package(0), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "this server has no package number 0 (it has 0)"
        );
        let plan = Plan::new(&s, Choice::Auto, &[]).unwrap();
        assert_eq!(plan.transport(), "sse");
        assert_eq!(plan.input_kind(), InputKind::Header);
        assert!(plan.inputs()[0].needs_value());
        let err = plan.entry(&[]).unwrap_err();
        assert_eq!(err.to_string(), "the server needs headers X-Key (the key)");
        let entry = plan.entry(&[("X-Key".into(), "v".into())]).unwrap();
        assert_eq!(
            Value::Object(entry),
            json!({"url": "https://x.example/sse", "type": "sse", "headers": {"X-Key": "v"}})
        );
    }

    /// Finding 1 of #26: an oci package's variable name went unescaped into
    /// `docker run -e`, so `X=${GITHUB_TOKEN}` handed the container any variable of
    /// this machine, on a command line `ps` shows. Now the plan is refused, naming
    /// the field and the value.
    #[test]
    fn an_env_name_that_carries_a_reference_is_refused() {
        for name in ["X=${GITHUB_TOKEN}", "X=$GITHUB_TOKEN", "-e", "A B", ""] {
            let s = server(json!({"packages": [{
                "registryType": "oci", "identifier": "docker.io/a/b:1",
                "environmentVariables": [{"name": name, "value": "v"}]
            }]}));
            let err = Plan::new(&s, Choice::Auto, &[])
                .err()
                .unwrap_or_else(|| panic!("`{name}` was planned"))
                .to_string();
            assert!(
                err.contains("environmentVariables[].name")
                    && err.contains(&format!("`{name}`"))
                    && err.contains("environment variable name"),
                "{err}"
            );
        }
        // A remote's header names are tokens.
        let s = server(
            json!({"remotes": [{"type": "streamable-http", "url": "https://x.example/",
            "headers": [{"name": "X: ${GITHUB_TOKEN}", "value": "v"}]}]}),
        );
        let err = Plan::new(&s, Choice::Auto, &[])
            .err()
            .map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains("headers[].name")),
            "{err:?}"
        );
    }

    /// The names the person gives (`--env K=V`, `--header`) get the same check, so no
    /// `-e` argument ever carries anything but a variable name.
    #[test]
    fn names_the_person_gives_are_checked_too() {
        let s = server(json!({"packages": [{
            "registryType": "oci", "identifier": "docker.io/a/b:1"}],
            "remotes": [{"type": "streamable-http", "url": "https://x.example/"}]}));
        let plan = Plan::new(&s, Choice::Package(0), &[]).unwrap();
        let err = plan
            .entry(&[("X=${GITHUB_TOKEN}".into(), "v".into())])
            .err()
            .map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(
                |e| e.contains("`X=${GITHUB_TOKEN}` is not an environment variable name")
            ),
            "{err:?}"
        );
        let entry = plan.entry(&[("GOOD".into(), "v".into())]).unwrap();
        assert_eq!(
            entry["args"],
            json!(["run", "-i", "--rm", "-e", "GOOD", "docker.io/a/b:1"])
        );
        let remote = Plan::new(&s, Choice::Remote(0), &[]).unwrap();
        assert!(remote.entry(&[("X Y".into(), "v".into())]).is_err());
        assert!(remote.entry(&[("X-Y".into(), "v".into())]).is_ok());
    }

    /// Runtime arguments cannot turn a known runner into another program: options off
    /// the runner's allow-list (in every spelling) and operands are refused, and the
    /// message gives the exact command to add by hand.
    #[test]
    fn runner_options_off_the_allow_list_are_refused() {
        let named = |n: &str, v: &str| json!({"type": "named", "name": n, "value": v});
        let positional = |v: &str| json!({"type": "positional", "value": v});
        let cases = [
            (
                "npm",
                "@a/b",
                vec![positional("-c"), positional("sh -c id")],
                "-c",
            ),
            ("npm", "@a/b", vec![named("--call", "id")], "--call"),
            (
                "npm",
                "@a/b",
                vec![positional("--node-options=--require=/tmp/x.js")],
                "--node-options=--require=/tmp/x.js",
            ),
            (
                "npm",
                "@a/b",
                vec![positional("evil-package")],
                "evil-package",
            ),
            (
                "npm",
                "@a/b",
                vec![positional("-yp"), positional("evil")],
                "-yp",
            ),
            (
                "pypi",
                "w",
                vec![named("--from", "evil-package")],
                "--from evil-package",
            ),
            (
                "pypi",
                "w",
                vec![named("--index-url", "http://evil.example")],
                "--index-url",
            ),
            (
                "oci",
                "a/b:1",
                vec![positional("--privileged")],
                "--privileged",
            ),
            ("oci", "a/b:1", vec![named("-v", "/:/host")], "-v"),
            (
                "oci",
                "a/b:1",
                vec![named("--volume", "/:/host")],
                "--volume",
            ),
            (
                "oci",
                "a/b:1",
                vec![named("--mount", "type=bind,src=/,dst=/h")],
                "--mount",
            ),
            (
                "oci",
                "a/b:1",
                vec![named("--entrypoint", "sh")],
                "--entrypoint",
            ),
            (
                "oci",
                "a/b:1",
                vec![named("--cap-add", "SYS_ADMIN")],
                "--cap-add",
            ),
            ("oci", "a/b:1", vec![named("--pid", "host")], "--pid"),
            (
                "oci",
                "a/b:1",
                vec![named("--network", "host")],
                "--network host",
            ),
            (
                "oci",
                "a/b:1",
                vec![positional("--network=host")],
                "--network=host",
            ),
            (
                "oci",
                "a/b:1",
                vec![named("--device", "/dev/sda")],
                "--device",
            ),
            (
                "oci",
                "a/b:1",
                vec![named("--security-opt", "seccomp=unconfined")],
                "--security-opt",
            ),
            ("oci", "a/b:1", vec![named("-u", "0")], "-u"),
            (
                "oci",
                "a/b:1",
                vec![positional("-iv"), positional("/:/h")],
                "-iv",
            ),
            (
                "oci",
                "a/b:1",
                vec![named("-e", "X=$GITHUB_TOKEN")],
                "-e X=$GITHUB_TOKEN",
            ),
        ];
        for (kind, id, args, option) in cases {
            let s = server(json!({"packages": [{"registryType": kind, "identifier": id,
                "runtimeArguments": args}]}));
            let err = Plan::new(&s, Choice::Auto, &[])
                .err()
                .unwrap_or_else(|| panic!("{kind} {option} was planned"))
                .to_string();
            assert!(
                err.contains(&format!("with `{option}`"))
                    && err.contains("switchboard mcp add NAME "),
                "{option}: {err}"
            );
        }
        // The allowed ones still plan.
        let s = server(
            json!({"packages": [{"registryType": "oci", "identifier": "a/b:1",
            "runtimeArguments": [positional("--init"), named("-e", "TZ"), named("--network", "none")]}]}),
        );
        assert_eq!(
            Plan::new(&s, Choice::Auto, &[]).unwrap().preview(),
            "docker run -i --rm --init -e TZ --network none a/b:1"
        );
        // `npm exec` is given `--`, so what follows the package is the package's own.
        let s = server(
            json!({"packages": [{"registryType": "npm", "identifier": "@a/b",
            "version": "1", "runtimeHint": "npm",
            "packageArguments": [positional("--call=id")]}]}),
        );
        assert_eq!(
            Plan::new(&s, Choice::Auto, &[]).unwrap().preview(),
            "npm exec -y -- @a/b@1 --call=id"
        );
    }

    /// An identifier or version is what its registry allows, so it cannot be read as
    /// an option or carry a second argument.
    #[test]
    fn identifiers_and_versions_follow_their_registries() {
        for (kind, id, version) in [
            ("npm", "--call=id", None),
            ("npm", "-c", None),
            ("npm", "@a/b c", None),
            ("npm", "@a/b", Some("1 --call=id")),
            ("npm", "@a/b", Some("-1")),
            ("pypi", "--from=evil", None),
            ("pypi", "w", Some("1;id")),
            ("oci", "--privileged", None),
            ("oci", "a/b", Some("1 --privileged")),
            ("oci", "a/${HOME}", None),
            ("oci", "a/b\u{202e}", None),
        ] {
            let s = server(json!({"packages": [{"registryType": kind, "identifier": id,
                "version": version}]}));
            let err = Plan::new(&s, Choice::Auto, &[])
                .err()
                .unwrap_or_else(|| panic!("{kind} {id} {version:?} was planned"))
                .to_string();
            assert!(err.contains("the registry's"), "{err}");
            assert!(!err.contains('\u{202e}'), "shown escaped: {err}");
        }
    }

    /// The preview is the command line written, `-e NAME` flags included.
    #[test]
    fn the_preview_is_the_exact_command() {
        let s = server(json!({"packages": [{"registryType": "oci",
        "identifier": "docker.io/example/db:3",
        "environmentVariables": [
            {"name": "DB_USER", "isRequired": true},
            {"name": "MODE", "value": "fast"},
            {"name": "OPTIONAL"}
        ]}]}));
        let plan = Plan::new(&s, Choice::Auto, &[]).unwrap();
        assert_eq!(
            plan.preview(),
            "docker run -i --rm -e DB_USER -e MODE docker.io/example/db:3"
        );
        let entry = plan
            .entry(&[
                ("DB_USER".into(), "u".into()),
                ("OPTIONAL".into(), "o".into()),
            ])
            .unwrap();
        assert_eq!(
            command_line(&entry).unwrap(),
            "docker run -i --rm -e DB_USER -e MODE -e OPTIONAL docker.io/example/db:3"
        );
    }

    /// The registry's own examples (testkit's fixtures) still plan, except the one
    /// that asks for the host's network.
    #[test]
    fn the_documented_examples_still_plan() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testkit/fixtures/registry");
        for f in std::fs::read_dir(dir).unwrap() {
            let path = f.unwrap().path();
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let s = parse_server(&v).unwrap();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let planned = Plan::new(&s, Choice::Auto, &[]);
            match name.as_str() {
                "database-manager.json" => {
                    let err = planned.unwrap_err().to_string();
                    assert!(err.contains("`--network host`"), "{err}");
                }
                "text-editor-mcpb.json" => assert!(planned.is_err()),
                _ => assert!(planned.is_ok(), "{name}: {:?}", planned.err()),
            }
        }
    }
}
