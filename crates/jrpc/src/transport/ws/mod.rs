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
//!
//! The pump is shared; each side has a file of its own: `accept.rs` (an
//! HTTP server's upgraded connections, with their reads charged to its
//! buffer budget), `dial.rs` (the client's handshake and [`WsDialer`]), and
//! `listener.rs` (a bare WebSocket listener, [`WsListener`]).

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

use crate::codec::Inbound;

#[cfg(feature = "http-server")]
mod accept;
#[cfg(feature = "http-client")]
mod dial;
mod listener;
#[cfg(feature = "http-server")]
pub(crate) use accept::{pump_accepted, until_used, ReadMeter};
#[cfg(feature = "http-client")]
pub use dial::WsDialer;
pub use listener::WsListener;

/// What counts a server's reads ([`accept::ReadMeter`]): told each time a
/// whole message has been read, so the bytes it held are free again.
pub(crate) trait MessageReads: Send + Sync {
    fn message_done(&self);
}

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
            return Sink::<Bytes>::poll_flush(self, cx);
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
        std::task::ready!(Sink::<Bytes>::poll_flush(self.as_mut(), cx))?;
        self.frames.close();
        if let Some(done) = self.pump_done.as_mut() {
            // Ready when the pump ends, whether it signalled or was dropped.
            let _ = std::task::ready!(Pin::new(done).poll(cx));
            self.pump_done = None;
        }
        Poll::Ready(Ok(()))
    }
}

/// The peer's frames, kinds unread (a WebSocket carries text).
impl Sink<crate::transport::OutFrame> for ClosingSink {
    type Error = io::Error;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Sink::<Bytes>::poll_ready(self, cx)
    }

    fn start_send(self: Pin<&mut Self>, frame: crate::transport::OutFrame) -> io::Result<()> {
        Sink::<Bytes>::start_send(self, frame.into_bytes())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Sink::<Bytes>::poll_flush(self, cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Sink::<Bytes>::poll_close(self, cx)
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
    meter: Option<Arc<dyn MessageReads>>,
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

/// The budget's limit, when `e` says it was spent.
fn over_budget(e: &io::Error) -> Option<usize> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<crate::codec::OverBudget>())
        .map(|over| over.limit)
}
