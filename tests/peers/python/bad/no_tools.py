"""Valid minimal peer that offers nothing: empty capabilities, empty lists."""

from _common import error, initialize_result, is_request, read_messages, reply

EMPTY = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}

for message in read_messages():
    if not is_request(message):
        continue
    method = message["method"]
    if method == "initialize":
        reply(message, initialize_result(message, "no-tools", {}))
    elif method == "ping":
        reply(message, {})
    elif method in EMPTY:
        reply(message, {EMPTY[method]: []})
    else:
        error(message, -32601, f"Method not found: {method}")
