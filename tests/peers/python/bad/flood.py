"""Stdio peer that floods: see `_flood.py` for its tools. Each reply is one line; the
`unterminated` one is ended with a newline only after its flood."""

import sys

from _common import KNOWN_VERSIONS, is_request, read_messages
from _flood import reply_chunks

out = sys.stdout.buffer
for message in read_messages():
    if not is_request(message):
        continue
    try:
        for chunk in reply_chunks(message, KNOWN_VERSIONS):
            out.write(chunk)
        out.write(b"\n")
        out.flush()
    except BrokenPipeError:
        break
