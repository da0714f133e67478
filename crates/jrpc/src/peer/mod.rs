//! One live connection that carries both roles at once: it serves incoming
//! requests with a [`Router`] and makes outgoing calls, matching responses
//! to calls by id.
//!
//! ```
//! use jrpc::codec::Framing;
//! use jrpc::peer::Peer;
//! use jrpc::Router;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! // Two peers joined by an in-memory pipe: one serves `add`, the other calls it.
//! let (a, b) = tokio::io::duplex(64 * 1024);
//! let (a_read, a_write) = tokio::io::split(a);
//! let (b_read, b_write) = tokio::io::split(b);
//! let router = Router::new().method("add", |(x, y): (i64, i64)| async move { Ok(x + y) });
//! let _server = Peer::builder().router(router).start(a_read, a_write, Framing::Ndjson);
//! let client = Peer::builder().start(b_read, b_write, Framing::Ndjson);
//! let sum: i64 = client.call("add", (2, 3)).await.unwrap();
//! assert_eq!(sum, 5);
//! # });
//! ```

mod calls;
mod config;
mod reader;
mod state;
mod writer;

use std::fmt;
use std::io;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Sink, Stream};
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::caller::{build_stack, erase_layer, BoxOutgoingService, Outgoing, OutgoingLayerFn};
pub use crate::caller::{Batch, BatchCall, CallError, Caller};
pub use crate::dispatch::CancelProtocol;
pub use config::ConnectionConfig;
use state::PeerState;

use crate::codec::{Framing, Inbound};
pub use crate::context::ConnectionInfo;
use crate::context::{Extensions, RequestContext};
use crate::dispatch::connection::{Bounds, ConnectionContext};
use crate::dispatch::{outbox, Cancellation, ServedCall};
use crate::message::Id;
use crate::middleware::Call;
use crate::transport::connection::BytesOnly;
use crate::transport::{CloseReason, Connection, OutFrame};
use crate::Router;

/// A weak link from a connection's extensions back to its peer, so that a
/// handler can call the other side without keeping the connection alive.
#[derive(Clone)]
struct PeerLink(Weak<PeerState>);

impl RequestContext {
    /// A handle to the connection this request came in on, to call or
    /// notify the other side (a server calling its client, say). `None`
    /// outside a peer (e.g. [`Router::handle`]) or once it has closed.
    pub fn peer(&self) -> Option<Peer> {
        let shared = self.get::<PeerLink>()?.0.upgrade()?;
        Some(Peer { shared })
    }
}

/// What runs with a peer once it is started (see [`PeerBuilder::on_start`]).
type StartHook = Box<dyn FnOnce(&Peer) + Send>;

/// Settings for a [`Peer`]; [`connect`](Self::connect) (or `start` over a
/// byte stream) runs it.
#[derive(Default)]
pub struct PeerBuilder {
    router: Router,
    config: ConnectionConfig,
    extensions: Extensions,
    close_reason: Option<CloseReason>,
    /// What lives as long as the connection.
    resources: Vec<Box<dyn std::any::Any + Send>>,
    /// Middleware for outgoing calls, innermost first.
    outgoing: Vec<OutgoingLayerFn>,
    /// The idle limit a server puts on its network connections.
    idle: Option<Duration>,
    /// Whether `config.write_timeout` applies (see `write_limit`).
    write_limit: bool,
    /// Called with the peer once it runs.
    on_start: Option<StartHook>,
}

impl PeerBuilder {
    /// The methods this side serves (none by default: every incoming
    /// request is answered `-32601`). The router's limits bound incoming
    /// frames.
    pub fn router(mut self, router: Router) -> Self {
        self.router = router;
        self
    }

    /// How the connection behaves (framing, cancellation, bounds,
    /// timeouts), all at once: the same setting, under the same name, as
    /// `Server::connection` and `ClientBuilder::connection`.
    pub fn connection(mut self, config: ConnectionConfig) -> Self {
        self.config = config;
        self
    }

