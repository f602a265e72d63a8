//! From a [`ServerJson`] to a settings entry: [`Plan::new`] picks a package or remote
//! ([`Choice`]) and works out its command line; [`Plan::inputs`] are the environment
//! variables or headers it declares, for the front end to ask about; [`Plan::entry`]
//! takes the person's values and gives the entry (`command`/`args`/`env`, or
//! `httpUrl` / `url` + `type: "sse"` with `headers`).
//!
//! npm runs through `npx -y id@version`, pypi through `uvx id==version`, oci through
//! `docker run -i --rm … -e NAME image`, each unless the package's `runtimeHint` names
//! another runner; an mcpb bundle is not planned here (`bundle.rs` installs it for the
//! CLI; the message says how, and how by hand with its SHA-256).
//!
//! Every string that comes from the registry is written with `$` escaped
//! (`switchboard_config::escape_vars`), so a registry cannot make an entry expand this
//! machine's environment variables; the values the person gives are written as given
//! (each front end decides whether `${VAR}` is a reference or text). Must not: ask a
//! person, read or write files.

use serde_json::{Map, Value, json};
use switchboard_config::escape_vars;

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

/// Argument values (escaped): `{var}` variables filled from their defaults; a required
/// one without a value is an error, except a package argument when `given_after`.
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
            out.push(escape_vars(n));
        }
        out.push(escape_vars(&value));
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

/// The runners a package's `runtimeHint` may name, per registry type: a registry
/// cannot make an entry run any other program.
pub fn known_runners(kind: &PackageKind) -> &'static [&'static str] {
    match kind {
        PackageKind::Npm => &["npx", "bunx", "pnpx", "pnpm", "yarn", "bun", "deno", "npm"],
        PackageKind::Pypi => &["uvx", "uv", "pipx"],
        PackageKind::Oci => &["docker", "podman"],
        PackageKind::Mcpb | PackageKind::Other(_) => &[],
    }
}

fn package_plan<'a>(p: &'a Package, extra_args: &[String]) -> Result<Chosen<'a>, RegistryError> {
    package_support(p).map_err(|why| RegistryError::Unsupported { skipped: vec![why] })?;
    let hint = p.runtime_hint.as_deref();
    if let Some(h) = hint
        && !known_runners(&p.registry_type).contains(&h)
    {
        return Err(RegistryError::UnknownRunner {
            kind: p.registry_type.as_str().to_string(),
            hint: h.to_string(),
            known: known_runners(&p.registry_type).join(", "),
        });
    }
    let mut args = arguments(&p.runtime_arguments, false, false)?;
    let ident = p.identifier.as_str();
    let version = p.version.as_deref();
    let mut tail = Vec::new();
    let command = match p.registry_type {
        PackageKind::Npm => {
            let cmd = hint.unwrap_or("npx");
            if cmd == "npx" && !args.iter().any(|a| a == "-y" || a == "--yes") {
                args.insert(0, "-y".into());
            }
            args.push(escape_vars(&match version {
                Some(v) => format!("{ident}@{v}"),
                None => ident.to_string(),
            }));
            cmd
        }
        PackageKind::Pypi => {
            args.push(escape_vars(&match version {
                Some(v) => format!("{ident}=={v}"),
                None => ident.to_string(),
            }));
            hint.unwrap_or("uvx")
        }
        _ => {
            let mut run: Vec<String> = vec!["run".into(), "-i".into(), "--rm".into()];
            run.append(&mut args);
            args = run;
            tail.push(escape_vars(&image(ident, version)));
            hint.unwrap_or("docker")
        }
    };
    let mut pkg_args = arguments(&p.package_arguments, true, !extra_args.is_empty())?;
    tail.append(&mut pkg_args);
    tail.extend(extra_args.iter().cloned());
    Ok(Chosen::Package {
        package: p,
        command: escape_vars(command),
        args,
        tail,
    })
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
    /// command line (an oci package's `-e NAME` flags left out), or the URL.
    pub fn preview(&self) -> String {
        match &self.chosen {
            Chosen::Package {
                command,
                args,
                tail,
                ..
            } => std::iter::once(command)
                .chain(args)
                .chain(tail)
                .map(|a| a.replace("$$", "$"))
                .collect::<Vec<_>>()
                .join(" "),
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
                if package.registry_type == PackageKind::Oci
                    || matches!(package.registry_type, PackageKind::Other(_))
                {
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
            "uvx --from w[cli] w==1"
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
            "runtimeArguments": [{"type": "named", "name": "--mount", "value": "dst={t}",
                "variables": {"t": {"default": "/project"}}}]
        }]}));
        let entry = Plan::new(&s, Choice::Auto, &[])
            .unwrap()
            .entry(&[])
            .unwrap();
        assert_eq!(
            entry["args"],
            json!(["run", "-i", "--rm", "--mount", "dst=/project", "a/b:1"])
        );
        let s = server(json!({"packages": [{
            "registryType": "oci", "identifier": "a/b:1",
            "runtimeArguments": [{"type": "named", "name": "--mount", "value": "src={s}",
                "variables": {"t": {"default": "/project"}}}]
        }]}));
        let err = Plan::new(&s, Choice::Auto, &[]).unwrap_err().to_string();
        assert!(err.contains("`s`") && err.contains("--mount"), "{err}");
    }

    /// A registry cannot make an entry read this machine's environment: its strings
    /// are escaped, the person's values are written as given.
    #[test]
    fn registry_strings_never_become_references() {
        let s = server(json!({"packages": [{
            "registryType": "npm", "identifier": "@a/${HOME}", "version": "1",
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
        assert_eq!(
            entry["args"],
            json!(["-y", "@a/$${HOME}@1", "$$OPENAI_API_KEY"])
        );
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
}
