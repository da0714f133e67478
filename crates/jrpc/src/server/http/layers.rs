//! Tower layers for the HTTP service: auth, per-client rate limits and a
//! per-request timeout. Each answers a refused request itself, with the
//! right HTTP status and a JSON-RPC error body, and otherwise passes the
//! request through untouched. Compose them with `tower::ServiceBuilder` or
//! through [`HttpServer`](super::HttpServer)'s settings.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use tower::{Layer, Service};

use super::exchange::{error_response, too_many_requests, ClientAddr};
use crate::context::Identity;
use crate::message::{codes, Error};
pub use crate::middleware::RateLimit;

type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, Infallible>> + Send>>;

/// A check made before a request reaches the service: let it through, or
/// answer it right away.
pub trait Gate: Clone + Send + Sync + 'static {
    /// `None` lets the request through; `Some` is the response refusing it.
    fn refuse<B>(&self, request: &Request<B>) -> Option<Response<Full<Bytes>>>;

    /// Records what the gate learned about a request it let through (who
    /// the caller is, say) in the request's extensions.
    fn admit<B>(&self, _request: &mut Request<B>) {}
}

/// A service behind a [`Gate`]: what [`AuthLayer`] and [`RequestRateLimitLayer`]
/// make.
#[derive(Debug, Clone)]
pub struct Gated<S, G> {
    gate: G,
    inner: S,
}

impl<S, B, G> Service<Request<B>> for Gated<S, G>
where
    B: http_body::Body,
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

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        match self.gate.refuse(&request) {
            None => {
                self.gate.admit(&mut request);
                Box::pin(self.inner.call(request))
            }
            Some(refusal) => {
                let refusal = super::exchange::refused_unread(request.body(), refusal);
                Box::pin(async move { Ok(refusal) })
            }
        }
    }
}

/// The service made by [`AuthLayer`].
pub type Auth<S> = Gated<S, AuthLayer>;
/// The service made by [`RequestRateLimitLayer`].
pub type RateLimited<S> = Gated<S, RateLimit>;

// ---- auth ----

/// Requires `Authorization: Bearer <token>` (or `X-Api-Key: <token>`) with
/// one of the configured tokens; anything else is answered `401` with a
/// `WWW-Authenticate: Bearer` header and a `-32004 Unauthorized` error body.
/// Paths listed with [`exempt`](Self::exempt) (a health check, say) pass.
///
/// A request let through carries the token's [`Identity`] in its
/// extensions, and so does every call it makes (for per-method
/// authorization, see [`Authorize`](crate::middleware::Authorize)).
#[derive(Debug, Clone)]
pub struct AuthLayer {
    /// Each accepted token and whose it is.
    tokens: Arc<Vec<(String, Identity)>>,
    exempt: Arc<Vec<String>>,
    /// Refused requests are charged to the client here, so that tokens
    /// cannot be guessed at line rate.
    charge: Option<RateLimit>,
}

impl AuthLayer {
    /// Accepts any of `tokens`; the first one's identity is `token1`, the
    /// second's `token2`, and so on (never the token itself, which would
    /// then show in logs). Use [`named`](Self::named) to name them.
    pub fn bearer(tokens: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let named = tokens
            .into_iter()
            .enumerate()
            .map(|(i, token)| (format!("token{}", i + 1), token.into()));
        Self::named(named)
    }

    /// Accepts each token, as the identity it is paired with:
    /// `[(name, token), ...]`.
    pub fn named(pairs: impl IntoIterator<Item = (impl Into<String>, impl Into<String>)>) -> Self {
        AuthLayer {
            tokens: Arc::new(
                pairs
                    .into_iter()
                    .map(|(name, token)| (token.into(), Identity::new(name.into())))
                    .collect(),
            ),
            exempt: Arc::new(Vec::new()),
            charge: None,
        }
    }

    /// Lets requests for `path` through without a token.
    pub fn exempt(mut self, path: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.exempt).push(path.into());
        self
    }

    /// Charges every refused request to its client's budget in `limit`,
    /// answering `429` instead of `401` once it is spent: no token guessing
    /// at line rate.
    pub fn charge_refusals(mut self, limit: RateLimit) -> Self {
        self.charge = Some(limit);
        self
    }

    /// The identity of the token a request carries; `None` when it carries
    /// no accepted token.
    fn identify<B>(&self, request: &Request<B>) -> Option<&Identity> {
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
        let mut found = None;
        for given in [bearer, api_key].into_iter().flatten() {
            // Every token is compared, so that timing tells nothing.
            for (token, identity) in self.tokens.iter() {
                if constant_time_eq(token.as_bytes(), given.as_bytes()) {
                    found = found.or(Some(identity));
                }
            }
        }
        found
    }

    fn exempted<B>(&self, request: &Request<B>) -> bool {
        self.exempt.iter().any(|p| p == request.uri().path())
    }
}

impl Gate for AuthLayer {
    fn refuse<B>(&self, request: &Request<B>) -> Option<Response<Full<Bytes>>> {
        if self.exempted(request) || self.identify(request).is_some() {
            return None;
        }
        if let Some(limit) = &self.charge {
            if let Some(refusal) = limit.refuse(request) {
                return Some(refusal);
            }
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

    fn admit<B>(&self, request: &mut Request<B>) {
        if let Some(identity) = self.identify(request).cloned() {
            request.extensions_mut().insert(identity);
        }
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

impl Gate for RateLimit {
    fn refuse<B>(&self, request: &Request<B>) -> Option<Response<Full<Bytes>>> {
        let client = request
            .extensions()
            .get::<ClientAddr>()
            .and_then(|a| a.0.as_deref())
            .unwrap_or_default();
        let wait = self.check(client).err()?;
        Some(too_many_requests(wait))
    }
}

/// Applies a [`RateLimit`] per HTTP request and client address (whatever
/// the request carries); a refused request is answered `429` with
/// `Retry-After` (whole seconds, rounded up) and a `-32005 Rate limited`
/// error body. [`HttpServer::rate_limit`](super::HttpServer::rate_limit)
/// charges each call instead, on HTTP and WebSocket alike (that is
/// [`middleware::RateLimitLayer`](crate::middleware::RateLimitLayer)).
#[derive(Debug, Clone)]
pub struct RequestRateLimitLayer {
    limit: RateLimit,
}

impl RequestRateLimitLayer {
    /// Limits each client to `limit`.
    pub fn new(limit: RateLimit) -> Self {
        RequestRateLimitLayer { limit }
    }
}

impl<S> Layer<S> for RequestRateLimitLayer {
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
    B: http_body::Body,
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
        // A request cut short may not have had its body read.
        let has_body = super::exchange::carries_body(request.body());
        let (limit, future) = (self.limit, self.inner.call(request));
        Box::pin(async move {
            match tokio::time::timeout(limit, future).await {
                Ok(response) => response,
                Err(_) => {
                    let response = error_response(
                        StatusCode::GATEWAY_TIMEOUT,
                        Error::new(codes::REQUEST_TIMEOUT, "Request timed out")
                            .with_data(&format!("requests may take at most {limit:?}")),
                    );
                    Ok(if has_body {
                        super::exchange::closing(response)
                    } else {
                        response
                    })
                }
            }
        })
    }
}
