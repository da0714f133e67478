//! A response cache for the calling side, as a layer: a call whose result
//! is still fresh in the cache is answered without a request.
//!
//! - The key is the method and its params in canonical form: object
//!   members sorted, no whitespace, strings re-escaped one way, numbers
//!   digit for digit as written (so `{"b":1, "a":2}` and `{"a":2,"b":1}`
//!   are one key, and `12345678901234567890` is never rounded into its
//!   neighbour).
//! - Only successful results are kept; errors and notifications pass.
//! - Entries live for a time-to-live, within a bound on their count and
//!   on their bytes; past either, the least recently used go first
//!   ([`quick_cache`]'s scan-resistant CLOCK variant).
//! - Identical calls made while one is in flight share its request (and
//!   its outcome, error included).
//! - [`ResponseCache::stats`] counts hits and misses; `invalidate*`
//!   and [`clear`](ResponseCache::clear) drop entries, and results of
//!   requests in flight then are not stored.
//!
//! ```
//! use std::time::Duration;
//! use jrpc::client::{Client, ResponseCache};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let cache = ResponseCache::builder()
//!     .methods(["get_data", "sum"])
//!     .ttl(Duration::from_secs(30))
//!     .max_entries(10_000)
//!     .max_bytes(64 << 20)
//!     .build();
//! let client = Client::builder().layer(cache.layer()).connect("http://127.0.0.1:4000").await?;
//! let first: (String, u32) = client.call("get_data", ()).await?; // a request
//! let again: (String, u32) = client.call("get_data", ()).await?; // from the cache
//! assert_eq!(first, again);
//! assert_eq!((cache.stats().hits, cache.stats().misses), (1, 1));
//! cache.invalidate_method("get_data");
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::future::{FutureExt, Shared, WeakShared};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::caller::{encode_params, BoxFuture, BoxOutgoingService, CallError, Outgoing};

/// Which calls a cache keeps.
type Select = Arc<dyn Fn(&Outgoing) -> bool + Send + Sync>;

/// A cache key: the method and its params in canonical form.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key(Arc<(Box<str>, String)>);

impl Key {
    fn method(&self) -> &str {
        &self.0 .0
    }
}

/// A kept result.
#[derive(Clone)]
struct Stored {
    result: Arc<str>,
    at: Instant,
}

/// Weighs an entry by its bytes, but at least (nearly) a fair share of the
/// byte bound, so that the count bound holds as well.
#[derive(Clone)]
struct Weigh {
    floor: u64,
}

impl quick_cache::Weighter<Key, Stored> for Weigh {
    fn weight(&self, key: &Key, stored: &Stored) -> u64 {
        let bytes = key.0 .0.len() + key.0 .1.len() + stored.result.len() + ENTRY_OVERHEAD;
        (bytes as u64).max(self.floor)
    }
}

/// What an entry costs beyond its text: the key and value headers.
const ENTRY_OVERHEAD: usize = 64;

/// A request in flight that identical calls join.
type Flight = Shared<FlightFuture>;
type FlightFuture = BoxFuture<'static, Result<Arc<str>, CallError>>;

/// A request in flight, by key: a number telling one from the next, the
/// generation it began in, and the request.
type InFlight = (u64, u64, WeakShared<FlightFuture>);

/// Settings for a [`ResponseCache`].
pub struct ResponseCacheBuilder {
    select: Option<Select>,
    ttl: Duration,
    max_entries: usize,
    max_bytes: usize,
}

