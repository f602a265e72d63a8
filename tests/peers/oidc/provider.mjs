// A real OpenID provider (npm `oidc-provider`, pinned in package-lock.json) for
// switchboard-auth's sign-in tests. Listens on 127.0.0.1 only.
//
//   node provider.mjs --port P
//   env: OIDC_REDIRECT_URI     the redirect URIs every client is registered with,
//                              space-separated (required)
//        OIDC_CLIENT_SECRET    the secret of every client (default "test-secret")
//        OIDC_DEFAULT_ACCOUNT  the account logged in when the request has no
//                              `login_hint` (default: none, such a request is refused)
//        OIDC_NUMBERED_USERS   N: also the accounts user1 … userN
//                              (userK@example.com, verified), for load benchmarks
//
// Clients: `switchboard` (client_secret_basic, ID tokens RS256), `switchboard-es`
// (client_secret_post, ID tokens ES256), `other-client` (client_secret_basic, RS256).
// Accounts: alice (alice@example.com, verified), bob (bob@other.org, verified),
// carol (carol@example.com, NOT verified), dave (no email at all), alice-next
// (alice@example.com again, verified: an address the provider gave to another account).
//
// Login is non-interactive: the interaction page signs in the account named by the
// authorization request's `login_hint` (or OIDC_DEFAULT_ACCOUNT) and grants what was
// asked, so a plain HTTP client that keeps cookies and follows redirects (or a headless
// browser) ends at the redirect URI with a code.
import http from 'node:http';
import { generateKeyPairSync } from 'node:crypto';
import Provider from 'oidc-provider';

function arg(name) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const port = Number(arg('--port') ?? process.env.OIDC_PORT);
if (!Number.isInteger(port) || port <= 0) {
  console.error('provider.mjs: give the port with --port P (or OIDC_PORT)');
  process.exit(2);
}
const redirectUris = (process.env.OIDC_REDIRECT_URI ?? '').split(' ').filter(Boolean);
if (redirectUris.length === 0) {
  console.error('provider.mjs: set OIDC_REDIRECT_URI to the redirect URIs of the test clients');
  process.exit(2);
}
const defaultAccount = process.env.OIDC_DEFAULT_ACCOUNT || undefined;
const secret = process.env.OIDC_CLIENT_SECRET ?? 'test-secret';
const issuer = `http://127.0.0.1:${port}`;

const accounts = {
  alice: { email: 'alice@example.com', email_verified: true, name: 'Alice Example' },
  bob: { email: 'bob@other.org', email_verified: true, name: 'Bob Other' },
  carol: { email: 'carol@example.com', email_verified: false, name: 'Carol Unverified' },
  dave: { name: 'Dave No-Email' },
  // Another account the provider later gave alice's address to (a reassigned email:
  // the same verified `email`, another `sub`).
  'alice-next': { email: 'alice@example.com', email_verified: true, name: 'Alice Next' },
};
const numbered = Number(process.env.OIDC_NUMBERED_USERS ?? 0);
if (!Number.isInteger(numbered) || numbered < 0 || numbered > 100000) {
  console.error('provider.mjs: OIDC_NUMBERED_USERS must be a whole number from 0 to 100000');
  process.exit(2);
}
for (let k = 1; k <= numbered; k += 1) {
  accounts[`user${k}`] = { email: `user${k}@example.com`, email_verified: true, name: `User ${k}` };
}

const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });
const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' });

const client = (id, extra) => ({
  client_id: id,
  client_secret: secret,
  redirect_uris: redirectUris,
  grant_types: ['authorization_code'],
  response_types: ['code'],
  ...extra,
});

const provider = new Provider(issuer, {
  clients: [
    client('switchboard', { token_endpoint_auth_method: 'client_secret_basic' }),
    client('switchboard-es', {
      token_endpoint_auth_method: 'client_secret_post',
      id_token_signed_response_alg: 'ES256',
    }),
    client('other-client', { token_endpoint_auth_method: 'client_secret_basic' }),
  ],
  jwks: { keys: [{ ...rsa, kid: 'rsa-1', use: 'sig' }, { ...ec, kid: 'ec-1', use: 'sig' }] },
  cookies: { keys: ['switchboard-oidc-test-cookie-key'] },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name'],
  },
  // Put the scope's claims in the ID token, as Google does.
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: { devInteractions: { enabled: false } },
  async findAccount(_ctx, id) {
    const account = accounts[id];
    if (!account) return undefined;
    return { accountId: id, claims: async () => ({ sub: id, ...account }) };
  },
});

const callback = provider.callback();

async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params } = details;
  let result;
  if (prompt.name === 'login') {
    const hint = params.login_hint ?? defaultAccount;
    if (!accounts[hint]) {
      res.statusCode = 400;
      res.end(`unknown login_hint ${JSON.stringify(hint)}; use one of ${Object.keys(accounts)}`);
      return;
    }
    result = { login: { accountId: hint } };
  } else if (prompt.name === 'consent') {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
    if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
    if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
    result = { consent: { grantId: await grant.save() } };
  } else {
    res.statusCode = 400;
    res.end(`unexpected prompt ${prompt.name}`);
    return;
  }
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: true });
}

const server = http.createServer((req, res) => {
  if (req.url.startsWith('/interaction/')) {
    interaction(req, res).catch((err) => {
      console.error('interaction failed:', err);
      res.statusCode = 500;
      res.end(String(err));
    });
    return;
  }
  callback(req, res);
});

server.listen(port, '127.0.0.1', () => {
  console.log(`oidc-provider listening at ${issuer}`);
});

for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
