//! Listeners of byte streams, for protocols that frame their own messages
//! (HTTP): a TCP listener, a Unix socket listener, or one of your own.

use std::future::Future;
use std::io;

use tokio::io::{AsyncRead, AsyncWrite};

use crate::context::ConnectionInfo;

/// Accepts byte streams: what an [`HttpServer`](crate::server::http::HttpServer)
/// serves on. A [`Listener`](super::Listener) gives framed JSON-RPC
/// connections; HTTP reads its own framing, so it takes the bytes.
///
/// Implemented for tokio's TCP and Unix listeners and for jrpc's
/// [`UnixListener`](super::unix::UnixListener) (which replaces a stale socket
/// file and removes its own when dropped).
///
/// ```no_run
/// use jrpc::server::http::HttpServer;
/// use jrpc::transport::unix::UnixListener;
///
/// # async fn run() -> std::io::Result<()> {
/// let router = jrpc::Router::new().sync_method("ping", || Ok("pong"));
/// let listener = UnixListener::bind("/tmp/app.sock", Default::default(), 1 << 20).await?;
/// let serving = HttpServer::new(router).serve(listener);
/// assert_eq!(serving.local_addr(), "http+unix://%2Ftmp%2Fapp.sock");
/// # Ok(()) }
/// ```
pub trait StreamListener: Send + 'static {
    /// An accepted connection's bytes.
    type Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static;

    /// The next connection, with what is known of it.
    fn accept_stream(&mut self) -> impl Future<Output = io::Result<(Self::Stream, ConnectionInfo)>> + Send;

    /// The URL of a server speaking `scheme` (`http`, `https`) on this
    /// listener: `http://127.0.0.1:4000`, or for a Unix socket the
    /// percent-encoded path as the host, `http+unix://%2Frun%2Fapp.sock`.
    fn url(&self, scheme: &str) -> String;
}

impl StreamListener for tokio::net::TcpListener {
    type Stream = tokio::net::TcpStream;

    async fn accept_stream(&mut self) -> io::Result<(tokio::net::TcpStream, ConnectionInfo)> {
        let (stream, peer) = self.accept().await?;
        // Small replies go out at once; a vanished client is noticed.
        super::tcp::tune_accepted(&stream, false);
        let info = super::tcp::accepted_info(&stream, peer);
        Ok((stream, info))
    }

    fn url(&self, scheme: &str) -> String {
        format!("{scheme}://{}", super::tcp::address(self))
    }
}

/// A TCP listener as an HTTP server of jrpc's serves it: the connections'
/// options are not set again where they are inherited from the listener
/// ([`listen`](super::tcp::listen), [`inherits`](super::tcp::inherits)),
/// and their local address is not looked up (HTTP's connection facts do
/// not carry it): two to five system calls fewer per connection than
/// tokio's listener as it is.
#[cfg(feature = "http-server")]
pub(crate) struct TunedTcpListener {
    listener: tokio::net::TcpListener,
    inherited: bool,
}

#[cfg(feature = "http-server")]
impl TunedTcpListener {
    pub(crate) fn new(listener: tokio::net::TcpListener) -> Self {
        TunedTcpListener {
            inherited: super::tcp::inherits(&listener),
            listener,
        }
    }
}

#[cfg(feature = "http-server")]
impl StreamListener for TunedTcpListener {
    type Stream = tokio::net::TcpStream;

    async fn accept_stream(&mut self) -> io::Result<(tokio::net::TcpStream, ConnectionInfo)> {
        let (stream, peer) = self.listener.accept().await?;
        super::tcp::tune_accepted(&stream, self.inherited);
        let info = ConnectionInfo {
            transport: "tcp",
            peer_addr: Some(super::tcp::addr_text(peer)),
            local_addr: None,
        };
        Ok((stream, info))
    }

    fn url(&self, scheme: &str) -> String {
        self.listener.url(scheme)
    }
}

#[cfg(unix)]
impl StreamListener for tokio::net::UnixListener {
    type Stream = tokio::net::UnixStream;

    async fn accept_stream(&mut self) -> io::Result<(tokio::net::UnixStream, ConnectionInfo)> {
        let (stream, _) = self.accept().await?;
        let info = super::unix::info(&stream);
        Ok((stream, info))
    }

    fn url(&self, scheme: &str) -> String {
        let address = self.local_addr().ok();
        let path = address.as_ref().and_then(|a| a.as_pathname());
        super::unix::url(scheme, path.unwrap_or(std::path::Path::new("")))
    }
}
