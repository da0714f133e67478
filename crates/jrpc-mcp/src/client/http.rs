//! The client side of a legacy (2025-11-25) Streamable HTTP session. The
//! client's requests are POSTed from their callers' tasks and their
//! answers read there ([`HttpSession::call`]), the server's notifications
//! in a request's stream served by the session's peer before its answer.
//! The peer runs over a connection whose outgoing frames (the handshake,
//! notifications, answers to the server's requests) are each POSTed to
//! the endpoint and whose incoming frames are the server's other messages:
//! its requests, and the standalone GET stream.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use http_body_util::BodyExt;
use jrpc::client::{Client, ResponseBody};
use jrpc::codec::Inbound;
use jrpc::message::{parse_frame, Frame, Incoming, Limits, RawValue};
use jrpc::middleware::Call;
use jrpc::peer::Peer;
use jrpc::transport::{Connection, OutFrame, OutKind};
use jrpc::{CallError, Error, Id};
use tokio::sync::mpsc;

use super::deadline::Deadline;
use super::endpoint::Endpoint;
use super::sent::Sent;

/// The session's state shared by its POSTs and its GET stream.
pub(crate) struct HttpSession {
    http: Endpoint,
    session: Mutex<Option<HeaderValue>>,
    /// The `initialize` request, to start a new session with when the
    /// server has ended ours (404).
    initialize: Mutex<Option<Bytes>>,
    version: Mutex<Option<HeaderValue>>,
    incoming: mpsc::Sender<io::Result<Inbound>>,
    /// Set once the session is deleted: broken streams are not resumed.
    ended: std::sync::atomic::AtomicBool,
    /// The next id of a request sent from its caller's task. The peer's
    /// own ids count from 1; these from 2^32 (well within a JavaScript
    /// server's safe integers), so that the two never meet in a session.
    next_id: AtomicU64,
    /// How long such a request may take when its caller says nothing.
    timeout: Duration,
    /// Why a request could not be authorized, when that ended the session
    /// (the caller sees it, not just a closed connection).
    #[cfg(feature = "oauth")]
    auth_failure: Mutex<Option<super::oauth::OAuthError>>,
}

/// How many times in a row a broken stream is resumed before giving up.
const MAX_RESUMES: u32 = 5;

/// How long to wait before resuming a stream when the server gave no
/// `retry` hint.
const DEFAULT_RETRY_MS: u64 = 1_000;

const SESSION_HEADER: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";

impl HttpSession {
    /// A connection to `url` for a peer, and the session behind it.
    pub(crate) fn connect(http: Endpoint, timeout: Duration) -> (Connection, Arc<HttpSession>) {
        let (tx, rx) = mpsc::channel::<io::Result<Inbound>>(256);
        let session = Arc::new(HttpSession {
            http,
            session: Mutex::new(None),
            initialize: Mutex::new(None),
            version: Mutex::new(None),
            incoming: tx,
            ended: std::sync::atomic::AtomicBool::new(false),
            next_id: AtomicU64::new(1 << 32),
            timeout,
            #[cfg(feature = "oauth")]
            auth_failure: Mutex::new(None),
        });
        let incoming =
            futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
        let posting = Arc::clone(&session);
        let outgoing = futures_util::sink::unfold((), move |(), frame: OutFrame| {
            let posting = Arc::clone(&posting);
            async move {
                if matches!(frame.read_kind(), OutKind::Request(_)) {
                    // Each request goes in a POST of its own, answered in
                    // its own time: the peer must not wait for one reply to
                    // send the next.
                    tokio::spawn(posting.post(frame));
                } else {
                    // Notifications and replies are taken at once (`202`),
                    // and their order counts (`notifications/initialized`
                    // before the first request): posted in turn.
                    posting.post(frame).await;
                }
                Ok::<_, io::Error>(())
            }
        });
        let info = jrpc::router::ConnectionInfo {
            transport: "mcp-http",
            peer_addr: None,
            local_addr: None,
        };
        (
            Connection::with_kinds(incoming, Box::pin(outgoing), info),
            session,
        )
    }

