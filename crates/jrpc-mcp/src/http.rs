//! Streamable HTTP (revision 2025-11-25): one endpoint for POST, GET and
//! DELETE, sessions with a peer each, responses as JSON or as an SSE stream
//! that also carries the request's progress, logs and requests to the
//! client.
//!
//! Built on jrpc's HTTP server as a [route](jrpc::server::http::route): the
//! session's [`Peer`] runs over an in-memory connection whose incoming
//! frames are the POSTed messages and whose outgoing frames go out on the
//! session's streams.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! let serving = jrpc_mcp::demo::server().serve_http("127.0.0.1:8000", Default::default()).await?;
//! println!("MCP at {}/mcp", serving.local_addr());
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use jrpc::codec::Inbound;
use jrpc::message::RawValue;
use jrpc::peer::Peer;
use jrpc::server::http::route::{self, RouteBody, RouteContext};
use jrpc::server::http::{sse, HttpBody, HttpServer};
use jrpc::server::Serving;
use jrpc::transport::Connection;
use jrpc::{CallError, Error, Id};
use tokio::sync::{mpsc, oneshot};

use crate::server::{McpServer, RequestOutbound};
use crate::types::SUPPORTED_PROTOCOL_VERSIONS;

/// The session header.
pub const SESSION_HEADER: &str = "mcp-session-id";
/// The protocol version header.
pub const VERSION_HEADER: &str = "mcp-protocol-version";

/// Settings of the Streamable HTTP endpoint.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// The endpoint's path (default `/mcp`).
    pub path: String,
    /// Host names (without port) the `Host` header may name; others get
    /// `421` (DNS rebinding protection). Default: `localhost`, `127.0.0.1`
    /// and `[::1]`; [`serve_http`](McpServer::serve_http) adds the host it
    /// binds.
    pub allowed_hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`) allowed besides those on an allowed
    /// host; any other `Origin` gets `403`.
    pub allowed_origins: Vec<String>,
    /// A comment on idle SSE streams this often (default 15 s).
    pub keep_alive: Duration,
    /// A session that no request has touched for this long, with no stream
    /// open, ends (default 30 minutes); its next request gets `404`.
    pub session_idle_timeout: Duration,
    /// The most sessions at once (default 1024); past it an `initialize`
    /// gets `503` with `-32007`.
    pub max_sessions: usize,
    /// Prefer a JSON body for every reply (default `false`). A `tools/call`,
    /// `resources/read` or `prompts/get` otherwise always answers with an
    /// SSE stream, opened at once; with this set it waits for the handler's
    /// first message and answers with JSON when that is the reply, falling
    /// back to a stream when the handler sends progress, a log line or a
    /// request first, so no message is lost.
    pub json_response: bool,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            path: "/mcp".to_owned(),
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()],
            allowed_origins: Vec::new(),
            keep_alive: Duration::from_secs(15),
            session_idle_timeout: Duration::from_secs(30 * 60),
            max_sessions: 1024,
            json_response: false,
        }
    }
}

impl HttpOptions {
    /// Lets the `Host` header name `host` too.
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.allowed_hosts.push(host.into());
        self
    }

    /// Lets pages from `origin` call too.
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.allowed_origins.push(origin.into());
        self
    }

    /// Prefers JSON bodies over SSE streams for replies (see
    /// [`json_response`](Self::json_response)).
    pub fn json_response(mut self, json: bool) -> Self {
        self.json_response = json;
        self
    }
}

impl McpServer {
    /// Serves this server over Streamable HTTP at `http://ADDR/mcp` until
    /// shut down.
    pub async fn serve_http(
        &self,
        addr: impl tokio::net::ToSocketAddrs,
        options: HttpOptions,
    ) -> io::Result<Serving> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let mut options = options;
        if let Ok(local) = listener.local_addr() {
            let host = match local.ip() {
                std::net::IpAddr::V6(ip) => format!("[{ip}]"),
                ip => ip.to_string(),
            };
            if !local.ip().is_unspecified() && !options.allowed_hosts.contains(&host) {
                options.allowed_hosts.push(host);
            }
        }
        let path = options.path.clone();
        let endpoint = StreamableHttp::new(self.clone(), options);
        let http = HttpServer::new(jrpc::Router::new())
            .health_path(None)
            .websocket(None)
            .route(path, move |request, cx| {
                let endpoint = endpoint.clone();
                async move { endpoint.handle(request, cx).await }
            });
        Ok(http.serve_tcp(listener))
    }
}

