//! Retries with backoff and jitter: a schedule ([`Retry`]) for calls that
//! are safe to repeat and for reconnecting a dropped connection, and the
//! policy ([`RetryPolicy`]) that decides which failed calls are tried
//! again, on every transport.

use std::collections::HashSet;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;

use crate::caller::{BoxFuture, BoxOutgoingService, CallError, Delivery, Outgoing};
use crate::message::codes;

/// How many more attempts, and how long to wait before each: exponential
/// (`base`, doubled each time up to `max`) or fixed (`base == max`), each
/// wait spread by random jitter of ±50%. Which failures are tried again is
/// a [`RetryPolicy`]'s business; a `Retry` on its own (as
/// [`ClientBuilder::retry`](super::ClientBuilder::retry) takes it) tries
/// again calls that never left and refusals (`429`, `503`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Retries after the first attempt (0: never retry).
    pub attempts: u32,
    /// The first wait; each retry doubles it, with random jitter of ±50%.
    pub base: Duration,
    /// The longest wait (a server's `Retry-After` is honoured up to this).
    pub max: Duration,
}

impl Retry {
    /// No retries.
    pub const NEVER: Retry = Retry {
        attempts: 0,
        base: Duration::from_millis(100),
        max: Duration::from_secs(5),
    };

    /// Up to `attempts` retries, starting at 100 ms, at most 5 s apart.
    pub fn attempts(attempts: u32) -> Retry {
        Retry {
            attempts,
            ..Retry::NEVER
        }
    }

    /// Up to `attempts` retries, `base` apart at first, doubling up to
    /// `max`.
    pub fn exponential(attempts: u32, base: Duration, max: Duration) -> Retry {
        Retry {
            attempts,
            base,
            max: max.max(base),
        }
    }

    /// Up to `attempts` retries, `wait` apart (with jitter).
    pub fn fixed(attempts: u32, wait: Duration) -> Retry {
        Retry {
            attempts,
            base: wait,
            max: wait,
        }
    }

    /// Runs `attempt` until it succeeds, fails for good (`is_final`), or the
    /// schedule's attempts run out, waiting between tries; `what` names the
    /// work in debug logs.
    pub(crate) async fn run<T, E, Fut>(
        &self,
        what: &str,
        mut attempt: impl FnMut() -> Fut,
        is_final: impl Fn(&E) -> bool,
    ) -> Result<T, E>
    where
        E: std::fmt::Display,
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        let mut tries = 0;
        loop {
            match attempt().await {
                Ok(done) => return Ok(done),
                Err(e) if tries < self.attempts && !is_final(&e) => {
                    let wait = self.wait(tries, None);
                    tracing::debug!(error = %e, ?wait, "{what} failed; trying again");
                    tokio::time::sleep(wait).await;
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    pub(crate) fn wait(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max);
        }
        let exp = self.base.saturating_mul(1u32 << attempt.min(16)).min(self.max);
        // Jitter from a randomly keyed hash: spreads clients apart.
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(attempt);
        let factor = 0.5 + (hasher.finish() % 1000) as f64 / 1000.0;
        Duration::from_secs_f64((exp.as_secs_f64() * factor).min(self.max.as_secs_f64()))
    }
}

impl Default for Retry {
    fn default() -> Self {
        Retry::NEVER
    }
}

/// Which failed calls are tried again, how often and how long: a
/// [`Retry`] schedule (fixed or exponential waits with jitter, a number of
/// attempts), a bound on the whole time, and the outcomes that warrant
/// another attempt. A call is tried again only when that is safe:
///
/// - its request provably never left (the connection could not be made,
///   or was already closed): always;
/// - the server refused it before running it (HTTP `429`/`503`, or the
///   JSON-RPC errors `-32005 Rate limited` and `-32007 Server busy` that
///   jrpc servers answer before a handler runs): unless turned off, after
///   the server's `Retry-After` (or the error's `retry_after_ms`) when it
///   gives one;
/// - the connection was lost before the reply, the call timed out, or the
///   server answered one of the [chosen error codes](Self::on_codes): only
///   for methods marked [idempotent](Self::idempotent), since the call may
///   have run.
///
/// Notifications are never tried again.
///
/// By default the call's timeout bounds all its attempts together, so a
/// call that timed out has no time left for another: give each attempt a
/// bound of its own with [`attempt_timeout`](Self::attempt_timeout) when a
/// timed-out call should be sent again (a server host that died with the
/// call), or one that doubles with each attempt with
/// [`doubling_attempt_timeout`](Self::doubling_attempt_timeout) (a lost
/// call goes out again soon, a slow one still gets through).
/// [`on_retry`](Self::on_retry) sees every retry (for a log line or a
/// counter).
///
/// ```
/// use std::time::Duration;
/// use jrpc::client::{Client, Retry, RetryPolicy};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let policy = RetryPolicy::new(Retry::exponential(5, Duration::from_millis(50), Duration::from_secs(2)))
///     .max_elapsed(Duration::from_secs(10))
///     .idempotent(["get_balance", "get_data"])
///     .on_connection_lost(true)
///     .on_timeout(true)
///     .on_codes([-32099]);
/// let client = Client::builder()
///     .retry(policy)
///     .reconnect(Retry::attempts(3))
///     .connect("tcp://127.0.0.1:4001")
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RetryPolicy {
    schedule: Retry,
    max_elapsed: Option<Duration>,
    on_busy: bool,
    on_lost: bool,
    on_timeout: bool,
    codes: Vec<i64>,
    idempotent: Idempotent,
    attempt_timeout: Option<AttemptTimeout>,
    on_retry: Option<Arc<OnRetry>>,
}

/// How long each attempt may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AttemptTimeout {
    /// The same for every attempt.
    Fixed(Duration),
    /// The first attempt's, doubled for each next one.
    Doubling(Duration),
}

