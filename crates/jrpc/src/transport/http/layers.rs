//! Tower layers for the HTTP service: auth, per-client rate limits and a
//! per-request timeout. Each answers a refused request itself, with the
//! right HTTP status and a JSON-RPC error body, and otherwise passes the
//! request through untouched. Compose them with `tower::ServiceBuilder` or
//! through [`HttpServer`](super::HttpServer)'s settings.

use std::collections::HashSet;
use std::convert::Infallible;
use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use tower::{Layer, Service};

use super::service::{error_response, ClientAddr};
use crate::message::{codes, Error};

type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, Infallible>> + Send>>;

/// A check made before a request reaches the service: let it through, or
/// answer it right away.
pub trait Gate: Clone + Send + Sync + 'static {
    /// `None` lets the request through; `Some` is the response refusing it.
    fn refuse<B>(&self, request: &Request<B>) -> Option<Response<Full<Bytes>>>;
}

/// A service behind a [`Gate`]: what [`AuthLayer`] and [`RateLimitLayer`]
/// make.
#[derive(Debug, Clone)]
pub struct Gated<S, G> {
    gate: G,
    inner: S,
}

impl<S, B, G> Service<Request<B>> for Gated<S, G>
where
    S: Service<Request<B>, Response = Response<Full<Bytes>>, Error = Infallible>,
    S::Future: Send + 'static,
    G: Gate,
{
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        match self.gate.refuse(&request) {
            None => Box::pin(self.inner.call(request)),
            Some(refusal) => Box::pin(async move { Ok(refusal) }),
        }
    }
}

/// The service made by [`AuthLayer`].
pub type Auth<S> = Gated<S, AuthLayer>;
/// The service made by [`RateLimitLayer`].
pub type RateLimited<S> = Gated<S, RateLimit>;

// ---- auth ----

/// Requires `Authorization: Bearer <token>` (or `X-Api-Key: <token>`) with
/// one of the configured tokens; anything else is answered `401` with a
/// `WWW-Authenticate: Bearer` header and a `-32004 Unauthorized` error body.
/// Paths listed with [`exempt`](Self::exempt) (a health check, say) pass.
#[derive(Debug, Clone)]
pub struct AuthLayer {
    tokens: Arc<HashSet<String>>,
    exempt: Arc<Vec<String>>,
}

impl AuthLayer {
    /// Accepts any of `tokens`.
    pub fn bearer(tokens: impl IntoIterator<Item = impl Into<String>>) -> Self {
        AuthLayer {
            tokens: Arc::new(tokens.into_iter().map(Into::into).collect()),
            exempt: Arc::new(Vec::new()),
        }
    }

    /// Lets requests for `path` through without a token.
    pub fn exempt(mut self, path: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.exempt).push(path.into());
        self
    }

    fn allows<B>(&self, request: &Request<B>) -> bool {
        if self.exempt.iter().any(|p| p == request.uri().path()) {
            return true;
        }
        let headers = request.headers();
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.split_once(' ')
                    .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            })
            .map(|(_, token)| token.trim());
        let api_key = headers
            .get("x-api-key")
            .and_then(|v| v.to_str().ok())
            .map(str::trim);
        [bearer, api_key].into_iter().flatten().any(|given| {
            self.tokens
                .iter()
                .any(|token| constant_time_eq(token.as_bytes(), given.as_bytes()))
        })
    }
}

impl Gate for AuthLayer {
    fn refuse<B>(&self, request: &Request<B>) -> Option<Response<Full<Bytes>>> {
        if self.allows(request) {
            return None;
        }
        let mut response = error_response(
            StatusCode::UNAUTHORIZED,
            Error::new(codes::UNAUTHORIZED, "Unauthorized")
                .with_data("send Authorization: Bearer <token> (or X-Api-Key: <token>)"),
        );
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        Some(response)
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = Auth<S>;

    fn layer(&self, inner: S) -> Auth<S> {
        Gated {
            gate: self.clone(),
            inner,
        }
    }
}

/// Compares without an early exit, so response timing does not reveal how
/// much of a token matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

// ---- rate limit ----

/// A per-client request budget (the client is its IP address): `per_second`
/// requests each second on average, with bursts up to `burst`.
#[derive(Clone)]
pub struct RateLimit {
    limiter: Arc<DefaultKeyedRateLimiter<String>>,
    checks: Arc<std::sync::atomic::AtomicU64>,
}

impl std::fmt::Debug for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit").finish_non_exhaustive()
    }
}

