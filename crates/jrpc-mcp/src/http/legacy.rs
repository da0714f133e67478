//! Legacy Streamable HTTP (2025-11-25 and before): sessions opened by
//! `initialize`, each served by a peer over an in-memory connection whose
//! incoming frames are the POSTed messages and whose outgoing frames go out
//! on the session's streams: each request's own, and the standalone GET
//! stream. The server may send the client requests (sampling, elicitation,
//! roots) on a request's stream; their answers come back as POSTs.

use std::io;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::StreamExt;
use http::{header, HeaderMap, HeaderValue, Request, Response, StatusCode};
use jrpc::codec::Inbound;
use jrpc::dispatch::response_frame;
use jrpc::message::{parse_frame, Frame, Incoming, Limits, NotificationRef, RawValue, RequestRef};
use jrpc::middleware::Call;
use jrpc::server::http::route::{self, RouteBody, RouteContext};
use jrpc::server::http::{sse, HttpBody};
use jrpc::transport::{Connection, OutFrame};
use jrpc::{Error, Id};
use serde::de::IgnoredAny;
use serde::Deserialize;
use tokio::sync::mpsc;

use super::session::HttpSession;
use super::streams::{Listener, Message, StreamTable};
use super::{accepted, accepts, refuse, Caller, Refusal, StreamableHttp, SESSION_HEADER, VERSION_HEADER};
use crate::server::RequestOutbound;
use crate::types::LEGACY_PROTOCOL_VERSIONS;

/// What a POSTed message is.
enum Posted<'a> {
    /// A request, to serve.
    Request(RequestRef<'a>),
    /// A notification, to serve; `None` for one the parser refuses (no one
    /// is told: a notification gets no answer).
    Notification(Option<NotificationRef<'a>>),
    /// The client's answer to a request of the server's.
    Response { id: Id },
    /// Not a valid request, but with a method and an id as one has:
    /// answered under that id with what is wrong.
    Invalid { id: Id, method: String, error: Error },
}

/// What classifying a message reads of it: borrowed, the rest skipped.
#[derive(Deserialize)]
struct Shape<'a> {
    #[serde(default, borrow)]
    method: Option<&'a RawValue>,
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    result: bool,
    #[serde(default, deserialize_with = "present")]
    error: bool,
}

/// A member that is there, whatever its value (`null` included).
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    IgnoredAny::deserialize(deserializer).map(|_| true)
}

fn classify(body: &[u8]) -> Result<Posted<'_>, Refusal> {
    // Read as the session's peer reads what it serves (the usual request
    // takes the parser's fast path). Only what the parser refuses is read
    // again below, more leniently, to say what it is.
    let refused = match parse_frame(body, &Limits::default()) {
        Ok(Frame::Single(Incoming::Request(request))) => return Ok(Posted::Request(request)),
        Ok(Frame::Single(Incoming::Notification(notification))) => {
            return Ok(Posted::Notification(Some(notification)))
        }
        Ok(Frame::Single(Incoming::Response(response))) => return Ok(Posted::Response { id: response.id }),
        Ok(Frame::Single(Incoming::Invalid(invalid))) => Some(invalid),
        _ => None,
    };
    let parse_error = |e: serde_json::Error| {
        Refusal(
            StatusCode::BAD_REQUEST,
            Error::parse_error().with_data(&e.to_string()),
        )
    };
    // Only an object is a message (a struct would also read an array).
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => {}
        Some(b'[') => {
            serde_json::from_slice::<IgnoredAny>(body).map_err(parse_error)?;
            return Err(Refusal::bad_request(
                "batches are not supported: send one message per request",
            ));
        }
        _ => {
            serde_json::from_slice::<IgnoredAny>(body).map_err(parse_error)?;
            return Err(Refusal::bad_request("a message is a JSON object"));
        }
    }
    let shape: Shape<'_> = serde_json::from_slice(body).map_err(parse_error)?;
    // An id as the peer reads it, its text kept: the reply comes back
    // under the same id (a number read as a float would not match it).
    let id = shape
        .id
        .map(|id| Id::from_raw(id).ok_or_else(|| Refusal::bad_request("bad id")))
        .transpose()?;
    // A method that is not a string is no method.
    let method = shape
        .method
        .and_then(|m| serde_json::from_str::<std::borrow::Cow<'_, str>>(m.get()).ok());
    match (method, id) {
        (Some(method), Some(id)) => {
            // The parser's reading of it: the error it is answered with.
            let (id, error) = match refused {
                Some(invalid) if !invalid.id.is_null() => (invalid.id, invalid.error),
                Some(invalid) => (id, invalid.error),
                None => (id, Error::invalid_request()),
            };
            Ok(Posted::Invalid {
                id,
                method: method.into_owned(),
                error,
            })
        }
        (Some(_), None) => Ok(Posted::Notification(None)),
        (None, Some(id)) if shape.result || shape.error => Ok(Posted::Response { id }),
        _ => Err(Refusal::bad_request(
            "not a JSON-RPC request, notification or response",
        )),
    }
}

