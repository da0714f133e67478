//! A pool of connections to one stream or WebSocket target: each call goes
//! on the least loaded live connection (the fewest calls in flight), and a
//! connection that drops is replaced in the background, with backoff,
//! while the others carry the calls.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Notify;

use super::reconnect::Connector;
use super::retry::Retry;
use crate::caller::{Batch, CallError};
use crate::peer::Peer;

/// One connection of the pool.
struct Slot {
    /// The connection, or the closed one until it is replaced.
    peer: Mutex<Peer>,
    in_flight: AtomicUsize,
}

pub(crate) struct Pool {
    connector: Arc<Connector>,
    slots: Vec<Slot>,
    /// Where the next search for the least loaded starts, so that ties
    /// take turns.
    next: AtomicUsize,
    /// Set by `close`: no more calls, no more replacements.
    closing: AtomicBool,
    /// Woken when a connection is replaced, for calls waiting for one.
    replaced: Notify,
}

/// A call (or batch) in flight on a slot; the slot counts it until this
/// drops.
pub(crate) struct Busy {
    pool: Arc<Pool>,
    slot: usize,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.pool.slots[self.slot]
            .in_flight
            .fetch_sub(1, Ordering::Relaxed);
    }
}

impl Pool {
    /// A pool of `size` connections, `first` among them; the others are
    /// opened now (any failure fails the pool, closing what was opened).
    /// Dropped connections are replaced on the connector's schedule.
    pub(crate) async fn start(
        connector: Arc<Connector>,
        first: Peer,
        size: usize,
    ) -> Result<Arc<Pool>, CallError> {
        let mut peers = vec![first];
        for _ in 1..size {
            match connector.attempt().await {
                Ok(peer) => peers.push(peer),
                Err(e) => {
                    peers.iter().for_each(Peer::close);
                    return Err(e);
                }
            }
        }
        let slots = peers
            .into_iter()
            .map(|peer| Slot {
                peer: Mutex::new(peer),
                in_flight: AtomicUsize::new(0),
            })
            .collect();
        let pool = Arc::new(Pool {
            connector: Arc::clone(&connector),
            slots,
            next: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            replaced: Notify::new(),
        });
        for slot in 0..pool.slots.len() {
            tokio::spawn(keep_up(Arc::downgrade(&pool), Arc::clone(&connector), slot));
        }
        Ok(pool)
    }

    fn peer_at(&self, slot: usize) -> Peer {
        self.slots[slot]
            .peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The least loaded live connection, counted busy until the guard
    /// drops; an error (as never sent) when none is live.
    pub(crate) fn pick(self: &Arc<Self>) -> Result<(Peer, Busy), CallError> {
        if self.closing.load(Ordering::Relaxed) {
            return Err(CallError::Closed("the client is closed".into()));
        }
        let count = self.slots.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let mut best: Option<(usize, usize, Peer)> = None;
        for offset in 0..count {
            let slot = (start + offset) % count;
            let peer = self.peer_at(slot);
            if peer.is_refusing() {
                continue;
            }
            let load = self.slots[slot].in_flight.load(Ordering::Relaxed);
            if best.as_ref().map_or(true, |(_, least, _)| load < *least) {
                best = Some((slot, load, peer));
            }
        }
        let (slot, _, peer) =
            best.ok_or_else(|| CallError::Closed("no live connection in the pool: reconnecting".into()))?;
        self.slots[slot].in_flight.fetch_add(1, Ordering::Relaxed);
        let busy = Busy {
            pool: Arc::clone(self),
            slot,
        };
        Ok((peer, busy))
    }

    /// As [`pick`](Self::pick), but when no connection is live and calls
    /// wait (not [failing fast](super::Reconnect::fail_fast)), waits for a
    /// replacement; the caller bounds the wait.
    pub(crate) async fn pick_waiting(self: &Arc<Self>) -> Result<(Peer, Busy), CallError> {
        loop {
            let replaced = self.replaced.notified();
            tokio::pin!(replaced);
            // Registered before looking, so a replacement in between wakes.
            replaced.as_mut().enable();
            match self.pick() {
                Ok(picked) => return Ok(picked),
                Err(e) if self.connector.settings.fails_fast() || self.closing.load(Ordering::Relaxed) => {
                    return Err(e)
                }
                Err(_) => replaced.await,
            }
        }
    }

    /// A batch on the least loaded live connection (counted busy for as
    /// long as the guard lives), or on a closed one, where sending fails as
    /// a batch would.
    pub(crate) fn batch(self: &Arc<Self>) -> (Batch, Option<Busy>) {
        match self.pick() {
            Ok((peer, busy)) => (peer.batch(), Some(busy)),
            Err(_) => (self.any().batch(), None),
        }
    }

    /// Some connection, live or not (for settings such as the call timeout).
    pub(crate) fn any(&self) -> Peer {
        self.peer_at(0)
    }

    /// Closes every connection, replaces none, and waits until they are
    /// closed; the last reason.
    pub(crate) async fn close(&self) -> Arc<str> {
        self.closing.store(true, Ordering::Relaxed);
        self.replaced.notify_waiters();
        let peers: Vec<Peer> = (0..self.slots.len()).map(|slot| self.peer_at(slot)).collect();
        peers.iter().for_each(Peer::close);
        let mut reason: Arc<str> = "closed".into();
        for peer in peers {
            reason = peer.closed().await;
        }
        reason
    }

    /// How many connections are live now.
    pub(crate) fn live(&self) -> usize {
        (0..self.slots.len())
            .filter(|slot| !self.peer_at(*slot).is_refusing())
            .count()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for slot in &self.slots {
            slot.peer.lock().unwrap_or_else(|e| e.into_inner()).close();
        }
    }
}

/// Watches one slot: when its connection closes, makes a new one (with
/// backoff, for as long as the pool lives and is not closing) and puts it
/// in its place. Holds only the connector while dialing, never the pool.
async fn keep_up(pool: Weak<Pool>, connector: Arc<Connector>, slot: usize) {
    let wanted = || pool.upgrade().is_some_and(|p| !p.closing.load(Ordering::Relaxed));
    loop {
        let Some(peer) = pool.upgrade().map(|p| p.peer_at(slot)) else {
            return;
        };
        // Holding a peer does not keep its connection open.
        peer.closed().await;
        drop(peer);
        let schedule = connector.settings.schedule();
        let mut attempt: u32 = 0;
        loop {
            if !wanted() {
                return;
            }
            match connector.attempt().await {
                Ok(peer) => match pool.upgrade().filter(|p| !p.closing.load(Ordering::Relaxed)) {
                    Some(live) => {
                        *live.slots[slot].peer.lock().unwrap_or_else(|e| e.into_inner()) = peer;
                        live.replaced.notify_waiters();
                        tracing::debug!(slot, "pool connection replaced");
                        break;
                    }
                    None => {
                        peer.close();
                        return;
                    }
                },
                Err(e) => {
                    // Past the schedule's attempts, keep trying at its
                    // longest wait: a pool does not give up on a slot.
                    let wait = schedule.wait(attempt.min(schedule.attempts), None);
                    tracing::debug!(slot, error = %e, ?wait, "cannot replace a pool connection yet");
                    tokio::time::sleep(wait).await;
                    attempt = attempt.saturating_add(1);
                }
            }
        }
    }
}

/// The schedule a pool replaces connections on when none is given: forever,
/// from 100 ms up to 5 s apart.
pub(crate) fn default_schedule() -> Retry {
    Retry::exponential(
        u32::MAX,
        std::time::Duration::from_millis(100),
        std::time::Duration::from_secs(5),
    )
}