/// What [`RetryPolicy::on_retry`] is given.
type OnRetry = dyn Fn(&Retrying<'_>) + Send + Sync;

/// A call about to be tried again, as [`RetryPolicy::on_retry`] sees it.
#[derive(Debug)]
#[non_exhaustive]
pub struct Retrying<'a> {
    /// The call's method.
    pub method: &'a str,
    /// Which retry this is: 1 for the second attempt.
    pub retry: u32,
    /// What the last attempt failed with.
    pub error: &'a CallError,
    /// How long until the next attempt.
    pub wait: Duration,
}

/// Which methods may run twice without harm.
#[derive(Clone)]
enum Idempotent {
    None,
    All,
    Methods(Arc<HashSet<String>>),
}

impl std::fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("schedule", &self.schedule)
            .field("max_elapsed", &self.max_elapsed)
            .field("on_busy", &self.on_busy)
            .field("on_lost", &self.on_lost)
            .field("on_timeout", &self.on_timeout)
            .field("codes", &self.codes)
            .field("attempt_timeout", &self.attempt_timeout)
            .finish_non_exhaustive()
    }
}

impl From<Retry> for RetryPolicy {
    fn from(schedule: Retry) -> Self {
        RetryPolicy::new(schedule)
    }
}

impl RetryPolicy {
    /// Tries calls that never left and refusals again on `schedule`; no
    /// method is idempotent, and there is no bound on the whole time.
    pub fn new(schedule: Retry) -> Self {
        RetryPolicy {
            schedule,
            max_elapsed: None,
            on_busy: true,
            on_lost: false,
            on_timeout: false,
            codes: Vec::new(),
            idempotent: Idempotent::None,
            attempt_timeout: None,
            on_retry: None,
        }
    }

