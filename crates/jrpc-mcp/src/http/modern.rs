//! Modern Streamable HTTP (2026-07-28): one POST, one request, served on its
//! own. The headers that mirror the body (`MCP-Protocol-Version`,
//! `Mcp-Method`, `Mcp-Name`, and `Mcp-Param-*` for tool parameters annotated
//! `x-mcp-header`) must match it, else `400` with `-32020`; the reply is JSON
//! when the handler says nothing before it answers, else an SSE stream of
//! the request's own notifications and then its response; closing that
//! stream cancels the request. Errors get the HTTP status the specification
//! gives their code (`400`, `404` for an unknown method).

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::{ready, Either};
use futures_util::StreamExt;
use http::{HeaderMap, HeaderName, Response, StatusCode};
use jrpc::dispatch::{call_outlet, response_frame, serve_call_with, Said, ServedCall};
use jrpc::message::codes::{INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR};
use jrpc::message::{parse_frame, parse_request_as, Frame, Incoming, Limits, RawValue};
use jrpc::middleware::{Call, RawResult};
use jrpc::server::http::route::{self, RouteBody, RouteContext};
use jrpc::server::http::sse;
use jrpc::{Error, Id};
use serde::de::IgnoredAny;
use serde::Deserialize;

use super::mcp_headers::{mismatch, not_text, repeated, McpHeaders};
use super::{accepted, Caller, StreamableHttp};
use crate::headers;
use crate::server::envelopes::Envelopes;
use crate::server::round_params::{read_with_meta, PromptCall, ReadAlready, ReadCall, ToolCall, WithMeta};
use crate::server::{era, Modern};
use crate::types::{codes, is_modern, JsonObject, RequestEnvelope};

/// The HTTP status of a reply carrying `error`.
fn status_of(error: &Error) -> StatusCode {
    match error.code() {
        PARSE_ERROR
        | INVALID_REQUEST
        | INVALID_PARAMS
        | codes::HEADER_MISMATCH
        | codes::MISSING_REQUIRED_CLIENT_CAPABILITY
        | codes::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// A JSON reply with its status.
fn reply(id: &Id, outcome: Result<RawResult, Error>) -> Response<RouteBody> {
    let status = outcome.as_ref().err().map_or(StatusCode::OK, status_of);
    let mut response = route::json_response(response_frame(id, &outcome));
    *response.status_mut() = status;
    response
}

/// The one value of header `name`: `None` when absent, an error when it
/// comes more than once or is not text.
fn single<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Result<Option<&'h str>, Error> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(repeated(name.as_str()));
    }
    first.to_str().map(Some).map_err(|_| not_text(name.as_str()))
}

/// What header checks need of a request's params, borrowed from them, and
/// its `_meta`, read as `M` (skipped by default).
#[derive(Deserialize)]
struct Named<'a, M = IgnoredAny> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    uri: Option<Cow<'a, str>>,
    #[serde(rename = "taskId", default, borrow)]
    task_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(rename = "_meta", default = "none")]
    meta: Option<M>,
}

fn none<M>() -> Option<M> {
    None
}

impl<'a, M> Named<'a, M> {
    fn without_meta(self) -> Named<'a> {
        Named {
            name: self.name,
            uri: self.uri,
            task_id: self.task_id,
            arguments: self.arguments,
            meta: None,
        }
    }
}

/// A request for `tools/call`, `resources/read` or `prompts/get` (as its
/// `Mcp-Method` header says), read in one pass: the frame, and the params
/// with the envelope as the handler reads them. `None` for any other
/// request, or anything that does not read so: the frame is then parsed as
/// usual, to say what it is.
fn read_in_one_pass<'a>(
    mcp: &McpHeaders,
    body: &'a [u8],
    limits: &Limits,
    envelopes: &Envelopes,
) -> Option<(Id, Cow<'a, str>, Reading<'a>)> {
    fn typed<'a, P: WithMeta<'a>>(
        body: &'a [u8],
        limits: &Limits,
        envelopes: &Envelopes,
    ) -> Option<(Id, Cow<'a, str>, Reading<'a>)> {
        let request = parse_request_as::<P>(body, limits)?;
        let (read, meta) = request.params?.read();
        let envelope = envelopes.read(meta?).ok()?;
        Some((request.id, request.method, Reading::Already(read, envelope)))
    }
    match mcp.method.first()?.as_bytes() {
        b"tools/call" => {
            if let Some((id, call, envelope)) = super::usual_call::read(body, limits, envelopes) {
                let reading = Reading::Already(ReadAlready::Tool(call), envelope);
                return Some((id, Cow::Borrowed("tools/call"), reading));
            }
            typed::<ToolCall<&RawValue>>(body, limits, envelopes)
        }
        b"resources/read" => typed::<ReadCall<&RawValue>>(body, limits, envelopes),
        b"prompts/get" => typed::<PromptCall<&RawValue>>(body, limits, envelopes),
        _ => None,
    }
}

