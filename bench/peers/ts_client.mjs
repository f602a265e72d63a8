// Switchboard benchmark peer: the official TypeScript SDK client
// (@modelcontextprotocol/sdk, installed in tests/peers/node) running the same loop as
// `switchboard-bench calls`: connect (not timed), WARMUP untimed calls, then N timed
// sequential `tools/call echo` calls. Prints one JSON line:
//   {"client":"ts-sdk","transport":..,"target":..,"n":..,"calls_per_s":..,"p50_ms":..,"p99_ms":..}
//
// usage:
//   node bench/peers/ts_client.mjs --transport stdio --command CMD [--arg A]... [--n 1000] [--warmup 50] [--target NAME]
//   node bench/peers/ts_client.mjs --transport http --url http://127.0.0.1:P/mcp [--n 1000] [--warmup 50] [--target NAME]
//
// ESM ignores NODE_PATH, so the SDK is imported by path from SWITCHBOARD_PEERS_NODE
// (default: <repo>/tests/peers/node).
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const peersNode =
  process.env.SWITCHBOARD_PEERS_NODE ?? path.resolve(here, "..", "..", "tests", "peers", "node");
const sdk = path.join(peersNode, "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm");
const load = (rel) => import(pathToFileURL(path.join(sdk, rel)).href);

function parseArgs(argv) {
  const opts = { n: 1000, warmup: 50, args: [], target: "" };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[++i];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    switch (flag) {
      case "--transport": opts.transport = value; break;
      case "--url": opts.url = value; break;
      case "--command": opts.command = value; break;
      case "--arg": opts.args.push(value); break;
      case "--n": opts.n = Number.parseInt(value, 10); break;
      case "--warmup": opts.warmup = Number.parseInt(value, 10); break;
      case "--target": opts.target = value; break;
      default: throw new Error(`unknown option ${flag}`);
    }
  }
  if (opts.transport === "stdio" && !opts.command) throw new Error("--transport stdio needs --command");
  if (opts.transport === "http" && !opts.url) throw new Error("--transport http needs --url");
  if (!["stdio", "http"].includes(opts.transport)) throw new Error("--transport must be stdio or http");
  if (!(opts.n > 0)) throw new Error("--n must be at least 1");
  return opts;
}

// Nearest-rank percentile of ascending `sorted` (milliseconds), as in the Rust bench.
function percentile(sorted, p) {
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(Math.max(rank, 1), sorted.length) - 1];
}

const round3 = (x) => Math.round(x * 1000) / 1000;

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const { Client } = await load("client/index.js");
  let transport;
  if (opts.transport === "stdio") {
    const { StdioClientTransport } = await load("client/stdio.js");
    transport = new StdioClientTransport({ command: opts.command, args: opts.args, stderr: "inherit" });
  } else {
    const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
    transport = new StreamableHTTPClientTransport(new URL(opts.url));
  }
  const client = new Client({ name: "switchboard-bench-ts", version: "1.0.0" });
  await client.connect(transport);

  const echo = async (i) => {
    const result = await client.callTool({ name: "echo", arguments: { message: `hello ${i}` } });
    if (result.isError) throw new Error(`call ${i}: the echo tool reported an error`);
  };

  for (let i = 0; i < opts.warmup; i++) await echo(i);
  const latencies = new Array(opts.n);
  const start = process.hrtime.bigint();
  for (let i = 0; i < opts.n; i++) {
    const t = process.hrtime.bigint();
    await echo(i);
    latencies[i] = Number(process.hrtime.bigint() - t) / 1e6;
  }
  const totalMs = Number(process.hrtime.bigint() - start) / 1e6;

  if (opts.transport === "http" && typeof transport.terminateSession === "function") {
    await transport.terminateSession().catch(() => {});
  }
  await client.close();

  latencies.sort((a, b) => a - b);
  console.log(
    JSON.stringify({
      client: "ts-sdk",
      transport: opts.transport,
      target: opts.target,
      n: opts.n,
      calls_per_s: round3(opts.n / (totalMs / 1000)),
      p50_ms: round3(percentile(latencies, 50)),
      p99_ms: round3(percentile(latencies, 99)),
    }),
  );
}

main().catch((e) => {
  console.error(`ts_client: ${e?.stack ?? e}`);
  process.exit(1);
});
