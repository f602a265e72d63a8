"""Bad peer: answers initialize with malformed JSON, then more garbage, then idles reading stdin."""

import json
import sys

from _common import read_messages

for message in read_messages():
    if message.get("method") == "initialize":
        sys.stdout.write('{"jsonrpc": "2.0", "id": ' + json.dumps(message.get("id")) + ', "result": {"protocolVersion": \n')
        sys.stdout.write("this is not json at all\n")
        sys.stdout.write("}}{{ ]]\n")
        sys.stdout.flush()
# read_messages() keeps reading (and ignoring) stdin until it closes; then exit quietly.
