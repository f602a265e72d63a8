//! The demo server's MCP handler: tools, resources, the resource template
//! and prompts.

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    handler::server::{router::tool::ToolRouter, tool::schema_for_output, wrapper::Parameters},
    model::{
        CallToolResult, ContentBlock, DiscoverResult, GetPromptRequestParams, GetPromptResponse,
        GetPromptResult, Implementation, InitializeRequestParams, InitializeResult,
        ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, MetaObject,
        PaginatedRequestParams, ProgressNotificationParam, Prompt, PromptArgument, PromptMessage,
        ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
        ResourceContents, ResourceTemplate, Role, ServerCapabilities, ServerConfig,
    },
    service::RequestContext,
    tool, tool_handler, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::{
    DemoOptions,
    assets::{
        CLOCK_HTML, CLOCK_UI_MIME_TYPE, CLOCK_UI_URI, GREETING_PREFIX, GREETING_TEMPLATE,
        INSTRUCTIONS, README_MARKDOWN, README_URI, TINY_PNG,
    },
    time::rfc3339_utc,
};

/// The server name reported in `initialize` (`serverInfo.name`).
pub const SERVER_NAME: &str = "switchboard-demo";

/// Longest run the `slow` tool accepts, in seconds.
const SLOW_MAX_SECONDS: f64 = 30.0;
/// Most steps the `slow` tool accepts.
const SLOW_MAX_STEPS: u32 = 1000;

/// Arguments of the `echo` tool.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct EchoArgs {
    /// The message to echo back.
    pub(crate) message: String,
}

/// Arguments of the `add` tool.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct AddArgs {
    /// The first addend.
    pub(crate) a: f64,
    /// The second addend.
    pub(crate) b: f64,
}

/// Structured result of the `add` tool.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AddOutput {
    /// `a + b`.
    pub(crate) sum: f64,
}

fn default_slow_seconds() -> f64 {
    2.0
}

fn default_slow_steps() -> u32 {
    5
}

/// Arguments of the `slow` tool.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct SlowArgs {
    /// How long to run in total, in seconds (at most 30).
    #[serde(default = "default_slow_seconds")]
    pub(crate) seconds: f64,
    /// How many progress steps to report (at least 1).
    #[serde(default = "default_slow_steps")]
    pub(crate) steps: u32,
}

/// Structured result of the `clock` tool.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ClockOutput {
    /// The current UTC time as an RFC 3339 timestamp.
    pub(crate) time: String,
}

/// Arguments of the `fail` tool.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct FailArgs {
    /// The error message the tool reports.
    pub(crate) message: String,
}

/// `_meta` of the `clock` tool, linking it to its MCP App UI resource.
fn clock_tool_meta() -> MetaObject {
    let mut meta = MetaObject::new();
    meta.0.insert(
        "ui".to_owned(),
        json!({ "resourceUri": CLOCK_UI_URI, "visibility": ["model", "app"] }),
    );
    meta.0
        .insert("ui/resourceUri".to_owned(), json!(CLOCK_UI_URI));
    meta
}

/// The resource entry for `demo://readme`.
fn readme_resource() -> Resource {
    Resource::new(README_URI, "readme")
        .with_title("Demo server readme")
        .with_description("What the Switchboard demo server offers.")
        .with_mime_type("text/markdown")
        .with_size(README_MARKDOWN.len() as u64)
}

/// The resource entry for the clock's MCP App page.
fn clock_ui_resource() -> Resource {
    Resource::new(CLOCK_UI_URI, "clock-ui")
        .with_title("Demo clock app")
        .with_description("The MCP App UI of the `clock` tool.")
        .with_mime_type(CLOCK_UI_MIME_TYPE)
        .with_size(CLOCK_HTML.len() as u64)
}

