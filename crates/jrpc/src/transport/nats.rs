//! NATS (feature `nats`): JSON-RPC over a subject, with `async-nats`.
//!
//! - [`NatsListener`] subscribes to a subject in a queue group (default
//!   [`DEFAULT_GROUP`]): NATS gives each message to one member of the
//!   group, so several servers on one subject share the calls. Each reply
//!   goes to its message's reply subject.
//! - [`NatsDialer`] (or `Client::connect("nats://HOST:PORT/SUBJECT")`)
//!   publishes each frame to the subject with a reply subject of its own
//!   (under a private inbox), and reads the replies there; calls are
//!   matched by their JSON-RPC ids.
//!
//! A target or listener may name a cluster by several seeds
//! (`nats://A:4222,B:4222/SUBJECT`): the client connects to any seed that
//! answers and learns the other nodes from it.
//!
//! Delivery is at most once:
//! - a call whose server dies mid-call times out;
//! - a call out when the client's connection to its node drops fails at
//!   once with [`CallError::Closed`](crate::CallError::Closed): a reply
//!   published while the client is away is lost (NATS delivers to the
//!   subscribers connected at the time), and which calls those were cannot
//!   be told; the call may have run;
//! - a call to a subject nobody subscribes to fails at once (NATS answers
//!   "no responders") with a [`CallError::Transport`](crate::CallError::Transport)
//!   holding an [`Undelivered`](super::Undelivered): it did not run.
//!
//! A [`RetryPolicy`](crate::client::RetryPolicy) sends the first two again
//! for idempotent calls (`on_connection_lost`, and `on_timeout` with an
//! `attempt_timeout`), the last one always. Both sides reconnect on their
//! own, to any node they know (100 ms doubling to 5 s, forever); meanwhile
//! calls wait, within their timeouts, and go out once connected. A node
//! that vanishes without closing its connections is noticed within 20 to
//! 30 s (a ping every 10 s; two unanswered ones end the connection).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::{Client, StatusCode, Subscriber};
use bytes::Bytes;
use futures_util::StreamExt;

use super::connection::{Connection, Dialer};
use super::message::{Message, MessageListener};
use crate::codec::Inbound;
use crate::codec::{OutFrame, OutKind};
use crate::context::ConnectionInfo;
use crate::message::{Error, Id, Response};

/// The queue group servers join unless told otherwise: `jrpc`.
pub const DEFAULT_GROUP: &str = "jrpc";

/// How long a call's reply subject is remembered, to answer "no
/// responders" for it: far longer than a broker takes to say so.
const REMEMBERED: Duration = Duration::from_secs(60);

/// How often each side pings its node (an unanswered ping counts against it).
const PING_INTERVAL: Duration = Duration::from_secs(10);

/// The most reply subjects remembered at once.
const MOST_REMEMBERED: usize = 100_000;

/// Splits `nats://HOST:PORT/SUBJECT` into the server and the subject. A
/// cluster is named by several seed addresses, comma-separated, each with
/// or without its own `nats://` (`nats://A:4222,B:4222/demo`,
/// `nats://A:4222,nats://B:4222/demo`): the server part is then the seeds
/// as [`connect`](NatsListener::connect) takes them, `nats://A:4222,nats://B:4222`.
pub fn split_target(target: &str) -> io::Result<(String, String)> {
    let mut rest = target
        .strip_prefix("nats://")
        .ok_or_else(|| invalid(format!("{target}: expected nats://HOST:PORT/SUBJECT")))?;
    let mut seeds = Vec::new();
    loop {
        let end = rest.find([',', '/']).unwrap_or(rest.len());
        let seed = &rest[..end];
        if seed.is_empty() {
            return Err(invalid(format!(
                "{target}: expected nats://HOST:PORT[,HOST:PORT...]/SUBJECT (an empty server address)"
            )));
        }
        seeds.push(format!("nats://{seed}"));
        match rest[end..].chars().next() {
            Some(',') => {
                rest = &rest[end + 1..];
                rest = rest.strip_prefix("nats://").unwrap_or(rest);
            }
            Some(_) if end + 1 < rest.len() => {
                return Ok((seeds.join(","), rest[end + 1..].to_owned()));
            }
            _ => {
                return Err(invalid(format!(
                    "{target}: expected nats://HOST:PORT/SUBJECT (the subject is missing)"
                )))
            }
        }
    }
}

