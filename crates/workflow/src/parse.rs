//! Reading workflow files: GemiHub's YAML format (`name`, `nodes: [...]`, each node an
//! `id`, a `type` and string properties), on its own or as a ```` ```workflow ```` block
//! inside Markdown. Every node and property keeps the line it came from, so that
//! validation can point at it.
//!
//! Like GemiHub, property values are normalised to strings: numbers and booleans are
//! written as text, nested mappings and sequences as compact JSON, and empty values are
//! dropped. A node without an `id` gets `node-<position>`.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use saphyr::{LoadableYamlNode, MarkedYamlOwned, ScalarOwned, YamlDataOwned};
use serde_json::Value;

use crate::problem::Problem;

/// One property value of a node, with the line it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prop {
    pub value: String,
    /// 1-based line in the file (Markdown files count from the top of the file).
    pub line: usize,
}

/// One node of a workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    /// The `type` (`mcp`, `command`, `variable`, …); empty when missing.
    pub kind: String,
    /// Where the node starts.
    pub line: usize,
    /// Every property except `id` and `type` (so `next`, `trueNext`, `falseNext` too),
    /// in file order.
    pub props: IndexMap<String, Prop>,
}

impl Node {
    /// A property's value, when present and not empty.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.props
            .get(key)
            .map(|p| p.value.as_str())
            .filter(|v| !v.is_empty())
    }

    /// The line of a property, else the node's line.
    pub fn line_of(&self, key: &str) -> usize {
        self.props.get(key).map(|p| p.line).unwrap_or(self.line)
    }
}

/// A parsed workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workflow {
    /// `name`, when given.
    pub name: Option<String>,
    pub nodes: Vec<Node>,
    /// The file it was read from (sub-workflow paths are relative to its folder).
    pub path: Option<PathBuf>,
    /// Problems found while reading that do not stop the rest from being read
    /// (reported by [`crate::validate`] together with the others).
    pub(crate) read_problems: Vec<Problem>,
}

/// Top-level keys of a workflow file.
const TOP_LEVEL: &[&str] = &[
    "name",
    "nodes",
    "options",
    "trigger",
    "positions",
    "description",
];

impl Workflow {
    /// Parses a workflow from YAML text.
    pub fn from_yaml(text: &str) -> Result<Workflow, Vec<Problem>> {
        parse_yaml(text, 0)
    }

    /// Parses the ```` ```workflow ```` block of a Markdown document; with `name`, the
    /// block whose workflow has that `name`.
    pub fn from_markdown(text: &str, name: Option<&str>) -> Result<Workflow, Vec<Problem>> {
        let blocks = workflow_blocks(text);
        if blocks.is_empty() {
            return Err(vec![Problem::file(
                "no ```workflow block found in this Markdown document",
            )]);
        }
        let mut last_err = None;
        for (offset, body) in &blocks {
            match parse_yaml(body, *offset) {
                Ok(wf) => {
                    if name.is_none_or(|n| wf.name.as_deref() == Some(n)) {
                        return Ok(wf);
                    }
                }
                Err(e) => {
                    if name.is_none() {
                        return Err(e);
                    }
                    last_err.get_or_insert(e);
                }
            }
        }
        match (name, last_err) {
            (Some(n), None) => {
                let names: Vec<String> = blocks
                    .iter()
                    .filter_map(|(o, b)| parse_yaml(b, *o).ok().and_then(|w| w.name))
                    .collect();
                Err(vec![Problem::file(format!(
                    "no ```workflow block named `{n}` in this document (found: {})",
                    if names.is_empty() {
                        "none with a name".to_string()
                    } else {
                        names.join(", ")
                    }
                ))])
            }
            (_, Some(e)) => Err(e),
            (None, None) => Err(vec![Problem::file("no ```workflow block found")]),
        }
    }

    /// Parses `text` read from `path`: Markdown (`.md`, `.markdown`, or a document with a
    /// ```` ```workflow ```` fence) or YAML.
    pub fn parse_file_text(
        text: &str,
        path: &Path,
        name: Option<&str>,
    ) -> Result<Workflow, Vec<Problem>> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        let markdown = matches!(ext.as_deref(), Some("md" | "markdown"))
            || text.lines().any(|l| is_workflow_fence(l.trim_end()));
        let mut wf = if markdown {
            Workflow::from_markdown(text, name)?
        } else {
            Workflow::from_yaml(text)?
        };
        wf.path = Some(path.to_path_buf());
        Ok(wf)
    }

    /// Reads and parses a workflow file.
    pub fn load(path: &Path) -> Result<Workflow, LoadError> {
        Self::load_named(path, None)
    }

    /// Reads a workflow file; in Markdown, the block whose workflow is called `name`.
    pub fn load_named(path: &Path, name: Option<&str>) -> Result<Workflow, LoadError> {
        let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse_file_text(&text, path, name).map_err(|problems| LoadError::Invalid {
            path: path.to_path_buf(),
            problems,
        })
    }

    /// The index of the node with this id.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == id)
    }

    /// The folder sub-workflow paths are resolved against.
    pub fn base_dir(&self) -> PathBuf {
        self.path
            .as_ref()
            .and_then(|p| p.parent())
            .map(Path::to_path_buf)
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("."))
    }
}