/// Decode `%XX` escapes in a URI path segment; `None` if malformed or not UTF-8.
fn percent_decode(input: &str) -> Option<String> {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = input.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The demo MCP server handler. Cheap to clone; one per session.
#[derive(Debug, Clone)]
pub struct DemoServer {
    options: DemoOptions,
    tool_router: ToolRouter<Self>,
}

impl Default for DemoServer {
    fn default() -> Self {
        Self::new(DemoOptions::default())
    }
}

#[tool_router(router = tool_router)]
impl DemoServer {
    /// A new handler with the given options.
    pub fn new(options: DemoOptions) -> Self {
        Self {
            options,
            tool_router: Self::tool_router(),
        }
    }

    /// Echo a message back.
    #[tool(
        description = "Echo a message back as `Echo: <message>`.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn echo(&self, Parameters(args): Parameters<EchoArgs>) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text(format!("Echo: {}", args.message))])
    }

    /// Add two numbers.
    #[tool(
        description = "Add two numbers. Returns the sum as text and as structured content `{\"sum\": n}`.",
        output_schema = schema_for_output::<AddOutput>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn add(&self, Parameters(args): Parameters<AddArgs>) -> CallToolResult {
        let sum = args.a + args.b;
        let mut result = CallToolResult::success(vec![ContentBlock::text(sum.to_string())]);
        result.structured_content = Some(json!(AddOutput { sum }));
        result
    }

    /// Run for a while, reporting progress; stops early when cancelled.
    #[tool(
        description = "Take `seconds` (default 2, max 30) to finish, sending a progress notification at each of `steps` (default 5) steps when the request has a progress token. Stops early when the request is cancelled.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn slow(
        &self,
        Parameters(args): Parameters<SlowArgs>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        if !args.seconds.is_finite() || args.seconds < 0.0 || args.seconds > SLOW_MAX_SECONDS {
            return CallToolResult::error(vec![ContentBlock::text(format!(
                "`seconds` must be between 0 and {SLOW_MAX_SECONDS}, got {}",
                args.seconds
            ))]);
        }
        if args.steps == 0 || args.steps > SLOW_MAX_STEPS {
            return CallToolResult::error(vec![ContentBlock::text(format!(
                "`steps` must be between 1 and {SLOW_MAX_STEPS}, got {}",
                args.steps
            ))]);
        }
        let steps = args.steps;
        let step_time = Duration::from_secs_f64(args.seconds / f64::from(steps));
        let token = context.meta.get_progress_token();
        for step in 1..=steps {
            tokio::select! {
                () = context.ct.cancelled() => {
                    tracing::debug!(step, steps, "slow tool cancelled");
                    return CallToolResult::error(vec![ContentBlock::text(format!(
                        "cancelled after {} of {steps} steps",
                        step - 1
                    ))]);
                }
                () = tokio::time::sleep(step_time) => {}
            }
            if let Some(token) = &token {
                let progress = ProgressNotificationParam::new(token.clone(), f64::from(step))
                    .with_total(f64::from(steps))
                    .with_message(format!("step {step} of {steps}"));
                if let Err(error) = context.peer.notify_progress(progress).await {
                    tracing::debug!(%error, "could not send a progress notification");
                }
            }
        }
        CallToolResult::success(vec![ContentBlock::text(format!(
            "Done: {steps} steps in {} seconds.",
            args.seconds
        ))])
    }

    /// Return a tiny PNG image.
    #[tool(
        description = "Return a 16x16 PNG image and a short text describing it.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn tiny_image(&self) -> CallToolResult {
        let data = base64::engine::general_purpose::STANDARD.encode(TINY_PNG);
        CallToolResult::success(vec![
            ContentBlock::image(data, "image/png"),
            ContentBlock::text("A 16x16 PNG: a blue gradient with a dark border."),
        ])
    }

    /// The current UTC time, with an MCP App UI.
    #[tool(
        description = "Tell the current UTC time (RFC 3339). Hosts that support MCP Apps show it in a small clock UI.",
        output_schema = schema_for_output::<ClockOutput>(),
        annotations(read_only_hint = true, open_world_hint = false),
        meta = clock_tool_meta()
    )]
    async fn clock(&self) -> CallToolResult {
        let time = rfc3339_utc(SystemTime::now());
        let mut result =
            CallToolResult::success(vec![ContentBlock::text(format!("The time is {time}."))]);
        result.structured_content = Some(json!(ClockOutput { time }));
        result
    }

    /// Return a link to the readme resource.
    #[tool(
        description = "Return a resource_link content block pointing at demo://readme.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn get_resource_link(&self) -> CallToolResult {
        CallToolResult::success(vec![
            ContentBlock::text("Here is a link to the demo readme."),
            ContentBlock::resource_link(readme_resource()),
        ])
    }

    /// Always fail with the given message.
    #[tool(
        description = "Always fail: returns a tool result with isError: true carrying `message`.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn fail(&self, Parameters(args): Parameters<FailArgs>) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(args.message)])
    }
}

impl DemoServer {
    async fn startup_delay(&self) {
        if !self.options.startup_delay.is_zero() {
            tokio::time::sleep(self.options.startup_delay).await;
        }
    }

