//! What a verifier decides about a token: the trait, the grant, the
//! refusal.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A boxed future, as [`TokenVerifier::verify`] returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Decides whether a bearer token is good, and what it grants.
///
/// [`JwtVerifier`](super::JwtVerifier) checks JWTs against an issuer's keys; implement this for
/// other kinds (token introspection, opaque tokens looked up in a store).
pub trait TokenVerifier: Send + Sync + 'static {
    /// The token's grant, or why it is refused.
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<AccessToken, TokenError>>;
}

impl<V: TokenVerifier + ?Sized> TokenVerifier for Arc<V> {
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<AccessToken, TokenError>> {
        (**self).verify(token)
    }
}

/// What a verified token grants.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AccessToken {
    /// Whom it was issued for (`sub`): the caller's identity.
    pub subject: Option<String>,
    /// The client it was issued to (`client_id`, else `azp`).
    pub client_id: Option<String>,
    /// What it grants (`scope`, space-separated, or `scp`).
    pub scopes: Vec<String>,
    /// When it expires, in seconds since the Unix epoch.
    pub expires_at: Option<u64>,
    /// All its claims.
    pub claims: serde_json::Map<String, serde_json::Value>,
}

impl AccessToken {
    /// A grant for `subject` with `scopes`, for verifiers of your own.
    pub fn new(subject: impl Into<String>, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        AccessToken {
            subject: Some(subject.into()),
            client_id: None,
            scopes: scopes.into_iter().map(Into::into).collect(),
            expires_at: None,
            claims: serde_json::Map::new(),
        }
    }

    /// Who the caller is: the subject, else (a machine client's token) the
    /// client it was issued to.
    pub fn identity(&self) -> Option<crate::context::Identity> {
        self.subject
            .as_deref()
            .or(self.client_id.as_deref())
            .map(crate::context::Identity::new)
    }

    /// Whether it grants `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }
}

/// Why a token was refused.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The token is not good here: malformed, badly signed, expired, for
    /// another resource, from another issuer...
    #[error("invalid token: {0}")]
    Invalid(String),
    /// Tokens cannot be checked now (the issuer's keys cannot be fetched):
    /// refused too, so that an outage never lets a token through.
    #[error("tokens cannot be checked now: {0}")]
    Unavailable(String),
}
