//! What an [`OAuthClient`](super::OAuthClient) is configured with: read by
//! every session it starts.

use std::sync::Arc;

use super::authorizer::Authorizer;
use super::key::ClientKey;
use super::store::TokenStore;

/// How the client gets its tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grant {
    /// For a user, through the browser (an [`Authorizer`]).
    AuthorizationCode,
    /// For itself, with its own credentials (RFC 6749 §4.4).
    ClientCredentials,
    /// For itself, with its platform's identity token (RFC 7523).
    JwtBearer,
    /// For a user signed in to the enterprise's identity provider: its ID
    /// token traded for an identity assertion grant, that for a token.
    Enterprise,
}

/// The settings of a client.
pub(crate) struct Config {
    pub(crate) client_name: String,
    pub(crate) client_id: Option<String>,
    pub(crate) client_secret: Option<String>,
    /// The issuer the pre-registered client id belongs to, when known.
    pub(crate) client_issuer: Option<String>,
    pub(crate) auth_method: Option<String>,
    pub(crate) metadata_url: Option<String>,
    pub(crate) key: Option<ClientKey>,
    pub(crate) scope: Option<String>,
    pub(crate) grant: Grant,
    /// The identity token of the JWT-bearer grant.
    pub(crate) workload: Option<super::token_source::TokenSource>,
    /// The identity provider of enterprise-managed authorization.
    pub(crate) enterprise: Option<super::enterprise::EnterpriseIdp>,
    pub(crate) authorizer: Option<Arc<dyn Authorizer>>,
    pub(crate) store: Arc<dyn TokenStore>,
    pub(crate) max_step_ups: u32,
}
