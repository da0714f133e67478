//! Why an outgoing call failed.

use std::io;
use std::sync::Arc;
use std::time::Duration;

/// Why an outgoing call (or notification) did not produce a result.
///
/// Every call ends: with its result, or with exactly one of these.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The other side answered with an error object.
    #[error("the peer answered with an error: {0}")]
    Rpc(crate::Error),
    /// No response came within the call's timeout. The call was cancelled
    /// locally (and, where cancellation is configured, on the other side).
    #[error("no response within {0:?}")]
    Timeout(Duration),
    /// The connection closed before the response came; the text says why
    /// (end of stream, shut down, a child process's exit status, ...).
    #[error("connection closed: {0}")]
    Closed(Arc<str>),
    /// Reading or writing the connection failed.
    #[error("transport error: {0}")]
    Io(Arc<io::Error>),
    /// The result did not decode into the type asked for.
    #[error("cannot decode the result: {0}")]
    Decode(Arc<serde_json::Error>),
    /// An HTTP server refused the request (`401`, `413`, `429`, ...); its
    /// JSON-RPC error body, when it sent one, is in `error`.
    #[error("HTTP {status}{}", match error { Some(e) => format!(": {e}"), None if body.is_empty() => String::new(), None => format!(": {body}") })]
    Http {
        /// The HTTP status code.
        status: u16,
        /// The JSON-RPC error in the body, if any.
        error: Option<crate::Error>,
        /// The start of the body.
        body: Arc<str>,
    },
    /// The other side's reply was not a valid answer to the call.
    #[error("invalid reply: {0}")]
    Protocol(Arc<str>),
    /// The params could not be encoded as a JSON array or object.
    #[error("cannot encode the params: {0}")]
    Encode(Arc<str>),
}

impl CallError {
    /// The error object, when the peer answered with one.
    pub fn rpc(&self) -> Option<&crate::Error> {
        match self {
            CallError::Rpc(e) => Some(e),
            _ => None,
        }
    }

    /// Whether the call timed out.
    pub fn is_timeout(&self) -> bool {
        matches!(self, CallError::Timeout(_))
    }

    /// Whether the connection closed (or failed) under the call.
    pub fn is_closed(&self) -> bool {
        matches!(self, CallError::Closed(_) | CallError::Io(_))
    }
}
