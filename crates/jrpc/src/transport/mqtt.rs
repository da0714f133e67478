//! MQTT 5 (feature `mqtt`): JSON-RPC over a topic, with `rumqttc`.
//!
//! - [`MqttListener`] holds a shared subscription (`$share/GROUP/TOPIC`,
//!   default group [`DEFAULT_GROUP`]): the broker gives each message to one
//!   member of the group, so several servers on one topic share the calls.
//!   Each reply goes to its request's Response Topic, with its Correlation
//!   Data, at QoS 1.
//! - [`MqttDialer`] (or `Client::connect("mqtt://HOST:PORT/TOPIC")`, the
//!   whole path being the topic) publishes each frame to the topic at QoS
//!   1 with a Response Topic of its own (`jrpc/replies/CLIENT-ID`) and
//!   reads the replies there; calls are matched by their JSON-RPC ids.
//!
//! A call whose server dies mid-call, or that nobody subscribes to, times
//! out (MQTT has no "no responders"). QoS 1 may deliver a message twice
//! around a reconnect; a second reply to a call is ignored. Both sides
//! reconnect to a restarted broker on their own (100 ms doubling to 5 s,
//! forever) and subscribe again; meanwhile calls wait, within their
//! timeouts.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rumqttc::v5::mqttbytes::v5::{Packet, Publish, PublishProperties, SubscribeReasonCode};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, ConnectionError, Event, EventLoop, MqttOptions};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::connection::{Connection, Dialer};
use super::message::{Message, MessageListener};
use crate::codec::Inbound;
use crate::codec::OutFrame;
use crate::context::ConnectionInfo;

/// The shared-subscription group servers join unless told otherwise: `jrpc`.
pub const DEFAULT_GROUP: &str = "jrpc";

/// The largest packet this side takes from the broker (16 MiB): the broker
/// does not send larger ones (MQTT 5's Maximum Packet Size).
const MAX_PACKET: u32 = 16 * 1024 * 1024;

/// Messages taken from the broker but not yet served, per subscription.
const QUEUED: usize = 1024;

/// The largest reply a server publishes: what this side's clients take,
/// less room for the topic and properties.
const MAX_REPLY: usize = MAX_PACKET as usize - 64 * 1024;

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// Splits `mqtt://HOST:PORT/TOPIC` into the broker (`mqtt://HOST:PORT`) and
/// the topic: the whole path (`mqtt://127.0.0.1:1883/demo/rpc` → `demo/rpc`).
pub fn split_target(target: &str) -> io::Result<(String, String)> {
    let rest = target
        .strip_prefix("mqtt://")
        .ok_or_else(|| invalid(format!("{target}: expected mqtt://HOST:PORT/TOPIC")))?;
    match rest.split_once('/') {
        Some((broker, topic)) if !broker.is_empty() && !topic.is_empty() => {
            check_topic(topic)?;
            Ok((format!("mqtt://{broker}"), topic.to_owned()))
        }
        _ => Err(invalid(format!(
            "{target}: expected mqtt://HOST:PORT/TOPIC (the topic is missing)"
        ))),
    }
}

/// A topic calls are published to: no wildcards.
fn check_topic(topic: &str) -> io::Result<()> {
    if topic.is_empty() || topic.contains(['+', '#']) {
        return Err(invalid(format!(
            "{topic:?}: an MQTT topic to publish to is not empty and has no wildcards (+, #)"
        )));
    }
    Ok(())
}

/// The host and port of `mqtt://HOST[:PORT]` (default port 1883).
fn host_and_port(url: &str) -> io::Result<(String, u16)> {
    let rest = url.strip_prefix("mqtt://").unwrap_or(url).trim_end_matches('/');
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(':') => {
            let port = port
                .parse()
                .map_err(|_| invalid(format!("{url}: the port is not a number")))?;
            (host, port)
        }
        _ => (rest, 1883),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(invalid(format!("{url}: expected mqtt://HOST:PORT")));
    }
    Ok((host.to_owned(), port))
}

/// A client id no other client of this broker has.
fn client_id(role: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "jrpc-{role}-{}-{}-{nanos:x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn broken(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, e.to_string())
}