/// The seed addresses of `url`: one, or several comma-separated (each
/// `nats://HOST:PORT`, or `HOST:PORT`). The client connects to any that
/// answers, and learns the rest of the cluster from it.
fn seeds(url: &str) -> io::Result<Vec<async_nats::ServerAddr>> {
    url.split(',')
        .map(str::trim)
        .filter(|seed| !seed.is_empty())
        .map(|seed| {
            let seed = seed.trim_end_matches('/');
            let full = if seed.contains("://") {
                seed.to_owned()
            } else {
                format!("nats://{seed}")
            };
            full.parse::<async_nats::ServerAddr>()
                .map_err(|e| invalid(format!("{seed}: not a NATS server address: {e}")))
        })
        .collect::<io::Result<Vec<_>>>()
        .and_then(|seeds| {
            if seeds.is_empty() {
                Err(invalid(format!("{url:?}: no NATS server address")))
            } else {
                Ok(seeds)
            }
        })
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// Connects to a NATS server (or to any of a cluster's seeds),
/// reconnecting on its own when the connection drops (to any node it knows
/// of: the seeds and what the nodes gossip; 100 ms doubling to 5 s,
/// forever), with a log line either way; `on_disconnected` runs each time
/// the connection drops.
async fn connect(
    url: &str,
    name: &'static str,
    on_disconnected: impl Fn() + Send + Sync + 'static,
) -> io::Result<Client> {
    let addresses = seeds(url)?;
    let server = url.to_owned();
    let on_disconnected = Arc::new(on_disconnected);
    async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(Duration::from_secs(5))
        // A node that vanished without closing the connection (its host
        // lost, its link cut for good) is noticed after two unanswered
        // pings: 20 to 30 s, not the 2 to 3 minutes of the default.
        .ping_interval(PING_INTERVAL)
        .reconnect_delay_callback(|attempts| {
            super::message::reconnect_wait(u32::try_from(attempts.saturating_sub(1)).unwrap_or(u32::MAX))
        })
        .event_callback(move |event| {
            let server = server.clone();
            let on_disconnected = Arc::clone(&on_disconnected);
            async move {
                match event {
                    async_nats::Event::Disconnected => {
                        tracing::warn!(%server, "nats: disconnected; reconnecting");
                        on_disconnected();
                    }
                    async_nats::Event::Connected => tracing::info!(%server, "nats: connected"),
                    other => tracing::debug!(%server, event = %other, "nats"),
                }
            }
        })
        .connect(addresses)
        .await
        .map_err(|e| io::Error::new(io::ErrorKind::ConnectionRefused, format!("{url}: {e}")))
}

/// Connects a NATS client to `url` (one seed, or several comma-separated)
/// as jrpc's own NATS transports do: a clear error when no seed answers,
/// then reconnecting on its own, to any node of the cluster (100 ms
/// doubling to 5 s, forever), with a log line each way. For other layers
/// that keep their own state in NATS (MCP's shared state).
pub async fn connect_client(url: &str, name: &'static str) -> io::Result<Client> {
    connect(url.trim_end_matches('/'), name, || {}).await
}

/// [`connect_client`], calling `on_disconnected` each time the connection
/// drops (before it reconnects): for state kept on the server side of a
/// connection (consumers) that must be made again.
pub async fn connect_client_with(
    url: &str,
    name: &'static str,
    on_disconnected: impl Fn() + Send + Sync + 'static,
) -> io::Result<Client> {
    connect(url.trim_end_matches('/'), name, on_disconnected).await
}

/// How long to wait before trying again after `failures` failures in a
/// row: 100 ms doubling to 5 s.
pub fn reconnect_wait(failures: u32) -> Duration {
    super::message::reconnect_wait(failures)
}

fn io_error(e: impl std::error::Error + Send + Sync + 'static) -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, e)
}

/// Serves a subject: a member of a queue group, taking its share of the
/// subject's messages. Hand it to
/// [`Server::serve_messages`](crate::server::Server::serve_messages).
#[derive(Debug)]
pub struct NatsListener {
    client: Client,
    subscriber: Subscriber,
    local_addr: String,
    max_payload: usize,
}

impl NatsListener {
    /// Connects to `url` (`nats://HOST:PORT`) and subscribes to `subject`
    /// in the queue group [`DEFAULT_GROUP`].
    pub async fn connect(url: &str, subject: &str) -> io::Result<Self> {
        Self::connect_in_group(url, subject, DEFAULT_GROUP).await
    }

    /// Connects to `url` and subscribes to `subject` in queue group
    /// `group`: servers in one group share the calls, each group gets every
    /// call.
    pub async fn connect_in_group(url: &str, subject: &str, group: &str) -> io::Result<Self> {
        let url = url.trim_end_matches('/');
        // Replies to calls taken before a drop are sent after the
        // reconnection (the client buffers them).
        let client = connect(url, "jrpc server", || {}).await?;
        let subscriber = client
            .queue_subscribe(subject.to_owned(), group.to_owned())
            .await
            .map_err(io_error)?;
        // The subscription is in place on the broker before serving starts.
        client.flush().await.map_err(io_error)?;
        Ok(NatsListener {
            max_payload: client.server_info().max_payload,
            client,
            subscriber,
            local_addr: format!("{url}/{subject}"),
        })
    }
}

impl MessageListener for NatsListener {
    async fn next(&mut self) -> Option<Message> {
        loop {
            let incoming = self.subscriber.next().await?;
            if incoming.status.is_some() {
                // A status from the broker, not a call.
                continue;
            }
            let message = Message::new(incoming.payload, "nats")
                .arrived_at(&self.local_addr)
                .max_reply(self.max_payload);
            let Some(reply) = incoming.reply else {
                return Some(message);
            };
            let client = self.client.clone();
            return Some(message.reply_to(reply.to_string(), move |answer| async move {
                if let Some(answer) = answer {
                    if let Err(e) = client.publish(reply, answer).await {
                        tracing::warn!(error = %e, "nats: cannot publish a reply");
                    }
                }
            }));
        }
    }

    fn local_addr(&self) -> String {
        self.local_addr.clone()
    }

    /// Unsubscribes once what the broker already sent has arrived: the
    /// group's other members take the calls from then on.
    async fn close(&mut self) {
        if let Err(e) = self.subscriber.drain().await {
            tracing::debug!(error = %e, "nats: cannot drain the subscription");
        }
    }

    async fn flush(&mut self) {
        if let Err(e) = self.client.flush().await {
            tracing::warn!(error = %e, "nats: cannot flush the replies");
        }
    }
}

/// Calls a subject: each frame is published to it, with a reply subject of
/// its own under a private inbox.
#[derive(Debug, Clone)]
pub struct NatsDialer {
    url: String,
    subject: String,
}

impl NatsDialer {
    /// A dialer for `subject` on the NATS server at `url`
    /// (`nats://HOST:PORT`).
    pub fn new(url: impl Into<String>, subject: impl Into<String>) -> Self {
        NatsDialer {
            url: url.into().trim_end_matches('/').to_owned(),
            subject: subject.into(),
        }
    }

    /// A dialer for a target: `nats://HOST:PORT/SUBJECT`.
    pub fn from_target(target: &str) -> io::Result<Self> {
        let (url, subject) = split_target(target)?;
        Ok(NatsDialer::new(url, subject))
    }
}

/// The requests of frames sent and not yet answered, by reply subject, so
/// that "no responders" fails each of them.
#[derive(Default)]
struct Awaiting {
    by_reply: HashMap<u64, Vec<Id>>,
    order: VecDeque<(u64, Instant)>,
}

impl Awaiting {
    fn insert(&mut self, n: u64, ids: Vec<Id>) {
        let now = Instant::now();
        // Forget what was answered, or is old enough not to be, or is past
        // the bound; stop at the oldest still awaited.
        while let Some(&(oldest, at)) = self.order.front() {
            let awaited = self.by_reply.contains_key(&oldest);
            if awaited && now.duration_since(at) < REMEMBERED && self.order.len() < MOST_REMEMBERED {
                break;
            }
            self.by_reply.remove(&oldest);
            self.order.pop_front();
        }
        self.by_reply.insert(n, ids);
        self.order.push_back((n, now));
    }

    /// The ids of every call still awaited, forgetting them all.
    fn take_all(&mut self) -> Vec<Id> {
        self.order.clear();
        self.by_reply.drain().flat_map(|(_, ids)| ids).collect()
    }
}

/// How the dialer sends a frame, by what it carries.
#[derive(Debug, PartialEq)]
enum Route {
    /// Not at all: replies have no one to go to (the servers answer to
    /// reply subjects, and take no replies on the subject).
    Drop,
    /// To the subject, with a reply subject for the answer; the ids of the
    /// calls that fail if nobody takes it.
    Call { ids: Vec<Id> },
    /// To the subject, expecting nothing back.
    Notify,
}

fn route_of(kind: OutKind) -> Route {
    match kind {
        OutKind::Reply(_) | OutKind::Replies => Route::Drop,
        OutKind::Notification => Route::Notify,
        OutKind::Calls(ids) if ids.is_empty() => Route::Notify,
        OutKind::Calls(ids) => Route::Call { ids },
        OutKind::Request(id) => Route::Call { ids: vec![id] },
        // Bytes that are not valid messages: the servers answer them with
        // an error, under no id of this side's.
        _ => Route::Call { ids: Vec::new() },
    }
}

/// Error replies to `ids`, as a server would have sent them: one reply, or
/// a batch of them for a batch.
fn error_replies(ids: &[Id], batch: bool, error: &Error) -> Bytes {
    let replies: Vec<Bytes> = ids
        .iter()
        .map(|id| {
            Response {
                id: id.clone(),
                outcome: Err(error.clone()),
            }
            .to_bytes()
        })
        .collect();
    if !batch {
        return replies.into_iter().next().unwrap_or_default();
    }
    let mut out = Vec::with_capacity(replies.iter().map(|r| r.len() + 1).sum::<usize>() + 2);
    out.push(b'[');
    for (i, reply) in replies.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(reply);
    }
    out.push(b']');
    out.into()
}

