//! HTTP and WebSocket on one port, with TLS, compression, CORS, auth, rate
//! limits and request timeouts.
//!
//! - `POST /` (the path is configurable) with a JSON-RPC frame (a message or
//!   a batch) as the body; the reply frame comes back as the response body
//!   with `Content-Type: application/json`. A frame that needs no reply
//!   (notifications only) gets `204 No Content` with an empty body.
//! - `GET /` with a WebSocket upgrade: one JSON text per message, both ways;
//!   each connection is a full [`Peer`](crate::peer::Peer), so handlers can
//!   call and notify the client.
//! - `GET /health` answers `200 {"status":"ok"}` for load balancers.
//! - `GET /playground`, when [turned on](HttpServer::playground): a page to
//!   try the server's methods from a browser.
//!
//! Refusals, each with a JSON-RPC error body (`"id": null`): another method
//! on the RPC path → `405` (with `Allow`); a body that is not JSON → `415`;
//! a body over the frame limit → `413`, decided from `Content-Length` before
//! reading when it is announced; a missing or wrong token → `401`; a client
//! over its rate → `429` with `Retry-After`; a request over its time →
//! `504`. Bodies may be gzip- or brotli-compressed (`Content-Encoding`), and
//! replies are compressed when the client accepts it (`Accept-Encoding`).
//! HTTP/1.1 keep-alive and HTTP/2 (h2c, and by ALPN over TLS) are both served.
//!
//! ```no_run
//! use std::time::Duration;
//! use jrpc::server::http::{HttpServer, RateLimit};
//!
//! # async fn run() -> std::io::Result<()> {
//! let router = jrpc::Router::new().sync_method("ping", || Ok("pong"));
//! let serving = HttpServer::new(router)
//!     .auth_tokens(["s3cret"])
//!     .rate_limit(RateLimit::per_second(100, 200))
//!     .request_timeout(Duration::from_secs(10))
//!     .tls_pem("cert.pem", "key.pem")?
//!     .bind("127.0.0.1:8443")
//!     .await?;
//! println!("serving on {}", serving.local_addr());
//! # Ok(()) }
//! ```

mod accept;
mod exchange;
mod head_timer;
mod layers;
#[cfg(feature = "metrics")]
mod metrics_server;
mod playground;
pub mod route;
mod service;
pub mod sse;
mod when_woken;

use std::convert::Infallible;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;
use http::{Request, Response};
use http_body::Body;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::rustls::ServerConfig;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use tower_http::compression::predicate::{NotForContentType, SizeAbove};
use tower_http::compression::{CompressionLayer, Predicate};
use tower_http::cors::CorsLayer;
use tower_http::decompression::RequestDecompressionLayer;

use accept::{busy_response, HttpAccept};
pub use exchange::{error_response, ClientAddr, ErrorBody, HttpBody};
#[allow(deprecated)]
pub use layers::RateLimitLayer;
pub use layers::{
    Auth, AuthLayer, Gate, Gated, RateLimit, RateLimited, RequestRateLimitLayer, RequestTimeout,
    RequestTimeoutLayer,
};
#[cfg(feature = "metrics")]
pub use metrics_server::serve_metrics;
pub use service::RpcService;

use crate::codec::BufferBudget;
use crate::context::ConnectionInfo;
use crate::peer::ConnectionConfig;
use crate::server::{Server, Serving};
use crate::transport::ws::WsOptions;
use crate::Router;
use when_woken::WhenWoken;

/// How long a client may take to send a request's headers (and, on an idle
/// keep-alive connection, to start the next request).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Replies smaller than this are sent uncompressed.
const COMPRESS_ABOVE: u16 = 1024;
/// Concurrent HTTP/2 streams per connection.
const MAX_STREAMS: u32 = 64;

/// The RPC service with its layers, as one cloneable service.
pub type HttpService = BoxCloneSyncService<Request<HttpBody>, Response<Full<Bytes>>, Infallible>;

