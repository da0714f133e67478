//! TCP: [`TcpListener`] for a [`Server`](crate::server::Server) (or
//! [`Server::bind_tcp`](crate::server::Server::bind_tcp)), [`TcpDialer`] for a
//! [`Client`](crate::client::Client) (or `Client::connect("tcp://…")`).

use std::io;

use tokio::net::TcpStream;

use super::connection::{Connection, Dialer, Listener};
use crate::codec::{BufferBudget, Framing};
use crate::context::ConnectionInfo;

pub(crate) fn info(stream: &TcpStream) -> ConnectionInfo {
    ConnectionInfo {
        transport: "tcp",
        peer_addr: stream.peer_addr().ok().map(addr_text),
        local_addr: stream.local_addr().ok().map(addr_text),
    }
}

/// [`info`] of an accepted connection, whose peer `accept` has told
/// already (one system call fewer).
pub(crate) fn accepted_info(stream: &TcpStream, peer: std::net::SocketAddr) -> ConnectionInfo {
    ConnectionInfo {
        transport: "tcp",
        peer_addr: Some(addr_text(peer)),
        local_addr: stream.local_addr().ok().map(addr_text),
    }
}

/// `addr` as `Display` writes it. An IPv4 address is written by hand: the
/// formatting machinery took thousands of instructions per address, which
/// a connection per request paid twice.
pub(crate) fn addr_text(addr: std::net::SocketAddr) -> String {
    let std::net::SocketAddr::V4(v4) = addr else {
        return addr.to_string();
    };
    let mut text = String::with_capacity(21);
    let mut number = itoa::Buffer::new();
    for (i, octet) in v4.ip().octets().into_iter().enumerate() {
        if i > 0 {
            text.push('.');
        }
        text.push_str(number.format(octet));
    }
    text.push(':');
    text.push_str(number.format(v4.port()));
    text
}

/// A connection over a connected TCP stream. Small frames should go out at
/// once, so Nagle's algorithm is turned off.
pub fn connection(stream: TcpStream, framing: Framing, max_frame_len: usize) -> Connection {
    let _ = stream.set_nodelay(true);
    let info = info(&stream);
    let (read, write) = stream.into_split();
    Connection::over_io(read, write, framing, max_frame_len, info)
}

/// Accepts TCP connections, each framed with one [`Framing`].
#[derive(Debug)]
pub struct TcpListener {
    listener: tokio::net::TcpListener,
    /// Whether accepted connections inherit their options ([`inherits`]).
    inherited: bool,
    framing: Framing,
    max_frame_len: usize,
    budget: Option<BufferBudget>,
}

impl TcpListener {
    /// Listens on `addr` (port 0 picks a free port).
    pub async fn bind(
        addr: impl tokio::net::ToSocketAddrs,
        framing: Framing,
        max_frame_len: usize,
    ) -> io::Result<Self> {
        Ok(Self::from_tokio(listen(addr).await?, framing, max_frame_len))
    }

    /// Serves connections accepted by a listener already bound.
    pub fn from_tokio(listener: tokio::net::TcpListener, framing: Framing, max_frame_len: usize) -> Self {
        TcpListener {
            inherited: inherits(&listener),
            listener,
            framing,
            max_frame_len,
            budget: None,
        }
    }

    /// Charges every connection's unfinished frame to `budget`, shared with
    /// other listeners (see [`BufferBudget`]); without one, each connection
    /// is bounded only by the frame limit.
    pub fn buffer_budget(mut self, budget: BufferBudget) -> Self {
        self.budget = Some(budget);
        self
    }
}

impl Listener for TcpListener {
    async fn accept(&mut self) -> io::Result<Connection> {
        let (stream, peer) = self.listener.accept().await?;
        tune_accepted(&stream, self.inherited);
        let info = accepted_info(&stream, peer);
        let (read, write) = stream.into_split();
        Ok(match &self.budget {
            None => Connection::over_io(read, write, self.framing, self.max_frame_len, info),
            Some(budget) => {
                Connection::over_io_budgeted(read, write, self.framing, self.max_frame_len, budget, info)
            }
        })
    }

    fn local_addr(&self) -> String {
        format!("tcp://{}", address(&self.listener))
    }
}

/// Opens TCP connections to one address.
#[derive(Debug, Clone)]
pub struct TcpDialer {
    addr: String,
    framing: Framing,
    max_frame_len: usize,
}

impl TcpDialer {
    /// Dials `addr` (`host:port`), framing with `framing`.
    pub fn new(addr: impl Into<String>, framing: Framing, max_frame_len: usize) -> Self {
        TcpDialer {
            addr: addr.into(),
            framing,
            max_frame_len,
        }
    }
}

impl Dialer for TcpDialer {
    async fn dial(&self) -> io::Result<Connection> {
        let stream = TcpStream::connect(self.addr.as_str()).await?;
        Ok(connection(stream, self.framing, self.max_frame_len))
    }
}

/// Turns on TCP keepalive for an accepted socket, so that a client that
/// vanished without a FIN or a reset (a cable pulled, a laptop closed) is
/// noticed: probes after 60 s of silence, every 10 s.
pub(crate) fn keep_alive(stream: &TcpStream) {
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_keepalive(&probes()) {
        tracing::debug!(error = %e, "TCP keepalive not set");
    }
}

