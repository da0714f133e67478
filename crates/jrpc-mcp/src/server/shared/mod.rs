//! What the replicas of one server share: the store their tasks live in,
//! the fan-out of change notifications, the key `requestState` is sealed
//! with, and the application's own records — behind one interface,
//! [`SharedState`], with two implementations:
//!
//! * [`InMemory`], the default: one process, nothing to set up (a server
//!   alone keeps everything in its memory, as it always did);
//! * `NatsState` (feature `nats`): NATS JetStream,
//!   so that several replicas of a server behind a load balancer agree —
//!   a task made through one is read, answered and cancelled through any
//!   other, and a change announced on one reaches listeners on all.
//!
//! The interface is a small versioned key-value store (read, create,
//! compare-and-set) and a broadcast between replicas; the tasks extension,
//! change notifications and the demo's counter are built on it once, for
//! both implementations.
//!
//! ```no_run
//! # #[cfg(feature = "nats")]
//! # async fn run() -> std::io::Result<()> {
//! use jrpc_mcp::server::{McpServer, NatsState};
//!
//! let shared = NatsState::connect("nats://10.0.0.1:4222,10.0.0.2:4222", "notes").await?;
//! let server = McpServer::builder("notes", "1.0").shared_state(shared).build();
//! # Ok(()) }
//! ```

mod memory;
#[cfg(feature = "nats")]
mod nats;
#[cfg(feature = "oauth")]
mod replay;

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use futures_util::stream::BoxStream;

pub use memory::InMemory;
#[cfg(feature = "nats")]
pub use nats::{NatsState, NatsStateBuilder};
#[cfg(feature = "oauth")]
pub use replay::SharedReplayCache;

/// A future of the shared state.
pub type StateFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StateError>> + Send + 'a>>;

/// Which set of records a key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Space {
    /// Task records: kept for a while, then gone (the tasks' ttl).
    Tasks,
    /// The server's own records (the `requestState` key) and the
    /// application's ([`McpServer::shared_state`](super::McpServer::shared_state)):
    /// kept until changed.
    Server,
}

/// A record and its revision: what a compare-and-set names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The record.
    pub value: Bytes,
    /// Its revision: changes with every write.
    pub revision: u64,
}

/// What another replica did, as a replica hears of it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Event {
    /// A record was written (by any replica, this one included).
    Record {
        /// Where.
        space: Space,
        /// Its key.
        key: String,
        /// The record as written.
        entry: Entry,
    },
    /// A message a replica broadcast ([`SharedState::publish`]).
    Message(Bytes),
}

/// Why the shared state could not answer.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The store cannot be reached now (a lost connection, a node down);
    /// it may answer later.
    #[error("shared state unavailable: {0}")]
    Unavailable(String),
    /// A key the store cannot hold (NATS keys are letters, digits and
    /// `-/_=.`).
    #[error("{0:?}: not a key the shared state can hold")]
    InvalidKey(String),
    /// A record is larger than the store keeps.
    #[error("a record of {size} bytes is larger than the shared state keeps ({limit} bytes)")]
    TooLarge {
        /// The record's size.
        size: usize,
        /// The most the store keeps.
        limit: usize,
    },
}

/// Where the replicas of a server keep what they share. Implement it for
/// another store (one process's memory and NATS JetStream come with
/// jrpc-mcp); every method may be called from any task at any time.
pub trait SharedState: Send + Sync + std::fmt::Debug + 'static {
    /// The record at `key`, if there is one.
    fn get<'a>(&'a self, space: Space, key: &'a str) -> StateFuture<'a, Option<Entry>>;

    /// Writes `value` at `key` when there is no record there yet: its
    /// revision, or `None` when there was one.
    fn create<'a>(&'a self, space: Space, key: &'a str, value: Bytes) -> StateFuture<'a, Option<u64>>;

    /// Replaces the record at `key` when its revision is still `revision`
    /// (compare-and-set): the new revision, or `None` when another write
    /// came first.
    fn update<'a>(
        &'a self,
        space: Space,
        key: &'a str,
        value: Bytes,
        revision: u64,
    ) -> StateFuture<'a, Option<u64>>;

    /// Forgets the record at `key` (there may be none).
    fn delete<'a>(&'a self, space: Space, key: &'a str) -> StateFuture<'a, ()>;

    /// Sends `message` to every replica but this one, at most once each.
    /// A store that loses its way to the others for a while (a node of a
    /// cluster replaced) keeps trying for as long as that usually lasts
    /// before it gives up with an error.
    fn publish(&self, message: Bytes) -> StateFuture<'_, ()>;

    /// What the replicas do from now on: records written and messages
    /// published. A store kept by one process has nothing to tell (its
    /// stream never yields). Called once per server.
    fn events(&self) -> BoxStream<'static, Event>;

    /// Whether other processes share this state: then the tasks a replica
    /// runs hold leases, so that another can tell when it went away.
    fn is_shared(&self) -> bool;

    /// The largest record the store keeps (a task's result included).
    fn max_record(&self) -> usize {
        usize::MAX
    }

    /// The secret every replica seals `requestState` with, when the store
    /// keeps one (so that a round sealed by one replica is accepted by
    /// the next); `None` leaves each server its own random key.
    fn request_state_secret(&self) -> Option<[u8; 32]> {
        None
    }
}

/// Reads, changes and writes the record at `key` by compare-and-set until
/// no other write comes between: `change` gets the record (`None` when
/// there is none) and returns the new one, or `None` to leave it as it is.
/// Returns the record as it stands after the call and whether this call
/// wrote it. How an application keeps a record every replica agrees on:
///
/// ```
/// use jrpc_mcp::server::shared::{modify, InMemory, Space};
///
/// # async fn run() -> Result<(), jrpc_mcp::server::shared::StateError> {
/// let state = InMemory::new();
/// let (count, _) = modify(&state, Space::Server, "visits", |current| {
///     let n: u64 = current.and_then(|b| std::str::from_utf8(b).ok()?.parse().ok()).unwrap_or(0);
///     Some((n + 1).to_string().into())
/// })
/// .await?;
/// assert_eq!(count.as_deref(), Some(&b"1"[..]));
/// # Ok(()) }
/// ```
pub async fn modify<S: SharedState + ?Sized>(
    state: &S,
    space: Space,
    key: &str,
    mut change: impl FnMut(Option<&Bytes>) -> Option<Bytes>,
) -> Result<(Option<Bytes>, bool), StateError> {
    // Enough for any honest contention; a record fought over harder than
    // this is an error, not a hang.
    for _ in 0..64 {
        let current = state.get(space, key).await?;
        let Some(next) = change(current.as_ref().map(|e| &e.value)) else {
            return Ok((current.map(|e| e.value), false));
        };
        if next.len() > state.max_record() {
            return Err(StateError::TooLarge {
                size: next.len(),
                limit: state.max_record(),
            });
        }
        let written = match &current {
            Some(entry) => state.update(space, key, next.clone(), entry.revision).await?,
            None => state.create(space, key, next.clone()).await?,
        };
        if written.is_some() {
            return Ok((Some(next), true));
        }
    }
    Err(StateError::Unavailable(format!(
        "{key}: too many concurrent writes"
    )))
}
