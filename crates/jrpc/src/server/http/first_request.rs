//! A connection's byte stream with a deadline for its first request, read
//! from the socket in one piece.

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
/// hyper-util reads the first 24 bytes on their own (to tell an HTTP/2
/// preface from an HTTP/1.1 request) and hyper then reads the rest: two
/// reads from the socket for a request that arrived in one piece. The
/// first read here takes up to [`FIRST_READ`] bytes and hands out the
/// surplus to the reads that follow.
pub(super) struct FirstRequest<I> {
    io: I,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    read: usize,
    /// What the first read took beyond what its caller asked for.
    surplus: BytesMut,
}

/// Bytes after which the first request is under way.
const FIRST_REQUEST_BYTES: usize = 24;

/// What the first read from the socket asks for at least: a usual
/// request, head and body.
const FIRST_READ: usize = 2048;

impl<I> FirstRequest<I> {
    pub(super) fn new(io: I, limit: Option<Duration>) -> Self {
        FirstRequest {
            io,
            deadline: limit.map(|limit| Box::pin(tokio::time::sleep(limit))),
            read: 0,
            surplus: BytesMut::new(),
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
        if !this.surplus.is_empty() {
            let n = this.surplus.len().min(buf.remaining());
            buf.put_slice(&this.surplus[..n]);
            this.surplus.advance(n);
            if this.surplus.is_empty() {
                // An idle connection keeps no buffer.
                this.surplus = BytesMut::new();
            }
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let polled = if this.read == 0 && buf.remaining() < FIRST_READ {
            // The first read: into a buffer of its own, large enough for
            // the whole request (see the type's comment).
            let mut first = BytesMut::with_capacity(FIRST_READ);
            let polled = tokio_util::io::poll_read_buf(Pin::new(&mut this.io), cx, &mut first);
            if matches!(polled, Poll::Ready(Ok(_))) {
                let n = first.len().min(buf.remaining());
                buf.put_slice(&first[..n]);
                if n < first.len() {
                    first.advance(n);
                    this.read += first.len();
                    this.surplus = first;
                }
            }
            polled.map_ok(|_| ())
        } else {
            Pin::new(&mut this.io).poll_read(cx, buf)
        };
        match polled {
            Poll::Ready(Ok(())) => {
                self.read += buf.filled().len() - before;
                if self.read >= FIRST_REQUEST_BYTES {
                    self.deadline = None;
                }
                Poll::Ready(Ok(()))
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
            other => other,
        }
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

    /// A byte stream that hands out its bytes to whatever read asks first,
    /// and counts the reads that reach it.
    struct Counted {
        data: &'static [u8],
        reads: usize,
    }

    impl AsyncRead for Counted {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            self.reads += 1;
            let n = self.data.len().min(buf.remaining());
            buf.put_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Poll::Ready(Ok(()))
        }
    }

    const REQUEST: &[u8] = b"POST / HTTP/1.1\r\nHost: example\r\nContent-Type: application/json\r\n\
        Content-Length: 52\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"add\",\"params\":[1,2]}";

    #[tokio::test]
    async fn a_request_is_read_from_the_socket_once_however_its_reader_splits_it() {
        // hyper-util asks for the 24 bytes of an HTTP/2 preface, hyper for
        // the rest; a reader of single bytes asks for one at a time.
        for first in [24, 1, 5, 4096] {
            let mut io = FirstRequest::new(
                Counted {
                    data: REQUEST,
                    reads: 0,
                },
                None,
            );
            let mut head = vec![0u8; first];
            let n = io.read(&mut head).await.unwrap();
            let mut read = head[..n].to_vec();
            let mut chunk = [0u8; 7];
            loop {
                let n = io.read(&mut chunk).await.unwrap();
                if n == 0 {
                    break;
                }
                read.extend_from_slice(&chunk[..n]);
            }
            assert_eq!(read, REQUEST, "first read of {first}");
            // One read for the request, one for the end of the stream.
            assert_eq!(io.io.reads, 2, "first read of {first}");
            assert_eq!(io.surplus.capacity(), 0, "an idle connection keeps no buffer");
            assert_eq!(io.read, REQUEST.len());
        }
    }

    #[tokio::test]
    async fn the_deadline_is_lifted_by_a_first_read_that_brings_the_request() {
        let mut io = FirstRequest::new(
            Counted {
                data: REQUEST,
                reads: 0,
            },
            Some(Duration::from_secs(1)),
        );
        let mut head = [0u8; 4];
        io.read_exact(&mut head).await.unwrap();
        assert!(io.deadline.is_none(), "the whole request is in");
    }
}