/// A connection to the broker, subscribed to one filter.
struct Session {
    /// To publish with; the connection stays up while any clone lives.
    client: AsyncClient,
    /// The messages that arrive on the filter.
    messages: mpsc::Receiver<Publish>,
    /// Whether the filter is subscribed right now (false from a lost
    /// connection until the broker acknowledges the subscription again).
    subscribed: watch::Receiver<bool>,
    /// The task driving the connection.
    driver: JoinHandle<()>,
    /// Turns true once the broker has acknowledged an unsubscription:
    /// every message for the filter has arrived by then.
    unsubscribed: watch::Receiver<bool>,
}

/// Connects and subscribes to `filter`. A task drives the connection,
/// reconnecting and subscribing again when it drops, until the messages'
/// receiver is closed; then it goes on until every client clone is gone,
/// so that replies published meanwhile still go out.
async fn subscribe(url: &str, role: &str, filter: String) -> io::Result<Session> {
    let (host, port) = host_and_port(url)?;
    let mut options = MqttOptions::new(client_id(role), host, port);
    options
        .set_keep_alive(Duration::from_secs(30))
        .set_clean_start(true)
        .set_max_packet_size(Some(MAX_PACKET))
        .set_request_channel_capacity(QUEUED);
    let (client, mut events) = AsyncClient::new(options, QUEUED);
    let refused =
        |e: ConnectionError| io::Error::new(io::ErrorKind::ConnectionRefused, format!("{url}: {e}"));
    let first = async {
        loop {
            if let Event::Incoming(Packet::ConnAck(_)) = events.poll().await.map_err(refused)? {
                break;
            }
        }
        client
            .try_subscribe(filter.clone(), QoS::AtLeastOnce)
            .map_err(broken)?;
        loop {
            if let Event::Incoming(Packet::SubAck(ack)) = events.poll().await.map_err(refused)? {
                return match ack.return_codes.first() {
                    Some(SubscribeReasonCode::Success(_)) => Ok(()),
                    other => Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!("{url}: the broker refused the subscription to {filter}: {other:?}"),
                    )),
                };
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), first)
        .await
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{url}: no answer from the broker"),
            )
        })??;
    let (sender, messages) = mpsc::channel(QUEUED);
    let (now_subscribed, subscribed) = watch::channel(true);
    let (now_unsubscribed, unsubscribed) = watch::channel(false);
    let driving = Driving {
        client: Some(client.clone()),
        filter,
        messages: sender,
        subscribed: now_subscribed,
        unsubscribed: now_unsubscribed,
        url: url.to_owned(),
    };
    let driver = tokio::spawn(driving.run(events));
    Ok(Session {
        client,
        messages,
        subscribed,
        driver,
        unsubscribed,
    })
}

/// What the task driving a connection holds.
struct Driving {
    /// To subscribe again after a reconnect; dropped once closing.
    client: Option<AsyncClient>,
    filter: String,
    messages: mpsc::Sender<Publish>,
    subscribed: watch::Sender<bool>,
    unsubscribed: watch::Sender<bool>,
    url: String,
}

