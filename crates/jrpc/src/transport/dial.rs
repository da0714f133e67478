//! The URL-scheme table: which transport a target URL names, and a dialer
//! for it. [`Client::connect`](crate::client::Client::connect), the `jrpc`
//! command line and MCP's client all read targets through it.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use jrpc::transport::dial::{dial, Scheme};
//!
//! assert_eq!(Scheme::of("unix:/tmp/rpc.sock"), Some(Scheme::Unix));
//! // A connection a peer of your own can run over.
//! let connection = dial("tcp://127.0.0.1:4000").await?;
//! let peer = jrpc::Peer::builder().connect(connection);
//! # Ok(()) }
//! ```

use std::io;

use super::{Connection, Dialer, DynDialer};
use crate::codec::Framing;
use crate::message::Limits;

/// A transport a target URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Scheme {
    /// `tcp://HOST:PORT`
    Tcp,
    /// `udp://HOST:PORT`
    Udp,
    /// `unix:PATH` or `unix://PATH`
    Unix,
    /// `http://…`, `https://…`, or `http+unix://%2FPATH/…` (HTTP over the
    /// Unix socket at PATH, percent-encoded as the host): requests and
    /// responses, not a connection (see
    /// [`HttpClient`](crate::client::HttpClient)).
    Http,
    /// `ws://…` or `wss://…`
    WebSocket,
    /// `nats://HOST:PORT/SUBJECT` (feature `nats`)
    Nats,
    /// `mqtt://HOST:PORT/TOPIC` (feature `mqtt`)
    Mqtt,
    /// `amqp://HOST:PORT/VHOST?queue=NAME` (feature `amqp`)
    Amqp,
}

/// Every prefix a target may start with, and the scheme it names.
const PREFIXES: [(&str, Scheme); 12] = [
    ("tcp://", Scheme::Tcp),
    ("udp://", Scheme::Udp),
    ("unix://", Scheme::Unix),
    ("unix:", Scheme::Unix),
    ("http://", Scheme::Http),
    ("https://", Scheme::Http),
    ("http+unix://", Scheme::Http),
    ("ws://", Scheme::WebSocket),
    ("wss://", Scheme::WebSocket),
    ("nats://", Scheme::Nats),
    ("mqtt://", Scheme::Mqtt),
    ("amqp://", Scheme::Amqp),
];

/// The forms of a target, for messages that say what would have been
/// understood.
pub const TARGET_FORMS: &str =
    "tcp://HOST:PORT, udp://HOST:PORT, unix:PATH, http(s)://…, http+unix://%2FPATH/…, ws(s)://…, \
     nats://HOST:PORT/SUBJECT, mqtt://HOST:PORT/TOPIC, amqp://HOST:PORT/VHOST?queue=NAME";

impl Scheme {
    /// The scheme `target` is written in; `None` when it names none.
    pub fn of(target: &str) -> Option<Scheme> {
        PREFIXES
            .iter()
            .find(|(prefix, _)| target.starts_with(prefix))
            .map(|(_, scheme)| *scheme)
    }

    /// Whether this build can dial it (the broker and HTTP schemes need
    /// their features).
    pub fn is_available(self) -> bool {
        match self {
            Scheme::Tcp | Scheme::Udp => true,
            Scheme::Unix => cfg!(unix),
            Scheme::Http | Scheme::WebSocket => cfg!(feature = "http-client"),
            Scheme::Nats => cfg!(feature = "nats"),
            Scheme::Mqtt => cfg!(feature = "mqtt"),
            Scheme::Amqp => cfg!(feature = "amqp"),
        }
    }

    /// Its name, as people write it: `TCP`, `WebSocket`, `NATS`, ...
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Tcp => "TCP",
            Scheme::Udp => "UDP",
            Scheme::Unix => "Unix socket",
            Scheme::Http => "HTTP",
            Scheme::WebSocket => "WebSocket",
            Scheme::Nats => "NATS",
            Scheme::Mqtt => "MQTT",
            Scheme::Amqp => "AMQP",
        }
    }

    /// The cargo feature of `jrpc` that carries it (`runtime` for those
    /// that come with the async side).
    fn feature(self) -> &'static str {
        match self {
            Scheme::Tcp | Scheme::Udp | Scheme::Unix => "runtime",
            Scheme::Http | Scheme::WebSocket => "http-client",
            Scheme::Nats => "nats",
            Scheme::Mqtt => "mqtt",
            Scheme::Amqp => "amqp",
        }
    }

    /// Whether a connection can be dialed to it (all but HTTP, whose calls
    /// are requests and responses).
    pub fn is_connection(self) -> bool {
        self != Scheme::Http
    }
}

/// How a dialer made by [`dialer`] frames and bounds its connection, and
/// what a WebSocket sends with its upgrade.
#[derive(Debug, Clone)]
pub struct DialOptions {
    framing: Framing,
    max_frame_len: usize,
    #[cfg(feature = "http-client")]
    headers: ::http::HeaderMap,
    #[cfg(feature = "http-client")]
    ws: super::ws::WsOptions,
    #[cfg(feature = "http-client")]
    tls: Option<std::sync::Arc<tokio_rustls::rustls::ClientConfig>>,
}

impl Default for DialOptions {
    fn default() -> Self {
        DialOptions {
            framing: Framing::default(),
            max_frame_len: Limits::DEFAULT_MAX_FRAME_LEN,
            #[cfg(feature = "http-client")]
            headers: ::http::HeaderMap::new(),
            #[cfg(feature = "http-client")]
            ws: super::ws::WsOptions::default(),
            #[cfg(feature = "http-client")]
            tls: None,
        }
    }
}

