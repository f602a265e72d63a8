"""Peer whose tool calls are answered with lies about their replies.

Tools (each answers `tools/call` as its name says):
    id          a text result holding the request's own `id`, as JSON (how a proxy's ids look)
    not_object  `result` is a string, not an object
    huge        a result of 128 KiB (more than a `maxMessageBytes` of 64 KiB, the least allowed)
    both        a reply with both `result` and `error`
    stray       first a reply to an id it was never sent (the same id text plus "0"),
                then a reply to the request's id as a number when it is a string
                (and as a string when it is a number), then the true reply
    twice       the true reply, twice
    silent      never answers; `notifications/cancelled` for it is logged to
                $SWITCHBOARD_CANCEL_LOG as `cancelled <requestId>`
"""

import json

from _common import error, initialize_result, is_notification, is_request, log_cancel, read_messages, reply, send

NAMES = ["id", "not_object", "huge", "both", "stray", "twice", "silent"]
TOOLS = [{"name": n, "description": f"Lies: {n}.", "inputSchema": {"type": "object", "properties": {}}} for n in NAMES]


def text(s):
    return {"content": [{"type": "text", "text": s}]}


silent = set()

for message in read_messages():
    method = message.get("method")
    if is_notification(message):
        if method == "notifications/cancelled":
            request_id = (message.get("params") or {}).get("requestId")
            if json.dumps(request_id) in silent:
                silent.discard(json.dumps(request_id))
                log_cancel(request_id)
        continue
    if not is_request(message):
        continue
    if method == "initialize":
        reply(message, initialize_result(message, "lying-replies", {"tools": {}}))
    elif method == "ping":
        reply(message, {})
    elif method == "tools/list":
        reply(message, {"tools": TOOLS})
    elif method == "tools/call":
        name = (message.get("params") or {}).get("name")
        rid = message.get("id")
        if name == "id":
            reply(message, text(json.dumps(rid)))
        elif name == "not_object":
            reply(message, "a string")
        elif name == "huge":
            reply(message, text("x" * 131072))
        elif name == "both":
            send({"jsonrpc": "2.0", "id": rid, "result": text("yes"), "error": {"code": 1, "message": "no"}})
        elif name == "stray":
            other = rid + "0" if isinstance(rid, str) else rid * 10 + 1
            send({"jsonrpc": "2.0", "id": other, "result": text("stray")})
            flipped = str(rid) if not isinstance(rid, str) else (int(rid) if rid.isdigit() else rid.upper())
            send({"jsonrpc": "2.0", "id": flipped, "result": text("flipped")})
            reply(message, text("true"))
        elif name == "twice":
            reply(message, text("once"))
            reply(message, text("twice"))
        elif name == "silent":
            silent.add(json.dumps(rid))
        else:
            error(message, -32602, f"Unknown tool: {name}")
    else:
        error(message, -32601, f"Method not found: {method}")
