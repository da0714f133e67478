//! The error of an HTTP exchange the server refused.

use std::sync::Arc;
use std::time::Duration;

/// An HTTP server refused a request (`401`, `413`, `429`, `503`, ...): the
/// [`CallError::Transport`](crate::CallError::Transport) of the HTTP client.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("HTTP {status}{}", match error { Some(e) => format!(": {e}"), None if body.is_empty() => String::new(), None => format!(": {body}") })]
#[non_exhaustive]
pub struct HttpError {
    /// The HTTP status code.
    pub status: u16,
    /// The JSON-RPC error in the body, if any.
    pub error: Option<crate::Error>,
    /// The start of the body.
    pub body: Arc<str>,
    /// How long the server asked the client to wait (`Retry-After`, in
    /// seconds), on `429` and `503`.
    pub retry_after: Option<Duration>,
}
