//! The client side of Streamable HTTP: the session's peer runs over a
//! connection whose outgoing frames are each POSTed to the endpoint and
//! whose incoming frames are what the replies carry (a JSON body, or the
//! events of an SSE stream), plus the standalone GET stream.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use http_body_util::BodyExt;
use jrpc::codec::Inbound;
use jrpc::transport::{Connection, OutFrame, OutKind};
use jrpc::{Error, Id};
use tokio::sync::mpsc;

use super::endpoint::Endpoint;

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
    pub(crate) fn connect(http: Endpoint) -> (Connection, Arc<HttpSession>) {
        let (tx, rx) = mpsc::channel::<io::Result<Inbound>>(256);
        let session = Arc::new(HttpSession {
            http,
            session: Mutex::new(None),
            initialize: Mutex::new(None),
            version: Mutex::new(None),
            incoming: tx,
            ended: std::sync::atomic::AtomicBool::new(false),
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
                    tokio::spawn(posting.post(frame, true));
                } else {
                    // Notifications and replies are taken at once (`202`),
                    // and their order counts (`notifications/initialized`
                    // before the first request): posted in turn.
                    posting.post(frame, true).await;
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

    /// One request could not be carried (its connection failed, the server
    /// behind a load balancer went away, a new session could not be
    /// started): its call fails as a transport failure, and the session
    /// goes on — the next request is sent, and a server that no longer
    /// knows the session answers `404`, which starts a new one.
    async fn lost(&self, id: Option<&Id>, why: String) {
        match id {
            Some(id) => {
                let ids: Box<[Id]> = Box::new([id.clone()]);
                self.deliver(Ok(Inbound::Undelivered {
                    ids,
                    reason: why.into(),
                }))
                .await;
            }
            None => tracing::debug!(%why, "a notification to the server was lost"),
        }
    }

    /// POSTs one message and delivers what the reply carries. When the
    /// server has ended the session (404), a new one is initialized and the
    /// message sent again, once (`retry`).
    async fn post(self: Arc<Self>, frame: OutFrame, retry: bool) {
        let id = match frame.read_kind() {
            OutKind::Request(id) => Some(id),
            _ => None,
        };
        let frame = frame.bytes;
        if id.is_some() && is_initialize(&frame) {
            self.initialize
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(frame.clone());
        }
        let mut headers = self.headers("application/json, text/event-stream");
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let response = match self.http.send(Method::POST, headers, frame.clone(), None).await {
            Ok(response) => response,
            Err(e) => {
                #[cfg(feature = "oauth")]
                if let Some(oauth) = e.transport_error::<super::oauth::OAuthError>() {
                    *self.auth_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(oauth.clone());
                }
                let why = match &e {
                    jrpc::CallError::Io(io) => io.to_string(),
                    other => other.to_string(),
                };
                return self.lost(id.as_ref(), format!("cannot POST: {why}")).await;
            }
        };
        if let Some(session) = response.headers().get(SESSION_HEADER) {
            let mut known = self.session.lock().unwrap_or_else(|p| p.into_inner());
            if known.is_none() {
                *known = Some(session.clone());
            }
        }
        let status = response.status();
        let sse = is_sse(response.headers());
        match status {
            StatusCode::ACCEPTED => {}
            StatusCode::NOT_FOUND if self.session.lock().unwrap_or_else(|p| p.into_inner()).is_some() => {
                if retry && self.reinitialize().await {
                    let kind = id.map_or(OutKind::Unknown, OutKind::Request);
                    return Box::pin(self.post(OutFrame::new(frame, kind), false)).await;
                }
                self.lost(
                    id.as_ref(),
                    "the server ended the session (404) and a new one could not be started".into(),
                )
                .await;
            }
            status if status.is_success() && sse => {
                let mut events = super::sse::SseParser::default();
                let answered = self
                    .read_events(response.into_body(), id.as_ref(), &mut events)
                    .await;
                if let (false, Some(id)) = (answered, &id) {
                    self.resume(id, &mut events).await;
                }
            }
            status if status.is_success() => match response.into_body().collect().await {
                Ok(body) => {
                    let body = body.to_bytes();
                    if !body.is_empty() {
                        self.deliver(Ok(Inbound::Frame(body))).await;
                    }
                }
                Err(e) => self.lost(id.as_ref(), format!("reading the reply: {e}")).await,
            },
            status => {
                // A refusal: answer the request it carried, so that its
                // caller learns why (with the server's JSON-RPC error when
                // the body has one).
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                // A refused token (401, 403) or a server that cannot serve
                // now (429, 503) is the HTTP layer's refusal:
                // the call fails as a transport failure, as for every other
                // HTTP client of jrpc, not as an error of the method.
                if let (Some(id), true) = (&id, matches!(status.as_u16(), 401 | 403 | 429 | 503)) {
                    let shown = String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned();
                    let reason = format!(
                        "HTTP {status}{}",
                        if shown.is_empty() {
                            String::new()
                        } else {
                            format!(": {shown}")
                        }
                    );
                    let ids: Box<[jrpc::Id]> = Box::new([id.clone()]);
                    self.deliver(Ok(Inbound::Undelivered {
                        ids,
                        reason: reason.into(),
                    }))
                    .await;
                    return;
                }
                if let Some(id) = id {
                    let error = serde_json::from_slice::<serde_json::Value>(&body)
                        .ok()
                        .and_then(|v| v.get("error").cloned())
                        .unwrap_or_else(
                            || serde_json::json!({"code": -32603, "message": format!("HTTP {status}")}),
                        );
                    let reply = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": error});
                    self.deliver(Ok(Inbound::Frame(reply.to_string().into()))).await;
                }
            }
        }
    }

    /// Starts a new session with the `initialize` this one began with;
    /// whether it worked. Its answer is not the peer's to see.
    async fn reinitialize(self: &Arc<Self>) -> bool {
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
            tokio::spawn(Arc::clone(self).listen());
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
            self.read_events(body, None, &mut events).await;
            // A stream that gave something resets the count.
            failures = if events.seen() > seen { 1 } else { failures + 1 };
            if events.last_id().is_none() {
                // Nothing to resume from: the server does not keep events.
                return;
            }
            tokio::time::sleep(Duration::from_millis(events.retry().unwrap_or(DEFAULT_RETRY_MS))).await;
            next = self.open_stream(events.last_id()).await;
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

    /// A request's stream broke before its reply: after the server's
    /// `retry` hint, its events are asked for again from the last one seen
    /// (a GET with `Last-Event-ID`), up to [`MAX_RESUMES`] times. When that
    /// cannot work, the request gets an error reply (not a wait for its
    /// timeout).
    async fn resume(&self, id: &Id, events: &mut super::sse::SseParser) {
        for _ in 0..MAX_RESUMES {
            if events.last_id().is_none() || self.ended.load(std::sync::atomic::Ordering::Acquire) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(events.retry().unwrap_or(DEFAULT_RETRY_MS))).await;
            let Some(body) = self.open_stream(events.last_id()).await else {
                break;
            };
            if self.read_events(body, Some(id), events).await {
                return;
            }
        }
        let error = Error::internal_error()
            .with_data("the server's stream ended before the reply, and could not be resumed");
        let reply = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": error});
        self.deliver(Ok(Inbound::Frame(reply.to_string().into()))).await;
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

    /// Delivers each event of an SSE body as a frame, until it ends;
    /// whether the reply to `awaiting` was among them.
    async fn read_events(
        &self,
        mut body: jrpc::client::ResponseBody,
        awaiting: Option<&Id>,
        events: &mut super::sse::SseParser,
    ) -> bool {
        let mut answered = false;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { break };
            let Ok(data) = frame.into_data() else { continue };
            for event in events.feed(&data) {
                if let Some(id) = awaiting {
                    answered = answered || is_reply_to(&event.data, id);
                }
                self.deliver(Ok(Inbound::Frame(event.data.into()))).await;
            }
            if answered {
                // The request's stream has nothing more to say: its end is
                // read so that the connection is kept.
                body.release();
                return true;
            }
        }
        answered
    }
}

/// Whether `message` is the reply to the request `id` (a message with
/// that id and no method).
fn is_reply_to(message: &str, id: &Id) -> bool {
    #[derive(serde::Deserialize)]
    struct Peek {
        #[serde(default)]
        method: Option<serde::de::IgnoredAny>,
        #[serde(default)]
        id: Option<Id>,
    }
    serde_json::from_str::<Peek>(message).is_ok_and(|p| p.method.is_none() && p.id.as_ref() == Some(id))
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
