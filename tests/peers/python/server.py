"""Switchboard test peer: one server on the official Python SDK (mcp 2.x, MCPServer).

Usage:
    python server.py --transport stdio|sse|streamable-http [--json-response] [--stateless] [--port P]

HTTP transports always bind 127.0.0.1. Environment:
    SWITCHBOARD_CANCEL_LOG  file to which `cancelled <requestId>` lines are appended when a
                            `notifications/cancelled` arrives for a running `hang` call.
    SWITCHBOARD_PY_ECHO_DESCRIPTION  the `echo` tool's description (a second start with
                            another value is a server that changed a tool: pinning tests).
    SWITCHBOARD_PY_ECHO_NAME  the `echo` tool's name (another value is a rename).
    SWITCHBOARD_PY_RUG_PULL  when set, a `rug_pull` tool that changes `echo`'s description
                            while connected and sends notifications/tools/list_changed
                            (on a session, and to `subscriptions/listen` streams), and a
                            `touch` tool that says `py://item/{id}` was updated.
    SWITCHBOARD_PY_RESOLVE  when set, tools whose inputs the SDK resolves from the client
                            (`Resolve`): `greet` asks the person's name (elicitation),
                            `summarize` samples the client's model, `where` lists the roots,
                            `greet_slowly` asks the name, then reports 3 progress steps;
                            `request_id` answers with the request's own id (what a
                            proxy in between sends).
                            On 2026-07-28 they ask through an InputRequiredResult.
    SWITCHBOARD_PY_META     when set, what a proxy forwards can be seen: a `meta` tool, a
                            `py://meta/{name}` resource and a `meta` prompt answer with the
                            request's `_meta` (as JSON, progressToken left out), and a
                            `roots` tool asks the client for roots/list and answers with it.
"""

import argparse
import asyncio
import os
import struct
import sys
import zlib
from typing import Any

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CancelledNotificationParams, ResourceLink
from pydantic import BaseModel

INSTRUCTIONS = "Switchboard Python test peer. Tools: echo, add, image, resource_link, hang, crash, fail, slow_progress."

mcp = MCPServer(name="switchboard-py-peer", version="1.0.0", instructions=INSTRUCTIONS, log_level="WARNING")

# Request ids of `hang` calls currently running (as strings; ids may be ints or strings).
_hanging: set[str] = set()


