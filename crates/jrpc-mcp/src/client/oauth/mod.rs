//! The MCP client as an OAuth 2.1 client (the MCP specification's
//! "Authorization" chapter), for Streamable HTTP.
//!
//! When the server answers `401`, the client finds its authorization
//! server (the protected resource metadata the challenge names, else the
//! well-known URLs; then the server's own metadata, its `issuer`
//! checked), registers (a pre-registered client id, else a client ID
//! metadata document URL, else dynamic registration), runs the
//! authorization code flow with PKCE `S256`, `state`, the `resource`
//! parameter and the RFC 9207 `iss` check (or the client credentials
//! grant, for a program acting for itself), and sends the request again
//! with the token. A `403 insufficient_scope` asks again for the union of
//! the scopes held and those the challenge names (a bounded number of
//! times); an expired token is refreshed. Tokens live in a
//! [`TokenStore`]; the browser step is an [`Authorizer`].
//!
//! ```no_run
//! use jrpc_mcp::client::oauth::{LoopbackAuthorizer, OAuthClient};
//! use jrpc_mcp::client::McpClient;
//!
//! # async fn run() -> Result<(), jrpc_mcp::client::McpClientError> {
//! let oauth = OAuthClient::builder()
//!     .client_name("my-host")
//!     .authorizer(LoopbackAuthorizer::new())
//!     .build();
//! let client = McpClient::builder("my-host", "1.0")
//!     .oauth(oauth)
//!     .connect_http("https://mcp.example.com/mcp")
//!     .await?;
//! # Ok(()) }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

mod authorizer;
mod challenge;
mod discovery;
mod fetch;
mod grant;
mod key;
mod pkce;
mod session;
mod store;

pub use authorizer::{Authorizer, LoopbackAuthorizer};
pub use key::ClientKey;
pub(crate) use session::Session;

/// The `error` of a response's `Bearer` challenge.
pub(crate) fn challenge_error(headers: &http::HeaderMap) -> Option<String> {
    challenge::Challenge::from_headers(headers)?.error
}
pub use store::{Credentials, FileStore, MemoryStore, RegisteredClient, TokenStore, Tokens};

/// A boxed future, as the traits here return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why the client could not get (or use) a token.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthError {
    /// The server needs a login, and this client cannot run one here (no
    /// [`Authorizer`]: a program with no one at the keyboard).
    #[error("{0} needs you to log in first")]
    LoginNeeded(String),
    /// The metadata that says where to log in could not be found or read.
    #[error("discovery: {0}")]
    Discovery(String),
    /// Something the client must check did not hold (the metadata's
    /// issuer or resource, PKCE support, `state`, `iss`): it stopped
    /// rather than send a code or a token where it should not go.
    #[error("refused: {0}")]
    Refused(String),
    /// The authorization server refused (an OAuth error response).
    #[error("the {at} refused{}: {error}{}", if *status == 0 { String::new() } else { format!(" (HTTP {status})") }, description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Server {
        /// Where: `authorization endpoint`, `token endpoint`, …
        at: String,
        /// The HTTP status (`0` for a redirect).
        status: u16,
        /// The OAuth `error` code.
        error: String,
        /// Its `error_description`.
        description: Option<String>,
    },
    /// The client has no way to be known to the authorization server (no
    /// client id, no metadata document URL it takes, no registration).
    #[error("cannot register: {0}")]
    Registration(String),
    /// The server still refused after the client asked again for the
    /// scopes it named, as many times as allowed.
    #[error("still refused after {0} tries with the scopes the server asked for")]
    StepUpLimit(u32),
    /// The browser step failed.
    #[error("authorization: {0}")]
    Authorizer(String),
    /// A private key could not be read or used.
    #[error("client key: {0}")]
    Key(String),
    /// The token store failed.
    #[error("token store: {0}")]
    Store(String),
    /// An HTTP request to a metadata document or an endpoint failed.
    #[error("{0}")]
    Http(String),
}

/// How the client gets its tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grant {
    /// For a user, through the browser (an [`Authorizer`]).
    AuthorizationCode,
    /// For itself, with its own credentials (RFC 6749 §4.4).
    ClientCredentials,
}

/// How a client logs in to OAuth-protected MCP servers: who it is, how
/// it reaches the user, where it keeps tokens. Cheap to clone; give it to
/// [`McpClientBuilder::oauth`](crate::client::McpClientBuilder::oauth).
#[derive(Clone)]
pub struct OAuthClient {
    config: Arc<Config>,
}

struct Config {
    client_name: String,
    client_id: Option<String>,
    client_secret: Option<String>,
    auth_method: Option<String>,
    metadata_url: Option<String>,
    key: Option<ClientKey>,
    scope: Option<String>,
    grant: Grant,
    authorizer: Option<Arc<dyn Authorizer>>,
    store: Arc<dyn TokenStore>,
    max_step_ups: u32,
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
                auth_method: None,
                metadata_url: None,
                key: None,
                scope: None,
                grant: Grant::AuthorizationCode,
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
        let session = Session::new(self.clone(), server_url)?;
        session.login().await
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

/// The key a server's credentials are stored under: its URL, parsed and
/// written back (`HTTP://Host:80` and `http://host` are one server).
pub(crate) fn store_key(server_url: &str) -> Result<String, OAuthError> {
    url::Url::parse(server_url)
        .map(String::from)
        .map_err(|e| OAuthError::Discovery(format!("{server_url}: {e}")))
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

    /// How the user is taken through the browser step; without one, a
    /// server that needs a login fails with [`OAuthError::LoginNeeded`].
    pub fn authorizer(mut self, authorizer: impl Authorizer) -> Self {
        self.config.authorizer = Some(Arc::new(authorizer));
        self
    }

    /// Where tokens and registrations are kept ([`MemoryStore`] by
    /// default; [`FileStore`] keeps them between runs).
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
