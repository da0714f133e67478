//! What a connection is doing: when it last began or finished a request,
//! and how many it is answering (its idle watchdog reads this).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
}

impl Activity {
    pub(super) fn new() -> Self {
        Activity {
            start: tokio::time::Instant::now(),
            last_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            client_done: AtomicBool::new(false),
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

    /// A request begins; the guard marks its end when dropped.
    pub(super) fn begin(self: &Arc<Self>) -> RequestGuard {
        // No clock read here: while a request is in flight the connection
        // is not idle whatever the time; the guard notes when it ended.
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        RequestGuard(Arc::clone(self))
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

pub(super) struct RequestGuard(Arc<Activity>);

impl RequestGuard {
    /// Notes how the request left the connection, once its response head
    /// is made: `client_done` if it was the client's last (see
    /// [`client_done`]), unless the response closes the connection on the
    /// server's own account (`Connection: close`, said of a refusal that
    /// comes before its request's body was read: the client may still be
    /// sending it, and the close must linger).
    pub(super) fn answered(&self, client_done: bool, response: &http::HeaderMap) {
        let done = client_done && !has_token(response, http::header::CONNECTION, "close");
        self.0.client_done.store(done, Ordering::Relaxed);
    }
}

/// Whether the client says this request is its last on the connection
/// (RFC 9112 §9.3: `Connection: close`, or HTTP/1.0 without keep-alive).
/// Such a client must send no further requests (§9.6).
pub(super) fn client_done<B>(request: &http::Request<B>) -> bool {
    let headers = request.headers();
    match request.version() {
        http::Version::HTTP_11 => has_token(headers, http::header::CONNECTION, "close"),
        http::Version::HTTP_10 => !has_token(headers, http::header::CONNECTION, "keep-alive"),
        // HTTP/2 and later end connections with frames of their own.
        _ => false,
    }
}

/// Whether a header of a comma-separated list of tokens (`Connection`,
/// `Upgrade`) names `token`, in any case.
pub(super) fn has_token(headers: &http::HeaderMap, name: http::header::HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|value| {
        value.to_str().is_ok_and(|value| {
            value
                .split(',')
                .any(|part| part.trim().eq_ignore_ascii_case(token))
        })
    })
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_is_done_when_its_request_says_so() {
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
                client_done(&request),
                done,
                "{version:?} Connection: {connection:?}"
            );
        }
    }

    #[test]
    fn a_response_that_closes_on_its_own_keeps_the_close_lingering() {
        let activity = Arc::new(Activity::new());
        let guard = activity.begin();
        guard.answered(true, &http::HeaderMap::new());
        assert!(activity.client_done());
        let mut closing = http::HeaderMap::new();
        closing.insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
        guard.answered(true, &closing);
        assert!(!activity.client_done(), "a refusal before the body was read");
        guard.answered(false, &http::HeaderMap::new());
        assert!(!activity.client_done());
    }
}
