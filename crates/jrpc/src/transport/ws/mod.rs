//! WebSocket: one JSON text per message, carried for a [`Peer`](crate::peer::Peer).
//!
//! A pump task owns the socket: it hands incoming messages to the peer,
//! writes the peer's frames, pings the other side on a timer and closes the
//! connection when nothing has been heard from it (or nothing could be
//! written to it) for the inactivity limit. Every queue is bounded, so a
//! client that stops reading cannot grow the server's memory: its frames
//! wait, then the handlers wait, then reading stops.
//!
//! A server's connection is cheap until it is used: `until_used` keeps it
//! alive (pings and pongs) with nothing but its socket, and the pump and the
//! peer start with the first message.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use std::future::Future as _;

use futures_util::{FutureExt as _, Sink, SinkExt, Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::PollSender;

use std::sync::Arc;

use crate::codec::{Budgeted, BufferBudget, Charge, Inbound};

mod listener;
pub use listener::WsListener;

/// WebSocket settings shared by server and client.
#[derive(Debug, Clone, Copy)]
pub struct WsOptions {
    /// Largest message accepted, in bytes. A larger one is answered with a
    /// `-32001` error and the connection is closed (code 1009), because the
    /// WebSocket protocol cannot skip it.
    pub max_message_len: usize,
    /// How often to ping the other side. Default 20 s.
    pub ping_interval: Duration,
    /// Close the connection when nothing has been received (pongs count)
    /// for this long, or a write has been stuck this long. Default 60 s.
    pub idle_timeout: Duration,
}

impl Default for WsOptions {
    fn default() -> Self {
        WsOptions {
            max_message_len: crate::message::Limits::DEFAULT_MAX_FRAME_LEN,
            ping_interval: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

impl WsOptions {
    /// The ping interval, at least a millisecond (a timer cannot tick
    /// every zero seconds).
    fn ping_period(&self) -> Duration {
        self.ping_interval.max(Duration::from_millis(1))
    }

    pub(crate) fn config(&self) -> WebSocketConfig {
        WebSocketConfig::default()
            // Allocated up front for every connection: tungstenite's 128 KiB
            // default would make an idle connection cost that much. A read
            // of 4 KiB still takes sixty small requests at a time, and
            // larger messages grow the buffer as they arrive.
            .read_buffer_size(4 * 1024)
            .max_message_size(Some(self.max_message_len))
            .max_frame_size(Some(self.max_message_len))
            // Writes beyond this wait (backpressure) instead of buffering.
            .write_buffer_size(64 * 1024)
    }
}

/// The frames a WebSocket brings in, for a peer.
pub(crate) struct Frames(mpsc::Receiver<io::Result<Inbound>>);

impl Stream for Frames {
    type Item = io::Result<Inbound>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

/// The ends of a pump a peer runs on: the frames that come in, and the sink
/// for the frames that go out.
pub(crate) type Pumped = (Frames, ClosingSink);

/// Splits a WebSocket into the frame stream and sink a peer runs on, and
/// starts the pump between them.
pub(crate) fn pump<S>(ws: WebSocketStream<S>, options: WsOptions) -> Pumped
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    spawn_pump(move |incoming, outgoing| run(ws, options, incoming, outgoing, None))
}

/// A pump for a server's upgraded connection `io`, whose reads `meter`
/// counts, once [`until_used`] has returned it with the bytes it read
/// (`part`).
// Only a server accepts upgraded connections.
#[cfg_attr(not(feature = "http-server"), allow(dead_code))]
pub(crate) fn pump_accepted<S>(
    io: S,
    part: Vec<u8>,
    options: WsOptions,
    meter: Arc<ReadMeter>,
) -> io::Result<Pumped>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let ws = accepted(io, part, &options)?;
    Ok(spawn_pump(move |incoming, outgoing| {
        run(ws, options, incoming, outgoing, Some(meter))
    }))
}

/// The WebSocket state over a server's connection `io`, whose first bytes
/// `part` were read already. tokio-tungstenite's constructor is async, but
/// it completes at its first poll (it only stores the waker, which every
/// later poll replaces), so it is made here, not in the pump task: the
/// task would keep the constructor's future (2 KB) beside the pump's
/// state for the connection's whole life.
fn accepted<S>(io: S, part: Vec<u8>, options: &WsOptions) -> io::Result<WebSocketStream<S>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    WebSocketStream::from_partially_read(
        io,
        part,
        tungstenite::protocol::Role::Server,
        Some(options.config()),
    )
    .now_or_never()
    .ok_or_else(|| io::Error::other("the WebSocket state was not made at its first poll"))
}

/// Keeps a server's upgraded connection `io` alive while it is unused,
/// holding nothing but the socket: it pings the other side every ping
/// interval (raw frames) and takes its pongs, and returns the connection
/// with the bytes read so far once anything else arrives. The WebSocket
/// state, the pump and the peer (about 18 KB with their buffers, tasks and
/// queues, against 3 KB for a connection waiting here) are made only then.
/// A read always has room in `bytes` (a read into no room would look like
/// the end of the stream): a pong is at most its size, and is taken off as
/// soon as it is whole. Returns `None` when the
/// connection ended instead: the other side closed it, nothing was heard
/// from it for the idle limit (closed with 1001), `shutdown` came (closed
/// with a Close frame), or a ping could not be written.
// Only a server accepts upgraded connections.
#[cfg_attr(not(feature = "http-server"), allow(dead_code))]
pub(crate) async fn until_used<S>(
    mut io: S,
    options: &WsOptions,
    meter: &ReadMeter,
    shutdown: &tokio_util::sync::CancellationToken,
) -> Option<(S, Vec<u8>)>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let idle = options.idle_timeout;
    let mut last_heard = Instant::now();
    let period = options.ping_period();
    let mut ping = tokio::time::interval_at(last_heard + period, period);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Room for the largest pong a client may send (a masked control frame
    // carries at most 125 bytes).
    let mut bytes = [0u8; 2 + 4 + 125];
    let mut filled = 0;
    let close = loop {
        tokio::select! {
            biased;
            () = shutdown.cancelled() => break None,
            read = io.read(&mut bytes[filled..]) => {
                match read {
                    Ok(0) | Err(_) => return None,
                    Ok(n) => filled += n,
                }
                last_heard = Instant::now();
                loop {
                    match opening(&bytes[..filled]) {
                        Opening::Pong(len) => {
                            bytes.copy_within(len..filled, 0);
                            filled -= len;
                            meter.message_done();
                        }
                        Opening::PartOfPong => break,
                        Opening::Other => return Some((io, bytes[..filled].to_vec())),
                    }
                }
            }
            _ = ping.tick() => {
                if last_heard.elapsed() > idle {
                    tracing::debug!("websocket idle; closing");
                    break Some(close_frame(CloseCode::Away, "idle timeout"));
                }
                // An empty, final, unmasked Ping (RFC 6455 §5.5.2).
                let sent = async {
                    io.write_all(&[0x89, 0x00]).await?;
                    io.flush().await
                };
                if !matches!(tokio::time::timeout(idle, sent).await, Ok(Ok(()))) {
                    return None;
                }
            }
        }
    };
    // Closing needs the WebSocket state after all (boxed: it is ten times
    // the size of what waiting needs, and only a few connections close at a
    // time).
    Box::pin(close_unused(io, bytes[..filled].to_vec(), close, options)).await;
    None
}

/// Closes a server's connection `io` (which has read `part`) before its pump
/// started: the closing handshake, with `frame`'s code and reason.
async fn close_unused<S>(io: S, part: Vec<u8>, frame: Option<CloseFrame>, options: &WsOptions)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    if let Ok(mut ws) = accepted(io, part, options) {
        close_handshake(&mut ws, frame, options.idle_timeout).await;
    }
}

/// What an unused connection's first bytes are.
#[derive(Debug, PartialEq)]
enum Opening {
    /// A whole Pong frame, this many bytes long.
    Pong(usize),
    /// The start of a Pong frame (or nothing yet).
    PartOfPong,
    /// Anything else: the connection is being used.
    Other,
}

fn opening(bytes: &[u8]) -> Opening {
    match bytes {
        [] | [0x8A] => Opening::PartOfPong,
        // Final, opcode Pong; masked (as a client's frames must be), with a
        // payload of at most 125 bytes (as a control frame's must be).
        [0x8A, second, ..] if second & 0x80 != 0 && second & 0x7F <= 125 => {
            let len = 2 + 4 + usize::from(second & 0x7F);
            if bytes.len() >= len {
                Opening::Pong(len)
            } else {
                Opening::PartOfPong
            }
        }
        _ => Opening::Other,
    }
}

/// Spawns the pump task `run(incoming, outgoing)` and returns the peer's
/// ends of its queues.
fn spawn_pump<R, F>(run: R) -> Pumped
where
    R: FnOnce(mpsc::Sender<io::Result<Inbound>>, mpsc::Receiver<Vec<Bytes>>) -> F,
    F: std::future::Future<Output = Result<(), tungstenite::Error>> + Send + 'static,
{
    // Room for a client's whole window of 64 pipelined calls: with 32, the
    // pump stopped halfway through each such burst and waited for the peer
    // (16 connections x 64 in flight: 0.85 M -> 1.10 M msg/s). The peer's
    // own bound on calls in flight (128 by default) is the larger one: a
    // client that stops reading its replies can already make a connection
    // hold that many messages. Queued messages are no longer counted in the
    // read budget (only messages still arriving are).
    let (in_tx, in_rx) = mpsc::channel(64);
    // Batches of up to FRAMES_PER_BATCH frames: at most 128 frames wait.
    let (out_tx, out_rx) = mpsc::channel(4);
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let pumping = run(in_tx, out_rx);
    // `map`, not an async block awaiting `pumping`: that would hold the
    // pump's state twice (rustc keeps the moved-from capture's room).
    tokio::spawn(pumping.map(move |ended| {
        if let Err(e) = ended {
            tracing::debug!(error = %e, "websocket closed with an error");
        }
        let _ = done_tx.send(());
    }));
    let sink = ClosingSink {
        frames: PollSender::new(out_tx),
        pending: Vec::new(),
        pump_done: Some(done_rx),
    };
    (Frames(in_rx), sink)
}

/// The frames a peer sends out over a WebSocket, handed to the pump a
/// batch per flush (one queue operation for all the frames written
/// together). Closing it ends only once the pump has written everything and
/// gone through the closing handshake, so that a process that closes its
/// connection and exits loses nothing.
pub(crate) struct ClosingSink {
    frames: PollSender<Vec<Bytes>>,
    /// Frames fed since the last flush.
    pending: Vec<Bytes>,
    pump_done: Option<tokio::sync::oneshot::Receiver<()>>,
}

/// Frames a sink gathers before it hands them over without waiting for a
/// flush.
const FRAMES_PER_BATCH: usize = 32;

impl Sink<Bytes> for ClosingSink {
    type Error = io::Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.pending.len() >= FRAMES_PER_BATCH {
            return self.poll_flush(cx);
        }
        Poll::Ready(Ok(()))
    }

    fn start_send(mut self: Pin<&mut Self>, frame: Bytes) -> io::Result<()> {
        self.pending.push(frame);
        Ok(())
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Frames handed over are the pump's to write.
        if self.pending.is_empty() {
            return Poll::Ready(Ok(()));
        }
        std::task::ready!(self.frames.poll_reserve(cx)).map_err(|_| broken_pipe())?;
        let frames = std::mem::take(&mut self.pending);
        self.frames.send_item(frames).map_err(|_| broken_pipe())?;
        Poll::Ready(Ok(()))
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.as_mut().poll_flush(cx))?;
        self.frames.close();
        if let Some(done) = self.pump_done.as_mut() {
            // Ready when the pump ends, whether it signalled or was dropped.
            let _ = std::task::ready!(Pin::new(done).poll(cx));
            self.pump_done = None;
        }
        Poll::Ready(Ok(()))
    }
}

