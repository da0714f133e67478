//! Automatic batching: calls and notifications made close together go out
//! as one batch frame, and each caller still gets its own result. Over HTTP
//! one request then carries what took many; on a connection, one frame and
//! one write do.
//!
//! The first call to arrive opens a batch; calls arriving within the linger
//! window (or already queued) join it until it holds `max_entries` calls or
//! `max_bytes` of requests; then it is sent and the next call opens a new
//! one. A batch of one goes out as a plain request.

use std::future::{Future, IntoFuture};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::caller::{null, Batch, BoxFuture, CallError, Delivery, Outgoing};
use crate::message::Limits;

/// Settings for automatic batching; see
/// [`ClientBuilder::auto_batch`](super::ClientBuilder::auto_batch).
///
/// ```
/// use std::time::Duration;
/// use jrpc::client::AutoBatch;
///
/// // Up to 32 calls per batch, gathered for at most 2 ms.
/// let batching = AutoBatch::new(32).linger(Duration::from_millis(2));
/// assert_eq!(batching.max_entries(), 32);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoBatch {
    max_entries: usize,
    max_bytes: usize,
    linger: Duration,
}

impl AutoBatch {
    /// The default linger window: 1 ms.
    pub const DEFAULT_LINGER: Duration = Duration::from_millis(1);

    /// Batches of at most `max_entries` calls (at least 1), gathered for at
    /// most [`DEFAULT_LINGER`](Self::DEFAULT_LINGER), of at most half a
    /// jrpc server's default frame limit (4 MiB).
    pub fn new(max_entries: usize) -> Self {
        AutoBatch {
            max_entries: max_entries.max(1),
            max_bytes: Limits::DEFAULT_MAX_FRAME_LEN / 2,
            linger: Self::DEFAULT_LINGER,
        }
    }

    /// How long the first call of a batch waits for others to join it
    /// (zero: only calls already queued join).
    pub fn linger(mut self, linger: Duration) -> Self {
        self.linger = linger;
        self
    }

    /// The most bytes of requests in one batch (counted with a generous
    /// envelope per request): keep it within the server's frame limit. A
    /// single call larger than this goes alone.
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes.max(1);
        self
    }

    /// The most calls in one batch: keep it within the server's batch
    /// limit.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// The linger window.
    pub fn linger_window(&self) -> Duration {
        self.linger
    }

    /// The most bytes of requests in one batch.
    pub fn max_batch_bytes(&self) -> usize {
        self.max_bytes
    }
}

/// Where gathered calls go: a connection (or HTTP endpoint) that can send
/// one call, or a batch.
pub(crate) trait BatchSink: Send + Sync + 'static {
    /// Sends one call past any middleware.
    fn send_one(&self, call: Outgoing) -> BoxFuture<'_, Result<Box<RawValue>, CallError>>;

    /// Starts a batch on a live connection, waiting at most `patience` for
    /// one (while reconnecting); with what counts the batch as load on its
    /// connection until it is done.
    fn batch(&self, patience: Duration) -> BoxFuture<'_, Result<(Batch, Option<LoadGuard>), CallError>>;
}

/// Keeps a batch counted as load on its connection while it lives.
pub(crate) type LoadGuard = Box<dyn Send>;

/// A call waiting to be gathered.
struct Queued {
    call: Outgoing,
    /// Its request's size, about: method, params and the envelope.
    size: usize,
    reply: oneshot::Sender<Result<Box<RawValue>, CallError>>,
}

/// The most batches in flight at once per client: past it, gathering
/// waits, the queue fills, and callers wait to be queued.
const MAX_GROUPS_IN_FLIGHT: usize = 64;

/// What a request adds to a batch besides its method and params: the
/// envelope, an id of up to 20 digits, the comma.
const ENVELOPE: usize = 80;

/// The calling end of the gathering task, which starts with the first call
/// and ends when the last clone is dropped.
#[derive(Clone)]
pub(crate) struct Batcher {
    state: Arc<BatcherState>,
}

struct BatcherState {
    settings: AutoBatch,
    sink: Arc<dyn BatchSink>,
    /// Made on first use, inside the runtime (a client may be built
    /// outside one).
    queue: std::sync::OnceLock<mpsc::Sender<Queued>>,
}

impl Batcher {
    /// A batcher for `sink`; nothing runs until the first call.
    pub(crate) fn new(settings: AutoBatch, sink: Arc<dyn BatchSink>) -> Batcher {
        Batcher {
            state: Arc::new(BatcherState {
                settings,
                sink,
                queue: std::sync::OnceLock::new(),
            }),
        }
    }

    fn queue(&self) -> &mpsc::Sender<Queued> {
        let state = &self.state;
        state.queue.get_or_init(|| {
            // Enough room that callers rarely wait to be queued, bounded so
            // that a stalled connection pushes back on them.
            let (queue, queued) = mpsc::channel(state.settings.max_entries.saturating_mul(4).max(64));
            tokio::spawn(gather(state.settings, queued, Arc::clone(&state.sink)));
            queue
        })
    }