/// The Streamable HTTP endpoint of an [`McpServer`]: its sessions, and the
/// handler for a [route](HttpServer::route).
#[derive(Clone)]
pub struct StreamableHttp {
    server: McpServer,
    options: Arc<HttpOptions>,
    sessions: Arc<Mutex<HashMap<String, Arc<HttpSession>>>>,
}

impl std::fmt::Debug for StreamableHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamableHttp")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn refuse(status: StatusCode, error: Error) -> Response<RouteBody> {
    route::error_response(status, error)
}

fn bad_request(why: &str) -> Response<RouteBody> {
    Refusal::bad_request(why).into_response()
}

/// A refusal on its way to becoming a response.
struct Refusal(StatusCode, Error);

impl Refusal {
    fn bad_request(why: &str) -> Self {
        Refusal(StatusCode::BAD_REQUEST, Error::invalid_request().with_data(why))
    }

    fn into_response(self) -> Response<RouteBody> {
        refuse(self.0, self.1)
    }
}

/// What a POSTed message is.
enum Posted {
    Request { id: Id, method: String },
    Notification,
    Response { id: Id },
}

fn classify(body: &[u8]) -> Result<Posted, Refusal> {
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        Refusal(
            StatusCode::BAD_REQUEST,
            Error::parse_error().with_data(&e.to_string()),
        )
    })?;
    let serde_json::Value::Object(message) = value else {
        let why = if value.is_array() {
            "batches are not supported: send one message per request"
        } else {
            "a message is a JSON object"
        };
        return Err(Refusal::bad_request(why));
    };
    let id = message
        .get("id")
        .map(|id| serde_json::from_value::<Id>(id.clone()).map_err(|_| Refusal::bad_request("bad id")))
        .transpose()?;
    match (message.get("method").and_then(|m| m.as_str()), id) {
        (Some(method), Some(id)) => Ok(Posted::Request {
            id,
            method: method.to_owned(),
        }),
        (Some(_), None) => Ok(Posted::Notification),
        (None, Some(id)) if message.contains_key("result") || message.contains_key("error") => {
            Ok(Posted::Response { id })
        }
        _ => Err(Refusal::bad_request(
            "not a JSON-RPC request, notification or response",
        )),
    }
}

fn accepts(headers: &HeaderMap, mime: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| {
            let v = v.split(';').next().unwrap_or("").trim();
            v == mime || v == "*/*" || (v.ends_with("/*") && mime.starts_with(&v[..v.len() - 1]))
        })
}

/// The host part of a `Host` header or an origin's authority.
fn host_of(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority.find(']').map_or(authority, |end| &authority[..=end]);
    }
    authority.rsplit_once(':').map_or(authority, |(host, _)| host)
}

impl StreamableHttp {
    /// The endpoint for `server`.
    pub fn new(server: McpServer, options: HttpOptions) -> Self {
        StreamableHttp {
            server,
            options: Arc::new(options),
            sessions: Arc::default(),
        }
    }