fn broken_pipe() -> io::Error {
    io::Error::from(io::ErrorKind::BrokenPipe)
}

/// How long a closing side waits for the other's Close reply.
const CLOSE_REPLY_WAIT: Duration = Duration::from_secs(1);

/// Starts the closing handshake and waits, briefly, for the other side's
/// Close reply (reading and dropping whatever comes before it).
async fn close_handshake<S>(ws: &mut WebSocketStream<S>, frame: Option<CloseFrame>, limit: Duration)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    if timed(limit, ws.close(frame)).await.is_err() {
        return;
    }
    let reply = async {
        while let Some(Ok(message)) = ws.next().await {
            if let Message::Close(_) = message {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(CLOSE_REPLY_WAIT, reply).await;
}

async fn run<S>(
    mut ws: WebSocketStream<S>,
    options: WsOptions,
    incoming: mpsc::Sender<io::Result<Inbound>>,
    mut outgoing: mpsc::Receiver<Vec<Bytes>>,
    meter: Option<Arc<ReadMeter>>,
) -> Result<(), tungstenite::Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let idle = options.idle_timeout;
    let mut ping = tokio::time::interval(options.ping_period());
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The interval's first tick is at once: the first ping is due one
    // interval from now.
    ping.tick().await;
    let mut last_heard = Instant::now();
    // A frame read but not yet taken by the peer: until it is, read no more
    // (but keep writing, so the peer is never stuck behind us).
    let mut held: Option<Inbound> = None;
    let mut closed_by_peer = false;
    loop {
        tokio::select! {
            permit = incoming.reserve(), if held.is_some() => match permit {
                Ok(permit) => permit.send(Ok(held.take().expect("guarded by the branch condition"))),
                Err(_) => break,
            },
            message = ws.next(), if held.is_none() => {
                last_heard = Instant::now();
                if let (Some(meter), Some(Ok(_))) = (&meter, &message) {
                    // A message (or control frame) is whole: what was read
                    // for it is no longer held.
                    meter.message_done();
                }
                let (frame, message) = match message {
                    Some(Ok(Message::Text(text))) => (Some(Bytes::from(text)), None),
                    Some(Ok(Message::Binary(data))) => (Some(data), None),
                    other => (None, other),
                };
                if let Some(frame) = frame {
                    // Straight to the peer when its queue has room (one
                    // round through this `select!` per message, not two);
                    // held, and reading paused, when it has none.
                    match incoming.try_reserve() {
                        Ok(permit) => permit.send(Ok(Inbound::Frame(frame))),
                        Err(mpsc::error::TrySendError::Full(())) => held = Some(Inbound::Frame(frame)),
                        Err(mpsc::error::TrySendError::Closed(())) => break,
                    }
                    continue;
                }
                match message {
                    // Pongs to our pings are queued by tungstenite; send them.
                    Some(Ok(Message::Ping(_))) => timed(idle, ws.flush()).await?,
                    Some(Ok(Message::Text(_) | Message::Binary(_) | Message::Pong(_) | Message::Frame(_))) => {}
                    Some(Ok(Message::Close(_))) => {
                        closed_by_peer = true;
                        break;
                    }
                    None => break,
                    Some(Err(tungstenite::Error::Capacity(e))) => {
                        // The protocol cannot skip the rest of the message.
                        let report = incoming.send(Ok(Inbound::Oversized { limit: options.max_message_len }));
                        let _ = tokio::time::timeout(Duration::from_millis(100), report).await;
                        tracing::warn!(error = %e, "websocket message too large; closing");
                        // The peer answers the oversized message (-32001):
                        // that reply goes out before the close, which ends
                        // all sending.
                        drain(&mut outgoing, &mut ws, idle).await;
                        let _ = timed(idle, ws.close(Some(close_frame(CloseCode::Size, "message too large")))).await;
                        return Ok(());
                    }
                    Some(Err(tungstenite::Error::Io(e))) if over_budget(&e).is_some() => {
                        let limit = over_budget(&e).unwrap_or_default();
                        let report = incoming.send(Ok(Inbound::OverBudget { limit }));
                        let _ = tokio::time::timeout(Duration::from_millis(100), report).await;
                        tracing::warn!(limit, "buffer budget spent by a websocket message; closing");
                        // The peer answers -32007; that goes out before the
                        // close ("try again later").
                        drain(&mut outgoing, &mut ws, idle).await;
                        let _ = timed(idle, ws.close(Some(close_frame(CloseCode::Again, "server busy")))).await;
                        return Ok(());
                    }
                    Some(Err(e)) => return Err(e),
                }
            }
            frames = outgoing.recv() => {
                let Some(frames) = frames else {
                    close_handshake(&mut ws, None, idle).await;
                    return Ok(());
                };
                timed(idle, write_frames(&mut ws, frames, &mut outgoing)).await?;
            }
            _ = ping.tick() => {
                // While a frame waits for the peer, reading is paused on
                // purpose (backpressure): that is not the client's silence.
                if held.is_some() {
                    last_heard = Instant::now();
                }
                if last_heard.elapsed() > idle {
                    tracing::debug!("websocket idle; closing");
                    let _ = timed(idle, ws.close(Some(close_frame(CloseCode::Away, "idle timeout")))).await;
                    return Ok(());
                }
                timed(idle, ws.send(Message::Ping(Bytes::new()))).await?;
            }
        }
    }
    if closed_by_peer {
        // Closing handshake: requests read before the Close are answered
        // first (the peer sees the end of its input), then the Close is.
        drop(incoming);
        finish_after_close(&mut ws, &mut outgoing, idle).await;
        return Ok(());
    }
    close_handshake(&mut ws, None, idle).await;
    Ok(())
}

/// After the other side's Close: writes the peer's remaining replies (until
/// it has answered everything it read, within `limit`), then the Close
/// reply tungstenite queued when it read the Close. tungstenite sends no data
/// once it has read a Close, so the replies go out as raw text frames ahead
/// of its queued Close (its write buffer is empty: every write is flushed).
async fn finish_after_close<S>(
    ws: &mut WebSocketStream<S>,
    outgoing: &mut mpsc::Receiver<Vec<Bytes>>,
    limit: Duration,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    use tokio::io::AsyncWriteExt;
    let replies = async {
        while let Some(frames) = outgoing.recv().await {
            let io = ws.get_mut();
            for frame in frames {
                io.write_all(&text_frame_header(frame.len())).await?;
                io.write_all(&frame).await?;
            }
            io.flush().await?;
        }
        Ok::<_, io::Error>(())
    };
    match tokio::time::timeout(limit, replies).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return tracing::debug!(error = %e, "websocket write failed while closing"),
        Err(_) => tracing::debug!("replies still pending at the websocket close; closing anyway"),
    }
    let _ = timed(limit, ws.flush()).await;
}

