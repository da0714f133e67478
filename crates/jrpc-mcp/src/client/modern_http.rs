//! Modern (2026-07-28) Streamable HTTP: each request its own POST, with
//! the `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*`
//! headers; the answer a JSON body or an SSE stream (notifications about
//! the request, then its response). No session, no standalone stream: a
//! call is cancelled by closing its stream, which dropping its future does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::deadline::Deadline;
use super::endpoint::Endpoint;
use bytes::Bytes;
use http::{header, HeaderMap, HeaderName, HeaderValue, Method};
use http_body_util::BodyExt;
use jrpc::message::RawValue;
use jrpc::{CallError, Error, Id};
use serde::Deserialize;

use super::sent::Sent;
use super::sse::SseParser;
use crate::headers;

/// Where the server's notifications about a request go (progress, logs).
pub(crate) type Notify = Arc<dyn Fn(&str, Option<serde_json::Value>) + Send + Sync>;

/// An HTTP answer that was neither a result nor a JSON-RPC error: its
/// status and the start of its body.
#[derive(Debug, Clone, thiserror::Error)]
#[error("HTTP {status}{}", if body.is_empty() { String::new() } else { format!(": {body}") })]
pub struct HttpStatusError {
    /// The status code.
    pub status: u16,
    /// The start of the body.
    pub body: String,
}

/// The modern wire to one endpoint.
pub(crate) struct ModernHttp {
    http: Endpoint,
    next_id: AtomicU64,
    notify: Notify,
    /// How long a call may take, all of its attempts together.
    timeout: Duration,
}

/// What one modern request is: its era, method, params and headers.
struct Outgoing<'a> {
    version: &'a str,
    method: &'a str,
    params: &'a Sent<'a>,
    /// `Mcp-Name`'s value, not yet encoded.
    name: Option<&'a str>,
    /// `Mcp-Param-*` headers, encoded.
    param_headers: &'a [(String, String)],
}

/// A response read off the wire: its id and outcome.
#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    id: Option<Id>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<serde_json::Value>,
    #[serde(default)]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<Error>,
}

const BODY_SHOWN: usize = 512;

/// Shows a message on jrpc's wire target (`jrpc mcp -v` prints them).
pub(super) fn trace(direction: &str, message: &[u8]) {
    if tracing::enabled!(target: "jrpc::wire", tracing::Level::TRACE) {
        tracing::trace!(target: "jrpc::wire", "{direction} {}", String::from_utf8_lossy(message));
    }
}

impl ModernHttp {
    pub(crate) fn new(http: Endpoint, notify: Notify, timeout: Duration) -> Self {
        ModernHttp {
            http,
            next_id: AtomicU64::new(1),
            notify,
            timeout,
        }
    }

    /// Sends one request in `version` and waits for its answer, within
    /// `timeout` (the client's call timeout when `None`). A JSON-RPC error
    /// in the body (whatever the HTTP status: a modern server answers `400`
    /// with one) is [`CallError::Rpc`]; another refusal is a
    /// [`CallError::Transport`] holding an [`HttpStatusError`].
    pub(crate) async fn call(
        &self,
        version: &str,
        method: &str,
        params: &Sent<'_>,
        name: Option<&str>,
        param_headers: &[(String, String)],
        timeout: Option<Duration>,
    ) -> Result<Box<RawValue>, CallError> {
        self.call_with(
            version,
            method,
            params,
            name,
            param_headers,
            &*self.notify,
            timeout.unwrap_or(self.timeout),
        )
        .await
    }

