// Switchboard gateway benchmark driver: the official TypeScript SDK client
// (@modelcontextprotocol/sdk, pinned in tests/peers/node) calling `echo` through whatever
// it is pointed at — the demo server itself, `switchboard gateway` (stdio or --http), or a
// proxy (supergateway, mcp-proxy). Connect is not timed; then WARMUP untimed calls,
// N timed sequential calls, and CONC_N timed calls with CONCURRENCY in flight. Prints one
// JSON line:
//   {"label":..,"tool":..,"tools":..,
//    "seq":{"n":..,"calls_per_s":..,"p50_ms":..,"p99_ms":..},
//    "conc":{"n":..,"concurrency":..,"calls_per_s":..,"p50_ms":..,"p99_ms":..},
//    "rss":{"pid":..,"vm_hwm_kb":..,"vm_rss_kb":..}}          (rss only with --rss)
//
// usage:
//   node bench/peers/ts_gateway_client.mjs --transport stdio --command CMD [--arg A]... [--env NAME=VALUE]...
//   node bench/peers/ts_gateway_client.mjs --transport http --url URL [--token T]
//     [--tool echo] [--n 2000] [--warmup 200] [--concurrency 32] [--conc-n 4000]
//     [--label NAME] [--connect-wait-ms 20000]
//     [--rss] [--rss-pid PID] [--call-all-suffix __echo] [--expect-tools N]
//
// --rss reads /proc/PID/status (VmHWM, VmRSS) after the calls: PID is the stdio child
// (the process this client spawned) unless --rss-pid names another (an HTTP server).
// Each phase also reports cpu_us_per_call: that process's on-CPU time (all threads,
// /proc/PID/task/*/schedstat) divided by the calls, which a busy machine inflates far
// less than latency.
// --call-all-suffix calls every listed tool ending in the suffix once before the timed
// calls (so every upstream of a gateway has served a call); --expect-tools waits (up to
// --connect-wait-ms) until tools/list has at least N tools (N ending in the suffix, if
// given), as a gateway's upstreams connect.
//
// --env adds a variable to the stdio child's environment (the SDK passes only HOME, PATH
// and a few more by default, so a gateway needs --env SWITCHBOARD_HOME=...).
//
// ESM ignores NODE_PATH, so the SDK is imported by path from SWITCHBOARD_PEERS_NODE
// (default: <repo>/tests/peers/node).
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const peersNode =
  process.env.SWITCHBOARD_PEERS_NODE ?? path.resolve(here, "..", "..", "tests", "peers", "node");
const sdk = path.join(peersNode, "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm");
const load = (rel) => import(pathToFileURL(path.join(sdk, rel)).href);

function parseArgs(argv) {
  const opts = {
    n: 2000,
    warmup: 200,
    concurrency: 32,
    concN: 4000,
    args: [],
    env: {},
    tool: "echo",
    label: "",
    connectWaitMs: 20000,
    rss: false,
    expectTools: 0,
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (flag === "--rss") {
      opts.rss = true;
      continue;
    }
    const value = argv[++i];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    const int = () => {
      const v = Number.parseInt(value, 10);
      if (!Number.isFinite(v) || v < 0) throw new Error(`${flag}: not a count: ${value}`);
      return v;
    };
    switch (flag) {
      case "--transport": opts.transport = value; break;
      case "--url": opts.url = value; break;
      case "--token": opts.token = value; break;
      case "--command": opts.command = value; break;
      case "--arg": opts.args.push(value); break;
      case "--env": {
        const eq = value.indexOf("=");
        if (eq < 1) throw new Error(`--env needs NAME=VALUE, got ${value}`);
        opts.env[value.slice(0, eq)] = value.slice(eq + 1);
        break;
      }
      case "--tool": opts.tool = value; break;
      case "--label": opts.label = value; break;
      case "--n": opts.n = int(); break;
      case "--warmup": opts.warmup = int(); break;
      case "--concurrency": opts.concurrency = int(); break;
      case "--conc-n": opts.concN = int(); break;
      case "--connect-wait-ms": opts.connectWaitMs = int(); break;
      case "--rss-pid": opts.rssPid = int(); opts.rss = true; break;
      case "--call-all-suffix": opts.callAllSuffix = value; break;
      case "--expect-tools": opts.expectTools = int(); break;
      default: throw new Error(`unknown option ${flag}`);
    }
  }
  if (!["stdio", "http"].includes(opts.transport)) throw new Error("--transport must be stdio or http");
  if (opts.transport === "stdio" && !opts.command) throw new Error("--transport stdio needs --command");
  if (opts.transport === "http" && !opts.url) throw new Error("--transport http needs --url");
  if (opts.concurrency < 1) throw new Error("--concurrency must be at least 1");
  return opts;
}

// Nearest-rank percentile of ascending `sorted` (milliseconds), as in the Rust bench.
function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(Math.max(rank, 1), sorted.length) - 1];
}

const round3 = (x) => Math.round(x * 1000) / 1000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => process.hrtime.bigint();
const msSince = (t) => Number(process.hrtime.bigint() - t) / 1e6;

function summary(latencies, totalMs, extra = {}) {
  latencies.sort((a, b) => a - b);
  return {
    n: latencies.length,
    ...extra,
    calls_per_s: round3(latencies.length / (totalMs / 1000)),
    p50_ms: round3(percentile(latencies, 50)),
    p99_ms: round3(percentile(latencies, 99)),
  };
}

