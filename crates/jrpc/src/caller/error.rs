//! Why an outgoing call failed.

use std::io;
use std::sync::Arc;
use std::time::Duration;

/// Why an outgoing call (or notification) did not produce a result.
///
/// Every call ends: with its result, or with exactly one of these.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
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
    /// The transport failed the call in a way of its own: an HTTP server's
    /// refusal (`401`, `413`, `429`, ...) is a
    /// [`client::HttpError`](crate::client::HttpError). Read it with
    /// [`transport_error`](Self::transport_error).
    #[error("{0}")]
    Transport(Arc<dyn std::error::Error + Send + Sync>),
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

    /// The transport's own error, when it is an `E`.
    ///
    /// ```
    /// # fn demo(err: jrpc::CallError) {
    /// if let Some(http) = err.transport_error::<jrpc::client::HttpError>() {
    ///     eprintln!("the server answered HTTP {}", http.status);
    /// }
    /// # }
    /// ```
    pub fn transport_error<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            CallError::Transport(error) => error.downcast_ref(),
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

/// What a response tells its caller: the result, or the error — marked as
/// the answer to a request the peer could not read when its id is null
/// ([`Error::for_unreadable_request`](crate::Error::for_unreadable_request)),
/// so that a proxy passing it on keeps the id null.
pub(crate) fn answered(
    response: crate::message::ResponseRef<'_>,
) -> Result<Box<serde_json::value::RawValue>, CallError> {
    let unreadable = response.id.is_null();
    response
        .outcome
        .map(serde_json::value::RawValue::to_owned)
        .map_err(|error| {
            CallError::Rpc(if unreadable {
                error.for_unreadable_request()
            } else {
                error
            })
        })
}
