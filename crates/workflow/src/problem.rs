//! One thing wrong with a workflow file, with the line it is on.

use std::fmt;

/// A problem found while reading or validating a workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line, when the problem has one.
    pub line: Option<usize>,
    /// The node it is about, when it is about one.
    pub node: Option<String>,
    pub message: String,
}

impl Problem {
    /// A problem about the whole file.
    pub fn file(message: impl Into<String>) -> Self {
        Self {
            line: None,
            node: None,
            message: message.into(),
        }
    }

    /// A problem on a line.
    pub fn at(line: usize, message: impl Into<String>) -> Self {
        Self {
            line: Some(line),
            node: None,
            message: message.into(),
        }
    }

    /// A problem with a node, on a line.
    pub fn node(line: usize, node: &str, message: impl Into<String>) -> Self {
        Self {
            line: Some(line),
            node: Some(node.to_string()),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if let Some(node) = &self.node {
            write!(f, "node `{node}`: ")?;
        }
        f.write_str(&self.message)
    }
}

/// The problems, one per line.
pub fn list(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

pub use switchboard_config::did_you_mean;
