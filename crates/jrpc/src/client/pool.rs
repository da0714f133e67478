//! A pool of connections to one stream or WebSocket target: each call goes
//! on the least loaded live connection (the fewest calls in flight), and a
//! connection that drops is replaced in the background, with backoff,
//! while the others carry the calls.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::reconnect::{open, Reconnect};
use super::Retry;
use crate::caller::{Batch, CallError};
use crate::peer::{Peer, PeerBuilder};
use crate::transport::DynDialer;

/// One connection of the pool.
struct Slot {
    /// The connection, or the closed one until it is replaced.
    peer: Mutex<Peer>,
    in_flight: AtomicUsize,
}

pub(crate) struct Pool {
    dialer: Box<dyn DynDialer>,
    template: Mutex<PeerBuilder>,
    settings: Reconnect,
    slots: Vec<Slot>,
    /// Where the next search for the least loaded starts, so that ties
    /// take turns.
    next: AtomicUsize,
}

/// A call in flight on a slot; the slot counts it until this drops.
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
    /// dialed now. Dropped connections are replaced on `settings`'
    /// schedule, each attempt with its hook.
    pub(crate) async fn start(
        dialer: Box<dyn DynDialer>,
        template: PeerBuilder,
        first: Peer,
        size: usize,
        settings: Reconnect,
    ) -> Result<Arc<Pool>, CallError> {
        let template = Mutex::new(template);
        let mut peers = vec![first];
        for _ in 1..size {
            let connection = dialer
                .dial_boxed()
                .await
                .map_err(|e| CallError::Io(Arc::new(e)))?;
            match open(connection, &template, settings.hook()).await {
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
            dialer,
            template,
            settings,
            slots,
            next: AtomicUsize::new(0),
        });
        for slot in 0..pool.slots.len() {
            tokio::spawn(keep_up(Arc::downgrade(&pool), slot));
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

    /// A batch on the least loaded live connection.
    pub(crate) fn batch(self: &Arc<Self>) -> Batch {
        match self.pick() {
            Ok((peer, _busy)) => peer.batch(),
            // On a closed connection: its send fails, as a batch would.
            Err(_) => self.any().batch(),
        }
    }

    /// Some connection, live or not (for settings such as the call timeout).
    pub(crate) fn any(&self) -> Peer {
        self.peer_at(0)
    }

    /// Closes every connection and waits until they are closed; the last
    /// reason.
    pub(crate) async fn close(&self) -> Arc<str> {
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

/// Watches one slot: when its connection closes, dials a new one (with
/// backoff, for as long as the pool lives) and puts it in its place.
async fn keep_up(pool: Weak<Pool>, slot: usize) {
    loop {
        let Some(peer) = pool.upgrade().map(|p| p.peer_at(slot)) else {
            return;
        };
        // Holding a peer does not keep its connection open.
        peer.closed().await;
        drop(peer);
        let mut attempt = 0;
        loop {
            // Only a weak hold between attempts: a pool no one uses goes.
            let Some(live) = pool.upgrade() else {
                return;
            };
            let opened = match live.dialer.dial_boxed().await {
                Ok(connection) => open(connection, &live.template, live.settings.hook()).await,
                Err(e) => Err(CallError::Io(Arc::new(e))),
            };
            let schedule = live.settings.schedule();
            match opened {
                Ok(peer) => {
                    *live.slots[slot].peer.lock().unwrap_or_else(|e| e.into_inner()) = peer;
                    tracing::debug!(slot, "pool connection replaced");
                    break;
                }
                Err(e) => {
                    drop(live);
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
