//! What a connection is doing: when it last began or finished a request,
//! and how many it is answering (its idle watchdog reads this).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// When a connection last began or finished a request, and how many it is
/// answering: what its idle watchdog looks at. (Bytes read are not
/// activity: HTTP/2 keep-alive pings would keep every connection busy.)
pub(super) struct Activity {
    start: tokio::time::Instant,
    last_ms: AtomicU64,
    in_flight: AtomicUsize,
}

impl Activity {
    pub(super) fn new() -> Self {
        Activity {
            start: tokio::time::Instant::now(),
            last_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        }
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

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}