    /// Why authorization failed, when it did.
    #[cfg(feature = "oauth")]
    pub(crate) fn auth_failure(&self) -> Option<super::oauth::OAuthError> {
        self.auth_failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Sends the protocol version on every request from now on.
    pub(crate) fn set_version(&self, version: &str) {
        *self.version.lock().unwrap_or_else(|p| p.into_inner()) = HeaderValue::from_str(version).ok();
    }

    fn headers(&self, accept: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static(accept));
        if let Some(session) = self.session.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            headers.insert(SESSION_HEADER, session);
        }
        if let Some(version) = self.version.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            headers.insert(crate::headers::names::PROTOCOL_VERSION, version);
        }
        headers
    }

    async fn deliver(&self, item: io::Result<Inbound>) {
        let _ = self.incoming.send(item).await;
    }

    /// POSTs one message of the peer's. A request's answer (or why it has
    /// none) is delivered to the peer, after the other messages of its
    /// stream; a notification or a response is taken at once (`202`).
    /// When the server has ended the session (404), a new one is
    /// initialized and the message sent again, once.
    async fn post(self: Arc<Self>, frame: OutFrame) {
        if let OutKind::Request(id) = frame.read_kind() {
            // Only the peer sends `initialize`: kept to start a new
            // session with, should the server end this one.
            if is_initialize(&frame.bytes) {
                self.initialize
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(frame.bytes.clone());
            }
            let outcome = self.exchange(&id, frame.bytes, None, Notes::Deliver, true).await;
            let item = match outcome {
                Ok(result) => Inbound::Frame(reply_frame(&id, Ok(&result))),
                Err(CallError::Rpc(error)) => Inbound::Frame(reply_frame(&id, Err(error))),
                Err(other) => {
                    let reason = match other.transport_error::<jrpc::transport::Undelivered>() {
                        Some(undelivered) => undelivered.reason.clone(),
                        None => other.to_string(),
                    };
                    Inbound::Undelivered {
                        ids: Box::new([id]),
                        reason: reason.into(),
                    }
                }
            };
            return self.deliver(Ok(item)).await;
        }
        self.post_message(frame.bytes).await;
    }

    /// POSTs a notification or a response, which the server takes at once
    /// (`202`); a new session and one retry when the server has ended
    /// this one (404).
    pub(crate) async fn post_message(self: &Arc<Self>, frame: Bytes) {
        let mut retry = true;
        loop {
            let response = match self.send_post(frame.clone(), None).await {
                Ok(response) => response,
                Err(why) => return tracing::debug!(%why, "a message to the server was lost"),
            };
            if response.status() == StatusCode::NOT_FOUND && self.has_session() {
                if std::mem::take(&mut retry) && self.reinitialize().await {
                    continue;
                }
                return tracing::debug!("the server ended the session (404): a message to it was lost");
            }
            // Read to the end, so that the connection is kept.
            let _ = response.into_body().collect().await;
            return;
        }
    }

    /// Sends the request `id` (its `frame`) from its caller's task and
    /// reads its answer there, within `timeout`: the server's notifications
    /// in its stream are served by the peer before the answer is returned
    /// (progress before the result), its other messages go to the peer.
    /// Dropped before the answer (or timed out), the request is cancelled
    /// (`notifications/cancelled`, through the peer).
    pub(crate) async fn call(
        self: &Arc<Self>,
        client: &Client,
        method: &str,
        params: &Sent<'_>,
        timeout: Option<Duration>,
    ) -> Result<Box<RawValue>, CallError> {
        let number = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = params.request_frame(number, method)?;
        super::modern_http::trace(">", &body);
        let id = Id::from(number);
        let peer = client.peer();
        let notes = peer.as_ref().map_or(Notes::Deliver, Notes::Serve);
        let mut unanswered = Unanswered {
            client,
            id: number,
            answered: false,
        };
        let deadline = Deadline::after(timeout.unwrap_or(self.timeout));
        let work = std::pin::pin!(self.exchange(&id, Bytes::from(body), Some(&deadline), notes, true));
        let outcome = deadline.run(work).await;
        unanswered.answered = !matches!(outcome, Err(CallError::Timeout(_)));
        outcome
    }

    /// POSTs `frame` with the session's headers; why not, when it could
    /// not be sent.
    async fn send_post(
        &self,
        frame: Bytes,
        deadline: Option<&Deadline>,
    ) -> Result<http::Response<ResponseBody>, String> {
        let mut headers = self.headers("application/json, text/event-stream");
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let response = match self.http.send(Method::POST, headers, frame, deadline).await {
            Ok(response) => response,
            Err(e) => {
                #[cfg(feature = "oauth")]
                if let Some(oauth) = e.transport_error::<super::oauth::OAuthError>() {
                    *self.auth_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(oauth.clone());
                }
                let why = match &e {
                    CallError::Io(io) => io.to_string(),
                    other => other.to_string(),
                };
                return Err(format!("cannot POST: {why}"));
            }
        };
        if let Some(session) = response.headers().get(SESSION_HEADER) {
            let mut known = self.session.lock().unwrap_or_else(|p| p.into_inner());
            if known.is_none() {
                *known = Some(session.clone());
            }
        }
        Ok(response)
    }

    fn has_session(&self) -> bool {
        self.session.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// POSTs the request `id` (its `frame`) and reads its answer: a JSON
    /// body, or the event of an SSE stream (resumed when it breaks) whose
    /// other messages are handed on as `notes` says. When the server has
    /// ended the session (404), a new one is initialized and the request
    /// sent again, once (`retry`). A request that could not be carried
    /// fails as a transport failure, and the session goes on: the next
    /// request is sent (behind a load balancer, to a live server).
    async fn exchange(
        self: &Arc<Self>,
        id: &Id,
        frame: Bytes,
        deadline: Option<&Deadline>,
        notes: Notes<'_>,
        retry: bool,
    ) -> Result<Box<RawValue>, CallError> {
        let response = self
            .send_post(frame.clone(), deadline)
            .await
            .map_err(undelivered)?;
        let status = response.status();
        if status == StatusCode::NOT_FOUND && self.has_session() {
            if retry && self.reinitialize().await {
                return Box::pin(self.exchange(id, frame, deadline, notes, false)).await;
            }
            return Err(undelivered(
                "the server ended the session (404) and a new one could not be started".into(),
            ));
        }
        if status.is_success() && is_sse(response.headers()) {
            let mut events = super::sse::SseParser::default();
            let mut body = Some(response.into_body());
            let mut resumes = 0;
            while let Some(stream) = body.take() {
                if let Some(outcome) = self.read_answer(stream, id, &mut events, notes).await {
                    return outcome;
                }
                // Broken before the answer: asked for again from the last
                // event seen.
                resumes += 1;
                if resumes <= MAX_RESUMES {
                    body = self.reopen(&events).await;
                }
            }
            let error = Error::internal_error()
                .with_data("the server's stream ended before the reply, and could not be resumed");
            return Err(CallError::Rpc(error));
        }
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| undelivered(format!("reading the reply: {e}")))?
            .to_bytes();
        // A refused token (401, 403) or a server that cannot serve now
        // (429, 503) is the HTTP layer's refusal: the call fails as a
        // transport failure, as for every other HTTP client of jrpc, not
        // as an error of the method.
        if matches!(status.as_u16(), 401 | 403 | 429 | 503) {
            let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(512)]).into_owned();
            let shown = if shown.is_empty() {
                String::new()
            } else {
                format!(": {shown}")
            };
            return Err(undelivered(format!("HTTP {status}{shown}")));
        }
        super::modern_http::trace("<", &bytes);
        match parse_frame(&bytes, &Limits::default()) {
            Ok(Frame::Single(Incoming::Response(response)))
                if response.id == *id || response.id.is_null() =>
            {
                super::modern_http::answered(response)
            }
            _ if status.is_success() => Err(CallError::Protocol(
                format!("HTTP {status} without the answer to request {id}").into(),
            )),
            // A refusal: the server's JSON-RPC error when the body has one.
            _ => {
                let error = serde_json::from_slice::<serde_json::Value>(&bytes)
                    .ok()
                    .and_then(|v| v.get("error").cloned())
                    .and_then(|e| serde_json::from_value::<Error>(e).ok())
                    .unwrap_or_else(|| Error::new(-32603, format!("HTTP {status}")));
                Err(CallError::Rpc(error))
            }
        }
    }

    /// Starts a new session with the `initialize` this one began with;
    /// whether it worked. Its answer is not the peer's to see.
    async fn reinitialize(self: &Arc<Self>) -> bool {
        // On a task of its own: a caller that stops waiting (its call
        // dropped, or out of time) must not leave the session half made.
        tokio::spawn(Arc::clone(self).start_again())
            .await
            .unwrap_or(false)
    }

    async fn start_again(self: Arc<Self>) -> bool {
        let Some(initialize) = self.initialize.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
            return false;
        };
        *self.session.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let mut headers = self.headers("application/json, text/event-stream");
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let Ok(response) = self.http.send(Method::POST, headers, initialize, None).await else {
            return false;
        };
        let Some(session) = response.headers().get(SESSION_HEADER).cloned() else {
            return false;
        };
        if !response.status().is_success() {
            return false;
        }
        // Read the answer to the end, then say the client is ready.
        let _ = response.into_body().collect().await;
        *self.session.lock().unwrap_or_else(|p| p.into_inner()) = Some(session);
        tracing::info!("the server ended the MCP session: started a new one");
        let ready = Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        let mut headers = self.headers("application/json, text/event-stream");
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let sent = self.http.send(Method::POST, headers, ready, None).await;
        if sent.is_ok() {
            tokio::spawn(Arc::clone(&self).listen());
        }
        sent.is_ok()
    }

    /// Opens the standalone stream for the server's own messages (a server
    /// that has none answers 405). When it breaks, it is opened again from
    /// its last event (`Last-Event-ID`) after the server's `retry` hint,
    /// up to [`MAX_RESUMES`] times in a row.
    pub(crate) async fn listen(self: Arc<Self>) {
        let first = self.open_stream(None).await;
        self.listen_on(first).await;
    }

    /// Opens the standalone stream and returns once it is open (or refused),
    /// its messages read on a task of their own: what the server sends the
    /// session from then on is not missed.
    pub(crate) async fn start_listening(self: Arc<Self>) {
        // Bounded: a server that holds the stream's head back must not hold
        // the client up; then it is opened in the background.
        match tokio::time::timeout(Duration::from_secs(2), self.open_stream(None)).await {
            Ok(first) => tokio::spawn(self.listen_on(first)),
            Err(_) => tokio::spawn(self.listen()),
        };
    }

    /// Reads the standalone stream `first` opened, then reopens it from its
    /// last event whenever it breaks.
    async fn listen_on(self: Arc<Self>, first: Option<jrpc::client::ResponseBody>) {
        let mut events = super::sse::SseParser::default();
        let mut failures = 0;
        let mut next = first;
        while !self.ended.load(std::sync::atomic::Ordering::Acquire) && failures <= MAX_RESUMES {
            let Some(body) = next.take() else {
                return;
            };
            let seen = events.seen();
            self.read_events(body, &mut events).await;
            // A stream that gave something resets the count.
            failures = if events.seen() > seen { 1 } else { failures + 1 };
            // Nothing to resume from (the server keeps no events): done.
            next = self.reopen(&events).await;
        }
    }

    /// A GET for an SSE stream, from after `last_id` when given; `None`
    /// when the server offers none.
    async fn open_stream(&self, last_id: Option<&str>) -> Option<jrpc::client::ResponseBody> {
        let mut headers = self.headers("text/event-stream");
        if let Some(value) = last_id.and_then(|id| HeaderValue::from_str(id).ok()) {
            headers.insert(LAST_EVENT_ID, value);
        }
        let response = self
            .http
            .send_in_background(Method::GET, headers, Bytes::new())
            .await
            .ok()?;
        (response.status().is_success() && is_sse(response.headers())).then(|| response.into_body())
    }

    /// A stream broke: after the server's `retry` hint, its events are
    /// asked for again from the last one seen (a GET with
    /// `Last-Event-ID`); `None` when that cannot work (the server keeps
    /// no events, or the session has ended).
    async fn reopen(&self, events: &super::sse::SseParser) -> Option<ResponseBody> {
        if events.last_id().is_none() || self.ended.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(events.retry().unwrap_or(DEFAULT_RETRY_MS))).await;
        self.open_stream(events.last_id()).await
    }

    /// Ends the session on the server (best effort).
    pub(crate) async fn delete(&self) {
        self.ended.store(true, std::sync::atomic::Ordering::Release);
        if self.session.lock().unwrap_or_else(|p| p.into_inner()).is_none() {
            return;
        }
        let headers = self.headers("application/json");
        let _ = self
            .http
            .send_in_background(Method::DELETE, headers, Bytes::new())
            .await;
    }

    /// Delivers each event of an SSE body (the standalone stream) as a
    /// frame, until it ends.
    async fn read_events(&self, mut body: ResponseBody, events: &mut super::sse::SseParser) {
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { break };
            let Ok(data) = frame.into_data() else { continue };
            for event in events.feed(&data) {
                self.deliver(Ok(Inbound::Frame(event.data.into()))).await;
            }
        }
    }

    /// Reads a request's SSE stream until the answer to `id`, handing the
    /// other messages on as `notes` says; the answer, or `None` when the
    /// stream ended first.
    async fn read_answer(
        &self,
        mut body: ResponseBody,
        id: &Id,
        events: &mut super::sse::SseParser,
        notes: Notes<'_>,
    ) -> Option<Result<Box<RawValue>, CallError>> {
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { break };
            let Ok(data) = frame.into_data() else { continue };
            for event in events.feed(&data) {
                if let Some(outcome) = self.take_message(event.data, id, notes).await {
                    // The request's stream has nothing more to say: its end
                    // is read so that the connection is kept.
                    body.release();
                    return Some(outcome);
                }
            }
        }
        None
    }

    /// One message of a request's stream: its answer, or handed on (the
    /// server's notification served by the peer now, or delivered to it
    /// with the rest).
    async fn take_message(
        &self,
        message: String,
        id: &Id,
        notes: Notes<'_>,
    ) -> Option<Result<Box<RawValue>, CallError>> {
        super::modern_http::trace("<", message.as_bytes());
        match (parse_frame(message.as_bytes(), &Limits::default()), notes) {
            (Ok(Frame::Single(Incoming::Response(response))), _) if response.id == *id => {
                return Some(super::modern_http::answered(response));
            }
            // A cancellation goes with the server's requests it may name,
            // in order, to the peer's reader.
            (Ok(Frame::Single(Incoming::Notification(note))), Notes::Serve(peer))
                if note.method != "notifications/cancelled" =>
            {
                let params = note.params.map(RawValue::to_owned);
                let mut served = peer.serve_call(Call::notification(&*note.method, params));
                while served.next().await.is_some() {}
                return None;
            }
            _ => {}
        }
        self.deliver(Ok(Inbound::Frame(message.into()))).await;
        None
    }
}

