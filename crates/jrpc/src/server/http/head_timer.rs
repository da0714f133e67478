//! hyper's header-read timeout, with one timer per connection.
//!
//! hyper starts a sleep for every request head it reads and drops it once
//! the head is in. With hyper-util's timer each of those is a timer-wheel
//! entry registered and removed again, about a thousand instructions per
//! request. Deadlines on one connection only move forward, so here every
//! sleep of a connection shares one timer: it is registered once and moved
//! on only when it goes off before the current deadline (once per timeout
//! period at most). A sleep is then a small box and a check.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::time::Sleep;

/// A [`hyper::rt::Timer`] for one HTTP/1.1 connection.
#[derive(Clone, Default)]
pub(super) struct HeadTimer {
    /// Made on first use: most requests' heads arrive whole, and a
    /// connection that never waits for one needs no timer.
    shared: Arc<Mutex<Option<Pin<Box<Sleep>>>>>,
}

impl hyper::rt::Timer for HeadTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until(self.now() + duration)
    }

    /// tokio's clock, which the timer runs on (and tests can pause).
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HeadSleep {
            deadline: tokio::time::Instant::from_std(deadline),
            shared: Arc::clone(&self.shared),
        })
    }
}

/// One of hyper's sleeps: ready at its own deadline.
struct HeadSleep {
    deadline: tokio::time::Instant,
    shared: Arc<Mutex<Option<Pin<Box<Sleep>>>>>,
}

impl Future for HeadSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = self.deadline;
        let mut shared = self
            .shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let timer = shared.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        // An earlier sleep may have left a later deadline (hyper does not
        // do this, but a timer should not depend on it).
        if timer.deadline() > deadline {
            timer.as_mut().reset(deadline);
        }
        loop {
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            if timer.deadline() >= deadline {
                return Poll::Ready(());
            }
            // It went off for an earlier head, which has since come in.
            timer.as_mut().reset(deadline);
        }
    }
}

impl hyper::rt::Sleep for HeadSleep {}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::rt::Timer;

    fn poll_once(sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>) -> Poll<()> {
        let waker = futures_util::task::noop_waker();
        sleep.as_mut().poll(&mut Context::from_waker(&waker))
    }

    #[tokio::test(start_paused = true)]
    async fn each_sleep_ends_at_its_own_deadline() {
        let timer = HeadTimer::default();
        let mut first = timer.sleep(Duration::from_secs(30));
        assert!(poll_once(&mut first).is_pending());
        drop(first); // its head came in

        // The next head starts later; the shared timer still says 30 s.
        tokio::time::advance(Duration::from_secs(10)).await;
        let second = timer.sleep(Duration::from_secs(30));
        let waited = tokio::time::Instant::now();
        second.await;
        assert_eq!(waited.elapsed(), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_deadline_is_not_missed() {
        let timer = HeadTimer::default();
        let mut late = timer.sleep(Duration::from_secs(60));
        assert!(poll_once(&mut late).is_pending());
        let started = tokio::time::Instant::now();
        timer.sleep(Duration::from_secs(5)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }
}
