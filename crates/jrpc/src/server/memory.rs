//! Giving memory back after connections close.
//!
//! glibc's allocator keeps freed memory in its arenas: after ten thousand
//! WebSocket connections close, a server would hold their memory (some
//! 18 KB each) for good, free but resident. So the servers count their open
//! connections, and once many have closed since the last look (and a
//! moment has passed, so that a wave of closes is handled once) they ask
//! glibc to give its free pages back (`malloc_trim`). Elsewhere, or with
//! another allocator, this does nothing.
//!
//! It acts on the whole process's heap, so a library does not do it on its
//! own: the program turns it on ([`trim_memory_after_closes`]); the `jrpc`
//! command does.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// Connections that must have closed since the last trim to trim again.
const CLOSED_BEFORE_TRIM: usize = 256;

/// How long after the closes that call for it the trim runs.
const TRIM_DELAY: Duration = Duration::from_secs(1);

static OPEN: AtomicUsize = AtomicUsize::new(0);
/// Most connections open at once since the last trim.
static PEAK: AtomicUsize = AtomicUsize::new(0);
static TRIM_SCHEDULED: AtomicBool = AtomicBool::new(false);
/// Whether the program asked for trims.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Gives freed memory back to the system after many connections have
/// closed (`malloc_trim`, on Linux with glibc; elsewhere nothing): off by
/// default, since it acts on the whole process's heap. A server that sees
/// waves of connections come and go (ten thousand idle WebSockets hold
/// some 18 KB each while open) turns it on once, at start; the `jrpc`
/// command does.
pub fn trim_memory_after_closes(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}
/// Trims done so far (for tests).
static TRIMS: AtomicUsize = AtomicUsize::new(0);

/// One open connection, counted until dropped.
#[must_use = "the connection counts as open while this is held"]
pub(crate) struct OpenConnection(());

impl OpenConnection {
    pub(crate) fn new() -> Self {
        let open = OPEN.fetch_add(1, Ordering::Relaxed) + 1;
        PEAK.fetch_max(open, Ordering::Relaxed);
        OpenConnection(())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        let open = OPEN.fetch_sub(1, Ordering::Relaxed) - 1;
        let closed = PEAK.load(Ordering::Relaxed).saturating_sub(open);
        if closed < CLOSED_BEFORE_TRIM
            || !ENABLED.load(Ordering::Relaxed)
            || !can_trim()
            || TRIM_SCHEDULED.swap(true, Ordering::AcqRel)
        {
            return;
        }
        // A thread of its own, not the runtime's: it walks the heap under
        // the allocator's locks, and a runtime shutting down (closing the
        // connections that called for it) would cancel a task and leave the
        // trim scheduled for good.
        let spawned = std::thread::Builder::new().name("jrpc-trim".into()).spawn(|| {
            std::thread::sleep(TRIM_DELAY);
            PEAK.store(OPEN.load(Ordering::Relaxed), Ordering::Relaxed);
            trim();
            TRIMS.fetch_add(1, Ordering::Relaxed);
            TRIM_SCHEDULED.store(false, Ordering::Release);
        });
        if spawned.is_err() {
            TRIM_SCHEDULED.store(false, Ordering::Release);
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn can_trim() -> bool {
    true
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim takes no pointers; it only releases free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn can_trim() -> bool {
    false
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// Closes a wave of connections and waits for the trim it calls for.
    fn close_a_wave_and_wait() {
        trim_memory_after_closes(true);
        let before = TRIMS.load(Ordering::Relaxed);
        let open: Vec<_> = (0..CLOSED_BEFORE_TRIM + 10)
            .map(|_| OpenConnection::new())
            .collect();
        drop(open);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while TRIMS.load(Ordering::Relaxed) == before {
            assert!(
                std::time::Instant::now() < deadline,
                "no trim after the connections closed"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    #[test]
    fn each_wave_of_closed_connections_leads_to_a_trim() {
        close_a_wave_and_wait();
        // The first trim left nothing stuck: the next wave trims again.
        close_a_wave_and_wait();
    }
}
