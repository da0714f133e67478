//! The queue of frames a connection has yet to write to its peer, bounded
//! in bytes as well as in entries.
//!
//! A peer that sends requests and never reads their replies must not make
//! this side hold its replies without limit: one queued entry can carry a
//! whole burst of replies, so a bound in entries alone is no bound in
//! memory. Every entry takes room for its bytes before it is queued, and
//! the writer gives the room back once the bytes are flushed to the
//! transport. When the room is spent, whoever sends waits — the reader
//! too, so the connection stops reading until the peer reads.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, Notify};

use crate::transport::OutFrame;

/// What the writer writes: one frame, or the frames (replies above all)
/// the reader produced in one burst of reading, handed over at once.
pub(crate) enum Outbound {
    Frame(OutFrame),
    Frames(Vec<OutFrame>),
}

impl Outbound {
    fn len(&self) -> usize {
        match self {
            Outbound::Frame(frame) => frame.len(),
            Outbound::Frames(frames) => frames.iter().map(OutFrame::len).sum(),
        }
    }
}

impl From<OutFrame> for Outbound {
    fn from(frame: OutFrame) -> Self {
        Outbound::Frame(frame)
    }
}

/// Entries the queue holds at most, whatever their size.
const ENTRIES: usize = 256;

/// The sending side; cheap to clone.
#[derive(Clone)]
pub(crate) struct Outbox {
    tx: mpsc::Sender<Queued>,
    room: Arc<Room>,
}

/// The writer's side.
pub(crate) struct OutboxReceiver {
    rx: mpsc::Receiver<Queued>,
    room: Arc<Room>,
}

/// An entry and the room it holds until it is written.
pub(crate) struct Queued {
    pub(crate) outbound: Outbound,
    pub(crate) room: u64,
}

/// The entry came back: the writer is gone (`Closed`), or there is no room
/// for it now (`Full`).
pub(crate) enum TrySendError {
    Full(Outbound),
    Closed,
}

/// The bytes queued or being written, against the most there may be. An
/// atomic count, not a semaphore: taking and giving back room is one
/// atomic operation each while there is room, and only a sender that
/// waits costs a wakeup.
struct Room {
    max: u64,
    used: AtomicU64,
    /// Senders waiting for room.
    waiting: AtomicUsize,
    freed: Notify,
    closed: AtomicBool,
}

impl Room {
    /// Takes `room` if it fits (an entry of `max` fits only an empty queue).
    fn try_take(&self, room: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used + room <= self.max).then_some(used + room)
            })
            .is_ok()
    }

    async fn take(&self, room: u64) -> Result<(), Closed> {
        loop {
            if self.closed.load(Ordering::Acquire) {
                return Err(Closed);
            }
            if self.try_take(room) {
                return Ok(());
            }
            // Registered before the second look, so that room given back
            // in between still wakes this sender.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            self.waiting.fetch_add(1, Ordering::SeqCst);
            let fits = self.closed.load(Ordering::SeqCst) || self.try_take(room);
            if !fits {
                freed.await;
            }
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            if fits {
                return if self.closed.load(Ordering::Acquire) {
                    Err(Closed)
                } else {
                    Ok(())
                };
            }
        }
    }

    fn give_back(&self, room: u64) {
        self.used.fetch_sub(room, Ordering::AcqRel);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.freed.notify_waiters();
        }
    }

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.freed.notify_waiters();
    }
}

/// A queue that holds at most `max_bytes` of frames not yet written (at
/// least one byte; an entry larger than that waits for an empty queue).
pub(crate) fn outbox(max_bytes: usize) -> (Outbox, OutboxReceiver) {
    let room = Arc::new(Room {
        max: max_bytes.max(1) as u64,
        used: AtomicU64::new(0),
        waiting: AtomicUsize::new(0),
        freed: Notify::new(),
        closed: AtomicBool::new(false),
    });
    let (tx, rx) = mpsc::channel(ENTRIES);
    (
        Outbox {
            tx,
            room: Arc::clone(&room),
        },
        OutboxReceiver { rx, room },
    )
}

impl Outbox {
    fn room_for(&self, outbound: &Outbound) -> u64 {
        (outbound.len() as u64).min(self.room.max)
    }