impl RateLimit {
    /// `per_second` requests a second per client, bursts up to `burst`.
    /// Zero values are taken as one.
    pub fn per_second(per_second: u32, burst: u32) -> Self {
        let one = NonZeroU32::MIN;
        let quota = Quota::per_second(NonZeroU32::new(per_second).unwrap_or(one))
            .allow_burst(NonZeroU32::new(burst).unwrap_or(one));
        RateLimit {
            limiter: Arc::new(governor::RateLimiter::keyed(quota)),
            checks: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        }
    }

    /// Takes one request from `client`'s budget, or says how long until the
    /// next is allowed.
    pub fn check(&self, client: &str) -> Result<(), Duration> {
        let key = client_key(client);
        // Forget clients whose budget has refilled, now and then, so that
        // the table does not grow with every address ever seen.
        if self.checks.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 4096 == 4095 {
            self.limiter.retain_recent();
            self.limiter.shrink_to_fit();
        }
        self.limiter
            .check_key(&key)
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }

    /// The error a refused request gets (over WebSocket, as its response).
    pub fn error(retry_after: Duration) -> Error {
        Error::new(codes::RATE_LIMITED, "Rate limited").with_data(&serde_json::json!({
            "retry_after_ms": u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX).max(1)
        }))
    }
}

impl Gate for RateLimit {
    fn refuse<B>(&self, request: &Request<B>) -> Option<Response<Full<Bytes>>> {
        let client = request
            .extensions()
            .get::<ClientAddr>()
            .and_then(|a| a.0.as_deref())
            .unwrap_or_default();
        let wait = self.check(client).err()?;
        let mut response = error_response(StatusCode::TOO_MANY_REQUESTS, RateLimit::error(wait));
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        Some(response)
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

/// Applies a [`RateLimit`] per client address; a refused request is
/// answered `429` with `Retry-After` (whole seconds, rounded up) and a
/// `-32005 Rate limited` error body.
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
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> RateLimited<S> {
        Gated {
            gate: self.limit.clone(),
            inner,
        }
    }
}

// ---- timeout ----

/// Bounds each request: one that takes longer is answered `504` with a
/// `-32006 Request timed out` error body (its handlers are dropped). Not
/// `503`: the handler may have done its work, so the request is not safe to
/// retry blindly.
#[derive(Debug, Clone, Copy)]
pub struct RequestTimeoutLayer {
    limit: Duration,
}

impl RequestTimeoutLayer {
    /// Requests may take at most `limit`.
    pub fn new(limit: Duration) -> Self {
        RequestTimeoutLayer { limit }
    }
}

impl<S> Layer<S> for RequestTimeoutLayer {
    type Service = RequestTimeout<S>;

    fn layer(&self, inner: S) -> RequestTimeout<S> {
        RequestTimeout {
            limit: self.limit,
            inner,
        }
    }
}

/// The service made by [`RequestTimeoutLayer`].
#[derive(Debug, Clone)]
pub struct RequestTimeout<S> {
    limit: Duration,
    inner: S,
}

impl<S, B> Service<Request<B>> for RequestTimeout<S>
where
    S: Service<Request<B>, Response = Response<Full<Bytes>>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let (limit, future) = (self.limit, self.inner.call(request));
        Box::pin(async move {
            match tokio::time::timeout(limit, future).await {
                Ok(response) => response,
                Err(_) => Ok(error_response(
                    StatusCode::GATEWAY_TIMEOUT,
                    Error::new(codes::REQUEST_TIMEOUT, "Request timed out")
                        .with_data(&format!("requests may take at most {limit:?}")),
                )),
            }
        })
    }
}