    /// Bounds each attempt by `limit` (and by what is left of the call's
    /// timeout): an attempt that gets no reply within it fails with
    /// [`CallError::Timeout`], and the call is tried again. It applies only
    /// where a timeout is tried again (an idempotent method, with
    /// [`on_timeout`](Self::on_timeout)), and not to the last attempt,
    /// which has whatever time the call has left. Without it, an attempt
    /// may take all that time.
    pub fn attempt_timeout(mut self, limit: Duration) -> Self {
        self.attempt_timeout = Some(AttemptTimeout::Fixed(limit));
        self
    }

    /// Bounds the first attempt by `first` and each next one by twice the
    /// one before (and all by what is left of the call's timeout): a call
    /// lost with a server that died is sent again soon, while one that is
    /// only slow still gets through on a later attempt.
    pub fn doubling_attempt_timeout(mut self, first: Duration) -> Self {
        self.attempt_timeout = Some(AttemptTimeout::Doubling(first));
        self
    }

    /// The bound of attempt `attempt` (0 for the first) of its own, if any.
    fn attempt_limit(&self, attempt: u32) -> Option<Duration> {
        match self.attempt_timeout? {
            AttemptTimeout::Fixed(limit) => Some(limit),
            AttemptTimeout::Doubling(first) => Some(first.saturating_mul(1u32 << attempt.min(31))),
        }
    }

    /// Calls `hook` before each retry, with the call's method, which retry
    /// it is, what failed and the wait: for a log line or a counter.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    /// use jrpc::client::{Retry, RetryPolicy};
    ///
    /// let retried = Arc::new(AtomicU64::new(0));
    /// let counter = Arc::clone(&retried);
    /// let policy = RetryPolicy::new(Retry::attempts(3)).on_retry(move |retrying| {
    ///     if retrying.retry == 1 {
    ///         counter.fetch_add(1, Ordering::Relaxed); // calls tried more than once
    ///     }
    /// });
    /// ```
    pub fn on_retry(mut self, hook: impl Fn(&Retrying<'_>) + Send + Sync + 'static) -> Self {
        self.on_retry = Some(Arc::new(hook));
        self
    }

    /// Gives up once this much time has passed since the first attempt
    /// (no wait runs past it).
    pub fn max_elapsed(mut self, limit: Duration) -> Self {
        self.max_elapsed = Some(limit);
        self
    }

    /// Whether refusals (`429`, `503`, `-32005`, `-32007`) and calls nobody
    /// was there to take (a broker's "no responders":
    /// [`Undelivered`](crate::transport::Undelivered), or `-32008` from a
    /// server) are tried again (default yes).
    pub fn on_busy(mut self, on: bool) -> Self {
        self.on_busy = on;
        self
    }

    /// Whether an idempotent call whose connection was lost before the
    /// reply is tried again (default no).
    pub fn on_connection_lost(mut self, on: bool) -> Self {
        self.on_lost = on;
        self
    }

    /// Whether an idempotent call that timed out is tried again (default
    /// no).
    pub fn on_timeout(mut self, on: bool) -> Self {
        self.on_timeout = on;
        self
    }

    /// JSON-RPC error codes after which an idempotent call is tried again.
    pub fn on_codes(mut self, codes: impl IntoIterator<Item = i64>) -> Self {
        self.codes.extend(codes);
        self
    }

    /// These methods may run twice without harm.
    pub fn idempotent(mut self, methods: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let mut set = match &self.idempotent {
            Idempotent::Methods(set) => (**set).clone(),
            _ => HashSet::new(),
        };
        set.extend(methods.into_iter().map(Into::into));
        if !matches!(self.idempotent, Idempotent::All) {
            self.idempotent = Idempotent::Methods(Arc::new(set));
        }
        self
    }

    /// Every method may run twice without harm (a client of a read-only
    /// service, or a one-shot tool whose user asked for retries).
    pub fn all_idempotent(mut self) -> Self {
        self.idempotent = Idempotent::All;
        self
    }

    /// The waits between attempts.
    pub fn schedule(&self) -> Retry {
        self.schedule
    }

    /// The layer that applies this policy, for any outgoing stack
    /// ([`ClientBuilder::retry`](super::ClientBuilder::retry) adds it for
    /// you, below the client's other layers).
    pub fn layer(&self) -> RetryLayer {
        RetryLayer { policy: self.clone() }
    }

    fn is_idempotent(&self, method: &str) -> bool {
        match &self.idempotent {
            Idempotent::None => false,
            Idempotent::All => true,
            Idempotent::Methods(set) => set.contains(method),
        }
    }

    /// Whether `error` warrants another attempt at `call`, and how long
    /// the server asked to wait first.
    fn verdict(&self, call: &Outgoing, error: &CallError, unsent: bool) -> Option<Option<Duration>> {
        // Params that do not encode or a result that does not decode would
        // fail the same way again.
        if call.is_notification() || matches!(error, CallError::Encode(_) | CallError::Decode(_)) {
            return None;
        }
        if unsent {
            return Some(None);
        }
        #[cfg(feature = "http-client")]
        if let Some(http) = error.transport_error::<super::http_error::HttpError>() {
            let busy = matches!(http.status, 429 | 503);
            return (busy && self.on_busy).then_some(http.retry_after);
        }
        if error.transport_error::<crate::transport::Undelivered>().is_some() {
            // Nobody took it: it did not run, whatever the method.
            return self.on_busy.then_some(None);
        }
        let idempotent = self.is_idempotent(call.method());
        match error {
            CallError::Rpc(e)
                if matches!(
                    e.code(),
                    codes::RATE_LIMITED | codes::SERVER_BUSY | codes::NO_RESPONDERS
                ) && self.on_busy =>
            {
                let after = e
                    .data_as::<RetryAfter>()
                    .and_then(Result::ok)
                    .map(|r| Duration::from_millis(r.retry_after_ms));
                Some(after)
            }
            CallError::Rpc(e) => (idempotent && self.codes.contains(&e.code())).then_some(None),
            CallError::Closed(_) | CallError::Io(_) => (idempotent && self.on_lost).then_some(None),
            CallError::Timeout(_) => (idempotent && self.on_timeout).then_some(None),
            _ => None,
        }
    }
}

/// The wait a jrpc server's `-32005 Rate limited` error asks for.
#[derive(serde::Deserialize)]
struct RetryAfter {
    retry_after_ms: u64,
}

/// The [`tower::Layer`] of a [`RetryPolicy`].
#[derive(Clone, Debug)]
pub struct RetryLayer {
    policy: RetryPolicy,
}

impl tower::Layer<BoxOutgoingService> for RetryLayer {
    type Service = RetryService;

