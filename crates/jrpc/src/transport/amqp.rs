//! AMQP 0.9.1 (feature `amqp`; RabbitMQ): JSON-RPC over a queue, with
//! `lapin`.
//!
//! - [`AmqpListener`] is one of the queue's competing consumers (the queue
//!   is declared, durable, if absent): the broker gives each message to
//!   one consumer, at most `prefetch` unacknowledged at a time. Each reply
//!   goes to the message's `reply_to` with its `correlation_id`, and the
//!   message is acknowledged only after its reply is published, so the
//!   calls of a server that dies are redelivered to another (a handler may
//!   then run twice).
//! - [`AmqpDialer`] (or `Client::connect("amqp://HOST:PORT/VHOST?queue=NAME")`,
//!   the vhost percent-decoded: `%2f` is `/`) publishes each frame to the
//!   queue through the default exchange, with RabbitMQ's direct reply-to
//!   (`amq.rabbitmq.reply-to`) as its reply address; calls are matched by
//!   their JSON-RPC ids.
//!
//! Several brokers (a RabbitMQ cluster's nodes) may be named,
//! comma-separated: `amqp://A:5672/%2f,B:5672/%2f?queue=demo`. Each
//! connection (and reconnection) tries them in turn and takes the first
//! that answers. A broker that did not answer goes to the back of the
//! list, and so does, for a listener, the one whose connection just ended:
//! a node that went silent (its host cut off) costs the 10 s connect
//! timeout once, not on every reconnection. A queue must then be one every
//! node serves (a quorum queue, or a classic queue on a node still up).
//!
//! A call to a queue no server consumes waits in the queue until one does
//! (or the call times out); dialing a queue that does not exist fails. The
//! listener reconnects to a restarted broker on its own (100 ms doubling to
//! 5 s, forever); a client's connection ends with the broker's, and a
//! client built with [`ClientBuilder::reconnect`](crate::client::ClientBuilder::reconnect)
//! dials again.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Sink, StreamExt};
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    QueueDeclareOptions,
};
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Consumer};

use super::connection::{Connection, Dialer};
use super::message::{Message, MessageListener};
use crate::codec::Inbound;
use crate::codec::OutFrame;
use crate::context::ConnectionInfo;

/// Unacknowledged messages a listener takes at once unless told otherwise.
pub const DEFAULT_PREFETCH: u16 = 128;

/// RabbitMQ's direct reply-to pseudo-queue.
const DIRECT_REPLY_TO: &str = "amq.rabbitmq.reply-to";

/// The largest message RabbitMQ takes by default (`max_message_size`).
const MAX_MESSAGE: usize = 128 * 1024 * 1024;

/// The target naming `queue` on the broker at `url`: the queue as a
/// `queue=` query parameter, percent-encoded where it must be.
fn target_of(url: &str, queue: &str) -> String {
    let mut encoded = String::with_capacity(queue.len());
    for byte in queue.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~:@/".contains(&byte) {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    let url = url.trim_end_matches('/');
    let joiner = if url.contains('?') { '&' } else { '?' };
    format!("{url}{joiner}queue={encoded}")
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

fn broken(e: lapin::Error) -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, e.to_string())
}

/// Splits `amqp://HOST:PORT/VHOST?queue=NAME` into the broker's URL
/// (without the `queue` parameter, other parameters kept) and the queue.
pub fn split_target(target: &str) -> io::Result<(String, String)> {
    if !target.starts_with("amqp://") {
        return Err(invalid(format!(
            "{target}: expected amqp://HOST:PORT/VHOST?queue=NAME"
        )));
    }
    let (base, query) = target.split_once('?').unwrap_or((target, ""));
    let mut queue = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("queue", name)) => queue = Some(percent_decode(name)?),
            _ => kept.push(pair),
        }
    }
    let queue = queue.filter(|q| !q.is_empty()).ok_or_else(|| {
        invalid(format!(
            "{target}: the queue is missing (amqp://HOST:PORT/VHOST?queue=NAME)"
        ))
    })?;
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, queue))
}