/// Why a workflow file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a valid workflow:\n{}", .path.display(), crate::problem::list(.problems))]
    Invalid {
        path: PathBuf,
        problems: Vec<Problem>,
    },
}

fn is_workflow_fence(line: &str) -> bool {
    let t = line.trim_start();
    let Some(rest) = t.strip_prefix("```") else {
        return false;
    };
    rest.trim() == "workflow"
}

/// Every ```` ```workflow ```` block: (line offset of the fence, body).
fn workflow_blocks(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, Vec<&str>)> = None;
    for (i, line) in text.lines().enumerate() {
        match &mut current {
            None => {
                if is_workflow_fence(line) {
                    current = Some((i + 1, Vec::new()));
                }
            }
            Some((offset, body)) => {
                if line.trim() == "```" {
                    out.push((*offset, body.join("\n")));
                    current = None;
                } else {
                    body.push(line);
                }
            }
        }
    }
    if let Some((offset, body)) = current {
        out.push((offset, body.join("\n")));
    }
    out
}

fn line_of(node: &MarkedYamlOwned, offset: usize) -> usize {
    node.span.start.line() + offset
}

/// A scalar or structure as GemiHub's string property form.
fn to_text(node: &MarkedYamlOwned) -> String {
    match &node.data {
        YamlDataOwned::Value(s) => scalar_text(s),
        YamlDataOwned::Representation(s, _, _) => s.clone(),
        YamlDataOwned::Tagged(_, inner) => to_text(inner),
        YamlDataOwned::Sequence(_) | YamlDataOwned::Mapping(_) => to_json(node).to_string(),
        YamlDataOwned::Alias(_) | YamlDataOwned::BadValue => String::new(),
    }
}

fn scalar_text(s: &ScalarOwned) -> String {
    match s {
        ScalarOwned::Null => String::new(),
        ScalarOwned::Boolean(b) => b.to_string(),
        ScalarOwned::Integer(i) => i.to_string(),
        ScalarOwned::FloatingPoint(f) => crate::vars::format_number(f.into_inner()),
        ScalarOwned::String(s) => s.clone(),
    }
}

fn to_json(node: &MarkedYamlOwned) -> Value {
    match &node.data {
        YamlDataOwned::Value(s) => match s {
            ScalarOwned::Null => Value::Null,
            ScalarOwned::Boolean(b) => Value::Bool(*b),
            ScalarOwned::Integer(i) => Value::from(*i),
            ScalarOwned::FloatingPoint(f) => crate::vars::number_value(f.into_inner()),
            ScalarOwned::String(s) => Value::String(s.clone()),
        },
        YamlDataOwned::Representation(s, _, _) => Value::String(s.clone()),
        YamlDataOwned::Tagged(_, inner) => to_json(inner),
        YamlDataOwned::Sequence(items) => Value::Array(items.iter().map(to_json).collect()),
        YamlDataOwned::Mapping(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (to_text(k), to_json(v)))
                .collect::<serde_json::Map<_, _>>(),
        ),
        YamlDataOwned::Alias(_) | YamlDataOwned::BadValue => Value::Null,
    }
}

fn kind_of(node: &MarkedYamlOwned) -> &'static str {
    match &node.data {
        YamlDataOwned::Value(_) | YamlDataOwned::Representation(..) => "a scalar",
        YamlDataOwned::Sequence(_) => "a list",
        YamlDataOwned::Mapping(_) => "a mapping",
        YamlDataOwned::Tagged(_, inner) => kind_of(inner),
        YamlDataOwned::Alias(_) | YamlDataOwned::BadValue => "an invalid value",
    }
}

fn untag(node: &MarkedYamlOwned) -> &MarkedYamlOwned {
    match &node.data {
        YamlDataOwned::Tagged(_, inner) => untag(inner),
        _ => node,
    }
}

