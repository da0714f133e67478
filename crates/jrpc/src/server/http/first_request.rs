//! A connection's byte stream with a deadline for its first request.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};

/// A connection's byte stream that fails its reads if the first request has
/// not begun to arrive in time. hyper reads the protocol preface with no
/// timeout of its own, so a client that connects and says nothing (or only
/// `P`) would hold its slot forever. The deadline is lifted once the first
/// 24 bytes (an HTTP/2 preface, or any HTTP/1.1 request line) are in, or
/// once the server writes (it is answering).
pub(super) struct FirstRequest<I> {
    io: I,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    read: usize,
}

/// Bytes after which the first request is under way.
const FIRST_REQUEST_BYTES: usize = 24;

impl<I> FirstRequest<I> {
    pub(super) fn new(io: I, limit: Option<Duration>) -> Self {
        FirstRequest {
            io,
            deadline: limit.map(|limit| Box::pin(tokio::time::sleep(limit))),
            read: 0,
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for FirstRequest<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
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