    /// The timeout of outgoing calls that do not set their own (default 30
    /// s); see [`ConnectionConfig::call_timeout`].
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.config = self.config.call_timeout(timeout);
        self
    }

    /// Cancellation across the connection (off by default): see
    /// [`CancelProtocol::mcp`] and [`CancelProtocol::lsp`].
    pub fn cancellation(mut self, protocol: CancelProtocol) -> Self {
        self.config = self.config.cancellation(protocol);
        self
    }

    /// How many incoming requests with async handlers run at once (default
    /// 128); see [`ConnectionConfig::max_in_flight`]. The reader never
    /// stops, so responses to this side's own calls always get through.
    /// Requests served inline by plain handlers are not counted.
    pub fn max_in_flight(mut self, requests: usize) -> Self {
        self.config = self.config.max_in_flight(requests);
        self
    }

    /// Requests wait for the notifications that arrived before them; see
    /// [`ConnectionConfig::ordered`].
    pub fn ordered(mut self, on: bool) -> Self {
        self.config = self.config.ordered(on);
        self
    }

    /// A builder with the same settings (router, configuration, outgoing
    /// layers) and nothing recorded about a connection, for a reconnection.
    pub(crate) fn settings_clone(&self) -> PeerBuilder {
        PeerBuilder {
            router: self.router.clone(),
            config: self.config.clone(),
            outgoing: self.outgoing.clone(),
            ..PeerBuilder::default()
        }
    }

    /// Closes the connection once idle this long (servers' network
    /// connections).
    pub(crate) fn idle_limit(mut self, limit: Option<Duration>) -> Self {
        self.idle = limit;
        self
    }

    /// Closes the connection once a write has waited the configured
    /// `write_timeout` for the peer (servers' network connections: stdio,
    /// child processes and clients wait as long as it takes).
    pub(crate) fn write_limit(mut self) -> Self {
        self.write_limit = true;
        self
    }

    pub(crate) fn connection_config(&self) -> &ConnectionConfig {
        &self.config
    }

    pub(crate) fn router_limits(&self) -> &crate::message::Limits {
        self.router.parse_limits()
    }

    /// Wraps every call and notification this side makes (with `call`,
    /// `call_raw` and `notify`; batches go out past it) in a layer: see
    /// [`caller`](crate::caller). The layer added last runs first.
    pub fn layer<L>(mut self, layer: L) -> Self
    where
        L: tower::Layer<BoxOutgoingService> + Send + Sync + 'static,
        L::Service: tower::Service<Outgoing, Response = Box<RawValue>> + Clone + Send + Sync + 'static,
        <L::Service as tower::Service<Outgoing>>::Error: Into<crate::middleware::BoxError>,
        <L::Service as tower::Service<Outgoing>>::Future: Send + 'static,
    {
        self.outgoing.push(erase_layer(layer));
        self
    }

    /// Runs `hook` with the peer as soon as it is started (its tasks may
    /// be reading already): to keep a handle (a registry of connected
    /// clients), or to start a task that sends to the other side. With
    /// [`Server::serve_with`](crate::server::Server::serve_with), the way to
    /// get each served connection's peer.
    pub fn on_start(mut self, hook: impl FnOnce(&Peer) + Send + 'static) -> Self {
        self.on_start = Some(Box::new(hook));
        self
    }

    /// Replaces everything recorded about the connection.
    pub fn extensions(mut self, extensions: Extensions) -> Self {
        self.extensions = extensions;
        self
    }

    /// Records a value about the connection for handlers to read through
    /// [`RequestContext::get`].
    pub fn extension<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.extensions.insert(value);
        self
    }

    /// Runs the peer over a connection a transport made (see
    /// [`Listener`](crate::transport::Listener) and
    /// [`Dialer`](crate::transport::Dialer)); its [`ConnectionInfo`] is
    /// recorded for handlers. Must be called within a tokio runtime.
    pub fn connect(mut self, connection: Connection) -> Peer {
        let Connection {
            incoming,
            outgoing,
            info,
            close_reason,
            resources,
            kinds,
        } = connection;
        self.extensions.insert(info);
        self.close_reason = close_reason;
        self.resources = resources;
        self.start_kinded(incoming, outgoing, kinds)
    }

    /// Runs the peer over a byte stream with the given framing. Must be
    /// called within a tokio runtime; the connection's tasks run until it
    /// closes.
    pub fn start<R, W>(self, reader: R, writer: W, framing: Framing) -> Peer
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let codec = framing.codec(self.router.parse_limits().max_frame_len);
        self.start_kinded(
            FramedRead::new(reader, codec.clone()),
            FramedWrite::new(writer, codec),
            false,
        )
    }

    /// Runs the peer over any stream of incoming frames and sink of outgoing
    /// ones (a WebSocket, say).
    pub fn start_framed<S, K>(self, frames_in: S, frames_out: K) -> Peer
    where
        S: Stream<Item = io::Result<Inbound>> + Send + Unpin + 'static,
        K: Sink<Bytes, Error = io::Error> + Send + Unpin + 'static,
    {
        self.start_kinded(frames_in, BytesOnly::new(frames_out), false)
    }

    /// [`start_framed`](Self::start_framed), with a sink told what each
    /// frame carries (when it reads the kinds: `kinds`).
    pub(crate) fn start_kinded<S, K>(self, frames_in: S, frames_out: K, kinds: bool) -> Peer
    where
        S: Stream<Item = io::Result<Inbound>> + Send + Unpin + 'static,
        K: Sink<OutFrame, Error = io::Error> + Send + Unpin + 'static,
    {
        let PeerBuilder {
            router,
            config,
            mut extensions,
            close_reason,
            resources,
            outgoing,
            idle,
            write_limit,
            on_start,
        } = self;
        let (outbox, outbox_rx) = outbox::outbox(config.max_outgoing_bytes);
        let shared = Arc::new_cyclic(|weak: &Weak<PeerState>| {
            // Handlers reach this connection through its facts.
            extensions.insert(PeerLink(weak.clone()));
            let dispatch = Arc::new(ConnectionContext {
                router,
                connection: Arc::new(extensions),
                outbox: outbox.clone(),
                cancellation: config.cancel.clone().map(Cancellation::new),
                kinds,
            });
            let stack = (!outgoing.is_empty()).then(|| {
                let weak = weak.clone();
                let innermost = tower::service_fn(move |call: Outgoing| {
                    let shared = weak.upgrade();
                    async move {
                        match shared {
                            Some(shared) => Peer { shared }.send_outgoing(call).await,
                            None => Err(CallError::Closed("connection closed".into())),
                        }
                    }
                });
                build_stack(BoxOutgoingService::new(innermost), &outgoing)
            });
            PeerState::new(dispatch, config.call_timeout, stack)
        });
        let dispatch = Arc::clone(&shared.dispatch);
        let bounds = Bounds {
            running: config.max_in_flight,
            queued: config.max_in_flight.saturating_mul(8),
            ordered: config.ordered,
            ordered_responses: config.ordered_responses,
        };
        let limits = reader::Limits {
            idle,
            write_timeout: config.write_timeout.filter(|_| write_limit),
        };
        reader::start(
            Arc::clone(&shared),
            dispatch,
            frames_in,
            frames_out,
            outbox_rx,
            bounds,
            limits,
            close_reason,
            resources,
        );
        let peer = Peer { shared };
        if let Some(hook) = on_start {
            hook(&peer);
        }
        peer
    }
}

