//! Server-Sent Events: a `text/event-stream` response body fed by a stream
//! of [`Event`]s, for [routes](super::route) that push messages to a
//! client.

use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};

use super::route::RouteBody;

/// One event.
///
/// ```
/// use jrpc::server::http::sse::Event;
///
/// let event = Event::data("{\"jsonrpc\":\"2.0\"}").id("7").event("message");
/// assert_eq!(event.to_bytes(), "id: 7\nevent: message\ndata: {\"jsonrpc\":\"2.0\"}\n\n");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    id: Option<String>,
    event: Option<String>,
    data: String,
    /// Whether the event carries data, even empty (a client dispatches an
    /// event only when it has a `data:` field).
    has_data: bool,
    retry: Option<Duration>,
}

/// Drops line breaks, which would end a field early (the text is kept as
/// it is when it has none, as it usually has).
fn one_line(text: String) -> String {
    if text.contains(['\r', '\n']) {
        text.replace(['\r', '\n'], "")
    } else {
        text
    }
}

impl Event {
    /// An event carrying `data` (several lines become several `data:`
    /// fields, which the client joins back).
    pub fn data(data: impl Into<String>) -> Self {
        Event {
            data: data.into(),
            has_data: true,
            ..Default::default()
        }
    }

    /// An event with no data that only sets the client's reconnection
    /// delay.
    pub fn retry_only(delay: Duration) -> Self {
        Event {
            retry: Some(delay),
            ..Default::default()
        }
    }

    /// Its id: a client that reconnects sends the last one it saw as
    /// `Last-Event-ID`.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(one_line(id.into()));
        self
    }

    /// Its type (`message` when unset).
    pub fn event(mut self, name: impl Into<String>) -> Self {
        self.event = Some(one_line(name.into()));
        self
    }

    /// How long the client should wait before reconnecting.
    pub fn retry(mut self, delay: Duration) -> Self {
        self.retry = Some(delay);
        self
    }

    /// The event as it goes on the wire.
    pub fn to_bytes(&self) -> Bytes {
        let mut out = Vec::with_capacity(self.data.len() + 32);
        self.write_to(&mut out);
        Bytes::from(out)
    }

    /// Appends the event as it goes on the wire to `out`.
    fn write_to(&self, out: &mut Vec<u8>) {
        if let Some(id) = &self.id {
            out.extend_from_slice(b"id: ");
            out.extend_from_slice(id.as_bytes());
            out.push(b'\n');
        }
        if let Some(event) = &self.event {
            out.extend_from_slice(b"event: ");
            out.extend_from_slice(event.as_bytes());
            out.push(b'\n');
        }
        if let Some(retry) = self.retry {
            out.extend_from_slice(b"retry: ");
            out.extend_from_slice(itoa::Buffer::new().format(retry.as_millis()).as_bytes());
            out.push(b'\n');
        }
        if self.has_data || (self.id.is_none() && self.event.is_none() && self.retry.is_none()) {
            for line in self.data.split('\n') {
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(line.strip_suffix('\r').unwrap_or(line).as_bytes());
                out.push(b'\n');
            }
        }
        out.push(b'\n');
    }
}

/// A `200` response streaming `events` as Server-Sent Events, with a
/// comment every `keep_alive` while nothing else is sent (so that proxies
/// and the client keep the connection). The stream ends when `events` does.
pub fn response(
    events: impl Stream<Item = Event> + Send + 'static,
    keep_alive: Option<Duration>,
) -> Response<RouteBody> {
    let frames = with_keep_alive(events.map(|event| event.to_bytes()), keep_alive)
        .map(|bytes| Ok::<_, Box<dyn std::error::Error + Send + Sync>>(http_body::Frame::data(bytes)));
    let mut response = Response::new(StreamBody::new(frames).boxed_unsync());
    *response.status_mut() = StatusCode::OK;
    event_stream_headers(response.headers_mut());
    response
}

/// An SSE response whose events are all known (a stream that has ended
/// already): one body, written at once, with no keep-alive comments.
///
/// ```
/// use jrpc::server::http::sse::{complete, Event};
///
/// let response = complete([Event::data("").id("1-0"), Event::data(r#"{"n":1}"#).id("1-1")]);
/// assert_eq!(response.headers()["content-type"], "text/event-stream");
/// ```
pub fn complete(events: impl IntoIterator<Item = Event>) -> Response<RouteBody> {
    // Room for the usual short stream (a priming event and a reply), so
    // that it is written without growing.
    let mut body = Vec::with_capacity(512);
    for event in events {
        event.write_to(&mut body);
    }
    let mut response = Response::new(
        http_body_util::Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    event_stream_headers(response.headers_mut());
    response
}

fn event_stream_headers(headers: &mut http::HeaderMap) {
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
}

/// `items`, with `: keep-alive` comments whenever `every` passes without one.
fn with_keep_alive(
    items: impl Stream<Item = Bytes> + Send + 'static,
    every: Option<Duration>,
) -> impl Stream<Item = Bytes> + Send + 'static {
    let items = Box::pin(items);
    futures_util::stream::unfold(items, move |mut items| async move {
        let next = match every {
            None => items.next().await,
            Some(every) => match tokio::time::timeout(every, items.next()).await {
                Ok(next) => next,
                Err(_) => Some(Bytes::from_static(b": keep-alive\n\n")),
            },
        };
        next.map(|bytes| (bytes, items))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_framed_as_the_spec_says() {
        assert_eq!(Event::data("a").to_bytes(), "data: a\n\n");
        assert_eq!(Event::data("a\nb").to_bytes(), "data: a\ndata: b\n\n");
        assert_eq!(Event::data("").to_bytes(), "data: \n\n");
        // An id with empty data is still an event a client dispatches.
        assert_eq!(
            Event::data("").id("3-0").retry(Duration::from_secs(1)).to_bytes(),
            "id: 3-0\nretry: 1000\ndata: \n\n"
        );
        assert_eq!(
            Event::retry_only(Duration::from_secs(2)).to_bytes(),
            "retry: 2000\n\n"
        );
        assert_eq!(
            Event::data("x")
                .id("1\n2")
                .event("m\r")
                .retry(Duration::from_millis(5))
                .to_bytes(),
            "id: 12\nevent: m\nretry: 5\ndata: x\n\n"
        );
    }
}
