//! The HTTP face of a router: POST a frame, get the reply frame; upgrade to
//! a WebSocket on the same path; `GET /health`.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};

use super::exchange::{carries_body, closing, error_response, has_token, respond, ClientAddr, HttpBody};
use crate::codec::BufferBudget;
use crate::context::ConnectionInfo;
use crate::context::Extensions;
use crate::context::{Identity, Scopes};
use crate::dispatch::{one_shot, Refusal};
use crate::message::Error;
use crate::peer::Peer;
use crate::transport::ws::{self, WsOptions};
use crate::Router;

/// What the RPC service needs to know; shared by every request.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) router: Router,
    pub(crate) path: String,
    pub(crate) health_path: Option<String>,
    pub(crate) websocket: Option<WsOptions>,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: Option<crate::middleware::Metrics>,
    /// Whether browsers on any origin may call (CORS is configured);
    /// otherwise only pages served from this machine may.
    pub(crate) any_origin: bool,
    /// Whether the opaque `null` origin (sandboxed iframes, local files)
    /// may call.
    pub(crate) null_origin: bool,
    /// Whether the listener speaks TLS (`https` origins), for telling a
    /// page of this very server from another service on the same host.
    pub(crate) tls: bool,
    /// WebSocket connections outlive their HTTP connection's slot: they are
    /// bounded here instead.
    pub(crate) ws_slots: Arc<tokio::sync::Semaphore>,
    /// Bytes of request bodies being read, across connections.
    pub(crate) body_budget: BufferBudget,
    pub(crate) config: crate::peer::ConnectionConfig,
    pub(crate) shutdown_grace: std::time::Duration,
    pub(crate) connections: tokio_util::task::TaskTracker,
    pub(crate) shutdown: tokio_util::sync::CancellationToken,
}

/// The JSON-RPC service as a [`tower::Service`] over HTTP requests, so that
/// any tower layer can wrap it. See [`HttpServer`](super::HttpServer).
#[derive(Debug, Clone)]
pub struct RpcService {
    pub(crate) settings: Arc<Settings>,
}

impl tower::Service<Request<HttpBody>> for RpcService {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<HttpBody>) -> Self::Future {
        let settings = Arc::clone(&self.settings);
        let peer_addr = request.extensions_mut().remove::<ClientAddr>().and_then(|a| a.0);
        let connection = Arc::new(connection_facts(peer_addr));
        Box::pin(async move { Ok(serve(&settings, request, connection).await) })
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).map(HeaderValue::as_bytes) else {
        return false;
    };
    // What nearly every client sends, first; then compared without
    // lowercasing a copy: this runs on every request.
    if value == b"application/json" {
        return true;
    }
    let essence = value
        .split(|&b| b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    let json_types: [&[u8]; 3] = [
        b"application/json",
        b"application/json-rpc",
        b"application/jsonrequest",
    ];
    json_types.iter().any(|json| essence.eq_ignore_ascii_case(json))
        || essence.len() >= 5 && essence[essence.len() - 5..].eq_ignore_ascii_case(b"+json")
}

fn is_websocket_upgrade(headers: &HeaderMap) -> bool {
    has_token(headers, header::CONNECTION, "upgrade") && has_token(headers, header::UPGRADE, "websocket")
}

