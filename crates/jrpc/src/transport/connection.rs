//! The public shape of a transport: a [`Listener`] accepts [`Connection`]s,
//! a [`Dialer`] opens one. A connection is a stream of incoming frames, a
//! sink of outgoing frames, and what is known about it.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;

use bytes::Bytes;
use futures_util::{Sink, Stream};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::codec::OutFrame;
use crate::codec::{Budgeted, BufferBudget, Framing, Inbound};
use crate::context::ConnectionInfo;

/// Incoming frames of a connection, boxed.
pub type FrameStream = Pin<Box<dyn Stream<Item = io::Result<Inbound>> + Send>>;

/// Outgoing frames of a connection, boxed, as bytes.
pub type FrameSink = Pin<Box<dyn Sink<Bytes, Error = io::Error> + Send>>;

/// Outgoing frames of a connection with their kinds, boxed.
pub type OutFrameSink = Pin<Box<dyn Sink<OutFrame, Error = io::Error> + Send>>;

/// A future giving a better reason than "end of stream" once a connection's
/// frames end (a child process's exit status, say).
pub type CloseReason = Pin<Box<dyn Future<Output = Option<String>> + Send>>;

/// One connection, ready to carry a [`Peer`](crate::peer::Peer): its
/// incoming frames, its outgoing frames and what is known about it.
///
/// Frames are whole JSON-RPC messages or batches, without framing: a
/// transport that carries bytes splits them with a [`Framing`] (see
/// [`over_io`](Self::over_io)); one that carries messages (WebSocket, a
/// message broker) hands them over as they are. A frame the transport had
/// to skip is reported as [`Inbound::Oversized`] or [`Inbound::Malformed`],
/// and the peer answers it.
///
/// ```
/// use futures_util::SinkExt;
/// use jrpc::codec::Inbound;
/// use jrpc::context::ConnectionInfo;
/// use jrpc::transport::Connection;
///
/// // One request in; replies go nowhere.
/// let request = r#"{"jsonrpc":"2.0","method":"ping","id":1}"#;
/// let connection = Connection::new(
///     futures_util::stream::iter([Ok(Inbound::Frame(request.into()))]),
///     futures_util::sink::drain().sink_map_err(|never| match never {}),
///     ConnectionInfo { transport: "memory", peer_addr: None, local_addr: None },
/// );
/// assert_eq!(connection.info().transport, "memory");
/// ```
pub struct Connection {
    pub(crate) incoming: FrameStream,
    pub(crate) outgoing: OutFrameSink,
    pub(crate) info: ConnectionInfo,
    pub(crate) close_reason: Option<CloseReason>,
    /// What lives as long as the connection (a child process, say).
    pub(crate) resources: Vec<Box<dyn Any + Send>>,
    /// Whether the sink reads the kinds of frames (else they are not worked
    /// out: a few percent of a small call).
    pub(crate) kinds: bool,
}

impl Connection {
    /// A connection over any stream of incoming frames and sink of outgoing
    /// ones (bytes: what each frame carries is not told to the sink).
    pub fn new(
        incoming: impl Stream<Item = io::Result<Inbound>> + Send + 'static,
        outgoing: impl Sink<Bytes, Error = io::Error> + Send + 'static,
        info: ConnectionInfo,
    ) -> Self {
        Connection::unkinded(incoming, BytesOnly::new(outgoing), info)
    }

    /// A connection whose sink is told what each outgoing frame carries
    /// ([`OutFrame`]): a transport that routes by kind (a message broker)
    /// needs it; one that carries bytes takes [`new`](Self::new).
    pub fn with_kinds(
        incoming: impl Stream<Item = io::Result<Inbound>> + Send + 'static,
        outgoing: impl Sink<OutFrame, Error = io::Error> + Send + 'static,
        info: ConnectionInfo,
    ) -> Self {
        Connection {
            incoming: Box::pin(incoming),
            outgoing: Box::pin(outgoing),
            info,
            close_reason: None,
            resources: Vec::new(),
            kinds: true,
        }
    }

    /// A connection over a sink that takes frames but does not read their
    /// kinds (a codec's, the WebSocket pump's): the kinds are not worked out.
    pub(crate) fn unkinded(
        incoming: impl Stream<Item = io::Result<Inbound>> + Send + 'static,
        outgoing: impl Sink<OutFrame, Error = io::Error> + Send + 'static,
        info: ConnectionInfo,
    ) -> Self {
        Connection {
            kinds: false,
            ..Connection::with_kinds(incoming, outgoing, info)
        }
    }

    /// A connection over a byte stream, split into frames with `framing`;
    /// frames longer than `max_frame_len` bytes are skipped and reported.
    pub fn over_io(
        reader: impl AsyncRead + Send + 'static,
        writer: impl AsyncWrite + Send + 'static,
        framing: Framing,
        max_frame_len: usize,
        info: ConnectionInfo,
    ) -> Self {
        let codec = framing.codec(max_frame_len);
        Connection::unkinded(
            FramedRead::new(reader, codec.clone()),
            FramedWrite::new(writer, codec),
            info,
        )
    }

    /// [`over_io`](Self::over_io), with the unfinished frame charged to a
    /// budget shared with other connections (a server's): when the budget
    /// is spent, the frame is dropped and [`Inbound::OverBudget`] reported.
    pub fn over_io_budgeted(
        reader: impl AsyncRead + Send + 'static,
        writer: impl AsyncWrite + Send + 'static,
        framing: Framing,
        max_frame_len: usize,
        budget: &BufferBudget,
        info: ConnectionInfo,
    ) -> Self {
        let codec = framing.codec(max_frame_len);
        Connection::unkinded(
            FramedRead::new(reader, Budgeted::new(codec.clone(), budget)),
            FramedWrite::new(writer, codec),
            info,
        )
    }