    /// [`call`](Self::call), the notifications of the request's stream
    /// handed to `notify` (a subscription's own). The call (its attempts,
    /// its answer's stream) takes at most `timeout` (the client's call
    /// timeout; a listen stream's is as long as it is wanted): then
    /// [`CallError::Timeout`], and its stream is closed.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn call_with(
        &self,
        version: &str,
        method: &str,
        params: &Sent<'_>,
        name: Option<&str>,
        param_headers: &[(String, String)],
        notify: &(dyn Fn(&str, Option<serde_json::Value>) + Send + Sync),
        timeout: Duration,
    ) -> Result<Box<RawValue>, CallError> {
        let deadline = Deadline::after(timeout);
        let request = Outgoing {
            version,
            method,
            params,
            name,
            param_headers,
        };
        let work = std::pin::pin!(self.send(request, notify, &deadline));
        deadline.run(work).await
    }

    /// One request sent and its answer read, with as many attempts as its
    /// authorization takes.
    async fn send(
        &self,
        Outgoing {
            version,
            method,
            params,
            name,
            param_headers,
        }: Outgoing<'_>,
        notify: &(dyn Fn(&str, Option<serde_json::Value>) + Send + Sync),
        deadline: &Deadline,
    ) -> Result<Box<RawValue>, CallError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = params.request_frame(id, method)?;
        trace(">", &body);
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        // The names are known: no allocation for them on every request.
        let mut put = |name: HeaderName, value: &str| -> Result<(), CallError> {
            let value = HeaderValue::from_str(&headers::encode_value(value))
                .map_err(|e| CallError::Encode(format!("header {name}: {e}").into()))?;
            headers.insert(name, value);
            Ok(())
        };
        put(headers::names::PROTOCOL_VERSION, version)?;
        put(headers::names::METHOD, method)?;
        if let Some(name) = name {
            put(headers::names::NAME, name)?;
        }
        for (name, value) in param_headers {
            // Encoded by the caller: put as they are.
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| CallError::Encode(format!("header {name}: {e}").into()))?;
            let value = HeaderValue::from_str(value)
                .map_err(|e| CallError::Encode(format!("header {name}: {e}").into()))?;
            headers.insert(name, value);
        }
        let response = self
            .http
            .send(Method::POST, headers, Bytes::from(body), Some(deadline))
            .await?;
        let status = response.status();
        let sse = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        let mut body = response.into_body();
        if status.is_success() && sse {
            let mut events = SseParser::default();
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| CallError::Io(Arc::new(std::io::Error::other(e))))?;
                let Ok(data) = frame.into_data() else { continue };
                for event in events.feed(&data) {
                    if let Some(outcome) = read_message(id, event.data.as_bytes(), notify) {
                        // The stream's end is read so that the connection
                        // is kept.
                        body.release();
                        return outcome;
                    }
                }
            }
            return Err(CallError::Closed(
                "the server ended the request's stream before its response".into(),
            ));
        }
        let bytes = body
            .collect()
            .await
            .map_err(|e| CallError::Io(Arc::new(std::io::Error::other(e))))?
            .to_bytes();
        // A refused token (401, 403) or a server that cannot serve now
        // (429, 503) is the HTTP layer's refusal, whatever its body says:
        // as for every other HTTP client of jrpc, not an error of the
        // method. (A 400 with a JSON-RPC error is the method's answer.)
        let refused = matches!(status.as_u16(), 401 | 403 | 429 | 503);
        if let Some(outcome) = read_message(id, &bytes, notify).filter(|_| !refused) {
            if status.is_success() || outcome.is_err() {
                return outcome;
            }
        }
        let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(BODY_SHOWN)]).into_owned();
        Err(CallError::Transport(Arc::new(HttpStatusError {
            status: status.as_u16(),
            body: shown,
        })))
    }
}

/// The outcome a response carries.
pub(super) fn answered(response: jrpc::message::ResponseRef<'_>) -> Result<Box<RawValue>, CallError> {
    response.outcome.map(RawValue::to_owned).map_err(CallError::Rpc)
}

/// What a message of the answer says: the outcome when it is the
/// response (or an error answer under no id); `None` for a notification
/// (handed on) or anything else.
fn read_message(
    id: u64,
    bytes: &[u8],
    notify: &(dyn Fn(&str, Option<serde_json::Value>) + Send + Sync),
) -> Option<Result<Box<RawValue>, CallError>> {
    trace("<", bytes);
    // Read by serde in one pass: jrpc's parser walks a result once to find
    // its end and serde again to check it, which costs more than it saves
    // for a tool's result (55 939 → 57 493 instructions a call).
    let answer: Answer = serde_json::from_slice(bytes).ok()?;
    if let Some(method) = answer.method {
        if answer.id.is_none() {
            notify(&method, answer.params);
        } else {
            tracing::debug!(%method, "a request from the server on a modern stream; ignored");
        }
        return None;
    }
    let ours = match &answer.id {
        None => true,
        Some(got) => *got == Id::from(id) || *got == Id::NULL,
    };
    if !ours {
        return None;
    }
    match (answer.result, answer.error) {
        (_, Some(error)) => Some(Err(CallError::Rpc(error))),
        (Some(result), None) => Some(Ok(result)),
        (None, None) => Some(Err(CallError::Protocol(
            "an answer with neither result nor error".into(),
        ))),
    }
}