/// A handle to one live connection: call and notify the other side, close
/// the connection, or wait for it to close. Cheap to clone.
///
/// The connection runs on its own tasks; dropping every handle does not
/// close it (a served connection lives until the other side hangs up or
/// [`close`](Self::close) is called). A [`Client`](crate::client::Client)
/// closes its connection when dropped.
#[derive(Clone)]
pub struct Peer {
    pub(crate) shared: Arc<PeerState>,
}

impl fmt::Debug for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Peer").field("closed", &self.is_closed()).finish()
    }
}

/// Two handles are equal when they are to the same connection (a proxy
/// telling its clients apart, say).
impl PartialEq for Peer {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

impl Eq for Peer {}

impl Peer {
    /// The default timeout for outgoing calls: 30 seconds.
    pub const DEFAULT_CALL_TIMEOUT: Duration = ConnectionConfig::DEFAULT_CALL_TIMEOUT;
    /// The default bound on incoming requests running at once: 128.
    pub const DEFAULT_MAX_IN_FLIGHT: usize = ConnectionConfig::DEFAULT_MAX_IN_FLIGHT;

    /// Settings for a new peer.
    pub fn builder() -> PeerBuilder {
        PeerBuilder::default()
    }

    /// Closes the connection gracefully: stops reading, lets requests
    /// already read finish and their replies be written, then closes the
    /// write side. Pending outgoing calls fail with [`CallError::Closed`].
    pub fn close(&self) {
        self.shared.stop_reading.cancel();
    }

