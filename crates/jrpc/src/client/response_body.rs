//! The body of a response from [`HttpClient::send_streaming`]: hyper's
//! body, holding the HTTP/1.1 connection it came on until it has been read
//! to its end, when the connection goes back to the pool.
//!
//! Why not a task that waits for the connection to be ready and then pools
//! it: the caller who reads the body to its end usually sends its next
//! request at once, before such a task has run, and found no idle
//! connection: a new one was opened for most calls under load (a server
//! pays an accept and a connection for each). Handed back as the last
//! frame is read, the connection is idle for the very next request.
//!
//! A body that comes gzip-encoded (a server compresses a large reply when
//! the request says `Accept-Encoding: gzip`) is decoded as it streams, and
//! its response loses its `Content-Encoding` and `Content-Length`, which
//! described the encoded bytes (a response already at its end, to `HEAD`
//! say, keeps them: they describe what `GET` would have).
//!
//! [`HttpClient::send_streaming`]: super::HttpClient::send_streaming

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::FutureExt as _;
use http_body::{Body, Frame, SizeHint};

use super::gunzip::{Encoding, Gunzip};
use super::idle::{Idle, Sender};

/// A response body still streaming; see
/// [`HttpClient::send_streaming`](super::HttpClient::send_streaming).
/// Read it to its end, or [`release`](Self::release) it, when done: over
/// HTTP/1.1 its connection is reused only once it has been read to the
/// end (a body dropped before its end closes its connection).
///
/// ```no_run
/// use http_body_util::BodyExt;
///
/// # async fn run(client: jrpc::client::HttpClient) -> Result<(), jrpc::CallError> {
/// let response = client
///     .send_streaming(http::Method::GET, http::HeaderMap::new(), bytes::Bytes::new())
///     .await?;
/// let mut events = response.into_body();
/// while let Some(Ok(frame)) = events.frame().await {
///     if let Ok(data) = frame.into_data() {
///         if data.starts_with(b"data: ") {
///             // What was awaited: the rest of the stream is not needed.
///             break;
///         }
///     }
/// }
/// events.release();
/// # Ok(()) }
/// ```
pub struct ResponseBody {
    inner: hyper::body::Incoming,
    /// The HTTP/1.1 connection the body comes on, until its end.
    lease: Option<Lease>,
    coding: Coding,
}

/// Why a body could not be read: its connection failed, or its bytes do
/// not decode.
pub type ResponseBodyError = Box<dyn std::error::Error + Send + Sync>;

/// How a body's bytes came encoded, and where its decoding stands.
enum Coding {
    Identity,
    /// Being decoded; `ended` once the encoded bytes have all come, with
    /// the trailers that ended them (handed on after the decoded data).
    Gzip {
        gunzip: Box<Gunzip>,
        ended: Option<Option<http::HeaderMap>>,
    },
    /// An encoding this client does not decode (named): an error, rather
    /// than bytes that would be read as if they were the content.
    Unknown(String),
    /// Decoded to the end, or failed: the trailers left to hand on, then
    /// the end.
    Done(Option<http::HeaderMap>),
}

impl Coding {
    /// The coding `headers` name (every `Content-Encoding` field, each a
    /// list), which are then made to describe the decoded content; a body
    /// already at its end (`HEAD`, `204`) is taken as it is.
    fn of(headers: &mut http::HeaderMap, empty: bool) -> Self {
        if empty || !headers.contains_key(http::header::CONTENT_ENCODING) {
            return Coding::Identity;
        }
        let coding = match Encoding::of(headers) {
            Encoding::Identity => return Coding::Identity,
            Encoding::Gzip => Coding::Gzip {
                gunzip: Box::new(Gunzip::new()),
                ended: None,
            },
            Encoding::Other(named) => Coding::Unknown(named),
        };
        headers.remove(http::header::CONTENT_ENCODING);
        headers.remove(http::header::CONTENT_LENGTH);
        coding
    }
}

/// A pooled connection lent to one response.
pub(super) struct Lease {
    pub(super) sender: Sender,
    /// Where it goes back to.
    pub(super) idle: Arc<Idle>,
}

impl Lease {
    /// The connection back in the pool: at once when it is ready for the
    /// next request (it is, almost always, by the time its response has
    /// been read), else once it is.
    fn give_back(self) {
        let Lease { mut sender, idle } = self;
        if sender.is_ready() {
            idle.put(sender);
        } else if !sender.is_closed() {
            // Outside a runtime (a body read by another executor) the
            // connection is let go instead.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    if sender.ready().await.is_ok() {
                        idle.put(sender);
                    }
                });
            }
        }
    }
}

impl ResponseBody {
    /// The body of `response`, decoded as its headers say (which then
    /// describe the decoded content).
    pub(super) fn of(
        response: http::Response<hyper::body::Incoming>,
        lease: Option<Lease>,
    ) -> http::Response<Self> {
        let (mut parts, inner) = response.into_parts();
        let coding = Coding::of(&mut parts.headers, inner.is_end_stream());
        let mut body = ResponseBody { inner, lease, coding };
        // A body with nothing in it (a `202`) frees its connection now.
        body.end_if_ended();
        http::Response::from_parts(parts, body)
    }