/// Whether a browser page from this `Origin` may call: no origin (not a
/// browser), a page served from this machine, or a page from this very
/// server reached by IP address. Anything else could be any web site the
/// user visits (cross-site WebSocket hijacking, DNS rebinding: an attacker's
/// name resolved to this address has the attacker's name as its host, never
/// an IP literal), unless CORS says so. That includes the opaque `null`
/// origin, which any page can send from a sandboxed iframe: it needs CORS
/// or [`HttpServer::allow_null_origin`](super::HttpServer::allow_null_origin).
fn origin_allowed<B>(settings: &Settings, request: &Request<B>) -> bool {
    let Some(origin) = request
        .headers()
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
    else {
        return true;
    };
    if settings.any_origin {
        return true;
    }
    if origin == "null" {
        return settings.null_origin;
    }
    let Ok(origin) = origin.parse::<http::Uri>() else {
        return false;
    };
    let Some(host) = origin.host().map(str::to_ascii_lowercase) else {
        return false;
    };
    if matches!(host.as_str(), "localhost" | "127.0.0.1" | "[::1]") || host.ends_with(".localhost") {
        return true;
    }
    // HTTP/1.1 names the server in `Host`, HTTP/2 in the `:authority`.
    let server = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    let ip_literal = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .is_ok();
    // Same origin: this scheme, this host and this port, default ports
    // spelled out (another service on the same address is another origin).
    let (scheme, default_port) = if settings.tls {
        ("https", 443)
    } else {
        ("http", 80)
    };
    let origin_port = origin.port_u16().unwrap_or(default_port);
    let same_server = server
        .and_then(|server| server.parse::<http::uri::Authority>().ok())
        .is_some_and(|server| {
            server.host().eq_ignore_ascii_case(&host)
                && server.port_u16().unwrap_or(default_port) == origin_port
        });
    ip_literal && origin.scheme_str() == Some(scheme) && same_server
}

