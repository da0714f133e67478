//! Routes of your own beside the RPC endpoint: a handler for one path that
//! answers with any status, any headers and a body that may stream (Server-
//! Sent Events, see [`sse`](super::sse)). MCP's Streamable HTTP endpoint is
//! built on this; the RPC endpoint's layers (auth, rate limits, timeouts)
//! do not apply to a route, which does its own checks. A whole reply (of
//! known length) over 1 KiB is compressed for a client that accepts gzip
//! or brotli, as the RPC endpoint's are, unless compression is off or the
//! reply is an event stream, already encoded, or carries an `ETag` (which
//! names one representation); a streaming body is sent as it comes. A reply
//! to `HEAD` goes out without its body, over HTTP/2 as over HTTP/1.1, with
//! the headers a non-empty body gave (its length, or its encoding): a route
//! may answer `HEAD` with the body it would send to `GET`, and `HEAD` then
//! gets the headers `GET` gets.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::BodyExt;
use tokio_util::sync::CancellationToken;

use super::exchange::HttpBody;
use super::service::{self, BodyError};
use crate::codec::BufferBudget;
use crate::context::{ConnectionInfo, Extensions};
use crate::message::Error;

/// A route's response body: whole, or streaming.
pub type RouteBody =
    http_body_util::combinators::UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// What a route handler returns.
pub type RouteFuture = Pin<Box<dyn Future<Output = Response<RouteBody>> + Send>>;

pub(crate) type RouteHandler = Arc<dyn Fn(Request<HttpBody>, RouteContext) -> RouteFuture + Send + Sync>;

/// A whole body of `bytes`.
pub fn full_body(bytes: impl Into<Bytes>) -> RouteBody {
    http_body_util::Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// An empty body.
pub fn empty_body() -> RouteBody {
    full_body(Bytes::new())
}

/// A `200` response of `body` as `application/json`.
///
/// ```
/// let response = jrpc::server::http::route::json_response(r#"{"ok":true}"#);
/// assert_eq!(response.headers()["content-type"], "application/json");
/// ```
pub fn json_response(body: impl Into<Bytes>) -> Response<RouteBody> {
    let mut response = Response::new(full_body(body));
    *response.headers_mut() = super::exchange::response_headers("application/json");
    response
}

/// What a route handler can use of the server: the client's address, the
/// server's body limits and shutdown.
#[derive(Clone, Debug)]
pub struct RouteContext {
    /// The connection's facts ([`ConnectionInfo`]), made once for all its
    /// requests.
    pub(crate) connection: Arc<Extensions>,
    pub(crate) max_body_len: usize,
    pub(crate) budget: BufferBudget,
    pub(crate) shutdown: CancellationToken,
}

/// Why a request body could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadBodyError {
    /// Longer than the server's frame limit.
    #[error("the body may be at most {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// The server's budget for bodies in progress is spent.
    #[error("too many request bodies in progress: try again later")]
    OverBudget,
    /// The body did not arrive within 30 s.
    #[error("the request body did not arrive in time")]
    Timeout,
    /// Reading failed.
    #[error("cannot read the body: {0}")]
    Read(String),
}

impl ReadBodyError {
    /// The refusal to send: `413`, `503` with `Retry-After`, `408` or
    /// `400`, each with a JSON-RPC error body, and `Connection: close`: the
    /// body was not read to its end, so the connection cannot go on.
    pub fn into_response(self) -> Response<RouteBody> {
        let (status, error) = match &self {
            ReadBodyError::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, Error::frame_too_large()),
            ReadBodyError::OverBudget => (StatusCode::SERVICE_UNAVAILABLE, Error::server_busy()),
            ReadBodyError::Timeout => (StatusCode::REQUEST_TIMEOUT, Error::invalid_request()),
            ReadBodyError::Read(_) => (StatusCode::BAD_REQUEST, Error::parse_error()),
        };
        let mut response = super::exchange::error_response(status, error.with_data(&self.to_string()));
        if self == ReadBodyError::OverBudget {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        super::exchange::closing(response)
    }
}

/// A refusal written before the request's body was read: it says
/// `Connection: close` when the request has a body, since the connection
/// cannot go on to the next request without reading it (RFC 9112 §9.6:
/// the requests a client pipelined behind it are told, not left
/// unanswered).
pub fn refused_before_body<B: http_body::Body, T>(body: &B, response: Response<T>) -> Response<T> {
    super::exchange::refused_unread(body, response)
}