    /// Says why the connection ended, once its frames end, better than "end
    /// of stream" (waited for up to two seconds).
    pub fn with_close_reason(
        mut self,
        reason: impl Future<Output = Option<String>> + Send + 'static,
    ) -> Self {
        self.close_reason = Some(Box::pin(reason));
        self
    }

    /// Keeps `resource` alive until the connection has closed (a child
    /// process the connection talks to, a broker subscription).
    pub fn owning(mut self, resource: impl Send + 'static) -> Self {
        self.resources.push(Box::new(resource));
        self
    }

    /// What is known about the connection.
    pub fn info(&self) -> &ConnectionInfo {
        &self.info
    }

    /// The frames both ways and the description, for running the
    /// connection some other way. What the connection owns (a child
    /// process, a broker connection) lives as long as the incoming frames;
    /// the close reason is dropped. Frames sent as bytes are of kind
    /// [`OutKind::Unknown`](super::OutKind::Unknown) (see
    /// [`into_kinded_parts`](Self::into_kinded_parts)).
    pub fn into_parts(self) -> (FrameStream, FrameSink, ConnectionInfo) {
        let (incoming, outgoing, info) = self.into_kinded_parts();
        let outgoing = futures_util::SinkExt::with(outgoing, |bytes: Bytes| {
            std::future::ready(Ok::<_, io::Error>(OutFrame::from(bytes)))
        });
        (incoming, Box::pin(outgoing), info)
    }

    /// [`into_parts`](Self::into_parts), with the sink of frames and their
    /// kinds.
    pub fn into_kinded_parts(self) -> (FrameStream, OutFrameSink, ConnectionInfo) {
        let incoming = if self.resources.is_empty() {
            self.incoming
        } else {
            Box::pin(Owning {
                frames: self.incoming,
                _resources: self.resources,
            })
        };
        (incoming, self.outgoing, self.info)
    }
}

pin_project_lite::pin_project! {
    /// A sink of bytes taking frames with their kinds: the kind is dropped.
    pub(crate) struct BytesOnly<S> {
        #[pin]
        bytes: S,
    }
}

impl<S> BytesOnly<S> {
    pub(crate) fn new(bytes: S) -> Self {
        BytesOnly { bytes }
    }
}

impl<S: Sink<Bytes, Error = io::Error>> Sink<OutFrame> for BytesOnly<S> {
    type Error = io::Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        self.project().bytes.poll_ready(cx)
    }

    fn start_send(self: Pin<&mut Self>, frame: OutFrame) -> io::Result<()> {
        self.project().bytes.start_send(frame.into_bytes())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        self.project().bytes.poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        self.project().bytes.poll_close(cx)
    }
}

/// Incoming frames that keep what their connection owned alive.
struct Owning {
    frames: FrameStream,
    _resources: Vec<Box<dyn Any + Send>>,
}

impl Stream for Owning {
    type Item = io::Result<Inbound>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.frames.as_mut().poll_next(cx)
    }
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// A call the transport could not deliver: nobody was there to take it (a
/// broker's "no responders"), so it surely did not run and may be sent
/// again. Calls fail with it as a
/// [`CallError::Transport`](crate::CallError::Transport); a transport
/// reports it with [`Inbound::Undelivered`].
///
/// ```
/// # fn demo(err: jrpc::CallError) {
/// if let Some(undelivered) = err.transport_error::<jrpc::transport::Undelivered>() {
///     eprintln!("not delivered: {}", undelivered.reason);
/// }
/// # }
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[error("not delivered: {reason}")]
pub struct Undelivered {
    /// Why (`no responders: nothing subscribes to nats://…/demo`).
    pub reason: String,
}

/// Where connections come from, for a [`Server`](crate::server::Server) to serve:
/// `Server::serve(listener)`. TCP ([`tcp::TcpListener`](super::tcp::TcpListener))
/// and Unix sockets are built in; a message broker or an in-memory pipe is
/// one implementation away.
pub trait Listener: Send + 'static {
    /// Waits for the next connection. An error is logged and accepting goes
    /// on after a short pause (out of file descriptors, say).
    fn accept(&mut self) -> impl Future<Output = io::Result<Connection>> + Send;

    /// Where it listens, as a target `jrpc call` understands where there is
    /// one (`tcp://127.0.0.1:4000`).
    fn local_addr(&self) -> String;
}

/// How to open a connection, for a [`Client`](crate::client::Client):
/// `ClientBuilder::connect_with(dialer)`. A client that reconnects dials
/// again each time its connection drops.
pub trait Dialer: Send + Sync + 'static {
    /// Opens a connection.
    fn dial(&self) -> impl Future<Output = io::Result<Connection>> + Send;
}

/// A dialer behind a pointer, for clients that keep one to reconnect.
pub(crate) trait DynDialer: Send + Sync + 'static {
    fn dial_boxed(&self) -> Pin<Box<dyn Future<Output = io::Result<Connection>> + Send + '_>>;
}

impl<D: Dialer> DynDialer for D {
    fn dial_boxed(&self) -> Pin<Box<dyn Future<Output = io::Result<Connection>> + Send + '_>> {
        Box::pin(self.dial())
    }
}

/// What the accept loop takes connections from: a public [`Listener`] (as
/// frames), or a byte-stream listener (under the HTTP server).
pub(crate) trait Accept: Send + 'static {
    /// An accepted connection.
    type Conn: Send + 'static;

    fn accept_conn(&mut self) -> impl Future<Output = io::Result<(Self::Conn, ConnectionInfo)>> + Send;

    /// Tells a connection there is no room for it, and closes it.
    fn refuse(&self, conn: Self::Conn) -> impl Future<Output = ()> + Send + 'static;
}
