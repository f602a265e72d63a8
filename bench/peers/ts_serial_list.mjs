// Switchboard benchmark peer: a *serial* `mcp list` with the official TypeScript SDK
// client, as a stand-in for Gemini CLI's `gemini mcp list` (which connects to its servers
// one after another with this SDK). For each of N stdio servers in turn: spawn, connect
// (initialize), tools/list, close. Prints one JSON line {"servers":N,"connected":K,"wall_ms":..}.
// Gemini CLI itself also pays for its own (large) start-up, so this baseline is
// *faster* than the real thing; comparing against it is conservative.
//
// usage:
//   node bench/peers/ts_serial_list.mjs --servers 20 --command CMD [--arg A]...
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
  const opts = { servers: 20, args: [] };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[++i];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    switch (flag) {
      case "--servers": opts.servers = Number.parseInt(value, 10); break;
      case "--command": opts.command = value; break;
      case "--arg": opts.args.push(value); break;
      default: throw new Error(`unknown option ${flag}`);
    }
  }
  if (!opts.command) throw new Error("--command is required");
  if (!(opts.servers > 0)) throw new Error("--servers must be at least 1");
  return opts;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const { Client } = await load("client/index.js");
  const { StdioClientTransport } = await load("client/stdio.js");
  const start = process.hrtime.bigint();
  let connected = 0;
  for (let i = 0; i < opts.servers; i++) {
    const transport = new StdioClientTransport({ command: opts.command, args: opts.args, stderr: "ignore" });
    const client = new Client({ name: "switchboard-bench-serial", version: "1.0.0" });
    try {
      await client.connect(transport);
      await client.listTools();
      connected++;
    } catch (e) {
      console.error(`server ${i}: ${e?.message ?? e}`);
    } finally {
      await client.close().catch(() => {});
    }
  }
  const wallMs = Number(process.hrtime.bigint() - start) / 1e6;
  console.log(JSON.stringify({ servers: opts.servers, connected, wall_ms: Math.round(wallMs) }));
  if (connected !== opts.servers) process.exit(1);
}

main().catch((e) => {
  console.error(`ts_serial_list: ${e?.stack ?? e}`);
  process.exit(1);
});