impl DialOptions {
    /// Framing of stream transports (TCP, Unix sockets); default
    /// newline-delimited.
    pub fn framing(mut self, framing: Framing) -> Self {
        self.framing = framing;
        self
    }

    /// The largest frame read (default 8 MiB).
    pub fn max_frame_len(mut self, bytes: usize) -> Self {
        self.max_frame_len = bytes;
        self
    }

    /// Headers a WebSocket upgrade request carries.
    #[cfg(feature = "http-client")]
    pub fn headers(mut self, headers: ::http::HeaderMap) -> Self {
        self.headers = headers;
        self
    }

    /// WebSocket settings (message size, pings, idle limit).
    #[cfg(feature = "http-client")]
    pub fn websocket(mut self, options: super::ws::WsOptions) -> Self {
        self.ws = options;
        self
    }

    /// The TLS settings of `wss://` (default: the system's roots).
    #[cfg(feature = "http-client")]
    pub fn tls(mut self, config: std::sync::Arc<tokio_rustls::rustls::ClientConfig>) -> Self {
        self.tls = Some(config);
        self
    }
}

/// A dialer of any scheme, as [`dialer`] makes it.
pub struct AnyDialer(Box<dyn DynDialer>);

impl std::fmt::Debug for AnyDialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnyDialer")
    }
}

impl Dialer for AnyDialer {
    fn dial(&self) -> impl std::future::Future<Output = io::Result<Connection>> + Send {
        self.0.dial_boxed()
    }
}

/// A dialer for the connection `target` names (every scheme but
/// `http(s)://`); `InvalidInput` when it names none, names HTTP, or names
/// one this build has no feature for.
pub fn dialer(target: &str, options: &DialOptions) -> io::Result<AnyDialer> {
    let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
    let scheme = Scheme::of(target).ok_or_else(|| invalid(format!("{target}: expected {TARGET_FORMS}")))?;
    if !scheme.is_connection() {
        return Err(invalid(format!(
            "{target}: HTTP carries requests, not a connection: use an HttpClient"
        )));
    }
    let dialer: Box<dyn DynDialer> = match scheme {
        Scheme::Tcp => {
            let addr = target["tcp://".len()..].trim_end_matches('/');
            Box::new(super::tcp::TcpDialer::new(
                addr.to_owned(),
                options.framing,
                options.max_frame_len,
            ))
        }
        Scheme::Udp => {
            let addr = target["udp://".len()..].trim_end_matches('/');
            let limit = options.max_frame_len.min(super::udp::MAX_DATAGRAM);
            Box::new(super::udp::UdpDialer::new(addr.to_owned()).max_datagram(limit))
        }
        #[cfg(unix)]
        Scheme::Unix => {
            let path = target
                .strip_prefix("unix://")
                .or_else(|| target.strip_prefix("unix:"))
                .unwrap_or(target);
            Box::new(super::unix::UnixDialer::new(
                path,
                options.framing,
                options.max_frame_len,
            ))
        }
        #[cfg(feature = "http-client")]
        Scheme::WebSocket => {
            let mut dialer = super::ws::WsDialer::new(target)
                .headers(options.headers.clone())
                .options(options.ws);
            if let Some(tls) = options.tls.clone() {
                dialer = dialer.tls(tls);
            }
            Box::new(dialer)
        }
        #[cfg(feature = "nats")]
        Scheme::Nats => Box::new(super::nats::NatsDialer::from_target(target)?),
        #[cfg(feature = "mqtt")]
        Scheme::Mqtt => Box::new(super::mqtt::MqttDialer::from_target(target)?),
        #[cfg(feature = "amqp")]
        Scheme::Amqp => Box::new(super::amqp::AmqpDialer::from_target(target)?),
        // A scheme whose feature is off in this build (HTTP is refused above).
        other => {
            return Err(invalid(format!(
                "{target}: this build of jrpc has no {} transport: turn on its feature `{}`",
                other.name(),
                other.feature()
            )))
        }
    };
    Ok(AnyDialer(dialer))
}

/// Dials the connection `target` names, with the default
/// [`DialOptions`]: see [`dialer`].
pub async fn dial(target: &str) -> io::Result<Connection> {
    dialer(target, &DialOptions::default())?.dial().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_prefix_names_its_scheme() {
        let cases = [
            ("tcp://127.0.0.1:1", Some(Scheme::Tcp)),
            ("udp://127.0.0.1:1", Some(Scheme::Udp)),
            ("unix:/tmp/s", Some(Scheme::Unix)),
            ("unix:///tmp/s", Some(Scheme::Unix)),
            ("http://h/rpc", Some(Scheme::Http)),
            ("https://h/rpc", Some(Scheme::Http)),
            ("ws://h", Some(Scheme::WebSocket)),
            ("wss://h", Some(Scheme::WebSocket)),
            ("nats://h:4222/s", Some(Scheme::Nats)),
            ("mqtt://h:1883/t", Some(Scheme::Mqtt)),
            ("amqp://h:5672/%2f?queue=q", Some(Scheme::Amqp)),
            ("127.0.0.1:4000", None),
            ("TCP://h:1", None),
            ("", None),
        ];
        for (target, scheme) in cases {
            assert_eq!(Scheme::of(target), scheme, "{target}");
        }
    }

    #[test]
    fn http_and_unknown_targets_are_refused_as_invalid_input() {
        for target in ["http://h/rpc", "gopher://h", "h:1"] {
            let error = dialer(target, &DialOptions::default()).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{target}");
        }
    }
}