/// `%XX` escapes decoded (the URL's vhost is decoded by the AMQP client).
fn percent_decode(text: &str) -> io::Result<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| invalid(format!("{text:?}: a bad %-escape")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| invalid(format!("{text:?}: not UTF-8 once decoded")))
}

/// The brokers `url` names: one URL, or several comma-separated
/// (`amqp://A:5672/%2f,amqp://B:5672/%2f`, later ones may leave out the
/// scheme: `amqp://A:5672/%2f,B:5672/%2f`), tried in turn. Parameters go
/// after the last broker and apply to each (`…,B:5672/%2f?heartbeat=10`).
fn brokers(url: &str) -> io::Result<Vec<String>> {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    if query.is_some_and(|query| query.contains(',')) {
        return Err(invalid(format!(
            "{url}: parameters go after the last broker, for all of them (amqp://A:5672/%2f,B:5672/%2f?heartbeat=10)"
        )));
    }
    let scheme = if base.starts_with("amqps://") {
        "amqps://"
    } else {
        "amqp://"
    };
    base.split(',')
        .map(|one| {
            let one = one.trim();
            if one.is_empty() || one == scheme {
                return Err(invalid(format!("{url}: an empty broker address in the list")));
            }
            let mut full = if one.contains("://") {
                one.to_owned()
            } else {
                format!("{scheme}{one}")
            };
            if let Some(query) = query {
                full.push('?');
                full.push_str(query);
            }
            Ok(full)
        })
        .collect()
}

/// The order to try a list's brokers in: the list's, except that a
/// broker that failed goes to the back. Shared by a listener's
/// reconnections, and by a dialer's clones.
#[derive(Debug, Clone, Default)]
struct BrokerOrder(Arc<Mutex<Vec<usize>>>);

impl BrokerOrder {
    /// The brokers' indices (of `count`) in the order to try them.
    fn current(&self, count: usize) -> Vec<usize> {
        let mut order = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if order.len() != count {
            *order = (0..count).collect();
        }
        order.clone()
    }

    /// Broker `broker` failed (did not answer, or its connection ended):
    /// it is tried after the others from now on.
    fn to_back(&self, broker: usize) {
        let mut order = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = order.iter().position(|&b| b == broker) {
            let broker = order.remove(at);
            order.push(broker);
        }
    }
}

/// Connects to a broker (of several, the first that answers, in `order`),
/// driven by this tokio runtime; the connection and its broker's index.
async fn connect(url: &str, order: &BrokerOrder) -> io::Result<(lapin::Connection, usize)> {
    let brokers = brokers(url)?;
    let mut failed = Vec::new();
    for i in order.current(brokers.len()) {
        match connect_one(&brokers[i]).await {
            Ok(connection) => return Ok((connection, i)),
            Err(e) => {
                order.to_back(i);
                failed.push(e);
            }
        }
    }
    // One broker: its own error; several: what each said.
    if failed.len() == 1 {
        return Err(failed.remove(0));
    }
    let kind = failed
        .last()
        .map_or(io::ErrorKind::ConnectionRefused, io::Error::kind);
    let said: Vec<String> = failed.iter().map(ToString::to_string).collect();
    Err(io::Error::new(
        kind,
        format!("no broker answered: {}", said.join("; ")),
    ))
}

async fn connect_one(url: &str) -> io::Result<lapin::Connection> {
    let properties = lapin::ConnectionProperties::default()
        .with_executor(tokio_executor_trait::Tokio::current())
        .with_reactor(tokio_reactor_trait::Tokio);
    let connecting = lapin::Connection::connect(url, properties);
    match tokio::time::timeout(Duration::from_secs(10), connecting).await {
        Ok(Ok(connection)) => Ok(connection),
        Ok(Err(e)) => Err(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!("{url}: {e}"),
        )),
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{url}: no answer from the broker"),
        )),
    }
}

