//! Accepting an HTTP server's connections (from any listener of byte
//! streams), and refusing those past its connection bound.

use std::io;
use std::time::Duration;

use bytes::Bytes;

use crate::context::ConnectionInfo;
use crate::transport::StreamListener;

/// Connections for an HTTP server; one past the connection bound is
/// answered `503` with a JSON-RPC error body (over TLS, closed).
pub(crate) struct HttpAccept<L> {
    pub(crate) listener: L,
    pub(crate) refusal: Option<Bytes>,
}

impl<L: StreamListener> crate::transport::Accept for HttpAccept<L> {
    type Conn = (L::Stream, ConnectionInfo);

    async fn accept_conn(&mut self) -> io::Result<((L::Stream, ConnectionInfo), ConnectionInfo)> {
        let (stream, info) = self.listener.accept_stream().await?;
        Ok(((stream, info.clone()), info))
    }

    fn refuse(
        &self,
        (mut stream, _): (L::Stream, ConnectionInfo),
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
