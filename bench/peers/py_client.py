"""Switchboard benchmark peer: the official Python SDK client (`mcp.ClientSession`, mcp 2.x,
installed in tests/peers/.venv) running the same loop as `switchboard-bench calls`:
connect (not timed), WARMUP untimed calls, then N timed sequential `tools/call echo`
calls. Prints one JSON line:
  {"client":"python-sdk","transport":..,"target":..,"n":..,"calls_per_s":..,"p50_ms":..,"p99_ms":..}

Usage (with tests/peers/.venv/bin/python):
  py_client.py --transport stdio --command CMD [--arg A]... [--n 1000] [--warmup 50] [--target NAME]
  py_client.py --transport http --url http://127.0.0.1:P/mcp [--n 1000] [--warmup 50] [--target NAME]
"""

import argparse
import asyncio
import json
import math
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def percentile(sorted_ms: list[float], p: float) -> float:
    """Nearest-rank percentile of ascending `sorted_ms`, as in the Rust bench."""
    rank = math.ceil(p / 100 * len(sorted_ms))
    return sorted_ms[min(max(rank, 1), len(sorted_ms)) - 1]


async def run_loop(session: ClientSession, n: int, warmup: int) -> tuple[float, list[float]]:
    async def echo(i: int) -> None:
        result = await session.call_tool("echo", {"message": f"hello {i}"})
        if result.is_error:
            raise RuntimeError(f"call {i}: the echo tool reported an error")

    await session.initialize()
    for i in range(warmup):
        await echo(i)
    latencies = []
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        await echo(i)
        latencies.append((time.perf_counter() - t) * 1000)
    return time.perf_counter() - start, latencies


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=["stdio", "http"], required=True)
    parser.add_argument("--url")
    parser.add_argument("--command")
    parser.add_argument("--arg", action="append", default=[])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--target", default="")
    a = parser.parse_args()
    if a.n < 1:
        parser.error("--n must be at least 1")

    if a.transport == "stdio":
        if not a.command:
            parser.error("--transport stdio needs --command")
        params = StdioServerParameters(command=a.command, args=a.arg)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                total, latencies = await run_loop(session, a.n, a.warmup)
    else:
        if not a.url:
            parser.error("--transport http needs --url")
        async with streamable_http_client(a.url) as (read, write):
            async with ClientSession(read, write) as session:
                total, latencies = await run_loop(session, a.n, a.warmup)

    latencies.sort()
    print(
        json.dumps(
            {
                "client": "python-sdk",
                "transport": a.transport,
                "target": a.target,
                "n": a.n,
                "calls_per_s": round(a.n / total, 3),
                "p50_ms": round(percentile(latencies, 50), 3),
                "p99_ms": round(percentile(latencies, 99), 3),
            }
        )
    )


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(130)