    fn layer(&self, inner: BoxOutgoingService) -> RetryService {
        RetryService {
            policy: Arc::new(self.policy.clone()),
            inner,
        }
    }
}

/// An outgoing stack that tries failed calls again by a [`RetryPolicy`].
#[derive(Clone)]
pub struct RetryService {
    policy: Arc<RetryPolicy>,
    inner: BoxOutgoingService,
}

impl std::fmt::Debug for RetryService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryService")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl tower::Service<Outgoing> for RetryService {
    type Response = Box<RawValue>;
    type Error = CallError;
    type Future = BoxFuture<'static, Result<Box<RawValue>, CallError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), CallError>> {
        // Each attempt clones the inner service, which is always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut call: Outgoing) -> Self::Future {
        let (policy, inner) = (Arc::clone(&self.policy), self.inner.clone());
        if call.is_notification() || policy.schedule.attempts == 0 {
            // Decided here: never again, and not by the transport either.
            call.extensions_mut().insert(RetriedAbove);
            call.extensions_mut().insert(Delivery::default());
            return Box::pin(tower::ServiceExt::oneshot(inner, call));
        }
        Box::pin(async move {
            // The call's timeout bounds all its attempts together, and so
            // does the policy's bound on the elapsed time.
            let started = Instant::now();
            let mut budget = call.timeout();
            if let Some(limit) = policy.max_elapsed {
                budget = budget.min(limit);
            }
            let mut attempt = 0;
            // What the last attempt failed with: more telling than a
            // timeout when the time bound cuts a later attempt short.
            let mut last: Option<CallError> = None;
            loop {
                let mut this = call.clone();
                let mut left = budget.saturating_sub(started.elapsed());
                // An attempt is cut short only when its timing out would
                // be tried again; the last one has whatever time is left.
                let retried_on_timeout = policy.on_timeout
                    && policy.is_idempotent(call.method())
                    && attempt < policy.schedule.attempts;
                if let Some(limit) = policy.attempt_limit(attempt).filter(|_| retried_on_timeout) {
                    left = left.min(limit);
                }
                this.set_timeout(left);
                let delivery = Delivery::default();
                this.extensions_mut().insert(delivery.clone());
                this.extensions_mut().insert(RetriedAbove);
                let error = match tower::ServiceExt::oneshot(inner.clone(), this).await {
                    Ok(result) => return Ok(result),
                    Err(CallError::Timeout(_)) if started.elapsed() >= budget => {
                        return Err(last.unwrap_or(CallError::Timeout(call.timeout())));
                    }
                    Err(error) => error,
                };
                let Some(asked) = policy.verdict(&call, &error, delivery.was_unsent()) else {
                    return Err(error);
                };
                // A server asking for a longer wait than the schedule's
                // longest is not asked again sooner than it wants.
                let too_long = asked.is_some_and(|asked| asked > policy.schedule.max);
                if attempt >= policy.schedule.attempts || too_long {
                    return Err(error);
                }
                let wait = policy.schedule.wait(attempt, asked);
                if started.elapsed().saturating_add(wait) >= budget {
                    return Err(error);
                }
                tracing::debug!(method = call.method(), attempt, ?wait, error = %error, "trying the call again");
                if let Some(hook) = &policy.on_retry {
                    hook(&Retrying {
                        method: call.method(),
                        retry: attempt + 1,
                        error: &error,
                        wait,
                    });
                }
                last = Some(error);
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
        })
    }
}