/// Declares `queue` (durable) unless it exists, with whatever settings.
async fn declare(connection: &lapin::Connection, queue: &str) -> io::Result<()> {
    let probe = connection.create_channel().await.map_err(broken)?;
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    if probe
        .queue_declare(queue, passive, FieldTable::default())
        .await
        .is_ok()
    {
        let _ = probe.close(200, "OK").await;
        return Ok(());
    }
    // A failed passive declaration closed that channel.
    let channel = connection.create_channel().await.map_err(broken)?;
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    channel
        .queue_declare(queue, durable, FieldTable::default())
        .await
        .map_err(broken)?;
    let _ = channel.close(200, "OK").await;
    Ok(())
}

/// A consumer of a listener's queue, on a channel of its own.
struct Consuming {
    // Kept open as long as the consumer.
    _connection: lapin::Connection,
    /// The broker's index in the listener's list.
    broker: usize,
    channel: Channel,
    consumer: Consumer,
}

async fn consume(url: &str, order: &BrokerOrder, queue: &str, prefetch: u16) -> io::Result<Consuming> {
    let (connection, broker) = connect(url, order).await?;
    declare(&connection, queue).await?;
    let channel = connection.create_channel().await.map_err(broken)?;
    channel
        .basic_qos(prefetch, BasicQosOptions::default())
        .await
        .map_err(broken)?;
    let consumer = channel
        .basic_consume(queue, "", BasicConsumeOptions::default(), FieldTable::default())
        .await
        .map_err(broken)?;
    Ok(Consuming {
        _connection: connection,
        broker,
        channel,
        consumer,
    })
}

/// Serves a queue: one of its competing consumers. Hand it to
/// [`Server::serve_messages`](crate::server::Server::serve_messages).
pub struct AmqpListener {
    url: String,
    order: BrokerOrder,
    queue: String,
    prefetch: u16,
    consuming: Option<Consuming>,
    /// Closed for the server's shutdown: no reconnecting.
    closed: bool,
    local_addr: String,
}

impl std::fmt::Debug for AmqpListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmqpListener")
            .field("local_addr", &self.local_addr)
            .field("prefetch", &self.prefetch)
            .finish_non_exhaustive()
    }
}

impl AmqpListener {
    /// Connects to `url` (`amqp://HOST:PORT/VHOST`, the vhost
    /// percent-encoded: `%2f` for `/`), declares `queue` if absent and
    /// consumes it, [`DEFAULT_PREFETCH`] messages at a time.
    pub async fn connect(url: &str, queue: &str) -> io::Result<Self> {
        Self::connect_with_prefetch(url, queue, DEFAULT_PREFETCH).await
    }

    /// [`connect`](Self::connect), taking at most `prefetch`
    /// unacknowledged messages at a time (match it to the server's
    /// in-flight bound, so the broker keeps the rest for other servers).
    pub async fn connect_with_prefetch(url: &str, queue: &str, prefetch: u16) -> io::Result<Self> {
        if queue.is_empty() {
            return Err(invalid("the queue name is empty".into()));
        }
        let prefetch = prefetch.max(1);
        let order = BrokerOrder::default();
        let consuming = consume(url, &order, queue, prefetch).await?;
        Ok(AmqpListener {
            url: url.to_owned(),
            order,
            queue: queue.to_owned(),
            prefetch,
            consuming: Some(consuming),
            closed: false,
            local_addr: target_of(url, queue),
        })
    }

    /// The connection ended (the broker, or the way to it, went away):
    /// its broker is tried last when connecting again.
    fn lost(&mut self) {
        if let Some(consuming) = self.consuming.take() {
            self.order.to_back(consuming.broker);
        }
    }