/// Serves a router over HTTP and WebSocket on one port. See the [module
/// docs](self).
#[derive(Clone)]
pub struct HttpServer {
    router: Router,
    path: String,
    health_path: Option<String>,
    websocket: Option<WsOptions>,
    compression: bool,
    cors: Option<CorsLayer>,
    null_origin: bool,
    body_budget: BufferBudget,
    tls: Option<Arc<ServerConfig>>,
    auth: Option<AuthLayer>,
    #[cfg(feature = "oauth")]
    bearer: Option<crate::auth::BearerAuth>,
    rate_limit: Option<RateLimit>,
    request_timeout: Option<Duration>,
    layers: Vec<Arc<dyn Fn(HttpService) -> HttpService + Send + Sync>>,
    routes: Vec<(String, route::RouteHandler)>,
    playground: bool,
    /// How WebSocket connections behave.
    config: ConnectionConfig,
    shutdown_grace: Duration,
    max_connections: usize,
    #[cfg(feature = "metrics")]
    metrics: Option<crate::middleware::Metrics>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("path", &self.path)
            .field("websocket", &self.websocket)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

impl HttpServer {
    /// The default budget for request bodies in progress: 256 MiB.
    pub const DEFAULT_BODY_BUDGET: usize = BufferBudget::DEFAULT;

