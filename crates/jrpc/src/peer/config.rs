//! One connection configuration, shared by every builder that makes
//! connections: the peer builder, `Server`, `HttpServer` and the client
//! builder.

use std::time::Duration;

use super::CancelProtocol;
use crate::codec::Framing;

/// How every connection behaves, set in one place and handed to
/// [`PeerBuilder::connection`](super::PeerBuilder::connection),
/// [`Server::connection`](crate::server::Server::connection),
/// [`HttpServer::connection`](crate::server::http::HttpServer::connection)
/// (its WebSocket connections) or
/// [`ClientBuilder::connection`](crate::client::ClientBuilder::connection).
///
/// ```
/// use std::time::Duration;
/// use jrpc::codec::Framing;
/// use jrpc::peer::{CancelProtocol, ConnectionConfig};
///
/// let lsp = ConnectionConfig::default()
///     .framing(Framing::ContentLength)
///     .cancellation(CancelProtocol::lsp())
///     .ordered(true)
///     .call_timeout(Duration::from_secs(10));
/// let server = jrpc::server::Server::new(jrpc::Router::new()).connection(lsp);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConnectionConfig {
    /// How frames are delimited on byte streams (default newline-delimited
    /// JSON). Message transports (WebSocket) ignore it.
    pub framing: Framing,
    /// The timeout of outgoing calls that do not set their own (default 30 s).
    pub call_timeout: Duration,
    /// Cancellation across the connection (default none).
    pub cancel: Option<CancelProtocol>,
    /// Incoming requests with async handlers (or middleware) running at once
    /// (default 128); up to eight times as many may wait for a turn, and
    /// beyond that a request is refused with `-32007 Server busy`.
    pub max_in_flight: usize,
    /// Requests wait for the notifications that arrived before them
    /// (default off).
    pub ordered: bool,
    /// Responses to this side's calls wait for the notifications that
    /// arrived before them (default off).
    pub ordered_responses: bool,
    /// A server closes a connection that has been idle this long (default
    /// 60 s; `None`: never). On stream listeners (TCP, Unix sockets, one of
    /// your own) idle means nothing read and no call in flight either way,
    /// counted from the connect; over HTTP (1.1 and 2) it means no request
    /// begun or being answered. Stdio, child processes and clients are never
    /// closed for idleness, and WebSocket has its own ping and idle limits
    /// (`transport::ws::WsOptions`).
    pub idle_timeout: Option<Duration>,
    /// A server closes an HTTP, WebSocket or TLS connection whose first
    /// request has not arrived within this (default 10 s; `None`: never),
    /// so that silent connections cannot hold slots.
    pub first_request_timeout: Option<Duration>,
    /// What a connection holds for its peer and has not written yet —
    /// replies, notifications, this side's requests — at most (default
    /// 4 MiB). Past it the connection stops reading until the peer reads:
    /// a peer that sends and never reads cannot make this side hold its
    /// replies without limit. Over HTTP/2 it bounds a connection's
    /// response bodies waiting to be sent, in all.
    pub max_outgoing_bytes: usize,
    /// A server closes a network connection (TCP, Unix socket, WebSocket,
    /// one of your own) whose peer takes none of its output for this long
    /// (default 60 s; `None`: never). With
    /// [`max_outgoing_bytes`](Self::max_outgoing_bytes), a peer that never
    /// reads holds its connection this long at most. Stdio, child processes
    /// and clients wait for their peer as long as it takes.
    pub write_timeout: Option<Duration>,
}

impl ConnectionConfig {
    /// The default timeout for outgoing calls: 30 seconds.
    pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);
    /// The default bound on incoming requests running at once: 128.
    pub const DEFAULT_MAX_IN_FLIGHT: usize = 128;
    /// The default idle limit of a server's network connections: 60 s.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
    /// The default wait for an HTTP, WebSocket or TLS connection's first
    /// request: 10 s.
    pub const DEFAULT_FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
    /// The default bound on output not yet written to the peer: 4 MiB.
    pub const DEFAULT_MAX_OUTGOING_BYTES: usize = 4 << 20;
    /// The default wait for a peer to take output: 60 s.
    pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(60);

    /// The framing of byte streams.
    pub fn framing(mut self, framing: Framing) -> Self {
        self.framing = framing;
        self
    }

    /// The timeout of outgoing calls that do not set their own.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Cancellation across the connection: see [`CancelProtocol::mcp`] and
    /// [`CancelProtocol::lsp`].
    pub fn cancellation(mut self, protocol: CancelProtocol) -> Self {
        self.cancel = Some(protocol);
        self
    }

    /// No cancellation protocol.
    pub fn no_cancellation(mut self) -> Self {
        self.cancel = None;
        self
    }

    /// Incoming requests running at once (at least one).
    pub fn max_in_flight(mut self, requests: usize) -> Self {
        self.max_in_flight = requests.max(1);
        self
    }

    /// How long a server lets a network connection sit idle; see
    /// [`idle_timeout`](Self::idle_timeout).
    pub fn idle_timeout(mut self, limit: Option<Duration>) -> Self {
        self.idle_timeout = limit;
        self
    }

    /// How long a server waits for an HTTP, WebSocket or TLS connection's
    /// first request; see [`first_request_timeout`](Self::first_request_timeout).
    pub fn first_request_timeout(mut self, limit: Option<Duration>) -> Self {
        self.first_request_timeout = limit;
        self
    }

    /// The most a connection holds for its peer unwritten (at least one
    /// byte); see [`max_outgoing_bytes`](Self::max_outgoing_bytes).
    pub fn max_outgoing_bytes(mut self, bytes: usize) -> Self {
        self.max_outgoing_bytes = bytes.max(1);
        self
    }

    /// How long a connection waits for its peer to take output before it
    /// closes; see [`write_timeout`](Self::write_timeout).
    pub fn write_timeout(mut self, limit: Option<Duration>) -> Self {
        self.write_timeout = limit;
        self
    }

    /// Make each incoming request wait until the notifications that arrived
    /// before it have been handled. Editors rely on this: an LSP
    /// `textDocument/didChange` must be applied before the `completion`
    /// request that follows it. Costs a task per request only while
    /// notifications are pending.
    pub fn ordered(mut self, on: bool) -> Self {
        self.ordered = on;
        self
    }

    /// Make each response to a call of this side wait until the
    /// notifications that arrived before it have been handled: the caller
    /// sees a server's progress notifications before the result they
    /// preceded (a proxy passing both on keeps their order). Not where a
    /// notification handler awaits a call on the same connection: its
    /// response would wait for that handler. Costs a task per response
    /// only while notifications are pending.
    pub fn ordered_responses(mut self, on: bool) -> Self {
        self.ordered_responses = on;
        self
    }
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            framing: Framing::default(),
            call_timeout: Self::DEFAULT_CALL_TIMEOUT,
            cancel: None,
            max_in_flight: Self::DEFAULT_MAX_IN_FLIGHT,
            ordered: false,
            ordered_responses: false,
            idle_timeout: Some(Self::DEFAULT_IDLE_TIMEOUT),
            first_request_timeout: Some(Self::DEFAULT_FIRST_REQUEST_TIMEOUT),
            max_outgoing_bytes: Self::DEFAULT_MAX_OUTGOING_BYTES,
            write_timeout: Some(Self::DEFAULT_WRITE_TIMEOUT),
        }
    }
}
