//! State shared by a connection's tasks and every handle to it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::caller::CallError;
use crate::caller::{BoxOutgoingService, Outcome};
use crate::dispatch::connection::ConnectionContext;
use crate::dispatch::outbox::Outbox;
use crate::dispatch::CancelProtocol;
use crate::message::{Id, ResponseRef};

/// Where a pending call's outcome goes.
pub(crate) type Waiter = oneshot::Sender<Outcome>;

pub(crate) struct PeerState {
    /// What serving the connection's incoming messages takes (its reader
    /// and [`Peer::serve_call`](super::Peer::serve_call) share it): the
    /// outbox and the cancel protocol among it.
    pub(crate) dispatch: Arc<ConnectionContext>,
    pub(crate) call_timeout: Duration,
    /// Middleware around this side's calls, when any is installed.
    pub(crate) outgoing: Option<BoxOutgoingService>,
    next_id: AtomicU64,
    calls: Mutex<Calls>,
    /// Graceful close: take no new requests, finish the ones in flight.
    pub(crate) stop_reading: CancellationToken,
    /// Hard stop: abort whatever is still running and drop the connection.
    pub(crate) kill: CancellationToken,
    /// Set once the connection is fully closed, with why.
    pub(crate) closed_tx: watch::Sender<Option<Arc<str>>>,
}

/// The outgoing calls awaiting a response, and whether the connection can
/// still carry new ones.
struct Calls {
    pending: HashMap<u64, Waiter>,
    /// Why no new call can be made, once that is so.
    refused: Option<CallError>,
}

impl PeerState {
    pub(crate) fn new(
        dispatch: Arc<ConnectionContext>,
        call_timeout: Duration,
        outgoing: Option<BoxOutgoingService>,
    ) -> Self {
        PeerState {
            dispatch,
            call_timeout,
            outgoing,
            next_id: AtomicU64::new(1),
            calls: Mutex::new(Calls {
                pending: HashMap::new(),
                refused: None,
            }),
            stop_reading: CancellationToken::new(),
            kill: CancellationToken::new(),
            closed_tx: watch::channel(None).0,
        }
    }

    /// Frames to write, in order, bounded in bytes.
    pub(crate) fn outbox(&self) -> &Outbox {
        &self.dispatch.outbox
    }

    /// How calls are cancelled across the connection, when they are.
    pub(crate) fn cancel_protocol(&self) -> Option<&CancelProtocol> {
        self.dispatch.cancellation.as_ref().map(|c| &c.protocol)
    }

    fn calls(&self) -> MutexGuard<'_, Calls> {
        // A panic while holding this lock cannot leave the table inconsistent
        // (every update is a single insert or remove), so poisoning is moot.
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a new outgoing call: its id and where its outcome will go.
    pub(crate) fn register(&self) -> Result<(u64, oneshot::Receiver<Outcome>), CallError> {
        let mut calls = self.calls();
        if let Some(error) = &calls.refused {
            return Err(error.clone());
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        calls.pending.insert(id, tx);
        Ok((id, rx))
    }

    /// The error a new call would fail with now that the connection is
    /// closing.
    pub(crate) fn refusal(&self) -> CallError {
        self.calls()
            .refused
            .clone()
            .unwrap_or_else(|| CallError::Closed("connection closed".into()))
    }

    /// Whether outgoing calls are waiting for their answers.
    pub(crate) fn has_pending_calls(&self) -> bool {
        !self.calls().pending.is_empty()
    }

    /// Whether new calls are refused (the connection is closing or closed).
    pub(crate) fn is_refusing(&self) -> bool {
        self.calls().refused.is_some()
    }

    /// Forgets a call (answered elsewhere, timed out or dropped). Returns
    /// whether it was still pending.
    pub(crate) fn forget(&self, id: u64) -> bool {
        self.calls().pending.remove(&id).is_some()
    }

    /// Whether `id` is one this side has issued for an outgoing call.
    fn issued(&self, id: &Id) -> bool {
        let next = self.next_id.load(Ordering::Relaxed);
        id.as_number_text()
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n >= 1 && n < next)
    }

    /// Whether an incoming response must be answered `-32600`: it answers
    /// nothing this side ever asked (late answers to calls that timed out or
    /// were cancelled are expected and dropped quietly). An Invalid Request
    /// error is never answered, so that two peers cannot bounce errors back
    /// and forth.
    pub(crate) fn is_stray(&self, response: &ResponseRef<'_>) -> bool {
        let bounced =
            matches!(&response.outcome, Err(e) if e.code() == crate::message::codes::INVALID_REQUEST);
        // An error with a null id says the peer could not read a request's
        // id: it answers a call of ours (see `take_waiter`), never a stray.
        let unreadable = response.id.is_null() && response.outcome.is_err();
        !bounced && !unreadable && !self.issued(&response.id)
    }

    /// The caller `response` answers, no longer pending.
    ///
    /// An error with a null id is the peer saying it could not read a
    /// request's id (the request did not parse, say): when exactly one call
    /// is waiting, the answer is that call's; with several, nothing tells
    /// which, so none is taken (their timeouts decide) and a warning says
    /// why.
    pub(crate) fn waiter_of(&self, response: &ResponseRef<'_>) -> Option<Waiter> {
        if response.id.is_null() && response.outcome.is_err() {
            return self.take_sole_waiter();
        }
        self.take_waiter(&response.id)
    }

    /// The caller waiting for the response with `id`, no longer pending.
    pub(crate) fn take_waiter(&self, id: &Id) -> Option<Waiter> {
        let key = id.as_number_text().and_then(|n| n.parse::<u64>().ok())?;
        self.calls().pending.remove(&key)
    }

    fn take_sole_waiter(&self) -> Option<Waiter> {
        let mut calls = self.calls();
        let waiting = calls.pending.len();
        if waiting != 1 {
            if waiting > 1 {
                tracing::warn!(
                    waiting,
                    "the peer answered a request it could not read (id null); \
                     with {waiting} calls waiting, none can be told to be it"
                );
            }
            return None;
        }
        let key = *calls.pending.keys().next()?;
        calls.pending.remove(&key)
    }

    /// An item that is not a valid message but carries the id of a call
    /// waiting for its response (both `result` and `error`, an error
    /// object without a message, ...): that call fails at once instead of
    /// waiting for its timeout.
    pub(crate) fn fail_invalid_reply(&self, id: &Id) {
        if let Some(tx) = self.take_waiter(id) {
            let _ = tx.send(Err(CallError::Protocol(
                format!("the reply with id {id} is not a valid response object").into(),
            )));
        }
    }

    /// Refuses new calls and fails every pending one with `error`, at once.
    pub(crate) fn fail_calls(&self, error: CallError) {
        let pending = {
            let mut calls = self.calls();
            calls.refused.get_or_insert(error.clone());
            std::mem::take(&mut calls.pending)
        };
        for (_, tx) in pending {
            let _ = tx.send(Err(error.clone()));
        }
    }

    /// Marks the connection fully closed.
    pub(crate) fn set_closed(&self, reason: Arc<str>) {
        self.closed_tx.send_if_modified(|slot| {
            if slot.is_none() {
                *slot = Some(reason);
                true
            } else {
                false
            }
        });
    }
}
