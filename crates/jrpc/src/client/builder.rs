//! [`ClientBuilder`]: a client's settings, and the ways to connect one.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};

use super::auto_batch::AutoBatch;
use super::calling::Calling;
use super::channel::Channel;
use super::handle::Client;
#[cfg(feature = "http-client")]
use super::http::HttpClient;
use super::pool;
use super::reconnect::{self, Reconnect, Reconnecting};
use super::retry::{Retry, RetryPolicy};
use serde_json::value::RawValue;

use crate::caller::{erase_layer, BoxOutgoingService, Outgoing};
use crate::codec::Framing;
use crate::peer::{CallError, CancelProtocol, ConnectionConfig, PeerBuilder};
use crate::transport::child::StderrMode;
#[cfg(feature = "http-client")]
use crate::transport::dial::Scheme;
use crate::transport::dial::{dialer, DialOptions};
#[cfg(feature = "http-client")]
use crate::transport::ws::WsOptions;
use crate::transport::Dialer;
use crate::Router;

/// Settings for a [`Client`], and the ways to connect one.
#[derive(Default)]
pub struct ClientBuilder {
    peer: PeerBuilder,
    calling: Calling,
    stderr: StderrMode,
    /// Dial again, with backoff, when the connection drops.
    reconnect: Option<Reconnect>,
    /// Connections to a stream or WebSocket target (0: one, unpooled); at
    /// most this many HTTP connections.
    pool: usize,
    #[cfg(feature = "http-client")]
    http: HttpSettings,
}

#[cfg(feature = "http-client")]
#[derive(Default)]
struct HttpSettings {
    headers: ::http::HeaderMap,
    http2: bool,
    no_gzip: bool,
    compress_requests: bool,
    retry: Retry,
    tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
    ws: WsOptions,
    /// The first header [`ClientBuilder::header`] could not take: connecting
    /// fails with it.
    bad_header: Option<String>,
}

#[cfg(feature = "http-client")]
impl HttpSettings {
    /// Fails when a header given was not valid.
    fn check(&self) -> io::Result<()> {
        match &self.bad_header {
            Some(why) => Err(io::Error::new(io::ErrorKind::InvalidInput, why.clone())),
            None => Ok(()),
        }
    }
}

impl ClientBuilder {
    /// Wraps every call and notification this client makes (explicit
    /// [`batch`](Client::batch)es go out past it) in a layer, on every
    /// transport: see [`caller`](crate::caller). The layer added last runs
    /// first. Layers wrap the client as a whole, above its connections: one
    /// layer serves every connection a reconnecting or pooled client makes.
    /// Calls made straight on [`Client::peer`] go past them.
    pub fn layer<L>(mut self, layer: L) -> Self
    where
        L: tower::Layer<BoxOutgoingService> + Send + Sync + 'static,
        L::Service: tower::Service<Outgoing, Response = Box<RawValue>> + Clone + Send + Sync + 'static,
        <L::Service as tower::Service<Outgoing>>::Error: Into<crate::middleware::BoxError>,
        <L::Service as tower::Service<Outgoing>>::Future: Send + 'static,
    {
        self.calling.layers.push(erase_layer(layer));
        self
    }

    /// Gathers calls and notifications made close together into batch
    /// frames, on every transport: within the [linger
    /// window](AutoBatch::linger), up to [`AutoBatch::new`]'s count and
    /// [`AutoBatch::max_bytes`]. Each caller still gets its own result
    /// (and its own timeout). Below the [layers](Self::layer): a cache or
    /// a retry sees each call on its own. Off by default.
    ///
    /// ```no_run
    /// use jrpc::client::{AutoBatch, Client};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = Client::builder()
    ///     .auto_batch(AutoBatch::new(32))
    ///     .connect("http://127.0.0.1:4000")
    ///     .await?;
    /// // Made at once: one HTTP request carries all three.
    /// let (a, b, c) = tokio::join!(
    ///     client.call::<i64>("add", (1, 2)),
    ///     client.call::<i64>("add", (3, 4)),
    ///     client.call::<i64>("subtract", (42, 23)),
    /// );
    /// assert_eq!((a?, b?, c?), (3, 7, 19));
    /// # Ok(()) }
    /// ```
    pub fn auto_batch(mut self, settings: AutoBatch) -> Self {
        self.calling.auto_batch = Some(settings);
        self
    }

