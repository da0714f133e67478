//! One HTTP connection, served: HTTP/1.1 or HTTP/2 with upgrades, its
//! routes, the RPC service bare or layered, and its end (idle, shutdown).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use http::{Request, Response};
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;
use tower::{ServiceBuilder, ServiceExt};
use tower_http::compression::predicate::{NotForContentType, SizeAbove};
use tower_http::compression::{CompressionLayer, Predicate};
use tower_http::cors::CorsLayer;
use tower_http::decompression::RequestDecompressionLayer;

use super::activity::{Activity, RequestGuard};
use super::bodies::{Guarded, ReplyBody};
use super::exchange::{ClientAddr, HttpBody};
use super::first_request::{FirstRequest, Protocol};
use super::stack::{BoxBody, Stack};
use super::when_woken::WhenWoken;
use super::{head_timer, route, service};
use crate::context::ConnectionInfo;

/// How long a client may take to send a request's headers (and, on an idle
/// keep-alive connection, to start the next request).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Replies smaller than this are sent uncompressed.
const COMPRESS_ABOVE: u16 = 1024;
/// Concurrent HTTP/2 streams per connection.
const MAX_STREAMS: u32 = 64;

/// How long an idle connection being closed gets to say so (HTTP/2 GOAWAY).
const IDLE_CLOSE_WAIT: Duration = Duration::from_millis(500);

/// What bounds one HTTP connection.
#[derive(Debug, Clone, Copy)]
pub(super) struct ConnectionLimits {
    pub(super) compression: bool,
    /// How long requests may finish after shutdown begins.
    pub(super) grace: Duration,
    /// How long the first request may take to begin.
    pub(super) first_request: Option<Duration>,
    /// How long the connection may go without a request (none in flight).
    pub(super) idle: Option<Duration>,
    /// What an HTTP/2 connection buffers of its response bodies, in all.
    pub(super) outgoing: usize,
}

