//! A future that is polled only when it asked to be.
//!
//! An HTTP connection's task waits on its connection and, beside it, on
//! watchdogs that fire once in its life (shutdown, idleness). `select!`
//! polls every branch on every wake-up, and each wake-up of a busy
//! connection is a request: re-checking a cancellation token and reading
//! the clock for the idle timer cost a few hundred instructions each time.
//! Wrapped in [`WhenWoken`], a watchdog is polled again only after its own
//! waker fired.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// `inner`, polled on its first poll and then only after it was woken.
pub(super) struct WhenWoken<F> {
    inner: Pin<Box<F>>,
    signal: Arc<Signal>,
    /// The waker handed to `inner`: it notes the wake-up, then wakes the
    /// task that polls this future.
    waker: Waker,
}

struct Signal {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl<F: Future> WhenWoken<F> {
    pub(super) fn new(inner: F) -> Self {
        let signal = Arc::new(Signal {
            // The first poll always reaches `inner`, which registers.
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        WhenWoken {
            inner: Box::pin(inner),
            waker: Waker::from(Arc::clone(&signal)),
            signal,
        }
    }
}

impl<F: Future> Future for WhenWoken<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        // Registered before the flag is read, so that a wake-up between
        // the two still reaches this task.
        this.signal.task.register(cx.waker());
        if !this.signal.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        this.inner.as_mut().poll(&mut Context::from_waker(&this.waker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts its polls; ready once `open` is set, woken by `wake`.
    struct Gate {
        polls: Arc<AtomicUsize>,
        open: Arc<AtomicBool>,
        waker: Arc<std::sync::Mutex<Option<Waker>>>,
    }

    impl Future for Gate {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::SeqCst);
            if self.open.load(Ordering::SeqCst) {
                return Poll::Ready(());
            }
            *self.waker.lock().unwrap() = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    #[test]
    fn polls_inner_only_after_its_own_wake_up() {
        let polls = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicBool::new(false));
        let inner_waker = Arc::new(std::sync::Mutex::new(None::<Waker>));
        let mut gated = WhenWoken::new(Gate {
            polls: Arc::clone(&polls),
            open: Arc::clone(&open),
            waker: Arc::clone(&inner_waker),
        });
        let (task_waker, task_woken) = counting_waker();
        let mut cx = Context::from_waker(&task_waker);

        assert!(Pin::new(&mut gated).poll(&mut cx).is_pending());
        assert_eq!(polls.load(Ordering::SeqCst), 1, "the first poll reaches inner");
        // The task wakes for other reasons: inner is left alone.
        for _ in 0..5 {
            assert!(Pin::new(&mut gated).poll(&mut cx).is_pending());
        }
        assert_eq!(polls.load(Ordering::SeqCst), 1);
        assert_eq!(task_woken.load(Ordering::SeqCst), 0);

        // Inner's own wake-up wakes the task and lets the next poll in.
        open.store(true, Ordering::SeqCst);
        inner_waker.lock().unwrap().take().unwrap().wake();
        assert_eq!(task_woken.load(Ordering::SeqCst), 1);
        assert!(Pin::new(&mut gated).poll(&mut cx).is_ready());
        assert_eq!(polls.load(Ordering::SeqCst), 2);
    }

    fn counting_waker() -> (Waker, Arc<AtomicUsize>) {
        struct Count(Arc<AtomicUsize>);
        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let count = Arc::new(AtomicUsize::new(0));
        (Waker::from(Arc::new(Count(Arc::clone(&count)))), count)
    }

    #[tokio::test(start_paused = true)]
    async fn a_gated_timer_still_fires() {
        let started = tokio::time::Instant::now();
        WhenWoken::new(tokio::time::sleep(std::time::Duration::from_secs(5))).await;
        assert!(started.elapsed() >= std::time::Duration::from_secs(5));
    }
}
