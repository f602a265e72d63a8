//! Where the flow goes after a node: `next` (or `end`), else the next node in the list;
//! `if`/`while` go to `trueNext` or `falseNext` (default: the next node in the list).

use crate::parse::Workflow;

/// Ends a branch when used as `next`, `trueNext` or `falseNext`.
pub const END: &str = "end";

/// Whether a node type branches on a condition.
pub fn is_branch(kind: &str) -> bool {
    matches!(kind, "if" | "while")
}

fn target(wf: &Workflow, value: &str) -> Option<usize> {
    if value == END {
        None
    } else {
        wf.index_of(value)
    }
}

fn following(wf: &Workflow, i: usize) -> Option<usize> {
    (i + 1 < wf.nodes.len()).then_some(i + 1)
}

/// The node after node `i`; for `if`/`while`, after the branch `branch` was taken.
pub fn next_of(wf: &Workflow, i: usize, branch: Option<bool>) -> Option<usize> {
    let node = &wf.nodes[i];
    if is_branch(&node.kind) {
        if branch == Some(true) {
            return node.get("trueNext").and_then(|t| target(wf, t));
        }
        return match node.get("falseNext") {
            Some(f) => target(wf, f),
            None => following(wf, i),
        };
    }
    match node.get("next") {
        Some(n) => target(wf, n),
        None => following(wf, i),
    }
}

/// Every node that can follow node `i`.
pub fn successors(wf: &Workflow, i: usize) -> Vec<usize> {
    if is_branch(&wf.nodes[i].kind) {
        let mut out: Vec<usize> = [next_of(wf, i, Some(true)), next_of(wf, i, Some(false))]
            .into_iter()
            .flatten()
            .collect();
        out.dedup();
        out
    } else {
        next_of(wf, i, None).into_iter().collect()
    }
}
