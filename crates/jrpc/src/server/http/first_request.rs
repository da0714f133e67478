//! A connection's byte stream until its first request: a deadline for it
//! to begin, and the protocol its first bytes name.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite};

/// A connection's byte stream that fails its reads if the first request has
/// not begun to arrive in time. hyper reads the protocol preface with no
/// timeout of its own, so a client that connects and says nothing (or only
/// `P`) would hold its slot forever. The deadline is lifted once the first
/// 24 bytes (an HTTP/2 preface, or any HTTP/1.1 request line) are in, or
/// once the server writes (it is answering).
///
/// [`poll_protocol`](Self::poll_protocol) tells HTTP/2 from HTTP/1.1 by
/// those first bytes, read in one piece of up to [`FIRST_READ`] bytes and
/// kept for the reads that follow: a request that arrived whole is read
/// from the socket once, and hyper parses it in one go.
pub(super) struct FirstRequest<I> {
    io: I,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    read: usize,
    /// What was read to tell the protocol, for the reads that follow.
    first: BytesMut,
}

/// What a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Protocol {
    Http1,
    /// HTTP/2 with prior knowledge (or after ALPN): its preface came first.
    Http2,
}

/// What every HTTP/2 connection begins with (RFC 9113 §3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Bytes after which the first request is under way.
const FIRST_REQUEST_BYTES: usize = PREFACE.len();

/// What the first read from the socket asks for at least: a usual
/// request, head and body.
const FIRST_READ: usize = 2048;

impl<I> FirstRequest<I> {
    pub(super) fn new(io: I, limit: Option<Duration>) -> Self {
        FirstRequest {
            io,
            deadline: limit.map(|limit| Box::pin(tokio::time::sleep(limit))),
            read: 0,
            first: BytesMut::new(),
        }
    }

    /// Notes `n` bytes read from the socket, and fails a wait that
    /// outlasts the deadline.
    fn after_read(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match polled {
            Poll::Ready(Ok(n)) => {
                self.read += n;
                if self.read >= FIRST_REQUEST_BYTES {
                    self.deadline = None;
                }
                Poll::Ready(Ok(n))
            }
            Poll::Pending => {
                let expired = self
                    .deadline
                    .as_mut()
                    .is_some_and(|deadline| std::future::Future::poll(deadline.as_mut(), cx).is_ready());
                if expired {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no request within the first-request timeout",
                    )));
                }
                Poll::Pending
            }
            failed => failed,
        }
    }
}

impl<I: AsyncRead + Unpin> FirstRequest<I> {
    /// The protocol the connection speaks, once its first bytes tell:
    /// HTTP/2 if they are its preface, else HTTP/1.1 (also when the client
    /// closes before it says anything; hyper then sees the end). What is
    /// read is kept for the reads that follow.
    pub(super) fn poll_protocol(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Protocol>> {
        loop {
            let seen = &self.first[..self.first.len().min(PREFACE.len())];
            if !PREFACE.starts_with(seen) {
                return Poll::Ready(Ok(Protocol::Http1));
            }
            if seen.len() == PREFACE.len() {
                return Poll::Ready(Ok(Protocol::Http2));
            }
            if self.first.capacity() == self.first.len() {
                self.first.reserve(FIRST_READ);
            }
            let polled = tokio_util::io::poll_read_buf(Pin::new(&mut self.io), cx, &mut self.first);
            if std::task::ready!(self.after_read(cx, polled))? == 0 {
                if self.first.is_empty() {
                    self.first = BytesMut::new();
                }
                return Poll::Ready(Ok(Protocol::Http1));
            }
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for FirstRequest<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.first.is_empty() {
            let n = this.first.len().min(buf.remaining());
            buf.put_slice(&this.first[..n]);
            this.first.advance(n);
            if this.first.is_empty() {
                // An idle connection keeps no buffer.
                this.first = BytesMut::new();
            }
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        let polled = polled.map_ok(|()| buf.filled().len() - before);
        this.after_read(cx, polled).map_ok(|_| ())
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for FirstRequest<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        self.deadline = None;
        Pin::new(&mut self.io).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.deadline = None;
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    /// A byte stream that hands out its bytes, at most `piece` at a time,
    /// and counts the reads that reach it.
    struct Counted {
        data: &'static [u8],
        piece: usize,
        reads: usize,
    }

    impl AsyncRead for Counted {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            self.reads += 1;
            let n = self.data.len().min(buf.remaining()).min(self.piece);
            buf.put_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Poll::Ready(Ok(()))
        }
    }

    const REQUEST: &[u8] = b"POST / HTTP/1.1\r\nHost: example\r\nContent-Type: application/json\r\n\
        Content-Length: 52\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"add\",\"params\":[1,2]}";

    async fn protocol(io: &mut FirstRequest<Counted>) -> io::Result<Protocol> {
        std::future::poll_fn(|cx| io.poll_protocol(cx)).await
    }

    async fn read_to_end(io: &mut FirstRequest<Counted>) -> Vec<u8> {
        let mut read = Vec::new();
        io.read_to_end(&mut read).await.unwrap();
        read
    }

    #[tokio::test]
    async fn the_first_bytes_tell_the_protocol_and_are_read_again() {
        let h2: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\x12\x04\0\0\0\0\0";
        let cases: &[(&'static [u8], usize, Protocol)] = &[
            (REQUEST, 4096, Protocol::Http1),
            // Told at the first byte that differs from the preface.
            (REQUEST, 1, Protocol::Http1),
            (b"PRI * HTTP/1.1\r\n\r\n", 3, Protocol::Http1),
            (h2, 4096, Protocol::Http2),
            (h2, 5, Protocol::Http2),
            // A client that closes at once, or within the preface.
            (b"", 4096, Protocol::Http1),
            (b"PRI * HT", 4096, Protocol::Http1),
        ];
        for &(data, piece, expected) in cases {
            let mut io = FirstRequest::new(
                Counted {
                    data,
                    piece,
                    reads: 0,
                },
                None,
            );
            assert_eq!(
                protocol(&mut io).await.unwrap(),
                expected,
                "{data:?} in pieces of {piece}"
            );
            assert_eq!(read_to_end(&mut io).await, data, "{data:?} in pieces of {piece}");
            assert_eq!(io.first.capacity(), 0, "an idle connection keeps no buffer");
        }
    }

    #[tokio::test]
    async fn a_request_in_one_piece_is_read_from_the_socket_once() {
        let mut io = FirstRequest::new(
            Counted {
                data: REQUEST,
                piece: usize::MAX,
                reads: 0,
            },
            None,
        );
        assert_eq!(protocol(&mut io).await.unwrap(), Protocol::Http1);
        assert_eq!(io.io.reads, 1);
        assert!(io.deadline.is_none() && io.read == REQUEST.len());
        // hyper's reads take what was read, then find the end.
        assert_eq!(read_to_end(&mut io).await, REQUEST);
        assert_eq!(io.io.reads, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_says_nothing_in_time_is_refused() {
        struct Silent;
        impl AsyncRead for Silent {
            fn poll_read(
                self: Pin<&mut Self>,
                _cx: &mut Context<'_>,
                _buf: &mut tokio::io::ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                Poll::Pending
            }
        }
        let mut io = FirstRequest::new(Silent, Some(Duration::from_secs(2)));
        let error = std::future::poll_fn(|cx| io.poll_protocol(cx)).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    }
}
