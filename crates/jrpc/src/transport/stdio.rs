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
/// To serve a router on it, see [`Server::serve_stdio`](crate::server::Server::serve_stdio)
/// or [`serve_stdio`](crate::server::serve_stdio).
pub fn connection(framing: Framing, max_frame_len: usize) -> Connection {
    Connection::over_io(
        tokio::io::stdin(),
        tokio::io::stdout(),
        framing,
        max_frame_len,
        info(),
    )
}
