//! Per-call limits: a deadline, a concurrency bound, a per-client rate and
//! per-method authorization. Each refuses a call with its own JSON-RPC
//! error, on every transport.

use std::collections::{HashMap, HashSet};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use tokio::sync::Semaphore;
use tower::{Layer, Service};

use super::{Call, CallFuture, RawResult};
use crate::message::{codes, Error};

/// Per-method rules with a default: the rule for a method is its own, else
/// the longest `prefix*` pattern that matches it, else the default.
#[derive(Debug, Clone)]
struct PerMethod<T> {
    exact: HashMap<Box<str>, T>,
    prefixes: Vec<(Box<str>, T)>,
    default: Option<T>,
}

impl<T> Default for PerMethod<T> {
    fn default() -> Self {
        PerMethod {
            exact: HashMap::new(),
            prefixes: Vec::new(),
            default: None,
        }
    }
}

impl<T: Clone + Default> PerMethod<T> {
    /// Changes the value set for exactly `pattern` (a default one when
    /// none is), so that rules for the same pattern add up.
    fn add_to(&mut self, pattern: &str, add: impl FnOnce(&mut T)) {
        let mut value = match pattern.strip_suffix('*') {
            Some(prefix) => self
                .prefixes
                .iter()
                .find(|(p, _)| **p == *prefix)
                .map(|(_, value)| value.clone())
                .unwrap_or_default(),
            None => self.exact.get(pattern).cloned().unwrap_or_default(),
        };
        add(&mut value);
        self.set(pattern, value);
    }
}

impl<T> PerMethod<T> {
    fn set(&mut self, pattern: &str, value: T) {
        match pattern.strip_suffix('*') {
            Some(prefix) => {
                self.prefixes.retain(|(p, _)| **p != *prefix);
                self.prefixes.push((prefix.into(), value));
                // Longest first: the most specific pattern wins.
                self.prefixes.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
            }
            None => {
                self.exact.insert(pattern.into(), value);
            }
        }
    }

    fn get(&self, method: &str) -> Option<&T> {
        self.exact
            .get(method)
            .or_else(|| {
                self.prefixes
                    .iter()
                    .find(|(prefix, _)| method.starts_with(&**prefix))
                    .map(|(_, value)| value)
            })
            .or(self.default.as_ref())
    }

    fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.prefixes.is_empty() && self.default.is_none()
    }
}

/// Takes the service that was polled ready and leaves a fresh clone in its
/// place (the usual tower pattern for services called from a future).
fn take_ready<S: Clone>(slot: &mut S) -> S {
    let fresh = slot.clone();
    std::mem::replace(slot, fresh)
}

fn refuse(error: Error) -> CallFuture {
    Box::pin(std::future::ready(Err(error)))
}

// ---- deadline ----

/// A deadline for each call: a handler still running when it passes is
/// cancelled (dropped) and the caller gets `-32006 Request timed out`.
/// One duration for every method, with per-method exceptions (a method
/// name, or a `prefix*` pattern).
///
/// ```
/// use std::time::Duration;
/// use jrpc::middleware::CallTimeout;
///
/// let deadline = CallTimeout::new(Duration::from_secs(10))
///     .method("export", Duration::from_secs(120))
///     .method("cache.*", Duration::from_millis(200));
/// let router = jrpc::Router::new().layer(deadline);
/// ```
#[derive(Debug, Clone)]
pub struct CallTimeout {
    limits: Arc<PerMethod<Duration>>,
}

impl CallTimeout {
    /// Every call may take at most `limit`.
    pub fn new(limit: Duration) -> Self {
        CallTimeout {
            limits: Arc::new(PerMethod {
                default: Some(limit),
                ..PerMethod::default()
            }),
        }
    }

    /// Only the methods given with [`method`](Self::method) have a deadline.
    pub fn per_method() -> Self {
        CallTimeout {
            limits: Arc::new(PerMethod::default()),
        }
    }

    /// Calls to `pattern` (a method name, or `prefix*`) may take at most
    /// `limit`.
    pub fn method(mut self, pattern: &str, limit: Duration) -> Self {
        Arc::make_mut(&mut self.limits).set(pattern, limit);
        self
    }
}

impl<S> Layer<S> for CallTimeout {
    type Service = CallTimeoutService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallTimeoutService {
            limits: Arc::clone(&self.limits),
            inner,
        }
    }
}