    /// Queues `call` for the next batch and waits for its own result,
    /// within its timeout.
    pub(crate) async fn send(&self, call: Outgoing) -> Result<Box<RawValue>, CallError> {
        let timeout = call.timeout();
        let size = call.method().len() + call.params().map_or(0, |p| p.get().len()) + ENVELOPE;
        let (reply, result) = oneshot::channel();
        let waiting = async {
            self.queue()
                .send(Queued { call, size, reply })
                .await
                .map_err(|_| CallError::Closed("the client is closed".into()))?;
            result
                .await
                .unwrap_or_else(|_| Err(CallError::Closed("the batch was dropped".into())))
        };
        tokio::time::timeout(timeout, waiting)
            .await
            .unwrap_or(Err(CallError::Timeout(timeout)))
    }
}

/// Gathers queued calls into batches and sends each on its own task, until
/// every [`Batcher`] is gone.
async fn gather(settings: AutoBatch, mut queued: mpsc::Receiver<Queued>, sink: Arc<dyn BatchSink>) {
    let groups = Arc::new(tokio::sync::Semaphore::new(MAX_GROUPS_IN_FLIGHT));
    let mut carried: Option<Queued> = None;
    loop {
        let first = match carried.take() {
            Some(first) => first,
            None => match queued.recv().await {
                Some(first) => first,
                None => return,
            },
        };
        let deadline = Instant::now() + settings.linger;
        // The batch's brackets, then each request.
        let mut bytes = 2 + first.size;
        let mut group = vec![first];
        while group.len() < settings.max_entries {
            let next = match queued.try_recv() {
                Ok(next) => next,
                Err(mpsc::error::TryRecvError::Disconnected) => break,
                Err(mpsc::error::TryRecvError::Empty) => {
                    match tokio::time::timeout_at(deadline, queued.recv()).await {
                        Ok(Some(next)) => next,
                        Ok(None) | Err(_) => break,
                    }
                }
            };
            if bytes + next.size > settings.max_bytes {
                // It opens the next batch.
                carried = Some(next);
                break;
            }
            bytes += next.size;
            group.push(next);
        }
        let Ok(turn) = Arc::clone(&groups).acquire_owned().await else {
            return;
        };
        let sink = Arc::clone(&sink);
        tokio::spawn(async move {
            send_group(&*sink, group).await;
            drop(turn);
        });
    }
}

/// Sends one gathered group and hands each caller its result.
async fn send_group(sink: &dyn BatchSink, group: Vec<Queued>) {
    // Callers that gave up while their call waited: it is not sent.
    let mut group: Vec<Queued> = group.into_iter().filter(|q| !q.reply.is_closed()).collect();
    if group.len() <= 1 {
        if let Some(Queued { call, reply, .. }) = group.pop() {
            deliver(sink.send_one(call), reply).await;
        }
        return;
    }
    // Waiting for a connection as long as the most patient call may.
    let patience = group.iter().map(|q| q.call.timeout()).max().unwrap_or_default();
    let (mut batch, _load) = match sink.batch(patience).await {
        Ok(batch) => batch,
        Err(error) => {
            // No connection to send it on: none of it left.
            for Queued { call, reply, .. } in group {
                if let Some(delivery) = Delivery::of(&call) {
                    delivery.mark_unsent();
                }
                let _ = reply.send(Err(error.clone()));
            }
            return;
        }
    };
    let mut calls = Vec::with_capacity(group.len());
    let mut notified = Vec::new();
    // Whether each call went out, for the retry layer above it: with the
    // frame, unless it could not even be registered.
    let mut with_frame = Vec::new();
    for Queued { call, reply, .. } in group {
        let delivery = Delivery::of(&call);
        let timeout = call.timeout();
        let (method, params, notification, _) = call.into_parts();
        if notification {
            batch.notify(&method, &params);
            notified.push(reply);
            with_frame.extend(delivery);
        } else {
            let result = batch.call::<Box<RawValue>>(&method, &params).timeout(timeout);
            match (result.is_registered(), delivery) {
                (true, Some(delivery)) => with_frame.push(delivery),
                (false, Some(delivery)) => delivery.mark_unsent(),
                (_, None) => {}
            }
            calls.push((result, reply));
        }
    }
    let delivery = (!with_frame.is_empty()).then(Delivery::default);
    let sent = batch.send_tracked(delivery.as_ref()).await;
    if let Some(delivery) = delivery {
        for each in with_frame {
            if delivery.was_unsent() {
                each.mark_unsent();
            } else {
                each.mark_sent();
            }
        }
    }
    if let Err(error) = sent {
        for reply in notified
            .into_iter()
            .chain(calls.into_iter().map(|(_, reply)| reply))
        {
            let _ = reply.send(Err(error.clone()));
        }
        return;
    }
    for reply in notified {
        let _ = reply.send(Ok(null()));
    }
    join_all(
        calls
            .into_iter()
            .map(|(result, reply)| deliver(result.into_future(), reply)),
    )
    .await;
}

/// Hands `result` to its caller, or drops it (which cancels the call where
/// the connection has cancellation) once the caller stopped waiting.
async fn deliver<T>(result: impl Future<Output = T>, mut reply: oneshot::Sender<T>) {
    let outcome = tokio::select! {
        outcome = result => Some(outcome),
        () = reply.closed() => None,
    };
    if let Some(outcome) = outcome {
        let _ = reply.send(outcome);
    }
}
