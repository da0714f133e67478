//! What a connection is doing: when it last began or finished a request,
//! and how many it is answering (its idle watchdog reads this).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::exchange::has_token;

/// When a connection last began or finished a request, and how many it is
/// answering: what its idle watchdog looks at. (Bytes read are not
/// activity: HTTP/2 keep-alive pings would keep every connection busy.)
pub(super) struct Activity {
    start: tokio::time::Instant,
    last_ms: AtomicU64,
    in_flight: AtomicUsize,
    /// Whether the client said the request answered last is its last (see
    /// [`RequestGuard::answered`]).
    client_done: AtomicBool,
    /// Whether the body of the request being answered has been read to its
    /// end (watched only for a client that said it is done).
    body_read: AtomicBool,
}

impl Activity {
    pub(super) fn new() -> Self {
        Activity {
            start: tokio::time::Instant::now(),
            last_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            client_done: AtomicBool::new(false),
            body_read: AtomicBool::new(false),
        }
    }

    /// Whether the client has said it sends nothing more and was answered
    /// without the server closing on its own: then the connection may
    /// close without lingering ([`Lingering`](super::linger::Lingering)).
    pub(super) fn client_done(&self) -> bool {
        self.client_done.load(Ordering::Relaxed)
    }

    fn touch(&self) {
        let now = self.start.elapsed().as_millis() as u64;
        self.last_ms.store(now, Ordering::Relaxed);
    }

    /// `request` begins; the guard marks its end when dropped.
    pub(super) fn begin<B: http_body::Body>(self: &Arc<Self>, request: &http::Request<B>) -> RequestGuard {
        // No clock read here: while a request is in flight the connection
        // is not idle whatever the time; the guard notes when it ended.
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        let last = says_last(request);
        if last {
            self.body_read
                .store(request.body().is_end_stream(), Ordering::Relaxed);
        }
        RequestGuard {
            activity: Arc::clone(self),
            last,
        }
    }

    /// How long the connection has been idle, or `None` while it answers.
    fn idle_for(&self) -> Option<Duration> {
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            return None;
        }
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        Some(self.start.elapsed().saturating_sub(last))
    }

    /// Resolves once the connection has been idle for `limit`.
    pub(super) async fn idle(&self, limit: Duration) {
        loop {
            match self.idle_for() {
                Some(idle) if idle >= limit => return,
                Some(idle) => tokio::time::sleep(limit - idle).await,
                None => tokio::time::sleep(limit).await,
            }
        }
    }
}

pub(super) struct RequestGuard {
    activity: Arc<Activity>,
    /// Whether the request says it is its client's last ([`says_last`]).
    last: bool,
}

impl RequestGuard {
    /// The request's body, watched for its end when the client said the
    /// request is its last (else as it is, in the same type).
    pub(super) fn watch<B>(&self, body: B) -> Watched<B> {
        let unread = self.last && !self.activity.body_read.load(Ordering::Relaxed);
        Watched {
            body,
            activity: unread.then(|| Arc::clone(&self.activity)),
        }
    }

    /// Notes how the request left the connection, once its response head
    /// is made: the client is done if it said this request is its last and
    /// the request's body has been read to its end (whoever answered, a
    /// handler of the application's or a layer, may have answered without
    /// reading it, and the client may still be sending it: then the close
    /// must linger), unless the response closes the connection on the
    /// server's own account (`Connection: close`).
    pub(super) fn answered(&self, response: &http::HeaderMap) {
        let done = self.last
            && self.activity.body_read.load(Ordering::Relaxed)
            && !has_token(response, http::header::CONNECTION, "close");
        self.activity.client_done.store(done, Ordering::Relaxed);
    }
}

pin_project_lite::pin_project! {
    /// A request's body that notes in its connection's [`Activity`] when it
    /// has been read to its end ([`RequestGuard::watch`]).
    pub(super) struct Watched<B> {
        #[pin]
        body: B,
        activity: Option<Arc<Activity>>,
    }
}

impl<B: http_body::Body> http_body::Body for Watched<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        let this = self.project();
        let polled = this.body.poll_frame(cx);
        if let (std::task::Poll::Ready(None), Some(activity)) = (&polled, this.activity.as_ref()) {
            activity.body_read.store(true, Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Whether a request says it is its client's last on the connection (RFC
/// 9112 §9.3: `Connection: close`, or HTTP/1.0 without keep-alive). Such a
/// client must send no further requests (§9.6).
pub(super) fn says_last<B>(request: &http::Request<B>) -> bool {
    let headers = request.headers();
    match request.version() {
        http::Version::HTTP_11 => has_token(headers, http::header::CONNECTION, "close"),
        http::Version::HTTP_10 => !has_token(headers, http::header::CONNECTION, "keep-alive"),
        // HTTP/2 and later end connections with frames of their own.
        _ => false,
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.activity.touch();
        self.activity.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_says_it_is_the_clients_last() {
        use http::Version;
        let cases: &[(Version, Option<&str>, bool)] = &[
            (Version::HTTP_11, None, false),
            (Version::HTTP_11, Some("close"), true),
            (Version::HTTP_11, Some("Keep-Alive, CLOSE"), true),
            (Version::HTTP_11, Some("keep-alive"), false),
            (Version::HTTP_11, Some("closed"), false),
            (Version::HTTP_10, None, true),
            (Version::HTTP_10, Some("keep-alive"), false),
            (Version::HTTP_10, Some("close"), true),
            (Version::HTTP_2, Some("close"), false),
        ];
        for &(version, connection, done) in cases {
            let mut request = http::Request::builder().version(version);
            if let Some(connection) = connection {
                request = request.header(http::header::CONNECTION, connection);
            }
            let request = request.body(()).unwrap();
            assert_eq!(
                says_last(&request),
                done,
                "{version:?} Connection: {connection:?}"
            );
        }
    }

    fn request(connection: &str, body: &'static str) -> http::Request<http_body_util::Full<bytes::Bytes>> {
        http::Request::builder()
            .header(http::header::CONNECTION, connection)
            .body(http_body_util::Full::new(bytes::Bytes::from_static(
                body.as_bytes(),
            )))
            .unwrap()
    }

    #[tokio::test]
    async fn a_client_is_done_once_its_body_is_read_and_the_server_did_not_close() {
        use http_body_util::BodyExt;
        let activity = Arc::new(Activity::new());
        let plain = http::HeaderMap::new();
        let mut closing = http::HeaderMap::new();
        closing.insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));

        // No body: done as soon as it is answered.
        let guard = activity.begin(&request("close", ""));
        guard.answered(&plain);
        assert!(activity.client_done());
        // The server closes on its own account: lingers.
        guard.answered(&closing);
        assert!(!activity.client_done());
        drop(guard);

        // A body answered before it was read (a layer's refusal, a handler
        // that ignores it): the client may still be sending it.
        let unread = request("close", "{\"jsonrpc\":\"2.0\"}");
        let guard = activity.begin(&unread);
        let body = guard.watch(unread.into_body());
        guard.answered(&plain);
        assert!(!activity.client_done(), "answered before the body was read");
        // Read to its end, then answered: done.
        body.collect().await.unwrap();
        guard.answered(&plain);
        assert!(activity.client_done());
        drop(guard);

        // A client that keeps the connection open is never done.
        let kept = request("keep-alive", "x");
        let guard = activity.begin(&kept);
        guard.watch(kept.into_body()).collect().await.unwrap();
        guard.answered(&plain);
        assert!(!activity.client_done());
    }
}