    fn host_allowed(&self, host: &str) -> bool {
        let host = host_of(host);
        self.options
            .allowed_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host))
    }

    /// Refuses requests that could come from a rebound DNS name or a foreign
    /// web page.
    fn check_origin(&self, headers: &HeaderMap) -> Option<Response<RouteBody>> {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        if let Some(host) = host {
            if !self.host_allowed(host) {
                return Some(refuse(
                    StatusCode::MISDIRECTED_REQUEST,
                    Error::invalid_request().with_data(&format!("host {host:?} is not served here")),
                ));
            }
        }
        let origin = headers.get(header::ORIGIN)?.to_str().unwrap_or("null");
        let allowed = self.options.allowed_origins.iter().any(|o| o == origin)
            || origin
                .split_once("://")
                .filter(|(scheme, _)| *scheme == "http" || *scheme == "https")
                .is_some_and(|(_, authority)| self.host_allowed(authority));
        if allowed {
            return None;
        }
        Some(refuse(
            StatusCode::FORBIDDEN,
            Error::invalid_request().with_data(&format!("origin {origin:?} may not call this server")),
        ))
    }

    fn session(&self, headers: &HeaderMap) -> Result<Arc<HttpSession>, Refusal> {
        let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
            return Err(Refusal::bad_request("missing Mcp-Session-Id: initialize first"));
        };
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let session = sessions.get(id).cloned().ok_or_else(|| {
            Refusal(
                StatusCode::NOT_FOUND,
                Error::invalid_request().with_data("unknown or ended session: initialize again"),
            )
        })?;
        session.touch();
        Ok(session)
    }

    /// Ends the sessions that have expired.
    fn sweep(&self) {
        let limit = self.options.session_idle_timeout;
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions.retain(|_, session| {
            let keep = !session.expired(limit);
            if !keep {
                session.peer.close();
            }
            keep
        });
    }

    /// Handles one HTTP request to the endpoint.
    pub async fn handle(&self, request: Request<HttpBody>, cx: RouteContext) -> Response<RouteBody> {
        if let Some(refusal) = self.check_origin(request.headers()) {
            return refusal;
        }
        if let Some(version) = request.headers().get(VERSION_HEADER) {
            let known = version
                .to_str()
                .is_ok_and(|v| SUPPORTED_PROTOCOL_VERSIONS.contains(&v));
            if !known {
                return bad_request("unsupported MCP-Protocol-Version");
            }
        }
        match *request.method() {
            Method::POST => self.post(request, cx).await,
            Method::GET => self.get(request, cx),
            Method::DELETE => self.delete(request.headers()),
            _ => {
                let mut response = refuse(
                    StatusCode::METHOD_NOT_ALLOWED,
                    Error::invalid_request().with_data("use POST, GET or DELETE"),
                );
                response
                    .headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
                response
            }
        }
    }

    async fn post(&self, request: Request<HttpBody>, cx: RouteContext) -> Response<RouteBody> {
        let (parts, body) = request.into_parts();
        let headers = parts.headers;
        if !(accepts(&headers, "application/json") && accepts(&headers, "text/event-stream")) {
            return refuse(
                StatusCode::NOT_ACCEPTABLE,
                Error::invalid_request()
                    .with_data("Accept must include application/json and text/event-stream"),
            );
        }
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .eq_ignore_ascii_case("application/json")
            });
        if !json {
            return refuse(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                Error::invalid_request().with_data("Content-Type must be application/json"),
            );
        }
        let body = match cx.read_body(body).await {
            Ok(body) => body,
            Err(unread) => return unread.into_response(),
        };
        let posted = match classify(&body) {
            Ok(posted) => posted,
            Err(refusal) => return refusal.into_response(),
        };
        let new_session = matches!(&posted, Posted::Request { method, .. } if method == "initialize")
            && !headers.contains_key(SESSION_HEADER);
        let session = if new_session {
            match self.open_session() {
                Some(session) => session,
                None => {
                    let mut refusal = refuse(
                        StatusCode::SERVICE_UNAVAILABLE,
                        Error::server_busy().with_data("too many sessions: try again later"),
                    );
                    refusal
                        .headers_mut()
                        .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
                    return refusal;
                }
            }
        } else {
            match self.session(&headers) {
                Ok(session) => session,
                Err(refusal) => return refusal.into_response(),
            }
        };
        match posted {
            Posted::Notification => {
                session.deliver(body).await;
                accepted()
            }
            Posted::Response { id } => {
                if !session.streams.answer(&id, &body) {
                    session.deliver(body).await;
                }
                accepted()
            }
            Posted::Request { id, method } => {
                let replies = session.streams.open(&id);
                session.deliver(body).await;
                let mut response = if !streams_messages(&method) {
                    json_reply(replies).await
                } else if self.options.json_response {
                    self.json_unless_streamed(replies, &cx).await
                } else {
                    self.event_stream(None, replies, &cx)
                };
                if new_session {
                    if let Ok(value) = HeaderValue::from_str(&session.id) {
                        response.headers_mut().insert(SESSION_HEADER, value);
                    }
                }
                response
            }
        }
    }

    /// An SSE stream of `first`, then the rest of `messages`.
    fn event_stream(
        &self,
        first: Option<String>,
        messages: mpsc::UnboundedReceiver<String>,
        cx: &RouteContext,
    ) -> Response<RouteBody> {
        let stop = cx.shutdown().clone();
        let rest = futures_util::stream::unfold((messages, stop), |(mut messages, stop)| async move {
            tokio::select! {
                message = messages.recv() => message.map(|m| (sse::Event::data(m), (messages, stop))),
                () = stop.cancelled() => None,
            }
        });
        let first = futures_util::stream::iter(first.map(sse::Event::data));
        sse::response(first.chain(rest), Some(self.options.keep_alive))
    }

    /// The reply as a JSON body when it is the handler's first message;
    /// otherwise an SSE stream that starts with that message.
    async fn json_unless_streamed(
        &self,
        mut messages: mpsc::UnboundedReceiver<String>,
        cx: &RouteContext,
    ) -> Response<RouteBody> {
        let first = tokio::select! {
            first = messages.recv() => first,
            () = cx.shutdown().cancelled() => None,
        };
        match first {
            Some(reply) if peek(&reply).is_some_and(|p| p.method.is_none()) => json_body(reply),
            first => self.event_stream(first, messages, cx),
        }
    }

    fn get(&self, request: Request<HttpBody>, cx: RouteContext) -> Response<RouteBody> {
        if !accepts(request.headers(), "text/event-stream") {
            return refuse(
                StatusCode::NOT_ACCEPTABLE,
                Error::invalid_request().with_data("Accept must include text/event-stream"),
            );
        }
        let session = match self.session(request.headers()) {
            Ok(session) => session,
            Err(refusal) => return refusal.into_response(),
        };
        let messages = session.streams.open_standalone();
        self.event_stream(None, messages, &cx)
    }

    fn delete(&self, headers: &HeaderMap) -> Response<RouteBody> {
        let session = match self.session(headers) {
            Ok(session) => session,
            Err(refusal) => return refusal.into_response(),
        };
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&session.id);
        session.peer.close();
        Response::new(route::empty_body())
    }

    /// A new session, or `None` when there are too many.
    fn open_session(&self) -> Option<Arc<HttpSession>> {
        self.sweep();
        let full = self.sessions.lock().unwrap_or_else(|p| p.into_inner()).len() >= self.options.max_sessions;
        if full {
            return None;
        }
        let id = new_session_id();
        let streams = Arc::new(StreamTable::default());
        let (incoming_tx, incoming_rx) = mpsc::channel::<io::Result<Inbound>>(64);
        let incoming =
            futures_util::stream::unfold(
                incoming_rx,
                |mut rx| async move { rx.recv().await.map(|m| (m, rx)) },
            );
        let routed = Arc::clone(&streams);
        let outgoing = futures_util::sink::unfold((), move |(), frame: Bytes| {
            routed.route(&frame);
            async { Ok::<_, io::Error>(()) }
        });
        let info = jrpc::router::ConnectionInfo {
            transport: "mcp-http",
            peer_addr: None,
            local_addr: None,
        };
        let outbound: Arc<dyn RequestOutbound> = Arc::new(Arc::clone(&streams));
        let connection = Connection::new(incoming, Box::pin(outgoing), info);
        let peer = self.server.connect_with(connection, Some(outbound));
        let session = Arc::new(HttpSession {
            id: id.clone(),
            incoming: incoming_tx,
            peer,
            streams,
            last_seen: Mutex::new(tokio::time::Instant::now()),
        });
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, Arc::clone(&session));
        Some(session)
    }
}

