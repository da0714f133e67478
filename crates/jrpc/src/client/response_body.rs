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
//! [`HttpClient::send_streaming`]: super::HttpClient::send_streaming

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::FutureExt as _;
use http_body::{Body, Frame, SizeHint};

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
    pub(super) fn new(inner: hyper::body::Incoming, lease: Option<Lease>) -> Self {
        let mut body = ResponseBody { inner, lease };
        // A body with nothing in it (a `202`) frees its connection now.
        body.end_if_ended();
        body
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
        // Whether to read on after `frame`: data, and not too much of it.
        let mut read = 0;
        let mut goes_on = move |frame: Option<Result<Frame<Bytes>, hyper::Error>>| match frame {
            Some(Ok(frame)) => {
                read += frame.data_ref().map_or(0, Bytes::len);
                read <= MOST
            }
            _ => false,
        };
        while let Some(frame) = http_body_util::BodyExt::frame(&mut self).now_or_never() {
            if !goes_on(frame) {
                return;
            }
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let drain = async { while goes_on(http_body_util::BodyExt::frame(&mut self).await) {} };
            let _ = tokio::time::timeout(LONGEST, drain).await;
        });
    }

    /// The connection back in the pool, if this body still holds it.
    fn give_back(&mut self) {
        if let Some(lease) = self.lease.take() {
            lease.give_back();
        }
    }

    fn end_if_ended(&mut self) {
        if self.inner.is_end_stream() {
            self.give_back();
        }
    }
}

impl std::fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseBody")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => this.give_back(),
            // A failed body leaves its connection unusable: dropped.
            Poll::Ready(Some(Err(_))) => this.lease = None,
            Poll::Ready(Some(Ok(_))) => this.end_if_ended(),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
