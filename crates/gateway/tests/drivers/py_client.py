"""The Python SDK client (tests/peers/.venv, mcp pinned) driving the gateway: list, call
with progress, cancel a long call, read a resource, get a prompt. Prints one JSON
document on stdout.

Usage: python py_client.py '<json plan>'
  plan = {transport: "stdio"|"http", command, args, url, token,
          echo, slow, hang, resource, prompt, promptArgs,
          bigEcho: {name, bytes} (echo a message that long; out.bigEcho = the length back)}
"""

import asyncio
import json
import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

plan = json.loads(sys.argv[1])
out = {}


async def drive(session: ClientSession) -> None:
    await session.initialize()
    tools = await session.list_tools()
    out["tools"] = [t.name for t in tools.tools]
    if plan.get("echo"):
        r = await session.call_tool(plan["echo"], {"message": "hi"})
        out["echo"] = [c.text for c in r.content]
    if plan.get("bigEcho"):
        big = "".join(chr(ord("a") + i % 26) for i in range(plan["bigEcho"]["bytes"]))
        r = await session.call_tool(plan["bigEcho"]["name"], {"message": big})
        out["bigEcho"] = len(r.content[0].text) if r.content[0].text == big else -1
    if plan.get("slow"):
        progress = []

        async def on_progress(p, total, message):
            progress.append(p)

        r = await session.call_tool(plan["slow"]["name"], plan["slow"]["arguments"], progress_callback=on_progress)
        out["slow"] = {"progress": progress, "text": r.content[0].text}
    if plan.get("hang"):
        t0 = time.monotonic()
        with anyio.move_on_after(plan["hang"].get("afterMs", 500) / 1000) as scope:
            await session.call_tool(plan["hang"]["name"], plan["hang"].get("arguments", {}))
        out["hang"] = {"cancelled": scope.cancelled_caught, "ms": int((time.monotonic() - t0) * 1000)}
        # The session stays usable after a cancellation.
        r = await session.call_tool(plan["echo"], {"message": "after"})
        out["afterCancel"] = [c.text for c in r.content]
    if plan.get("resource"):
        r = await session.read_resource(plan["resource"])
        out["resource"] = [c.text for c in r.contents]
    if plan.get("prompt"):
        r = await session.get_prompt(plan["prompt"], plan.get("promptArgs", {}))
        out["prompt"] = [m.content.text for m in r.messages]


async def main() -> None:
    if plan["transport"] == "stdio":
        params = StdioServerParameters(command=plan["command"], args=plan["args"])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await drive(session)
    else:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {plan['token']}"})
        async with http:
            async with streamable_http_client(plan["url"], http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await drive(session)
    print(json.dumps(out), flush=True)


asyncio.run(main())
