//! The server's side of a WebSocket: an HTTP server's upgraded connection,
//! kept alive with nothing but its socket until it is used
//! ([`until_used`]), then pumped ([`pump_accepted`]), its reads charged to
//! the server's buffer budget ([`ReadMeter`]).

use std::io;
use std::sync::Arc;

use futures_util::FutureExt as _;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::WebSocketStream;

use super::{close_frame, close_handshake, run, spawn_pump, MessageReads, Pumped, WsOptions};
use crate::codec::{Budgeted, BufferBudget, Charge};

/// A pump for a server's upgraded connection `io`, whose reads `meter`
/// counts, once [`until_used`] has returned it with the bytes it read
/// (`part`).
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
        run(
            ws,
            options,
            incoming,
            outgoing,
            Some(meter as Arc<dyn MessageReads>),
        )
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

/// Counts the bytes read for a WebSocket message that has not arrived whole
/// and charges them to the server's [`BufferBudget`] (the first
/// [`Budgeted::FREE_BYTES`] of each connection free), so that many clients
/// sending large messages slowly cannot exhaust memory together. Reads fail
/// once the budget is spent; the pump answers `-32007` and closes.
pub(crate) struct ReadMeter {
    pending: std::sync::atomic::AtomicUsize,
    charge: std::sync::Mutex<Charge>,
}

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

    /// The byte stream `io`, metered.
    pub(crate) fn wrap<I>(self: &Arc<Self>, io: I) -> Metered<I> {
        Metered {
            io,
            meter: Arc::clone(self),
        }
    }
}

impl MessageReads for ReadMeter {
    fn message_done(&self) {
        use std::sync::atomic::Ordering;
        if self.pending.swap(0, Ordering::Relaxed) > Budgeted::<()>::FREE_BYTES {
            let _ = self.charge.lock().unwrap_or_else(|p| p.into_inner()).hold(0);
        }
    }
}

/// A byte stream whose reads a [`ReadMeter`] counts.
pub(crate) struct Metered<I> {
    io: I,
    meter: Arc<ReadMeter>,
}

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