/// How long a client may take to send a request body.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

impl Default for RouteContext {
    fn default() -> Self {
        RouteContext::new()
    }
}

impl RouteContext {
    /// A context for a route handler run outside jrpc's
    /// [`HttpServer`](super::HttpServer) (an endpoint mounted in an axum
    /// app, say): no facts about the connection, bodies up to 8 MiB (the
    /// default frame limit), a budget of its own for bodies in progress
    /// (256 MiB; see [`with_budget`](Self::with_budget)), and a shutdown
    /// token of its own (see [`with_shutdown`](Self::with_shutdown)).
    pub fn new() -> Self {
        RouteContext {
            connection: Arc::new(Extensions::new()),
            max_body_len: crate::message::Limits::DEFAULT_MAX_FRAME_LEN,
            budget: BufferBudget::default(),
            shutdown: CancellationToken::new(),
        }
    }

    /// The same context for a request from `addr` (what [`peer_addr`](Self::peer_addr)
    /// says, and what handlers see in [`ConnectionInfo`]).
    pub fn with_peer_addr(self, addr: impl Into<String>) -> Self {
        let mut connection = Extensions::new();
        connection.insert(ConnectionInfo {
            transport: "http",
            peer_addr: Some(addr.into()),
            local_addr: None,
        });
        RouteContext {
            connection: Arc::new(connection),
            ..self
        }
    }

    /// The largest request body [`read_body`](Self::read_body) takes.
    pub fn with_max_body_len(mut self, bytes: usize) -> Self {
        self.max_body_len = bytes;
        self
    }

    /// The budget bodies in progress share (with other endpoints, say).
    pub fn with_budget(mut self, budget: BufferBudget) -> Self {
        self.budget = budget;
        self
    }

    /// Cancel `token` when the server shuts down, so that long-lived
    /// streams end then.
    pub fn with_shutdown(mut self, token: CancellationToken) -> Self {
        self.shutdown = token;
        self
    }

    /// The client's address.
    pub fn peer_addr(&self) -> Option<&str> {
        self.connection
            .get::<ConnectionInfo>()
            .and_then(|info| info.peer_addr.as_deref())
    }

    /// What a handler learns of the connection ([`ConnectionInfo`]), shared
    /// by all its requests: pass it to [`Call::with_connection`].
    ///
    /// [`Call::with_connection`]: crate::middleware::Call::with_connection
    pub fn connection(&self) -> &Arc<Extensions> {
        &self.connection
    }

    /// The server's limit on request bodies (its router's frame limit).
    pub fn max_body_len(&self) -> usize {
        self.max_body_len
    }

    /// Cancelled when the server begins to shut down: end long-lived
    /// streams then, so that shutdown need not wait out its grace period.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Reads a whole request body within the server's limits: its size
    /// limit, its budget for bodies in progress, and 30 s (the timer is
    /// set only if the body is not in when first asked).
    pub fn read_body(
        &self,
        body: HttpBody,
    ) -> impl Future<Output = Result<Bytes, ReadBodyError>> + Send + '_ {
        use futures_util::FutureExt;
        let limit = self.max_body_len;
        // Not an `async` block: one awaiting the reading would hold it
        // twice, in a future that route handlers hold for every request.
        service::within(BODY_READ_TIMEOUT, service::read_body(body, limit, &self.budget)).map(move |read| {
            match read {
                None => Err(ReadBodyError::Timeout),
                Some(Ok(bytes)) => Ok(bytes),
                Some(Err(BodyError::TooLarge)) => Err(ReadBodyError::TooLarge { limit }),
                Some(Err(BodyError::OverBudget)) => Err(ReadBodyError::OverBudget),
                Some(Err(BodyError::Read(e))) => Err(ReadBodyError::Read(e)),
            }
        })
    }
}

pub(crate) fn handler<F, Fut>(handler: F) -> RouteHandler
where
    F: Fn(Request<HttpBody>, RouteContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<RouteBody>> + Send + 'static,
{
    Arc::new(move |request, cx| Box::pin(handler(request, cx)))
}
