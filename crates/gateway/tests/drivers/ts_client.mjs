// The TS SDK client (tests/peers/node, @modelcontextprotocol/sdk pinned) driving the
// gateway: list, call with progress, cancel a long call, read a resource, get a prompt,
// answer an elicitation. Prints one JSON document on stdout.
//
// Usage: node ts_client.mjs '<json plan>'
//   plan = {sdk, transport: "stdio"|"http", command, args, url, token,
//           echo, slow, hang, resource, prompt, promptArgs, elicit,
//           subscribe: {uri, trigger: {name, arguments}, triggerAgain, waitMs, quietMs, refused}}
//   subscribe: resources/subscribe to `uri`, call `trigger`, collect the
//   notifications/resources/updated URIs for up to waitMs (out.updated), unsubscribe,
//   call `trigger` again if `triggerAgain`, then collect for quietMs more
//   (out.updatedAfterUnsubscribe); `refused` is a URI
//   whose subscription must fail (out.refused = its error).
import path from "node:path";
import { pathToFileURL } from "node:url";

const plan = JSON.parse(process.argv[2]);
const esm = (p) => import(pathToFileURL(path.join(plan.sdk, "dist/esm", p)).href);
const { Client } = await esm("client/index.js");
const { StdioClientTransport } = await esm("client/stdio.js");
const { StreamableHTTPClientTransport } = await esm("client/streamableHttp.js");
const {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} = await esm("types.js");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const out = { logs: [] };
const client = new Client(
  { name: "ts-driver", version: "1.0.0" },
  {
    capabilities: {
      ...(plan.noElicitation ? {} : { elicitation: { form: {} } }),
      ...(plan.sample ? { sampling: {} } : {}),
    },
  },
);
if (plan.sample) {
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    out.sampledFrom = req.params.messages?.[0]?.content?.text;
    return { role: "assistant", content: { type: "text", text: "sampled by the driver" }, model: "driver-model" };
  });
}
if (!plan.noElicitation) {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    out.elicited = req.params.message;
    // Fill every field of the requested form with a value of its type.
    const content = {};
    for (const [k, f] of Object.entries(req.params.requestedSchema?.properties ?? {})) {
      if (f.enum) content[k] = f.enum[0];
      else if (f.oneOf) content[k] = f.oneOf[0].const;
      else if (f.type === "array") content[k] = [f.items?.enum?.[0] ?? f.items?.anyOf?.[0]?.const].filter(Boolean);
      else if (f.type === "boolean") content[k] = true;
      else if (f.type === "number" || f.type === "integer") content[k] = f.minimum ?? 1;
      else if (f.format === "email") content[k] = "ada@example.com";
      else if (f.format === "date") content[k] = "2026-01-01";
      else if (f.format === "date-time") content[k] = "2026-01-01T00:00:00Z";
      else if (f.format === "uri") content[k] = "https://example.com";
      else content[k] = "Ada";
    }
    return { action: "accept", content };
  });
}
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
  out.logs.push(n.params);
});
client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
  out.toolListChanged = (out.toolListChanged ?? 0) + 1;
});
const transport =
  plan.transport === "stdio"
    ? new StdioClientTransport({ command: plan.command, args: plan.args, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(plan.url), {
        requestInit: { headers: { Authorization: `Bearer ${plan.token}` } },
      });
await client.connect(transport);
out.serverName = client.getServerVersion()?.name;
out.instructions = client.getInstructions();
const tools = await client.listTools();
out.tools = tools.tools.map((t) => t.name);
out.toolDefs = Object.fromEntries(tools.tools.map((t) => [t.name, t]));
if (plan.echo) {
  const r = await client.callTool({ name: plan.echo, arguments: { message: "hi" } });
  out.echo = r;
}
if (plan.add) {
  out.add = await client.callTool({ name: plan.add, arguments: { a: 2, b: 3 } });
}
if (plan.slow) {
  const progress = [];
  const r = await client.callTool(
    { name: plan.slow.name, arguments: plan.slow.arguments },
    undefined,
    { onprogress: (p) => progress.push(p), timeout: 60000 },
  );
  out.slow = { progress, text: r.content?.[0]?.text };
}
if (plan.hang) {
  const ac = new AbortController();
  const t0 = Date.now();
  setTimeout(() => ac.abort("test cancels"), plan.hang.afterMs ?? 500);
  try {
    await client.callTool({ name: plan.hang.name, arguments: plan.hang.arguments ?? {} }, undefined, {
      signal: ac.signal,
      timeout: 60000,
    });
    out.hang = { cancelled: false };
  } catch (e) {
    out.hang = { cancelled: true, ms: Date.now() - t0, error: String(e) };
  }
}
if (plan.elicit) {
  out.elicit = await client.callTool({ name: plan.elicit.name, arguments: plan.elicit.arguments ?? {} });
}
if (plan.sample) {
  out.sample = await client.callTool({ name: plan.sample.name, arguments: plan.sample.arguments ?? {} });
}
if (plan.resource) {
  const r = await client.readResource({ uri: plan.resource });
  out.resource = r.contents.map((c) => ({ uri: c.uri, text: c.text }));
  out.resources = (await client.listResources()).resources.map((r) => r.uri);
  out.templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
}
if (plan.prompt) {
  const r = await client.getPrompt({ name: plan.prompt, arguments: plan.promptArgs ?? {} });
  out.prompt = r.messages.map((m) => m.content.text);
  out.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
}
if (plan.subscribe) {
  const updated = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updated.push(n.params.uri));
  out.resourceCaps = client.getServerCapabilities()?.resources;
  await client.subscribeResource({ uri: plan.subscribe.uri });
  if (plan.subscribe.trigger) {
    await client.callTool({ name: plan.subscribe.trigger.name, arguments: plan.subscribe.trigger.arguments ?? {} });
  }
  const t0 = Date.now();
  while (updated.length === 0 && Date.now() - t0 < (plan.subscribe.waitMs ?? 15000)) await sleep(50);
  out.updated = updated.splice(0);
  await client.unsubscribeResource({ uri: plan.subscribe.uri });
  updated.length = 0;
  if (plan.subscribe.trigger && plan.subscribe.triggerAgain) {
    await client.callTool({ name: plan.subscribe.trigger.name, arguments: plan.subscribe.trigger.arguments ?? {} });
  }
  await sleep(plan.subscribe.quietMs ?? 6000);
  out.updatedAfterUnsubscribe = updated.splice(0);
  if (plan.subscribe.refused) {
    try {
      await client.subscribeResource({ uri: plan.subscribe.refused });
      out.refused = null;
    } catch (e) {
      out.refused = String(e);
    }
  }
}
if (plan.waitMs) {
  await new Promise((r) => setTimeout(r, plan.waitMs));
}
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
