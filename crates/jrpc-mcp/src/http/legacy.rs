//! Legacy Streamable HTTP (2025-11-25 and before): sessions opened by
//! `initialize`, each served by a peer over an in-memory connection whose
//! incoming frames are the POSTed messages and whose outgoing frames go out
//! on the session's streams: each request's own, and the standalone GET
//! stream. The server may send the client requests (sampling, elicitation,
//! roots) on a request's stream; their answers come back as POSTs.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{header, HeaderMap, HeaderValue, Request, Response, StatusCode};
use jrpc::codec::Inbound;
use jrpc::message::RawValue;
use jrpc::peer::Peer;
use jrpc::server::http::route::{self, RouteBody, RouteContext};
use jrpc::server::http::{sse, HttpBody};
use jrpc::transport::Connection;
use jrpc::{CallError, Error, Id};
use tokio::sync::{mpsc, oneshot};

use super::{accepted, accepts, json_body, refuse, Refusal, StreamableHttp, SESSION_HEADER, VERSION_HEADER};
use crate::server::RequestOutbound;
use crate::types::LEGACY_PROTOCOL_VERSIONS;

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

impl StreamableHttp {
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
    pub(super) fn sweep(&self) {
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

    pub(super) async fn legacy_post(
        &self,
        headers: HeaderMap,
        body: Bytes,
        cx: RouteContext,
    ) -> Response<RouteBody> {
        if let Some(version) = headers.get(VERSION_HEADER) {
            let known = version
                .to_str()
                .is_ok_and(|v| LEGACY_PROTOCOL_VERSIONS.contains(&v));
            if !known {
                return Refusal::bad_request("unsupported MCP-Protocol-Version").into_response();
            }
        }
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
    pub(super) fn event_stream(
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

    pub(super) fn get(&self, request: Request<HttpBody>, cx: RouteContext) -> Response<RouteBody> {
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

    pub(super) fn delete(&self, headers: &HeaderMap) -> Response<RouteBody> {
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
        let id = crate::server::random_id();
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

async fn json_reply(mut replies: mpsc::UnboundedReceiver<String>) -> Response<RouteBody> {
    match replies.recv().await {
        Some(reply) => json_body(reply),
        None => refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            Error::internal_error().with_data("the session ended before answering"),
        ),
    }
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

/// One client's session.
pub(super) struct HttpSession {
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