    /// How the connection behaves (framing, timeouts, cancellation,
    /// bounds), all at once.
    pub fn connection(mut self, config: ConnectionConfig) -> Self {
        self.peer = self.peer.connection(config);
        self
    }

    /// The framing on byte streams (default newline-delimited JSON).
    pub fn framing(mut self, framing: Framing) -> Self {
        let config = self.peer.connection_config().clone().framing(framing);
        self.peer = self.peer.connection(config);
        self
    }

    /// The timeout of calls that do not set their own (default 30 s).
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.peer = self.peer.call_timeout(timeout);
        self
    }

    fn framing_now(&self) -> Framing {
        self.peer.connection_config().framing
    }

    /// The largest frame this client accepts (its router's limit).
    fn max_frame_len(&self) -> usize {
        self.peer.router_limits().max_frame_len
    }

    /// Dial again when the connection drops, with the backoff of
    /// `settings` (a [`Retry`], or a [`Reconnect`] that also says whether
    /// calls wait and what runs on each new connection): on TCP, Unix
    /// sockets, WebSocket and any [`Dialer`]. Calls in flight when the
    /// connection drops fail (they may or may not have run; a
    /// [`retry`](Self::retry) policy decides whether they go again); calls
    /// made meanwhile wait for the new connection within their timeout, or
    /// fail at once with [`Reconnect::fail_fast`]. Off by default.
    pub fn reconnect(mut self, settings: impl Into<Reconnect>) -> Self {
        self.reconnect = Some(settings.into());
        self
    }

    /// Keeps `connections` connections to a TCP, Unix socket or WebSocket
    /// target, each call going on the least loaded live one (the fewest
    /// calls in flight); one that drops is replaced in the background with
    /// the [`reconnect`](Self::reconnect) backoff (by default forever, 100
    /// ms up to 5 s apart) and its hook, while the others carry the calls.
    /// Over HTTP, at most `connections` connections (so requests) at once;
    /// more wait their turn within their timeout. Not for a spawned child,
    /// which has one pair of pipes.
    ///
    /// ```no_run
    /// use jrpc::client::Client;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = Client::builder().pool(8).connect("ws://127.0.0.1:4000").await?;
    /// let sum: i64 = client.call("add", (1, 2)).await?;
    /// # Ok(()) }
    /// ```
    pub fn pool(mut self, connections: usize) -> Self {
        self.pool = connections.max(1);
        self
    }

    /// Cancellation across the connection (off by default).
    pub fn cancellation(mut self, protocol: CancelProtocol) -> Self {
        self.peer = self.peer.cancellation(protocol);
        self
    }

    /// Methods the server may call on this client (none by default; not
    /// possible over plain HTTP, where only the client speaks first).
    pub fn router(mut self, router: Router) -> Self {
        self.peer = self.peer.router(router);
        self
    }

    /// What to do with a spawned child's stderr (default: inherit).
    pub fn stderr(mut self, mode: StderrMode) -> Self {
        self.stderr = mode;
        self
    }

    /// A header sent with every HTTP request and the WebSocket handshake
    /// (`Authorization`, say). A name or value that is not valid in HTTP
    /// makes connecting fail, saying which (as `reqwest` does); see
    /// [`try_header`](Self::try_header) to know at once.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let refused = jrpc::Client::builder()
    ///     .header("Authorization", "Bearer s3cret")
    ///     .header("X-Bad", "line\nbreak")
    ///     .connect("http://127.0.0.1:4000")
    ///     .await;
    /// assert!(refused.unwrap_err().to_string().contains("X-Bad"));
    /// # });
    /// ```
    #[cfg(feature = "http-client")]
    pub fn header(mut self, name: &str, value: &str) -> Self {
        if let Err(e) = self.add_header(name, value) {
            self.http
                .bad_header
                .get_or_insert_with(|| format!("invalid header {name:?}: {e}"));
        }
        self
    }

    /// [`header`](Self::header), failing at once when the name or value
    /// is not valid in HTTP.
    #[cfg(feature = "http-client")]
    pub fn try_header(mut self, name: &str, value: &str) -> Result<Self, ::http::Error> {
        self.add_header(name, value)?;
        Ok(self)
    }

    #[cfg(feature = "http-client")]
    fn add_header(&mut self, name: &str, value: &str) -> Result<(), ::http::Error> {
        let name = ::http::HeaderName::from_bytes(name.as_bytes()).map_err(::http::Error::from)?;
        let value = ::http::HeaderValue::from_str(value).map_err(::http::Error::from)?;
        self.http.headers.append(name, value);
        Ok(())
    }

    /// Use HTTP/2 (h2c on `http://`, offered by ALPN on `https://`).
    #[cfg(feature = "http-client")]
    pub fn http2(mut self, on: bool) -> Self {
        self.http.http2 = on;
        self
    }

    /// Accept gzip-compressed replies (on by default).
    #[cfg(feature = "http-client")]
    pub fn gzip(mut self, on: bool) -> Self {
        self.http.no_gzip = !on;
        self
    }

    /// gzip request bodies of 1 KiB or more (off by default: HTTP cannot
    /// ask first whether the server accepts compressed requests).
    #[cfg(feature = "http-client")]
    pub fn compress_requests(mut self, on: bool) -> Self {
        self.http.compress_requests = on;
        self
    }

    /// Tries failed calls again, on every transport, as `policy` says
    /// (off by default): calls that never left and refusals (`429`, `503`,
    /// `-32005`, `-32007`) always; calls that may have run only for
    /// methods the policy marks idempotent. A plain [`Retry`] is a policy
    /// of its own. It applies below the client's [layers](Self::layer) (a
    /// cache answers before it), above [automatic
    /// batching](Self::auto_batch) (each call is tried again on its own);
    /// with [`reconnect`](Self::reconnect) an attempt may go on a new
    /// connection, and the first connection is dialed again too. Explicit
    /// HTTP [batches](Client::batch) are retried whole, when they never
    /// left or were refused.
    pub fn retry(mut self, policy: impl Into<RetryPolicy>) -> Self {
        let policy = policy.into();
        #[cfg(feature = "http-client")]
        {
            self.http.retry = policy.schedule();
        }
        self.calling.retry = Some(policy);
        self
    }

    /// TLS settings for `https://` and `wss://` (default: the system's
    /// trusted roots). See [`crate::transport::tls::client_config`].
    #[cfg(feature = "http-client")]
    pub fn tls(mut self, config: Arc<tokio_rustls::rustls::ClientConfig>) -> Self {
        self.http.tls = Some(config);
        self
    }

    /// Trust the certificates in this PEM file (a private CA or a
    /// self-signed server) instead of the system's roots.
    #[cfg(feature = "http-client")]
    pub fn ca_pem(mut self, path: impl AsRef<std::path::Path>) -> io::Result<Self> {
        let certs = crate::transport::tls::load_certs(path)?;
        let alpn: &[&[u8]] = if self.http.http2 {
            &[b"h2", b"http/1.1"]
        } else {
            &[b"http/1.1"]
        };
        self.http.tls = Some(crate::transport::tls::client_config(certs, alpn)?);
        Ok(self)
    }

    /// WebSocket settings (message size, pings, idle limit).
    #[cfg(feature = "http-client")]
    pub fn websocket(mut self, options: WsOptions) -> Self {
        self.http.ws = options;
        self
    }

    /// Connects to a URL: `tcp://HOST:PORT`, `udp://HOST:PORT`, `unix:PATH`,
    /// `http(s)://…` or `ws(s)://…`; with the broker features,
    /// `nats://HOST:PORT/SUBJECT`, `mqtt://HOST:PORT/TOPIC` (the whole path
    /// is the topic) or `amqp://HOST:PORT/VHOST?queue=NAME` (the vhost
    /// percent-decoded: `%2f` is `/`).
    pub async fn connect(self, url: &str) -> io::Result<Client> {
        #[cfg(feature = "http-client")]
        if Scheme::of(url) == Some(Scheme::Http) {
            return self.connect_http(url);
        }
        self.connect_dialed(url).await
    }

    /// What the dialers of [`transport::dial`](crate::transport::dial) are
    /// built with: this client's framing and frame limit, and its
    /// WebSocket headers, settings and TLS.
    fn dial_options(&self) -> io::Result<DialOptions> {
        #[cfg(feature = "http-client")]
        self.http.check()?;
        let options = DialOptions::default()
            .framing(self.framing_now())
            .max_frame_len(self.max_frame_len());
        #[cfg(feature = "http-client")]
        let options = {
            let options = options.headers(self.http.headers.clone()).websocket(self.http.ws);
            match self.http.tls.clone() {
                Some(tls) => options.tls(tls),
                None => options,
            }
        };
        Ok(options)
    }

    /// Connects through the dialer `url` names (any scheme but HTTP's).
    async fn connect_dialed(self, url: &str) -> io::Result<Client> {
        let dialer = dialer(url, &self.dial_options()?)?;
        self.connect_with(dialer).await
    }

    /// Connects over TCP to `addr` (`host:port`).
    pub async fn connect_tcp(self, addr: impl ToString) -> io::Result<Client> {
        self.connect_dialed(&format!("tcp://{}", addr.to_string())).await
    }

    /// Talks to a UDP server at `addr` (`host:port`): one frame per
    /// datagram, from a socket on a free local port. Nothing is
    /// retransmitted, so a lost datagram is a call that times out; frames
    /// over 65 507 bytes cannot be sent.
    pub async fn connect_udp(self, addr: impl ToString) -> io::Result<Client> {
        self.connect_dialed(&format!("udp://{}", addr.to_string())).await
    }

    /// Connects to a Unix domain socket.
    #[cfg(unix)]
    pub async fn connect_unix(self, path: impl AsRef<std::path::Path>) -> io::Result<Client> {
        let dialer =
            crate::transport::unix::UnixDialer::new(path.as_ref(), self.framing_now(), self.max_frame_len());
        self.connect_with(dialer).await
    }

    /// Connects a WebSocket (`ws://` or `wss://`): a full peer, so the
    /// server can also call this client.
    #[cfg(feature = "http-client")]
    pub async fn connect_ws(self, url: &str) -> io::Result<Client> {
        if Scheme::of(url) != Some(Scheme::WebSocket) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{url}: expected ws:// or wss://"),
            ));
        }
        self.connect_dialed(url).await
    }

    /// Runs the client over a connection that is open already (made by a
    /// transport of your own, accepted by a listener, an in-memory pipe).
    /// It cannot be dialed again, so reconnecting and pooling do not apply;
    /// everything else does (layers, retries of calls, the cache).
    /// Must be called within a tokio runtime.
    ///
    /// ```
    /// use jrpc::client::Client;
    /// use jrpc::codec::Framing;
    /// use jrpc::transport::{Connection, ConnectionInfo};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let (a, b) = tokio::io::duplex(64 * 1024);
    /// let router = jrpc::Router::new().sync_method("ping", || Ok("pong"));
    /// let (read, write) = tokio::io::split(a);
    /// let _server = jrpc::Peer::builder().router(router).start(read, write, Framing::Ndjson);
    /// let (read, write) = tokio::io::split(b);
    /// let info = ConnectionInfo { transport: "pipe", peer_addr: None, local_addr: None };
    /// let connection = Connection::over_io(read, write, Framing::Ndjson, 1 << 20, info);
    /// let client = Client::builder().over_connection(connection);
    /// let pong: String = client.call("ping", ()).await.unwrap();
    /// assert_eq!(pong, "pong");
    /// # });
    /// ```
    pub fn over_connection(mut self, connection: crate::transport::Connection) -> Client {
        let calling = std::mem::take(&mut self.calling);
        Client::owning(self.peer.connect(connection), None, None, calling)
    }

    /// Connects through any [`Dialer`]: a transport of your own, or one of
    /// the built-in ones. With [`reconnect`](Self::reconnect), the client
    /// dials again whenever the connection drops.
    pub async fn connect_with(mut self, dialer: impl Dialer) -> io::Result<Client> {
        let calling = std::mem::take(&mut self.calling);
        let pooled = self.pool > 1;
        let explicit = self.reconnect.is_some();
        let settings = match self.reconnect.take() {
            Some(settings) => settings,
            None if pooled => Reconnect::new(pool::default_schedule()),
            None => {
                // One plain connection: dialed again only as the retry
                // policy says (a connection never made sent nothing).
                let connection = dial(&dialer, calling.retry.as_ref().map(RetryPolicy::schedule)).await?;
                return Ok(Client::owning(self.peer.connect(connection), None, None, calling));
            }
        };
        let connector = reconnect::Connector::new(Box::new(dialer), self.peer.settings_clone(), settings);
        let failed = |e: CallError| io::Error::other(format!("cannot connect: {e}"));
        // With reconnect settings the first connection follows them (a hook
        // that fails counts as a failed attempt); a pool without them makes
        // its first as a plain client would.
        let first = if explicit {
            connector.connect(&|| true).await.map_err(failed)?
        } else {
            let schedule = calling
                .retry
                .as_ref()
                .map(RetryPolicy::schedule)
                .unwrap_or(Retry::NEVER);
            let attempt = || connector.attempt();
            schedule
                .run("connecting", attempt, |_| false)
                .await
                .map_err(failed)?
        };
        let inner = if pooled {
            Channel::Pool(
                pool::Pool::start(connector, first, self.pool)
                    .await
                    .map_err(failed)?,
            )
        } else {
            Channel::Reconnecting(Reconnecting::start(connector, first))
        };
        Ok(Client::assemble(inner, None, calling))
    }

    /// An HTTP client for `url` (`http://` or `https://`). No connection is
    /// made until the first call; connections are pooled and kept alive.
    #[cfg(feature = "http-client")]
    pub fn connect_http(mut self, url: &str) -> io::Result<Client> {
        // The client's layers wrap it whole, not the HTTP client inside.
        let calling = std::mem::take(&mut self.calling);
        Ok(Client::assemble(Channel::Http(self.http(url)?), None, calling))
    }

    /// The HTTP client for `url` (`http://` or `https://`) on its own,
    /// without the [`Client`] around it: with this builder's layers, but
    /// not its automatic batching.
    #[cfg(feature = "http-client")]
    pub fn http(self, url: &str) -> io::Result<HttpClient> {
        self.http.check()?;
        let options = super::http::HttpOptions {
            headers: self.http.headers,
            http2: self.http.http2,
            gzip: !self.http.no_gzip,
            compress_requests: self.http.compress_requests,
            timeout: self.peer.connection_config().call_timeout,
            retry: self.http.retry,
            tls: self.http.tls,
            max_connections: (self.pool > 0).then_some(self.pool),
        };
        let transport = Arc::new(super::http::HttpTransport::new(url, options)?);
        Ok(HttpClient::new(transport, &self.calling.stack_layers()))
    }

    /// Spawns `command` and talks to it over its stdin and stdout. The child
    /// is killed when the client is dropped; if it dies first, pending calls
    /// fail at once with its exit status.
    pub fn spawn(mut self, command: impl Into<tokio::process::Command>) -> io::Result<Client> {
        let calling = std::mem::take(&mut self.calling);
        let spawned = crate::transport::child::spawn(command.into(), self.stderr)?;
        let (framing, max_frame_len) = (self.framing_now(), self.max_frame_len());
        let (connection, rest) = spawned.connection(framing, max_frame_len);
        let peer = self.peer.connect(connection);
        let mut client = Client::owning(peer.clone(), Some(rest.monitor), rest.stderr, calling);
        if let Some(owner) = client.owner.as_mut().and_then(Arc::get_mut) {
            owner.pid = rest.pid;
            owner.child_exit = Some(rest.exit);
        }
        // The child may die while something else (a grandchild) keeps its
        // stdout open, so the stream never ends: fail the calls anyway.
        let exited = rest.exited;
        tokio::spawn(async move {
            if let Some(reason) = exited.await {
                tokio::time::sleep(Duration::from_millis(500)).await;
                if !peer.is_closed() {
                    peer.fail_calls(&reason);
                }
            }
        });
        Ok(client)
    }

    /// Runs the client over any reader/writer pair.
    pub fn over<R, W>(mut self, reader: R, writer: W) -> Client
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let calling = std::mem::take(&mut self.calling);
        let framing = self.framing_now();
        Client::owning(self.peer.start(reader, writer, framing), None, None, calling)
    }
}

impl Client {
    /// Settings for a new client.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// Connects to a URL with default settings; see [`ClientBuilder::connect`].
    pub async fn connect(url: &str) -> io::Result<Client> {
        Client::builder().connect(url).await
    }
}

/// Dials, trying again on `retry`'s schedule when the connection cannot be
/// made (nothing was sent, so it is always safe).
async fn dial(dialer: &impl Dialer, retry: Option<Retry>) -> io::Result<crate::transport::Connection> {
    // A malformed address will not improve.
    let malformed = |e: &io::Error| e.kind() == io::ErrorKind::InvalidInput;
    retry
        .unwrap_or(Retry::NEVER)
        .run("connecting", || dialer.dial(), malformed)
        .await
}
