"""The Python SDK's high-level client (tests/peers/.venv, mcp pinned) as a user gets it:
`mcp.Client` in its default mode, which probes `server/discover` and speaks protocol
2026-07-28 when the server does (no session; input requests come back as
`InputRequiredResult` and are answered by retrying the call; list changes arrive on a
`subscriptions/listen` stream). Prints one JSON document on stdout.

Usage: python py_modern_client.py '<json plan>'
  plan = {transport: "stdio"|"http", command, args, url, token,
          bases: [URL, ...]           (http) send each request to the next of these in
                                      turn (instances behind one origin); out.perBase
          echo: NAME                  call it with {message: "hi"}; out.echo = texts
          slow: {name, arguments}     call with a progress callback; out.slow = {progress, text}
          elicit: {name, arguments}   answered "accept" with plan.elicitContent; out.elicit
          sample: {name, arguments}   answered with a fixed assistant text; out.sample
          roots: [URI, ...]           declare roots and answer roots/list with these
                                      (without it the client declares no roots)
          resource: URI, prompt: NAME, promptArgs
          more: [{name, arguments}]   further calls; out.more = their texts
          listen: {name, arguments}   open subscriptions/listen (tools), then call NAME;
                                      out.listen = the events seen within 30 s
          listenResource: {uri, name, arguments}  open subscriptions/listen for
                                      the resource URI, then call NAME; out.listenResource
                                      = {honored, events: [[type, uri]]} within 15 s
          listenAfter: {name, arguments, wait}  call NAME first, then open
                                      subscriptions/listen (tools); out.listenAfter =
                                      the events seen within `wait` s (default 5)}
"""

import asyncio
import json
import sys

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

plan = json.loads(sys.argv[1])
out = {"asked": []}


async def on_elicit(ctx, params):
    out["asked"].append({"kind": "elicitation", "message": params.message})
    return types.ElicitResult(action="accept", content=plan.get("elicitContent", {}))


async def on_sample(ctx, params):
    out["asked"].append({"kind": "sampling", "messages": len(params.messages)})
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="sampled by the python client"),
        model="py-fake-model",
    )


async def on_roots(ctx):
    out["asked"].append({"kind": "roots"})
    return types.ListRootsResult(roots=[types.Root(uri=u) for u in plan["roots"]])


class Alternate(httpx2.AsyncBaseTransport):
    """Each request to the next base in turn, as a load balancer without affinity would."""

    def __init__(self, bases):
        self.bases = [httpx2.URL(b) for b in bases]
        self.sent = [0] * len(bases)
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request):
        i = sum(self.sent) % len(self.bases)
        self.sent[i] += 1
        b = self.bases[i]
        request.url = request.url.copy_with(scheme=b.scheme, host=b.host, port=b.port)
        return await self.inner.handle_async_request(request)

    async def aclose(self):
        await self.inner.aclose()


def texts(result):
    return [c.text for c in result.content if getattr(c, "text", None) is not None]


async def drive(c: Client) -> None:
    out["version"] = c.protocol_version
    tools = await c.list_tools()
    out["tools"] = [t.name for t in tools.tools]
    if plan.get("echo"):
        out["echo"] = texts(await c.call_tool(plan["echo"], {"message": "hi"}))
    if plan.get("slow"):
        progress = []

        async def on_progress(p, total, message):
            progress.append(p)

        r = await c.call_tool(plan["slow"]["name"], plan["slow"]["arguments"], progress_callback=on_progress)
        out["slow"] = {"progress": progress, "text": texts(r)}
    if plan.get("elicit"):
        r = await c.call_tool(plan["elicit"]["name"], plan["elicit"].get("arguments", {}))
        out["elicit"] = texts(r)
    if plan.get("sample"):
        r = await c.call_tool(plan["sample"]["name"], plan["sample"].get("arguments", {}))
        out["sample"] = texts(r)
    if plan.get("more"):
        out["more"] = [texts(await c.call_tool(m["name"], m.get("arguments", {}))) for m in plan["more"]]
    if plan.get("resource"):
        r = await c.read_resource(plan["resource"])
        out["resource"] = [x.text for x in r.contents]
    if plan.get("prompt"):
        r = await c.get_prompt(plan["prompt"], plan.get("promptArgs", {}))
        out["prompt"] = [m.content.text for m in r.messages]
    if plan.get("listen"):
        events = []
        async with c.listen(tools_list_changed=True) as sub:
            await c.call_tool(plan["listen"]["name"], plan["listen"].get("arguments", {}))
            with anyio.move_on_after(30):
                async for event in sub:
                    events.append(type(event).__name__)
                    break
        out["listen"] = events
        out["toolsAfter"] = [t.name for t in (await c.list_tools()).tools]
    if plan.get("listenResource"):
        lr = plan["listenResource"]
        events = []
        async with c.listen(resource_subscriptions=[lr["uri"]]) as sub:
            honored = list(sub.honored.resource_subscriptions or []) if sub.honored else []
            await c.call_tool(lr["name"], lr.get("arguments", {}))
            with anyio.move_on_after(15):
                async for event in sub:
                    events.append([type(event).__name__, str(getattr(event, "uri", ""))])
                    break
        out["listenResource"] = {"honored": honored, "events": events}
    if plan.get("listenAfter"):
        after = plan["listenAfter"]
        await c.call_tool(after["name"], after.get("arguments", {}))
        events = []
        async with c.listen(tools_list_changed=True) as sub:
            with anyio.move_on_after(after.get("wait", 5)):
                async for event in sub:
                    events.append(type(event).__name__)
                    break
        out["listenAfter"] = events


async def main() -> None:
    callbacks = {"elicitation_callback": on_elicit, "sampling_callback": on_sample}
    if plan.get("roots"):
        callbacks["list_roots_callback"] = on_roots
    if plan["transport"] == "stdio":
        server = StdioServerParameters(command=plan["command"], args=plan.get("args", []))
        async with Client(server, **callbacks) as c:
            await drive(c)
    else:
        headers = {"Authorization": f"Bearer {plan['token']}"}
        transport = Alternate(plan["bases"]) if plan.get("bases") else None
        timeout = httpx2.Timeout(60, read=120)
        async with httpx2.AsyncClient(headers=headers, timeout=timeout, transport=transport) as http:
            async with Client(streamable_http_client(plan["url"], http_client=http), **callbacks) as c:
                await drive(c)
        if transport:
            out["perBase"] = transport.sent


asyncio.run(main())
print(json.dumps(out))
