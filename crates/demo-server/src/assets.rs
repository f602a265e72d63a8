//! Static content served by the demo server: the readme, the MCP App page
//! and the tiny PNG image.

/// URI of the demo readme resource (`text/markdown`).
pub const README_URI: &str = "demo://readme";

/// URI of the clock tool's MCP App UI resource.
pub const CLOCK_UI_URI: &str = "ui://switchboard-demo/clock.html";

/// MIME type of MCP App UI resources.
pub const CLOCK_UI_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// URI template of the greeting resource template.
pub const GREETING_TEMPLATE: &str = "demo://greeting/{name}";

/// Prefix every concrete greeting URI starts with.
pub(crate) const GREETING_PREFIX: &str = "demo://greeting/";

/// A valid 16x16 RGB PNG, returned (base64-encoded) by the `tiny_image` tool.
pub const TINY_PNG: &[u8] = include_bytes!("../assets/tiny.png");

/// The self-contained MCP App page for the `clock` tool.
pub(crate) const CLOCK_HTML: &str = include_str!("../assets/clock.html");

/// Text of the `demo://readme` resource.
pub(crate) const README_MARKDOWN: &str = "\
# Switchboard demo server

This is the small MCP server bundled with Switchboard. It exists so a fresh
install has something real to show, and so tests and benchmarks have a
predictable peer.

## Tools
- `echo` - repeats a message.
- `add` - adds two numbers (also as structured content).
- `slow` - takes a while, reporting progress; it can be cancelled.
- `tiny_image` - returns a 16x16 PNG.
- `clock` - the current UTC time, with an MCP App UI (`ui://switchboard-demo/clock.html`).
- `get_resource_link` - returns a link to this readme.
- `fail` - always returns a tool error.

## Resources
- `demo://readme` - this text.
- `demo://greeting/{name}` - a greeting for anyone.

## Prompts
- `greet` - greet someone, optionally in a given style.
- `summarize-readme` - summarize this readme.
";

/// The `instructions` text sent in the `initialize` result.
pub(crate) const INSTRUCTIONS: &str = "\
This is Switchboard's bundled demo MCP server. It has no side effects and \
touches nothing outside itself. Use `echo` and `add` for simple calls, `slow` \
to see progress notifications and cancellation, `tiny_image` for image content, \
`clock` for an MCP App with a UI resource, `get_resource_link` for a resource \
link and `fail` for a tool error. Read `demo://readme` for an overview.";
