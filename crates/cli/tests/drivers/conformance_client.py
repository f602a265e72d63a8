"""The client under test for the official MCP conformance suite
(`@modelcontextprotocol/conformance client --command ...`): the real `switchboard`
binary, configured the way a user would configure it for each scenario.

The suite runs `<command> <server URL>` with MCP_CONFORMANCE_SCENARIO and, for
scenarios that hand the client credentials, MCP_CONFORMANCE_CONTEXT (JSON). This
writes a settings file with one server `t` at that URL (with `oauth` settings built
from the context), then:
  auth/*: `mcp login t` (the stand-in browser in $BROWSER approves at once) unless the
          scenario is a machine grant, then `mcp call t test-tool`;
  tools_call, elicitation-sep1034-client-defaults, sse-retry: `mcp call` of the
          scenario's tool;
  anything else: `mcp list`.
Environment: SWITCHBOARD_BIN (the binary), BROWSER (passed on). Each run gets its own
HOME and SWITCHBOARD_HOME.
"""

import json
import os
import subprocess
import sys
import tempfile

url = sys.argv[-1]
scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
home = tempfile.mkdtemp(prefix="sb-conformance-")
env = dict(os.environ, HOME=os.path.join(home, "home"), SWITCHBOARD_HOME=os.path.join(home, "sb"))
os.makedirs(env["HOME"])
os.makedirs(env["SWITCHBOARD_HOME"])

entry = {"httpUrl": url}
if scenario == "auth/basic-cimd":
    # The URL the suite expects a client to be configured with: a Client ID Metadata
    # Document, which `oauth.clientId` names when it is an https:// URL.
    entry["oauth"] = {"clientId": "https://conformance-test.local/client-metadata.json"}
elif scenario == "auth/pre-registration":
    entry["oauth"] = {"clientId": context["client_id"], "clientSecret": context["client_secret"]}
elif scenario == "auth/client-credentials-basic":
    entry["oauth"] = {
        "grantType": "client_credentials",
        "clientId": context["client_id"],
        "clientSecret": context["client_secret"],
    }
elif scenario == "auth/client-credentials-jwt":
    key = os.path.join(home, "key.pem")
    with open(key, "w") as f:
        f.write(context["private_key_pem"])
    os.chmod(key, 0o600)
    entry["oauth"] = {
        "grantType": "client_credentials",
        "clientId": context["client_id"],
        "privateKeyFile": key,
        "signingAlgorithm": context["signing_algorithm"],
    }
elif scenario == "auth/cross-app-access-complete-flow":
    entry["oauth"] = {
        "grantType": "urn:ietf:params:oauth:grant-type:jwt-bearer",
        "clientId": context["client_id"],
        "clientSecret": context["client_secret"],
        "idp": {
            "issuer": context["idp_issuer"],
            "tokenEndpoint": context["idp_token_endpoint"],
            "clientId": context["idp_client_id"],
            "idToken": context["idp_id_token"],
        },
    }
config = os.path.join(home, "settings.json")
with open(config, "w") as f:
    json.dump({"mcpServers": {"t": entry}}, f)


def sb(*args):
    cmd = [os.environ["SWITCHBOARD_BIN"], "mcp", *args, "--config", config]
    return subprocess.run(cmd, env=env, timeout=60).returncode


tools = {
    "tools_call": ["add_numbers", "a=1", "b=2"],
    "elicitation-sep1034-client-defaults": ["test_client_elicitation_defaults"],
    "sse-retry": ["test_reconnection"],
}
if scenario.startswith("auth/"):
    if "grantType" not in entry.get("oauth", {}):
        sb("login", "t")
    sys.exit(sb("call", "t", "test-tool"))
elif scenario in tools:
    sys.exit(sb("call", "t", *tools[scenario]))
else:
    sys.exit(sb("list"))
