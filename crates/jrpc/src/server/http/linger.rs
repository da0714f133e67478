//! A connection closed in stages (RFC 9112 §9.6): when the server ends a
//! connection, it stops writing first and goes on reading (and dropping)
//! what the client still sends, for a moment, before it closes for good.
//! Closing a socket with unread input makes the kernel answer with a
//! reset, and a client that pipelined requests behind a response that said
//! `Connection: close` would lose that response with the reset.
//!
//! A client that said its request was its last (`Connection: close`) sends
//! nothing more (RFC 9112 §9.6): once that request's body was read to its
//! end and the answer did not close on the server's own account
//! ([`RequestGuard::answered`](super::activity::RequestGuard::answered)),
//! and nothing of it is waiting to be read, its connection closes at once.
//! Waiting for its FIN would cost a connection per call (what such clients
//! open) a wake-up more than the request did.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::activity::Activity;

/// How long a closing connection goes on reading what the client sends.
const LINGER: Duration = Duration::from_secs(1);

/// The most bytes read and dropped while closing.
const LINGER_BYTES: usize = 256 << 10;

/// A connection's byte stream whose shutdown lingers: the write side is
/// shut, then input is read and dropped until the client closes its side,
/// [`LINGER`] passes or [`LINGER_BYTES`] are read.
pub(super) struct Lingering<I> {
    io: I,
    closing: Closing,
    /// Whether the client has said it sends nothing more.
    activity: Arc<Activity>,
}

enum Closing {
    Open,
    Draining {
        /// Set when the first read finds nothing: a client that closed
        /// first needs no timer.
        deadline: Option<Pin<Box<tokio::time::Sleep>>>,
        dropped: usize,
    },
    Closed,
}

impl<I> Lingering<I> {
    pub(super) fn new(io: I, activity: Arc<Activity>) -> Self {
        Lingering {
            io,
            closing: Closing::Open,
            activity,
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Lingering<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Lingering<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            match &mut this.closing {
                Closing::Open => {
                    // The write side first: the client sees the end of
                    // what was written (after the last response).
                    std::task::ready!(Pin::new(&mut this.io).poll_shutdown(cx))?;
                    this.closing = Closing::Draining {
                        deadline: None,
                        dropped: 0,
                    };
                }
                Closing::Draining { deadline, dropped } => {
                    // Not zeroed first (4 KiB written on every poll cost a
                    // closing connection more than its request did).
                    let mut scratch = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
                    let mut buf = ReadBuf::uninit(&mut scratch);
                    match Pin::new(&mut this.io).poll_read(cx, &mut buf) {
                        Poll::Ready(Ok(())) if !buf.filled().is_empty() => {
                            *dropped += buf.filled().len();
                            if *dropped > LINGER_BYTES {
                                this.closing = Closing::Closed;
                            }
                        }
                        // The client closed its side, or the connection
                        // failed: nothing more to wait for.
                        Poll::Ready(_) => this.closing = Closing::Closed,
                        // Nothing to read from a client that said it is
                        // done: it sends nothing more.
                        Poll::Pending if *dropped == 0 && this.activity.client_done() => {
                            this.closing = Closing::Closed;
                        }
                        Poll::Pending => {
                            let deadline =
                                deadline.get_or_insert_with(|| Box::pin(tokio::time::sleep(LINGER)));
                            if std::future::Future::poll(deadline.as_mut(), cx).is_ready() {
                                this.closing = Closing::Closed;
                            } else {
                                return Poll::Pending;
                            }
                        }
                    }
                }
                Closing::Closed => return Poll::Ready(Ok(())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn a_closing_side_reads_what_the_peer_still_sends_until_it_closes() {
        let (server, mut client) = tokio::io::duplex(64);
        let mut lingering = Lingering::new(server, Arc::new(Activity::new()));
        lingering.write_all(b"last response").await.unwrap();
        client.write_all(b"a pipelined request").await.unwrap();
        let closing = tokio::spawn(async move { lingering.shutdown().await });
        let mut seen = Vec::new();
        client.read_to_end(&mut seen).await.unwrap();
        assert_eq!(seen, b"last response", "the write side ended first");
        assert!(!closing.is_finished(), "still reading what the client sends");
        client.write_all(b"more").await.unwrap();
        drop(client);
        closing.await.unwrap().unwrap();
    }

    /// An activity whose client said its last request was its last.
    fn client_done() -> Arc<Activity> {
        let activity = Arc::new(Activity::new());
        let request = http::Request::builder()
            .header(http::header::CONNECTION, "close")
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        activity.begin(&request).answered(&http::HeaderMap::new());
        assert!(activity.client_done());
        activity
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_said_it_is_done_is_not_waited_for() {
        let (server, mut client) = tokio::io::duplex(64);
        let mut lingering = Lingering::new(server, client_done());
        lingering.write_all(b"last response").await.unwrap();
        let started = tokio::time::Instant::now();
        // The client has not closed its side, and need not.
        lingering.shutdown().await.unwrap();
        assert_eq!(started.elapsed(), Duration::ZERO);
        let mut seen = Vec::new();
        client.read_to_end(&mut seen).await.unwrap();
        assert_eq!(seen, b"last response");
    }

    #[tokio::test(start_paused = true)]
    async fn what_a_done_client_still_sent_is_read_while_lingering() {
        // Said to be done, yet something of it is unread (a body the
        // server answered before reading): closing now would reset.
        let (server, mut client) = tokio::io::duplex(64);
        let mut lingering = Lingering::new(server, client_done());
        client.write_all(b"the rest of a body").await.unwrap();
        let started = tokio::time::Instant::now();
        lingering.shutdown().await.unwrap();
        assert_eq!(started.elapsed(), LINGER, "it lingered for what might follow");
    }

    #[tokio::test(start_paused = true)]
    async fn lingering_is_bounded_in_time() {
        let (server, _client) = tokio::io::duplex(64);
        let mut lingering = Lingering::new(server, Arc::new(Activity::new()));
        let started = tokio::time::Instant::now();
        lingering.shutdown().await.unwrap();
        assert_eq!(started.elapsed(), LINGER);
    }
}