    /// Connects again after the broker went away, waiting longer after
    /// each failure.
    async fn reconnect(&mut self) -> Consuming {
        let mut failures: u32 = 0;
        loop {
            let wait = super::message::reconnect_wait(failures);
            tokio::time::sleep(wait).await;
            match consume(&self.url, &self.order, &self.queue, self.prefetch).await {
                Ok(consuming) => {
                    tracing::info!(url = %self.url, queue = %self.queue, "amqp: connected again");
                    return consuming;
                }
                Err(e) => {
                    if failures == 0 {
                        tracing::warn!(url = %self.url, error = %e, "amqp: cannot reconnect yet");
                    }
                    failures = failures.saturating_add(1);
                }
            }
        }
    }
}

impl MessageListener for AmqpListener {
    async fn next(&mut self) -> Option<Message> {
        loop {
            let consuming = match &mut self.consuming {
                Some(consuming) => consuming,
                None if self.closed => return None,
                None => {
                    let consuming = self.reconnect().await;
                    self.consuming.insert(consuming)
                }
            };
            let delivery = match consuming.consumer.next().await {
                Some(Ok(delivery)) => delivery,
                Some(Err(e)) => {
                    tracing::warn!(url = %self.url, error = %e, "amqp: the connection failed; reconnecting");
                    self.lost();
                    continue;
                }
                None if self.closed => return None,
                None => {
                    tracing::warn!(url = %self.url, "amqp: the consumer ended; reconnecting");
                    self.lost();
                    continue;
                }
            };
            let channel = consuming.channel.clone();
            let properties = &delivery.properties;
            let reply_to = properties.reply_to().as_ref().map(|s| s.to_string());
            let correlation_id = properties.correlation_id().clone();
            let acker = delivery.acker;
            let message = Message::new(Bytes::from(delivery.data), "amqp")
                .arrived_at(&self.local_addr)
                .max_reply(MAX_MESSAGE);
            let ack = |acker: lapin::acker::Acker| async move {
                if let Err(e) = acker.ack(BasicAckOptions::default()).await {
                    tracing::warn!(error = %e, "amqp: cannot acknowledge a message");
                }
            };
            let Some(reply_to) = reply_to else {
                return Some(message.on_served(move || ack(acker)));
            };
            return Some(message.reply_to(reply_to.clone(), move |answer| async move {
                if let Some(answer) = answer {
                    let mut properties = BasicProperties::default();
                    if let Some(id) = correlation_id {
                        properties = properties.with_correlation_id(id);
                    }
                    let published = channel
                        .basic_publish("", &reply_to, BasicPublishOptions::default(), &answer, properties)
                        .await;
                    if let Err(e) = published {
                        // Not acknowledged: the broker gives the call to
                        // another server once this channel is gone.
                        tracing::warn!(error = %e, "amqp: cannot publish a reply");
                        return;
                    }
                }
                ack(acker).await;
            }));
        }
    }

    fn local_addr(&self) -> String {
        self.local_addr.clone()
    }

    /// Cancels the consumer: the broker keeps the queue's other messages
    /// for the other servers (and takes back, once the channel closes,
    /// what this one took and did not acknowledge).
    async fn close(&mut self) {
        self.closed = true;
        if let Some(consuming) = &self.consuming {
            let tag = consuming.consumer.tag();
            if let Err(e) = consuming
                .channel
                .basic_cancel(tag.as_str(), BasicCancelOptions::default())
                .await
            {
                tracing::debug!(error = %e, "amqp: cannot cancel the consumer");
            }
        }
    }
}

/// Calls a queue: each frame published to it through the default exchange,
/// replies by RabbitMQ's direct reply-to.
#[derive(Debug, Clone)]
pub struct AmqpDialer {
    url: String,
    order: BrokerOrder,
    queue: String,
}

impl AmqpDialer {
    /// A dialer for `queue` on the broker at `url`
    /// (`amqp://HOST:PORT/VHOST`).
    pub fn new(url: impl Into<String>, queue: impl Into<String>) -> Self {
        AmqpDialer {
            url: url.into(),
            order: BrokerOrder::default(),
            queue: queue.into(),
        }
    }

    /// A dialer for a target: `amqp://HOST:PORT/VHOST?queue=NAME`.
    pub fn from_target(target: &str) -> io::Result<Self> {
        let (url, queue) = split_target(target)?;
        Ok(AmqpDialer::new(url, queue))
    }
}

