//! Message transports: each message one frame, with maybe an address to
//! reply to (a message broker's reply subject, topic or queue). A
//! [`MessageListener`] hands a [`Server`](crate::server::Server) such
//! messages to serve ([`Server::serve_messages`](crate::server::Server::serve_messages));
//! the server answers each one to its own reply address, so there is no
//! connection between a caller and the server that serves it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

use crate::context::ConnectionInfo;

/// How long a broker transport waits before its next attempt to reconnect,
/// after `failures` failed ones: 100 ms doubling to 5 s.
#[cfg(any(feature = "nats", feature = "mqtt", feature = "amqp"))]
pub(crate) fn reconnect_wait(failures: u32) -> std::time::Duration {
    std::time::Duration::from_millis(100 * 2u64.pow(failures.min(6))).min(std::time::Duration::from_secs(5))
}

type Settle = Box<dyn FnOnce(Option<Bytes>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// One incoming message: a frame, and how to answer it.
///
/// ```
/// use jrpc::transport::Message;
///
/// let message = Message::new(r#"{"jsonrpc":"2.0","method":"ping","id":1}"#.into(), "memory")
///     .reply_to("inbox.7", |answer| async move {
///         // Publish `answer` to "inbox.7"; acknowledge the message here.
///         drop(answer);
///     });
/// assert_eq!(message.reply_address(), Some("inbox.7"));
/// ```
pub struct Message {
    pub(crate) frame: Bytes,
    pub(crate) info: ConnectionInfo,
    settle: Option<Settle>,
    can_reply: bool,
    pub(crate) max_reply: usize,
}

impl Message {
    /// A message carrying `frame` over `transport` (`"nats"`, say), with
    /// nowhere to reply: its requests are served but their replies dropped
    /// (with a log line).
    pub fn new(frame: Bytes, transport: &'static str) -> Self {
        Message {
            frame,
            info: ConnectionInfo {
                transport,
                peer_addr: None,
                local_addr: None,
            },
            settle: None,
            can_reply: false,
            max_reply: usize::MAX,
        }
    }

    /// Where the reply goes (shown to handlers as the
    /// [peer address](ConnectionInfo::peer_addr)), and how: `settle` is
    /// called once the message is served, with the reply frame (`None` when
    /// there is nothing to answer: notifications). It is called once per
    /// message, also for messages that are refused, so it is where a
    /// broker's acknowledgement goes, after the reply is published — except
    /// for messages still running when a server's grace period ends: those
    /// are dropped unsettled (a broker redelivers what was not
    /// acknowledged).
    pub fn reply_to<F, Fut>(mut self, address: impl Into<String>, settle: F) -> Self
    where
        F: FnOnce(Option<Bytes>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.info.peer_addr = Some(address.into());
        self.settle = Some(Box::new(move |answer| Box::pin(settle(answer))));
        self.can_reply = true;
        self
    }

    /// Called once the message is served, for a message without a reply
    /// address (to acknowledge it). It replaces what
    /// [`reply_to`](Self::reply_to) set: call one or the other.
    pub fn on_served<F, Fut>(mut self, settle: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.settle = Some(Box::new(move |_| Box::pin(settle())));
        self.can_reply = false;
        self
    }

    /// The most bytes a reply may have on the way back (a broker's payload
    /// limit); a larger one is replaced by `-32001 Frame too large` for its
    /// request, which fits.
    pub fn max_reply(mut self, bytes: usize) -> Self {
        self.max_reply = bytes;
        self
    }

    /// Where the message came from (the subject, topic or queue), for
    /// handlers' [`ConnectionInfo::local_addr`].
    pub fn arrived_at(mut self, address: impl Into<String>) -> Self {
        self.info.local_addr = Some(address.into());
        self
    }

    /// The frame.
    pub fn frame(&self) -> &Bytes {
        &self.frame
    }

    /// The reply address, when there is one.
    pub fn reply_address(&self) -> Option<&str> {
        self.can_reply.then_some(self.info.peer_addr.as_deref()).flatten()
    }

    /// Sends the answer (if the message has a reply address) and settles.
    pub(crate) async fn settle(self, answer: Option<Bytes>) {
        let answer = if self.can_reply { answer } else { None };
        if let Some(settle) = self.settle {
            settle(answer).await;
        }
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message")
            .field("bytes", &self.frame.len())
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// Where messages come from, for a [`Server`](crate::server::Server) to
/// serve: `Server::serve_messages(listener)`. NATS, MQTT and AMQP are built
/// in (behind their features); another broker is one implementation away.
pub trait MessageListener: Send + 'static {
    /// The next message; `None` once there will be no more (the listener
    /// closed for good). A listener that loses its broker reconnects
    /// within `next`.
    fn next(&mut self) -> impl Future<Output = Option<Message>> + Send;

    /// Where it listens, as a target `jrpc call` understands
    /// (`nats://127.0.0.1:4222/demo`).
    fn local_addr(&self) -> String;

    /// Stops taking messages from the broker, when the server shuts down:
    /// from then on `next` gives what was already taken, then `None` (those
    /// messages are served within the grace period). By default nothing is
    /// done, and `next` is no longer called.
    fn close(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Once every message served has settled: sends what is still queued
    /// on the way out (replies), before the listener is dropped.
    fn flush(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }
}
