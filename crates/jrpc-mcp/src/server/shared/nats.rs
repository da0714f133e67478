//! The shared state of a fleet: NATS JetStream (feature `nats`).
//!
//! For a fleet named `NAME` (the server's name unless set otherwise):
//!
//! * key-value bucket `JRPC_MCP_NAME_TASKS`: one record per task, gone a
//!   while after its last write (the bucket's age limit: NATS 2.9 has no
//!   per-key TTL, so a task's own expiry and its runner's lease are
//!   timestamps in the record, changed by compare-and-set);
//! * key-value bucket `JRPC_MCP_NAME`: the `requestState` key (made by the
//!   first replica, read by the others) and the application's records;
//! * stream `JRPC_MCP_NAME_CHANGES` on subject `jrpc-mcp.NAME.changes`:
//!   the change notifications replicas announce, read by each through an
//!   ordered consumer, which resumes where it was after a reconnection
//!   (nothing published meanwhile is missed while the stream keeps it: ten
//!   minutes).
//!
//! Buckets and stream are replicated three ways on a cluster (a node's
//! loss loses nothing) and kept once on a single server.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer, kv, stream};
use async_nats::HeaderMap;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::{Entry, Event, SharedState, Space, StateError, StateFuture};

/// The header naming the replica that published a change: a replica skips
/// its own.
const REPLICA_HEADER: &str = "Jrpc-Mcp-Replica";

/// The key of the `requestState` secret in the server's bucket.
const STATE_KEY: &str = "request-state-key";

/// Room for a record's headers within the server's payload limit.
const HEADROOM: usize = 4096;

/// How long one request of a follower or a publisher may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a change is tried before it is given up: longer than a
/// cluster takes to replace a lost node's streams (see [`retry_wait`]).
const PUBLISH_PATIENCE: Duration = Duration::from_secs(20);

/// How long a follower waits without news before it checks that its stream
/// has not gone on without it.
const SILENCE: Duration = Duration::from_secs(1);

/// How to connect a [`NatsState`]; from [`NatsState::builder`].
#[derive(Debug, Clone)]
pub struct NatsStateBuilder {
    url: String,
    name: String,
    replicas: Option<usize>,
    task_retention: Duration,
}

impl NatsStateBuilder {
    /// How many copies of each bucket and stream a cluster keeps: by
    /// default three, or one on a server that is not in a cluster.
    pub fn replicas(mut self, replicas: usize) -> Self {
        self.replicas = Some(replicas.clamp(1, 5));
        self
    }

    /// How long a task's record is kept after its last write (NATS 2.9
    /// buckets expire records by age, bucket-wide): default one hour. Keep
    /// it longer than the tasks' ttl.
    pub fn task_retention(mut self, retention: Duration) -> Self {
        self.task_retention = retention;
        self
    }