    /// Done with this body before its end (an SSE stream whose awaited
    /// event has come): what is left of it is read, so that its connection
    /// can carry the next request instead of being closed, then dropped.
    /// What has already arrived (usually the stream's end) is read now;
    /// the rest in the background, up to 64 KiB and for a second at most
    /// (a stream that goes on is closed).
    pub fn release(mut self) {
        const MOST: usize = 64 * 1024;
        const LONGEST: std::time::Duration = std::time::Duration::from_secs(1);
        if self.lease.is_none() {
            return;
        }
        // Whether to read on after `frame`: data, and not too much of it
        // (as it came: what is drained is not decoded).
        let mut read = 0;
        let mut goes_on = move |frame: Option<Result<Frame<Bytes>, hyper::Error>>| match frame {
            Some(Ok(frame)) => {
                read += frame.data_ref().map_or(0, Bytes::len);
                read <= MOST
            }
            _ => false,
        };
        while let Some(frame) = self.raw_frame().now_or_never() {
            if !goes_on(frame) {
                return;
            }
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let drain = async { while goes_on(self.raw_frame().await) {} };
            let _ = tokio::time::timeout(LONGEST, drain).await;
        });
    }

    /// The next frame as it came on the wire.
    async fn raw_frame(&mut self) -> Option<Result<Frame<Bytes>, hyper::Error>> {
        std::future::poll_fn(|cx| poll_raw(&mut self.inner, &mut self.lease, cx)).await
    }

    fn end_if_ended(&mut self) {
        if self.inner.is_end_stream() {
            give_back(&mut self.lease);
        }
    }
}

/// The connection back in the pool, if the body still holds it.
fn give_back(lease: &mut Option<Lease>) {
    if let Some(lease) = lease.take() {
        lease.give_back();
    }
}

impl std::fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseBody")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// The next frame of `inner` as it came, its connection (`lease`) handed
/// back at its end.
fn poll_raw(
    inner: &mut hyper::body::Incoming,
    lease: &mut Option<Lease>,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
    let polled = Pin::new(&mut *inner).poll_frame(cx);
    match &polled {
        // A failed body leaves its connection unusable: dropped.
        Poll::Ready(Some(Err(_))) => *lease = None,
        // Trailers come after the body has ended (a chunked body never
        // says it has otherwise).
        Poll::Ready(Some(Ok(frame))) if !frame.is_trailers() && !inner.is_end_stream() => {}
        Poll::Pending => {}
        Poll::Ready(_) => give_back(lease),
    }
    polled
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = ResponseBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ResponseBodyError>>> {
        let this = &mut *self;
        loop {
            let (gunzip, ended) = match &mut this.coding {
                Coding::Identity => {
                    return poll_raw(&mut this.inner, &mut this.lease, cx).map_err(Into::into)
                }
                Coding::Gzip { gunzip, ended } => (gunzip, ended),
                Coding::Unknown(named) => {
                    let why = Encoding::unreadable(named);
                    this.coding = Coding::Done(None);
                    this.lease = None;
                    return Poll::Ready(Some(Err(why.into())));
                }
                Coding::Done(trailers) => {
                    return Poll::Ready(trailers.take().map(|t| Ok(Frame::trailers(t))))
                }
            };
            // What is decoded of what came, a step at a time; then the rest
            // at the end; else more from the connection.
            let decoded = match gunzip.step() {
                Ok(Some(data)) => Ok(data),
                Ok(None) => match ended {
                    Some(trailers) => {
                        let trailers = trailers.take();
                        let rest = gunzip.finish();
                        this.coding = Coding::Done(trailers);
                        rest
                    }
                    None => {
                        match std::task::ready!(poll_raw(&mut this.inner, &mut this.lease, cx)) {
                            Some(Ok(frame)) => match frame.into_data() {
                                Ok(data) => gunzip.push(data),
                                Err(frame) => *ended = Some(frame.into_trailers().ok()),
                            },
                            Some(Err(e)) => {
                                this.coding = Coding::Done(None);
                                return Poll::Ready(Some(Err(e.into())));
                            }
                            None => *ended = Some(None),
                        }
                        continue;
                    }
                },
                Err(e) => Err(e),
            };
            match decoded {
                Ok(data) if data.is_empty() => continue,
                Ok(data) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                Err(e) => {
                    this.coding = Coding::Done(None);
                    this.lease = None;
                    return Poll::Ready(Some(
                        Err(format!("a gzip reply that does not decode: {e}").into()),
                    ));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.coding {
            Coding::Identity => self.inner.is_end_stream(),
            Coding::Done(trailers) => trailers.is_none(),
            Coding::Gzip { .. } | Coding::Unknown(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.coding {
            Coding::Identity => self.inner.size_hint(),
            Coding::Done(None) => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}