/// How a modern POST begins.
enum Start {
    /// It is on its way to its handler.
    Started(Started),
    /// It is answered at once: refused, or (a notification) accepted.
    Answered(Response<RouteBody>),
}

/// A modern request on its way to its handler: what its reply needs.
struct Started {
    /// The handler under way: what it says before it answers, then its
    /// answer.
    served: ServedCall,
    /// `subscriptions/listen`, whose reply is a stream from the start.
    listen: bool,
}

/// A request's params, read for the checks.
enum Reading<'a> {
    /// A `tools/call`, `resources/read` or `prompts/get`, read as its
    /// handler reads it, so that its params are read once.
    Already(ReadAlready, Arc<RequestEnvelope>),
    /// Any other request: what its headers mirror, and its params as they
    /// came, for its handler.
    Named(Option<Named<'a>>, Arc<RequestEnvelope>, Option<&'a RawValue>),
}

impl<'a> Reading<'a> {
    fn read(method: &str, params: Option<&'a RawValue>, envelopes: &Envelopes) -> Result<Self, Error> {
        if let Some((read, meta)) = params.and_then(|params| read_with_meta(method, params)) {
            if let Ok(envelope) = envelopes.read(meta) {
                return Ok(Reading::Already(read, envelope));
            }
        }
        // What the headers mirror and the envelope, in one pass.
        let checked = params.and_then(|p| serde_json::from_str::<Named<'_, &RawValue>>(p.get()).ok());
        if let Some(mut checked) = checked {
            if let Some(Ok(envelope)) = checked.meta.take().map(|meta| envelopes.read(meta)) {
                return Ok(Reading::Named(Some(checked.without_meta()), envelope, params));
            }
        }
        // Something is wrong: read each part on its own to say what.
        let envelope = Arc::new(era::parse_envelope(params)?);
        let named = params.and_then(|p| serde_json::from_str::<Named<'_>>(p.get()).ok());
        Ok(Reading::Named(named, envelope, params))
    }

    fn envelope(&self) -> &RequestEnvelope {
        match self {
            Reading::Already(_, envelope) | Reading::Named(_, envelope, _) => envelope,
        }
    }

    /// What the headers mirror.
    fn named(&self) -> Option<Named<'_>> {
        fn borrowed<'b>(s: &'b Option<Cow<'_, str>>) -> Option<Cow<'b, str>> {
            s.as_deref().map(Cow::Borrowed)
        }
        match self {
            Reading::Named(named, _, _) => named.as_ref().map(|n| Named {
                name: borrowed(&n.name),
                uri: borrowed(&n.uri),
                task_id: borrowed(&n.task_id),
                arguments: n.arguments,
                meta: None,
            }),
            Reading::Already(ReadAlready::Tool(call), _) => Some(Named {
                name: Some(Cow::Borrowed(&call.name)),
                uri: None,
                task_id: None,
                arguments: call.arguments.as_deref(),
                meta: None,
            }),
            Reading::Already(ReadAlready::Resource(read), _) => Some(Named {
                name: None,
                uri: Some(Cow::Borrowed(&read.uri)),
                task_id: None,
                arguments: None,
                meta: None,
            }),
            Reading::Already(ReadAlready::Prompt(prompt), _) => Some(Named {
                name: Some(Cow::Borrowed(&prompt.name)),
                uri: None,
                task_id: None,
                arguments: None,
                meta: None,
            }),
        }
    }
}

impl StreamableHttp {
    /// Serves a modern POST. Everything up to the handler's first poll is
    /// done before the future is made: most handlers answer then, and the
    /// future is ready; the others get a boxed one that holds only what
    /// their reply needs.
    pub(super) fn modern_post(
        &self,
        headers: HeaderMap,
        mcp: McpHeaders,
        body: Bytes,
        cx: RouteContext,
        caller: Option<Caller>,
    ) -> impl std::future::Future<Output = Response<RouteBody>> + Send + '_ {
        match self.start(headers, &mcp, &body, &cx, caller) {
            Start::Answered(reply) => Either::Left(ready(reply)),
            Start::Started(Started { mut served, listen }) => {
                // Most handlers answer at once: then nothing waits, and no
                // timer is set.
                if !listen {
                    if let Some(outcome) = served.now() {
                        return Either::Left(ready(reply(served.id(), outcome)));
                    }
                }
                Either::Right(Box::pin(self.respond(served, listen)))
            }
        }
    }