/// The service made by [`CallTimeout`].
#[derive(Debug, Clone)]
pub struct CallTimeoutService<S> {
    limits: Arc<PerMethod<Duration>>,
    inner: S,
}

impl<S> Service<Call> for CallTimeoutService<S>
where
    S: Service<Call, Response = RawResult, Error = Error>,
    S::Future: Send + 'static,
{
    type Response = RawResult;
    type Error = Error;
    type Future = CallFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: Call) -> CallFuture {
        let limit = self.limits.get(call.method()).copied();
        let future = self.inner.call(call);
        let Some(limit) = limit else {
            return Box::pin(future);
        };
        Box::pin(async move {
            match tokio::time::timeout(limit, future).await {
                Ok(outcome) => outcome,
                Err(_) => Err(Error::new(codes::REQUEST_TIMEOUT, "Request timed out")
                    .with_data(&format!("calls may take at most {limit:?}"))),
            }
        })
    }
}

// ---- concurrency ----

/// A bound on calls running at once: over all methods, and per method.
/// A call over the bound waits for a turn (its own deadline, if any, still
/// runs).
///
/// ```
/// use jrpc::middleware::ConcurrencyLimit;
///
/// // At most 64 calls at once in all, and 2 exports.
/// let limit = ConcurrencyLimit::new(64).method("export", 2);
/// let router = jrpc::Router::new().layer(limit);
/// ```
#[derive(Debug, Clone)]
pub struct ConcurrencyLimit {
    all: Option<Arc<Semaphore>>,
    methods: Arc<PerMethod<Arc<Semaphore>>>,
}

impl ConcurrencyLimit {
    /// At most `calls` calls at once through this layer (at least one).
    pub fn new(calls: usize) -> Self {
        ConcurrencyLimit {
            all: Some(Arc::new(Semaphore::new(calls.max(1)))),
            methods: Arc::new(PerMethod::default()),
        }
    }

    /// No overall bound; only the methods given with
    /// [`method`](Self::method).
    pub fn per_method() -> Self {
        ConcurrencyLimit {
            all: None,
            methods: Arc::new(PerMethod::default()),
        }
    }

    /// At most `calls` calls to `pattern` (a method name, or `prefix*`, whose
    /// methods share the bound) at once.
    pub fn method(mut self, pattern: &str, calls: usize) -> Self {
        Arc::make_mut(&mut self.methods).set(pattern, Arc::new(Semaphore::new(calls.max(1))));
        self
    }
}

impl<S> Layer<S> for ConcurrencyLimit {
    type Service = ConcurrencyLimitService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ConcurrencyLimitService {
            limit: self.clone(),
            inner,
        }
    }
}

/// The service made by [`ConcurrencyLimit`].
#[derive(Debug, Clone)]
pub struct ConcurrencyLimitService<S> {
    limit: ConcurrencyLimit,
    inner: S,
}

impl<S> Service<Call> for ConcurrencyLimitService<S>
where
    S: Service<Call, Response = RawResult, Error = Error> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = RawResult;
    type Error = Error;
    type Future = CallFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: Call) -> CallFuture {
        let method = self.limit.methods.get(call.method()).cloned();
        let all = self.limit.all.clone();
        let mut inner = take_ready(&mut self.inner);
        Box::pin(async move {
            // The semaphores are never closed, so acquiring cannot fail.
            let _method = match &method {
                Some(semaphore) => semaphore.acquire().await.ok(),
                None => None,
            };
            let _all = match &all {
                Some(semaphore) => semaphore.acquire().await.ok(),
                None => None,
            };
            inner.call(call).await
        })
    }
}

// ---- rate ----

/// A per-client call budget (the client is its IP address; calls from a
/// connection without one, such as stdio, share one budget): `per_second`
/// calls each second on average, with bursts up to `burst`.
#[derive(Clone)]
pub struct RateLimit {
    limiter: Arc<DefaultKeyedRateLimiter<String>>,
    checks: Arc<AtomicU64>,
}

impl std::fmt::Debug for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit").finish_non_exhaustive()
    }
}

