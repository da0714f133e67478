//! A call's outlet: the messages its handler sends its caller before it
//! answers (progress, log lines), on their way to whatever carries them
//! with the reply (an HTTP response streamed as server-sent events). Most
//! calls send none, so an outlet costs one small allocation until a message
//! is queued — a channel would allocate its buffer for every call.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::task::AtomicWaker;
use tokio::sync::Notify;

/// How many messages wait for the response before a sender waits too.
const CAPACITY: usize = 64;

/// A new outlet: its sending side, and the side the response reads.
pub(crate) fn outlet() -> (CallOutlet, CallMessages) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            closed: false,
        }),
        sent: AtomicWaker::new(),
        taken: Notify::new(),
    });
    (
        CallOutlet {
            shared: Arc::clone(&shared),
        },
        CallMessages { shared },
    )
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the reader (there is one) when a message is queued.
    sent: AtomicWaker,
    /// A message was taken, or the response is gone.
    taken: Notify,
}

struct State {
    queue: VecDeque<Bytes>,
    /// The response is gone: nothing sent arrives any more.
    closed: bool,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // The lock guards no invariant a panic could break.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The reply that would have carried a call's messages is gone (its
/// caller went away).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the call's caller is gone")]
pub struct Closed;

/// Where a handler sends its caller messages before it answers: in the
/// call's extensions when the transport carries such messages with the
/// reply (see [`serve_call`](super::serve_call)). Cheap to clone.
#[derive(Clone)]
pub struct CallOutlet {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for CallOutlet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOutlet").finish_non_exhaustive()
    }
}

impl CallOutlet {
    /// Queues `message` (a whole JSON-RPC frame, usually a notification),
    /// waiting while the reader is 64 messages behind; `Err` once the
    /// caller is gone.
    pub async fn send(&self, message: Bytes) -> Result<(), Closed> {
        loop {
            // Registered before the queue is looked at, so that a message
            // taken in between still wakes this sender.
            let taken = self.shared.taken.notified();
            tokio::pin!(taken);
            taken.as_mut().enable();
            {
                let mut state = self.shared.state();
                if state.closed {
                    return Err(Closed);
                }
                if state.queue.len() < CAPACITY {
                    state.queue.push_back(message);
                    drop(state);
                    self.shared.sent.wake();
                    return Ok(());
                }
            }
            taken.await;
        }
    }
}

/// What carries a call's messages reads them from: in the order they were
/// sent. Dropping it closes the outlet. Read through the
/// [`ServedCall`](super::ServedCall) it is given to.
pub struct CallMessages {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for CallMessages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallMessages").finish_non_exhaustive()
    }
}

impl CallMessages {
    /// The next message, if one is queued.
    pub(crate) fn try_recv(&self) -> Option<Bytes> {
        let message = self.shared.state().queue.pop_front();
        if message.is_some() {
            self.shared.taken.notify_waiters();
        }
        message
    }

    /// Whether no message is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.shared.state().queue.is_empty()
    }

    /// The next message, once one is sent.
    #[cfg(test)]
    pub(crate) async fn recv(&self) -> Bytes {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// The next message, or a wake-up when one is sent.
    pub(crate) fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Bytes> {
        // Registered before the queue is looked at, so that a message
        // queued in between still wakes the reader.
        self.shared.sent.register(cx.waker());
        match self.try_recv() {
            Some(message) => Poll::Ready(message),
            None => Poll::Pending,
        }
    }
}

impl Drop for CallMessages {
    fn drop(&mut self) {
        let mut state = self.shared.state();
        state.closed = true;
        state.queue.clear();
        drop(state);
        self.shared.taken.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn messages_arrive_in_order_and_senders_wait_for_room() {
        let (outlet, messages) = outlet();
        assert!(messages.try_recv().is_none());
        for i in 0..CAPACITY {
            outlet.send(Bytes::from(i.to_string())).await.unwrap();
        }
        // Full: the next sender waits until a message is taken.
        let late = tokio::spawn({
            let outlet = outlet.clone();
            async move { outlet.send(Bytes::from_static(b"late")).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!late.is_finished());
        assert_eq!(messages.recv().await, "0");
        late.await.unwrap().unwrap();
        for i in 1..CAPACITY {
            assert_eq!(messages.recv().await, i.to_string());
        }
        assert_eq!(messages.recv().await, "late");
        assert!(messages.try_recv().is_none());
    }

    #[tokio::test]
    async fn a_waiting_reader_wakes_and_a_closed_outlet_refuses() {
        let (outlet, messages) = outlet();
        let reader = tokio::spawn(async move {
            let first = messages.recv().await;
            (first, messages)
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        outlet.send(Bytes::from_static(b"hello")).await.unwrap();
        let (first, messages) = reader.await.unwrap();
        assert_eq!(first, "hello");
        drop(messages);
        assert!(outlet.send(Bytes::from_static(b"gone")).await.is_err());
    }

    #[tokio::test]
    async fn a_sender_waiting_for_room_learns_the_response_is_gone() {
        let (outlet, messages) = outlet();
        for _ in 0..CAPACITY {
            outlet.send(Bytes::from_static(b"x")).await.unwrap();
        }
        let waiting = tokio::spawn({
            let outlet = outlet.clone();
            async move { outlet.send(Bytes::from_static(b"y")).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(messages);
        assert!(waiting.await.unwrap().is_err());
    }
}
