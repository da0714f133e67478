//! Serving a router to many connections: the accept loop, its connection
//! bound, and graceful shutdown.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::codec::Framing;
use crate::context::Extensions;
use crate::peer::{CancelProtocol, ConnectionInfo, Peer, PeerBuilder};
use crate::Router;

/// A listener the accept loop can take connections from.
pub(crate) trait Listen: Send + Sync + 'static {
    /// An accepted connection.
    type Conn: AsyncRead + AsyncWrite + Send + Unpin + 'static;
    fn accept_conn(&self) -> impl Future<Output = io::Result<(Self::Conn, ConnectionInfo)>> + Send;
    fn address(&self) -> String;
}

/// Serves a [`Router`] on listeners and on stdio, each connection its own
/// [`Peer`] (so handlers can call back the client through
/// [`RequestContext::peer`](crate::RequestContext::peer)).
///
/// ```no_run
/// use jrpc::transport::Server;
///
/// # async fn run() -> std::io::Result<()> {
/// let serving = Server::new(jrpc::demo::router())
///     .max_connections(1000)
///     .bind_tcp("127.0.0.1:0")
///     .await?;
/// println!("listening on {}", serving.local_addr());
/// tokio::signal::ctrl_c().await?;
/// serving.shutdown().await; // in-flight requests finish first
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Server {
    router: Router,
    framing: Framing,
    max_connections: usize,
    call_timeout: Duration,
    cancel: Option<CancelProtocol>,
    max_in_flight: usize,
    ordered: bool,
    shutdown_grace: Duration,
    #[cfg(feature = "metrics")]
    metrics: Option<crate::middleware::Metrics>,
}

impl Server {
    /// The default grace period for shutdown: 30 s.
    pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

    /// The default bound on open connections per listener: 1024.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

    /// A server for `router`, with default settings.
    pub fn new(router: Router) -> Self {
        Server {
            router,
            framing: Framing::Ndjson,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            call_timeout: Peer::DEFAULT_CALL_TIMEOUT,
            cancel: None,
            max_in_flight: Peer::DEFAULT_MAX_IN_FLIGHT,
            ordered: false,
            shutdown_grace: Self::DEFAULT_SHUTDOWN_GRACE,
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }

    /// Counts open connections (by transport) in `metrics`. Calls are
    /// counted by the router's [`Metrics::layer`](crate::middleware::Metrics::layer).
    #[cfg(feature = "metrics")]
    pub fn metrics(mut self, metrics: crate::middleware::Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Keeps a connection counted in the metrics while the guard lives.
    fn count_connection(&self, _transport: &str) -> impl Send + 'static {
        #[cfg(feature = "metrics")]
        return self.metrics.as_ref().map(|m| m.connection(_transport));
    }

    /// Requests wait for the notifications that arrived before them on their
    /// connection (off by default); see [`PeerBuilder::ordered`].
    pub fn ordered(mut self, on: bool) -> Self {
        self.ordered = on;
        self
    }

    /// How long a graceful shutdown waits for requests in flight before it
    /// aborts them and drops the connections (default 30 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn grace(&self) -> Duration {
        self.shutdown_grace
    }

    /// Closes `peer` gracefully, or aborts it after the grace period.
    pub(crate) async fn close_peer(&self, peer: &Peer) {
        peer.close();
        if tokio::time::timeout(self.shutdown_grace, peer.closed())
            .await
            .is_err()
        {
            tracing::warn!("connection still busy after the shutdown grace period; aborting it");
            peer.abort();
            peer.closed().await;
        }
    }

    /// The framing of every connection (default newline-delimited JSON).
    pub fn framing(mut self, framing: Framing) -> Self {
        self.framing = framing;
        self
    }

    /// The most connections open at once per listener (default 1024). When
    /// full, the server stops accepting until one closes; waiting clients
    /// queue in the operating system's backlog.
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// The timeout of calls handlers make to their clients (default 30 s).
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Cancellation across each connection (off by default).
    pub fn cancellation(mut self, protocol: CancelProtocol) -> Self {
        self.cancel = Some(protocol);
        self
    }

    /// Incoming requests running at once per connection (default 128).
    pub fn max_in_flight(mut self, requests: usize) -> Self {
        self.max_in_flight = requests.max(1);
        self
    }

    fn peer_builder(&self, info: ConnectionInfo) -> PeerBuilder {
        let mut extensions = Extensions::new();
        extensions.insert(info);
        self.peer_builder_with(extensions)
    }

    /// A peer builder with this server's settings and the given connection
    /// extensions.
    pub(crate) fn peer_builder_with(&self, extensions: Extensions) -> PeerBuilder {
        self.peer_builder_for(self.router.clone(), extensions)
    }

    /// As [`peer_builder_with`](Self::peer_builder_with), serving `router`.
    pub(crate) fn peer_builder_for(&self, router: Router, extensions: Extensions) -> PeerBuilder {
        let builder = Peer::builder()
            .extensions(extensions)
            .router(router)
            .call_timeout(self.call_timeout)
            .max_in_flight(self.max_in_flight)
            .ordered(self.ordered);
        match &self.cancel {
            Some(protocol) => builder.cancellation(protocol.clone()),
            None => builder,
        }
    }

    /// Serves stdin/stdout until stdin ends and every reply is written;
    /// returns why the connection closed.
    pub async fn serve_stdio(&self) -> Arc<str> {
        let _counted = self.count_connection("stdio");
        let builder = self.peer_builder(super::stdio::info());
        let peer = builder.start(tokio::io::stdin(), tokio::io::stdout(), self.framing);
        peer.closed().await
    }