/// `503` with `Retry-After: 1` and a `-32007 Server busy` body saying why.
fn service_unavailable(why: &str) -> Response<Full<Bytes>> {
    let mut response = error_response(
        StatusCode::SERVICE_UNAVAILABLE,
        Error::server_busy().with_data(why),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

fn method_not_allowed(allow: &'static str) -> Response<Full<Bytes>> {
    let mut response = error_response(
        StatusCode::METHOD_NOT_ALLOWED,
        Error::invalid_request().with_data(&format!("use {allow}")),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    response
}

/// What a handler learns of an HTTP connection: its [`ConnectionInfo`].
pub(crate) fn connection_facts(peer_addr: Option<String>) -> Extensions {
    let mut connection = Extensions::new();
    connection.insert(ConnectionInfo {
        transport: "http",
        peer_addr,
        local_addr: None,
    });
    connection
}

/// Answers one request. `connection` holds the facts of the connection it
/// came on ([`connection_facts`]); the body is any body, so that the server
/// can hand hyper's own straight in.
pub(crate) async fn serve<B>(
    settings: &Settings,
    mut request: Request<B>,
    connection: Arc<Extensions>,
) -> Response<Full<Bytes>>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let path = request.uri().path();
    #[cfg(feature = "metrics")]
    if let Some(metrics) = settings
        .metrics
        .as_ref()
        .filter(|_| path == super::metrics_server::METRICS_PATH)
    {
        return super::metrics_server::page(metrics, &request);
    }
    let limit = settings.router.parse_limits().max_frame_len;
    if settings.health_path.as_deref() == Some(path) {
        return match *request.method() {
            Method::GET | Method::HEAD => respond(StatusCode::OK, "application/json", r#"{"status":"ok"}"#),
            _ => refuse_after_body(request, limit, method_not_allowed("GET, HEAD")).await,
        };
    }
    if path != settings.path {
        let refusal = error_response(
            StatusCode::NOT_FOUND,
            Error::invalid_request().with_data(&format!("JSON-RPC is served at {}", settings.path)),
        );
        return refuse_after_body(request, limit, refusal).await;
    }
    if !origin_allowed(settings, &request) {
        let refusal = error_response(
            StatusCode::FORBIDDEN,
            Error::invalid_request()
                .with_data("this origin may not call this server (configure CORS to allow it)"),
        );
        return refuse_after_body(request, limit, refusal).await;
    }
    let allow = if settings.websocket.is_some() {
        "POST, GET"
    } else {
        "POST"
    };
    match *request.method() {
        Method::POST => {}
        Method::GET if settings.websocket.is_some() && is_websocket_upgrade(request.headers()) => {
            let peer_addr = connection
                .get::<ConnectionInfo>()
                .and_then(|info| info.peer_addr.clone());
            return upgrade(settings, &mut request, peer_addr);
        }
        _ => return refuse_after_body(request, limit, method_not_allowed(allow)).await,
    }
    if !is_json(request.headers()) {
        let refusal = error_response(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Error::invalid_request()
                .with_data("the request body must be JSON: send Content-Type: application/json"),
        );
        return refuse_after_body(request, limit, refusal).await;
    }
    // Refusals past this point come before the body was read to its end
    // (too large, over the budget, too slow, unreadable): they close the
    // connection, saying so.
    let too_large = || {
        error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            Error::frame_too_large().with_data(&format!("the body may be at most {limit} bytes")),
        )
    };
    // Refuse by the announced length, before reading anything.
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > limit as u64) {
        return closing(too_large());
    }
    let (parts, body) = request.into_parts();
    let connection = request_extensions(parts, connection);
    let reading = within(BODY_READ_TIMEOUT, read_body(body, limit, &settings.body_budget));
    let Some(body) = reading.await else {
        return closing(error_response(
            StatusCode::REQUEST_TIMEOUT,
            Error::invalid_request().with_data("the request body did not arrive in time"),
        ));
    };
    let body = match body {
        Ok(body) => body,
        Err(BodyError::TooLarge) => return closing(too_large()),
        Err(BodyError::OverBudget) => {
            return closing(service_unavailable(
                "too many request bodies in progress: try again later",
            ))
        }
        Err(BodyError::Read(e)) => {
            return closing(error_response(
                StatusCode::BAD_REQUEST,
                Error::parse_error().with_data(&format!("cannot read the body: {e}")),
            ))
        }
    };
    let connection = Arc::new(connection);
    let outcome = one_shot(&settings.router, &body, &connection).await;
    match outcome.refused {
        Some(Refusal::RateLimited { retry_after }) => return super::exchange::too_many_requests(retry_after),
        Some(Refusal::Busy) => return service_unavailable("every call was refused: the server is busy"),
        _ => {}
    }
    match outcome.reply {
        Some(reply) => respond(StatusCode::OK, "application/json", reply),
        // Notifications only: nothing to say, and never `null`.
        None => {
            let mut response = Response::new(Full::new(Bytes::new()));
            *response.status_mut() = StatusCode::NO_CONTENT;
            response
        }
    }
}

/// `refusal`, once the request's body (if it has one) is read and dropped,
/// so that the connection goes on to the next request; when the body is
/// larger than `limit`, slow or unreadable, the refusal closes the
/// connection instead, saying so.
async fn refuse_after_body<B>(
    request: Request<B>,
    limit: usize,
    refusal: Response<Full<Bytes>>,
) -> Response<Full<Bytes>>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    if !carries_body(request.body()) {
        return refusal;
    }
    let mut body = request.into_body();
    let drained = within(BODY_READ_TIMEOUT, async move {
        let mut read = 0usize;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { return false };
            if let Some(data) = frame.data_ref() {
                read += data.len();
                if read > limit {
                    return false;
                }
            }
        }
        true
    })
    .await;
    if drained == Some(true) {
        refusal
    } else {
        closing(refusal)
    }
}

/// How long a client may take to send a request body.
const BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// `future`'s output, or `None` if it takes longer than `limit` once it
/// has had to wait. The timer is set only then: a small body is usually
/// in by the time its request is served, and a timer costs a clock read
/// and a timer-wheel entry per request.
pub(crate) fn within<F: Future>(limit: std::time::Duration, future: F) -> Within<F> {
    Within {
        future,
        deadline: None,
        limit,
    }
}

pin_project_lite::pin_project! {
    /// The future of [`within`]. Not an `async fn`: one holds its argument
    /// twice (as given, and pinned to be polled), and the request futures
    /// that wait on a body are allocated for every request.
    pub(crate) struct Within<F> {
        #[pin]
        future: F,
        #[pin]
        deadline: Option<tokio::time::Sleep>,
        limit: std::time::Duration,
    }
}

impl<F: Future> Future for Within<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Poll::Ready(output) = this.future.poll(cx) {
            return Poll::Ready(Some(output));
        }
        if this.deadline.is_none() {
            this.deadline.set(Some(tokio::time::sleep(*this.limit)));
        }
        match this.deadline.as_pin_mut() {
            Some(sleep) => sleep.poll(cx).map(|()| None),
            None => Poll::Pending,
        }
    }
}