/// Where the server's notifications in a request's stream go.
#[derive(Clone, Copy)]
enum Notes<'a> {
    /// To the peer's connection with every other message (a request the
    /// peer sent: its answer goes there too, after them).
    Deliver,
    /// Served by the peer at once, in order, before the answer is handed
    /// to the request's caller (progress before the result).
    Serve(&'a Peer),
}

/// A request sent from its caller's task: cancelled, through the peer,
/// unless it was answered.
struct Unanswered<'a> {
    client: &'a Client,
    id: u64,
    answered: bool,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        // Dropped outside a runtime, there is nothing to send it with.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (client, id) = (self.client.clone(), self.id);
        runtime.spawn(async move {
            let params = serde_json::json!({"requestId": id, "reason": "the caller stopped waiting"});
            let _ = client.notify("notifications/cancelled", params).await;
        });
    }
}

/// A request that could not be carried: a transport failure.
fn undelivered(reason: String) -> CallError {
    CallError::Transport(Arc::new(jrpc::transport::Undelivered { reason }))
}

/// A response frame to the request `id`, the result's text as it came.
fn reply_frame(id: &Id, outcome: Result<&RawValue, Error>) -> Bytes {
    jrpc::dispatch::response_frame(id, &outcome.map(jrpc::middleware::RawResult::from_raw))
}

fn is_sse(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

fn is_initialize(frame: &[u8]) -> bool {
    // Read only a frame that can be one: not every request of the session.
    let named = std::str::from_utf8(frame).is_ok_and(|text| text.contains("\"initialize\""));
    named
        && serde_json::from_slice::<serde_json::Value>(frame)
            .ok()
            .is_some_and(|v| v.get("method").and_then(|m| m.as_str()) == Some("initialize"))
}