function statusKb(pid) {
  const text = readFileSync(`/proc/${pid}/status`, "utf8");
  const field = (name) => {
    const m = text.match(new RegExp(`^${name}:\\s+(\\d+)`, "m"));
    return m ? Number(m[1]) : null;
  };
  return {
    pid,
    vm_hwm_kb: field("VmHWM"),
    vm_rss_kb: field("VmRSS"),
    rss_anon_kb: field("RssAnon"),
    rss_file_kb: field("RssFile"),
    threads: field("Threads"),
  };
}

// On-CPU time of every thread of `pid` so far, in ns (/proc/PID/task/*/schedstat), or
// null without a pid. Threads that exited in between are missed (the servers measured
// here keep theirs).
function cpuNs(pid) {
  if (!pid) return null;
  let total = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      total += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
    } catch {
      // the thread exited
    }
  }
  return total;
}

async function connect(opts, Client, makeTransport) {
  // An HTTP server may still be starting: retry until --connect-wait-ms.
  const deadline = Date.now() + opts.connectWaitMs;
  for (;;) {
    const transport = await makeTransport();
    const client = new Client({ name: "switchboard-bench-gateway", version: "1.0.0" });
    try {
      await client.connect(transport);
      return { client, transport };
    } catch (e) {
      await client.close().catch(() => {});
      if (opts.transport !== "http" || Date.now() > deadline) throw e;
      await sleep(100);
    }
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const { Client } = await load("client/index.js");
  let makeTransport;
  if (opts.transport === "stdio") {
    const { StdioClientTransport, getDefaultEnvironment } = await load("client/stdio.js");
    // The SDK gives a stdio server only a few variables (HOME, PATH, ...) unless told more.
    const env = { ...getDefaultEnvironment(), ...opts.env };
    makeTransport = () =>
      new StdioClientTransport({ command: opts.command, args: opts.args, env, stderr: "inherit" });
  } else {
    const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
    const requestInit = opts.token ? { headers: { Authorization: `Bearer ${opts.token}` } } : undefined;
    makeTransport = () => new StreamableHTTPClientTransport(new URL(opts.url), { requestInit });
  }
  const { client, transport } = await connect(opts, Client, makeTransport);

  // Wait for the expected tools (a gateway lists upstreams as they connect).
  // With --call-all-suffix, only the tools ending in it count.
  const counted = (ts) =>
    opts.callAllSuffix ? ts.filter((t) => t.name.endsWith(opts.callAllSuffix)).length : ts.length;
  let tools = (await client.listTools()).tools;
  const deadline = Date.now() + opts.connectWaitMs;
  while (counted(tools) < opts.expectTools && Date.now() < deadline) {
    await sleep(100);
    tools = (await client.listTools()).tools;
  }
  if (counted(tools) < opts.expectTools) {
    throw new Error(`only ${counted(tools)} of ${opts.expectTools} expected tools were listed`);
  }
  if (!tools.some((t) => t.name === opts.tool)) {
    throw new Error(`no tool named ${opts.tool} (listed: ${tools.slice(0, 10).map((t) => t.name).join(", ")})`);
  }

  const echo = async (i, name = opts.tool) => {
    const result = await client.callTool({ name, arguments: { message: `hello ${i}` } });
    if (result.isError) throw new Error(`call ${i} to ${name}: the echo tool reported an error`);
  };

  let calledAll = 0;
  if (opts.callAllSuffix) {
    for (const t of tools.filter((t) => t.name.endsWith(opts.callAllSuffix))) {
      await echo(0, t.name);
      calledAll++;
    }
  }

  for (let i = 0; i < opts.warmup; i++) await echo(i);

  const out = { label: opts.label, transport: opts.transport, tool: opts.tool, tools: tools.length };
  if (opts.callAllSuffix) out.called_all = calledAll;

  // The process whose memory and CPU time are read: the stdio child, or --rss-pid.
  const pid = opts.rssPid ?? transport.pid;
  const cpuPerCall = (before, n) =>
    before === null ? {} : { cpu_us_per_call: round3((cpuNs(pid) - before) / 1000 / n) };

  if (opts.n > 0) {
    const latencies = new Array(opts.n);
    const cpu0 = cpuNs(pid);
    const start = now();
    for (let i = 0; i < opts.n; i++) {
      const t = now();
      await echo(i);
      latencies[i] = msSince(t);
    }
    out.seq = { ...summary(latencies, msSince(start)), ...cpuPerCall(cpu0, opts.n) };
  }

  if (opts.concN > 0) {
    // CONCURRENCY workers pull call numbers from one counter: always that many in flight.
    const latencies = [];
    let next = 0;
    const worker = async () => {
      while (next < opts.concN) {
        const i = next++;
        const t = now();
        await echo(i);
        latencies.push(msSince(t));
      }
    };
    const cpu0 = cpuNs(pid);
    const start = now();
    await Promise.all(Array.from({ length: opts.concurrency }, worker));
    out.conc = {
      ...summary(latencies, msSince(start), { concurrency: opts.concurrency }),
      ...cpuPerCall(cpu0, opts.concN),
    };
  }

  if (opts.rss) {
    if (!pid) throw new Error("--rss: no process id (stdio child or --rss-pid)");
    out.rss = statusKb(pid);
  }

  if (opts.transport === "http" && typeof transport.terminateSession === "function") {
    await transport.terminateSession().catch(() => {});
  }
  await client.close();
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(`ts_gateway_client: ${e?.stack ?? e}`);
  process.exit(1);
});
