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
/// On Unix, inside a tokio runtime with IO enabled, a stdin or stdout that
/// is a pipe or a socket of its own (a process spawned by its client) is
/// read and written through the reactor, without a thread in between, and
/// is in non-blocking mode until the connection is dropped; a terminal or a
/// file, and a pipe or socket that two of stdin, stdout and stderr share
/// (`2>&1`, one socket for both ways), go through tokio's blocking stdio,
/// so that nothing else meets a full pipe it cannot wait on. Stdin is then
/// read from the pipe itself: read nothing through [`std::io::stdin`]
/// before (what its buffer holds would not be seen), and let the process
/// end normally (after `std::process::exit` the pipe stays non-blocking
/// for whoever shares it).
///
/// To serve a router on it, see [`Server::serve_stdio`](crate::server::Server::serve_stdio)
/// or [`serve_stdio`](crate::server::serve_stdio).
pub fn connection(framing: Framing, max_frame_len: usize) -> Connection {
    Connection::over_io(reader(), writer(), framing, max_frame_len, info())
}

#[cfg(unix)]
fn reader() -> impl tokio::io::AsyncRead + Send + 'static {
    use std::os::fd::AsFd;
    let (stdin, stdout, stderr) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
    let others = [stdout.as_fd(), stderr.as_fd()];
    match super::inherited::Inherited::adopt(stdin.as_fd(), &others, tokio::io::Interest::READABLE) {
        Some(pipe) => tokio_util::either::Either::Left(pipe),
        None => tokio_util::either::Either::Right(tokio::io::stdin()),
    }
}

#[cfg(unix)]
fn writer() -> impl tokio::io::AsyncWrite + Send + 'static {
    use std::io::Write as _;
    use std::os::fd::AsFd;
    let (stdin, stdout, stderr) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
    // What was printed before goes out before the first frame.
    let _ = stdout.lock().flush();
    let others = [stdin.as_fd(), stderr.as_fd()];
    match super::inherited::Inherited::adopt(stdout.as_fd(), &others, tokio::io::Interest::WRITABLE) {
        Some(pipe) => tokio_util::either::Either::Left(pipe),
        None => tokio_util::either::Either::Right(tokio::io::stdout()),
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
