//! What a registry (or a bundle) may put where: each string it supplies is checked for
//! the role it plays in the command line or the entry before anything is planned.
//!
//! - names: an environment variable name is `[A-Za-z_][A-Za-z0-9_]*`
//!   (`switchboard_config::is_var_name`, the one definition); a header name is an
//!   RFC 9110 token;
//! - package identifiers and versions: an OCI image reference (`host[:port]/path`,
//!   lower-case path components, optional `:tag`, optional `@sha256:` digest), an npm
//!   name (`@scope/name`) and version, a PyPI name (PEP 508) and version (PEP 440
//!   characters). None may start with `-`, hold whitespace, `$`, quotes or shell
//!   characters, so none can be read as an option or expand anything;
//! - runner options ([`Runner`], [`runner`]): each known runner has the subcommand
//!   Switchboard puts first and a short allow-list of options a registry may add
//!   (`runtimeArguments`). [`Runner::check`] reads the arguments as the runner would
//!   (`--opt value`, `--opt=value`, `-abc` combined short flags, `-eVALUE`) and refuses
//!   any option off the list, a value that does not fit its option, and any operand (a
//!   token that is not an option: the runner would take it as the program to run).
//!   What follows the package (`packageArguments`, the person's arguments) is the
//!   package's own: npx, bunx, uvx, `pipx run`, `pnpm dlx`, `yarn dlx` and `bun x` pass
//!   everything after the package to it, `docker run` everything after the image to
//!   the container, and `npm exec` is given `--` before the package so it does too.
//!
//! [`shown`] is how a bad value appears in a message: escaped (`escape_debug`, so
//! control and bidi characters are visible) and cut.

use switchboard_config::is_var_name;

/// Longest part of a bad value shown in a message.
const SHOWN: usize = 80;

/// `value` for a message: control and format characters escaped, at most [`SHOWN`]
/// characters (then `…`).
pub fn shown(value: &str) -> String {
    let mut out = String::new();
    for (i, c) in value.chars().enumerate() {
        if i == SHOWN {
            out.push('…');
            break;
        }
        out.extend(c.escape_debug());
    }
    out
}

/// `words` as one command line a person can read and paste into a POSIX shell: a word
/// of plain characters as is, any other in single quotes.
pub fn shell_line<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| {
            let w = w.as_ref();
            let plain = !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c));
            if plain {
                w.to_string()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// An environment variable name.
pub fn is_env_name(s: &str) -> bool {
    is_var_name(s)
}

/// An HTTP header name: an RFC 9110 token (`$` left out: a header name never needs it,
/// and it is the one token character that means something in settings).
pub fn is_header_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#%&'*+-.^_`|~".contains(c))
}

fn alnum_lower(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// A path component of an image name: `[a-z0-9]+` joined by `.`, `_`, `__` or `-+`.
fn image_component(s: &str) -> bool {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut sep = String::new();
    for c in s.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            if !sep.is_empty() {
                let ok = sep == "." || sep == "_" || sep == "__" || sep.chars().all(|c| c == '-');
                if !ok || cur.is_empty() {
                    return false;
                }
                parts.push(std::mem::take(&mut cur));
                sep.clear();
            }
            cur.push(c);
        } else if ".-_".contains(c) {
            sep.push(c);
        } else {
            return false;
        }
    }
    sep.is_empty() && alnum_lower(&cur)
}

/// A registry host: DNS labels (`[A-Za-z0-9]`, inner `-`) with an optional `:port`.
fn image_domain(s: &str) -> bool {
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (s, None),
    };
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    host.split('.').all(label)
        && port
            .is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.chars().all(|c| c.is_ascii_digit()))
}

