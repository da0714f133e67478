// A real OAuth 2.1 authorization server for the tests: the npm package
// oidc-provider (pinned by authorization_server.sh), configured as an MCP
// deployment's would be — PKCE (S256) required, dynamic registration open
// (native clients, loopback redirects on any port, RFC 8252), resource
// indicators (RFC 8707) giving JWT access tokens whose audience is the
// resource, the client credentials grant, refresh tokens, and the RFC 9207
// `iss` in authorization responses. The user is headless: the interaction
// logs in "alice" and consents to whatever was asked, so a browser that
// follows redirects (with its cookies) lands on the client's redirect URI.
//
//   node authorization_server.mjs [--port N]
//
// Prints `issuer http://127.0.0.1:PORT` once listening; serves until killed.
import http from 'node:http';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import Provider from 'oidc-provider';

const portArg = process.argv.indexOf('--port');
const port = portArg > 0 ? Number(process.argv[portArg + 1]) : 0;

const server = http.createServer();
await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signing = { ...privateKey.export({ format: 'jwk' }), kid: 'rs1', alg: 'RS256', use: 'sig' };
const SCOPES = ['mcp:tools', 'mcp:admin'];

const provider = new Provider(issuer, {
  clients: [
    {
      // A client registered beforehand (the --oauth-client-id case, and
      // the client credentials grant).
      client_id: 'jrpc-test-client',
      client_secret: 'jrpc-test-secret',
      application_type: 'native',
      grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
      response_types: ['code'],
      redirect_uris: ['http://127.0.0.1/callback', 'http://localhost/callback'],
      token_endpoint_auth_method: 'client_secret_basic',
      scope: SCOPES.join(' '),
    },
  ],
  jwks: { keys: [signing] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  scopes: ['openid', 'offline_access', ...SCOPES],
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // The resource a request names, as the audience of its token.
      defaultResource: (ctx, client, oneOf) => oneOf,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => ({
        scope: SCOPES.join(' '),
        audience: resource,
        accessTokenFormat: 'jwt',
        accessTokenTTL: 3600,
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
  // A refresh token for every code grant of a client allowed them.
  issueRefreshToken: (ctx, client) => client.grantTypeAllowed('refresh_token'),
  findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  // Registered clients may ask for any of the scopes.
  extraClientMetadata: { properties: [] },
});
provider.proxy = false;

// The headless user: logs in as alice, consents to everything asked.
async function interaction(req, res) {
  try {
    const details = await provider.interactionDetails(req, res);
    const { prompt, params, session, grantId } = details;
    let result;
    if (prompt.name === 'login') {
      result = { login: { accountId: 'alice' } };
    } else {
      const grant = grantId
        ? await provider.Grant.find(grantId)
        : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
      const missing = prompt.details;
      if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
      if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
      for (const [resource, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
        grant.addResourceScope(resource, scopes.join(' '));
      }
      result = { consent: { grantId: await grant.save() } };
    }
    await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: true });
  } catch (error) {
    res.statusCode = 500;
    res.end(String(error));
  }
}

const callback = provider.callback();
server.on('request', (req, res) => {
  if (req.method === 'GET' && req.url.startsWith('/interaction/')) {
    return interaction(req, res);
  }
  return callback(req, res);
});

provider.on('server_error', (ctx, error) => console.error('server_error', error));
console.log(`issuer ${issuer}`);
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