impl fmt::Debug for ResponseCacheBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseCacheBuilder")
            .field("ttl", &self.ttl)
            .field("max_entries", &self.max_entries)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl ResponseCacheBuilder {
    /// Keeps only the results of these methods (by default, of every
    /// call).
    pub fn methods(mut self, methods: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let methods: std::collections::HashSet<String> = methods.into_iter().map(Into::into).collect();
        self.select = Some(Arc::new(move |call: &Outgoing| methods.contains(call.method())));
        self
    }

    /// Keeps only the results of calls `select` accepts (by method, by
    /// params, by a mark a layer above put in the call's extensions).
    pub fn when(mut self, select: impl Fn(&Outgoing) -> bool + Send + Sync + 'static) -> Self {
        self.select = Some(Arc::new(select));
        self
    }

    /// How long a result stays fresh (default 60 s).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The most entries kept (default 10 000; about, past a few dozen).
    pub fn max_entries(mut self, entries: usize) -> Self {
        self.max_entries = entries.max(1);
        self
    }

    /// The most bytes of keys and results kept (default 64 MiB). A result
    /// larger than nearly all of it is not kept.
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes.max(1);
        self
    }

    /// The cache; add it to a client with [`ResponseCache::layer`].
    pub fn build(self) -> ResponseCache {
        // One shard, so that the bounds are the cache's own and not split
        // (quick_cache refuses an entry heavier than 97 % of its shard).
        let options = quick_cache::OptionsBuilder::new()
            .shards(1)
            .estimated_items_capacity(self.max_entries)
            .weight_capacity(self.max_bytes as u64)
            .build()
            .expect("the capacities are set");
        // A hair under a fair share, so that even one entry fits.
        let floor = ((self.max_bytes as u64 / self.max_entries as u64) * 96 / 100).max(1);
        ResponseCache {
            shared: Arc::new(CacheState {
                entries: quick_cache::sync::Cache::with_options(
                    options,
                    Weigh { floor },
                    Default::default(),
                    Default::default(),
                ),
                flights: Mutex::new(HashMap::new()),
                next_flight: AtomicU64::new(0),
                generation: AtomicU64::new(0),
                select: self.select,
                ttl: self.ttl,
                hits: AtomicU64::new(0),
                misses: AtomicU64::new(0),
                joined: AtomicU64::new(0),
            }),
        }
    }
}

/// A response cache: see the [module docs](self). Cheap to clone; clones
/// share the entries, so one handle can invalidate what a client's layer
/// keeps.
#[derive(Clone)]
pub struct ResponseCache {
    shared: Arc<CacheState>,
}

struct CacheState {
    entries: quick_cache::sync::Cache<Key, Stored, Weigh>,
    flights: Mutex<HashMap<Key, InFlight>>,
    next_flight: AtomicU64,
    /// Bumped by every invalidation: a request begun before it does not
    /// store its (possibly stale) result.
    generation: AtomicU64,
    select: Option<Select>,
    ttl: Duration,
    hits: AtomicU64,
    misses: AtomicU64,
    joined: AtomicU64,
}

/// What a [`ResponseCache`] has done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CacheStats {
    /// Calls answered from the cache.
    pub hits: u64,
    /// Cacheable calls that needed a request (their own, or one in flight).
    pub misses: u64,
    /// Of the misses, calls that joined an identical request in flight.
    pub joined: u64,
    /// Entries kept now (some may have expired, not yet dropped).
    pub entries: usize,
    /// Their weight: bytes, counting each entry as at least its share of
    /// the byte bound.
    pub weight: u64,
}