/// Requests whose handlers may send the client messages before they answer
/// get an SSE stream; the rest a JSON body.
fn streams_messages(method: &str) -> bool {
    matches!(method, "tools/call" | "resources/read" | "prompts/get")
}

fn accepted() -> Response<RouteBody> {
    let mut response = Response::new(route::empty_body());
    *response.status_mut() = StatusCode::ACCEPTED;
    response
}

async fn json_reply(mut replies: mpsc::UnboundedReceiver<String>) -> Response<RouteBody> {
    match replies.recv().await {
        Some(reply) => json_body(reply),
        None => refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            Error::internal_error().with_data("the session ended before answering"),
        ),
    }
}

fn json_body(reply: String) -> Response<RouteBody> {
    let mut response = Response::new(route::full_body(reply));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// What routing needs of a message: whether it has a method, and its id.
#[derive(serde::Deserialize)]
struct Peek {
    #[serde(default)]
    method: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    id: Option<Id>,
}

fn peek(text: &str) -> Option<Peek> {
    serde_json::from_str(text).ok()
}

fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No system randomness: still unique, if guessable.
        static FALLBACK: AtomicU64 = AtomicU64::new(1);
        bytes[..8].copy_from_slice(&FALLBACK.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One client's session.
struct HttpSession {
    id: String,
    incoming: mpsc::Sender<io::Result<Inbound>>,
    peer: Peer,
    streams: Arc<StreamTable>,
    /// When a request last came for this session.
    last_seen: Mutex<tokio::time::Instant>,
}

impl HttpSession {
    fn touch(&self) {
        *self.last_seen.lock().unwrap_or_else(|p| p.into_inner()) = tokio::time::Instant::now();
    }

    /// Whether nothing has come for `limit` and no stream is open.
    fn expired(&self, limit: Duration) -> bool {
        let idle = self.last_seen.lock().unwrap_or_else(|p| p.into_inner()).elapsed();
        idle >= limit && !self.streams.any_open()
    }

    async fn deliver(&self, frame: Bytes) {
        let _ = self.incoming.send(Ok(Inbound::Frame(frame))).await;
    }
}

/// Where a session's messages to the client go: each request's own
/// stream, the standalone GET stream, and the requests the server made of
/// the client that wait for an answer.
#[derive(Default)]
struct StreamTable {
    by_request: Mutex<HashMap<Id, mpsc::UnboundedSender<String>>>,
    standalone: Mutex<Option<mpsc::UnboundedSender<String>>>,
    calls: Mutex<HashMap<String, Answering>>,
    next_call: AtomicU64,
}

/// Where the client's answer to a request of the server's goes.
type Answering = oneshot::Sender<Result<Box<RawValue>, CallError>>;

/// The prefix of the ids of requests the server sends through a request's
/// stream (the peer's own ids are numbers).
const CALL_PREFIX: &str = "srv-";

impl StreamTable {
    fn open(&self, id: &Id) -> mpsc::UnboundedReceiver<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.by_request
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), tx);
        rx
    }

    /// Whether a stream to the client is open (a request still being
    /// answered, or the standalone stream).
    fn any_open(&self) -> bool {
        let requests = self.by_request.lock().unwrap_or_else(|p| p.into_inner());
        if requests.values().any(|s| !s.is_closed()) {
            return true;
        }
        drop(requests);
        let standalone = self.standalone.lock().unwrap_or_else(|p| p.into_inner());
        standalone.as_ref().is_some_and(|s| !s.is_closed())
    }

    fn open_standalone(&self) -> mpsc::UnboundedReceiver<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        *self.standalone.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
        rx
    }

    /// Sends `message` on the stream of `related`, else on the standalone
    /// stream; whether one took it.
    fn send(&self, related: Option<&Id>, message: String) -> bool {
        if let Some(id) = related {
            let streams = self.by_request.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(stream) = streams.get(id) {
                if stream.send(message.clone()).is_ok() {
                    return true;
                }
            }
        }
        let standalone = self.standalone.lock().unwrap_or_else(|p| p.into_inner());
        standalone.as_ref().is_some_and(|s| s.send(message).is_ok())
    }

    /// A frame from the session's peer: a response ends its request's
    /// stream; anything else goes on the standalone stream.
    fn route(&self, frame: &Bytes) {
        let Ok(text) = std::str::from_utf8(frame) else {
            return;
        };
        let Some(peek) = peek(text) else {
            return;
        };
        match (peek.method, peek.id) {
            (None, Some(id)) => {
                let stream = self
                    .by_request
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&id);
                if let Some(stream) = stream {
                    let _ = stream.send(text.to_owned());
                }
            }
            _ => {
                if !self.send(None, text.to_owned()) {
                    tracing::debug!("no stream open for a message to the client; dropped");
                }
            }
        }
    }

    /// The client's answer to a request the server made through a stream;
    /// whether it was one.
    fn answer(&self, id: &Id, body: &[u8]) -> bool {
        let Ok(value) = serde_json::to_value(id) else {
            return false;
        };
        let Some(key) = value.as_str().filter(|k| k.starts_with(CALL_PREFIX)) else {
            return false;
        };
        let Some(waiting) = self.calls.lock().unwrap_or_else(|p| p.into_inner()).remove(key) else {
            return false;
        };
        #[derive(serde::Deserialize)]
        struct Answer {
            #[serde(default)]
            result: Option<Box<RawValue>>,
            #[serde(default)]
            error: Option<Error>,
        }
        let outcome = match serde_json::from_slice::<Answer>(body) {
            Ok(Answer {
                error: Some(error), ..
            }) => Err(CallError::Rpc(error)),
            Ok(Answer {
                result: Some(result), ..
            }) => Ok(result),
            _ => Err(CallError::Protocol(
                "an answer with neither result nor error".into(),
            )),
        };
        let _ = waiting.send(outcome);
        true
    }
}

