//! Unix domain sockets: serve with [`Server::bind_unix`](super::Server::bind_unix),
//! call with [`ClientBuilder::connect_unix`](crate::client::ClientBuilder::connect_unix).

use std::io;

use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};

use super::server::Listen;
use crate::peer::ConnectionInfo;

fn info(stream: &UnixStream) -> ConnectionInfo {
    let path = |a: io::Result<tokio::net::unix::SocketAddr>| {
        a.ok()
            .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
    };
    ConnectionInfo {
        transport: "unix",
        peer_addr: path(stream.peer_addr()),
        local_addr: path(stream.local_addr()),
    }
}

pub(crate) fn split(stream: UnixStream) -> (OwnedReadHalf, OwnedWriteHalf, ConnectionInfo) {
    let info = info(&stream);
    let (read, write) = stream.into_split();
    (read, write, info)
}

impl Listen for UnixListener {
    type Conn = UnixStream;

    async fn accept_conn(&self) -> io::Result<(UnixStream, ConnectionInfo)> {
        let (stream, _) = self.accept().await?;
        let info = info(&stream);
        Ok((stream, info))
    }

    fn address(&self) -> String {
        self.local_addr()
            .ok()
            .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
            .unwrap_or_default()
    }
}