fn parse_yaml(text: &str, offset: usize) -> Result<Workflow, Vec<Problem>> {
    let docs = MarkedYamlOwned::load_from_str(text).map_err(|e| {
        let line = e.marker().line() + offset;
        vec![Problem::at(line, format!("invalid YAML: {}", e.info()))]
    })?;
    let Some(doc) = docs.first() else {
        return Err(vec![Problem::file("the workflow file is empty")]);
    };
    let doc = untag(doc);
    let YamlDataOwned::Mapping(top) = &doc.data else {
        return Err(vec![Problem::at(
            line_of(doc, offset),
            format!(
                "a workflow must be a mapping with `name` and `nodes`, not {}",
                kind_of(doc)
            ),
        )]);
    };
    let mut problems = Vec::new();
    let mut name = None;
    let mut nodes_yaml = None;
    for (k, v) in top {
        let key = to_text(k);
        match key.as_str() {
            "name" => name = Some(to_text(v)).filter(|n| !n.is_empty()),
            "nodes" => nodes_yaml = Some(v),
            other if TOP_LEVEL.contains(&other) => {}
            other => problems.push(Problem::at(
                line_of(k, offset),
                format!(
                    "unknown top-level key `{other}`{} (expected {})",
                    crate::problem::did_you_mean(other, TOP_LEVEL),
                    TOP_LEVEL.join(", ")
                ),
            )),
        }
    }
    let Some(nodes_yaml) = nodes_yaml else {
        problems.push(Problem::at(
            line_of(doc, offset),
            "missing `nodes`: a workflow needs a list of nodes",
        ));
        return Err(problems);
    };
    let nodes_yaml = untag(nodes_yaml);
    let YamlDataOwned::Sequence(items) = &nodes_yaml.data else {
        problems.push(Problem::at(
            line_of(nodes_yaml, offset),
            format!("`nodes` must be a list, not {}", kind_of(nodes_yaml)),
        ));
        return Err(problems);
    };
    let mut nodes = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item = untag(item);
        let line = line_of(item, offset);
        let YamlDataOwned::Mapping(map) = &item.data else {
            problems.push(Problem::at(
                line,
                format!(
                    "node #{} must be a mapping with `id` and `type`, not {}",
                    i + 1,
                    kind_of(item)
                ),
            ));
            continue;
        };
        let mut id = String::new();
        let mut kind = String::new();
        let mut props = IndexMap::new();
        for (k, v) in map {
            let key = to_text(k);
            let value = to_text(v);
            match key.as_str() {
                "id" => id = value,
                "type" => kind = value,
                _ => {
                    if !value.is_empty() {
                        props.insert(
                            key,
                            Prop {
                                value,
                                line: line_of(k, offset),
                            },
                        );
                    }
                }
            }
        }
        if id.is_empty() {
            id = format!("node-{}", i + 1);
        }
        nodes.push(Node {
            id,
            kind,
            line,
            props,
        });
    }
    if nodes.is_empty() && problems.is_empty() {
        problems.push(Problem::at(
            line_of(nodes_yaml, offset),
            "the workflow has no nodes",
        ));
        return Err(problems);
    }
    Ok(Workflow {
        name,
        nodes,
        path: None,
        read_problems: problems,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_become_strings_with_lines() {
        let wf = Workflow::from_yaml(
            "name: t\nnodes:\n  - id: a\n    type: variable\n    name: n\n    value: 3\n  - type: mcp\n    args: {a: 1, b: [x]}\n    empty: \"\"\n",
        )
        .unwrap();
        assert_eq!(wf.name.as_deref(), Some("t"));
        assert_eq!(wf.nodes[0].line, 3);
        assert_eq!(wf.nodes[0].props["value"].value, "3");
        assert_eq!(wf.nodes[0].props["value"].line, 6);
        assert_eq!(wf.nodes[1].id, "node-2");
        assert_eq!(wf.nodes[1].props["args"].value, r#"{"a":1,"b":["x"]}"#);
        assert!(!wf.nodes[1].props.contains_key("empty"));
    }

    #[test]
    fn markdown_block_lines_count_from_the_file() {
        let md = "# Title\n\ntext\n\n```workflow\nname: md\nnodes:\n  - id: x\n    type: sleep\n    duration: 1\n```\n";
        let wf = Workflow::from_markdown(md, None).unwrap();
        assert_eq!(wf.name.as_deref(), Some("md"));
        assert_eq!(wf.nodes[0].line, 8);
    }

    #[test]
    fn yaml_errors_have_a_line() {
        let e = Workflow::from_yaml("name: t\nnodes:\n  - id: a\n   bad: [\n").unwrap_err();
        assert!(e[0].line.is_some(), "{e:?}");
        assert!(e[0].message.starts_with("invalid YAML"), "{e:?}");
    }
}
