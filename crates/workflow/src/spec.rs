//! The node types Switchboard runs, with GemiHub's property names: which properties
//! each type takes, which are required, and which take `{{…}}` templates.

/// What one node type accepts.
#[derive(Debug, Clone, Copy)]
pub struct NodeSpec {
    pub kind: &'static str,
    /// Required properties (a value must be present and not empty).
    pub required: &'static [&'static str],
    pub optional: &'static [&'static str],
    /// Properties whose value is a variable name or a list of names (not a template).
    pub names: &'static [&'static str],
}

/// Properties every node may have.
pub const COMMON: &[&str] = &["comment"];

/// Every node type Switchboard runs.
pub const SPECS: &[NodeSpec] = &[
    NodeSpec {
        kind: "variable",
        required: &["name"],
        optional: &["value", "next"],
        names: &["name"],
    },
    NodeSpec {
        kind: "set",
        required: &["name", "value"],
        optional: &["next"],
        names: &["name"],
    },
    NodeSpec {
        kind: "if",
        required: &["condition", "trueNext"],
        optional: &["falseNext"],
        names: &[],
    },
    NodeSpec {
        kind: "while",
        required: &["condition", "trueNext"],
        optional: &["falseNext"],
        names: &[],
    },
    NodeSpec {
        kind: "sleep",
        required: &["duration"],
        optional: &["next"],
        names: &[],
    },
    NodeSpec {
        kind: "http",
        required: &["url"],
        optional: &[
            "method",
            "contentType",
            "headers",
            "body",
            "responseType",
            "saveTo",
            "saveStatus",
            "throwOnError",
            "timeout",
            "continueOnError",
            "next",
        ],
        names: &["saveTo", "saveStatus"],
    },
    NodeSpec {
        kind: "json",
        required: &["source", "saveTo"],
        optional: &["next"],
        names: &["saveTo"],
    },
    NodeSpec {
        kind: "workflow",
        required: &["path"],
        optional: &["name", "input", "output", "prefix", "next"],
        names: &["prefix"],
    },
    NodeSpec {
        kind: "mcp",
        // `url` or `server` (ours) is required too; checked on its own.
        required: &["tool"],
        optional: &[
            "url",
            "server",
            "args",
            "headers",
            "saveTo",
            "saveUiTo",
            "timeout",
            "continueOnError",
            "confirm",
            "next",
        ],
        names: &["saveTo", "saveUiTo", "server"],
    },
    NodeSpec {
        kind: "command",
        required: &["prompt"],
        optional: &[
            "model",
            "systemPrompt",
            "mcpServers",
            "saveTo",
            "ragSetting",
            "enableThinking",
            "continueOnError",
            "next",
        ],
        names: &["saveTo", "mcpServers"],
    },
];

/// GemiHub node types that Switchboard does not run.
pub const GEMIHUB_ONLY_TYPES: &[&str] = &[
    "drive-file",
    "drive-read",
    "drive-search",
    "drive-list",
    "drive-folder-list",
    "drive-file-picker",
    "drive-save",
    "drive-delete",
    "preview",
    "dialog",
    "prompt-value",
    "prompt-file",
    "prompt-selection",
    "rag-sync",
    "script",
    "gemihub-command",
    "sheet-read",
    "sheet-write",
    "sheet-update",
    "sheet-delete",
    "gmail-send",
    "calendar-list",
    "calendar-create",
    "calendar-update",
    "calendar-delete",
];

/// GemiHub properties that need Google Drive or GemiHub's own services.
pub const GEMIHUB_ONLY_PROPS: &[(&str, &str)] = &[
    ("command", "driveToolMode"),
    ("command", "attachments"),
    ("command", "saveImageTo"),
];

/// The spec of a node type.
pub fn spec(kind: &str) -> Option<&'static NodeSpec> {
    SPECS.iter().find(|s| s.kind == kind)
}

/// Every type name, for "did you mean".
pub fn kinds() -> Vec<&'static str> {
    SPECS.iter().map(|s| s.kind).collect()
}

/// Whether a property of this node type takes `{{…}}` templates.
pub fn is_templated(kind: &str, prop: &str) -> bool {
    if matches!(
        prop,
        "comment" | "next" | "trueNext" | "falseNext" | "saveTo" | "saveUiTo" | "saveStatus"
    ) {
        return false;
    }
    spec(kind).is_some_and(|s| !s.names.contains(&prop))
}