pub(crate) enum BodyError {
    TooLarge,
    /// The server-wide budget for bodies being read is spent.
    OverBudget,
    Read(String),
}

/// Reads a whole body of at most `limit` bytes, stopping as soon as it is
/// known to be larger, within the server's budget for bodies in progress.
/// A body that arrives in one piece is not copied.
pub(crate) async fn read_body<B>(mut body: B, limit: usize, budget: &BufferBudget) -> Result<Bytes, BodyError>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut first: Option<Bytes> = None;
    let mut joined = bytes::BytesMut::new();
    let mut charge = budget.charge();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Read(e.to_string()))?;
        let Ok(data) = frame.into_data() else { continue };
        let so_far = first.as_ref().map_or(0, Bytes::len) + joined.len();
        if so_far + data.len() > limit {
            return Err(BodyError::TooLarge);
        }
        charge
            .hold(so_far + data.len())
            .map_err(|_| BodyError::OverBudget)?;
        match first.take() {
            None if joined.is_empty() => first = Some(data),
            None => joined.extend_from_slice(&data),
            Some(previous) => {
                joined.extend_from_slice(&previous);
                joined.extend_from_slice(&data);
            }
        }
    }
    Ok(first.unwrap_or_else(|| joined.freeze()))
}

/// What a handler can learn about an HTTP request: the connection's facts
/// and the request headers.
fn request_extensions(mut request: http::request::Parts, connection: Arc<Extensions>) -> Extensions {
    let mut extensions = Extensions::over(connection);
    carry_credentials(&mut request.extensions, &mut extensions);
    extensions.insert(request.headers);
    extensions
}

/// Moves what an authentication layer learned about the caller (its
/// identity, its token's scopes and the token) from the HTTP request to
/// the calls it makes.
fn carry_credentials(from: &mut http::Extensions, to: &mut Extensions) {
    if let Some(identity) = from.remove::<Identity>() {
        to.insert(identity);
    }
    if let Some(scopes) = from.remove::<Scopes>() {
        to.insert(scopes);
    }
    #[cfg(feature = "oauth")]
    if let Some(token) = from.remove::<Arc<crate::auth::AccessToken>>() {
        to.insert(token);
    }
}

/// Waits until the Unix time `at` (seconds); forever when there is none.
async fn until_unix_time(at: Option<u64>) {
    let Some(at) = at else {
        return std::future::pending().await;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    tokio::time::sleep(std::time::Duration::from_secs(at).saturating_sub(now)).await;
}

/// A copy of `headers` that owns its values. hyper's header values are
/// slices of the connection's read buffer (16 KiB): a WebSocket connection
/// keeps its upgrade request's headers for its whole life, and a plain
/// clone would keep that buffer alive with them.
fn owned_headers(headers: &HeaderMap) -> HeaderMap {
    let mut owned = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let mut copy = HeaderValue::from_bytes(value.as_bytes()).unwrap_or_else(|_| value.clone());
        copy.set_sensitive(value.is_sensitive());
        owned.append(name.clone(), copy);
    }
    owned
}