impl RateLimit {
    /// `per_second` calls a second per client, bursts up to `burst`. Zero
    /// values are taken as one.
    pub fn per_second(per_second: u32, burst: u32) -> Self {
        let one = NonZeroU32::MIN;
        let quota = Quota::per_second(NonZeroU32::new(per_second).unwrap_or(one))
            .allow_burst(NonZeroU32::new(burst).unwrap_or(one));
        RateLimit {
            limiter: Arc::new(governor::RateLimiter::keyed(quota)),
            checks: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Takes one call from `client`'s budget, or says how long until the
    /// next is allowed.
    pub fn check(&self, client: &str) -> Result<(), Duration> {
        let key = client_key(client);
        // Forget clients whose budget has refilled, now and then, so that
        // the table does not grow with every address ever seen.
        if self.checks.fetch_add(1, Ordering::Relaxed) % 4096 == 4095 {
            self.limiter.retain_recent();
            self.limiter.shrink_to_fit();
        }
        self.limiter
            .check_key(&key)
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }

    /// The error a refused call gets: `-32005 Rate limited` with
    /// `{"retry_after_ms": N}`.
    pub fn error(retry_after: Duration) -> Error {
        Error::new(codes::RATE_LIMITED, "Rate limited").with_data(&serde_json::json!({
            "retry_after_ms": u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX).max(1)
        }))
    }

    /// The layer that charges every call to its client's budget.
    pub fn layer(&self) -> RateLimitLayer {
        RateLimitLayer { limit: self.clone() }
    }
}

/// The client part of an address: the IP without the port; for IPv6, the
/// /64 network (one host usually holds a whole /64, so per-address keys
/// would hand out a fresh budget per address).
fn client_key(addr: &str) -> String {
    match addr.parse::<std::net::SocketAddr>().map(|s| s.ip()) {
        Ok(std::net::IpAddr::V6(ip)) => {
            let s = ip.segments();
            format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
        Ok(ip) => ip.to_string(),
        Err(_) => addr.to_owned(),
    }
}

/// Charges every call to its client's [`RateLimit`] budget; a call over it
/// is answered at once with `-32005 Rate limited` (and
/// `{"retry_after_ms": N}`), not queued.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    limit: RateLimit,
}

impl RateLimitLayer {
    /// Limits each client to `limit`.
    pub fn new(limit: RateLimit) -> Self {
        RateLimitLayer { limit }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimitService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService {
            limit: self.limit.clone(),
            inner,
        }
    }
}

/// The service made by [`RateLimitLayer`].
#[derive(Debug, Clone)]
pub struct RateLimitService<S> {
    limit: RateLimit,
    inner: S,
}

impl<S> Service<Call> for RateLimitService<S>
where
    S: Service<Call, Response = RawResult, Error = Error>,
    S::Future: Send + 'static,
{
    type Response = RawResult;
    type Error = Error;
    type Future = CallFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: Call) -> CallFuture {
        let client = call
            .connection_info()
            .and_then(|info| info.peer_addr.as_deref())
            .unwrap_or_default();
        match self.limit.check(client) {
            Ok(()) => Box::pin(self.inner.call(call)),
            Err(wait) => refuse(RateLimit::error(wait)),
        }
    }
}

// ---- authorization ----

/// Which identities may call which methods. A call to a method with a rule
/// is allowed only when its caller's [`Identity`](crate::context::Identity)
/// (set by an authentication layer, such as the HTTP bearer-token check) is
/// listed; others get `-32004 Unauthorized`. Methods without a rule are open
/// to every caller, unless [`deny_unlisted`](Self::deny_unlisted) is set.
///
/// ```
/// use jrpc::middleware::Authorize;
///
/// let rules = Authorize::new()
///     .allow("admin.*", ["alice"])
///     .allow("billing.refund", ["alice", "bob"]);
/// let router = jrpc::Router::new().layer(rules);
/// ```
///
/// With OAuth bearer tokens ([`BearerAuth`](crate::server::http::BearerAuth)), a
/// method can require a scope instead:
///
/// ```
/// use jrpc::middleware::Authorize;
///
/// let rules = Authorize::new().require_scope("billing.*", "billing:write");
/// # let _ = rules;
/// ```
#[derive(Debug, Clone, Default)]
pub struct Authorize {
    rules: Arc<PerMethod<HashSet<Box<str>>>>,
    scopes: Arc<PerMethod<Vec<Box<str>>>>,
}