/// Forgets a request to the client that is no longer awaited, telling the
/// client it is cancelled.
struct PendingCall {
    table: Arc<StreamTable>,
    key: String,
    related: Id,
    done: bool,
}

impl PendingCall {
    /// Answered (or never sent): nothing to forget.
    fn disarm(&mut self) {
        self.done = true;
    }
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let waiting = self
            .table
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.key);
        if waiting.is_some() {
            let cancel = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                            "params": {"requestId": self.key, "reason": "no longer needed"}});
            self.table.send(Some(&self.related), cancel.to_string());
        }
    }
}

impl RequestOutbound for Arc<StreamTable> {
    fn notify(&self, related: &Id, frame: String) {
        if !self.send(Some(related), frame) {
            tracing::debug!("no stream open for a notification; dropped");
        }
    }

    fn call(
        &self,
        related: &Id,
        method: &str,
        params: Box<RawValue>,
        timeout: Duration,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Box<RawValue>, CallError>> + Send>> {
        let key = format!(
            "{CALL_PREFIX}{}",
            self.next_call.fetch_add(1, Ordering::Relaxed) + 1
        );
        let (tx, rx) = oneshot::channel();
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone(), tx);
        let frame = serde_json::json!({"jsonrpc": "2.0", "id": key, "method": method, "params": params});
        let sent = self.send(Some(related), frame.to_string());
        let mut pending = PendingCall {
            table: Arc::clone(self),
            key,
            related: related.clone(),
            done: false,
        };
        Box::pin(async move {
            if !sent {
                pending.disarm();
                pending
                    .table
                    .calls
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&pending.key);
                return Err(CallError::Closed("no stream open to the client".into()));
            }
            match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(outcome)) => {
                    pending.disarm();
                    outcome
                }
                Ok(Err(_)) => Err(CallError::Closed("the session ended".into())),
                Err(_) => Err(CallError::Timeout(timeout)),
            }
        })
    }

    fn abandoned(&self, related: &Id) {
        // Dropping the stream's sender ends the SSE response, with no
        // result: the request was cancelled.
        self.by_request
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(related);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_accept_headers() {
        assert_eq!(host_of("localhost:8000"), "localhost");
        assert_eq!(host_of("[::1]:8000"), "[::1]");
        assert_eq!(host_of("example.com"), "example.com");
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream;q=0.9"),
        );
        assert!(accepts(&headers, "application/json"));
        assert!(accepts(&headers, "text/event-stream"));
        assert!(!accepts(&headers, "text/html"));
        headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        assert!(accepts(&headers, "text/event-stream"));
    }
}