    /// A modern request, checked and on its way to its handler; or the
    /// reply that refuses it (or accepts a notification).
    fn start(
        &self,
        headers: HeaderMap,
        mcp: &McpHeaders,
        body: &[u8],
        cx: &RouteContext,
        caller: Option<Caller>,
    ) -> Start {
        let limits = Limits {
            max_frame_len: cx.max_body_len(),
            ..Limits::default()
        };
        let (id, method, reading) = match read_in_one_pass(mcp, body, &limits, &self.envelopes) {
            Some(read) => read,
            None => {
                let request = match parse_frame(body, &limits) {
                    Err(error) => return Start::Answered(reply(&Id::NULL, Err(error))),
                    Ok(Frame::Batch(_)) => {
                        let why = "a POST carries one JSON-RPC request or notification, not a batch";
                        return Start::Answered(reply(
                            &Id::NULL,
                            Err(Error::invalid_request().with_data(why)),
                        ));
                    }
                    Ok(Frame::Single(Incoming::Invalid(invalid))) => {
                        return Start::Answered(reply(&invalid.id, Err(invalid.error)))
                    }
                    Ok(Frame::Single(Incoming::Response(_))) => {
                        let why = "a client sends requests and notifications, not responses";
                        return Start::Answered(reply(
                            &Id::NULL,
                            Err(Error::invalid_request().with_data(why)),
                        ));
                    }
                    Ok(Frame::Single(Incoming::Notification(_))) => {
                        return Start::Answered(notification(mcp))
                    }
                    Ok(Frame::Single(Incoming::Request(request))) => request,
                };
                match Reading::read(&request.method, request.params, &self.envelopes) {
                    Ok(reading) => (request.id, request.method, reading),
                    Err(error) => return Start::Answered(reply(&request.id, Err(error))),
                }
            }
        };
        let reading = match self.check(&headers, mcp, &method, reading) {
            Ok(reading) => reading,
            Err(error) => return Start::Answered(reply(&id, Err(error))),
        };
        let listen = method == "subscriptions/listen";
        let (sender, messages) = call_outlet();
        // Params read already go to the handler as they are, not again as
        // text.
        let (mut modern, params) = match reading {
            Reading::Already(read, envelope) => (Modern::with_params(envelope, read), None),
            Reading::Named(_, envelope, params) => (Modern::new(envelope), params.map(RawValue::to_owned)),
        };
        modern.stream = Some(sender);
        // Only a subscription outlives its reply's first words; the
        // shutdown signal is cloned for it alone (a clone and a drop cost a
        // locked tree update each).
        if listen {
            modern.closing = Some(cx.shutdown().clone());
        }
        // The connection's facts are the HTTP server's, made once for all
        // its requests; the headers are this request's own.
        let mut call =
            Call::request(id, method.as_ref(), params).with_connection(Arc::clone(cx.connection()));
        call.extensions_mut().insert(headers);
        call.extensions_mut().insert(Arc::new(modern));
        if let Some(caller) = &caller {
            caller.record(call.extensions_mut());
        }
        // The era is decided: of the era layer's checks only these apply,
        // and the call goes straight to the method table (the layered stack
        // would cost it a few allocations).
        if let Some(refusal) = era::refuse_modern(&call) {
            return Start::Answered(reply(call.id().unwrap_or(&Id::NULL), Err(refusal)));
        }
        Start::Started(Started {
            served: serve_call_with(&self.table, call, messages),
            listen,
        })
    }