impl fmt::Debug for ResponseCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseCache")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl ResponseCache {
    /// Settings: every call's result kept for 60 s, at most 10 000 entries
    /// and 64 MiB.
    pub fn builder() -> ResponseCacheBuilder {
        ResponseCacheBuilder {
            select: None,
            ttl: Duration::from_secs(60),
            max_entries: 10_000,
            max_bytes: 64 << 20,
        }
    }

    /// The layer that answers from this cache, for
    /// [`ClientBuilder::layer`](super::ClientBuilder::layer) (or a
    /// [`PeerBuilder`](crate::peer::PeerBuilder)'s).
    pub fn layer(&self) -> CacheLayer {
        CacheLayer { cache: self.clone() }
    }

    /// Hits, misses and what is kept.
    pub fn stats(&self) -> CacheStats {
        let state = &self.shared;
        CacheStats {
            hits: state.hits.load(Ordering::Relaxed),
            misses: state.misses.load(Ordering::Relaxed),
            joined: state.joined.load(Ordering::Relaxed),
            entries: state.entries.len(),
            weight: state.entries.weight(),
        }
    }

    /// Drops the result of `method` with `params` (`()` for none); whether
    /// one was kept.
    pub fn invalidate(&self, method: &str, params: impl Serialize) -> bool {
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
        let Ok(params) = encode_params(params) else {
            return false;
        };
        self.shared
            .entries
            .remove(&key(method, params.as_deref()))
            .is_some()
    }

    /// Drops every result of `method`.
    pub fn invalidate_method(&self, method: &str) {
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
        self.shared.entries.retain(|key, _| key.method() != method);
    }

    /// Drops everything.
    pub fn clear(&self) {
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
        self.shared.entries.clear();
    }
}

impl CacheState {
    /// A fresh result kept for `key`, dropping a stale one.
    fn fresh(&self, key: &Key) -> Option<Arc<str>> {
        let stored = self.entries.get(key)?;
        if stored.at.elapsed() < self.ttl {
            return Some(stored.result);
        }
        self.entries.remove_if(key, |s| s.at == stored.at);
        None
    }

    /// The request in flight for `key`, or a new one made by `start`.
    fn flight(
        self: &Arc<Self>,
        key: &Key,
        start: impl FnOnce() -> BoxFuture<'static, Result<Box<RawValue>, CallError>>,
    ) -> Flight {
        let mut flights = self.flights.lock().unwrap_or_else(|e| e.into_inner());
        let generation = self.generation.load(Ordering::SeqCst);
        // A request begun before an invalidation may answer with what was
        // invalidated: not joined.
        let current = flights
            .get(key)
            .filter(|(_, begun, _)| *begun == generation)
            .and_then(|(_, _, weak)| weak.upgrade());
        if let Some(flight) = current {
            self.joined.fetch_add(1, Ordering::Relaxed);
            return flight;
        }
        let number = self.next_flight.fetch_add(1, Ordering::Relaxed);
        let (state, owned_key) = (Arc::clone(self), key.clone());
        let request = start();
        let flight: FlightFuture = Box::pin(async move {
            let result = request.await.map(|raw| Arc::<str>::from(raw.get()));
            if let Ok(result) = &result {
                // Not after an invalidation: the result may predate it.
                if state.generation.load(Ordering::SeqCst) == generation {
                    let at = Instant::now();
                    let stored = Stored {
                        result: Arc::clone(result),
                        at,
                    };
                    state.entries.insert(owned_key.clone(), stored);
                    // An invalidation between the check and the insert
                    // takes it out again.
                    if state.generation.load(Ordering::SeqCst) != generation {
                        state.entries.remove_if(&owned_key, |s| s.at == at);
                    }
                }
            }
            let mut flights = state.flights.lock().unwrap_or_else(|e| e.into_inner());
            if flights.get(&owned_key).is_some_and(|(n, _, _)| *n == number) {
                flights.remove(&owned_key);
            }
            result
        });
        let flight = flight.shared();
        if let Some(weak) = flight.downgrade() {
            // Requests whose callers all gave up leave dead entries; sweep
            // them now and then.
            if flights.len() >= 1024 && number % 256 == 0 {
                flights.retain(|_, (_, _, weak)| weak.upgrade().is_some());
            }
            flights.insert(key.clone(), (number, generation, weak));
        }
        flight
    }
}

/// The key of `method` called with `params`.
fn key(method: &str, params: Option<&RawValue>) -> Key {
    let mut canonical = String::new();
    if let Some(params) = params {
        // Params that are not JSON never reach here (they were encoded).
        if canonical_json(params, &mut canonical).is_err() {
            canonical = params.get().to_owned();
        }
    }
    Key(Arc::new((method.into(), canonical)))
}