impl Driving {
    /// Polls the connection: hands over messages, subscribes again after
    /// each reconnect, waits between failed attempts.
    async fn run(mut self, mut events: EventLoop) {
        let mut failures: u32 = 0;
        loop {
            let event = if self.client.is_some() {
                tokio::select! {
                    () = self.messages.closed() => {
                        // Closing: no more messages taken; the publishers
                        // left finish first.
                        self.client = None;
                        continue;
                    }
                    event = events.poll() => event,
                }
            } else {
                events.poll().await
            };
            match event {
                Ok(Event::Incoming(Packet::Publish(publish))) => {
                    if self.client.is_some() && self.messages.send(publish).await.is_err() {
                        self.client = None;
                    }
                }
                Ok(Event::Incoming(Packet::SubAck(_))) => {
                    self.subscribed.send_replace(true);
                }
                Ok(Event::Incoming(Packet::UnsubAck(_))) => {
                    // Closing: what the broker sent before this has been
                    // handed over; no subscribing again.
                    self.client = None;
                    self.unsubscribed.send_replace(true);
                }
                Ok(Event::Incoming(Packet::ConnAck(_))) => {
                    failures = 0;
                    if let Some(client) = &self.client {
                        tracing::info!(url = %self.url, "mqtt: connected again");
                        if let Err(e) = client.try_subscribe(self.filter.clone(), QoS::AtLeastOnce) {
                            tracing::warn!(url = %self.url, error = %e, "mqtt: cannot subscribe again");
                        }
                    }
                }
                Ok(_) => {}
                // Every client clone is gone, and what they sent went out.
                Err(ConnectionError::RequestsDone) => break,
                Err(e) => {
                    self.subscribed.send_replace(false);
                    if self.client.is_none() {
                        // Closing, and the connection is gone: nothing
                        // left can be sent.
                        break;
                    }
                    if failures == 0 {
                        tracing::warn!(url = %self.url, error = %e, "mqtt: disconnected; reconnecting");
                    }
                    let wait = super::message::reconnect_wait(failures);
                    failures = failures.saturating_add(1);
                    tokio::select! {
                        () = self.messages.closed() => self.client = None,
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }
}

/// Serves a topic: a member of a shared subscription, taking its share of
/// the topic's messages. Hand it to
/// [`Server::serve_messages`](crate::server::Server::serve_messages).
#[derive(Debug)]
pub struct MqttListener {
    /// `None` once flushed.
    client: Option<AsyncClient>,
    messages: mpsc::Receiver<Publish>,
    driver: Option<JoinHandle<()>>,
    /// True once the broker has acknowledged the unsubscription of `close`.
    unsubscribed: watch::Receiver<bool>,
    filter: String,
    local_addr: String,
}

impl MqttListener {
    /// Connects to `url` (`mqtt://HOST:PORT`) and subscribes to `topic` in
    /// the group [`DEFAULT_GROUP`].
    pub async fn connect(url: &str, topic: &str) -> io::Result<Self> {
        Self::connect_in_group(url, topic, DEFAULT_GROUP).await
    }

    /// Connects to `url` and subscribes to `$share/GROUP/TOPIC`: servers in
    /// one group share the calls, each group gets every call.
    pub async fn connect_in_group(url: &str, topic: &str, group: &str) -> io::Result<Self> {
        check_topic(topic)?;
        if group.is_empty() || group.contains(['/', '+', '#']) {
            return Err(invalid(format!("{group:?}: a share group name has no /, + or #")));
        }
        let url = url.trim_end_matches('/');
        let filter = format!("$share/{group}/{topic}");
        let session = subscribe(url, "server", filter.clone()).await?;
        Ok(MqttListener {
            client: Some(session.client),
            messages: session.messages,
            driver: Some(session.driver),
            unsubscribed: session.unsubscribed,
            filter,
            local_addr: format!("{url}/{topic}"),
        })
    }
}

impl MessageListener for MqttListener {
    async fn next(&mut self) -> Option<Message> {
        let publish = tokio::select! {
            biased;
            publish = self.messages.recv() => publish?,
            // Unsubscribed: what arrived before is in the queue already.
            _ = self.unsubscribed.wait_for(|done| *done) => self.messages.try_recv().ok()?,
        };
        let message = Message::new(publish.payload, "mqtt")
            .arrived_at(&self.local_addr)
            .max_reply(MAX_REPLY);
        let Some(properties) = publish.properties else {
            return Some(message);
        };
        let Some(response_topic) = properties.response_topic else {
            return Some(message);
        };
        let client = self.client.clone()?;
        let correlation_data = properties.correlation_data;
        Some(
            message.reply_to(response_topic.clone(), move |answer| async move {
                let Some(answer) = answer else { return };
                let properties = PublishProperties {
                    correlation_data,
                    ..PublishProperties::default()
                };
                if let Err(e) = client
                    .publish_with_properties(response_topic, QoS::AtLeastOnce, false, answer, properties)
                    .await
                {
                    tracing::warn!(error = %e, "mqtt: cannot publish a reply");
                }
            }),
        )
    }

    fn local_addr(&self) -> String {
        self.local_addr.clone()
    }

    /// Unsubscribes: the group's other members take the calls from then
    /// on. Messages keep being taken until the broker acknowledges it
    /// (those it sent before, acknowledged at QoS 1, would be lost
    /// otherwise); `next` ends once they are served.
    async fn close(&mut self) {
        let unsubscribing = self
            .client
            .as_ref()
            .is_some_and(|client| client.try_unsubscribe(self.filter.clone()).is_ok());
        if !unsubscribing {
            self.messages.close();
        }
    }

    /// Lets the connection go once the replies are out.
    async fn flush(&mut self) {
        self.client = None;
        if let Some(driver) = self.driver.take() {
            let _ = driver.await;
        }
    }
}

/// Calls a topic: each frame published to it at QoS 1, with a Response
/// Topic of this client's own.
#[derive(Debug, Clone)]
pub struct MqttDialer {
    url: String,
    topic: String,
}

impl MqttDialer {
    /// A dialer for `topic` on the broker at `url` (`mqtt://HOST:PORT`).
    pub fn new(url: impl Into<String>, topic: impl Into<String>) -> Self {
        MqttDialer {
            url: url.into().trim_end_matches('/').to_owned(),
            topic: topic.into(),
        }
    }

    /// A dialer for a target: `mqtt://HOST:PORT/TOPIC`.
    pub fn from_target(target: &str) -> io::Result<Self> {
        let (url, topic) = split_target(target)?;
        Ok(MqttDialer::new(url, topic))
    }
}

impl Dialer for MqttDialer {
    async fn dial(&self) -> io::Result<Connection> {
        check_topic(&self.topic)?;
        let id = client_id("client");
        let replies = format!("jrpc/replies/{id}");
        let Session {
            client,
            messages,
            subscribed,
            driver: _,
            unsubscribed: _,
        } = subscribe(&self.url, "client", replies.clone()).await?;
        let info = ConnectionInfo {
            transport: "mqtt",
            peer_addr: Some(format!("{}/{}", self.url, self.topic)),
            local_addr: Some(replies.clone()),
        };
        let incoming = futures_util::stream::unfold(messages, |mut messages| async move {
            let publish = messages.recv().await?;
            Some((Ok(Inbound::Frame(publish.payload)), messages))
        });
        let topic = self.topic.clone();
        let outgoing = futures_util::sink::unfold(
            (client, subscribed),
            move |(client, mut subscribed), frame: OutFrame| {
                let (topic, replies) = (topic.clone(), replies.clone());
                // Replies have no one to go to: servers answer to response
                // topics.
                let reply = frame.read_kind().is_reply();
                let frame = frame.bytes;
                async move {
                    if reply {
                        return Ok((client, subscribed));
                    }
                    // After a reconnect, calls wait until replies can arrive
                    // (within their timeouts); a stopped driver fails below.
                    let _ = subscribed.wait_for(|on| *on).await;
                    // Every frame carries the Response Topic: a server answers
                    // only what needs answering.
                    let properties = PublishProperties {
                        response_topic: Some(replies),
                        ..PublishProperties::default()
                    };
                    client
                        .publish_with_properties(topic, QoS::AtLeastOnce, false, frame, properties)
                        .await
                        .map_err(broken)?;
                    Ok((client, subscribed))
                }
            },
        );
        Ok(Connection::with_kinds(incoming, outgoing, info))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_split_into_broker_and_topic() {
        let cases = [
            (
                "mqtt://127.0.0.1:1883/demo/rpc",
                Some(("mqtt://127.0.0.1:1883", "demo/rpc")),
            ),
            ("mqtt://h:1/a", Some(("mqtt://h:1", "a"))),
            ("mqtt://h:1/a/+", None),
            ("mqtt://h:1/#", None),
            ("mqtt://h:1/", None),
            ("mqtt://h:1", None),
            ("nats://h:1/a", None),
        ];
        for (target, expected) in cases {
            let got = split_target(target).ok();
            let got = got.as_ref().map(|(b, t)| (b.as_str(), t.as_str()));
            assert_eq!(got, expected, "{target}");
        }
    }

    #[test]
    fn brokers_have_a_host_and_a_port() {
        assert_eq!(
            host_and_port("mqtt://127.0.0.1:1884").unwrap(),
            ("127.0.0.1".into(), 1884)
        );
        assert_eq!(host_and_port("mqtt://broker").unwrap(), ("broker".into(), 1883));
        assert_eq!(host_and_port("mqtt://[::1]:1885").unwrap(), ("::1".into(), 1885));
        assert!(host_and_port("mqtt://h:port").is_err());
        assert!(host_and_port("mqtt://:1883").is_err());
    }
}