/// An OCI image reference: `[host[:port]/]path[:tag][@sha256:HEX]`.
pub fn is_image_ref(s: &str) -> bool {
    if s.is_empty() || s.len() > 512 {
        return false;
    }
    let (rest, digest) = match s.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (s, None),
    };
    if let Some(d) = digest {
        let Some(hex) = d.strip_prefix("sha256:") else {
            return false;
        };
        if hex.len() != 64
            || !hex
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        {
            return false;
        }
    }
    // A tag is after the last `:` that follows the last `/`.
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    if let Some(t) = tag {
        let mut chars = t.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if !first_ok
            || t.len() > 128
            || !chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        {
            return false;
        }
    }
    let mut parts: Vec<&str> = name.split('/').collect();
    // The first part is a host when it has a `.` or `:`, or is `localhost`.
    if parts.len() > 1 {
        let first = parts[0];
        if first.contains(['.', ':']) || first == "localhost" {
            if !image_domain(first) {
                return false;
            }
            parts.remove(0);
        }
    }
    !parts.is_empty() && parts.iter().all(|p| image_component(p))
}

/// An npm package name: `name` or `@scope/name`, URL-safe characters, neither part
/// starting with `.`, `_` or `-`, at most 214 characters.
pub fn is_npm_name(s: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && !p.starts_with(['.', '_', '-'])
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._~".contains(c))
    };
    if s.len() > 214 {
        return false;
    }
    match s.strip_prefix('@') {
        Some(scoped) => scoped
            .split_once('/')
            .is_some_and(|(a, b)| part(a) && part(b)),
        None => part(s),
    }
}

/// A version or dist-tag: starts with a letter or digit, then letters, digits and
/// `.+-_!` (semver and PEP 440 both fit), at most 128 characters.
pub fn is_version(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.len() <= 128
        && chars.all(|c| c.is_ascii_alphanumeric() || ".+-_!".contains(c))
}

/// A PyPI project name (PEP 508): letters and digits, inner `.`, `_`, `-`.
pub fn is_pypi_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 214
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// A PyPI name normalised (PEP 503), for comparing.
fn pypi_normal(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "._-".contains(c) {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// A requirement (`name`, `name[extra,…]`, then an optional `==`/`>=`/`<=`/`~=`/`!=`/
/// `<`/`>` version): its normalised name, or `None` when it is anything else (a URL,
/// a path, a marker…).
fn requirement_name(s: &str) -> Option<String> {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
        .unwrap_or(s.len());
    let (name, mut rest) = s.split_at(end);
    if !is_pypi_name(name) {
        return None;
    }
    if let Some(r) = rest.strip_prefix('[') {
        let close = r.find(']')?;
        let extras = &r[..close];
        if !extras.split(',').all(is_pypi_name) {
            return None;
        }
        rest = &r[close + 1..];
    }
    if !rest.is_empty() {
        let op = ["==", ">=", "<=", "~=", "!=", "<", ">"]
            .iter()
            .find(|op| rest.starts_with(**op))?;
        let version = &rest[op.len()..];
        if !is_version(version.trim_end_matches(".*")) {
            return None;
        }
    }
    Some(pypi_normal(name))
}

/// What an option's value must be.
#[derive(Debug, Clone, Copy)]
enum Value {
    /// A flag: no value.
    Flag,
    /// An environment variable name (`docker run -e NAME`).
    EnvName,
    /// A requirement for the package itself (`uvx --from pkg[extra]`).
    ThisPackage,
    /// A requirement for any PyPI package (`uvx --with pkg`).
    Requirement,
    /// A Python version request (`3.12`, `cpython3.12`, `pypy@3.10`, `>=3.11`).
    Python,
    /// One of these words.
    OneOf(&'static [&'static str]),
    /// A Linux capability name (`ALL`, `NET_RAW`).
    Capability,
    /// A number (`2`, `0.5`).
    Number,
    /// A size (`512m`).
    Size,
    /// A platform (`linux/amd64`).
    Platform,
}

/// An option a registry may give a runner.
#[derive(Debug, Clone, Copy)]
struct Opt {
    long: &'static str,
    short: Option<char>,
    value: Value,
}

const fn opt(long: &'static str, short: Option<char>, value: Value) -> Opt {
    Opt { long, short, value }
}

const NPX: &[Opt] = &[
    opt("--yes", Some('y'), Value::Flag),
    opt("--offline", None, Value::Flag),
    opt("--prefer-offline", None, Value::Flag),
];
const BUNX: &[Opt] = &[opt("--bun", None, Value::Flag)];
const YARN: &[Opt] = &[opt("--quiet", Some('q'), Value::Flag)];
const UVX: &[Opt] = &[
    opt("--from", None, Value::ThisPackage),
    opt("--with", Some('w'), Value::Requirement),
    opt("--python", Some('p'), Value::Python),
    opt("--offline", None, Value::Flag),
    opt("--quiet", Some('q'), Value::Flag),
];
const PIPX: &[Opt] = &[opt("--spec", None, Value::ThisPackage)];
const DOCKER: &[Opt] = &[
    opt("--interactive", Some('i'), Value::Flag),
    opt("--rm", None, Value::Flag),
    opt("--init", None, Value::Flag),
    opt("--read-only", None, Value::Flag),
    opt("--env", Some('e'), Value::EnvName),
    opt(
        "--pull",
        None,
        Value::OneOf(&["always", "missing", "never", "newer"]),
    ),
    opt("--network", None, Value::OneOf(&["none", "bridge"])),
    opt("--cap-drop", None, Value::Capability),
    opt("--memory", Some('m'), Value::Size),
    opt("--cpus", None, Value::Number),
    opt("--pids-limit", None, Value::Number),
    opt("--platform", None, Value::Platform),
];

/// A runner a package's `runtimeHint` may name.
#[derive(Debug, Clone, Copy)]
pub struct Runner {
    /// The program (`npx`, `docker`).
    pub name: &'static str,
    /// What Switchboard puts first (`run -i --rm`, `dlx`, `tool run`).
    pub first: &'static [&'static str],
    /// Whether `--` goes before the package (so what follows is the package's own).
    pub end_of_options: bool,
    options: &'static [Opt],
}

