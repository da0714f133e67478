//! The client's side of a WebSocket: the handshake (with headers and TLS)
//! and [`WsDialer`].

use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite;

use super::{pump, Frames, WsOptions};

/// How long connecting (TCP, TLS and the handshake, each) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// A byte stream a WebSocket can run on (plain TCP or TLS).
trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

/// Connects a WebSocket client to `url` (`ws://` or `wss://`), sending
/// `headers` with the handshake, and starts its pump.
pub(crate) async fn connect(
    url: &str,
    headers: &http::HeaderMap,
    tls: Option<std::sync::Arc<tokio_rustls::rustls::ClientConfig>>,
    options: WsOptions,
) -> io::Result<(Frames, super::ClosingSink, crate::context::ConnectionInfo)> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
    let uri: http::Uri = url.parse().map_err(|e| invalid(format!("{url}: {e}")))?;
    let secure = match uri.scheme_str() {
        Some("ws") => false,
        Some("wss") => true,
        _ => return Err(invalid(format!("{url}: expected ws:// or wss://"))),
    };
    let host = uri
        .host()
        .ok_or_else(|| invalid(format!("{url}: no host")))?
        // An IPv6 literal comes in brackets, which a socket address has not.
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = crate::transport::tls::port_of(&uri, url, if secure { 443 } else { 80 })?;
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
    let _ = tcp.set_nodelay(true);
    let info = crate::context::ConnectionInfo {
        transport: "websocket",
        peer_addr: tcp.peer_addr().ok().map(|a| a.to_string()),
        local_addr: tcp.local_addr().ok().map(|a| a.to_string()),
    };
    let stream: Box<dyn Io> = if secure {
        let config = match tls {
            // WebSocket runs over HTTP/1.1 only.
            Some(config) if config.alpn_protocols.iter().all(|p| p == b"http/1.1") => config,
            Some(config) => {
                let mut config = (*config).clone();
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                std::sync::Arc::new(config)
            }
            None => crate::transport::tls::client_config_native(&[b"http/1.1"])?,
        };
        let name = crate::transport::tls::server_name(&host)?;
        Box::new(
            tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await
                .map_err(|e| crate::transport::tls::explain(e, &host))?,
        )
    } else {
        Box::new(tcp)
    };
    let mut request = url
        .into_client_request()
        .map_err(|e| invalid(format!("{url}: {e}")))?;
    for (name, value) in headers {
        request.headers_mut().append(name, value.clone());
    }
    let handshake = tokio_tungstenite::client_async_with_config(request, stream, Some(options.config()));
    let (socket, _response) = tokio::time::timeout(CONNECT_TIMEOUT, handshake)
        .await
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{url}: no WebSocket handshake within {CONNECT_TIMEOUT:?}"),
            )
        })?
        .map_err(|e| match e {
            tungstenite::Error::Io(e) => e,
            tungstenite::Error::Http(response) => io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!(
                    "WebSocket handshake refused: HTTP {}{}",
                    response.status(),
                    response
                        .body()
                        .as_ref()
                        .map(|b| format!(": {}", String::from_utf8_lossy(b)))
                        .unwrap_or_default()
                ),
            ),
            other => io::Error::other(other.to_string()),
        })?;
    let (frames_in, frames_out) = pump(socket, options);
    Ok((frames_in, frames_out, info))
}

/// Opens WebSocket connections to one URL (`ws://` or `wss://`), sending
/// the given headers with each handshake.
#[derive(Debug, Clone)]
pub struct WsDialer {
    url: String,
    headers: http::HeaderMap,
    tls: Option<std::sync::Arc<tokio_rustls::rustls::ClientConfig>>,
    options: WsOptions,
}

impl WsDialer {
    /// Dials `url` with default settings and no extra headers.
    pub fn new(url: impl Into<String>) -> Self {
        WsDialer {
            url: url.into(),
            headers: http::HeaderMap::new(),
            tls: None,
            options: WsOptions::default(),
        }
    }

    /// Sends these headers with every handshake (`Authorization`, say).
    pub fn headers(mut self, headers: http::HeaderMap) -> Self {
        self.headers = headers;
        self
    }

    /// TLS settings for `wss://` (default: the system's trusted roots).
    pub fn tls(mut self, config: std::sync::Arc<tokio_rustls::rustls::ClientConfig>) -> Self {
        self.tls = Some(config);
        self
    }

    /// Message size, ping and idle settings.
    pub fn options(mut self, options: WsOptions) -> Self {
        self.options = options;
        self
    }
}

impl crate::transport::Dialer for WsDialer {
    async fn dial(&self) -> io::Result<crate::transport::Connection> {
        let (incoming, outgoing, info) =
            connect(&self.url, &self.headers, self.tls.clone(), self.options).await?;
        Ok(crate::transport::Connection::unkinded(incoming, outgoing, info))
    }
}