    /// Connects to any seed that answers (a clear error when none does)
    /// and makes (or finds) the fleet's buckets and stream. The connection
    /// reconnects on its own afterwards, to any node of the cluster.
    pub async fn connect(self) -> io::Result<NatsState> {
        // Each drop of the connection tells the followers (the ordered
        // consumers behind the tasks watch and the change feed) to start
        // again, from where they were: a consumer kept by a node that died
        // is gone with it, and the library would notice only after two
        // missed heartbeats (10 s).
        let (dropped, reconnected) = tokio::sync::watch::channel(0u64);
        let client =
            jrpc::transport::nats::connect_client_with(&self.url, "jrpc-mcp shared state", move || {
                dropped.send_modify(|n| *n += 1);
            })
            .await?;
        let js = jetstream::new(client.clone());
        let token = sanitize(&self.name);
        let replicas = self.replicas;
        let fallback = replicas.is_none();
        let (server, replicas) = bucket(
            &js,
            kv::Config {
                bucket: format!("JRPC_MCP_{token}"),
                description: format!("jrpc-mcp: the shared records of {}", self.name),
                history: 1,
                num_replicas: replicas.unwrap_or(3),
                ..Default::default()
            },
            fallback,
        )
        .await?;
        let (tasks, _) = bucket(
            &js,
            kv::Config {
                bucket: format!("JRPC_MCP_{token}_TASKS"),
                description: format!("jrpc-mcp: the tasks of {}", self.name),
                history: 1,
                max_age: self.task_retention,
                num_replicas: replicas,
                ..Default::default()
            },
            false,
        )
        .await?;
        let subject = format!("jrpc-mcp.{token}.changes");
        let config = stream::Config {
            name: format!("JRPC_MCP_{token}_CHANGES"),
            description: Some(format!("jrpc-mcp: change notifications of {}", self.name)),
            subjects: vec![subject.clone()],
            max_age: Duration::from_secs(600),
            max_messages: 100_000,
            discard: stream::DiscardPolicy::Old,
            num_replicas: replicas,
            ..Default::default()
        };
        let mut attempt = 0u32;
        let changes = loop {
            attempt += 1;
            match js.get_or_create_stream(config.clone()).await {
                Ok(changes) => break changes,
                Err(e) if attempt >= 20 => {
                    return Err(unavailable(format!("{}: the changes stream: {e}", self.url)))
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        };
        tracing::info!(
            replicas,
            "shared state: buckets and the change stream kept {replicas} time(s)"
        );
        let secret = request_state_secret(&server)
            .await
            .map_err(|e| unavailable(format!("{}: the request-state key: {e}", self.url)))?;
        Ok(NatsState {
            inner: Arc::new(Inner {
                client,
                js,
                server,
                tasks,
                changes,
                subject,
                replica: crate::server::ids::random_id(),
                secret,
                reconnected,
                published: AtomicU64::new(0),
            }),
        })
    }
}

/// The replicas' shared state in NATS JetStream: see the [module
/// docs](super). Cheap to clone.
#[derive(Clone)]
pub struct NatsState {
    inner: Arc<Inner>,
}

struct Inner {
    client: async_nats::Client,
    js: jetstream::Context,
    server: kv::Store,
    tasks: kv::Store,
    changes: stream::Stream,
    subject: String,
    /// This replica, in the changes it publishes.
    replica: String,
    secret: [u8; 32],
    /// Counts the connection's drops.
    reconnected: tokio::sync::watch::Receiver<u64>,
    /// Counts the changes published, for their ids.
    published: AtomicU64,
}

impl std::fmt::Debug for NatsState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsState")
            .field("subject", &self.inner.subject)
            .field("replica", &self.inner.replica)
            .finish_non_exhaustive()
    }
}

impl NatsState {
    /// How to connect to `url` (`nats://HOST:PORT`, or several seeds of a
    /// cluster comma-separated) for the fleet `name` (replicas of one
    /// server share a name; it names the buckets and the subject).
    pub fn builder(url: impl Into<String>, name: impl Into<String>) -> NatsStateBuilder {
        NatsStateBuilder {
            url: url.into(),
            name: name.into(),
            replicas: None,
            task_retention: Duration::from_secs(3600),
        }
    }

    /// Connects with the default settings; see [`NatsStateBuilder::connect`].
    pub async fn connect(url: impl Into<String>, name: impl Into<String>) -> io::Result<Self> {
        Self::builder(url, name).connect().await
    }

    fn store(&self, space: Space) -> &kv::Store {
        match space {
            Space::Tasks => &self.inner.tasks,
            Space::Server => &self.inner.server,
        }
    }
}

impl SharedState for NatsState {
    fn get<'a>(&'a self, space: Space, key: &'a str) -> StateFuture<'a, Option<Entry>> {
        Box::pin(async move {
            check_key(key)?;
            let entry = self.store(space).entry(key).await.map_err(lost)?;
            Ok(entry
                .filter(|e| e.operation == kv::Operation::Put)
                .map(|e| Entry {
                    value: e.value,
                    revision: e.revision,
                }))
        })
    }

    fn create<'a>(&'a self, space: Space, key: &'a str, value: Bytes) -> StateFuture<'a, Option<u64>> {
        Box::pin(async move {
            check_key(key)?;
            match self.store(space).create(key, value).await {
                Ok(revision) => Ok(Some(revision)),
                Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => Ok(None),
                Err(e) => Err(lost(e)),
            }
        })
    }

