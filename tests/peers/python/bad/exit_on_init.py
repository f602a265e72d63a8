"""Bad peer: reads the initialize request, complains on stderr, exits with status 2."""

import sys

from _common import read_messages

for message in read_messages():
    if message.get("method") == "initialize":
        sys.stderr.write("fatal: database not reachable\n")
        sys.stderr.flush()
        sys.exit(2)