const KEEPALIVE_TIME: std::time::Duration = std::time::Duration::from_secs(60);
const KEEPALIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

fn probes() -> socket2::TcpKeepalive {
    socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_TIME)
        .with_interval(KEEPALIVE_INTERVAL)
}

/// Listens on `addr` (port 0 picks a free port) as a server's listener
/// should: every connection it accepts has Nagle's algorithm off (small
/// replies go out at once) and keepalive probes on (a vanished client is
/// noticed), set on the socket before it listens. Where accepted sockets
/// inherit their listener's options (Linux), a server given this listener
/// sets nothing per connection: four system calls fewer each.
///
/// ```no_run
/// # async fn run() -> std::io::Result<()> {
/// let listener = jrpc::transport::tcp::listen("127.0.0.1:0").await?;
/// let router = jrpc::Router::new().sync_method("ping", || Ok("pong"));
/// let serving = jrpc::server::http::HttpServer::new(router).serve_tcp(listener);
/// # Ok(()) }
/// ```
pub async fn listen(addr: impl tokio::net::ToSocketAddrs) -> io::Result<tokio::net::TcpListener> {
    let mut failed = None;
    for addr in tokio::net::lookup_host(addr).await? {
        match listen_on(addr) {
            Ok(listener) => return Ok(listener),
            Err(e) => failed = Some(e),
        }
    }
    Err(failed.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to listen on")))
}

fn listen_on(addr: std::net::SocketAddr) -> io::Result<tokio::net::TcpListener> {
    let socket = match addr {
        std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    // As tokio's own `bind` does on Unix: a restarted server gets its port
    // back while the old connections' sockets wait out TIME_WAIT.
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    let options = socket2::SockRef::from(&socket);
    // Not fatal: each connection is then set on its own (`inherits`).
    let _ = options.set_tcp_nodelay(true);
    let _ = options.set_tcp_keepalive(&probes());
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Whether the connections `listener` accepts have Nagle's algorithm off
/// and [`keep_alive`]'s probes from the listener itself ([`listen`]): Linux
/// copies a listener's socket options to each socket it accepts. Read back
/// once per listener; a listener made elsewhere usually has none of them,
/// and its connections are set one by one ([`tune_accepted`]).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn inherits(listener: &tokio::net::TcpListener) -> bool {
    let options = socket2::SockRef::from(listener);
    options.tcp_nodelay().unwrap_or(false)
        && options.keepalive().unwrap_or(false)
        && options.tcp_keepalive_time().is_ok_and(|t| t == KEEPALIVE_TIME)
        && options
            .tcp_keepalive_interval()
            .is_ok_and(|t| t == KEEPALIVE_INTERVAL)
}

/// Elsewhere accepted sockets are not known to inherit them.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn inherits(_listener: &tokio::net::TcpListener) -> bool {
    false
}

/// Nagle's algorithm off and [`keep_alive`] on for an accepted connection,
/// unless its listener passed them on ([`inherits`]).
pub(crate) fn tune_accepted(stream: &TcpStream, inherited: bool) {
    if !inherited {
        let _ = stream.set_nodelay(true);
        keep_alive(stream);
    }
}

/// `host:port` of a bound listener.
pub(crate) fn address(listener: &tokio::net::TcpListener) -> String {
    listener.local_addr().map(|a| a.to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn addresses_read_as_display_writes_them() {
        for addr in [
            "127.0.0.1:4000",
            "0.0.0.0:0",
            "255.255.255.255:65535",
            "198.18.0.1:80",
            "[::1]:443",
            "[fe80::1]:1",
        ] {
            let addr: std::net::SocketAddr = addr.parse().unwrap();
            assert_eq!(super::addr_text(addr), addr.to_string());
        }
    }

    /// What a server wants of a connection: Nagle's algorithm off,
    /// keepalive probes after 60 s, every 10 s.
    fn assert_tuned(stream: &tokio::net::TcpStream) {
        let socket = socket2::SockRef::from(stream);
        assert!(socket.tcp_nodelay().unwrap());
        assert!(socket.keepalive().unwrap());
        assert_eq!(socket.tcp_keepalive_time().unwrap(), Duration::from_secs(60));
        assert_eq!(socket.tcp_keepalive_interval().unwrap(), Duration::from_secs(10));
    }

    #[tokio::test]
    async fn accepted_connections_get_their_options_from_the_listener_or_on_their_own() {
        let listener = super::listen("127.0.0.1:0").await.unwrap();
        let inherited = super::inherits(&listener);
        // Linux passes a listener's options on; that is what saves the
        // system calls.
        assert_eq!(inherited, cfg!(any(target_os = "linux", target_os = "android")));
        let addr = listener.local_addr().unwrap();
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (accepted, peer) = listener.accept().await.unwrap();
        super::tune_accepted(&accepted, inherited);
        assert_tuned(&accepted);
        assert_eq!(super::accepted_info(&accepted, peer), super::info(&accepted));

        // A listener made elsewhere: each connection is set on its own,
        // those already waiting to be accepted included.
        let plain = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = tokio::net::TcpStream::connect(plain.local_addr().unwrap())
            .await
            .unwrap();
        assert!(!super::inherits(&plain));
        let (accepted, _) = plain.accept().await.unwrap();
        super::tune_accepted(&accepted, false);
        assert_tuned(&accepted);
    }
}