    fn greeting_for(uri: &str) -> Option<String> {
        let raw = uri.strip_prefix(GREETING_PREFIX)?;
        if raw.is_empty() || raw.contains(['/', '?', '#']) {
            return None;
        }
        let name = percent_decode(raw)?;
        Some(format!("Hello, {name}!"))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for DemoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_prompts()
                .build(),
        )
        .with_server_info(
            Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION"))
                .with_title("Switchboard demo server"),
        )
        .with_instructions(INSTRUCTIONS)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        self.startup_delay().await;
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        self.startup_delay().await;
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![
            readme_resource(),
            clock_ui_resource(),
        ]))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(GREETING_TEMPLATE, "greeting")
                .with_title("Greeting")
                .with_description("A greeting for `name`, as plain text.")
                .with_mime_type("text/plain"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        let contents = if uri == README_URI {
            ResourceContents::text(README_MARKDOWN, uri).with_mime_type("text/markdown")
        } else if uri == CLOCK_UI_URI {
            ResourceContents::text(CLOCK_HTML, uri).with_mime_type(CLOCK_UI_MIME_TYPE)
        } else if let Some(greeting) = Self::greeting_for(uri) {
            ResourceContents::text(greeting, uri)
        } else {
            return Err(ErrorData::resource_not_found(
                format!("no such resource: {uri}"),
                Some(json!({ "uri": uri })),
            ));
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(vec![
            Prompt::new(
                "greet",
                Some("Ask the model to greet someone."),
                Some(vec![
                    PromptArgument::new("name")
                        .with_description("Who to greet.")
                        .with_required(true),
                    PromptArgument::new("style")
                        .with_description("How to greet them, e.g. `formal` or `pirate`.")
                        .with_required(false),
                ]),
            ),
            Prompt::new(
                "summarize-readme",
                Some("Ask the model to summarize the demo readme (embedded as a resource)."),
                None,
            ),
        ]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let argument = |key: &str| -> Option<String> {
            request
                .arguments
                .as_ref()
                .and_then(|args| args.get(key))
                .and_then(|value| match value {
                    serde_json::Value::String(s) => Some(s.clone()),
                    serde_json::Value::Null => None,
                    other => Some(other.to_string()),
                })
                .filter(|s| !s.trim().is_empty())
        };
        match request.name.as_str() {
            "greet" => {
                let Some(name) = argument("name") else {
                    return Err(ErrorData::invalid_params(
                        "prompt `greet` needs the argument `name`",
                        None,
                    ));
                };
                let text = match argument("style") {
                    Some(style) => format!("Please greet {name} in a {style} style."),
                    None => format!("Please greet {name}."),
                };
                Ok(
                    GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
                        .with_description(format!("A greeting for {name}"))
                        .into(),
                )
            }
            "summarize-readme" => Ok(GetPromptResult::new(vec![
                PromptMessage::new_text(
                    Role::User,
                    "Summarize the following readme in two sentences.",
                ),
                PromptMessage::new(
                    Role::User,
                    ContentBlock::resource(
                        ResourceContents::text(README_MARKDOWN, README_URI)
                            .with_mime_type("text/markdown"),
                    ),
                ),
            ])
            .with_description("Summarize the demo readme")
            .into()),
            other => Err(ErrorData::invalid_params(
                format!("no such prompt: {other}"),
                Some(json!({ "name": other })),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greeting_uris() {
        assert_eq!(
            DemoServer::greeting_for("demo://greeting/Ada").as_deref(),
            Some("Hello, Ada!")
        );
        assert_eq!(
            DemoServer::greeting_for("demo://greeting/Ada%20Lovelace").as_deref(),
            Some("Hello, Ada Lovelace!")
        );
        assert_eq!(DemoServer::greeting_for("demo://greeting/"), None);
        assert_eq!(DemoServer::greeting_for("demo://greeting/a/b"), None);
        assert_eq!(DemoServer::greeting_for("demo://greeting/%zz"), None);
        assert_eq!(DemoServer::greeting_for("demo://other/Ada"), None);
    }

    #[test]
    fn tool_list_is_complete() {
        let server = DemoServer::default();
        let mut names: Vec<String> = server
            .tool_router
            .list_all()
            .into_iter()
            .map(|tool| tool.name.into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "add",
                "clock",
                "echo",
                "fail",
                "get_resource_link",
                "slow",
                "tiny_image"
            ]
        );
    }

    #[test]
    fn tiny_png_is_a_16x16_png() {
        assert_eq!(&TINY_PNG[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&TINY_PNG[12..16], b"IHDR");
        assert_eq!(&TINY_PNG[16..20], &16u32.to_be_bytes());
        assert_eq!(&TINY_PNG[20..24], &16u32.to_be_bytes());
    }
}