const fn runner_of(
    name: &'static str,
    first: &'static [&'static str],
    end_of_options: bool,
    options: &'static [Opt],
) -> Runner {
    Runner {
        name,
        first,
        end_of_options,
        options,
    }
}

const NPM_RUNNERS: &[Runner] = &[
    runner_of("npx", &[], false, NPX),
    runner_of("bunx", &[], false, BUNX),
    runner_of("pnpx", &[], false, &[]),
    runner_of("pnpm", &["dlx"], false, &[]),
    runner_of("yarn", &["dlx"], false, YARN),
    runner_of("bun", &["x"], false, BUNX),
    runner_of("npm", &["exec"], true, NPX),
];
const PYPI_RUNNERS: &[Runner] = &[
    runner_of("uvx", &[], false, UVX),
    runner_of("uv", &["tool", "run"], false, UVX),
    runner_of("pipx", &["run"], false, PIPX),
];
const OCI_RUNNERS: &[Runner] = &[
    runner_of("docker", &["run", "-i", "--rm"], false, DOCKER),
    runner_of("podman", &["run", "-i", "--rm"], false, DOCKER),
];

/// The runners for a registry type (`npm`, `pypi`, `oci`), the default first.
pub fn runners(kind: &str) -> &'static [Runner] {
    match kind {
        "npm" => NPM_RUNNERS,
        "pypi" => PYPI_RUNNERS,
        "oci" => OCI_RUNNERS,
        _ => &[],
    }
}

/// The runner `name` for a registry type (`npm`, `pypi`, `oci`).
pub fn runner(kind: &str, name: &str) -> Option<Runner> {
    runners(kind).iter().find(|r| r.name == name).copied()
}

/// Why a runtime argument was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The argument as the registry gave it.
    pub option: String,
    pub why: String,
}

