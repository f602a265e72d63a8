"""Shared plumbing for the misbehaving stdio peers: newline-delimited JSON-RPC, stdlib only."""

import json
import os
import sys

KNOWN_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST = "2025-11-25"


def read_messages():
    """Yield each JSON-RPC message read from stdin; lines that are not JSON are skipped."""
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            yield json.loads(line)
        except ValueError:
            continue


def send(message):
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def reply(request, result):
    send({"jsonrpc": "2.0", "id": request.get("id"), "result": result})


def error(request, code, message):
    send({"jsonrpc": "2.0", "id": request.get("id"), "error": {"code": code, "message": message}})


def negotiated_version(request):
    offered = (request.get("params") or {}).get("protocolVersion")
    return offered if offered in KNOWN_VERSIONS else LATEST


def initialize_result(request, name, capabilities):
    return {
        "protocolVersion": negotiated_version(request),
        "capabilities": capabilities,
        "serverInfo": {"name": name, "version": "0.0.1"},
    }


def log_cancel(request_id):
    path = os.environ.get("SWITCHBOARD_CANCEL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"cancelled {request_id}\n")


def is_request(message):
    return "method" in message and "id" in message


def is_notification(message):
    return "method" in message and "id" not in message