    /// Queues `outbound` once there is room for it. Fails only once the
    /// writer is gone, and then nothing can be sent.
    pub(crate) async fn send(&self, outbound: impl Into<Outbound>) -> Result<(), Closed> {
        let outbound = outbound.into();
        let room = self.room_for(&outbound);
        self.room.take(room).await?;
        self.tx.send(Queued { outbound, room }).await.map_err(|_| {
            self.room.give_back(room);
            Closed
        })
    }

    /// Queues `outbound` if there is room for it now.
    pub(crate) fn try_send(&self, outbound: impl Into<Outbound>) -> Result<(), TrySendError> {
        let outbound = outbound.into();
        let room = self.room_for(&outbound);
        if self.room.closed.load(Ordering::Acquire) {
            return Err(TrySendError::Closed);
        }
        if !self.room.try_take(room) {
            return Err(TrySendError::Full(outbound));
        }
        self.tx.try_send(Queued { outbound, room }).map_err(|e| {
            // The room taken for it goes back.
            self.room.give_back(room);
            match e {
                mpsc::error::TrySendError::Full(queued) => TrySendError::Full(queued.outbound),
                mpsc::error::TrySendError::Closed(_) => TrySendError::Closed,
            }
        })
    }
}

/// The writer is gone.
#[derive(Debug)]
pub(crate) struct Closed;

impl OutboxReceiver {
    /// The next entry; `None` once every sender is gone.
    pub(crate) async fn recv(&mut self) -> Option<Queued> {
        self.rx.recv().await
    }

    /// The next entry if one is queued.
    pub(crate) fn try_recv(&mut self) -> Option<Queued> {
        self.rx.try_recv().ok()
    }

    /// Gives back the room of entries whose bytes the transport has taken.
    pub(crate) fn written(&self, room: u64) {
        if room > 0 {
            self.room.give_back(room);
        }
    }

    /// No more entries will be written: senders waiting for room, and any
    /// that come later, fail at once.
    pub(crate) fn close(&mut self) {
        self.room.close();
        self.rx.close();
    }
}

impl Drop for OutboxReceiver {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(len: usize) -> OutFrame {
        OutFrame::from(vec![b'x'; len])
    }

    #[tokio::test]
    async fn room_is_held_until_written() {
        let (tx, mut rx) = outbox(100);
        tx.send(frame(60)).await.unwrap();
        assert!(matches!(tx.try_send(frame(60)), Err(TrySendError::Full(_))));
        let queued = rx.recv().await.unwrap();
        // Taken from the queue is not written yet: still no room.
        assert!(matches!(tx.try_send(frame(60)), Err(TrySendError::Full(_))));
        rx.written(queued.room);
        assert!(tx.try_send(frame(60)).is_ok());
    }

    #[tokio::test]
    async fn a_burst_counts_all_its_frames() {
        let (tx, mut rx) = outbox(100);
        tx.send(Outbound::Frames(vec![frame(30), frame(30), frame(30)]))
            .await
            .unwrap();
        assert_eq!(rx.recv().await.unwrap().room, 90);
        assert!(matches!(tx.try_send(frame(20)), Err(TrySendError::Full(_))));
    }

    #[tokio::test]
    async fn an_entry_larger_than_the_room_waits_for_an_empty_queue() {
        let (tx, mut rx) = outbox(100);
        tx.send(frame(10)).await.unwrap();
        let big = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(frame(1_000)).await }
        });
        tokio::task::yield_now().await;
        assert!(!big.is_finished());
        let first = rx.recv().await.unwrap();
        rx.written(first.room);
        big.await.unwrap().unwrap();
        assert_eq!(rx.recv().await.unwrap().room, 100);
    }

    #[tokio::test]
    async fn senders_waiting_for_room_fail_once_the_writer_is_gone() {
        let (tx, rx) = outbox(10);
        tx.send(frame(10)).await.unwrap();
        let waiting = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(frame(10)).await }
        });
        tokio::task::yield_now().await;
        drop(rx);
        assert!(waiting.await.unwrap().is_err());
        assert!(matches!(tx.try_send(frame(1)), Err(TrySendError::Closed)));
    }
}