    /// Listens on a TCP address (port 0 picks a free port) and serves every
    /// connection until shut down.
    pub async fn bind_tcp(&self, addr: impl tokio::net::ToSocketAddrs) -> io::Result<Serving> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        Ok(self.serve_on(listener, "tcp"))
    }

    /// Listens on a Unix domain socket at `path` and serves every connection
    /// until shut down. A stale socket file (one nobody listens on) is
    /// replaced; the file is removed again on shutdown.
    #[cfg(unix)]
    pub async fn bind_unix(&self, path: impl AsRef<std::path::Path>) -> io::Result<Serving> {
        let path = path.as_ref();
        let listener = match tokio::net::UnixListener::bind(path) {
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                use std::os::unix::fs::FileTypeExt;
                let is_socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
                if !is_socket {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("{} exists and is not a socket", path.display()),
                    ));
                }
                if tokio::net::UnixStream::connect(path).await.is_ok() {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("{} is in use by a live server", path.display()),
                    ));
                }
                std::fs::remove_file(path)?;
                tokio::net::UnixListener::bind(path)?
            }
            other => other?,
        };
        let mut serving = self.serve_on(listener, "unix");
        serving.cleanup = Some(path.to_owned());
        Ok(serving)
    }

    fn serve_on<L: Listen>(&self, listener: L, scheme: &'static str) -> Serving {
        let server = self.clone();
        Serving::start(
            listener,
            scheme,
            self.max_connections,
            move |conn, info, shutdown| {
                let counted = server.count_connection(info.transport);
                let (read, write) = tokio::io::split(conn);
                let peer = server.peer_builder(info).start(read, write, server.framing);
                let server = server.clone();
                async move {
                    let _counted = counted;
                    tokio::select! {
                        reason = peer.closed() => tracing::debug!(%reason, "connection closed"),
                        () = shutdown.cancelled() => server.close_peer(&peer).await,
                    }
                }
            },
        )
    }
}

/// Accepts connections until `shutdown`, at most `max_connections` open at
/// once, each served by `serve` on its own task; then waits for them all.
async fn accept_loop<L, F, Fut>(listener: L, max_connections: usize, shutdown: CancellationToken, serve: F)
where
    L: Listen,
    F: Fn(L::Conn, ConnectionInfo, CancellationToken) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(max_connections.max(1)));
    let connections = TaskTracker::new();
    loop {
        let permit = tokio::select! {
            () = shutdown.cancelled() => break,
            permit = Arc::clone(&slots).acquire_owned() => permit.expect("the semaphore is never closed"),
        };
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept_conn() => accepted,
        };
        let (conn, info) = match accepted {
            Ok(conn) => conn,
            Err(e) => {
                // Out of file descriptors and the like: wait, do not spin.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        tracing::debug!(peer = ?info.peer_addr, "connection accepted");
        let serving = serve(conn, info, shutdown.clone());
        connections.spawn(async move {
            let _slot = permit;
            serving.await;
        });
    }
    // Refuse new connections at once while the open ones finish.
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// A running listener: its address, and the way to shut it down.
#[derive(Debug)]
#[must_use = "a server stops (gracefully) when its `Serving` is dropped"]
pub struct Serving {
    local_addr: String,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
    cleanup: Option<std::path::PathBuf>,
    /// Work that outlives its connection's accept-loop task (WebSocket
    /// peers), waited for on shutdown too.
    also: Option<(TaskTracker, CancellationToken)>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some((_, token)) = &self.also {
            token.cancel();
        }
        if let Some(path) = self.cleanup.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Serving {
    /// Starts the accept loop for `listener`.
    pub(crate) fn start<L, F, Fut>(
        listener: L,
        scheme: &'static str,
        max_connections: usize,
        serve: F,
    ) -> Serving
    where
        L: Listen,
        F: Fn(L::Conn, ConnectionInfo, CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let shutdown = CancellationToken::new();
        let local_addr = match scheme {
            "unix" => format!("unix:{}", listener.address()),
            _ => format!("{scheme}://{}", listener.address()),
        };
        let task = tokio::spawn(accept_loop(listener, max_connections, shutdown.clone(), serve));
        Serving {
            local_addr,
            shutdown,
            task,
            cleanup: None,
            also: None,
        }
    }

    /// Makes shutdown also stop `token` and wait for `tasks`.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn also_wait_for(&mut self, tasks: TaskTracker, token: CancellationToken) {
        self.also = Some((tasks, token));
    }

    /// Where it listens, as a target `jrpc call` understands:
    /// `tcp://127.0.0.1:4000` or `unix:/path/to/socket`.
    pub fn local_addr(&self) -> &str {
        &self.local_addr
    }

    /// Shuts down gracefully: stops accepting, stops reading new requests on
    /// every connection, lets the requests already read finish and their
    /// replies be written, then closes the connections. Returns when all of
    /// that is done.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        self.wait().await;
    }

    /// Waits until the server has shut down (after [`shutdown`](Self::shutdown)
    /// from another handle, or a panic in the accept loop).
    pub async fn wait(mut self) {
        if let Err(e) = (&mut self.task).await {
            tracing::error!(error = %e, "accept loop failed");
        }
        if let Some((tasks, token)) = self.also.take() {
            token.cancel();
            tasks.close();
            tasks.wait().await;
        }
        if let Some(path) = self.cleanup.take() {
            let _ = std::fs::remove_file(path);
        }
    }

    /// A token that shuts the server down when cancelled, for use from
    /// elsewhere (a signal handler, say).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }
}
