//! Raw frames to a server and what comes back, below the client library:
//! for `jrpc check`, which sends what no client would, and `jrpc call
//! --envelope`, which shows the reply as it came.

use std::time::Duration;

use anyhow::{anyhow, Context as _};
use bytes::Bytes;
use futures_util::{FutureExt as _, SinkExt, StreamExt};
use http_body_util::BodyExt;
use jrpc::client::HttpClient;
use jrpc::codec::Inbound;
use jrpc::message::Limits;
use jrpc::transport::dial::{dialer, DialOptions, Scheme};
use jrpc::transport::{Dialer, FrameSink, FrameStream};

use crate::target::{ConnectArgs, Target};

/// What came back for one frame sent.
#[derive(Debug)]
pub(crate) enum Observed {
    /// Stream transports: the replies (and unreadable frames, as text),
    /// the messages the server sent of its own (requests, notifications),
    /// and what was still arriving from before this frame was sent.
    Frames {
        replies: Vec<Bytes>,
        own: Vec<Bytes>,
        late: Vec<Bytes>,
    },
    /// An HTTP response.
    Http { status: u16, body: Bytes },
}

/// Whether a frame is a message the server sends of its own (a request or
/// a notification: an object with a `method`), not a reply.
fn is_servers_own(frame: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe {
        method: Option<serde::de::IgnoredAny>,
        result: Option<serde::de::IgnoredAny>,
        error: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Probe>(frame)
        .is_ok_and(|p| p.method.is_some() && p.result.is_none() && p.error.is_none())
}

impl Observed {
    /// The reply frames, whatever the transport (an empty HTTP body is none).
    pub(crate) fn frames(&self) -> Vec<Bytes> {
        match self {
            Observed::Frames { replies, .. } => replies.clone(),
            Observed::Http { body, .. } if body.iter().all(u8::is_ascii_whitespace) => Vec::new(),
            Observed::Http { body, .. } => vec![body.clone()],
        }
    }

    /// The messages the server sent of its own meanwhile (requests,
    /// notifications).
    pub(crate) fn own(&self) -> &[Bytes] {
        match self {
            Observed::Frames { own, .. } => own,
            Observed::Http { .. } => &[],
        }
    }

    /// Frames that arrived before this frame was sent: late replies to
    /// what was sent before.
    pub(crate) fn late(&self) -> &[Bytes] {
        match self {
            Observed::Frames { late, .. } => late,
            Observed::Http { .. } => &[],
        }
    }

    pub(crate) fn evidence(&self) -> String {
        let text = |b: &Bytes| String::from_utf8_lossy(b).chars().take(300).collect::<String>();
        let join = |frames: &[Bytes]| frames.iter().map(text).collect::<Vec<_>>().join(" | ");
        match self {
            Observed::Frames { replies, own, .. } => {
                let mut evidence = if replies.is_empty() {
                    "no reply".to_owned()
                } else {
                    join(replies)
                };
                if !own.is_empty() {
                    evidence.push_str(&format!(" (and the server's own messages: {})", join(own)));
                }
                evidence
            }
            Observed::Http { status, body } => format!("HTTP {status}, body {:?}", text(body)),
        }
    }
}

/// The raw connection frames go over.
pub(crate) enum Wire {
    Stream {
        incoming: FrameStream,
        outgoing: FrameSink,
    },
    Http(HttpClient),
}

impl Wire {
    pub(crate) async fn open(
        target: &Target,
        args: &ConnectArgs,
        extra: &[(String, String)],
    ) -> anyhow::Result<Wire> {
        let max = Limits::DEFAULT_MAX_FRAME_LEN;
        let connection = match target {
            Target::Url(url) if Scheme::of(url) == Some(Scheme::Http) => {
                let mut builder = jrpc::client::Client::builder().http2(args.dial.http2);
                for (name, value) in extra {
                    builder = builder.try_header(name, value)?;
                }
                if let Some(path) = &args.dial.cacert {
                    builder = builder.ca_pem(path)?;
                }
                return Ok(Wire::Http(builder.http(url)?));
            }
            Target::Url(url) => {
                // Every other scheme through the library's one table of
                // dialers, as `jrpc call` and the clients reach them.
                let mut options = DialOptions::default().framing(args.framing).max_frame_len(max);
                // Headers and a CA are a WebSocket's (its upgrade request);
                // other schemes have no use for them.
                if Scheme::of(url) == Some(Scheme::WebSocket) {
                    let mut headers = http::HeaderMap::new();
                    for (name, value) in extra {
                        headers.append(
                            http::HeaderName::from_bytes(name.as_bytes())?,
                            http::HeaderValue::from_str(value)?,
                        );
                    }
                    options = options.headers(headers);
                    if let Some(path) = &args.dial.cacert {
                        // A self-signed wss:// server, as for call.
                        let roots = jrpc::transport::tls::load_certs(path)?;
                        options = options.tls(jrpc::transport::tls::client_config(roots, &[b"http/1.1"])?);
                    }
                }
                match dialer(url, &options) {
                    Ok(dialer) => dialer.dial().await?,
                    Err(e) if Scheme::of(url).is_none() => return Err(anyhow!("{e}, or -- COMMAND")),
                    Err(e) => return Err(e.into()),
                }
            }
            Target::Command(words) => {
                let words = words.clone();
                jrpc::transport::child::ChildDialer::new(move || {
                    let mut command = tokio::process::Command::new(&words[0]);
                    command.args(&words[1..]);
                    command
                })
                .framing(args.framing, max)
                .dial()
                .await?
            }
        };
        let (incoming, outgoing, _) = connection.into_parts();
        Ok(Wire::Stream { incoming, outgoing })
    }

    /// Sends `frame` and gathers what comes back: `expect` replies (waiting
    /// up to `timeout` for them), or, when none is due, whatever comes
    /// within `quiet`.
    /// [`exchange`](Self::exchange), reading (up to `timeout`) until the
    /// reply with the id `id` (JSON text) has come: a barrier, after which
    /// whatever else came is a reply to what was sent before.
    pub(crate) async fn exchange_until(
        &mut self,
        frame: &str,
        id: &str,
        timeout: Duration,
    ) -> anyhow::Result<Observed> {
        self.exchange_inner(frame, 1, Duration::ZERO, timeout, Some(id))
            .await
    }

    pub(crate) async fn exchange(
        &mut self,
        frame: &str,
        expect: usize,
        quiet: Duration,
        timeout: Duration,
    ) -> anyhow::Result<Observed> {
        self.exchange_inner(frame, expect, quiet, timeout, None).await
    }

    async fn exchange_inner(
        &mut self,
        frame: &str,
        expect: usize,
        quiet: Duration,
        timeout: Duration,
        until: Option<&str>,
    ) -> anyhow::Result<Observed> {
        match self {
            Wire::Http(client) => {
                let mut headers = http::HeaderMap::new();
                headers.insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/json"),
                );
                let response = tokio::time::timeout(
                    timeout,
                    client.send_streaming(
                        http::Method::POST,
                        headers,
                        Bytes::copy_from_slice(frame.as_bytes()),
                    ),
                )
                .await
                .map_err(|_| anyhow!("no HTTP response within {timeout:?}"))??;
                let status = response.status().as_u16();
                let body = tokio::time::timeout(timeout, response.into_body().collect())
                    .await
                    .map_err(|_| anyhow!("the HTTP body did not end within {timeout:?}"))?
                    .map_err(|e| anyhow!("reading the HTTP body: {e}"))?
                    .to_bytes();
                Ok(Observed::Http { status, body })
            }
            Wire::Stream { incoming, outgoing } => {
                // Anything still arriving is not this frame's: late replies
                // to what was sent before.
                let mut late = Vec::new();
                while let Some(Some(item)) = incoming.next().now_or_never() {
                    if let Some(frame) = readable(item)? {
                        if !is_servers_own(&frame) {
                            late.push(frame);
                        }
                    }
                }
                outgoing
                    .send(Bytes::copy_from_slice(frame.as_bytes()))
                    .await
                    .context("sending")?;
                let (mut replies, mut own) = (Vec::new(), Vec::new());
                let wait = if expect == 0 { quiet } else { timeout };
                let deadline = tokio::time::Instant::now() + wait;
                let done = |replies: &[Bytes]| match until {
                    Some(id) => replies.iter().any(|r| raw_ids(r).iter().any(|got| got == id)),
                    None => replies.len() >= expect.max(1),
                };
                while !done(&replies) {
                    match tokio::time::timeout_at(deadline, incoming.next()).await {
                        Ok(Some(item)) => match readable(item)? {
                            Some(frame) if is_servers_own(&frame) => own.push(frame),
                            Some(frame) => replies.push(frame),
                            None => {}
                        },
                        Ok(None) => return Err(anyhow!("the server closed the connection")),
                        Err(_) => break,
                    }
                }
                // A little longer, for replies that should not be there.
                let extra = tokio::time::Instant::now() + Duration::from_millis(30);
                while let Ok(Some(item)) = tokio::time::timeout_at(extra, incoming.next()).await {
                    match readable(item)? {
                        Some(frame) if is_servers_own(&frame) => own.push(frame),
                        Some(frame) => replies.push(frame),
                        None => {}
                    }
                }
                Ok(Observed::Frames { replies, own, late })
            }
        }
    }
}

