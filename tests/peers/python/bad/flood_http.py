"""HTTP peer that floods, stdlib only: `--mode sse` (legacy HTTP+SSE: GET /sse, POST
/messages) or `--mode http` (Streamable HTTP at /mcp, tool calls answered as an SSE
stream, everything else as JSON). Binds 127.0.0.1. See `_flood.py` for its tools."""

import argparse
import json
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from _flood import reply_chunks

VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
sessions = {}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"null")

    def do_GET(self):
        if MODE != "sse" or not self.path.startswith("/sse"):
            self.send_response(405)
            self.end_headers()
            return
        q = queue.Queue()
        with lock:
            sid = str(len(sessions) + 1)
            sessions[sid] = q
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        try:
            self.wfile.write(f"event: endpoint\ndata: /messages?session={sid}\n\n".encode())
            self.wfile.flush()
            while True:
                chunks = q.get()
                self.wfile.write(b"event: message\ndata: ")
                for chunk in chunks:
                    self.wfile.write(chunk)
                self.wfile.write(b"\n\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_POST(self):
        message = self.body()
        if MODE == "sse":
            sid = self.path.split("session=")[-1]
            with lock:
                q = sessions.get(sid)
            self.send_response(202 if q else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            if q and isinstance(message, dict) and "method" in message and "id" in message:
                q.put(reply_chunks(message, VERSIONS))
            return
        if not (isinstance(message, dict) and "method" in message and "id" in message):
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if message["method"] == "server/discover":
            data = json.dumps({"jsonrpc": "2.0", "id": message["id"],
                               "error": {"code": -32601, "message": "Method not found"}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        chunks = reply_chunks(message, VERSIONS)
        try:
            if message["method"] == "tools/call":
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Mcp-Session-Id", "s1")
                self.end_headers()
                self.wfile.write(b"event: message\ndata: ")
                for chunk in chunks:
                    self.wfile.write(chunk)
                self.wfile.write(b"\n\n")
            else:
                data = b"".join(chunks)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Mcp-Session-Id", "s1")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_DELETE(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--mode", choices=["sse", "http"], required=True)
args = parser.parse_args()
MODE = args.mode
ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()
