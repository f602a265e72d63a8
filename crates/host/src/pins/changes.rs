//! What a waiting change looks like to a person: the pinned and the new definition of a
//! tool as a unified diff (pretty JSON, keys sorted), for `switchboard mcp pins` and the
//! web explorer alike. Reads nothing and decides nothing: it renders what
//! [`ServerPins`] holds.

use serde::Serialize;
use serde_json::Value;

use super::file::{PinnedDefinition, ServerPins};

/// One tool withheld until the user accepts its new definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingChange {
    /// The tool as the server names it now.
    pub name: String,
    /// For a rename: the pinned tool it replaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub renamed_from: Option<String>,
    /// A unified diff from the pinned definition (empty when none is pinned) to the new
    /// one, headed `pinned NAME` / `now NAME`.
    pub diff: String,
}

impl ServerPins {
    /// Every waiting change of this server, in tool-name order.
    pub fn pending_changes(&self) -> Vec<PendingChange> {
        self.tools
            .iter()
            .filter_map(|(name, t)| {
                let pending = t.pending.as_ref()?;
                let old_name = pending.renamed_from.as_deref().unwrap_or(name);
                let old = self.tools.get(old_name).and_then(|t| t.pinned.as_ref());
                Some(PendingChange {
                    name: name.clone(),
                    renamed_from: pending.renamed_from.clone(),
                    diff: unified_diff(old, pending, old_name, name),
                })
            })
            .collect()
    }
}

fn unified_diff(
    old: Option<&PinnedDefinition>,
    new: &PinnedDefinition,
    old_name: &str,
    new_name: &str,
) -> String {
    let pretty = |d: &Value| serde_json::to_string_pretty(d).unwrap_or_default() + "\n";
    let old_text = old.map(|d| pretty(&d.definition)).unwrap_or_default();
    let new_text = pretty(&new.definition);
    similar::TextDiff::from_lines(&old_text, &new_text)
        .unified_diff()
        .context_radius(2)
        .header(&format!("pinned {old_name}"), &format!("now {new_name}"))
        .to_string()
}