/// A frame read, or what was unreadable as text (so that it counts as
/// something the server sent); an error when reading failed.
fn readable(item: std::io::Result<Inbound>) -> anyhow::Result<Option<Bytes>> {
    match item {
        Ok(Inbound::Frame(frame)) => Ok(Some(frame)),
        Ok(Inbound::Malformed(reason)) => Ok(Some(Bytes::from(format!("<unreadable framing: {reason}>")))),
        Ok(Inbound::Oversized { limit }) => Ok(Some(Bytes::from(format!("<a frame over {limit} bytes>")))),
        Ok(Inbound::Undelivered { reason, .. }) => Err(anyhow!("not delivered: {reason}")),
        Ok(Inbound::Lost { reason, .. }) => Err(anyhow!("replies lost: {reason}")),
        Ok(_) => Ok(None),
        Err(e) => Err(anyhow!("reading: {e}")),
    }
}

/// A request (with `id`) or a notification, as JSON text: params and id as
/// given (JSON text, kept digit for digit).
pub(crate) fn message(method: &str, params: Option<&str>, id: Option<&str>) -> String {
    let mut text = format!(
        r#"{{"jsonrpc":"2.0","method":{}"#,
        serde_json::Value::from(method)
    );
    if let Some(params) = params {
        text.push_str(&format!(r#","params":{params}"#));
    }
    if let Some(id) = id {
        text.push_str(&format!(r#","id":{id}"#));
    }
    text.push('}');
    text
}

/// What came of posting one frame over HTTP.
pub(crate) enum Posted {
    /// A JSON-RPC reply (an object or an array), with the status it came
    /// with.
    Reply { status: u16, body: Bytes },
    /// An empty body: nothing was due (notifications).
    Nothing,
    /// No reply: the connection failed, or the body was not JSON (an error
    /// page); the text says which.
    Failed(String),
}

/// Posts `frame` as it is, within `timeout`.
pub(crate) async fn post(http: HttpClient, frame: &[u8], timeout: Duration) -> Posted {
    let mut wire = Wire::Http(http);
    let text = String::from_utf8_lossy(frame);
    match wire.exchange(&text, 1, timeout, timeout).await {
        Ok(Observed::Http { body, .. }) if body.iter().all(u8::is_ascii_whitespace) => Posted::Nothing,
        Ok(Observed::Http { status, body }) if is_json_reply(&body) => Posted::Reply { status, body },
        Ok(other) => Posted::Failed(format!("no JSON-RPC reply: {}", other.evidence())),
        Err(e) => Posted::Failed(format!("{e:#}")),
    }
}

/// Whether an HTTP body is a JSON-RPC reply (an object or an array), not
/// an error page.
fn is_json_reply(body: &[u8]) -> bool {
    matches!(body.iter().find(|b| !b.is_ascii_whitespace()), Some(b'{' | b'['))
        && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok()
}

/// The `id` texts of a frame's requests (its objects with a `method` and an
/// `id`), as written.
pub(crate) fn request_ids(frame: &[u8]) -> Vec<String> {
    ids_of(frame, true)
}

/// The `id` texts of a frame's replies (its objects without a `method`), as
/// written.
pub(crate) fn reply_ids(frame: &[u8]) -> Vec<String> {
    ids_of(frame, false)
}

fn ids_of(frame: &[u8], requests: bool) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(borrow, default)]
        method: Option<&'a serde_json::value::RawValue>,
        #[serde(borrow, default, deserialize_with = "present")]
        id: Option<&'a serde_json::value::RawValue>,
    }
    let items: Vec<Probe<'_>> = match serde_json::from_slice::<Probe<'_>>(frame) {
        Ok(one) => vec![one],
        Err(_) => serde_json::from_slice(frame).unwrap_or_default(),
    };
    items
        .into_iter()
        .filter(|item| item.method.is_some() == requests)
        .filter_map(|item| item.id.map(|id| id.get().to_owned()))
        .collect()
}

/// An `id` member that is there, even as `null`.
pub(crate) fn present<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<&'de serde_json::value::RawValue>, D::Error> {
    <&serde_json::value::RawValue as serde::Deserialize>::deserialize(d).map(Some)
}