/// Serves one connection (HTTP/1.1 or HTTP/2, with upgrades) until it ends,
/// goes idle, or the server shuts down, then finishes gracefully.
pub(super) async fn serve_connection<I>(
    io: I,
    info: ConnectionInfo,
    rpc: Stack,
    limits: ConnectionLimits,
    cors: Option<CorsLayer>,
    (routes, route_context): (Routes, route::RouteContext),
    stop: CancellationToken,
) where
    I: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let ConnectionLimits {
        compression,
        grace,
        first_request,
        idle,
        outgoing,
    } = limits;
    let activity = Arc::new(Activity::new());
    let watched = Arc::clone(&activity);
    // What handlers learn of this connection, made once for its requests.
    let connection = Arc::new(service::connection_facts(info.peer_addr.clone()));
    let client = ClientAddr(info.peer_addr);
    // The full stack (compression both ways, CORS) costs a few microseconds
    // and several future moves per request even when it does nothing, so
    // requests that need none of it go straight to the RPC service.
    let layered = ServiceBuilder::new()
        .layer(compression_layer(compression))
        .option_layer(cors.clone())
        .layer(
            RequestDecompressionLayer::new()
                .no_deflate()
                .no_zstd()
                .gzip(compression)
                .br(compression),
        )
        .service(BoxBody(rpc.clone()));
    // Routes see shutdown begin, so that their streams can end then.
    let route_context = route::RouteContext {
        connection: Arc::clone(&connection),
        shutdown: stop.clone(),
        ..route_context
    };
    let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
        let head = request.method() == http::Method::HEAD;
        let answering = watched.begin(&request);
        let mut request = request.map(|body| answering.watch(body));
        // What the client takes compressed (jrpc's own client says gzip on
        // every request): asked of the reply once it is known.
        let accepts = compression
            .then(|| accepted_encodings(request.headers()))
            .flatten();
        if let Some(handler) = routes.find(request.uri().path()) {
            let request = request.map(|body| HttpBody::new(body.map_err(Into::into)));
            let reply = handler(request, route_context.clone());
            let reply: BoxFuture<Response<ReplyBody>> = match accepts {
                None => Box::pin(reply.map(move |response| {
                    answering.answered(response.headers());
                    Ok(guarded(response, answering))
                })),
                // A whole reply is compressed as the RPC service's are; one
                // that streams is not (the encoder would hold its events
                // back until its buffer filled).
                Some(accepts) => Box::pin(async move {
                    let response = reply.await;
                    answering.answered(response.headers());
                    // A reply with an entity tag keeps the one encoding it
                    // names (a strong tag names one representation).
                    let tagged = response.headers().contains_key(http::header::ETAG);
                    let response = if large(&response) && !tagged {
                        compressed(accepts, response).await
                    } else {
                        response
                    };
                    Ok(guarded(response, answering))
                }),
            };
            return for_head(head, reply);
        }
        let headers = request.headers();
        // An encoded body always goes through the decompression layer: it
        // decodes it, or refuses it (415) when compression is off.
        let decode_or_cors = headers.contains_key(http::header::CONTENT_ENCODING)
            || (cors.is_some() && headers.contains_key(http::header::ORIGIN));
        let needs_layers = decode_or_cors || accepts.is_some();
        // One small boxed future per request: hyper moves the future it
        // holds several times, and the layered one is kilobytes large.
        if let (Stack::Bare(service), false) = (&rpc, decode_or_cors) {
            // Straight to the service: hyper's body as it is, the
            // connection's facts as an argument (no `ClientAddr` in the
            // request's extension map, no boxed body).
            let settings = Arc::clone(&service.settings);
            let connection = Arc::clone(&connection);
            let reply: BoxFuture<Response<ReplyBody>> = Box::pin(async move {
                let response = service::serve(&settings, request, connection).await;
                // Most replies are too small to compress: only a large one
                // goes through a compression layer, made for it.
                let response = match accepts {
                    Some(accepts) if large(&response) => {
                        compressed(accepts, response).await.map(ReplyBody::Layered)
                    }
                    _ => response.map(ReplyBody::Plain),
                };
                answering.answered(response.headers());
                drop(answering);
                Ok(response)
            });
            return for_head(head, reply);
        }
        request.extensions_mut().insert(client.clone());
        let reply: BoxFuture<Response<ReplyBody>> = if needs_layers {
            let reply = layered.clone().oneshot(request);
            Box::pin(reply.map(move |r| {
                if let Ok(response) = &r {
                    answering.answered(response.headers());
                }
                drop(answering);
                r.map(|r| r.map(|b| ReplyBody::Layered(b.boxed_unsync())))
            }))
        } else {
            let reply = rpc.call(request);
            Box::pin(reply.map(move |r| {
                if let Ok(response) = &r {
                    answering.answered(response.headers());
                }
                drop(answering);
                r.map(|r| r.map(ReplyBody::Plain))
            }))
        };
        for_head(head, reply)
    });
    let mut io = FirstRequest::new(
        super::linger::Lingering::new(io, Arc::clone(&activity)),
        first_request,
    );
    // Both are polled only when they wake, not on each of the connection's
    // wake-ups (see `when_woken`).
    let idle = WhenWoken::new(async {
        match idle {
            Some(limit) => activity.idle(limit).await,
            None => std::future::pending().await,
        }
    });
    let stopped = WhenWoken::new(stop.cancelled());
    tokio::pin!(idle, stopped);
    // The first bytes tell the protocol; a connection that ends, goes idle
    // or is shut down before they come has nothing to finish.
    let protocol = tokio::select! {
        biased;
        protocol = std::future::poll_fn(|cx| io.poll_protocol(cx)) => protocol,
        () = &mut stopped => return,
        () = &mut idle => return,
    };
    let io = TokioIo::new(io);
    let mut served: Pin<Box<dyn Connection>> = match protocol {
        Ok(Protocol::Http1) => {
            let mut http1 = hyper::server::conn::http1::Builder::new();
            // Without a timer hyper enforces no timeouts at all: a client
            // that sends half a request head would hold its slot forever.
            http1
                .timer(head_timer::HeadTimer::default())
                .header_read_timeout(HEADER_READ_TIMEOUT);
            Box::pin(http1.serve_connection(io, service).with_upgrades())
        }
        Ok(Protocol::Http2) => {
            let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
            http2
                .timer(hyper_util::rt::TokioTimer::new())
                .keep_alive_interval(Some(Duration::from_secs(20)))
                .keep_alive_timeout(Duration::from_secs(20))
                // Each stream may buffer a body up to the frame limit.
                .max_concurrent_streams(MAX_STREAMS)
                // A client that never reads its responses leaves them here:
                // their share of the connection's bound on unwritten output,
                // each (hyper takes 400 KiB a stream otherwise, 25 MiB a
                // connection).
                .max_send_buf_size((outgoing / MAX_STREAMS as usize).max(16 << 10));
            Box::pin(http2.serve_connection(io, service))
        }
        Err(e) => return tracing::debug!(error = %e, "HTTP connection ended before its first request"),
    };
    tokio::select! {
        biased;
        result = served.as_mut() => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "HTTP connection ended with an error");
            }
        }
        () = stopped => {
            served.as_mut().shut_down();
            if tokio::time::timeout(grace, served).await.is_err() {
                tracing::warn!("HTTP connection still busy after the shutdown grace period; dropping it");
            }
        }
        () = idle => {
            // HTTP/1.1 closes at once; HTTP/2 sends GOAWAY first and would
            // wait for the client to answer a ping, which an idle (or
            // vanished) client may never do: nothing is in flight, so a
            // moment for the GOAWAY to go out is enough.
            tracing::debug!("idle HTTP connection closed");
            served.as_mut().shut_down();
            let _ = tokio::time::timeout(IDLE_CLOSE_WAIT.min(grace), served).await;
        }
    }
}

