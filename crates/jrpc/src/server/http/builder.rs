//! [`HttpServer`]: the builder of an HTTP and WebSocket server, and where
//! it starts serving.

use std::convert::Infallible;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use tokio_rustls::rustls::ServerConfig;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service};
use tower_http::cors::CorsLayer;

use super::accept::{busy_response, HttpAccept};
use super::connection::{serve_connection, ConnectionLimits, Routes};
use super::exchange::HttpBody;
use super::layers::{AuthLayer, RateLimit, RequestTimeoutLayer};
use super::service::{self, RpcService};
use super::stack::{HttpService, Stack};
use super::{playground, route};
use crate::codec::BufferBudget;
use crate::peer::ConnectionConfig;
use crate::server::{Server, Serving};
use crate::transport::ws::WsOptions;
use crate::transport::StreamListener;
use crate::Router;

/// Serves a router over HTTP and WebSocket on one port. See the [module
/// docs](crate::server::http).
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
    bearer: Option<super::bearer::BearerAuth>,
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
    /// every request but the health check; see [`BearerAuth`](super::bearer::BearerAuth).
    #[cfg(feature = "oauth")]
    pub fn bearer(mut self, bearer: super::bearer::BearerAuth) -> Self {
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
    /// [`sse`](super::sse)). The RPC endpoint's layers (auth, rate limits, timeouts,
    /// CORS, request decompression) do not apply; the handler reads the body with
    /// [`RouteContext::read_body`](route::RouteContext::read_body) and does
    /// its own checks. A whole reply over 1 KiB without an `ETag` is
    /// compressed for a client that accepts it, unless
    /// [`compression`](Self::compression) is off; a streaming one is not. A connection with a response still streaming is not
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
        let listener = crate::transport::tcp::listen(addr).await?;
        Ok(self.serve_tcp(listener))
    }

    /// Serves on a TCP listener already bound, until shut down. Must be
    /// called within a tokio runtime.
    pub fn serve_tcp(&self, listener: tokio::net::TcpListener) -> Serving {
        self.serve(crate::transport::TunedTcpListener::new(listener))
    }

    /// Serves on any listener of byte streams (TCP, a Unix socket, one of
    /// your own) until shut down; [`Serving::local_addr`] is its URL
    /// (`http://HOST:PORT`, `http+unix://%2FPATH`). Must be called within a
    /// tokio runtime.
    pub fn serve(&self, listener: impl StreamListener) -> Serving {
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
        let local_addr = listener.url(scheme);
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
            move |(stream, info), stop| {
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
