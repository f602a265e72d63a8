"""The Python SDK client (tests/peers/.venv, mcp pinned; `ClientSession`, protocol before
2026-07-28) for the gateway's trust tests: lists the tools (with their `_meta`), makes
the calls named, reads the URIs named (each read's texts, or its error), and prints
one JSON document on stdout.

Usage: python py_trust_client.py '<json plan>'
  plan = {transport: "stdio"|"http", command, args, url, token,
          calls: [NAME, ...]  out.calls[NAME] = the result as JSON, or {"error": text}
          reads: [URI, ...]   out.reads[URI] = [text, ...], or {"error": text}}
  out.tools = {name: _meta}, out.instructions = the gateway's instructions
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

plan = json.loads(sys.argv[1])
out = {"calls": {}, "reads": {}}


async def drive(session: ClientSession) -> None:
    init = await session.initialize()
    out["instructions"] = init.instructions
    tools = await session.list_tools()
    out["tools"] = {t.name: t.model_dump(mode="json", by_alias=True).get("_meta") for t in tools.tools}
    for name in plan.get("calls", []):
        try:
            r = await session.call_tool(name, {})
            out["calls"][name] = r.model_dump(mode="json", by_alias=True, exclude_none=True)
        except Exception as e:  # the gateway's error, as the client saw it
            out["calls"][name] = {"error": str(e)}
    for uri in plan.get("reads", []):
        try:
            r = await session.read_resource(uri)
            out["reads"][uri] = [getattr(c, "text", None) for c in r.contents]
        except Exception as e:
            out["reads"][uri] = {"error": str(e)}


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
