//! Carriers of frames, below the [`Peer`](crate::peer::Peer): each module
//! turns one kind of byte stream or message channel into [`Connection`]s,
//! through the public [`Listener`] and [`Dialer`] traits that a transport of
//! your own implements too.
//!
//! | module | listening | dialing |
//! |---|---|---|
//! | [`tcp`] | [`tcp::TcpListener`] | [`tcp::TcpDialer`] |
//! | [`unix`] | [`unix::UnixListener`] | [`unix::UnixDialer`] |
//! | [`stdio`] | this process's stdin/stdout: [`stdio::connection`] | — |
//! | [`child`] | — | a command's stdin/stdout: [`child::ChildDialer`] |
//! | [`ws`] | [`ws::WsListener`] (and the HTTP server upgrades) | [`ws::WsDialer`] |
//! | [`udp`] | (datagrams: [`Server::bind_udp`](crate::server::Server::bind_udp)) | [`udp::UdpDialer`] |
//! | `nats` (feature `nats`) | `nats::NatsListener` (a queue group) | `nats::NatsDialer` |
//! | `mqtt` (feature `mqtt`) | `mqtt::MqttListener` (a shared subscription) | `mqtt::MqttDialer` |
//! | `amqp` (feature `amqp`) | `amqp::AmqpListener` (competing consumers) | `amqp::AmqpDialer` |
//!
//! [`dial`] reads a target URL (`tcp://`, `unix:`, `ws://`, `nats://`, …)
//! into the dialer of its transport.
//!
//! Brokers carry messages, not connections: their listeners are
//! [`MessageListener`]s, each message one frame with its own reply address
//! ([`Server::serve_messages`](crate::server::Server::serve_messages)).
//!
//! Serving is [`Server`](crate::server::Server)'s job, calling
//! [`Client`](crate::client::Client)'s.

#[cfg(feature = "amqp")]
pub mod amqp;
pub mod child;
pub(crate) mod connection;
pub mod dial;
#[cfg(unix)]
mod inherited;
mod message;
#[cfg(feature = "mqtt")]
pub mod mqtt;
#[cfg(feature = "nats")]
pub mod nats;
pub mod stdio;
mod stream_listener;
pub mod tcp;
#[cfg(any(feature = "http-server", feature = "http-client"))]
pub mod tls;
pub mod udp;
#[cfg(unix)]
pub mod unix;
#[cfg(any(feature = "http-server", feature = "http-client"))]
pub mod ws;

pub use crate::context::ConnectionInfo;

/// The `tracing` target of the wire: each frame a peer sends (`>`) and
/// receives (`<`), and each HTTP request and response head with its body,
/// are TRACE events of this target (`jrpc call -v` shows them). Off, they
/// cost one check of the subscriber's interest.
pub const WIRE_TARGET: &str = "jrpc::wire";

/// Traces a frame going `direction` (`>` out, `<` in) on the wire target.
pub(crate) fn trace_frame(direction: &str, frame: &[u8]) {
    if tracing::enabled!(target: "jrpc::wire", tracing::Level::TRACE) {
        tracing::trace!(target: "jrpc::wire", "{direction} {}", String::from_utf8_lossy(frame));
    }
}
pub(crate) use connection::{Accept, DynDialer};
pub use connection::{
    CloseReason, Connection, Dialer, FrameSink, FrameStream, Listener, OutFrameSink, Undelivered,
};
pub use message::{Message, MessageListener};
pub use stream_listener::StreamListener;
#[cfg(feature = "http-server")]
pub(crate) use stream_listener::TunedTcpListener;
// Outgoing frames are the codec's type (it encodes them); transports take
// them, so they are named here too.
pub use crate::codec::{OutFrame, OutKind};