/// The header of an unmasked (server-to-client) final text frame carrying
/// `len` bytes (RFC 6455 §5.2).
fn text_frame_header(len: usize) -> Vec<u8> {
    let mut head = vec![0x81];
    match len {
        0..=125 => head.push(len as u8),
        126..=0xFFFF => {
            head.push(126);
            head.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            head.push(127);
            head.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    head
}

/// Writes out the replies the peer has for what it was handed, before the
/// connection closes: within a second, batch after batch until none has
/// come for a moment. The peer answers the report that ends the connection
/// (-32001, -32007) after the up to 64 messages queued before it, so that
/// reply may come a batch or two after the first.
async fn drain<S>(outgoing: &mut mpsc::Receiver<Vec<Bytes>>, ws: &mut WebSocketStream<S>, idle: Duration)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    /// How long to wait for a further batch: the peer sends the replies of
    /// one read burst together, and the next burst follows at once.
    const QUIET: Duration = Duration::from_millis(100);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    let mut wait_until = deadline;
    while let Ok(Some(frames)) = tokio::time::timeout_at(wait_until, outgoing.recv()).await {
        if timed(idle, write_frames(ws, frames, outgoing)).await.is_err() {
            return;
        }
        wait_until = deadline.min(tokio::time::Instant::now() + QUIET);
    }
}

/// Writes `frames` and every batch already queued after them, then flushes
/// once.
async fn write_frames<S>(
    ws: &mut WebSocketStream<S>,
    frames: Vec<Bytes>,
    outgoing: &mut mpsc::Receiver<Vec<Bytes>>,
) -> Result<(), tungstenite::Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut batch = Some(frames);
    while let Some(frames) = batch.take() {
        for frame in frames {
            ws.feed(text(frame)?).await?;
        }
        batch = outgoing.try_recv().ok();
    }
    ws.flush().await
}

