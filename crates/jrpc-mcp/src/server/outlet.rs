//! A modern request's outlet: the notifications its handler sends before
//! it answers (progress, log messages), on their way to the HTTP response
//! that carries them. Most requests send none, so an outlet costs one small
//! allocation until a message is queued — a channel would allocate its
//! buffer for every request.

// Only Streamable HTTP opens outlets (stdio's notifications go to the peer).
#![cfg_attr(not(feature = "http"), allow(dead_code))]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::Notify;

/// How many messages wait for the response before a sender waits too.
const CAPACITY: usize = 64;

/// A new outlet: its sending side, and the side the response reads.
pub(crate) fn outlet() -> (Outlet, Messages) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            closed: false,
        }),
        sent: Notify::new(),
        taken: Notify::new(),
    });
    (
        Outlet {
            shared: Arc::clone(&shared),
        },
        Messages { shared },
    )
}

struct Shared {
    state: Mutex<State>,
    /// A message was queued.
    sent: Notify,
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

/// The response that carried a request's messages is gone.
#[derive(Debug)]
pub(crate) struct Closed;

/// Where a handler sends its request's messages.
#[derive(Clone)]
pub(crate) struct Outlet {
    shared: Arc<Shared>,
}

impl Outlet {
    /// Queues `message`, waiting while the response is [`CAPACITY`] behind;
    /// `Err` once the response is gone.
    pub(crate) async fn send(&self, message: Bytes) -> Result<(), Closed> {
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
                    self.shared.sent.notify_one();
                    return Ok(());
                }
            }
            taken.await;
        }
    }
}

/// What the response reads: the messages, in the order they were sent.
/// Dropping it closes the outlet.
pub(crate) struct Messages {
    shared: Arc<Shared>,
}

impl Messages {
    /// The next message, if one is queued.
    pub(crate) fn try_recv(&self) -> Option<Bytes> {
        let message = self.shared.state().queue.pop_front();
        if message.is_some() {
            self.shared.taken.notify_waiters();
        }
        message
    }

    /// The next message, once one is sent.
    pub(crate) async fn recv(&self) -> Bytes {
        loop {
            // `notify_one` keeps a permit when nobody waits, so a message
            // queued between the look and the wait is not missed.
            let sent = self.shared.sent.notified();
            if let Some(message) = self.try_recv() {
                return message;
            }
            sent.await;
        }
    }
}

impl Drop for Messages {
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