    /// Serves `router` on `/`, with WebSocket, compression and `/health` on,
    /// and no TLS, auth, CORS, rate limit or timeout.
    pub fn new(router: Router) -> Self {
        let websocket = WsOptions {
            max_message_len: router.parse_limits().max_frame_len,
            ..WsOptions::default()
        };
        HttpServer {
            config: ConnectionConfig::default(),
            shutdown_grace: Server::DEFAULT_SHUTDOWN_GRACE,
            router,
            path: "/".to_owned(),
            health_path: Some("/health".to_owned()),
            websocket: Some(websocket),
            compression: true,
            cors: None,
            null_origin: false,
            body_budget: BufferBudget::default(),
            tls: None,
            auth: None,
            #[cfg(feature = "oauth")]
            bearer: None,
            rate_limit: None,
            request_timeout: None,
            layers: Vec::new(),
            routes: Vec::new(),
            playground: false,
            max_connections: Server::DEFAULT_MAX_CONNECTIONS,
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }

    /// Serves `metrics` at `GET /metrics` (Prometheus text format) and counts
    /// open HTTP and WebSocket connections in them. Calls are counted by the
    /// router's [`Metrics::layer`](crate::middleware::Metrics::layer).
    #[cfg(feature = "metrics")]
    pub fn metrics(mut self, metrics: crate::middleware::Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The path JSON-RPC is served on (default `/`).
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// The health-check path (default `/health`); `None` turns it off.
    pub fn health_path(mut self, path: Option<String>) -> Self {
        self.health_path = path;
        self
    }

    /// Serves the playground at `GET /playground` (off by default): a page
    /// for trying the server from a browser. It connects to the RPC path
    /// over WebSocket, loads the server's methods from `rpc.discover` (turn
    /// it on with [`Router::discover`]), builds a form for each from its
    /// param schemas, and shows requests, responses, the server's
    /// notifications and a history; raw JSON editing covers the rest. It
    /// needs WebSocket on, and loads nothing from the network. A browser
    /// cannot send an `Authorization` header on a WebSocket, so a server
    /// with [auth](Self::auth) refuses the page's connection. Routes of
    /// your own on the same paths take precedence.
    ///
    /// ```no_run
    /// use jrpc::openrpc::Info;
    /// use jrpc::server::http::HttpServer;
    ///
    /// # async fn run() -> std::io::Result<()> {
    /// let router = jrpc::Router::new()
    ///     .sync_method("ping", || Ok("pong"))
    ///     .discover(Info::new("pinger", "1.0.0"));
    /// let serving = HttpServer::new(router).playground(true).bind("127.0.0.1:4000").await?;
    /// println!("open {}/playground", serving.local_addr());
    /// # Ok(()) }
    /// ```
    pub fn playground(mut self, on: bool) -> Self {
        self.playground = on;
        self
    }

    /// WebSocket settings; `None` turns WebSocket off.
    pub fn websocket(mut self, options: Option<WsOptions>) -> Self {
        self.websocket = options;
        self
    }

    /// How WebSocket connections behave (call timeout, cancellation,
    /// requests in flight, ordering). They serve this server's router, as
    /// POST does.
    pub fn connection(mut self, config: ConnectionConfig) -> Self {
        self.config = config;
        self
    }

    /// How long a graceful shutdown waits for requests in flight (default
    /// 30 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// gzip and brotli for request and response bodies (on by default).
    pub fn compression(mut self, on: bool) -> Self {
        self.compression = on;
        self
    }

    /// Cross-origin requests, as tower-http's [`CorsLayer`] allows them
    /// (e.g. `CorsLayer::permissive()`); off by default.
    pub fn cors(mut self, cors: CorsLayer) -> Self {
        self.cors = Some(cors);
        self
    }

    /// The most bytes of request bodies and WebSocket messages read but not
    /// yet whole, across all connections (default 256 MiB), so that many
    /// clients sending large requests slowly cannot exhaust memory. Past it
    /// a request is answered `503` with `Retry-After` and a `-32007 Server
    /// busy` body; a WebSocket gets that error as a message and is closed
    /// with 1013 (the first 64 KiB of each WebSocket are not counted). A number
    /// of bytes, or a [`BufferBudget`] shared with another server (say the
    /// [`Server`] of your TCP listeners). The same setting, under the same
    /// name, as [`Server::buffer_budget`].
    pub fn buffer_budget(mut self, budget: impl Into<BufferBudget>) -> Self {
        self.body_budget = budget.into();
        self
    }

    /// The former name of [`buffer_budget`](Self::buffer_budget).
    #[deprecated(since = "0.1.0", note = "renamed `buffer_budget`, as on `Server`")]
    pub fn body_budget(self, budget: impl Into<BufferBudget>) -> Self {
        self.buffer_budget(budget)
    }

    /// Let browser pages with the opaque `Origin: null` call (off by
    /// default: any web page can send it from a sandboxed iframe, so a
    /// server that allowed it could be driven by any site its user visits).
    /// Local files opened in a browser send it too.
    pub fn allow_null_origin(mut self, on: bool) -> Self {
        self.null_origin = on;
        self
    }

    /// TLS with this rustls configuration (see [`crate::transport::tls`]).
    pub fn tls(mut self, config: Arc<ServerConfig>) -> Self {
        self.tls = Some(config);
        self
    }

    /// TLS with a certificate chain and key from PEM files.
    pub fn tls_pem(
        self,
        cert: impl AsRef<std::path::Path>,
        key: impl AsRef<std::path::Path>,
    ) -> io::Result<Self> {
        Ok(self.tls(crate::transport::tls::server_config_from_pem(cert, key)?))
    }

    /// Requires one of `tokens` as a bearer token or API key on every
    /// request but the health check; see [`AuthLayer`].
    pub fn auth_tokens(self, tokens: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.auth(AuthLayer::bearer(tokens))
    }

    /// Requires a token `auth` accepts on every request but the health
    /// check (e.g. [`AuthLayer::named`], whose tokens carry identities for
    /// per-method authorization).
    pub fn auth(mut self, auth: AuthLayer) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Requires an OAuth bearer token that `bearer`'s verifier accepts (a
    /// JWT from your authorization server, say) on POST and WebSocket, on
    /// every request but the health check; see [`BearerAuth`](crate::auth::BearerAuth).
    #[cfg(feature = "oauth")]
    pub fn bearer(mut self, bearer: crate::auth::BearerAuth) -> Self {
        self.bearer = Some(bearer);
        self
    }

    /// Limits each client (by IP address) to a budget of calls, charged per
    /// call (each batch entry counts): a call over it is answered at once
    /// with `-32005 Rate limited`, on HTTP and WebSocket alike; an HTTP
    /// request whose every call was refused is answered `429` with
    /// `Retry-After`. Requests refused for a missing or wrong token are
    /// charged too.
    pub fn rate_limit(mut self, limit: RateLimit) -> Self {
        self.rate_limit = Some(limit);
        self
    }

    /// Bounds each HTTP request's time; see [`RequestTimeoutLayer`].
    pub fn request_timeout(mut self, limit: Duration) -> Self {
        self.request_timeout = Some(limit);
        self
    }

    /// The most connections open at once (default 1024).
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// Wraps the RPC service (inside auth, rate limit and timeout) in any
    /// tower layer: logging, metrics, a concurrency limit, your own auth.
    pub fn layer<L>(mut self, layer: L) -> Self
    where
        L: Layer<HttpService> + Send + Sync + 'static,
        L::Service: Service<Request<HttpBody>, Response = Response<Full<Bytes>>, Error = Infallible>
            + Clone
            + Send
            + Sync
            + 'static,
        <L::Service as Service<Request<HttpBody>>>::Future: Send + 'static,
    {
        self.layers.push(Arc::new(move |inner| {
            BoxCloneSyncService::new(layer.layer(inner))
        }));
        self
    }

    /// Serves `path` with a handler of your own instead of the RPC service:
    /// every method, any status and headers, a body that may stream (see
    /// [`sse`]). The RPC endpoint's layers (auth, rate limits, timeouts,
    /// compression, CORS) do not apply; the handler reads the body with
    /// [`RouteContext::read_body`](route::RouteContext::read_body) and does
    /// its own checks. A connection with a response still streaming is not
    /// idle. A second route for the same path replaces the first.
    ///
    /// ```
    /// use jrpc::server::http::{route, HttpServer};
    ///
    /// let server = HttpServer::new(jrpc::Router::new()).route("/hello", |_request, _cx| async {
    ///     let mut response = http::Response::new(route::full_body("hello"));
    ///     *response.status_mut() = http::StatusCode::IM_A_TEAPOT;
    ///     response
    /// });
    /// ```
    pub fn route<F, Fut>(mut self, path: impl Into<String>, handler: F) -> Self
    where
        F: Fn(Request<HttpBody>, route::RouteContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Response<route::RouteBody>> + Send + 'static,
    {
        let path = path.into();
        self.routes.retain(|(taken, _)| *taken != path);
        self.routes.push((path, route::handler(handler)));
        self
    }

    /// The RPC service with this server's layers, for serving it some other
    /// way (inside an existing hyper or axum server, say). WebSocket
    /// upgrades need a connection served with upgrades enabled.
    pub fn service(&self) -> HttpService {
        match self.build(TaskTracker::new(), CancellationToken::new()) {
            Stack::Bare(service) => BoxCloneSyncService::new(service),
            Stack::Layered(service) => service,
        }
    }

    fn build(&self, connections: TaskTracker, shutdown: CancellationToken) -> Stack {
        let router = match &self.rate_limit {
            Some(limit) => self.router.clone().layer(limit.layer()),
            None => self.router.clone(),
        };
        let settings = Arc::new(service::Settings {
            router,
            path: self.path.clone(),
            health_path: self.health_path.clone(),
            websocket: self.websocket,
            #[cfg(feature = "metrics")]
            metrics: self.metrics.clone(),
            any_origin: self.cors.is_some(),
            null_origin: self.null_origin,
            tls: self.tls.is_some(),
            ws_slots: Arc::new(tokio::sync::Semaphore::new(self.max_connections)),
            body_budget: self.body_budget.clone(),
            config: self.config.clone(),
            shutdown_grace: self.shutdown_grace,
            connections,
            shutdown,
        });
        let bare = RpcService { settings };
        #[cfg(feature = "oauth")]
        let bearer = self.bearer.is_some();
        #[cfg(not(feature = "oauth"))]
        let bearer = false;
        if self.layers.is_empty() && self.request_timeout.is_none() && self.auth.is_none() && !bearer {
            return Stack::Bare(bare);
        }
        let mut service: HttpService = BoxCloneSyncService::new(bare);
        for layer in &self.layers {
            service = layer(service);
        }
        if let Some(limit) = self.request_timeout {
            service = BoxCloneSyncService::new(RequestTimeoutLayer::new(limit).layer(service));
        }
        if let Some(auth) = &self.auth {
            let mut auth = auth.clone();
            if let Some(path) = &self.health_path {
                auth = auth.exempt(path.clone());
            }
            // Refused (401) requests count against the client's budget
            // too: no token guessing at line rate.
            if let Some(limit) = &self.rate_limit {
                auth = auth.charge_refusals(limit.clone());
            }
            service = BoxCloneSyncService::new(auth.layer(service));
        }
        #[cfg(feature = "oauth")]
        if let Some(bearer) = &self.bearer {
            let mut bearer = bearer.clone();
            if let Some(path) = &self.health_path {
                bearer = bearer.exempt(path.clone());
            }
            service = BoxCloneSyncService::new(bearer.layer(service));
        }
        Stack::Layered(service)
    }

    /// Listens on `addr` (port 0 picks a free one) and serves until shut
    /// down. [`Serving::local_addr`] gives `http://…` (or `https://…`).
    pub async fn bind(&self, addr: impl tokio::net::ToSocketAddrs) -> io::Result<Serving> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        Ok(self.serve_tcp(listener))
    }

    /// Serves on a TCP listener already bound, until shut down. Must be
    /// called within a tokio runtime.
    pub fn serve_tcp(&self, listener: tokio::net::TcpListener) -> Serving {
        let connections = TaskTracker::new();
        let shutdown = CancellationToken::new();
        let rpc = self.build(connections.clone(), shutdown.clone());
        let limits = ConnectionLimits {
            compression: self.compression,
            grace: self.shutdown_grace,
            first_request: self.config.first_request_timeout,
            idle: self.config.idle_timeout,
            outgoing: self.config.max_outgoing_bytes,
        };
        let mut routes = self.routes.clone();
        if self.playground {
            for (path, handler) in playground::routes(&self.path) {
                // Routes of your own, the RPC path and the health check
                // keep their paths.
                let taken = routes.iter().any(|(taken, _)| *taken == path)
                    || path == self.path
                    || self.health_path.as_deref() == Some(path.as_str());
                if !taken {
                    routes.push((path, handler));
                }
            }
        }
        let routes = Routes(Arc::new(routes));
        let route_context = route::RouteContext {
            // Replaced per connection by its own facts.
            connection: Arc::default(),
            max_body_len: self.router.parse_limits().max_frame_len,
            budget: self.body_budget.clone(),
            // Replaced per connection by its own stop signal.
            shutdown: CancellationToken::new(),
        };
        let cors = self.cors.clone();
        let tls = self.tls.clone().map(tokio_rustls::TlsAcceptor::from);
        let scheme = if tls.is_some() { "https" } else { "http" };
        let local_addr = format!("{scheme}://{}", crate::transport::tcp::address(&listener));
        #[cfg(feature = "metrics")]
        let metrics = self.metrics.clone();
        let listener = HttpAccept {
            listener,
            // Over TLS a plain-text answer would be noise: just close.
            refusal: tls.is_none().then(busy_response),
        };
        let mut serving = Serving::start(
            listener,
            local_addr,
            self.max_connections,
            move |(stream, info): (tokio::net::TcpStream, ConnectionInfo), stop| {
                let (rpc, cors, tls) = (rpc.clone(), cors.clone(), tls.clone());
                let routes = (routes.clone(), route_context.clone());
                #[cfg(feature = "metrics")]
                let gauge = metrics.as_ref().map(|m| m.connection("http"));
                async move {
                    #[cfg(feature = "metrics")]
                    let _gauge = gauge;
                    match tls {
                        None => serve_connection(stream, info, rpc, limits, cors, routes, stop).await,
                        // Boxed: inline, the handshake and the TLS variant
                        // would double the task of every plain connection
                        // (to 11 KB).
                        Some(acceptor) => {
                            Box::pin(async move {
                                let handshake =
                                    tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream));
                                match handshake.await {
                                    Ok(Ok(stream)) => {
                                        serve_connection(stream, info, rpc, limits, cors, routes, stop).await
                                    }
                                    Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                                    Err(_) => tracing::debug!("TLS handshake timed out"),
                                }
                            })
                            .await
                        }
                    }
                }
            },
        );
        serving.detached_work(connections, shutdown);
        serving
    }
}

/// How long an idle connection being closed gets to say so (HTTP/2 GOAWAY).
const IDLE_CLOSE_WAIT: Duration = Duration::from_millis(500);

/// What bounds one HTTP connection.
#[derive(Debug, Clone, Copy)]
struct ConnectionLimits {
    compression: bool,
    /// How long requests may finish after shutdown begins.
    grace: Duration,
    /// How long the first request may take to begin.
    first_request: Option<Duration>,
    /// How long the connection may go without a request (none in flight).
    idle: Option<Duration>,
    /// What an HTTP/2 connection buffers of its response bodies, in all.
    outgoing: usize,
}

/// When a connection last began or finished a request, and how many it is
/// answering: what its idle watchdog looks at. (Bytes read are not
/// activity: HTTP/2 keep-alive pings would keep every connection busy.)
struct Activity {
    start: tokio::time::Instant,
    last_ms: std::sync::atomic::AtomicU64,
    in_flight: std::sync::atomic::AtomicUsize,
}

impl Activity {
    fn new() -> Self {
        Activity {
            start: tokio::time::Instant::now(),
            last_ms: std::sync::atomic::AtomicU64::new(0),
            in_flight: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn touch(&self) {
        let now = self.start.elapsed().as_millis() as u64;
        self.last_ms.store(now, std::sync::atomic::Ordering::Relaxed);
    }

    /// A request begins; the guard marks its end when dropped.
    fn begin(self: &Arc<Self>) -> RequestGuard {
        // No clock read here: while a request is in flight the connection
        // is not idle whatever the time; the guard notes when it ended.
        self.in_flight.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        RequestGuard(Arc::clone(self))
    }

    /// How long the connection has been idle, or `None` while it answers.
    fn idle_for(&self) -> Option<Duration> {
        if self.in_flight.load(std::sync::atomic::Ordering::Relaxed) > 0 {
            return None;
        }
        let last = Duration::from_millis(self.last_ms.load(std::sync::atomic::Ordering::Relaxed));
        Some(self.start.elapsed().saturating_sub(last))
    }

    /// Resolves once the connection has been idle for `limit`.
    async fn idle(&self, limit: Duration) {
        loop {
            match self.idle_for() {
                Some(idle) if idle >= limit => return,
                Some(idle) => tokio::time::sleep(limit - idle).await,
                None => tokio::time::sleep(limit).await,
            }
        }
    }
}

struct RequestGuard(Arc<Activity>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.touch();
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Serves one connection (HTTP/1.1 or HTTP/2, with upgrades) until it ends,
/// goes idle, or the server shuts down, then finishes gracefully.
async fn serve_connection<I>(
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
    let facts = Arc::new(service::connection_facts(info.peer_addr.clone()));
    let client = ClientAddr(info.peer_addr);
    // The full stack (compression both ways, CORS) costs a few microseconds
    // and several future moves per request even when it does nothing, so
    // requests that need none of it go straight to the RPC service.
    let layered = ServiceBuilder::new()
        .layer(
            CompressionLayer::new()
                .gzip(compression)
                .br(compression)
                .compress_when(
                    // Compressing a small reply costs far more than it saves.
                    SizeAbove::new(COMPRESS_ABOVE)
                        .and(NotForContentType::GRPC)
                        .and(NotForContentType::SSE),
                ),
        )
        .option_layer(cors.clone())
        .layer(RequestDecompressionLayer::new().gzip(compression).br(compression))
        .service(BoxBody(rpc.clone()));
    // Routes see shutdown begin, so that their streams can end then.
    let route_context = route::RouteContext {
        connection: Arc::clone(&facts),
        shutdown: stop.clone(),
        ..route_context
    };
    let service = hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
        let answering = watched.begin();
        if let Some(handler) = routes.find(request.uri().path()) {
            let request = request.map(|body| HttpBody::new(body.map_err(Into::into)));
            let reply = handler(request, route_context.clone());
            // The connection is busy for as long as the body streams.
            let reply: BoxFuture<Response<ReplyBody>> = Box::pin(reply.map(move |response| {
                Ok(response.map(|body| {
                    ReplyBody::Layered(
                        Guarded {
                            body,
                            _answering: answering,
                        }
                        .boxed_unsync(),
                    )
                }))
            }));
            return reply;
        }
        let headers = request.headers();
        // An encoded body always goes through the decompression layer: it
        // decodes it, or refuses it (415) when compression is off.
        let needs_layers = headers.contains_key(http::header::CONTENT_ENCODING)
            || (compression && headers.contains_key(http::header::ACCEPT_ENCODING))
            || (cors.is_some() && headers.contains_key(http::header::ORIGIN));
        // One small boxed future per request: hyper moves the future it
        // holds several times, and the layered one is kilobytes large.
        if let (Stack::Bare(service), false) = (&rpc, needs_layers) {
            // Straight to the service: hyper's body as it is, the
            // connection's facts as an argument (no `ClientAddr` in the
            // request's extension map, no boxed body).
            let settings = Arc::clone(&service.settings);
            let facts = Arc::clone(&facts);
            let reply: BoxFuture<Response<ReplyBody>> = Box::pin(async move {
                let response = service::serve(&settings, request, facts).await;
                drop(answering);
                Ok(response.map(ReplyBody::Plain))
            });
            return reply;
        }
        request.extensions_mut().insert(client.clone());
        let reply: BoxFuture<Response<ReplyBody>> = if needs_layers {
            let reply = layered.clone().oneshot(request);
            Box::pin(reply.map(move |r| {
                drop(answering);
                r.map(|r| r.map(|b| ReplyBody::Layered(b.boxed_unsync())))
            }))
        } else {
            let reply = rpc.call(request);
            Box::pin(reply.map(move |r| {
                drop(answering);
                r.map(|r| r.map(ReplyBody::Plain))
            }))
        };
        reply
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    // Without a timer hyper enforces no timeouts at all: a client that
    // opens a connection and sends nothing would hold its slot forever.
    builder
        .http1()
        .timer(head_timer::HeadTimer::default())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder
        .http2()
        .timer(hyper_util::rt::TokioTimer::new())
        .keep_alive_interval(Some(Duration::from_secs(20)))
        .keep_alive_timeout(Duration::from_secs(20))
        // Each stream may buffer a body up to the frame limit.
        .max_concurrent_streams(MAX_STREAMS)
        // A client that never reads its responses leaves them here: their
        // share of the connection's bound on unwritten output, each (hyper
        // takes 400 KiB a stream otherwise, 25 MiB a connection).
        .max_send_buf_size((outgoing / MAX_STREAMS as usize).max(16 << 10));
    let io = FirstRequest::new(io, first_request);
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    tokio::pin!(connection);
    // Both are polled only when they wake, not on each of the connection's
    // wake-ups (see `when_woken`).
    let idle = WhenWoken::new(async {
        match idle {
            Some(limit) => activity.idle(limit).await,
            None => std::future::pending().await,
        }
    });
    let stopped = WhenWoken::new(stop.cancelled());
    tokio::select! {
        biased;
        result = connection.as_mut() => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "HTTP connection ended with an error");
            }
        }
        () = stopped => {
            connection.as_mut().graceful_shutdown();
            if tokio::time::timeout(grace, connection).await.is_err() {
                tracing::warn!("HTTP connection still busy after the shutdown grace period; dropping it");
            }
        }
        () = idle => {
            // HTTP/1.1 closes at once; HTTP/2 sends GOAWAY first and would
            // wait for the client to answer a ping, which an idle (or
            // vanished) client may never do: nothing is in flight, so a
            // moment for the GOAWAY to go out is enough.
            tracing::debug!("idle HTTP connection closed");
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(IDLE_CLOSE_WAIT.min(grace), connection).await;
        }
    }
}

/// The routes of a server, by path.
#[derive(Clone)]
struct Routes(Arc<Vec<(String, route::RouteHandler)>>);

impl Routes {
    fn find(&self, path: &str) -> Option<&route::RouteHandler> {
        self.0.iter().find(|(p, _)| p == path).map(|(_, handler)| handler)
    }
}

/// A route's body, keeping its connection busy until it ends.
struct Guarded {
    body: route::RouteBody,
    _answering: RequestGuard,
}

impl Body for Guarded {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A response body: plain, or from the compression and CORS layers.
enum ReplyBody {
    Plain(Full<Bytes>),
    Layered(http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>),
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ReplyBody::Plain(body) => std::pin::Pin::new(body)
                .poll_frame(cx)
                .map_err(|never| match never {}),
            ReplyBody::Layered(body) => std::pin::Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ReplyBody::Plain(body) => body.is_end_stream(),
            ReplyBody::Layered(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            ReplyBody::Plain(body) => body.size_hint(),
            ReplyBody::Layered(body) => body.size_hint(),
        }
    }
}
type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, Infallible>> + Send>>;

/// The RPC service as served: bare when no layer wraps it (one boxed
/// future per request), else with its layers.
#[derive(Clone)]
enum Stack {
    Bare(RpcService),
    Layered(HttpService),
}

impl Stack {
    fn call<B>(&self, request: Request<B>) -> <HttpService as Service<Request<HttpBody>>>::Future
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let request = request.map(|body| HttpBody::new(body.map_err(Into::into)));
        match self {
            // Always ready: it does its work in the future.
            Stack::Bare(service) => service.clone().call(request),
            // Layers given by the user may wait in `poll_ready`.
            Stack::Layered(service) => Box::pin(service.clone().oneshot(request)),
        }
    }
}