/// Writes `value` in canonical form: object members sorted by name (the
/// last of duplicates kept), no whitespace, strings escaped as serde_json
/// escapes them, numbers exactly as written. Two texts that differ only in
/// member order, whitespace or string escapes come out the same.
///
/// ```
/// use jrpc::client::cache::canonical_json;
/// use jrpc::message::RawValue;
///
/// let mut a = String::new();
/// let mut b = String::new();
/// let first: &RawValue = serde_json::from_str(r#"{ "b": [1, 2.50], "a": "\u0041" }"#).unwrap();
/// let second: &RawValue = serde_json::from_str(r#"{"a":"A","b":[1,2.50]}"#).unwrap();
/// canonical_json(first, &mut a).unwrap();
/// canonical_json(second, &mut b).unwrap();
/// assert_eq!(a, r#"{"a":"A","b":[1,2.50]}"#);
/// assert_eq!(a, b);
/// ```
pub fn canonical_json(value: &RawValue, out: &mut String) -> Result<(), serde_json::Error> {
    let text = value.get().trim_start();
    match text.as_bytes().first() {
        Some(b'{') => {
            let members: BTreeMap<String, &RawValue> = serde_json::from_str(text)?;
            out.push('{');
            for (i, (name, value)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(&name)?);
                out.push(':');
                canonical_json(value, out)?;
            }
            out.push('}');
        }
        Some(b'[') => {
            let items: Vec<&RawValue> = serde_json::from_str(text)?;
            out.push('[');
            for (i, item) in items.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(item, out)?;
            }
            out.push(']');
        }
        Some(b'"') => {
            let string: String = serde_json::from_str(text)?;
            out.push_str(&serde_json::to_string(&string)?);
        }
        // Numbers, true, false, null: as written.
        _ => out.push_str(text.trim_end()),
    }
    Ok(())
}

/// The [`tower::Layer`] of a [`ResponseCache`].
#[derive(Clone, Debug)]
pub struct CacheLayer {
    cache: ResponseCache,
}

impl tower::Layer<BoxOutgoingService> for CacheLayer {
    type Service = CacheService;

    fn layer(&self, inner: BoxOutgoingService) -> CacheService {
        CacheService {
            cache: self.cache.clone(),
            inner,
        }
    }
}

/// A client's outgoing stack with a [`ResponseCache`] in front.
#[derive(Clone)]
pub struct CacheService {
    cache: ResponseCache,
    inner: BoxOutgoingService,
}

impl fmt::Debug for CacheService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheService").finish_non_exhaustive()
    }
}

impl tower::Service<Outgoing> for CacheService {
    type Response = Box<RawValue>;
    type Error = CallError;
    type Future = BoxFuture<'static, Result<Box<RawValue>, CallError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), CallError>> {
        // Each call clones the inner service, which is always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: Outgoing) -> Self::Future {
        let state = &self.cache.shared;
        let inner = self.inner.clone();
        let cacheable = !call.is_notification() && state.select.as_ref().map_or(true, |select| select(&call));
        if !cacheable {
            return Box::pin(tower::ServiceExt::oneshot(inner, call));
        }
        let key = key(call.method(), call.params());
        if let Some(result) = state.fresh(&key) {
            state.hits.fetch_add(1, Ordering::Relaxed);
            return Box::pin(std::future::ready(Ok(raw(&result))));
        }
        state.misses.fetch_add(1, Ordering::Relaxed);
        let timeout = call.timeout();
        let flight = state.flight(&key, move || Box::pin(tower::ServiceExt::oneshot(inner, call)));
        Box::pin(async move {
            // A call that joined another's request still keeps its own
            // timeout.
            match tokio::time::timeout(timeout, flight).await {
                Ok(result) => result.map(|text| raw(&text)),
                Err(_) => Err(CallError::Timeout(timeout)),
            }
        })
    }
}

/// A kept result as the raw JSON a call returns.
fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).expect("a kept result is the JSON a call returned")
}
