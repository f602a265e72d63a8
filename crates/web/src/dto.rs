//! The web app's own wire types for servers and what they offer. Core types
//! (`ServerSnapshot`, rmcp's `Tool`…) never go on the wire directly: they are copied
//! into these, so the API stays stable when the core changes.

use serde::Serialize;
use serde_json::Value;
use switchboard_host::ServerSnapshot;

use crate::apps::{ToolUi, tool_ui};

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerDto {
    pub name: String,
    /// `connected|connecting|disconnected|blocked|disabled`.
    pub status: String,
    pub transport: String,
    pub connected_via: Option<String>,
    /// The command line or URL (no headers).
    pub target: String,
    /// `user`, `project`, `file` or `default`.
    pub origin: String,
    pub trust: bool,
    pub error: Option<String>,
    pub hint: Option<String>,
    pub warnings: Vec<String>,
    pub server_info: Option<ServerInfoDto>,
    pub protocol_version: Option<String>,
    pub instructions: Option<String>,
    /// `needs-login`, `expired`, `authenticated`.
    pub auth: Option<String>,
    pub tools: Vec<ToolDto>,
    pub filtered_out_tools: Vec<String>,
    /// Tools withheld because they changed since pinned (`switchboard mcp pins`).
    pub withheld_tools: Vec<WithheldToolDto>,
    pub prompts: Vec<PromptDto>,
    pub resources: Vec<ResourceDto>,
    pub resource_templates: Vec<TemplateDto>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WithheldToolDto {
    pub name: String,
    /// A few words (`changed since pinned`, `renamed from \`x\``).
    pub why: String,
    /// The whole reason with what to do.
    pub message: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerInfoDto {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDto {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub annotations: Option<Value>,
    /// The MCP App linked to the tool, if any.
    pub ui: Option<ToolUi>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptDto {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub arguments: Vec<PromptArgDto>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PromptArgDto {
    pub name: String,
    pub description: Option<String>,
    pub required: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDto {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateDto {
    pub uri_template: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

fn s(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// A tool (as JSON, any MCP shape) → [`ToolDto`].
pub fn tool_dto(t: &Value) -> ToolDto {
    ToolDto {
        name: s(t, "name").unwrap_or_default(),
        title: s(t, "title").or_else(|| {
            t.get("annotations")
                .and_then(|a| a.get("title"))
                .and_then(Value::as_str)
                .map(str::to_string)
        }),
        description: s(t, "description"),
        input_schema: t
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object"})),
        output_schema: t.get("outputSchema").cloned(),
        annotations: t.get("annotations").cloned(),
        ui: t.get("_meta").and_then(tool_ui),
    }
}

impl ServerDto {
    pub fn from_snapshot(snap: &ServerSnapshot) -> Self {
        let tools = snap
            .tools
            .iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .map(|t| tool_dto(&t))
            .collect();
        let prompts = snap
            .prompts
            .iter()
            .filter_map(|p| serde_json::to_value(p).ok())
            .map(|p| PromptDto {
                name: s(&p, "name").unwrap_or_default(),
                title: s(&p, "title"),
                description: s(&p, "description"),
                arguments: p
                    .get("arguments")
                    .and_then(Value::as_array)
                    .map(|args| {
                        args.iter()
                            .map(|a| PromptArgDto {
                                name: s(a, "name").unwrap_or_default(),
                                description: s(a, "description"),
                                required: a
                                    .get("required")
                                    .and_then(Value::as_bool)
                                    .unwrap_or(false),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect();
        let resources = snap
            .resources
            .iter()
            .filter_map(|r| serde_json::to_value(r).ok())
            .map(|r| ResourceDto {
                uri: s(&r, "uri").unwrap_or_default(),
                name: s(&r, "name").unwrap_or_default(),
                title: s(&r, "title"),
                description: s(&r, "description"),
                mime_type: s(&r, "mimeType"),
            })
            .collect();
        let resource_templates = snap
            .resource_templates
            .iter()
            .filter_map(|r| serde_json::to_value(r).ok())
            .map(|r| TemplateDto {
                uri_template: s(&r, "uriTemplate").unwrap_or_default(),
                name: s(&r, "name").unwrap_or_default(),
                title: s(&r, "title"),
                description: s(&r, "description"),
                mime_type: s(&r, "mimeType"),
            })
            .collect();
        ServerDto {
            name: snap.name.clone(),
            status: snap.status.as_str().to_string(),
            transport: snap.transport.clone(),
            connected_via: snap.connected_via.clone(),
            target: snap.target.clone(),
            origin: snap.origin.clone(),
            trust: snap.trust,
            error: snap.error.clone(),
            hint: snap.hint.clone(),
            warnings: snap.warnings.clone(),
            server_info: snap.server_info.as_ref().map(|(n, v)| ServerInfoDto {
                name: n.clone(),
                version: v.clone(),
            }),
            protocol_version: snap.protocol_version.clone(),
            instructions: snap.instructions.clone(),
            auth: snap.auth.and_then(|a| {
                serde_json::to_value(a)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
            }),
            tools,
            filtered_out_tools: snap.filtered_out.clone(),
            withheld_tools: snap
                .withheld
                .iter()
                .map(|w| WithheldToolDto {
                    name: w.name.clone(),
                    why: w.why(),
                    message: w.message(&snap.name),
                })
                .collect(),
            prompts,
            resources,
            resource_templates,
        }
    }
}
