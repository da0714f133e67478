//! Accepting an HTTP server's TCP connections, and refusing those past
//! its connection bound.

use std::io;
use std::time::Duration;

use bytes::Bytes;

use crate::context::ConnectionInfo;

/// TCP connections for an HTTP server; one past the connection bound is
/// answered `503` with a JSON-RPC error body (over TLS, closed).
pub(crate) struct HttpAccept {
    pub(crate) listener: tokio::net::TcpListener,
    pub(crate) refusal: Option<Bytes>,
}

impl crate::transport::Accept for HttpAccept {
    type Conn = (tokio::net::TcpStream, ConnectionInfo);

    async fn accept_conn(&mut self) -> io::Result<((tokio::net::TcpStream, ConnectionInfo), ConnectionInfo)> {
        let (stream, _) = self.listener.accept().await?;
        let _ = stream.set_nodelay(true);
        crate::transport::tcp::keep_alive(&stream);
        let info = crate::transport::tcp::info(&stream);
        Ok(((stream, info.clone()), info))
    }

    fn refuse(
        &self,
        (mut stream, _): (tokio::net::TcpStream, ConnectionInfo),
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let refusal = self.refusal.clone();
        async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            if let Some(refusal) = refusal {
                // Read the request's head first (briefly): an HTTP client
                // takes an answer to a request it has sent, not one that
                // comes before it.
                let mut head = Vec::new();
                let mut chunk = [0u8; 2048];
                let reading = async {
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => head.extend_from_slice(&chunk[..n]),
                        }
                    }
                };
                let _ = tokio::time::timeout(Duration::from_millis(500), reading).await;
                let _ = stream.write_all(&refusal).await;
            }
            let _ = stream.shutdown().await;
        }
    }
}

/// The whole HTTP/1.1 response refusing a connection past the bound.
pub(crate) fn busy_response() -> Bytes {
    let body = crate::server::busy_frame();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let mut response = head.into_bytes();
    response.extend_from_slice(&body);
    response.into()
}
