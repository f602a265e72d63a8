"""Valid peer with one tool, `boom`; any tools/call makes it exit 1 without answering."""

import sys

from _common import error, initialize_result, is_request, read_messages, reply

TOOLS = [
    {
        "name": "boom",
        "description": "Exits the server mid-call.",
        "inputSchema": {"type": "object", "properties": {}},
    }
]

for message in read_messages():
    if not is_request(message):
        continue
    method = message["method"]
    if method == "initialize":
        reply(message, initialize_result(message, "die-mid-call", {"tools": {}}))
    elif method == "ping":
        reply(message, {})
    elif method == "tools/list":
        reply(message, {"tools": TOOLS})
    elif method == "tools/call":
        sys.stderr.write("die_mid_call: exiting during tools/call\n")
        sys.stderr.flush()
        sys.exit(1)
    else:
        error(message, -32601, f"Method not found: {method}")