/// What an id (as JSON text) is matched by: two ids have the same key when
/// they are the same JSON value. Numbers by value (a server may echo `1e3`
/// as `1000`), integers digit for digit, beyond 64 bits too (a float
/// rounding one is another id); strings with their escapes resolved; null
/// as null.
pub(crate) fn id_key(id: &str) -> String {
    let id = id.trim();
    if id.starts_with('"') {
        return serde_json::from_str::<String>(id)
            .map(|s| serde_json::Value::from(s).to_string())
            .unwrap_or_else(|_| id.to_owned());
    }
    let digits = id.strip_prefix('-').unwrap_or(id);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        let digits = digits.trim_start_matches('0');
        return match (digits.is_empty(), id.starts_with('-')) {
            (true, _) => "0".to_owned(),
            (false, true) => format!("-{digits}"),
            (false, false) => digits.to_owned(),
        };
    }
    match id.parse::<f64>() {
        // Written as a fraction or with an exponent, but a whole number
        // a double holds exactly: the same as its integer.
        Ok(n) if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 => format!("{}", n as i64),
        Ok(n) => format!("{n:e}"),
        Err(_) => id.to_owned(),
    }
}

/// The raw text of each `"id"` member in a frame (its top-level objects').
pub(crate) fn raw_ids(frame: &[u8]) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct WithId<'a> {
        // Not an Option: `null` is an id too.
        #[serde(borrow)]
        id: &'a serde_json::value::RawValue,
    }
    if let Ok(one) = serde_json::from_slice::<WithId<'_>>(frame) {
        return vec![one.id.get().to_owned()];
    }
    serde_json::from_slice::<Vec<WithId<'_>>>(frame)
        .map(|all| all.into_iter().map(|r| r.id.get().to_owned()).collect())
        .unwrap_or_default()
}

/// Whether an `http(s)://` server's port takes connections (within
/// `timeout`), without sending it a request.
pub(crate) async fn reachable(url: &str, timeout: Duration) -> anyhow::Result<()> {
    let uri: http::Uri = url.parse()?;
    let host = uri.host().ok_or_else(|| anyhow!("{url}: no host"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let https = uri.scheme_str() == Some("https");
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect((host, port))).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(anyhow!("no connection within {timeout:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_ids_keep_their_digits() {
        assert_eq!(
            raw_ids(br#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":1}"#),
            ["123456789012345678901234567890"]
        );
        assert_eq!(raw_ids(br#"[{"id":1e3},{"id":"x"}]"#), ["1e3", "\"x\""]);
    }
}