fn text(frame: Bytes) -> Result<Message, tungstenite::Error> {
    // Frames are JSON text, so always UTF-8; checked anyway.
    Utf8Bytes::try_from(frame)
        .map(Message::Text)
        .map_err(|_| tungstenite::Error::Utf8("frame is not UTF-8".into()))
}

fn close_frame(code: CloseCode, reason: &'static str) -> CloseFrame {
    CloseFrame {
        code,
        reason: reason.into(),
    }
}

/// Bounds a write: a peer that stops reading is cut off after `limit`.
async fn timed<T>(
    limit: Duration,
    io: impl std::future::Future<Output = Result<T, tungstenite::Error>>,
) -> Result<T, tungstenite::Error> {
    match tokio::time::timeout(limit, io).await {
        Ok(result) => result,
        Err(_) => Err(tungstenite::Error::Io(io::Error::new(
            io::ErrorKind::TimedOut,
            "write stalled",
        ))),
    }
}

#[cfg(feature = "http-client")]
/// How long connecting (TCP, TLS and the handshake, each) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

#[cfg(feature = "http-client")]
/// A byte stream a WebSocket can run on (plain TCP or TLS).
trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
#[cfg(feature = "http-client")]
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

#[cfg(feature = "http-client")]
/// Connects a WebSocket client to `url` (`ws://` or `wss://`), sending
/// `headers` with the handshake, and starts its pump.
pub(crate) async fn connect(
    url: &str,
    headers: &http::HeaderMap,
    tls: Option<std::sync::Arc<tokio_rustls::rustls::ClientConfig>>,
    options: WsOptions,
) -> io::Result<(
    Frames,
    impl Sink<Bytes, Error = io::Error> + Send + Unpin + 'static,
    crate::context::ConnectionInfo,
)> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
    let uri: http::Uri = url.parse().map_err(|e| invalid(format!("{url}: {e}")))?;
    let secure = match uri.scheme_str() {
        Some("ws") => false,
        Some("wss") => true,
        _ => return Err(invalid(format!("{url}: expected ws:// or wss://"))),
    };
    let host = uri
        .host()
        .ok_or_else(|| invalid(format!("{url}: no host")))?
        // An IPv6 literal comes in brackets, which a socket address has not.
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = crate::transport::tls::port_of(&uri, url, if secure { 443 } else { 80 })?;
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
    let _ = tcp.set_nodelay(true);
    let info = crate::context::ConnectionInfo {
        transport: "websocket",
        peer_addr: tcp.peer_addr().ok().map(|a| a.to_string()),
        local_addr: tcp.local_addr().ok().map(|a| a.to_string()),
    };
    let stream: Box<dyn Io> = if secure {
        let config = match tls {
            // WebSocket runs over HTTP/1.1 only.
            Some(config) if config.alpn_protocols.iter().all(|p| p == b"http/1.1") => config,
            Some(config) => {
                let mut config = (*config).clone();
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                std::sync::Arc::new(config)
            }
            None => crate::transport::tls::client_config_native(&[b"http/1.1"])?,
        };
        let name = crate::transport::tls::server_name(&host)?;
        Box::new(
            tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await
                .map_err(|e| crate::transport::tls::explain(e, &host))?,
        )
    } else {
        Box::new(tcp)
    };
    let mut request = url
        .into_client_request()
        .map_err(|e| invalid(format!("{url}: {e}")))?;
    for (name, value) in headers {
        request.headers_mut().append(name, value.clone());
    }
    let handshake = tokio_tungstenite::client_async_with_config(request, stream, Some(options.config()));
    let (socket, _response) = tokio::time::timeout(CONNECT_TIMEOUT, handshake)
        .await
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{url}: no WebSocket handshake within {CONNECT_TIMEOUT:?}"),
            )
        })?
        .map_err(|e| match e {
            tungstenite::Error::Io(e) => e,
            tungstenite::Error::Http(response) => io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!(
                    "WebSocket handshake refused: HTTP {}{}",
                    response.status(),
                    response
                        .body()
                        .as_ref()
                        .map(|b| format!(": {}", String::from_utf8_lossy(b)))
                        .unwrap_or_default()
                ),
            ),
            other => io::Error::other(other.to_string()),
        })?;
    let (frames_in, frames_out) = pump(socket, options);
    Ok((frames_in, frames_out, info))
}