fn upgrade<B>(
    settings: &Settings,
    request: &mut Request<B>,
    peer_addr: Option<String>,
) -> Response<Full<Bytes>> {
    let headers = request.headers();
    let version_ok = headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_some_and(|v| v == "13");
    let Some(key) = headers.get(header::SEC_WEBSOCKET_KEY).filter(|_| version_ok) else {
        let mut response = error_response(
            StatusCode::BAD_REQUEST,
            Error::invalid_request()
                .with_data("a WebSocket upgrade needs Sec-WebSocket-Key and Sec-WebSocket-Version: 13"),
        );
        response
            .headers_mut()
            .insert(header::SEC_WEBSOCKET_VERSION, HeaderValue::from_static("13"));
        return response;
    };
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let Ok(slot) = Arc::clone(&settings.ws_slots).try_acquire_owned() else {
        return service_unavailable("too many WebSocket connections: try again later");
    };
    let Some(options) = settings.websocket else {
        return method_not_allowed("POST");
    };
    let mut extensions = Extensions::new();
    extensions.insert(owned_headers(request.headers()));
    extensions.insert(ConnectionInfo {
        transport: "websocket",
        peer_addr,
        local_addr: None,
    });
    carry_credentials(request.extensions_mut(), &mut extensions);
    // A connection authorized by a token lives no longer than the token:
    // the client reconnects with a fresh one.
    #[cfg(feature = "oauth")]
    let expires_at = extensions
        .get::<Arc<crate::auth::AccessToken>>()
        .and_then(|token| token.expires_at);
    #[cfg(not(feature = "oauth"))]
    let expires_at: Option<u64> = None;
    let on_upgrade = hyper::upgrade::on(request);
    let config = settings.config.clone();
    let grace = settings.shutdown_grace;
    let router = settings.router.clone();
    let shutdown = settings.shutdown.clone();
    let budget = settings.body_budget.clone();
    #[cfg(feature = "metrics")]
    let gauge = settings.metrics.as_ref().map(|m| m.connection("websocket"));
    let open = crate::server::memory::OpenConnection::new();
    settings.connections.spawn(async move {
        let _slot = slot;
        let _open = open;
        #[cfg(feature = "metrics")]
        let _gauge = gauge;
        let upgraded = match on_upgrade.await {
            Ok(upgraded) => upgraded,
            Err(e) => return tracing::debug!(error = %e, "websocket upgrade failed"),
        };
        // Messages still arriving are charged to the server's budget, as
        // request bodies are.
        let meter = ws::ReadMeter::new(&budget);
        let io = meter.wrap(hyper_util::rt::TokioIo::new(upgraded));
        // Nothing can be sent to the client before it has sent something
        // (no handler has its peer yet), so an idle connection holds only
        // its socket, its facts and this task until then.
        let Some((io, part)) = ws::until_used(io, &options, &meter, &shutdown).await else {
            return;
        };
        // Boxed, so that waiting above holds only what waiting needs.
        Box::pin(async move {
            let (frames_in, frames_out) = match ws::pump_accepted(io, part, options, meter) {
                Ok(pumped) => pumped,
                Err(e) => return tracing::warn!(error = %e, "websocket not started"),
            };
            let peer: Peer = Peer::builder()
                .router(router)
                .connection(config)
                .extensions(extensions)
                .write_limit()
                .start_kinded(frames_in, frames_out, false);
            tokio::select! {
                reason = peer.closed() => tracing::debug!(%reason, "websocket closed"),
                () = shutdown.cancelled() => crate::server::close_gracefully(&peer, grace).await,
                () = until_unix_time(expires_at) => {
                    tracing::debug!("the token of a websocket expired: closing it");
                    crate::server::close_gracefully(&peer, grace).await;
                }
            }
        })
        .await;
    });
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = response.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(value) = HeaderValue::from_str(&accept) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_headers_share_nothing_with_the_read_buffer() {
        // hyper's header values are slices of its read buffer, like these.
        let buffer = Bytes::from_static(b"x-request-id: 1234\r\nauthorization: Bearer secret\r\n");
        let mut headers = HeaderMap::new();
        let id = HeaderValue::from_maybe_shared(buffer.slice(14..18)).unwrap();
        let mut auth = HeaderValue::from_maybe_shared(buffer.slice(35..48)).unwrap();
        auth.set_sensitive(true);
        headers.insert("x-request-id", id);
        headers.append(header::AUTHORIZATION, auth);
        headers.append("x-request-id", HeaderValue::from_static("5678"));
        let owned = owned_headers(&headers);
        assert_eq!(owned, headers);
        assert!(owned[header::AUTHORIZATION].is_sensitive());
        let inside = buffer.as_ptr_range();
        for value in owned.values() {
            assert!(
                !inside.contains(&value.as_bytes().as_ptr()),
                "{value:?} still points into the buffer"
            );
        }
    }
}