/// The `Accept-Encoding` fields of a request, if it has any: the first
/// apart, so that the usual one field costs no allocation.
struct Accepted {
    first: http::HeaderValue,
    rest: Vec<http::HeaderValue>,
}

fn accepted_encodings(headers: &http::HeaderMap) -> Option<Accepted> {
    let mut fields = headers.get_all(http::header::ACCEPT_ENCODING).iter();
    let first = fields.next()?.clone();
    Some(Accepted {
        first,
        rest: fields.cloned().collect(),
    })
}

/// Whether a reply is whole and large enough to be worth compressing. A
/// body of unknown length streams, and is sent as it comes.
fn large<B: http_body::Body>(response: &Response<B>) -> bool {
    response
        .body()
        .size_hint()
        .exact()
        .is_some_and(|len| len > u64::from(COMPRESS_ABOVE))
}

/// The layer compressing replies when `on`: gzip or brotli, as the client
/// accepts, for replies over [`COMPRESS_ABOVE`] that are neither event
/// streams nor gRPC (nor already encoded).
fn compression_layer(on: bool) -> CompressionLayer<impl Predicate> {
    // deflate and zstd are off whatever features of tower-http another
    // crate turns on: `compression(false)` must mean none.
    let layer = CompressionLayer::new().no_deflate().no_zstd();
    layer.gzip(on).br(on).compress_when(
        // Compressing a small reply costs far more than it saves.
        SizeAbove::new(COMPRESS_ABOVE)
            .and(NotForContentType::GRPC)
            .and(NotForContentType::SSE),
    )
}

/// `response`, already made, compressed for a request whose
/// `Accept-Encoding` fields are `accepts`, as [`compression_layer`]
/// decides, with `Vary`. The layer is made here, for the few replies large
/// enough, rather than kept in every request's future.
async fn compressed<B>(accepts: Accepted, response: Response<B>) -> Response<route::RouteBody>
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<super::bodies::BoxError> + Send,
{
    use tower::Layer as _;
    // The reply rides in the request (the layer reads only its headers),
    // and the service hands it back.
    let mut asked = Request::new(response);
    for value in std::iter::once(accepts.first).chain(accepts.rest) {
        asked.headers_mut().append(http::header::ACCEPT_ENCODING, value);
    }
    let made = tower::service_fn(|asked: Request<Response<B>>| {
        std::future::ready(Ok::<_, Infallible>(asked.into_body()))
    });
    match compression_layer(true).layer(made).oneshot(asked).await {
        Ok(response) => response.map(|body| body.map_err(Into::into).boxed_unsync()),
        Err(never) => match never {},
    }
}

/// `reply`, without its body when it answers `HEAD`: hyper leaves the body
/// out over HTTP/1.1, but would send it over HTTP/2.
fn for_head(head: bool, reply: BoxFuture<Response<ReplyBody>>) -> BoxFuture<Response<ReplyBody>> {
    if head {
        Box::pin(reply.map(|reply| reply.map(bodiless)))
    } else {
        reply
    }
}

/// A reply to `HEAD` without its body, its headers those the body gave
/// (its length, or its encoding; an empty body is left for hyper to
/// describe, as it always was).
fn bodiless(response: Response<ReplyBody>) -> Response<ReplyBody> {
    use http_body::Body as _;
    let (mut parts, body) = response.into_parts();
    let length = body.size_hint().exact().filter(|&length| length > 0);
    if let (Some(length), false) = (length, parts.headers.contains_key(http::header::CONTENT_LENGTH)) {
        parts
            .headers
            .insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(length));
    }
    Response::from_parts(parts, ReplyBody::Plain(http_body_util::Full::default()))
}

/// A route's reply, keeping its connection busy for as long as its body
/// streams.
fn guarded(response: Response<route::RouteBody>, answering: RequestGuard) -> Response<ReplyBody> {
    response.map(|body| {
        ReplyBody::Layered(
            Guarded {
                body,
                _answering: answering,
            }
            .boxed_unsync(),
        )
    })
}

/// The routes of a server, by path.
#[derive(Clone)]
pub(super) struct Routes(pub(super) Arc<Vec<(String, route::RouteHandler)>>);

impl Routes {
    fn find(&self, path: &str) -> Option<&route::RouteHandler> {
        self.0.iter().find(|(p, _)| p == path).map(|(_, handler)| handler)
    }
}

type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, Infallible>> + Send>>;

/// An HTTP/1.1 or HTTP/2 connection being served, as one type.
trait Connection: Future<Output = Result<(), hyper::Error>> + Send {
    /// Finishes what is in flight and takes nothing new (HTTP/2: GOAWAY).
    fn shut_down(self: Pin<&mut Self>);
}

impl<I, S, B> Connection for hyper::server::conn::http1::UpgradeableConnection<I, S>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = B> + Send,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::Future: Send,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn shut_down(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S, B> Connection for hyper::server::conn::http2::Connection<I, S, TokioExecutor>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = B> + Send,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::Future: Send + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn shut_down(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}