impl Dialer for NatsDialer {
    async fn dial(&self) -> io::Result<Connection> {
        let awaiting = Arc::new(Mutex::new(Awaiting::default()));
        // What this side tells its reader itself: replies for frames too
        // large to publish, and the calls whose replies a lost connection
        // took with it.
        let (made_up, made_up_rx) = tokio::sync::mpsc::unbounded_channel::<Inbound>();
        let lost = {
            let (awaiting, made_up) = (Arc::clone(&awaiting), made_up.clone());
            move || {
                let ids = awaiting.lock().unwrap_or_else(|e| e.into_inner()).take_all();
                if !ids.is_empty() {
                    // Replies published while this side is away are gone
                    // (a subject delivers only to subscribers connected at
                    // the time), and there is no telling which calls they
                    // were: each call out fails now, as the issue of a lost
                    // connection, and an idempotent one goes out again at
                    // once instead of waiting out its timeout.
                    let _ = made_up.send(Inbound::Lost {
                        ids: ids.into(),
                        reason: "the connection to the NATS server was lost before the reply (the call may have run); reconnecting".into(),
                    });
                }
            }
        };
        let client = connect(&self.url, "jrpc client", lost).await?;
        let inbox = client.new_inbox();
        let replies = client.subscribe(format!("{inbox}.*")).await.map_err(io_error)?;
        client.flush().await.map_err(io_error)?;
        let target = format!("{}/{}", self.url, self.subject);
        let info = ConnectionInfo {
            transport: "nats",
            peer_addr: Some(target.clone()),
            local_addr: Some(inbox.clone()),
        };
        let max_payload = client.server_info().max_payload;
        let reading = Arc::clone(&awaiting);
        let made_up_rx = futures_util::stream::unfold(made_up_rx, |mut made_up| async move {
            let inbound = made_up.recv().await?;
            Some((Ok(inbound), made_up))
        });
        let incoming = replies.filter_map(move |reply| {
            let n = reply
                .subject
                .as_str()
                .rsplit('.')
                .next()
                .and_then(|n| n.parse::<u64>().ok());
            let sent = n.and_then(|n| {
                reading
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .by_reply
                    .remove(&n)
            });
            let inbound = match reply.status {
                None => Some(Inbound::Frame(reply.payload)),
                // Nothing to fail for a frame with no request ids.
                Some(StatusCode::NO_RESPONDERS) => {
                    sent.filter(|ids| !ids.is_empty())
                        .map(|ids| Inbound::Undelivered {
                            ids: ids.into(),
                            reason: format!("no responders: nothing subscribes to {target}").into(),
                        })
                }
                Some(status) => {
                    tracing::debug!(%status, "nats: a status on the reply subject");
                    None
                }
            };
            std::future::ready(inbound.map(Ok))
        });
        // Replies first: those read before a drop are queued before the
        // drop is reported, and answer their calls before `Lost` fails the
        // rest.
        let incoming = futures_util::stream::select_with_strategy(incoming, made_up_rx, |_: &mut ()| {
            futures_util::stream::PollNext::Left
        });
        let subject = self.subject.clone();
        let mut next_reply: u64 = 0;
        let outgoing = futures_util::sink::unfold(client, move |client, frame: OutFrame| {
            let kind = frame.read_kind();
            let batch = matches!(kind, OutKind::Calls(_));
            let route = route_of(kind);
            let frame = frame.bytes;
            let published = match route {
                Route::Drop => None,
                Route::Call { ids } if frame.len() > max_payload && !ids.is_empty() => {
                    let error = Error::frame_too_large().with_data(&format!(
                        "the request of {} bytes is over what the NATS server carries ({max_payload})",
                        frame.len()
                    ));
                    let _ = made_up.send(Inbound::Frame(error_replies(&ids, batch, &error)));
                    None
                }
                _ if frame.len() > max_payload => {
                    tracing::warn!(
                        bytes = frame.len(),
                        max_payload,
                        "nats: a frame with no request too large to publish is dropped"
                    );
                    None
                }
                Route::Call { ids } => {
                    next_reply += 1;
                    awaiting
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(next_reply, ids);
                    let reply = format!("{inbox}.{next_reply}");
                    Some((subject.clone(), Some(reply)))
                }
                Route::Notify => Some((subject.clone(), None)),
            };
            async move {
                match published {
                    Some((subject, Some(reply))) => client.publish_with_reply(subject, reply, frame).await,
                    Some((subject, None)) => client.publish(subject, frame).await,
                    None => return Ok(client),
                }
                .map_err(io_error)?;
                Ok(client)
            }
        });
        Ok(Connection::with_kinds(incoming, outgoing, info))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_split_into_server_and_subject() {
        let cases = [
            (
                "nats://127.0.0.1:4222/demo",
                Some(("nats://127.0.0.1:4222", "demo")),
            ),
            ("nats://h:1/a.b.c", Some(("nats://h:1", "a.b.c"))),
            ("nats://h:1/a/b", Some(("nats://h:1", "a/b"))),
            // A cluster's seeds, with or without their own scheme.
            (
                "nats://a:4222,b:4222/demo",
                Some(("nats://a:4222,nats://b:4222", "demo")),
            ),
            (
                "nats://a:4222,nats://b:4222,c:1/demo",
                Some(("nats://a:4222,nats://b:4222,nats://c:1", "demo")),
            ),
            ("nats://a:4222,/demo", None),
            ("nats://,a:1/demo", None),
            ("nats://a:1,b:2", None),
            ("nats://h:1/", None),
            ("nats://h:1", None),
            ("nats:///demo", None),
            ("tcp://h:1/demo", None),
        ];
        for (target, expected) in cases {
            let got = split_target(target).ok();
            let got = got.as_ref().map(|(s, t)| (s.as_str(), t.as_str()));
            assert_eq!(got, expected, "{target}");
        }
    }

    #[test]
    fn seeds_are_read_with_or_without_their_scheme() {
        assert_eq!(seeds("nats://a:1").unwrap().len(), 1);
        assert_eq!(seeds("nats://a:1,b:2, nats://c:3/").unwrap().len(), 3);
        assert!(seeds("").is_err());
        assert!(seeds("nats://a:notaport").is_err());
    }

    #[test]
    fn frames_are_routed_by_what_they_carry() {
        let read =
            |text: &'static str| route_of(OutFrame::from(Bytes::from_static(text.as_bytes())).read_kind());
        let cases = [
            (read(r#"{"jsonrpc":"2.0","id":1,"result":1}"#), Route::Drop),
            (read(r#"[{"jsonrpc":"2.0","id":1,"result":1}]"#), Route::Drop),
            (read(r#"{"jsonrpc":"2.0","method":"n"}"#), Route::Notify),
            (read(r#"[{"jsonrpc":"2.0","method":"n"}]"#), Route::Notify),
            (
                read(
                    r#"[{"jsonrpc":"2.0","method":"a","id":1},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","method":"b","id":"x"}]"#,
                ),
                Route::Call {
                    ids: vec![Id::from(1), Id::from("x")],
                },
            ),
            (read("not json"), Route::Call { ids: Vec::new() }),
            (
                route_of(OutKind::Request(Id::from(7))),
                Route::Call {
                    ids: vec![Id::from(7)],
                },
            ),
            (route_of(OutKind::Replies), Route::Drop),
        ];
        for (i, (got, expected)) in cases.into_iter().enumerate() {
            assert_eq!(got, expected, "case {i}");
        }
    }

    #[test]
    fn too_large_calls_are_answered_in_the_shape_they_were_sent() {
        let error = Error::frame_too_large();
        let ids = [Id::from(1), Id::from("x")];
        let reply: serde_json::Value = serde_json::from_slice(&error_replies(&ids, true, &error)).unwrap();
        assert_eq!(reply[1]["id"], "x");
        assert_eq!(reply[0]["error"]["code"], error.code());
        let single: serde_json::Value =
            serde_json::from_slice(&error_replies(&ids[..1], false, &error)).unwrap();
        assert_eq!(single["id"], 1);
    }
}
