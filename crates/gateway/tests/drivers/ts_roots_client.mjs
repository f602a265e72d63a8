// The TS SDK client (tests/peers/node, @modelcontextprotocol/sdk pinned) with roots and
// `_meta`, through the gateway: each client declares the roots capability (unless
// spec.noRoots) and answers roots/list with its own list; the driver changes the list
// and sends notifications/roots/list_changed; calls carry their own `_meta`.
// Prints one JSON document on stdout.
//
// Usage: node ts_roots_client.mjs '<json plan>'
//   plan = {sdk, transport: "stdio"|"http", command, args, url, token,
//           clients: [{roots: [uri...], changedRoots: [uri...], noRoots}] (default one
//           client; noRoots: without the roots capability), rootsTool ("py__roots"), everythingRootsTool ("everything__get-roots-list"),
//           metaTool, metaResource, metaPrompt, meta ({...} sent as `_meta`),
//           leave: {client, observer, tool, before, after}: the observer calls `tool`
//           until it shows `before`, then client `client` ends its HTTP session
//           (DELETE) and closes, and the observer calls `tool` until it shows `after`}
import path from "node:path";
import { pathToFileURL } from "node:url";

const plan = JSON.parse(process.argv[2]);
const esm = (p) => import(pathToFileURL(path.join(plan.sdk, "dist/esm", p)).href);
const { Client } = await esm("client/index.js");
const { StdioClientTransport } = await esm("client/stdio.js");
const { StreamableHTTPClientTransport } = await esm("client/streamableHttp.js");
const { ListRootsRequestSchema } = await esm("types.js");

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (r) => r.content?.[0]?.text ?? "";

async function connect(spec, i) {
  const state = { roots: spec.roots ?? [], asked: 0 };
  const client = new Client(
    { name: `ts-roots-driver-${i}`, version: "1.0.0" },
    { capabilities: spec.noRoots ? {} : { roots: { listChanged: true } } },
  );
  if (!spec.noRoots) {
    client.setRequestHandler(ListRootsRequestSchema, async () => {
      state.asked += 1;
      return { roots: state.roots.map((uri, n) => ({ uri, name: `root ${n}` })) };
    });
  }
  const transport =
    plan.transport === "stdio"
      ? new StdioClientTransport({ command: plan.command, args: plan.args, stderr: "inherit" })
      : new StreamableHTTPClientTransport(new URL(plan.url), {
          requestInit: { headers: { Authorization: `Bearer ${plan.token}` } },
        });
  await client.connect(transport);
  return { client, state, spec, transport };
}

// Calls `name` until its text contains `needle` (the server may learn the roots a
// moment after the gateway tells it they changed); the last text either way.
async function callUntil(client, name, needle, ms = 15000) {
  const until = Date.now() + ms;
  let last = "";
  while (Date.now() < until) {
    last = text(await client.callTool({ name, arguments: {} }));
    if (last.includes(needle)) return last;
    await sleep(200);
  }
  return last;
}

const out = { clients: [] };
const specs = plan.clients ?? [{ roots: ["file:///tmp/switchboard-roots-a"] }];
const clients = [];
for (const [i, spec] of specs.entries()) clients.push(await connect(spec, i));
out.tools = (await clients[0].client.listTools()).tools.map((t) => t.name);

for (const { client, state, spec } of clients) {
  const one = {};
  if (plan.rootsTool) one.roots = JSON.parse(text(await client.callTool({ name: plan.rootsTool, arguments: {} })));
  if (plan.everythingRootsTool && spec.roots?.length) {
    one.everything = await callUntil(client, plan.everythingRootsTool, spec.roots[0]);
  }
  if (spec.changedRoots) {
    state.roots = spec.changedRoots;
    await client.sendRootsListChanged();
    if (plan.rootsTool) {
      one.changedRoots = JSON.parse(text(await client.callTool({ name: plan.rootsTool, arguments: {} })));
    }
    if (plan.everythingRootsTool) {
      one.everythingChanged = await callUntil(client, plan.everythingRootsTool, spec.changedRoots[0]);
    }
  }
  one.asked = state.asked;
  out.clients.push(one);
}

if (plan.leave) {
  const { client: gone, observer, tool, before, after } = plan.leave;
  const watcher = clients[observer].client;
  out.beforeLeave = await callUntil(watcher, tool, before);
  await clients[gone].transport.terminateSession();
  await clients[gone].client.close();
  clients.splice(gone, 1);
  out.afterLeave = await callUntil(watcher, tool, after);
}

const c = clients[0].client;
if (plan.metaTool) {
  out.metaTool = JSON.parse(
    text(await c.callTool({ name: plan.metaTool, arguments: {}, _meta: plan.meta }, undefined, { onprogress: () => {} })),
  );
}
if (plan.metaResource) {
  const r = await c.readResource({ uri: plan.metaResource, _meta: plan.meta });
  out.metaResource = JSON.parse(r.contents[0].text);
}
if (plan.metaPrompt) {
  const r = await c.getPrompt({ name: plan.metaPrompt, arguments: {}, _meta: plan.meta });
  out.metaPrompt = JSON.parse(r.messages[0].content.text);
}
for (const { client } of clients) await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