/// Boxes whatever body the outer layers produce into [`HttpBody`].
#[derive(Clone)]
struct BoxBody(Stack);

impl<B> Service<Request<B>> for BoxBody
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = <HttpService as Service<Request<HttpBody>>>::Future;

    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Infallible>> {
        // `Stack::call` waits for readiness itself, in the future it returns.
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        self.0.call(request)
    }
}

/// A connection's byte stream that fails its reads if the first request has
/// not begun to arrive in time. hyper reads the protocol preface with no
/// timeout of its own, so a client that connects and says nothing (or only
/// `P`) would hold its slot forever. The deadline is lifted once the first
/// 24 bytes (an HTTP/2 preface, or any HTTP/1.1 request line) are in, or
/// once the server writes (it is answering).
struct FirstRequest<I> {
    io: I,
    deadline: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    read: usize,
}

/// Bytes after which the first request is under way.
const FIRST_REQUEST_BYTES: usize = 24;

impl<I> FirstRequest<I> {
    fn new(io: I, limit: Option<Duration>) -> Self {
        FirstRequest {
            io,
            deadline: limit.map(|limit| Box::pin(tokio::time::sleep(limit))),
            read: 0,
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for FirstRequest<I> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.io).poll_read(cx, buf);
        match polled {
            std::task::Poll::Ready(Ok(())) => {
                self.read += buf.filled().len() - before;
                if self.read >= FIRST_REQUEST_BYTES {
                    self.deadline = None;
                }
                std::task::Poll::Ready(Ok(()))
            }
            std::task::Poll::Pending => {
                let expired = self
                    .deadline
                    .as_mut()
                    .is_some_and(|deadline| std::future::Future::poll(deadline.as_mut(), cx).is_ready());
                if expired {
                    return std::task::Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no request within the first-request timeout",
                    )));
                }
                std::task::Poll::Pending
            }
            other => other,
        }
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for FirstRequest<I> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        self.deadline = None;
        std::pin::Pin::new(&mut self.io).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> std::task::Poll<io::Result<usize>> {
        self.deadline = None;
        std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
