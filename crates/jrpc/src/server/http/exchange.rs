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

/// Whether a request's body may still have something to read. By the
/// body, not the head: a decompression layer takes `Content-Length` and
/// `Content-Encoding` off a request whose body it decodes.
pub(crate) fn carries_body<B: http_body::Body>(body: &B) -> bool {
    !body.is_end_stream()
}

/// Whether a header of a comma-separated list of tokens (`Connection`,
/// `Upgrade`) names `token`, in any case.
pub(crate) fn has_token(headers: &http::HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|value| {
        value.to_str().is_ok_and(|value| {
            value
                .split(',')
                .any(|part| part.trim().eq_ignore_ascii_case(token))
        })
    })
}

/// `response`, saying that the connection closes after it (RFC 9112
/// §9.6). For a refusal written before its request's body was read: the
/// connection cannot go on (the server cannot find where the next
/// request starts without reading the body), and requests pipelined after
/// it must be told, not left unanswered.
pub(crate) fn closing<T>(mut response: Response<T>) -> Response<T> {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A refusal of a request whose body is not read: closing the connection
/// when the request has one.
pub(crate) fn refused_unread<B: http_body::Body, T>(body: &B, response: Response<T>) -> Response<T> {
    if carries_body(body) {
        closing(response)
    } else {
        response
    }
}

/// A response with a body and content type.
pub(crate) fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    *response.headers_mut() = response_headers(content_type);
    response
}

/// A response's headers: its content type, in a map with room for a
/// request's usual headers. hyper reuses a response's map for the next
/// request on its connection; one made for a single header would be
/// reallocated for a request of more than six (an MCP client sends eight
/// or more), on every request.
pub(crate) fn response_headers(content_type: &'static str) -> http::HeaderMap {
    let mut headers = http::HeaderMap::with_capacity(12);
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers
}

/// An HTTP error whose body is a JSON-RPC error response with a null id, so
/// that JSON-RPC clients can read it like any other error. The body is
/// whole ([`Full`]) or a route's ([`RouteBody`](super::route::RouteBody)),
/// as the caller needs.
///
/// ```
/// use http::StatusCode;
/// use jrpc::server::http::{error_response, route::RouteBody};
///
/// let refused: http::Response<RouteBody> =
///     error_response(StatusCode::FORBIDDEN, jrpc::Error::invalid_request().with_data("no"));
/// assert_eq!(refused.status(), StatusCode::FORBIDDEN);
/// assert_eq!(refused.headers()["content-type"], "application/json");
/// ```
pub fn error_response<B: ErrorBody>(status: StatusCode, error: Error) -> Response<B> {
    let body = RpcResponse {
        id: Id::NULL,
        outcome: Err(error),
    }
    .to_bytes();
    respond(status, "application/json", body).map(B::from_full)
}

/// A body [`error_response`] can make: [`Full<Bytes>`] and
/// [`RouteBody`](super::route::RouteBody) (sealed).
pub trait ErrorBody: sealed::Sealed {
    #[doc(hidden)]
    fn from_full(body: Full<Bytes>) -> Self;
}

impl ErrorBody for Full<Bytes> {
    fn from_full(body: Full<Bytes>) -> Self {
        body
    }
}

impl ErrorBody for HttpBody {
    fn from_full(body: Full<Bytes>) -> Self {
        use http_body_util::BodyExt;
        body.map_err(|never| match never {}).boxed_unsync()
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for http_body_util::Full<bytes::Bytes> {}
    impl Sealed for super::HttpBody {}
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