#[cfg(feature = "http-client")]
/// Opens WebSocket connections to one URL (`ws://` or `wss://`), sending
/// the given headers with each handshake.
#[derive(Debug, Clone)]
pub struct WsDialer {
    url: String,
    headers: http::HeaderMap,
    tls: Option<std::sync::Arc<tokio_rustls::rustls::ClientConfig>>,
    options: WsOptions,
}

#[cfg(feature = "http-client")]
impl WsDialer {
    /// Dials `url` with default settings and no extra headers.
    pub fn new(url: impl Into<String>) -> Self {
        WsDialer {
            url: url.into(),
            headers: http::HeaderMap::new(),
            tls: None,
            options: WsOptions::default(),
        }
    }

    /// Sends these headers with every handshake (`Authorization`, say).
    pub fn headers(mut self, headers: http::HeaderMap) -> Self {
        self.headers = headers;
        self
    }

    /// TLS settings for `wss://` (default: the system's trusted roots).
    pub fn tls(mut self, config: std::sync::Arc<tokio_rustls::rustls::ClientConfig>) -> Self {
        self.tls = Some(config);
        self
    }

    /// Message size, ping and idle settings.
    pub fn options(mut self, options: WsOptions) -> Self {
        self.options = options;
        self
    }
}

#[cfg(feature = "http-client")]
impl crate::transport::Dialer for WsDialer {
    async fn dial(&self) -> io::Result<crate::transport::Connection> {
        let (incoming, outgoing, info) =
            connect(&self.url, &self.headers, self.tls.clone(), self.options).await?;
        Ok(crate::transport::Connection::new(incoming, outgoing, info))
    }
}

