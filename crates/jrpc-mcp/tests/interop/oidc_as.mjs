// A real OAuth 2.1 authorization server for the tests, on the npm package
// oidc-provider (pinned by oidc_as.sh, which installs it and runs this
// script from beside its node_modules):
//
// - issuer http://127.0.0.1:PORT (no trailing slash), an RS256 key made at
//   start, metadata at /.well-known/openid-configuration and (the same
//   JSON) at /.well-known/oauth-authorization-server (RFC 8414);
// - the authorization code grant with PKCE required, S256 only, and the
//   RFC 9207 `iss` in authorization responses;
// - open dynamic client registration (no initial access token); native
//   clients may register loopback redirect URIs (http://127.0.0.1 or
//   http://localhost), matched on any port (RFC 8252 §7.3);
// - resource indicators (RFC 8707): a request naming a resource on
//   http://127.0.0.1 or http://localhost gets a JWT access token (RS256)
//   whose `aud` is that resource and whose `scope` is what was granted;
//   the resource of the authorization request carries through to the
//   token when the token request names none;
// - the client credentials grant; refresh tokens for the code grant of
//   every client allowed the refresh_token grant (offline_access or not);
// - a client registered beforehand: jrpc-test-client / jrpc-test-secret
//   (client_secret_basic or client_secret_post);
// - a headless user: the interaction at /interaction/:uid logs in "alice"
//   and consents to every scope and resource asked, and redirects on, so
//   a client that follows redirects (keeping cookies) from the
//   authorization URL lands on its redirect URI with code, state and iss.
//
//   node oidc_as.mjs [--port N]
//
// Prints `issuer http://127.0.0.1:PORT` once listening; serves until
// SIGTERM or SIGINT.
import http from 'node:http';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import Provider, { errors } from 'oidc-provider';

// stdout carries the issuer line alone; oidc-provider's notices (it
// prints them with console.info) go to stderr with its warnings.
console.info = console.error;

const portArg = process.argv.indexOf('--port');
const port = portArg > 0 ? Number(process.argv[portArg + 1]) : 0;

const server = http.createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(port, '127.0.0.1', resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signing = { ...privateKey.export({ format: 'jwk' }), kid: 'rs256-1', alg: 'RS256', use: 'sig' };

const RESOURCE_SCOPES = ['mcp:tools', 'mcp:admin'];
const LOOPBACK_REDIRECTS = ['http://127.0.0.1/callback', 'http://localhost/callback'];

// The resources tokens may be asked for: any http URL on a loopback host.
function loopbackResource(resource) {
  try {
    const url = new URL(resource);
    return url.protocol === 'http:' && ['127.0.0.1', 'localhost'].includes(url.hostname);
  } catch {
    return false;
  }
}

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'jrpc-test-client',
      client_secret: 'jrpc-test-secret',
      application_type: 'native',
      grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
      response_types: ['code'],
      redirect_uris: LOOPBACK_REDIRECTS,
      // oidc-provider accepts client_secret_post from a client registered
      // for client_secret_basic, and the other way round.
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  // Registered clients are native unless they say otherwise: their
  // http redirect URIs may then only be loopback ones, on any port.
  clientDefaults: {
    application_type: 'native',
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
    id_token_signed_response_alg: 'RS256',
  },
  jwks: { keys: [signing] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  scopes: ['openid', 'offline_access', ...RESOURCE_SCOPES],
  // OAuth 2.1: the code flow only (no implicit), PKCE always.
  responseTypes: ['code'],
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true, initialAccessToken: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // With no resource in the token request: the one the authorization
      // request named (the only one granted).
      defaultResource: (ctx, client, oneOf) => oneOf,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => {
        if (!loopbackResource(resource)) {
          throw new errors.InvalidTarget(`this server issues tokens for loopback resources only, not ${resource}`);
        }
        return {
          scope: RESOURCE_SCOPES.join(' '),
          audience: resource,
          accessTokenFormat: 'jwt',
          accessTokenTTL: 3600,
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  // A refresh token for the code grant of every client allowed them (the
  // default asks for offline_access and a consent prompt besides).
  issueRefreshToken: (ctx, client) => client.grantTypeAllowed('refresh_token'),
  ttl: {
    AccessToken: 3600,
    AuthorizationCode: 60,
    ClientCredentials: 3600,
    IdToken: 3600,
    RefreshToken: 86400,
    Interaction: 600,
    Session: 3600,
    Grant: 86400,
  },
  findAccount: (ctx, id) => (id === 'alice' ? { accountId: 'alice', claims: () => ({ sub: 'alice' }) } : undefined),
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
});

// The headless user: logs in as alice, consents to everything asked.
async function interaction(req, res) {
  try {
    const { prompt, params, session, grantId } = await provider.interactionDetails(req, res);
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
    console.error('interaction', error);
    res.statusCode = 500;
    res.setHeader('content-type', 'text/plain');
    res.end(String(error));
  }
}

const callback = provider.callback();
server.on('request', (req, res) => {
  const path = req.url.split('?')[0];
  if (req.method === 'GET' && path.startsWith('/interaction/')) {
    return interaction(req, res);
  }
  if (path === '/.well-known/oauth-authorization-server') {
    // RFC 8414 metadata: the issuer has no path, so it is the OpenID
    // document under the other name.
    req.url = '/.well-known/openid-configuration';
  }
  return callback(req, res);
});

provider.on('server_error', (ctx, error) => console.error('server_error', error));

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
    setTimeout(() => process.exit(0), 1000).unref();
  });
}

process.stdout.write(`issuer ${issuer}\n`);
