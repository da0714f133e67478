//! UDP: one JSON-RPC frame per datagram. [`UdpDialer`] gives a
//! [`Client`](crate::client::Client) (or `Client::connect("udp://…")`) a
//! connected socket; [`Server::bind_udp`](crate::server::Server::bind_udp)
//! answers each datagram to its sender.
//!
//! Nothing is retransmitted: a datagram lost on the way is a call that
//! times out. A frame larger than the datagram limit (by default
//! [`MAX_DATAGRAM`], the most an IPv4 datagram carries) is not sent.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use tokio::net::UdpSocket;

use super::connection::{Connection, Dialer};
use crate::codec::Inbound;
use crate::context::ConnectionInfo;

/// The most bytes one UDP datagram carries over IPv4: 65 507.
pub const MAX_DATAGRAM: usize = 65_507;

pub(crate) fn info(socket: &UdpSocket, peer: Option<SocketAddr>) -> ConnectionInfo {
    ConnectionInfo {
        transport: "udp",
        peer_addr: peer.map(|a| a.to_string()),
        local_addr: socket.local_addr().ok().map(|a| a.to_string()),
    }
}

/// A connection over a UDP socket connected to one server: each frame one
/// datagram. Datagrams over `max_datagram` bytes, either way, are dropped
/// (with a log line) and their calls time out; a "port unreachable" from
/// the network is not the end of the connection (a server may yet come
/// up), so calls to a server that is not there time out too.
pub fn connection(socket: UdpSocket, max_datagram: usize) -> Connection {
    let max_datagram = max_datagram.clamp(1, MAX_DATAGRAM);
    let info = info(&socket, socket.peer_addr().ok());
    let socket = Arc::new(socket);
    let reading = Arc::clone(&socket);
    // One byte more than the limit tells a datagram over it.
    let incoming = futures_util::stream::unfold(
        (reading, vec![0u8; max_datagram + 1]),
        move |(socket, mut buffer)| async move {
            loop {
                match socket.recv(&mut buffer).await {
                    Ok(n) if n > max_datagram => {
                        let oversized = Inbound::Oversized { limit: max_datagram };
                        return Some((Ok(oversized), (socket, buffer)));
                    }
                    Ok(n) => {
                        let frame = Inbound::Frame(Bytes::copy_from_slice(&buffer[..n]));
                        return Some((Ok(frame), (socket, buffer)));
                    }
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        tracing::debug!("udp: the server's port is unreachable");
                    }
                    Err(e) => return Some((Err(e), (socket, buffer))),
                }
            }
        },
    );
    let outgoing = futures_util::sink::unfold(socket, move |socket, frame: Bytes| async move {
        if frame.len() > max_datagram {
            // Not the end of the connection: this one frame cannot go, and
            // its call times out, as for a datagram lost on the way.
            tracing::warn!(
                bytes = frame.len(),
                limit = max_datagram,
                "udp: a frame over the datagram limit is not sent"
            );
            return Ok(socket);
        }
        match socket.send(&frame).await {
            Ok(_) => Ok(socket),
            // Nobody there yet: the datagram is lost, as any may be.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(socket),
            Err(e) => Err(e),
        }
    });
    Connection::new(incoming, outgoing, info)
}

/// Dials a UDP server: a socket on a free local port, connected to it.
#[derive(Debug, Clone)]
pub struct UdpDialer {
    addr: String,
    max_datagram: usize,
}

impl UdpDialer {
    /// A dialer for `addr` (`host:port`), with datagrams of at most
    /// [`MAX_DATAGRAM`] bytes.
    pub fn new(addr: impl Into<String>) -> Self {
        UdpDialer {
            addr: addr.into(),
            max_datagram: MAX_DATAGRAM,
        }
    }

    /// The most bytes in one datagram, sent or received.
    pub fn max_datagram(mut self, bytes: usize) -> Self {
        self.max_datagram = bytes.clamp(1, MAX_DATAGRAM);
        self
    }
}

impl Dialer for UdpDialer {
    async fn dial(&self) -> io::Result<Connection> {
        let server = tokio::net::lookup_host(&self.addr).await?.next().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("{}: no address", self.addr))
        })?;
        let local = if server.is_ipv6() {
            SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0))
        } else {
            SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, 0))
        };
        let socket = UdpSocket::bind(local).await?;
        socket.connect(server).await?;
        Ok(connection(socket, self.max_datagram))
    }
}
