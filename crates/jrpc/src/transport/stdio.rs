//! This process's stdin and stdout as one connection.

use crate::codec::Framing;
use crate::context::ConnectionInfo;
use crate::transport::Connection;

/// The connection info recorded for stdio.
pub(crate) fn info() -> ConnectionInfo {
    ConnectionInfo {
        transport: "stdio",
        peer_addr: None,
        local_addr: None,
    }
}

/// This process's stdin and stdout as a connection, split into frames with
/// `framing`. Nothing else may write to stdout meanwhile (send logs to
/// stderr).
///
/// On Unix, inside a tokio runtime, a stdin or stdout that is a pipe or a
/// socket (a process spawned by its client) is read and written through
/// the reactor, without a thread in between, and is in non-blocking mode
/// until the connection is dropped; a terminal or a file goes through
/// tokio's blocking stdio. Stdout stays blocking when stderr is the same
/// pipe (`2>&1`), so that logging never meets a full pipe it cannot wait
/// on.
///
/// To serve a router on it, see [`Server::serve_stdio`](crate::server::Server::serve_stdio)
/// or [`serve_stdio`](crate::server::serve_stdio).
pub fn connection(framing: Framing, max_frame_len: usize) -> Connection {
    Connection::over_io(reader(), writer(), framing, max_frame_len, info())
}

#[cfg(unix)]
fn reader() -> impl tokio::io::AsyncRead + Send + 'static {
    use std::os::fd::AsFd;
    use tokio_util::either::Either;
    match super::inherited::Inherited::adopt(std::io::stdin().as_fd(), tokio::io::Interest::READABLE) {
        Some(pipe) => Either::Left(pipe),
        None => Either::Right(tokio::io::stdin()),
    }
}

#[cfg(unix)]
fn writer() -> impl tokio::io::AsyncWrite + Send + 'static {
    use super::inherited::Inherited;
    use std::os::fd::AsFd;
    use tokio_util::either::Either;
    let stdout = std::io::stdout();
    let pipe = (!Inherited::same(stdout.as_fd(), std::io::stderr().as_fd()))
        .then(|| Inherited::adopt(stdout.as_fd(), tokio::io::Interest::WRITABLE))
        .flatten();
    match pipe {
        Some(pipe) => Either::Left(pipe),
        None => Either::Right(tokio::io::stdout()),
    }
}

#[cfg(not(unix))]
fn reader() -> impl tokio::io::AsyncRead + Send + 'static {
    tokio::io::stdin()
}

#[cfg(not(unix))]
fn writer() -> impl tokio::io::AsyncWrite + Send + 'static {
    tokio::io::stdout()
}