impl Dialer for AmqpDialer {
    async fn dial(&self) -> io::Result<Connection> {
        let (connection, _) = connect(&self.url, &self.order).await?;
        // A queue nobody declared would swallow every call.
        let probe = connection.create_channel().await.map_err(broken)?;
        let passive = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        if let Err(e) = probe
            .queue_declare(&self.queue, passive, FieldTable::default())
            .await
        {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{}: queue {:?} does not exist (no server has declared it): {e}",
                    self.url, self.queue
                ),
            ));
        }
        let _ = probe.close(200, "OK").await;
        let channel = connection.create_channel().await.map_err(broken)?;
        let no_ack = BasicConsumeOptions {
            no_ack: true,
            ..BasicConsumeOptions::default()
        };
        let replies = channel
            .basic_consume(DIRECT_REPLY_TO, "", no_ack, FieldTable::default())
            .await
            .map_err(broken)?;
        let info = ConnectionInfo {
            transport: "amqp",
            peer_addr: Some(target_of(&self.url, &self.queue)),
            local_addr: Some(DIRECT_REPLY_TO.to_owned()),
        };
        // A clone of the consumer is kept until the connection is closed: the
        // last one dropped cancels the consumer, and a cancellation still on
        // its way when the connection starts closing makes lapin log a
        // connection error.
        let kept = replies.clone();
        let incoming = replies.map(|delivery| match delivery {
            Ok(delivery) => Ok(Inbound::Frame(Bytes::from(delivery.data))),
            Err(e) => Err(broken(e)),
        });
        let queue = self.queue.clone();
        let outgoing = futures_util::sink::unfold(channel, move |channel, frame: OutFrame| {
            let queue = queue.clone();
            // Replies have no one to go to: servers answer to reply queues.
            let reply = frame.read_kind().is_reply();
            let frame = frame.bytes;
            async move {
                if reply {
                    return Ok(channel);
                }
                let properties = BasicProperties::default().with_reply_to(ShortString::from(DIRECT_REPLY_TO));
                channel
                    .basic_publish("", &queue, BasicPublishOptions::default(), &frame, properties)
                    .await
                    .map_err(broken)?;
                Ok(channel)
            }
        });
        let outgoing = ClosingConnection {
            frames: Box::pin(outgoing),
            connection: Some((connection, kept)),
            closing: None,
        };
        Ok(Connection::with_kinds(incoming, outgoing, info))
    }
}

/// The outgoing frames of a client, which close the AMQP connection (and
/// wait, briefly, for the broker to confirm) when they are closed, so that
/// the AMQP client's I/O thread ends before the runtime does.
struct ClosingConnection {
    frames: super::OutFrameSink,
    /// The connection, and a clone of its reply consumer to drop once the
    /// connection is closed.
    connection: Option<(lapin::Connection, Consumer)>,
    closing: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Sink<OutFrame> for ClosingConnection {
    type Error = io::Error;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.frames.as_mut().poll_ready(cx)
    }