    /// The request's params as read, once the headers have been checked
    /// against them: `-32602` for a missing or malformed envelope, `-32020`
    /// for headers that are missing or do not match, `-32022` for a
    /// revision that is not modern.
    fn check<'a>(
        &self,
        headers: &HeaderMap,
        mcp: &McpHeaders,
        body_method: &str,
        reading: Reading<'a>,
    ) -> Result<Reading<'a>, Error> {
        let envelope = reading.envelope();
        let named = reading.named();
        let version = mcp.version.single(headers::PROTOCOL_VERSION)?;
        let method = mcp.method.single(headers::METHOD)?;
        let name = mcp.name.single(headers::NAME)?;
        if version != Some(envelope.protocol_version.as_str()) {
            return Err(mismatch(format!(
                "MCP-Protocol-Version {version:?} does not match the body's {:?}",
                envelope.protocol_version
            )));
        }
        if method != Some(body_method) {
            return Err(mismatch(format!(
                "Mcp-Method {method:?} does not match the body's {body_method:?}"
            )));
        }
        if let Some(field) = headers::name_param(body_method) {
            let body_value = named.as_ref().and_then(|n| match field {
                "name" => n.name.as_deref(),
                "uri" => n.uri.as_deref(),
                _ => n.task_id.as_deref(),
            });
            if let Some(body_value) = body_value {
                let decoded = name.map(headers::decode_value);
                if decoded.flatten().as_deref() != Some(body_value) {
                    return Err(mismatch(format!(
                        "Mcp-Name {name:?} does not match the body's {field} {body_value:?}"
                    )));
                }
            }
        }
        era::check_version(envelope)?;
        if body_method == "tools/call" {
            if let Some(named) = &named {
                self.check_param_headers(headers, named)?;
            }
        }
        drop(named);
        Ok(reading)
    }

    /// The `Mcp-Param-*` headers of a `tools/call` against its arguments,
    /// for the parameters its tool annotates `x-mcp-header` (a tool whose
    /// annotations are invalid has none).
    fn check_param_headers(&self, headers: &HeaderMap, named: &Named<'_>) -> Result<(), Error> {
        let Some(tool) = named.name.as_deref().and_then(|name| self.server.tool(name)) else {
            return Ok(());
        };
        if tool.param_headers.is_empty() {
            return Ok(());
        }
        let arguments: JsonObject = named
            .arguments
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
            .unwrap_or_default();
        let arguments = &arguments;
        for param in tool.param_headers.iter() {
            let header_name = param.header_name();
            // A name that is no header name cannot have come.
            let header = match HeaderName::try_from(header_name.as_str()) {
                Ok(name) => single(headers, &name)?,
                Err(_) => None,
            };
            match (param.value_in(arguments), header) {
                (None, None) => {}
                (None, Some(_)) => {
                    return Err(mismatch(format!(
                        "{header_name} is present but the argument {:?} is not",
                        param.path.join(".")
                    )))
                }
                (Some(_), None) => {
                    return Err(mismatch(format!(
                        "{header_name} is missing for the argument {:?}",
                        param.path.join(".")
                    )))
                }
                (Some(value), Some(header)) => {
                    if !headers::is_header_safe(header) {
                        return Err(mismatch(format!(
                            "{header_name} holds characters a header may not"
                        )));
                    }
                    let decoded = headers::decode_value(header);
                    let matches = decoded.is_some_and(|d| headers::argument_matches(&param.kind, value, &d));
                    if !matches {
                        return Err(mismatch(format!(
                            "{header_name} does not match the argument {:?}",
                            param.path.join(".")
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// The reply to a request whose handler did not answer at once: JSON
    /// when it answers before saying anything (within the keep-alive
    /// interval), else an SSE stream of what it says and then its answer —
    /// at once for `subscriptions/listen`, whose reply is a stream. The
    /// handler lives in the response: closing the stream cancels it.
    async fn respond(&self, mut served: ServedCall, stream_at_once: bool) -> Response<RouteBody> {
        let mut first = None;
        if !stream_at_once {
            let said = tokio::select! {
                said = served.next() => said,
                () = tokio::time::sleep(self.options.keep_alive) => None,
            };
            match said {
                Some(Said::Reply(outcome)) => return reply(served.id(), outcome),
                Some(Said::Message(message)) => first = Some(sse::Event::data(text(message))),
                None => {}
            }
        }
        let rest = futures_util::stream::unfold(Some(served), |served| async move {
            let mut served = served?;
            match served.next().await? {
                Said::Message(message) => Some((sse::Event::data(text(message)), Some(served))),
                Said::Reply(outcome) => {
                    let frame = response_frame(served.id(), &outcome);
                    Some((sse::Event::data(text(frame)), None))
                }
            }
        });
        let events = futures_util::stream::iter(first).chain(rest);
        super::event_stream(events, self.options.keep_alive)
    }
}

/// A JSON text as an SSE data line.
fn text(bytes: Bytes) -> String {
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A notification POSTed on the modern path: accepted (`202`) and dropped —
/// 2026-07-28 defines no notification from the client over HTTP (closing a
/// request's stream cancels it) — unless it names a revision this server
/// does not speak.
fn notification(mcp: &McpHeaders) -> Response<RouteBody> {
    let version = mcp.version.first().and_then(|v| v.to_str().ok());
    match version {
        Some(version) if !is_modern(version) => reply(&Id::NULL, Err(era::unsupported_version(version))),
        _ => accepted(),
    }
}
