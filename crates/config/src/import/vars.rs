//! Variable references in other hosts' values, rewritten into Switchboard's syntax
//! (`${VAR}`, `${VAR:-default}`, `$$` for a literal `$`). Nothing is ever expanded
//! here: a reference stays a reference, so no secret from the environment reaches
//! the settings file.

use std::collections::BTreeSet;

/// How a host writes (or does not write) variable references.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// No expansion at all (Claude Desktop, Codex): every `$` is literal.
    Literal,
    /// `${NAME}` and `${NAME:-default}` (Claude Code; also `${env:NAME}`, for a file
    /// of unknown origin read in this dialect); any other `$` is literal.
    Braced,
    /// Switchboard's own syntax (Gemini CLI): kept verbatim.
    Same,
    /// Editor hosts (VS Code, Cursor, Windsurf): `${env:NAME}`, `${input:id}`,
    /// `${userHome}`, `${workspaceFolder}`; any other `$` is literal.
    Editor,
}

/// What a rewrite needs to know and what it found.
#[derive(Debug, Default)]
pub(crate) struct Rewrite {
    /// The folder `${workspaceFolder}` stands for, when the file is a workspace's.
    pub workspace: Option<String>,
    /// VS Code `inputs`: id → its description and whether it is a password.
    pub inputs: Vec<(String, String, bool)>,
    /// Inputs referenced so far (id → variable), reported once per server.
    pub used_inputs: BTreeSet<(String, String)>,
    /// References with no equivalent (reported once per server).
    pub unsupported: BTreeSet<String>,
}

/// `${input:id}` becomes `${ID}`: upper case, anything but letters and digits → `_`.
pub(crate) fn input_variable(id: &str) -> String {
    let mut name: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if !name.starts_with(|c: char| c == '_' || c.is_ascii_alphabetic()) {
        name.insert(0, '_');
    }
    name
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

impl Rewrite {
    /// `value` in Switchboard's syntax.
    pub(crate) fn apply(&mut self, dialect: Dialect, value: &str) -> String {
        match dialect {
            Dialect::Same => value.to_string(),
            Dialect::Literal => value.replace('$', "$$"),
            Dialect::Braced | Dialect::Editor => self.braced(dialect, value),
        }
    }

    fn braced(&mut self, dialect: Dialect, value: &str) -> String {
        let mut out = String::with_capacity(value.len());
        let mut rest = value;
        while let Some(pos) = rest.find('$') {
            out.push_str(&rest[..pos]);
            let after = &rest[pos + 1..];
            let body = after
                .strip_prefix('{')
                .and_then(|b| b.find('}').map(|end| &b[..end]));
            let Some(body) = body else {
                out.push_str("$$");
                rest = after;
                continue;
            };
            rest = &after[body.len() + 2..];
            match self.reference(dialect, body) {
                Some(text) => out.push_str(&text),
                None => {
                    self.unsupported.insert(format!("${{{body}}}"));
                    out.push_str("$${");
                    out.push_str(&body.replace('$', "$$"));
                    out.push('}');
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// The Switchboard form of `${body}`, or `None` when it has no equivalent.
    fn reference(&mut self, dialect: Dialect, body: &str) -> Option<String> {
        if let Some(name) = body.strip_prefix("env:") {
            return is_name(name).then(|| format!("${{{name}}}"));
        }
        if dialect == Dialect::Braced {
            let name = body.split_once(":-").map_or(body, |(n, _)| n);
            return is_name(name).then(|| format!("${{{body}}}"));
        }
        if let Some(id) = body.strip_prefix("input:") {
            let var = input_variable(id);
            self.used_inputs.insert((id.to_string(), var.clone()));
            return Some(format!("${{{var}}}"));
        }
        match body {
            "userHome" => Some("${HOME}".into()),
            "pathSeparator" | "/" => Some("/".into()),
            "workspaceFolder" => self.workspace.as_ref().map(|w| w.replace('$', "$$")),
            _ => None,
        }
    }

    /// The warnings for one server's references, clearing them for the next server.
    pub(crate) fn take_warnings(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for (id, var) in std::mem::take(&mut self.used_inputs) {
            let about = self
                .inputs
                .iter()
                .find(|(i, _, _)| *i == id)
                .map(|(_, d, password)| {
                    let kind = if *password { ", a password" } else { "" };
                    if d.is_empty() {
                        format!(" (VS Code prompted for it{kind})")
                    } else {
                        format!(" (VS Code prompted for \"{d}\"{kind})")
                    }
                })
                .unwrap_or_default();
            out.push(format!(
                "`${{input:{id}}}`{about} is now `${{{var}}}`: Switchboard does not prompt, so set {var} in the environment before starting it"
            ));
        }
        for r in std::mem::take(&mut self.unsupported) {
            out.push(format!(
                "`{r}` has no equivalent in Switchboard and is kept as literal text; replace it with a value or a `${{VAR}}` reference"
            ));
        }
        out
    }
}

/// Whether a value (in Switchboard's syntax) holds a `${VAR}` or `$VAR` reference.
pub(crate) fn has_reference(value: &str) -> bool {
    let mut rest = value;
    while let Some(pos) = rest.find('$') {
        let after = &rest[pos + 1..];
        match after.chars().next() {
            Some('$') => rest = &after[1..],
            Some(c) if c == '{' || c == '_' || c.is_ascii_alphabetic() => return true,
            _ => rest = after,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_hosts_escape_every_dollar() {
        let mut r = Rewrite::default();
        assert_eq!(r.apply(Dialect::Literal, "p$ss${X}"), "p$$ss$${X}");
        assert_eq!(r.apply(Dialect::Same, "$A ${B:-c}"), "$A ${B:-c}");
    }

    #[test]
    fn braced_keeps_references_and_escapes_the_rest() {
        let mut r = Rewrite::default();
        assert_eq!(
            r.apply(Dialect::Braced, "Bearer ${TOKEN} ${URL:-http://x} $HOME 5$"),
            "Bearer ${TOKEN} ${URL:-http://x} $$HOME 5$$"
        );
        assert!(r.take_warnings().is_empty());
    }

    #[test]
    fn editor_references_become_variables_with_warnings() {
        let mut r = Rewrite {
            workspace: Some("/w".into()),
            inputs: vec![("api-key".into(), "API key".into(), true)],
            ..Default::default()
        };
        assert_eq!(
            r.apply(Dialect::Editor, "${env:GH_TOKEN}:${input:api-key}"),
            "${GH_TOKEN}:${API_KEY}"
        );
        assert_eq!(
            r.apply(
                Dialect::Editor,
                "${workspaceFolder}/x ${userHome} ${config:a.b}"
            ),
            "/w/x ${HOME} $${config:a.b}"
        );
        let w = r.take_warnings();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("${input:api-key}") && w[0].contains("\"API key\", a password"));
        assert!(w[0].contains("set API_KEY"));
        assert!(w[1].contains("${config:a.b}"));
        assert!(r.take_warnings().is_empty());
    }

    #[test]
    fn references_are_found() {
        assert!(has_reference("Bearer ${T}"));
        assert!(has_reference("$T"));
        assert!(!has_reference("p$$ss"));
        assert!(!has_reference("plain"));
        assert_eq!(input_variable("1-key"), "_1_KEY");
    }
}