/// Counts the bytes read for a WebSocket message that has not arrived whole
/// and charges them to the server's [`BufferBudget`] (the first
/// [`Budgeted::FREE_BYTES`] of each connection free), so that many clients
/// sending large messages slowly cannot exhaust memory together. Reads fail
/// once the budget is spent; the pump answers `-32007` and closes.
// Only a server meters its reads.
#[cfg_attr(not(feature = "http-server"), allow(dead_code))]
pub(crate) struct ReadMeter {
    pending: std::sync::atomic::AtomicUsize,
    charge: std::sync::Mutex<Charge>,
}

// Only a server meters its reads.
#[cfg_attr(not(feature = "http-server"), allow(dead_code))]
impl ReadMeter {
    pub(crate) fn new(budget: &BufferBudget) -> Arc<Self> {
        Arc::new(ReadMeter {
            pending: std::sync::atomic::AtomicUsize::new(0),
            charge: std::sync::Mutex::new(budget.charge()),
        })
    }

    /// Counts `n` bytes read; an error once the budget is spent.
    fn read(&self, n: usize) -> io::Result<()> {
        use std::sync::atomic::Ordering;
        let pending = self.pending.fetch_add(n, Ordering::Relaxed) + n;
        let Some(beyond) = pending.checked_sub(Budgeted::<()>::FREE_BYTES).filter(|b| *b > 0) else {
            return Ok(());
        };
        let mut charge = self.charge.lock().unwrap_or_else(|p| p.into_inner());
        charge
            .hold(beyond)
            .map_err(|over| io::Error::new(io::ErrorKind::OutOfMemory, over))
    }

