"""The Python SDK client (tests/peers/.venv, mcp pinned; `ClientSession`, protocol before
2026-07-28) for the gateway's tool-pinning tests: one session that runs a list of steps
while counting the gateway's `notifications/tools/list_changed` and keeping its log
notifications, then prints one JSON document on stdout.

Usage: python py_pins_client.py '<json plan>'
  plan = {transport: "stdio"|"http", command, args, url, token, steps: [STEP, ...]}
  STEP (each gives one entry of out.steps, in order):
    {"list": true}                  -> {"tools": [name, ...]}
    {"call": NAME, "arguments": {}} -> {"text": [text, ...], "isError": bool} or {"error": text}
    {"mark": true}                  -> {}  (once no list_changed came for 1 s, at most 15 s:
                                         list_changed counted from here on, so one the
                                         gateway sent for a server connecting or a re-judge
                                         is not taken for the next step's)
    {"waitChanged": SECONDS}        -> {"changed": bool}  (one arrived since the mark)
    {"run": [argv...]}              -> {"code": N, "stdout": text, "stderr": text}
  out.instructions = the gateway's instructions, out.logs = its log notifications' data
"""

import asyncio
import json
import subprocess
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

plan = json.loads(sys.argv[1])
out = {"steps": [], "logs": []}
changed = {"count": 0, "mark": 0}


async def on_message(message) -> None:
    if getattr(message, "method", None) == "notifications/tools/list_changed":
        changed["count"] += 1


async def on_log(params) -> None:
    out["logs"].append(params.data if isinstance(params.data, str) else json.dumps(params.data))


async def step(session: ClientSession, s: dict) -> dict:
    if s.get("list"):
        tools = await session.list_tools()
        return {"tools": [t.name for t in tools.tools]}
    if "call" in s:
        try:
            r = await session.call_tool(s["call"], s.get("arguments", {}))
        except Exception as e:  # the gateway's error, as the client saw it
            return {"error": str(e)}
        return {"text": [getattr(c, "text", None) for c in r.content], "isError": bool(r.is_error)}
    if s.get("mark"):
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            seen = changed["count"]
            await asyncio.sleep(1.0)
            if changed["count"] == seen:
                break
        changed["mark"] = changed["count"]
        return {}
    if "waitChanged" in s:
        deadline = time.monotonic() + s["waitChanged"]
        while changed["count"] <= changed["mark"] and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return {"changed": changed["count"] > changed["mark"]}
    if "run" in s:
        done = await asyncio.to_thread(subprocess.run, s["run"], capture_output=True, text=True, timeout=120)
        return {"code": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
    raise ValueError(f"unknown step {s}")


async def drive(session: ClientSession) -> None:
    init = await session.initialize()
    out["instructions"] = init.instructions
    for s in plan.get("steps", []):
        out["steps"].append(await step(session, s))


async def main() -> None:
    hooks = {"message_handler": on_message, "logging_callback": on_log}
    if plan["transport"] == "stdio":
        params = StdioServerParameters(command=plan["command"], args=plan["args"])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, **hooks) as session:
                await drive(session)
    else:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {plan['token']}"})
        async with http:
            async with streamable_http_client(plan["url"], http_client=http) as (read, write):
                async with ClientSession(read, write, **hooks) as session:
                    await drive(session)
    print(json.dumps(out), flush=True)


asyncio.run(main())
