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

mod authorizer;
mod challenge;
mod client;
mod config;
mod discovery;
mod dpop;
mod enterprise;
mod error;
mod fetch;
mod grant;
mod key;
mod pkce;
mod session;
mod store;
mod token_source;

pub use authorizer::{Authorizer, LoopbackAuthorizer};
pub(crate) use challenge::challenge_error;
pub use client::{OAuthClient, OAuthClientBuilder};
pub use enterprise::EnterpriseIdp;
pub use error::{BoxFuture, OAuthError};
pub use key::ClientKey;
pub(crate) use session::{Renewed, Session};
pub use store::{Credentials, FileStore, MemoryStore, RegisteredClient, TokenStore, Tokens};
pub use token_source::TokenSource;