    fn message_done(&self) {
        use std::sync::atomic::Ordering;
        if self.pending.swap(0, Ordering::Relaxed) > Budgeted::<()>::FREE_BYTES {
            let _ = self.charge.lock().unwrap_or_else(|p| p.into_inner()).hold(0);
        }
    }

    /// The byte stream `io`, metered.
    pub(crate) fn wrap<I>(self: &Arc<Self>, io: I) -> Metered<I> {
        Metered {
            io,
            meter: Arc::clone(self),
        }
    }
}

/// The budget's limit, when `e` says it was spent.
// Only a server meters its reads.
#[cfg_attr(not(feature = "http-server"), allow(dead_code))]
fn over_budget(e: &io::Error) -> Option<usize> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<crate::codec::OverBudget>())
        .map(|over| over.limit)
}

/// A byte stream whose reads a [`ReadMeter`] counts.
// Only a server meters its reads.
#[cfg_attr(not(feature = "http-server"), allow(dead_code))]
pub(crate) struct Metered<I> {
    io: I,
    meter: Arc<ReadMeter>,
}

// Only a server meters its reads.
#[cfg_attr(not(feature = "http-server"), allow(dead_code))]
impl<I: AsyncRead + Unpin> AsyncRead for Metered<I> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.io).poll_read(cx, buf);
        if let std::task::Poll::Ready(Ok(())) = polled {
            let n = buf.filled().len() - before;
            if n > 0 {
                if let Err(e) = self.meter.read(n) {
                    return std::task::Poll::Ready(Err(e));
                }
            }
        }
        polled
    }
}