impl StreamableHttp {
    /// The session a request names, when `caller` is the one who opened it
    /// (else it is as unknown as an id never given out).
    fn session(&self, headers: &HeaderMap, caller: Option<&Caller>) -> Result<Arc<HttpSession>, Refusal> {
        let caller = caller.and_then(Caller::name);
        let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
            return Err(Refusal::bad_request("missing Mcp-Session-Id: initialize first"));
        };
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let session = sessions
            .get(id)
            .filter(|s| s.owner.as_deref() == caller)
            .cloned()
            .ok_or_else(|| {
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
        caller: Option<Caller>,
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
        let opens = match &posted {
            Posted::Request(request) => request.method == "initialize",
            Posted::Invalid { method, .. } => method == "initialize",
            _ => false,
        };
        let new_session = opens && !headers.contains_key(SESSION_HEADER);
        let session = if new_session {
            match self.open_session(caller) {
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
            match self.session(&headers, caller.as_ref()) {
                Ok(session) => session,
                Err(refusal) => return refusal.into_response(),
            }
        };
        let mut response = match posted {
            Posted::Notification(notification) => {
                if let Some(notification) = notification {
                    let params = notification.params.map(RawValue::to_owned);
                    session.notify(Call::notification(&*notification.method, params));
                }
                return accepted();
            }
            Posted::Response { id } => {
                if !session.streams.answer(&id, &body) {
                    session.deliver(body).await;
                }
                return accepted();
            }
            Posted::Invalid { id, error, .. } => route::json_response(response_frame(&id, &Err(error))),
            Posted::Request(request) => {
                let params = request.params.map(RawValue::to_owned);
                self.serve_request(&session, request.id, &request.method, params, &cx)
                    .await
            }
        };
        if new_session {
            if let Ok(value) = HeaderValue::from_str(&session.id) {
                response.headers_mut().insert(SESSION_HEADER, value);
            }
        }
        response
    }

    /// A request of the session's client, served; its reply: a JSON body,
    /// or an SSE stream of what its handler says and then its response.
    async fn serve_request(
        &self,
        session: &Arc<HttpSession>,
        id: Id,
        method: &str,
        params: Option<Box<RawValue>>,
        cx: &RouteContext,
    ) -> Response<RouteBody> {
        if session.streams.in_flight() >= MAX_IN_FLIGHT {
            let busy = Error::server_busy().with_data("too many requests in flight in this session");
            return route::json_response(response_frame(&id, &Err(busy)));
        }
        // Requests come after the notifications before them (not before
        // the stream is open: a POST dropped while it waits leaves nothing).
        session.after_notifications().await;
        let Some(stream) = session.streams.open(&id) else {
            return Refusal::bad_request(
                "a request with this id is in flight in this session: ids must be unique in a session",
            )
            .into_response();
        };
        let json = !streams_messages(method) || self.options.json_response;
        if let Some(reply) = session.serve(Call::request(id.clone(), method, params)) {
            // Answered at once: with nothing said before, the reply is the
            // body and its stream is gone; else it ends its stream.
            if json && session.streams.forget_unused(stream, &id) {
                return route::json_response(reply);
            }
            session.streams.reply(&id, &reply);
        }
        let listener = session.streams.listen(stream);
        if json {
            self.json_unless_streamed(listener, &session.streams, cx).await
        } else {
            self.event_stream(&session.streams, listener, None, true, cx)
        }
    }

    /// An SSE stream of `first`, then the rest of `listener`'s messages;
    /// on a resumable stream, each with its event id, after a first event
    /// (when `prime`) that carries only an id and the reconnection delay.
    pub(super) fn event_stream(
        &self,
        streams: &StreamTable,
        mut listener: Listener,
        first: Option<Message>,
        prime: bool,
        cx: &RouteContext,
    ) -> Response<RouteBody> {
        let resumable = streams.resumable();
        let event = move |message: Message| {
            let event = sse::Event::data(message.data.as_ref());
            if resumable {
                event.id(message.id)
            } else {
                event
            }
        };
        let priming = (resumable && prime).then(|| {
            sse::Event::data("")
                .id(format!("{}-0", listener.stream))
                .retry(self.options.retry)
        });
        // What has come already; a stream that has ended (a request
        // answered at once, a finished stream resumed) is one body.
        let mut ready: Vec<Message> = first.into_iter().collect();
        loop {
            match listener.try_next() {
                Ok(message) => ready.push(message),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    let events = priming.into_iter().chain(ready.into_iter().map(event));
                    return super::complete_event_stream(events);
                }
            }
        }
        let stop = cx.shutdown().clone();
        let rest = futures_util::stream::unfold((listener, stop), move |(mut listener, stop)| async move {
            tokio::select! {
                message = listener.next() => message.map(|m| (event(m), (listener, stop))),
                () = stop.cancelled() => None,
            }
        });
        let head = futures_util::stream::iter(priming.into_iter().chain(ready.into_iter().map(event)));
        super::event_stream(head.chain(rest), self.options.keep_alive)
    }

    /// The reply as a JSON body when it is the handler's first message;
    /// otherwise an SSE stream that starts with that message (a handler
    /// expected to say nothing may log all the same: its reply is not
    /// lost), or that ends at once (cancelled: no reply).
    async fn json_unless_streamed(
        &self,
        mut listener: Listener,
        streams: &StreamTable,
        cx: &RouteContext,
    ) -> Response<RouteBody> {
        let first = tokio::select! {
            first = listener.next() => first,
            () = cx.shutdown().cancelled() => None,
        };
        match first {
            Some(reply) if reply.reply => {
                streams.forget(listener.stream);
                route::json_response(Bytes::copy_from_slice(reply.data.as_bytes()))
            }
            first => self.event_stream(streams, listener, first, true, cx),
        }
    }

    /// The standalone stream (GET), or the rest of a broken one from after
    /// `Last-Event-ID`.
    pub(super) fn get(
        &self,
        request: Request<HttpBody>,
        cx: RouteContext,
        caller: Option<&Caller>,
    ) -> Response<RouteBody> {
        if !accepts(request.headers(), &["text/event-stream"]) {
            return refuse(
                StatusCode::NOT_ACCEPTABLE,
                Error::invalid_request().with_data("Accept must include text/event-stream"),
            );
        }
        let session = match self.session(request.headers(), caller) {
            Ok(session) => session,
            Err(refusal) => return refusal.into_response(),
        };
        let last = request
            .headers()
            .get("last-event-id")
            .and_then(|v| v.to_str().ok());
        let Some(last) = last else {
            let listener = session.streams.open_standalone();
            return self.event_stream(&session.streams, listener, None, true, &cx);
        };
        match session.streams.resume(last) {
            Some(listener) => self.event_stream(&session.streams, listener, None, false, &cx),
            None => refuse(
                StatusCode::NOT_FOUND,
                Error::invalid_request()
                    .with_data(&format!("no stream to resume after event {last:?}: it is gone")),
            ),
        }
    }

    pub(super) fn delete(&self, headers: &HeaderMap, caller: Option<&Caller>) -> Response<RouteBody> {
        let session = match self.session(headers, caller) {
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
    fn open_session(&self, caller: Option<Caller>) -> Option<Arc<HttpSession>> {
        self.sweep();
        let full = self.sessions.lock().unwrap_or_else(|p| p.into_inner()).len() >= self.options.max_sessions;
        if full {
            return None;
        }
        let id = crate::server::random_id();
        let streams = Arc::new(StreamTable::new(self.options.store_limits()));
        let (incoming_tx, incoming_rx) = mpsc::channel::<io::Result<Inbound>>(64);
        let incoming =
            futures_util::stream::unfold(
                incoming_rx,
                |mut rx| async move { rx.recv().await.map(|m| (m, rx)) },
            );
        let routed = Arc::clone(&streams);
        let outgoing = futures_util::sink::unfold((), move |(), frame: OutFrame| {
            routed.route(&frame);
            async { Ok::<_, io::Error>(()) }
        });
        let info = jrpc::router::ConnectionInfo {
            transport: "mcp-http",
            peer_addr: None,
            local_addr: None,
        };
        let outbound: Arc<dyn RequestOutbound> = Arc::new(Arc::clone(&streams));
        let connection = Connection::with_kinds(incoming, Box::pin(outgoing), info);
        let peer = self
            .server
            .connect_with(connection, Some(outbound), |mut builder| {
                if let Some(caller) = &caller {
                    if let Some(identity) = &caller.identity {
                        builder = builder.extension(identity.clone());
                    }
                    builder = builder.extension(caller.scopes.clone());
                }
                builder
            });
        let session = Arc::new(HttpSession {
            id: id.clone(),
            incoming: incoming_tx,
            peer,
            streams,
            last_seen: Mutex::new(tokio::time::Instant::now()),
            owner: caller.and_then(|c| c.identity.map(|i| i.name().to_owned())),
            notifying: tokio::sync::watch::Sender::new(0),
        });
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, Arc::clone(&session));
        Some(session)
    }
}

/// The most requests a session has in flight at once (its peer's own
/// bound on the requests it reads: 8 times the 128 it runs at once).
const MAX_IN_FLIGHT: usize = jrpc::peer::Peer::DEFAULT_MAX_IN_FLIGHT * 8;

/// Requests whose handlers may send the client messages before they answer
/// get an SSE stream; the rest a JSON body.
fn streams_messages(method: &str) -> bool {
    matches!(method, "tools/call" | "resources/read" | "prompts/get")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posted_messages_are_classified() {
        let kind = |body: &str| match classify(body.as_bytes()) {
            Ok(Posted::Request(request)) => format!("request {} {}", request.id, request.method),
            Ok(Posted::Notification(Some(_))) => "notification".to_owned(),
            Ok(Posted::Notification(None)) => "refused notification".to_owned(),
            Ok(Posted::Response { id }) => format!("response {id}"),
            Ok(Posted::Invalid { id, method, error }) => format!("invalid {id} {method} {}", error.code()),
            Err(Refusal(status, error)) => format!("{} {}", status.as_u16(), error.code()),
        };
        let cases = [
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":[1,{"y":2}]}}"#,
                "request 1 tools/list",
            ),
            // What the parser refuses, with an id, is answered under it.
            (r#" {"method":"a\u0062","id":"s"}"#, r#"invalid "s" ab -32600"#),
            (
                r#"{"jsonrpc":"2.0","id":6,"method":"m","params":3}"#,
                "invalid 6 m -32600",
            ),
            (
                r#"{"jsonrpc":"2.0","method":"a\u0062","id":"s"}"#,
                r#"request "s" ab"#,
            ),
            (
                r#"{"jsonrpc":"2.0","id":123456789012345678901234,"method":"m"}"#,
                "request 123456789012345678901234 m",
            ),
            (r#"{"jsonrpc":"2.0","method":"m","params":[1]}"#, "notification"),
            // An id's text is kept as the peer keeps it, with or without
            // the version member.
            (r#"{"jsonrpc":"2.0","id":1e2,"method":"m"}"#, "request 1e2 m"),
            (r#"{"id":1e2,"method":"m"}"#, "invalid 1e2 m -32600"),
            (r#"{"id":-0,"result":1}"#, "response -0"),
            (r#"{"method":"m"}"#, "refused notification"),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                "notification",
            ),
            (r#"{"jsonrpc":"2.0","id":3,"result":null}"#, "response 3"),
            (
                r#"{"jsonrpc":"2.0","id":4,"error":{"code":1,"message":"m"}}"#,
                "response 4",
            ),
            // A method that is not a string is no method.
            (r#"{"jsonrpc":"2.0","id":5,"method":7}"#, "400 -32600"),
            (r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#, "400 -32600"),
            (r#"{"jsonrpc":"2.0"}"#, "400 -32600"),
            (r#"[{"jsonrpc":"2.0","id":1,"method":"x"}]"#, "400 -32600"),
            ("17", "400 -32600"),
            (r#"{"id":1,"method":"#, "400 -32700"),
            ("[1,", "400 -32700"),
        ];
        for (body, expected) in cases {
            assert_eq!(kind(body), expected, "{body}");
        }
    }
}