    fn update<'a>(
        &'a self,
        space: Space,
        key: &'a str,
        value: Bytes,
        revision: u64,
    ) -> StateFuture<'a, Option<u64>> {
        Box::pin(async move {
            check_key(key)?;
            match self.store(space).update(key, value, revision).await {
                Ok(revision) => Ok(Some(revision)),
                Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => Ok(None),
                Err(e) => Err(lost(e)),
            }
        })
    }

    fn delete<'a>(&'a self, space: Space, key: &'a str) -> StateFuture<'a, ()> {
        Box::pin(async move {
            check_key(key)?;
            self.store(space).purge(key).await.map_err(lost)
        })
    }

    fn publish(&self, message: Bytes) -> StateFuture<'_, ()> {
        Box::pin(async move {
            let inner = &self.inner;
            let mut headers = HeaderMap::new();
            headers.insert(REPLICA_HEADER, inner.replica.as_str());
            // One id for every attempt: the stream keeps one copy of a
            // message sent again after its acknowledgement was lost (its
            // duplicate window is two minutes).
            let id = format!(
                "{}-{}",
                inner.replica,
                inner.published.fetch_add(1, Ordering::Relaxed)
            );
            headers.insert(async_nats::header::NATS_MESSAGE_ID, id.as_str());
            let started = Instant::now();
            let mut failures = 0u32;
            loop {
                let attempt = async {
                    let ack = inner
                        .js
                        .publish_with_headers(inner.subject.clone(), headers.clone(), message.clone())
                        .await
                        .map_err(lost)?;
                    ack.await.map_err(lost)
                };
                let sent = tokio::time::timeout(REQUEST_TIMEOUT, attempt)
                    .await
                    .unwrap_or_else(|_| Err(lost("no acknowledgement")));
                match sent {
                    Ok(ack) => {
                        tracing::debug!(
                            sequence = ack.sequence,
                            duplicate = ack.duplicate,
                            "shared state: change published"
                        );
                        return Ok(());
                    }
                    Err(e) if started.elapsed() >= PUBLISH_PATIENCE => return Err(e),
                    Err(_) => {
                        failures += 1;
                        tokio::time::sleep(retry_wait(failures)).await;
                    }
                }
            }
        })
    }

    fn events(&self) -> BoxStream<'static, Event> {
        let (tx, rx) = mpsc::channel(1024);
        tokio::spawn(watch_tasks(self.clone(), tx.clone()));
        tokio::spawn(follow_changes(self.clone(), tx));
        Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|event| (event, rx))
        }))
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn max_record(&self) -> usize {
        self.inner
            .client
            .server_info()
            .max_payload
            .saturating_sub(HEADROOM)
            .max(HEADROOM)
    }

    fn request_state_secret(&self) -> Option<[u8; 32]> {
        Some(self.inner.secret)
    }
}

/// Hands every write to the tasks bucket to `events`, until nobody
/// listens.
async fn watch_tasks(state: NatsState, events: mpsc::Sender<Event>) {
    let tasks = state.inner.tasks.clone();
    let stream = tasks.stream.clone();
    let open = move |from: u64| {
        let tasks = tasks.clone();
        async move { tasks.watch_all_from_revision(from + 1).await }
    };
    follow(state, "the tasks", stream, events, open, |_, entry: kv::Entry| {
        let event = (entry.operation == kv::Operation::Put).then(|| Event::Record {
            space: Space::Tasks,
            key: entry.key,
            entry: Entry {
                value: entry.value,
                revision: entry.revision,
            },
        });
        (Some(entry.revision), event)
    })
    .await;
}

/// Hands the changes other replicas publish to `events`, until nobody
/// listens.
async fn follow_changes(state: NatsState, events: mpsc::Sender<Event>) {
    let stream = state.inner.changes.clone();
    let opener = state.clone();
    let open = move |from: u64| {
        let state = opener.clone();
        async move {
            let consumer = state
                .inner
                .changes
                .create_consumer(consumer::push::OrderedConfig {
                    deliver_subject: state.inner.client.new_inbox(),
                    description: Some("jrpc-mcp: a replica's change feed".into()),
                    deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                        start_sequence: from + 1,
                    },
                    ..Default::default()
                })
                .await
                .map_err(|e| e.to_string())?;
            consumer.messages().await.map_err(|e| e.to_string())
        }
    };
    follow(
        state,
        "the changes",
        stream,
        events,
        open,
        |state, message: jetstream::Message| {
            let position = message.info().ok().map(|info| info.stream_sequence);
            let own = message
                .headers
                .as_ref()
                .and_then(|h| h.get(REPLICA_HEADER))
                .is_some_and(|r| r.as_str() == state.inner.replica);
            tracing::debug!(sequence = ?position, own, "shared state: change heard");
            let event = (!own).then(|| Event::Message(message.payload.clone()));
            (position, event)
        },
    )
    .await;
}

