//! TCP: serve with [`Server::bind_tcp`](super::Server::bind_tcp), call with
//! [`ClientBuilder::connect_tcp`](crate::client::ClientBuilder::connect_tcp).

use std::io;

use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

use super::server::Listen;
use crate::peer::ConnectionInfo;

pub(crate) fn info(stream: &TcpStream) -> ConnectionInfo {
    ConnectionInfo {
        transport: "tcp",
        peer_addr: stream.peer_addr().ok().map(|a| a.to_string()),
        local_addr: stream.local_addr().ok().map(|a| a.to_string()),
    }
}

/// Splits a connected stream for a peer. Small frames should go out at once,
/// so Nagle's algorithm is turned off.
pub(crate) fn split(stream: TcpStream) -> (OwnedReadHalf, OwnedWriteHalf, ConnectionInfo) {
    let _ = stream.set_nodelay(true);
    let info = info(&stream);
    let (read, write) = stream.into_split();
    (read, write, info)
}

impl Listen for TcpListener {
    type Conn = TcpStream;

    async fn accept_conn(&self) -> io::Result<(TcpStream, ConnectionInfo)> {
        let (stream, _) = self.accept().await?;
        let _ = stream.set_nodelay(true);
        let info = info(&stream);
        Ok((stream, info))
    }

    fn address(&self) -> String {
        self.local_addr().map(|a| a.to_string()).unwrap_or_default()
    }
}
