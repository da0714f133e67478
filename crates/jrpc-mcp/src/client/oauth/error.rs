//! Why the client could not get (or use) a token.

use std::future::Future;
use std::pin::Pin;

/// A boxed future, as the traits here return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why the client could not get (or use) a token.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthError {
    /// The server needs a login, and this client cannot run one here (no
    /// [`Authorizer`](super::Authorizer): a program with no one at the keyboard).
    #[error("{0} needs you to log in first")]
    LoginNeeded(String),
    /// The server asks for scopes the token held lacks (a step-up), and
    /// this client cannot run a login here.
    #[error("{server} needs scope {scope}, which the token held lacks: log in again for it")]
    ScopeNeeded {
        /// The server.
        server: String,
        /// The scopes a new login must ask for (space-separated).
        scope: String,
    },
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

/// Text from a server, shown to the user: control characters (terminal
/// escapes) replaced.
pub(crate) fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}
