"""Bad peer: never answers initialize (reads stdin and drops everything)."""

import sys
import time

for _ in sys.stdin:
    pass
# stdin closed: keep hanging anyway, like a wedged server.
while True:
    time.sleep(3600)