impl Runner {
    /// The options a registry may give this runner, for messages (`-y/--yes`, `--from
    /// SPEC`…).
    pub fn allowed(&self) -> String {
        if self.options.is_empty() {
            return "none".into();
        }
        self.options
            .iter()
            .map(|o| {
                let name = match o.short {
                    Some(s) => format!("-{s}/{}", o.long),
                    None => o.long.to_string(),
                };
                match o.value {
                    Value::Flag => name,
                    Value::EnvName => format!("{name} NAME"),
                    Value::OneOf(words) => format!("{name} {}", words.join("|")),
                    _ => format!("{name} VALUE"),
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Checks runtime arguments (as tokens, before escaping) against the allow-list;
    /// `package` is the package's identifier (for `--from`/`--spec`).
    pub fn check(&self, tokens: &[String], package: &str) -> Result<(), Refused> {
        let refuse = |option: &str, why: String| Refused {
            option: option.to_string(),
            why,
        };
        let mut i = 0;
        while i < tokens.len() {
            let t = tokens[i].as_str();
            i += 1;
            if let Some(long) = t.strip_prefix("--").filter(|l| !l.is_empty()) {
                let (name, inline) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v)),
                    None => (long, None),
                };
                let Some(o) = self.options.iter().find(|o| o.long[2..] == *name) else {
                    return Err(refuse(t, self.off_list()));
                };
                if let Value::Flag = o.value {
                    if inline.is_some() {
                        return Err(refuse(t, format!("`{}` takes no value", o.long)));
                    }
                    continue;
                }
                let value = match inline {
                    Some(v) => v,
                    None => {
                        let v = tokens
                            .get(i)
                            .ok_or_else(|| refuse(t, format!("`{}` needs a value", o.long)))?;
                        i += 1;
                        v.as_str()
                    }
                };
                let spelled = match inline {
                    Some(_) => t.to_string(),
                    None => format!("{t} {value}"),
                };
                self.value_fits(o, value, package)
                    .map_err(|why| refuse(&spelled, why))?;
            } else if let Some(shorts) = t
                .strip_prefix('-')
                .filter(|s| !s.is_empty() && !s.starts_with('-'))
            {
                for (at, c) in shorts.char_indices() {
                    let Some(o) = self.options.iter().find(|o| o.short == Some(c)) else {
                        return Err(refuse(t, self.off_list()));
                    };
                    if let Value::Flag = o.value {
                        continue;
                    }
                    let rest = &shorts[at + c.len_utf8()..];
                    let rest = rest.strip_prefix('=').unwrap_or(rest);
                    let (value, spelled) = if rest.is_empty() {
                        let v = tokens
                            .get(i)
                            .ok_or_else(|| refuse(t, format!("`-{c}` needs a value")))?;
                        i += 1;
                        (v.as_str(), format!("{t} {v}"))
                    } else {
                        (rest, t.to_string())
                    };
                    self.value_fits(o, value, package)
                        .map_err(|why| refuse(&spelled, why))?;
                    break;
                }
            } else {
                return Err(refuse(
                    t,
                    format!(
                        "is not an option: `{}` would take it as {}",
                        self.name,
                        if t == "--" {
                            "the end of its options (what follows would be read as the program to run)".to_string()
                        } else {
                            "the program or package to run".to_string()
                        }
                    ),
                ));
            }
        }
        Ok(())
    }

    fn off_list(&self) -> String {
        format!(
            "is not an option Switchboard lets a registry give `{}` (only {}): it could make `{}` run another program or reach beyond the server's sandbox",
            self.name,
            self.allowed(),
            self.name
        )
    }

    fn value_fits(&self, o: &Opt, value: &str, package: &str) -> Result<(), String> {
        let ok = match o.value {
            Value::Flag => true,
            Value::EnvName => is_env_name(value),
            Value::ThisPackage => {
                requirement_name(value).is_some_and(|n| n == pypi_normal(package))
            }
            Value::Requirement => requirement_name(value).is_some(),
            Value::Python => {
                let v = ["cpython", "pypy", "graalpy", "python"]
                    .iter()
                    .find_map(|p| value.strip_prefix(p))
                    .unwrap_or(value);
                let v = v.strip_prefix('@').unwrap_or(v);
                let v = [">=", "<=", "==", "~=", ">", "<"]
                    .iter()
                    .find_map(|p| v.strip_prefix(p))
                    .unwrap_or(v);
                let v = v.strip_suffix('t').unwrap_or(v);
                v.starts_with(|c: char| c.is_ascii_digit())
                    && v.chars().all(|c| c.is_ascii_digit() || c == '.')
            }
            Value::OneOf(words) => words.contains(&value),
            Value::Capability => {
                !value.is_empty()
                    && value
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            }
            Value::Number => {
                !value.is_empty()
                    && value.starts_with(|c: char| c.is_ascii_digit())
                    && value.chars().all(|c| c.is_ascii_digit() || c == '.')
            }
            Value::Size => {
                let digits = value.trim_end_matches(|c: char| "bkmgBKMG".contains(c));
                !digits.is_empty()
                    && value.len() - digits.len() <= 1
                    && digits.chars().all(|c| c.is_ascii_digit())
            }
            Value::Platform => {
                let parts: Vec<&str> = value.split('/').collect();
                (2..=3).contains(&parts.len()) && parts.iter().all(|p| alnum_lower(p))
            }
        };
        if ok {
            return Ok(());
        }
        Err(format!(
            "`{}` takes {} here, not `{}`",
            o.long,
            match o.value {
                Value::EnvName =>
                    "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)".to_string(),
                Value::ThisPackage =>
                    format!("the package itself (`{package}`, with extras or a version)"),
                Value::Requirement => "a PyPI requirement (name, extras, version)".to_string(),
                Value::Python => "a Python version (3.12, cpython3.12, pypy@3.10)".to_string(),
                Value::OneOf(words) => format!("one of {}", words.join(", ")),
                Value::Capability => "a capability name".to_string(),
                Value::Number => "a number".to_string(),
                Value::Size => "a size (512m)".to_string(),
                Value::Platform => "a platform (linux/amd64)".to_string(),
                Value::Flag => "no value".to_string(),
            },
            shown(value)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(kind: &str, runner_name: &str, args: &[&str]) -> Option<Refused> {
        let tokens: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        runner(kind, runner_name)
            .unwrap()
            .check(&tokens, "weather-mcp")
            .err()
    }

    #[test]
    fn names_follow_their_grammars() {
        for ok in ["A", "_x", "GITHUB_TOKEN", "a1"] {
            assert!(is_env_name(ok), "{ok}");
        }
        for bad in ["", "1A", "X=${GITHUB_TOKEN}", "A B", "A-B", "-e", "É"] {
            assert!(!is_env_name(bad), "{bad}");
        }
        for ok in ["X-API-Key", "Authorization", "x_y.z~"] {
            assert!(is_header_name(ok), "{ok}");
        }
        for bad in ["", "X Key", "X:Y", "X\r\nY", "${T}", "$T", "Ä"] {
            assert!(!is_header_name(bad), "{bad}");
        }
    }

    #[test]
    fn image_references_follow_the_distribution_grammar() {
        for ok in [
            "docker.io/mcp/filesystem:1.0.2",
            "ghcr.io/a/b",
            "localhost:5000/a:2",
            "a/b:1",
            "alpine",
            "my_org/my-img__x.y:v1.2-rc_3",
            "reg.example:443/a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert!(is_image_ref(ok), "{ok}");
        }
        for bad in [
            "",
            "--privileged",
            "-v",
            "a/b --privileged",
            "A/B",
            "a//b",
            "a/b:",
            "a/b:-x",
            "a/b@md5:00",
            "a/b@sha256:xyz",
            "a/${HOME}",
            "a/b:1;rm",
            "a/b\n",
            "-h.io/a",
        ] {
            assert!(!is_image_ref(bad), "{bad}");
        }
    }

    #[test]
    fn package_names_and_versions_follow_their_registries() {
        for ok in ["@modelcontextprotocol/server-brave-search", "x", "a.b_c~d"] {
            assert!(is_npm_name(ok), "{ok}");
        }
        for bad in [
            "-c", "@a", "@/b", "a b", "a;b", "$(id)", "@a/${X}", ".x", "_x", "--call=x",
        ] {
            assert!(!is_npm_name(bad), "{bad}");
        }
        for ok in ["weather-mcp-server", "W.x_1", "a"] {
            assert!(is_pypi_name(ok), "{ok}");
        }
        for bad in ["-x", "x-", "a b", "a/b", "git+https://e.x/r", "--from"] {
            assert!(!is_pypi_name(bad), "{bad}");
        }
        for ok in [
            "1.0.2",
            "0.5.0",
            "1.0.0-rc.1+build.5",
            "1!2.0.post1",
            "latest",
        ] {
            assert!(is_version(ok), "{ok}");
        }
        for bad in ["", "-1", "--yes", "1 2", "1;x", "${V}", ">=1"] {
            assert!(!is_version(bad), "{bad}");
        }
    }

    #[test]
    fn runner_options_come_from_the_allow_list() {
        assert_eq!(refused("npm", "npx", &["-y", "--yes", "--offline"]), None);
        assert_eq!(
            refused(
                "pypi",
                "uvx",
                &[
                    "--from",
                    "weather_mcp[cli]>=1",
                    "--with=httpx",
                    "-p",
                    "3.12",
                    "--python",
                    "cpython@3.11"
                ]
            ),
            None
        );
        assert_eq!(
            refused(
                "oci",
                "docker",
                &[
                    "-i",
                    "--rm",
                    "-e",
                    "KEY",
                    "--env=OTHER",
                    "-ie",
                    "X",
                    "-eY",
                    "--network",
                    "none",
                    "--init",
                    "--read-only",
                    "-m",
                    "512m",
                    "--cpus",
                    "1.5"
                ]
            ),
            None
        );
        for (kind, r, args, option) in [
            ("npm", "npx", &["-c", "sh"][..], "-c"),
            ("npm", "npx", &["--call", "sh"], "--call"),
            ("npm", "npx", &["--call=sh"], "--call=sh"),
            ("npm", "npx", &["-yc", "sh"], "-yc"),
            (
                "npm",
                "npx",
                &["--node-options=--require=/tmp/x"],
                "--node-options=--require=/tmp/x",
            ),
            ("npm", "npx", &["-p", "evil"], "-p"),
            ("npm", "npx", &["evil-pkg"], "evil-pkg"),
            ("npm", "npx", &["--yes=false"], "--yes=false"),
            ("npm", "npm", &["--"], "--"),
            ("pypi", "uvx", &["--from", "evil-pkg"], "--from evil-pkg"),
            (
                "pypi",
                "uvx",
                &["--from", "git+https://e.x/evil"],
                "--from git+https://e.x/evil",
            ),
            (
                "pypi",
                "uvx",
                &["--with", "/tmp/evil.whl"],
                "--with /tmp/evil.whl",
            ),
            ("pypi", "uvx", &["--python", "/bin/sh"], "--python /bin/sh"),
            (
                "pypi",
                "uvx",
                &["--index-url", "http://evil"],
                "--index-url",
            ),
            ("oci", "docker", &["--privileged"], "--privileged"),
            ("oci", "docker", &["-v", "/:/host"], "-v"),
            ("oci", "docker", &["--volume=/:/host"], "--volume=/:/host"),
            (
                "oci",
                "docker",
                &["--mount", "type=bind,src=/,dst=/h"],
                "--mount",
            ),
            ("oci", "docker", &["--entrypoint", "sh"], "--entrypoint"),
            ("oci", "docker", &["--cap-add", "ALL"], "--cap-add"),
            ("oci", "docker", &["--pid", "host"], "--pid"),
            ("oci", "docker", &["--network", "host"], "--network host"),
            ("oci", "docker", &["--network=host"], "--network=host"),
            ("oci", "docker", &["--device", "/dev/sda"], "--device"),
            (
                "oci",
                "docker",
                &["--security-opt", "seccomp=unconfined"],
                "--security-opt",
            ),
            ("oci", "docker", &["-u", "0"], "-u"),
            ("oci", "docker", &["-iv", "/:/h"], "-iv"),
            (
                "oci",
                "docker",
                &["-e", "X=${GITHUB_TOKEN}"],
                "-e X=${GITHUB_TOKEN}",
            ),
            ("oci", "docker", &["-eX=1"], "-eX=1"),
            ("oci", "docker", &["-e"], "-e"),
            ("oci", "docker", &["alpine"], "alpine"),
        ] {
            let got = refused(kind, r, args);
            assert_eq!(
                got.as_ref().map(|g| g.option.as_str()),
                Some(option),
                "{r} {args:?}: {got:?}"
            );
        }
        let why = refused("oci", "docker", &["--privileged"]).unwrap().why;
        assert!(why.contains("-e/--env NAME"), "{why}");
    }

    #[test]
    fn shown_values_are_escaped_and_cut() {
        assert_eq!(shown("a\u{202e}b\n"), "a\\u{202e}b\\n");
        let long = shown(&"x".repeat(500));
        assert_eq!(long.chars().count(), SHOWN + 1);
        assert!(long.ends_with('…'));
    }
}