/// Marks a call that a retry layer above will try again, so that the
/// transport below does not retry it too.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RetriedAbove;

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> Outgoing {
        Outgoing::call("get", None, Duration::from_secs(1))
    }

    fn rpc(code: i64, data: Option<&str>) -> CallError {
        let error = crate::Error::new(code, "refused");
        CallError::Rpc(match data {
            Some(data) => error.with_data(&serde_json::from_str::<serde_json::Value>(data).unwrap()),
            None => error,
        })
    }

    #[test]
    fn only_safe_failures_are_tried_again() {
        let plain = RetryPolicy::new(Retry::attempts(3));
        let careful = RetryPolicy::new(Retry::attempts(3))
            .idempotent(["get"])
            .on_connection_lost(true)
            .on_timeout(true)
            .on_codes([-32099]);
        let note = Outgoing::notification("get", None, Duration::from_secs(1));
        let get = call();
        let chosen = RetryPolicy::new(Retry::attempts(3)).on_codes([-32099]);
        let quiet = RetryPolicy::new(Retry::attempts(3)).on_busy(false);
        let closed = CallError::Closed("gone".into());
        let ms = Duration::from_millis;
        #[rustfmt::skip]
        type Case<'a> = (&'a str, &'a RetryPolicy, &'a Outgoing, CallError, bool, Option<Option<Duration>>);
        let cases: Vec<Case> = vec![
            ("never sent", &plain, &get, closed.clone(), true, Some(None)),
            ("a notification, never", &plain, &note, closed.clone(), true, None),
            (
                "params that do not encode",
                &plain,
                &get,
                CallError::Encode("no".into()),
                true,
                None,
            ),
            ("lost, not idempotent", &plain, &get, closed.clone(), false, None),
            (
                "lost, idempotent",
                &careful,
                &get,
                closed.clone(),
                false,
                Some(None),
            ),
            (
                "timed out, not idempotent",
                &plain,
                &get,
                CallError::Timeout(ms(5)),
                false,
                None,
            ),
            (
                "timed out, idempotent",
                &careful,
                &get,
                CallError::Timeout(ms(5)),
                false,
                Some(None),
            ),
            (
                "rate limited, with its wait",
                &plain,
                &get,
                rpc(-32005, Some(r#"{"retry_after_ms":120}"#)),
                false,
                Some(Some(ms(120))),
            ),
            ("server busy", &plain, &get, rpc(-32007, None), false, Some(None)),
            (
                "a chosen code, idempotent",
                &careful,
                &get,
                rpc(-32099, None),
                false,
                Some(None),
            ),
            (
                "a chosen code, not idempotent",
                &chosen,
                &get,
                rpc(-32099, None),
                false,
                None,
            ),
            ("another code", &careful, &get, rpc(-32602, None), false, None),
            ("busy, turned off", &quiet, &get, rpc(-32007, None), false, None),
        ];
        for (what, policy, call, error, unsent, expected) in cases {
            assert_eq!(policy.verdict(call, &error, unsent), expected, "{what}");
        }
    }

    #[cfg(feature = "http-client")]
    #[test]
    fn http_refusals_are_tried_again_after_their_retry_after() {
        let policy = RetryPolicy::new(Retry::attempts(3));
        let http = |status: u16, after: Option<Duration>| {
            CallError::Transport(Arc::new(super::super::HttpError {
                status,
                error: None,
                body: "".into(),
                retry_after: after,
            }))
        };
        let two = Some(Duration::from_secs(2));
        assert_eq!(policy.verdict(&call(), &http(503, two), false), Some(two));
        assert_eq!(policy.verdict(&call(), &http(429, None), false), Some(None));
        assert_eq!(policy.verdict(&call(), &http(500, None), false), None);
        assert_eq!(
            policy
                .clone()
                .on_busy(false)
                .verdict(&call(), &http(503, two), false),
            None
        );
    }

    #[test]
    fn attempts_are_bounded_fixed_or_doubling() {
        let ms = Duration::from_millis;
        let policy = RetryPolicy::new(Retry::attempts(40));
        assert_eq!(policy.attempt_limit(0), None);
        let fixed = policy.clone().attempt_timeout(ms(300));
        assert_eq!(
            (fixed.attempt_limit(0), fixed.attempt_limit(7)),
            (Some(ms(300)), Some(ms(300)))
        );
        let doubling = policy.doubling_attempt_timeout(ms(100));
        let limits: Vec<_> = (0..4).map(|n| doubling.attempt_limit(n).unwrap()).collect();
        assert_eq!(limits, [ms(100), ms(200), ms(400), ms(800)]);
        // Far out, it saturates instead of overflowing.
        assert!(doubling.attempt_limit(40).unwrap() >= Duration::from_secs(1 << 20));
    }

    #[test]
    fn fixed_and_exponential_waits_stay_within_their_bounds() {
        let fixed = Retry::fixed(5, Duration::from_millis(100));
        let exponential = Retry::exponential(5, Duration::from_millis(10), Duration::from_millis(80));
        for attempt in 0..8 {
            let wait = fixed.wait(attempt, None);
            assert!(
                wait >= Duration::from_millis(50) && wait <= Duration::from_millis(100),
                "{wait:?}"
            );
            let wait = exponential.wait(attempt, None);
            let nominal = Duration::from_millis(10 << attempt.min(3)).min(Duration::from_millis(80));
            assert!(
                wait >= nominal / 2 && wait <= Duration::from_millis(80),
                "{attempt}: {wait:?}"
            );
        }
        // A server's wait is honoured, up to the schedule's longest.
        assert_eq!(
            fixed.wait(0, Some(Duration::from_millis(30))),
            Duration::from_millis(30)
        );
        assert_eq!(
            fixed.wait(0, Some(Duration::from_secs(9))),
            Duration::from_millis(100)
        );
    }
}