/// Reads `stream` through what `open(from)` opens (its messages after
/// sequence `from`), giving `read`'s events to `events` and keeping the
/// sequence `read` says it reached; opened again, from there, whenever the
/// reading stops: a failure, a drop of the connection (a consumer kept by
/// the node left behind is gone with it, and the library would notice after
/// two missed heartbeats, 10 s), or the stream ahead of the reader after a
/// second of silence (a consumer on a node that died while this
/// connection, to another node, held). It starts at the stream's end: what
/// was written before this server started is not its news.
async fn follow<T, S, E, F, G>(
    state: NatsState,
    what: &'static str,
    stream: stream::Stream,
    events: mpsc::Sender<Event>,
    open: impl Fn(u64) -> F,
    read: impl Fn(&NatsState, T) -> (Option<u64>, Option<Event>),
) where
    S: futures_util::Stream<Item = Result<T, E>> + Unpin,
    E: std::fmt::Display,
    F: std::future::Future<Output = Result<S, G>>,
    G: std::fmt::Display,
{
    let mut reconnected = state.inner.reconnected.clone();
    let mut failures = 0u32;
    let mut from: Option<u64> = None;
    while !events.is_closed() {
        if failures > 0 {
            tokio::time::sleep(retry_wait(failures)).await;
        }
        // Asked while the connection is down, the requests below would
        // wait for it and then for their timeout.
        connected(&state.inner.client).await;
        let start = match from {
            Some(sequence) => sequence,
            None => match stream_end(&stream).await {
                Ok(end) => end,
                Err(e) => {
                    failures += 1;
                    tracing::warn!(error = %e, "shared state: cannot follow {what}; trying again");
                    continue;
                }
            },
        };
        from = Some(start);
        let mut items = match tokio::time::timeout(REQUEST_TIMEOUT, open(start)).await {
            Ok(Ok(items)) => items,
            Ok(Err(e)) => {
                failures += 1;
                tracing::warn!(error = %e, "shared state: cannot follow {what}; trying again");
                continue;
            }
            Err(_) => {
                failures += 1;
                tracing::warn!("shared state: cannot follow {what} (no answer); trying again");
                continue;
            }
        };
        failures = 0;
        loop {
            let item = tokio::select! {
                item = items.next() => item,
                _ = reconnected.changed() => {
                    tracing::debug!("shared state: reconnected; following {what} again");
                    break;
                }
                () = tokio::time::sleep(SILENCE) => {
                    // The server is gone: so is its reader (within a
                    // second, not at the next message).
                    if events.is_closed() {
                        return;
                    }
                    match stream_end(&stream).await {
                        Ok(end) if Some(end) > from => {
                            tracing::debug!("shared state: {what} went on without this reader; following again");
                            break;
                        }
                        _ => continue,
                    }
                }
            };
            let item = match item {
                Some(Ok(item)) => item,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "shared state: following {what} failed; following again");
                    break;
                }
                None => break,
            };
            let (position, event) = read(&state, item);
            if position.is_some() {
                from = position;
            }
            if let Some(event) = event {
                if events.send(event).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Returns once `client` is connected.
async fn connected(client: &async_nats::Client) {
    while client.connection_state() != async_nats::connection::State::Connected {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The sequence of the last message `stream` holds.
async fn stream_end(stream: &stream::Stream) -> Result<u64, String> {
    match tokio::time::timeout(REQUEST_TIMEOUT, stream.get_info()).await {
        Ok(Ok(info)) => Ok(info.state.last_sequence),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer".into()),
    }
}

/// How long a follower waits between failed attempts, and a publisher
/// between tries: 100 ms doubling to 1 s. A stream's leader lost with its
/// node is elected again within 4 to 9 s (NATS's Raft election timeouts);
/// the replicas should be back within a second of it.
fn retry_wait(failures: u32) -> Duration {
    Duration::from_millis(100u64 << failures.min(4)).min(Duration::from_secs(1))
}

/// Finds the bucket `config` names, or makes it; with `fallback`, a server
/// that cannot keep the replicas asked for (not in a cluster) gets one
/// copy. Returns the bucket and how many copies it has.
///
/// The bucket's stream is made here, as a key-value bucket's stream is
/// (`KV_NAME` on `$KV.NAME.>`, one message per key, rollups, direct gets):
/// async-nats's `create_key_value` first reads the account's JetStream
/// limits in a shape only NATS 2.10 and later answer, and Debian ships 2.9.
async fn bucket(
    js: &jetstream::Context,
    config: kv::Config,
    fallback: bool,
) -> io::Result<(kv::Store, usize)> {
    let name = config.bucket.clone();
    if let Ok(store) = js.get_key_value(&name).await {
        let replicas = store_replicas(&store).await.unwrap_or(config.num_replicas);
        return Ok((store, replicas));
    }
    let stream = |replicas: usize| stream::Config {
        name: format!("KV_{name}"),
        description: Some(config.description.clone()),
        subjects: vec![format!("$KV.{name}.>")],
        max_messages_per_subject: config.history.max(1),
        max_age: config.max_age,
        max_bytes: -1,
        max_messages: -1,
        max_consumers: -1,
        max_message_size: -1,
        discard: stream::DiscardPolicy::New,
        retention: stream::RetentionPolicy::Limits,
        storage: stream::StorageType::File,
        num_replicas: replicas,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        duplicate_window: Duration::from_secs(120).min(if config.max_age.is_zero() {
            Duration::from_secs(120)
        } else {
            config.max_age
        }),
        ..Default::default()
    };
    let mut replicas = config.num_replicas;
    // A cluster still forming (its JetStream leader not yet elected, its
    // nodes not yet all seen) refuses for a while: asked again, up to about
    // ten seconds. Only a server that is not in a cluster at all gets one
    // copy: a bucket kept once on a cluster would be lost with its node.
    let mut attempt = 0u32;
    let made = loop {
        attempt += 1;
        match js.create_stream(stream(replicas)).await {
            Ok(_) => break Ok(()),
            Err(e)
                if e.kind()
                    == async_nats::jetstream::context::CreateStreamErrorKind::JetStreamUnavailable =>
            {
                return Err(unavailable(format!(
                    "JetStream is not enabled on this NATS server: start it with -js (nats-server -js), for bucket {name}"
                )));
            }
            Err(e) if fallback && replicas > 1 && not_clustered(&e) => {
                tracing::info!(bucket = %name, "shared state: one copy of each record (the server is not in a cluster)");
                replicas = 1;
            }
            Err(e) => {
                if js.get_key_value(&name).await.is_ok() {
                    // Another replica made it meanwhile.
                    break Ok(());
                }
                if attempt >= 20 {
                    break Err(e);
                }
                tracing::debug!(bucket = %name, error = %e, "shared state: the bucket cannot be made yet; trying again");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    };
    if let Err(e) = made {
        return Err(unavailable(format!("bucket {name}: {e}")));
    }
    let store = js
        .get_key_value(&name)
        .await
        .map_err(|e| unavailable(format!("bucket {name}: {e}")))?;
    Ok((store, replicas))
}

/// Whether `error` says the server is not in a cluster (NATS error 10074:
/// replicas above one are not supported in non-clustered mode).
fn not_clustered(error: &async_nats::jetstream::context::CreateStreamError) -> bool {
    match error.kind() {
        async_nats::jetstream::context::CreateStreamErrorKind::JetStream(e) => {
            e.error_code() == async_nats::jetstream::ErrorCode::STREAM_REPLICAS_NOT_SUPPORTED
        }
        _ => false,
    }
}

async fn store_replicas(store: &kv::Store) -> Option<usize> {
    let mut stream = store.stream.clone();
    stream.info().await.ok().map(|info| info.config.num_replicas)
}

/// The fleet's `requestState` secret: made by the first replica to ask.
async fn request_state_secret(server: &kv::Store) -> Result<[u8; 32], String> {
    for _ in 0..8 {
        if let Some(value) = server.get(STATE_KEY).await.map_err(|e| e.to_string())? {
            return <[u8; 32]>::try_from(value.as_ref())
                .map_err(|_| format!("{STATE_KEY} holds {} bytes, not 32", value.len()));
        }
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| format!("no randomness: {e}"))?;
        match server.create(STATE_KEY, Bytes::copy_from_slice(&secret)).await {
            Ok(_) => return Ok(secret),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("the key keeps changing".into())
}

/// A name as a bucket and subject token: letters, digits, `-` and `_`.
fn sanitize(name: &str) -> String {
    let token: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if token.is_empty() {
        "default".into()
    } else {
        token
    }
}

/// Keys NATS accepts: letters, digits and `-/_=.`, not starting or ending
/// with a dot.
fn check_key(key: &str) -> Result<(), StateError> {
    let valid = !key.is_empty()
        && !key.starts_with('.')
        && !key.ends_with('.')
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-/_=.".contains(&b));
    if valid {
        Ok(())
    } else {
        Err(StateError::InvalidKey(key.to_owned()))
    }
}

fn lost(e: impl std::fmt::Display) -> StateError {
    StateError::Unavailable(e.to_string())
}

fn unavailable(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionRefused, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_keys() {
        assert_eq!(sanitize("jrpc demo.v1"), "jrpc_demo_v1");
        assert_eq!(sanitize(""), "default");
        assert!(check_key("app.demo.counter").is_ok());
        assert!(check_key("0af3").is_ok());
        for bad in ["", ".x", "x.", "a b", "a*", "a>"] {
            assert!(check_key(bad).is_err(), "{bad:?}");
        }
    }
}
