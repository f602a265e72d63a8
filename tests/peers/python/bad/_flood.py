"""Replies of the flooding peers, as chunks of bytes, shared by `flood.py` (stdio) and
`flood_http.py` (legacy SSE and Streamable HTTP). Stdlib only.

Tools (FLOOD_BYTES, default 64 MiB, sets the size of the floods):
- `echo`: a small text result, to show the connection is still usable;
- `big`: a text result of FLOOD_BYTES, `id` first (Python's key order);
- `big_late`: the same with `id` last (the TypeScript SDK's key order);
- `unterminated`: `id` first, then FLOOD_BYTES of text and no end of message at all
  (on stdio the line is ended only after the flood, so the stream can go on);
- `deep`: a result nested 100,000 arrays deep (about 200 KB).
"""

import json
import os

FLOOD = int(os.environ.get("FLOOD_BYTES", str(64 * 1024 * 1024)))
CHUNK = 1024 * 1024

TOOLS = [
    {"name": n, "description": d, "inputSchema": {"type": "object", "properties": {}}}
    for n, d in [
        ("echo", "A small reply."),
        ("big", "A reply of FLOOD_BYTES, id first."),
        ("big_late", "A reply of FLOOD_BYTES, id last."),
        ("unterminated", "A message that does not end."),
        ("deep", "A reply nested 100000 levels deep."),
    ]
]


def dumps(message):
    return json.dumps(message, separators=(",", ":")).encode()


def flood_text():
    left = FLOOD
    while left > 0:
        n = min(CHUNK, left)
        yield b"a" * n
        left -= n


def result_chunks(request, result):
    yield dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": result})


def error_chunks(request, code, message):
    yield dumps({"jsonrpc": "2.0", "id": request.get("id"), "error": {"code": code, "message": message}})


def reply_chunks(request, version):
    """The body of the reply to `request` (a JSON-RPC request), without framing."""
    method = request.get("method")
    rid = json.dumps(request.get("id")).encode()
    if method == "initialize":
        offered = (request.get("params") or {}).get("protocolVersion")
        return result_chunks(request, {
            "protocolVersion": offered if offered in version else version[-1],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "flood", "version": "0.0.1"},
        })
    if method == "ping":
        return result_chunks(request, {})
    if method == "tools/list":
        return result_chunks(request, {"tools": TOOLS})
    if method != "tools/call":
        return error_chunks(request, -32601, f"Method not found: {method}")
    name = (request.get("params") or {}).get("name")
    if name == "echo":
        return result_chunks(request, {"content": [{"type": "text", "text": "still here"}]})
    if name in ("big", "unterminated"):
        def gen():
            yield b'{"jsonrpc":"2.0","id":' + rid + b',"result":{"content":[{"type":"text","text":"'
            yield from flood_text()
            if name == "big":
                yield b'"}]}}'
        return gen()
    if name == "big_late":
        def gen():
            yield b'{"result":{"content":[{"type":"text","text":"'
            yield from flood_text()
            yield b'"}]},"jsonrpc":"2.0","id":' + rid + b"}"
        return gen()
    if name == "deep":
        depth = 100_000
        return iter([
            b'{"jsonrpc":"2.0","id":' + rid
            + b',"result":{"content":[],"structuredContent":{"v":' + b"[" * depth + b"]" * depth + b"}}}"
        ])
    return error_chunks(request, -32602, f"Unknown tool: {name}")
