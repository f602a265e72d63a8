// The TS SDK client (tests/peers/node, @modelcontextprotocol/sdk pinned) as an MCP client
// of the team gateway, with the SDK's own OAuth client provider flow: RFC 9728 discovery
// from the 401, RFC 8414 metadata, dynamic registration, PKCE S256, the code exchange.
// Every request to the public origin goes to the next of `bases` in turn (two instances
// behind one origin, alternating). The browser step is the test's: this script prints
// {"authorize": URL} and reads the final redirect URL (with the code) on stdin.
// Then it lists tools and calls echo `calls` times. With `revoke`: it finds the
// revocation endpoint through the SDK's own RFC 8414 discovery (its schema checks the
// metadata), revokes its access token there (RFC 7009, public client: client_id in the
// form), and lists tools again: the gateway answers 401, the SDK refreshes and retries.
// It prints one JSON document.
//
// Usage: node team_gateway_client.mjs '<json plan>'
//   plan = {sdk, public, bases: [..], redirectUrl, echo, calls, revoke}
import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const plan = JSON.parse(process.argv[2]);
const esm = (p) => import(pathToFileURL(path.join(plan.sdk, "dist/esm", p)).href);
const { Client } = await esm("client/index.js");
const { StreamableHTTPClientTransport } = await esm("client/streamableHttp.js");
const { UnauthorizedError, discoverAuthorizationServerMetadata } = await esm("client/auth.js");

const out = { hits: {}, requests: [] };
let turn = 0;
const roundRobin = async (input, init) => {
  let url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  if (url.startsWith(plan.public)) {
    const base = plan.bases[turn++ % plan.bases.length];
    out.hits[base] = (out.hits[base] ?? 0) + 1;
    out.requests.push(`${init?.method ?? "GET"} ${url.slice(plan.public.length)} -> ${base}`);
    url = base + url.slice(plan.public.length);
  }
  return fetch(url, init);
};

let clientInformation;
let tokens;
let verifier;
let authorizeUrl;
const provider = {
  get redirectUrl() {
    return plan.redirectUrl;
  },
  get clientMetadata() {
    return {
      client_name: "TS SDK team driver",
      redirect_uris: [plan.redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  clientInformation: () => clientInformation,
  saveClientInformation: (info) => {
    clientInformation = info;
  },
  tokens: () => tokens,
  saveTokens: (t) => {
    tokens = t;
  },
  redirectToAuthorization: (url) => {
    authorizeUrl = url.href;
  },
  saveCodeVerifier: (v) => {
    verifier = v;
  },
  codeVerifier: () => verifier,
};

const mcpUrl = new URL(plan.public + "/mcp");
const transport = () =>
  new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider, fetch: roundRobin });
const newClient = () => new Client({ name: "ts-team-driver", version: "1.0.0" });

// First attempt: 401 → discovery → registration → the authorization URL.
const first = transport();
try {
  await newClient().connect(first);
  throw new Error("the gateway answered without a token");
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
}
if (!authorizeUrl) throw new Error("the SDK did not ask to open an authorization URL");
console.log(JSON.stringify({ authorize: authorizeUrl }));

const rl = readline.createInterface({ input: process.stdin });
const back = await new Promise((resolve) => rl.once("line", resolve));
rl.close();
const code = new URL(back).searchParams.get("code");
if (!code) throw new Error(`no code in the redirect: ${back}`);
await first.finishAuth(code);

const client = newClient();
await client.connect(transport());
out.tools = (await client.listTools()).tools.map((t) => t.name);
out.echoes = [];
for (let i = 0; i < plan.calls; i++) {
  const r = await client.callTool({ name: plan.echo, arguments: { message: `call ${i}` } });
  out.echoes.push(r.content?.[0]?.text);
}
if (plan.revoke) {
  const meta = await discoverAuthorizationServerMetadata(new URL(plan.public), {
    fetchFn: roundRobin,
  });
  out.revocationEndpoint = meta?.revocation_endpoint;
  out.revokedAccess = tokens.access_token;
  const r = await roundRobin(meta.revocation_endpoint, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      token: tokens.access_token,
      token_type_hint: "access_token",
      client_id: clientInformation.client_id,
    }).toString(),
  });
  out.revokeStatus = r.status;
  out.toolsAfterRevoke = (await client.listTools()).tools.length;
}
out.clientId = clientInformation?.client_id;
out.accessToken = tokens?.access_token;
out.refreshToken = tokens?.refresh_token;
await client.close();
console.log(JSON.stringify(out));
