//! [`OAuthClient`]: how a client logs in, built once and shared by its
//! connections.

use std::sync::Arc;

use super::authorizer::Authorizer;
use super::config::{Config, Grant};
use super::enterprise::EnterpriseIdp;
use super::error::OAuthError;
use super::key::ClientKey;
use super::session::Session;
use super::store::{store_key, Credentials, MemoryStore, TokenStore};
use super::token_source::TokenSource;

/// How a client logs in to OAuth-protected MCP servers: who it is, how
/// it reaches the user, where it keeps tokens. Cheap to clone; give it to
/// [`McpClientBuilder::oauth`](crate::client::McpClientBuilder::oauth).
#[derive(Clone)]
pub struct OAuthClient {
    config: Arc<Config>,
}

impl std::fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.config;
        f.debug_struct("OAuthClient")
            .field("client_name", &c.client_name)
            .field("client_id", &c.client_id)
            .field("metadata_url", &c.metadata_url)
            .field("grant", &c.grant)
            .field("interactive", &c.authorizer.is_some())
            .finish_non_exhaustive()
    }
}

impl OAuthClient {
    /// A client to configure; by default it registers dynamically, keeps
    /// tokens in memory, and cannot log a user in until given an
    /// [`Authorizer`].
    pub fn builder() -> OAuthClientBuilder {
        OAuthClientBuilder {
            config: Config {
                client_name: "jrpc".into(),
                client_id: None,
                client_secret: None,
                client_issuer: None,
                auth_method: None,
                metadata_url: None,
                key: None,
                scope: None,
                grant: Grant::AuthorizationCode,
                workload: None,
                enterprise: None,
                authorizer: None,
                store: Arc::new(MemoryStore::new()),
                max_step_ups: 2,
            },
        }
    }

    /// The store tokens are kept in.
    pub fn store(&self) -> &Arc<dyn TokenStore> {
        &self.config.store
    }

    /// Logs in to the MCP server at `server_url` now (without calling
    /// it): asks the server for its challenge, then runs the flow. What is
    /// kept in the store is returned.
    pub async fn login(&self, server_url: &str) -> Result<Credentials, OAuthError> {
        self.session(server_url)?.login().await
    }

    /// The authorization of this client with the MCP server at
    /// `server_url`, for the requests of one connection.
    pub(crate) fn session(&self, server_url: &str) -> Result<Session, OAuthError> {
        Session::new(Arc::clone(&self.config), server_url)
    }

    /// Forgets what the store holds for the MCP server at `server_url`;
    /// whether it held anything.
    pub fn logout(&self, server_url: &str) -> Result<bool, OAuthError> {
        self.config
            .store
            .remove(&store_key(server_url)?)
            .map_err(|e| OAuthError::Store(e.to_string()))
    }

    /// What the store holds for the MCP server at `server_url`.
    pub fn credentials(&self, server_url: &str) -> Result<Option<Credentials>, OAuthError> {
        Ok(self.config.store.load(&store_key(server_url)?, None))
    }
}

/// Builds an [`OAuthClient`].
pub struct OAuthClientBuilder {
    config: Config,
}

impl OAuthClientBuilder {
    /// The name shown to the user by the authorization server (sent in a
    /// dynamic registration).
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.config.client_name = name.into();
        self
    }

    /// A client id registered with the authorization server beforehand:
    /// used instead of registering.
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.config.client_id = Some(id.into());
        self
    }

    /// The authorization server (its `issuer`) the pre-registered client
    /// id belongs to: a server that sends the client elsewhere is refused
    /// rather than given the id and secret (the MCP specification's
    /// "Authorization Server Binding").
    pub fn client_issuer(mut self, issuer: impl Into<String>) -> Self {
        self.config.client_issuer = Some(issuer.into());
        self
    }

    /// The secret of a pre-registered confidential client.
    pub fn client_secret(mut self, secret: impl Into<String>) -> Self {
        self.config.client_secret = Some(secret.into());
        self
    }

    /// How a secret is sent to the token endpoint: `client_secret_basic`
    /// or `client_secret_post` (by default, what the server advertises,
    /// `client_secret_basic` first).
    pub fn token_endpoint_auth_method(mut self, method: impl Into<String>) -> Self {
        self.config.auth_method = Some(method.into());
        self
    }

    /// The HTTPS URL of this client's metadata document (a client ID
    /// metadata document): its client id with servers that take those.
    pub fn client_metadata_url(mut self, url: impl Into<String>) -> Self {
        self.config.metadata_url = Some(url.into());
        self
    }

    /// A private key to authenticate with (`private_key_jwt`) instead of a
    /// secret.
    pub fn private_key(mut self, key: ClientKey) -> Self {
        self.config.key = Some(key);
        self
    }

    /// The scopes to ask for, instead of what the server names.
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.config.scope = Some(scope.into());
        self
    }

    /// A program acting for itself: tokens by the client credentials
    /// grant (with [`client_id`](Self::client_id) and a secret or a key),
    /// no user, no browser.
    pub fn client_credentials(mut self) -> Self {
        self.config.grant = Grant::ClientCredentials;
        self
    }

    /// A workload acting for itself with the identity token its platform
    /// gave it (workload identity federation): tokens by the JWT-bearer
    /// grant (RFC 7523), the identity token as the assertion; no user, no
    /// browser, no secret. A refusal (`invalid_grant`, `invalid_scope`,
    /// `unauthorized_client`) is reported, not tried again.
    ///
    /// ```
    /// use jrpc_mcp::client::oauth::{OAuthClient, TokenSource};
    ///
    /// let oauth = OAuthClient::builder()
    ///     .client_id("my-workload")
    ///     .jwt_bearer(TokenSource::File("/var/run/secrets/tokens/mcp".into()))
    ///     .build();
    /// ```
    pub fn jwt_bearer(mut self, token: TokenSource) -> Self {
        self.config.grant = Grant::JwtBearer;
        self.config.workload = Some(token);
        self
    }

    /// Enterprise-managed authorization (SEP-990): the user signed in to
    /// the enterprise's identity provider, whose ID token is traded there
    /// for an identity assertion grant for the MCP server's authorization
    /// server (token exchange, RFC 8693), then that for an access token
    /// (the JWT-bearer grant, as [`client_id`](Self::client_id) with its
    /// secret or key). No browser: the enterprise's policy decides.
    pub fn enterprise(mut self, idp: EnterpriseIdp) -> Self {
        self.config.grant = Grant::Enterprise;
        self.config.enterprise = Some(idp);
        self
    }

    /// How the user is taken through the browser step; without one, a
    /// server that needs a login fails with [`OAuthError::LoginNeeded`].
    pub fn authorizer(mut self, authorizer: impl Authorizer) -> Self {
        self.config.authorizer = Some(Arc::new(authorizer));
        self
    }

    /// Where tokens and registrations are kept ([`MemoryStore`] by
    /// default; [`FileStore`](super::FileStore) keeps them between runs).
    pub fn store(mut self, store: impl TokenStore) -> Self {
        self.config.store = Arc::new(store);
        self
    }

    /// [`store`](Self::store), shared.
    pub fn shared_store(mut self, store: Arc<dyn TokenStore>) -> Self {
        self.config.store = store;
        self
    }

    /// How many times one request may ask for more scopes after a `403
    /// insufficient_scope` before it fails (2 by default; a refusal that names only scopes the token has fails at once).
    pub fn max_step_ups(mut self, times: u32) -> Self {
        self.config.max_step_ups = times;
        self
    }

    /// The client.
    pub fn build(self) -> OAuthClient {
        OAuthClient {
            config: Arc::new(self.config),
        }
    }
}