impl Authorize {
    /// No rules: every call is allowed.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only `identities` may call `pattern` (a method name, or `prefix*`).
    /// Rules for the same pattern add up.
    pub fn allow<'a>(mut self, pattern: &str, identities: impl IntoIterator<Item = &'a str>) -> Self {
        Arc::make_mut(&mut self.rules).add_to(pattern, |allowed| {
            allowed.extend(identities.into_iter().map(Box::from))
        });
        self
    }

    /// Calls to `pattern` (a method name, or `prefix*`) need `scope` among
    /// the caller's [`Scopes`](crate::context::Scopes) (an OAuth token's);
    /// others get `-32004 Unauthorized` naming the scope. Scopes for the
    /// same pattern add up (all are needed).
    pub fn require_scope(mut self, pattern: &str, scope: &str) -> Self {
        Arc::make_mut(&mut self.scopes).add_to(pattern, |needed| needed.push(scope.into()));
        self
    }

    /// The scope a caller with `granted` lacks to call `method`, if any.
    pub fn missing_scope<'a>(
        &'a self,
        method: &str,
        granted: Option<&crate::context::Scopes>,
    ) -> Option<&'a str> {
        let needed = self.scopes.get(method)?;
        needed
            .iter()
            .find(|scope| !granted.is_some_and(|g| g.has(scope)))
            .map(|s| &**s)
    }

    /// Refuse calls to methods no rule names (off by default). With it on,
    /// a method is callable only by the identities a rule lists.
    pub fn deny_unlisted(mut self, on: bool) -> Self {
        Arc::make_mut(&mut self.rules).default = on.then(HashSet::new);
        self
    }

    /// Whether `identity` may call `method`.
    pub fn allows(&self, method: &str, identity: Option<&str>) -> bool {
        match self.rules.get(method) {
            None => true,
            Some(allowed) => identity.is_some_and(|name| allowed.contains(name)),
        }
    }

    /// Whether no rule is set.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.scopes.is_empty()
    }
}

impl<S> Layer<S> for Authorize {
    type Service = AuthorizeService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AuthorizeService {
            rules: self.clone(),
            inner,
        }
    }
}

/// The service made by [`Authorize`].
#[derive(Debug, Clone)]
pub struct AuthorizeService<S> {
    rules: Authorize,
    inner: S,
}

impl<S> Service<Call> for AuthorizeService<S>
where
    S: Service<Call, Response = RawResult, Error = Error>,
    S::Future: Send + 'static,
{
    type Response = RawResult;
    type Error = Error;
    type Future = CallFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: Call) -> CallFuture {
        if let Some(scope) = self.rules.missing_scope(call.method(), call.scopes()) {
            let why = format!("{} needs the scope {scope}", call.method());
            return refuse(Error::new(codes::UNAUTHORIZED, "Unauthorized").with_data(&why));
        }
        let identity = call.identity().map(|i| i.name());
        if self.rules.allows(call.method(), identity) {
            return Box::pin(self.inner.call(call));
        }
        let why = match identity {
            Some(name) => format!("{name} may not call {}", call.method()),
            None => format!("{} needs an authenticated caller", call.method()),
        };
        refuse(Error::new(codes::UNAUTHORIZED, "Unauthorized").with_data(&why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_method_rules_pick_the_most_specific() {
        let mut rules = PerMethod::default();
        rules.set("a.*", 1);
        rules.set("a.b.*", 2);
        rules.set("a.b.c", 3);
        let cases = [
            ("a.x", Some(1)),
            ("a.b.x", Some(2)),
            ("a.b.c", Some(3)),
            ("b", None),
        ];
        for (method, expected) in cases {
            assert_eq!(rules.get(method).copied(), expected, "{method}");
        }
        rules.default = Some(0);
        assert_eq!(rules.get("b"), Some(&0));
    }

    #[test]
    fn authorize_rules() {
        let rules = Authorize::new()
            .allow("admin.*", ["alice"])
            .allow("admin.*", ["carol"])
            .allow("refund", ["bob"]);
        let cases = [
            ("admin.reset", Some("alice"), true),
            ("admin.reset", Some("carol"), true),
            ("admin.reset", Some("bob"), false),
            ("admin.reset", None, false),
            ("refund", Some("bob"), true),
            ("ping", None, true),
        ];
        for (method, who, allowed) in cases {
            assert_eq!(rules.allows(method, who), allowed, "{method} by {who:?}");
        }
        let strict = rules.deny_unlisted(true);
        assert!(!strict.allows("ping", Some("alice")));
        assert!(strict.allows("refund", Some("bob")));
    }

    #[test]
    fn client_keys() {
        assert_eq!(client_key("127.0.0.1:4000"), "127.0.0.1");
        assert_eq!(client_key("[2001:db8:1:2:3:4:5:6]:80"), "2001:db8:1:2::/64");
        assert_eq!(client_key(""), "");
    }
}
