"""Valid peer with tools `hang` (never answers) and `echo`.

A `notifications/cancelled` for a pending `hang` call appends `cancelled <requestId>` to
the file named by $SWITCHBOARD_CANCEL_LOG.
"""

from _common import error, initialize_result, is_notification, is_request, log_cancel, read_messages, reply

TOOLS = [
    {
        "name": "hang",
        "description": "Never answers.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "echo",
        "description": "Echo the message back.",
        "inputSchema": {
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        },
    },
]

hanging = set()

for message in read_messages():
    method = message.get("method")
    if is_notification(message):
        if method == "notifications/cancelled":
            request_id = (message.get("params") or {}).get("requestId")
            if request_id is not None and repr(request_id) in hanging:
                hanging.discard(repr(request_id))
                log_cancel(request_id)
        continue
    if not is_request(message):
        continue
    if method == "initialize":
        reply(message, initialize_result(message, "hang-tool", {"tools": {}}))
    elif method == "ping":
        reply(message, {})
    elif method == "tools/list":
        reply(message, {"tools": TOOLS})
    elif method == "tools/call":
        params = message.get("params") or {}
        name = params.get("name")
        if name == "hang":
            hanging.add(repr(message["id"]))
        elif name == "echo":
            text = str((params.get("arguments") or {}).get("message", ""))
            reply(message, {"content": [{"type": "text", "text": text}]})
        else:
            error(message, -32602, f"Unknown tool: {name}")
    else:
        error(message, -32601, f"Method not found: {method}")