// Only a server meters its reads.
#[cfg_attr(not(feature = "http-server"), allow(dead_code))]
impl<I: AsyncWrite + Unpin> AsyncWrite for Metered<I> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> std::task::Poll<io::Result<usize>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unused_connection_tells_pongs_from_use() {
        let pong = |payload: &[u8]| {
            let mut frame = vec![0x8A, 0x80 | payload.len() as u8, 1, 2, 3, 4];
            frame.extend_from_slice(payload);
            frame
        };
        let long = pong(&[0u8; 125]);
        let mut two = pong(b"");
        two.extend(pong(b"ab"));
        let cases: &[(&[u8], Opening)] = &[
            (b"", Opening::PartOfPong),
            (&[0x8A], Opening::PartOfPong),
            (&[0x8A, 0x80, 1, 2, 3], Opening::PartOfPong),
            (&pong(b""), Opening::Pong(6)),
            (&pong(b"ping"), Opening::Pong(10)),
            (&long, Opening::Pong(131)),
            (&long[..130], Opening::PartOfPong),
            // The first of two pongs read together.
            (&two, Opening::Pong(6)),
            // Unmasked: tungstenite refuses it (a client must mask).
            (&[0x8A, 0x00], Opening::Other),
            // A control frame cannot carry 126 bytes or more.
            (&[0x8A, 0x80 | 126, 0, 126], Opening::Other),
            // A fragment of a Pong (FIN clear) is a protocol error.
            (&[0x0A, 0x80], Opening::Other),
            // Text, Ping, Close: the connection is used.
            (&[0x81, 0x85], Opening::Other),
            (&[0x89, 0x80, 1, 2, 3, 4], Opening::Other),
            (&[0x88, 0x80, 1, 2, 3, 4], Opening::Other),
        ];
        for (bytes, expected) in cases {
            assert_eq!(&opening(bytes), expected, "{bytes:?}");
        }
    }
}