    fn start_send(mut self: Pin<&mut Self>, frame: OutFrame) -> io::Result<()> {
        self.frames.as_mut().start_send(frame)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.frames.as_mut().poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let closed = self.frames.as_mut().poll_close(cx);
        if closed.is_pending() {
            return Poll::Pending;
        }
        if let Some((connection, replies)) = self.connection.take() {
            self.closing = Some(Box::pin(async move {
                let _ = tokio::time::timeout(Duration::from_secs(2), connection.close(200, "OK")).await;
                drop(replies);
                // lapin's I/O thread ends by itself once the connection is
                // closed; until then it uses this runtime's reactor, so a
                // process that ends now would see it log I/O errors while the
                // runtime shuts down. Wait for it, briefly, on a thread of
                // its own (joining blocks; a runtime's blocking pool would
                // hold the process at exit if it never ended).
                let (ended, io_loop_done) = tokio::sync::oneshot::channel();
                std::thread::spawn(move || {
                    let _ = connection.run();
                    let _ = ended.send(());
                });
                let _ = tokio::time::timeout(Duration::from_secs(2), io_loop_done).await;
            }));
        }
        if let Some(closing) = self.closing.as_mut() {
            if closing.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.closing = None;
        }
        closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_split_into_broker_and_queue() {
        let cases = [
            (
                "amqp://127.0.0.1:5672/%2f?queue=demo",
                Some(("amqp://127.0.0.1:5672/%2f", "demo")),
            ),
            (
                "amqp://h:1/v?heartbeat=10&queue=a%2Eb",
                Some(("amqp://h:1/v?heartbeat=10", "a.b")),
            ),
            ("amqp://h:1/v?queue=", None),
            ("amqp://h:1/v", None),
            ("amqp://h:1/v?queue=%zz", None),
            (
                "amqp://h:1/v?heartbeat=5&queue=a%26b%3F",
                Some(("amqp://h:1/v?heartbeat=5", "a&b?")),
            ),
            ("nats://h:1/v?queue=a", None),
        ];
        for (target, expected) in cases {
            let got = split_target(target).ok();
            let got = got.as_ref().map(|(u, q)| (u.as_str(), q.as_str()));
            assert_eq!(got, expected, "{target}");
        }
    }

    #[test]
    fn several_brokers_are_tried_in_turn() {
        let cases: [(&str, Option<&[&str]>); 7] = [
            ("amqp://a:1/%2f", Some(&["amqp://a:1/%2f"])),
            (
                "amqp://a:1/%2f,amqp://b:2/%2f",
                Some(&["amqp://a:1/%2f", "amqp://b:2/%2f"]),
            ),
            (
                "amqp://a:1/v,b:2/v?heartbeat=5",
                Some(&["amqp://a:1/v?heartbeat=5", "amqp://b:2/v?heartbeat=5"]),
            ),
            ("amqps://a:1/v,b:2/v", Some(&["amqps://a:1/v", "amqps://b:2/v"])),
            ("amqp://a:1/v,", None),
            ("amqp://a:1/v?heartbeat=5,amqp://b:2/v", None),
            ("amqp://,b:2/v", None),
        ];
        for (url, expected) in cases {
            let got = brokers(url).ok();
            let expected = expected.map(|e| e.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            assert_eq!(got, expected, "{url}");
        }
        // A target's queue is not a broker's parameter.
        let (url, queue) = split_target("amqp://a:1/%2f,b:2/%2f?queue=demo").unwrap();
        assert_eq!(queue, "demo");
        assert_eq!(brokers(&url).unwrap(), ["amqp://a:1/%2f", "amqp://b:2/%2f"]);
    }

    #[test]
    fn a_broker_that_failed_is_tried_last() {
        let order = BrokerOrder::default();
        assert_eq!(order.current(3), [0, 1, 2]);
        order.to_back(0);
        assert_eq!(order.current(3), [1, 2, 0]);
        order.to_back(2);
        assert_eq!(order.current(3), [1, 0, 2]);
        // Clones share the order (a dialer's reconnections).
        order.clone().to_back(1);
        assert_eq!(order.current(3), [0, 2, 1]);
        // An index out of the list changes nothing.
        order.to_back(7);
        assert_eq!(order.current(3), [0, 2, 1]);
        assert_eq!(order.current(1), [0]);
    }

    #[test]
    fn targets_round_trip_through_queue_names() {
        for (url, queue) in [
            ("amqp://h:1/%2f", "demo"),
            ("amqp://h:1/v?heartbeat=5", "a&b?c d%"),
            ("amqp://h:1/v/", "rpc.calls"),
        ] {
            let (back_url, back_queue) = split_target(&target_of(url, queue)).unwrap();
            assert_eq!(
                (back_url.as_str(), back_queue.as_str()),
                (url.trim_end_matches('/'), queue)
            );
        }
    }
}
