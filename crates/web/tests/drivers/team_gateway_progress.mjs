// The TS SDK client (tests/peers/node, @modelcontextprotocol/sdk pinned) calls a slow
// tool through the team gateway with a bearer token and an `onprogress` callback (the
// SDK then sends a progressToken), recording each progress notification and when the
// result came relative to them. Prints one JSON document.
//
// Usage: node team_gateway_progress.mjs '<json plan>'
//   plan = {sdk, url, token, name, arguments}
import path from "node:path";
import { pathToFileURL } from "node:url";

const plan = JSON.parse(process.argv[2]);
const esm = (p) => import(pathToFileURL(path.join(plan.sdk, "dist/esm", p)).href);
const { Client } = await esm("client/index.js");
const { StreamableHTTPClientTransport } = await esm("client/streamableHttp.js");

const transport = new StreamableHTTPClientTransport(new URL(plan.url), {
  requestInit: { headers: { Authorization: `Bearer ${plan.token}` } },
});
const client = new Client({ name: "ts-team-progress", version: "1.0.0" });
await client.connect(transport);
const events = [];
const result = await client.callTool(
  { name: plan.name, arguments: plan.arguments },
  undefined,
  {
    timeout: 60000,
    onprogress: (p) => events.push({ progress: p.progress, total: p.total, message: p.message }),
  },
);
events.push({ result: result.content?.[0]?.text ?? null });
await client.close();
console.log(JSON.stringify({ events }));