def _tiny_png() -> bytes:
    """A valid 1x1 red RGBA PNG, built with the standard library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00\xff")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _log_cancel(request_id: Any) -> None:
    path = os.environ.get("SWITCHBOARD_CANCEL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"cancelled {request_id}\n")
            f.flush()


class Sum(BaseModel):
    """Structured result of `add`."""

    sum: float


ECHO_NAME = os.environ.get("SWITCHBOARD_PY_ECHO_NAME", "echo")


@mcp.tool(
    name=ECHO_NAME,
    description=os.environ.get("SWITCHBOARD_PY_ECHO_DESCRIPTION", "Echo the message back."),
)
def echo(message: str) -> str:
    return message


if os.environ.get("SWITCHBOARD_PY_RUG_PULL"):

    @mcp.tool(description="Change `echo`'s description to `text`, then send notifications/tools/list_changed.")
    async def rug_pull(ctx: Context, text: str) -> str:
        tool = mcp._tool_manager.get_tool(ECHO_NAME)  # noqa: SLF001 - no public way to edit a tool
        tool.description = text
        # Both ways a server says so: on a session (2025-11-25 and older) unasked, and
        # on 2026-07-28 to the `subscriptions/listen` streams that asked for it.
        await ctx.session.send_tool_list_changed()
        await ctx.notify_tools_changed()
        return "changed"

    @mcp.tool(description="Say that the resource `py://item/{id}` changed.")
    async def touch(ctx: Context, id: str) -> str:
        uri = f"py://item/{id}"
        # To a session subscribed with resources/subscribe, and to 2026-07-28
        # `subscriptions/listen` streams that named the URI.
        await ctx.session.send_resource_updated(uri)
        await ctx.notify_resource_updated(uri)
        return "touched"


if os.environ.get("SWITCHBOARD_PY_META"):
    import json

    def _meta_json(ctx: Context) -> str:
        meta = dict(ctx.request_context.meta or {})
        meta.pop("progressToken", None)
        return json.dumps(meta, sort_keys=True)

    @mcp.tool(name="meta", description="Answer with this request's _meta (JSON, without progressToken).")
    def meta_tool(ctx: Context) -> str:
        return _meta_json(ctx)

    @mcp.resource("py://meta/{name}", name="meta", description="This request's _meta", mime_type="application/json")
    def meta_resource(name: str, ctx: Context) -> str:
        return _meta_json(ctx)

    @mcp.prompt(name="meta", description="This request's _meta as the prompt text.")
    def meta_prompt(ctx: Context) -> str:
        return _meta_json(ctx)

    @mcp.tool(description="Ask the client for its roots (roots/list) and answer with their URIs (JSON).")
    async def roots(ctx: Context) -> str:
        result = await ctx.session.list_roots()
        return json.dumps([str(r.uri) for r in result.roots])


if os.environ.get("SWITCHBOARD_PY_RESOLVE"):
    import json as _json
    from typing import Annotated

    from mcp.server.mcpserver import Elicit, ListRoots, Resolve, Sample
    from mcp_types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent

    class Name(BaseModel):
        name: str

    def _ask_name() -> Elicit[Name]:
        return Elicit("What is your name?", Name)

    @mcp.tool(description="Ask the person's name (elicitation), then greet them.")
    def greet(who: Annotated[Name, Resolve(_ask_name)]) -> str:
        return f"hello {who.name}"

    @mcp.tool(description="Ask the person's name, then report 3 progress steps and greet them.")
    async def greet_slowly(who: Annotated[Name, Resolve(_ask_name)], ctx: Context) -> str:
        for i in range(1, 4):
            await ctx.report_progress(i, 3, f"greeting step {i}")
            await asyncio.sleep(0.4)
        return f"hello slowly {who.name}"

    def _sample_summary() -> Sample:
        return Sample(
            [SamplingMessage(role="user", content=TextContent(type="text", text="Summarize: MCP"))],
            max_tokens=50,
        )

    @mcp.tool(description="Ask the client's model for a summary (sampling) and return it.")
    def summarize(summary: Annotated[CreateMessageResult, Resolve(_sample_summary)]) -> str:
        return f"model said: {summary.content.text}"

    def _roots() -> ListRoots:
        return ListRoots()

    @mcp.tool(description="List the client's roots (roots/list) as JSON URIs.")
    def where(roots: Annotated[ListRootsResult, Resolve(_roots)]) -> str:
        return _json.dumps([str(r.uri) for r in roots.roots])

    @mcp.tool(description="Answer with this request's own id.")
    def request_id(ctx: Context) -> str:
        return str(ctx.request_id)


@mcp.tool(description="Add two numbers; the result is structured ({\"sum\": a + b}).")
def add(a: float, b: float) -> Sum:
    return Sum(sum=a + b)


@mcp.tool(description="Return a tiny PNG image.")
def image() -> Image:
    return Image(data=_tiny_png(), format="png")


@mcp.tool(description="Return a resource_link block pointing at py://info.")
def resource_link() -> ResourceLink:
    return ResourceLink(uri="py://info", name="info", mime_type="text/plain", description="Peer information")


@mcp.tool(description="Sleep for `seconds` (default an hour). Records notifications/cancelled it receives.")
async def hang(ctx: Context, seconds: float = 3600) -> str:
    request_id = ctx.request_id
    _hanging.add(request_id)
    # On cancellation the id stays in `_hanging`: the cancel notification handler
    # runs after this scope is cancelled and records it.
    await asyncio.sleep(seconds)
    _hanging.discard(request_id)
    return f"slept {seconds}s"


@mcp.tool(description="Exit the server process (status 3) in the middle of the call.")
def crash() -> str:
    sys.stderr.write("crash: exiting with status 3\n")
    sys.stderr.flush()
    os._exit(3)


@mcp.tool(description="Always fails (the result has isError: true).")
def fail() -> str:
    raise ToolError("this tool always fails")


@mcp.tool(
    description="Report `steps` progress notifications, `interval` seconds apart, then finish. "
    "Records notifications/cancelled it receives."
)
async def slow_progress(ctx: Context, steps: int = 3, interval: float = 0.05) -> str:
    request_id = ctx.request_id
    _hanging.add(request_id)
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
        await asyncio.sleep(interval)
    _hanging.discard(request_id)
    return f"done {steps} steps"


@mcp.resource("py://info", name="info", description="About this peer", mime_type="text/plain")
def info() -> str:
    return "switchboard python peer"


@mcp.resource("py://item/{id}", name="item", description="An item by id", mime_type="text/plain")
def item(id: str) -> str:
    return f"item {id}"


@mcp.prompt(description="Ask for a code review.")
def review(code: str, language: str = "python") -> str:
    return f"Please review this {language} code:\n\n{code}"


async def _on_cancelled(ctx: Any, params: CancelledNotificationParams) -> None:
    request_id = params.request_id
    if request_id is not None and str(request_id) in _hanging:
        _hanging.discard(str(request_id))
        _log_cancel(request_id)


mcp._lowlevel_server.add_notification_handler(  # noqa: SLF001 - no public hook for this
    "notifications/cancelled", CancelledNotificationParams, _on_cancelled
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transport", choices=["stdio", "sse", "streamable-http"], default="stdio")
    parser.add_argument("--json-response", action="store_true", help="streamable-http: JSON replies, not SSE")
    parser.add_argument("--stateless", action="store_true", help="streamable-http: no session")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()

    if args.transport == "stdio":
        mcp.run("stdio")
    elif args.transport == "sse":
        mcp.run("sse", host="127.0.0.1", port=args.port)
    else:
        mcp.run(
            "streamable-http",
            host="127.0.0.1",
            port=args.port,
            json_response=args.json_response,
            stateless_http=args.stateless,
        )


if __name__ == "__main__":
    main()