    /// Drops the connection at once: handlers still running are aborted,
    /// nothing more is written, pending calls fail. For when a graceful
    /// [`close`](Self::close) takes too long.
    pub fn abort(&self) {
        self.shared.stop_reading.cancel();
        self.shared.kill.cancel();
    }

    /// Fails every pending call now with `reason`, and refuses new ones,
    /// without waiting for the stream to end.
    pub(crate) fn fail_calls(&self, reason: &str) {
        self.shared.fail_calls(CallError::Closed(reason.into()));
    }

    /// Serves `call` as a message this connection received, but from the
    /// caller's own task, its reply given to the caller rather than
    /// written to the connection: for a transport that takes a session's
    /// messages apart from its connection (MCP's Streamable HTTP takes each
    /// in a POST of its own, and answers it in that POST's response).
    ///
    /// The call meets what the connection's own messages meet: its facts
    /// ([`RequestContext::get`]), the peer's router with its middleware,
    /// and its cancellation: the protocol's cancel notification
    /// ([`ConnectionConfig::cancellation`]), read from the connection or
    /// given here, stops a request still running, which then says the
    /// protocol's reply, or nothing (its [`ServedCall::next`] gives
    /// `None`). A cancel notification given here is applied, not routed.
    /// A request is registered for cancellation when it first waits (most
    /// answer at once, and never are): one cancelled before its served
    /// call is first polled is not found, as if the notification had come
    /// before the request. Once the connection is closing, a request is
    /// refused `-32007`.
    ///
    /// The call runs while its [`ServedCall`] is polled, on the caller's
    /// task; the connection closing does not stop it. The connection's
    /// bound on requests in flight and its ordering of requests after
    /// notifications are the caller's to keep: its reader does not see
    /// these calls.
    ///
    /// ```
    /// use jrpc::dispatch::{response_frame, Said};
    /// use jrpc::middleware::Call;
    /// use jrpc::peer::Peer;
    /// use jrpc::Router;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let router = Router::new().method("add", |(a, b): (i64, i64)| async move { Ok(a + b) });
    /// let (ours, _theirs) = tokio::io::duplex(1024);
    /// let (read, write) = tokio::io::split(ours);
    /// let peer = Peer::builder().router(router).start(read, write, jrpc::codec::Framing::Ndjson);
    /// let params = serde_json::value::to_raw_value(&[2, 3]).unwrap();
    /// let mut served = peer.serve_call(Call::request(7, "add", Some(params)));
    /// let Some(Said::Reply(outcome)) = served.next().await else { unreachable!() };
    /// assert_eq!(&response_frame(served.id(), &outcome)[..], br#"{"jsonrpc":"2.0","result":5,"id":7}"#);
    /// # });
    /// ```
    pub fn serve_call(&self, call: Call) -> ServedCall {
        let dispatch = &self.shared.dispatch;
        let cancellation = dispatch.cancellation.as_ref();
        if call.is_notification() {
            if let Some(cancellation) = cancellation.filter(|c| c.is_cancel(call.method())) {
                cancellation.cancel(call.params());
                return ServedCall::answered(Id::NULL, None);
            }
        } else if self.shared.stop_reading.is_cancelled() {
            let id = call.id().cloned().unwrap_or(Id::NULL);
            return ServedCall::answered(id, Some(Err(crate::dispatch::connection::closing())));
        }
        let call = call.with_connection(Arc::clone(&dispatch.connection));
        ServedCall::of_peer(&dispatch.router, call, cancellation)
    }

    /// Waits until the connection has fully closed; returns why.
    pub async fn closed(&self) -> Arc<str> {
        let mut rx = self.shared.closed_tx.subscribe();
        loop {
            if let Some(reason) = rx.borrow_and_update().clone() {
                return reason;
            }
            if rx.changed().await.is_err() {
                return "connection dropped".into();
            }
        }
    }

    /// Whether new calls are refused: the connection is closing or closed.
    pub(crate) fn is_refusing(&self) -> bool {
        self.shared.is_refusing()
    }

    /// Whether the connection has fully closed.
    pub fn is_closed(&self) -> bool {
        self.shared.closed_tx.borrow().is_some()
    }

    pub(crate) async fn send(&self, frame: OutFrame) -> Result<(), CallError> {
        self.shared
            .outbox()
            .send(frame)
            .await
            .map_err(|_| self.closed_error())
    }

    pub(super) fn closed_error(&self) -> CallError {
        self.shared.refusal()
    }
}
