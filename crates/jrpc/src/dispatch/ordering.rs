//! Ordering on a connection: notifications are handled one at a time in
//! arrival order (by a worker that starts with the first one), and requests
//! held back behind them (`ordered` mode) start in arrival order too.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::serve::{self, Owned};
use crate::context::Extensions;
use crate::router::Router;

/// Notifications waiting for their handler, at most.
const NOTIFICATION_QUEUE: usize = 1024;

/// The queue to the notification worker, which starts with the first
/// notification: most connections never get one, and an idle connection
/// should not hold a task and a queue for them.
pub(crate) struct Notifications {
    queue: Queue,
    pub(crate) worker_started: bool,
    /// Notifications handed to the worker so far.
    pub(crate) queued: u64,
    /// Notifications the worker has finished.
    pub(crate) handled: watch::Receiver<u64>,
}

enum Queue {
    /// No notification yet: the worker's progress counter, for when it starts.
    NotStarted(watch::Sender<u64>),
    Open(mpsc::Sender<Owned>),
    /// Closing: notifications are dropped, and the worker ends once it has
    /// handled those already queued.
    Closed,
}

impl Notifications {
    pub(crate) fn new() -> Self {
        let (handled_tx, handled) = watch::channel(0u64);
        Notifications {
            queue: Queue::NotStarted(handled_tx),
            worker_started: false,
            queued: 0,
            handled,
        }
    }

    pub(crate) fn close(&mut self) {
        self.queue = Queue::Closed;
    }

    /// Whether notifications handed over have not all been handled yet.
    pub(crate) fn pending(&self) -> bool {
        *self.handled.borrow() < self.queued
    }

    /// Queues a notification for the worker (started on first use); says
    /// why not when it cannot be.
    pub(crate) fn push(
        &mut self,
        router: &Router,
        connection: &Arc<Extensions>,
        tasks: &mut JoinSet<()>,
        call: Owned,
    ) {
        self.queue = match std::mem::replace(&mut self.queue, Queue::Closed) {
            Queue::NotStarted(handled) => {
                let (queue, received) = mpsc::channel(NOTIFICATION_QUEUE);
                tasks.spawn(worker(router.clone(), Arc::clone(connection), received, handled));
                self.worker_started = true;
                Queue::Open(queue)
            }
            started_or_closed => started_or_closed,
        };
        let Queue::Open(queue) = &self.queue else {
            return tracing::debug!(method = %call.method, "notification while closing dropped");
        };
        if queue.try_send(call).is_err() {
            tracing::warn!("notification queue full: notification dropped");
        } else {
            self.queued += 1;
        }
    }
}

/// Runs notification handlers one at a time, in arrival order.
async fn worker(
    router: Router,
    connection: Arc<Extensions>,
    mut queue: mpsc::Receiver<Owned>,
    handled: watch::Sender<u64>,
) {
    while let Some(call) = queue.recv().await {
        serve::owned(&router, call, &connection, &mut Vec::new()).await;
        handled.send_modify(|n| *n += 1);
    }
}

/// Hands out turns in arrival order: a request's turn comes once every
/// earlier one has started (or gone away).
#[derive(Default)]
pub(crate) struct Turnstile {
    next_ticket: u64,
    state: Arc<watch::Sender<TurnState>>,
}

#[derive(Default)]
struct TurnState {
    /// The ticket whose turn it is.
    serving: u64,
    /// Tickets given up before their turn came.
    skipped: std::collections::BTreeSet<u64>,
}

impl TurnState {
    fn advance(&mut self) {
        self.serving += 1;
        while self.skipped.remove(&self.serving) {
            self.serving += 1;
        }
    }
}

impl Turnstile {
    pub(crate) fn take(&mut self) -> Turn {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        Turn {
            ticket,
            state: Arc::clone(&self.state),
            done: false,
        }
    }
}

/// One request's place in the [`Turnstile`].
pub(crate) struct Turn {
    ticket: u64,
    state: Arc<watch::Sender<TurnState>>,
    done: bool,
}

impl Turn {
    pub(crate) async fn wait(&self) {
        let mut state = self.state.subscribe();
        let _ = state.wait_for(|s| s.serving == self.ticket).await;
    }

    /// This request has started: the next may.
    pub(crate) fn done(mut self) {
        self.done = true;
        self.state.send_modify(TurnState::advance);
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // Cancelled before (or while) taking its turn: never hold up the rest.
        let ticket = self.ticket;
        self.state.send_modify(|s| {
            if s.serving == ticket {
                s.advance();
            } else if s.serving < ticket {
                s.skipped.insert(ticket);
            }
        });
    }
}
