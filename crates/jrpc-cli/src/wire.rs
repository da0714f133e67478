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
use jrpc::transport::{Dialer, FrameSink, FrameStream};

use crate::call::{ConnectArgs, Target};

/// What came back for one frame sent.
#[derive(Debug)]
pub(crate) enum Observed {
    /// Frames that arrived (stream transports).
    Frames(Vec<Bytes>),
    /// An HTTP response.
    Http { status: u16, body: Bytes },
}

impl Observed {
    /// The reply frames, whatever the transport (an empty HTTP body is none).
    pub(crate) fn frames(&self) -> Vec<Bytes> {
        match self {
            Observed::Frames(frames) => frames.clone(),
            Observed::Http { body, .. } if body.iter().all(u8::is_ascii_whitespace) => Vec::new(),
            Observed::Http { body, .. } => vec![body.clone()],
        }
    }

    pub(crate) fn evidence(&self) -> String {
        let text = |b: &Bytes| String::from_utf8_lossy(b).chars().take(300).collect::<String>();
        match self {
            Observed::Frames(frames) if frames.is_empty() => "no reply".into(),
            Observed::Frames(frames) => frames.iter().map(text).collect::<Vec<_>>().join(" | "),
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
            Target::Url(url) if url.starts_with("http://") || url.starts_with("https://") => {
                let mut builder = jrpc::client::Client::builder().http2(args.http2);
                for (name, value) in extra {
                    builder = builder.header(name, value)?;
                }
                if let Some(path) = &args.cacert {
                    builder = builder.ca_pem(path)?;
                }
                return Ok(Wire::Http(builder.http(url)?));
            }
            Target::Url(url) if url.starts_with("tcp://") => {
                jrpc::transport::tcp::TcpDialer::new(
                    url.trim_start_matches("tcp://").trim_end_matches('/'),
                    args.framing,
                    max,
                )
                .dial()
                .await?
            }
            Target::Url(url) if url.starts_with("udp://") => {
                jrpc::transport::udp::UdpDialer::new(url.trim_start_matches("udp://").trim_end_matches('/'))
                    .dial()
                    .await?
            }
            Target::Url(url) if url.starts_with("ws://") || url.starts_with("wss://") => {
                let mut headers = http::HeaderMap::new();
                for (name, value) in extra {
                    headers.append(
                        http::HeaderName::from_bytes(name.as_bytes())?,
                        http::HeaderValue::from_str(value)?,
                    );
                }
                jrpc::transport::ws::WsDialer::new(url.as_str())
                    .headers(headers)
                    .dial()
                    .await?
            }
            #[cfg(unix)]
            Target::Url(url) if url.starts_with("unix:") => {
                let path = url.trim_start_matches("unix://").trim_start_matches("unix:");
                jrpc::transport::unix::UnixDialer::new(path, args.framing, max)
                    .dial()
                    .await?
            }
            Target::Url(url) => {
                return Err(anyhow!(
                    "{url}: jrpc check speaks tcp://, udp://, unix:, http(s)://, ws(s):// and -- COMMAND"
                ))
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
    pub(crate) async fn exchange(
        &mut self,
        frame: &str,
        expect: usize,
        quiet: Duration,
        timeout: Duration,
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
                    .map_err(|_| anyhow!("the HTTP body did not end within {timeout:?}"))??
                    .to_bytes();
                Ok(Observed::Http { status, body })
            }
            Wire::Stream { incoming, outgoing } => {
                // Anything left over from before is not this frame's.
                while let Some(Some(_)) = incoming.next().now_or_never() {}
                outgoing
                    .send(Bytes::copy_from_slice(frame.as_bytes()))
                    .await
                    .context("sending")?;
                let mut frames = Vec::new();
                let wait = if expect == 0 { quiet } else { timeout };
                let deadline = tokio::time::Instant::now() + wait;
                while frames.len() < expect.max(1) {
                    match tokio::time::timeout_at(deadline, incoming.next()).await {
                        Ok(Some(Ok(Inbound::Frame(reply)))) => frames.push(reply),
                        Ok(Some(Ok(_))) => {}
                        Ok(Some(Err(e))) => return Err(anyhow!("reading: {e}")),
                        Ok(None) => return Err(anyhow!("the server closed the connection")),
                        Err(_) => break,
                    }
                }
                // A little longer, for replies that should not be there.
                let extra = tokio::time::Instant::now() + Duration::from_millis(30);
                while let Ok(Some(Ok(Inbound::Frame(reply)))) =
                    tokio::time::timeout_at(extra, incoming.next()).await
                {
                    frames.push(reply);
                }
                Ok(Observed::Frames(frames))
            }
        }
    }
}
