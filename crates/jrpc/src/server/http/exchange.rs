//! What a request and a reply are on this server: the request body type
//! every service and layer sees, the client address a request carries, and
//! the replies built the same way everywhere (a JSON-RPC error body of id
//! `null` with the right status).

use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::Full;

use crate::message::{Error, Id, Response as RpcResponse};
use crate::middleware::RateLimit;

/// The request body the RPC service and its layers see.
pub type HttpBody =
    http_body_util::combinators::UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// The peer address of the connection a request came on, put in the
/// request's extensions by the server for its layers (a request served
/// without layers gets its connection's facts directly).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAddr(pub Option<String>);

/// A response with a body and content type.
pub(crate) fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// An HTTP error whose body is a JSON-RPC error response with a null id, so
/// that JSON-RPC clients can read it like any other error.
pub fn error_response(status: StatusCode, error: Error) -> Response<Full<Bytes>> {
    let body = RpcResponse {
        id: Id::NULL,
        outcome: Err(error),
    }
    .to_bytes();
    respond(status, "application/json", body)
}

/// `429 Too Many Requests` with `Retry-After` (whole seconds, rounded up)
/// and a `-32005 Rate limited` error body.
pub(crate) fn too_many_requests(wait: Duration) -> Response<Full<Bytes>> {
    let mut response = error_response(StatusCode::TOO_MANY_REQUESTS, RateLimit::error(wait));
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
    response
}
