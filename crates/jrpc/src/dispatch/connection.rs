//! Serving the frames of one live connection, as they are read: each
//! request served on the spot when it can be, else on a task of its own
//! within the connection's bounds; notifications in arrival order;
//! responses handed to the calls waiting for them; batches through the
//! one batch engine. Replies go to the connection's outbox, those of one
//! burst of reading together.
//!
//! Nothing here lets the reader stop reading for long: responses to this
//! side's calls must always get through, or handlers waiting on them (a
//! server calling back its client) would wait forever. So requests beyond
//! the connection's bound are refused with `-32007` rather than queued,
//! notifications beyond their queue are dropped (and logged), and only a
//! full outbox (a peer that does not read) holds the reader.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::FutureExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::batch::Batch;
use super::cancel::{Cancellation, Registration};
use super::ordering::{Notifications, Turnstile};
use super::outbox::{Outbound, Outbox};
use super::serve::{self, error_reply, Owned};
use crate::caller::Outcome;
use crate::context::Extensions;
use crate::message::{self, parse_frame, Error, Frame, Id, Incoming, Response, ResponseRef};
use crate::router::Router;
use crate::transport::{OutFrame, OutKind};

/// The calls this side made on the connection, waiting for responses: the
/// engine hands them what it reads (the peer keeps the table).
pub(crate) trait Calls {
    /// Whether `response` answers nothing this side asked, and must be
    /// answered `-32600`.
    fn is_stray(&self, response: &ResponseRef<'_>) -> bool;
    /// Takes the call `response` answers off the table: where its outcome goes.
    fn waiter_of(&self, response: &ResponseRef<'_>) -> Option<tokio::sync::oneshot::Sender<Outcome>>;
    /// An item that is not a valid message but carries the id of a call
    /// waiting for its response fails that call at once.
    fn fail_invalid_reply(&self, id: &Id);
}

/// Per-connection bounds on incoming requests served later than on the spot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// Handlers running at once.
    pub(crate) running: usize,
    /// Requests accepted but not finished (running or waiting to run);
    /// more are refused with `-32007`.
    pub(crate) queued: usize,
    /// Requests wait for the notifications that arrived before them.
    pub(crate) ordered: bool,
    /// Responses wait for the notifications that arrived before them.
    pub(crate) ordered_responses: bool,
}

/// A connection as its serving tasks share it: its router, what is known
/// of it, its outbox, its cancellation.
pub(crate) struct ConnectionContext {
    pub(crate) router: Router,
    /// What is known about the connection, for handlers.
    pub(crate) connection: Arc<Extensions>,
    pub(crate) outbox: Outbox,
    pub(crate) cancellation: Option<Arc<Cancellation>>,
    /// Whether the connection's sink reads the kinds of frames: else
    /// replies go out as [`OutKind::Unknown`], their ids not copied.
    pub(crate) kinds: bool,
}

impl ConnectionContext {
    /// The kind of a reply to the request `id`.
    fn reply(&self, id: &Id) -> OutKind {
        if self.kinds {
            OutKind::Reply(id.clone())
        } else {
            OutKind::Unknown
        }
    }
}

/// Room for the replies of a burst, reserved at its first: a small reply is
/// about 40 bytes, a window of 64 calls about 2.5 KiB.
const JOINED_CAPACITY: usize = 1024;

/// The engine serving one connection's incoming frames; its reader owns it.
pub(crate) struct Engine {
    shared: Arc<ConnectionContext>,
    /// Handler tasks and the notification worker; dropping aborts them.
    tasks: JoinSet<()>,
    notifications: Notifications,
    running: Arc<Semaphore>,
    queued: Arc<Semaphore>,
    /// Closing gracefully: new requests are refused, responses still routed.
    draining: bool,
    bounds: Bounds,
    /// Requests that waited for notifications start in arrival order.
    turns: Turnstile,
    /// Frames produced while handling the current burst of reading.
    burst: Vec<OutFrame>,
    /// Replies answered on the spot in this burst and not yet in `burst`,
    /// one after another: one buffer (and one shared `Bytes`, sliced) for
    /// all of them, instead of a vector and a `Bytes` header each.
    joined: Vec<u8>,
    /// Where each reply in `joined` ends.
    joined_ends: Vec<usize>,
    /// The id each reply in `joined` answers, when the sink reads kinds.
    joined_ids: Vec<Id>,
}

fn busy(reason: &str) -> Error {
    Error::server_busy().with_data(reason)
}

/// The refusal of a request read while the connection closes.
pub(crate) fn closing() -> Error {
    busy("the connection is closing")
}

impl Engine {
    pub(crate) fn new(shared: Arc<ConnectionContext>, bounds: Bounds) -> Self {
        Engine {
            shared,
            tasks: JoinSet::new(),
            notifications: Notifications::new(),
            running: Arc::new(Semaphore::new(bounds.running.max(1))),
            queued: Arc::new(Semaphore::new(bounds.queued.max(bounds.running).max(1))),
            draining: false,
            bounds,
            turns: Turnstile::default(),
            burst: Vec::new(),
            joined: Vec::new(),
            joined_ends: Vec::new(),
            joined_ids: Vec::new(),
        }
    }

    /// Takes no new requests from now on (they are refused); the
    /// notification worker ends once its queue is done.
    pub(crate) fn drain(&mut self) {
        self.draining = true;
        self.notifications.close();
    }

    pub(crate) fn is_draining(&self) -> bool {
        self.draining
    }

    /// Whether requests or notifications are being served.
    pub(crate) fn is_working(&self) -> bool {
        self.tasks.len() > usize::from(self.notifications.worker_started) || self.notifications.pending()
    }

    /// Whether any task is still running.
    pub(crate) fn has_tasks(&self) -> bool {
        !self.tasks.is_empty()
    }

    /// Waits for the next task to end (pending forever with none).
    pub(crate) async fn join_next(&mut self) {
        if self.tasks.join_next().await.is_none() {
            std::future::pending::<()>().await;
        }
    }

    /// After reading has ended: lets the handlers finish, unless `kill`
    /// fires first (then they are aborted).
    pub(crate) async fn finish(&mut self, kill: &CancellationToken) {
        self.notifications.close();
        let killed = kill.cancelled();
        tokio::pin!(killed);
        loop {
            tokio::select! {
                biased;
                () = &mut killed => {
                    self.tasks.abort_all();
                    return;
                }
                next = self.tasks.join_next() => if next.is_none() { return },
            }
        }
    }

    /// Answers with one error of the given id (a framing error, say).
    pub(crate) fn send_error(&mut self, id: Id, error: Error) {
        let kind = self.shared.reply(&id);
        let reply = Response {
            id,
            outcome: Err(error),
        }
        .to_bytes();
        self.send(OutFrame::new(reply, kind));
    }

    /// Serves one frame read from the connection.
    pub(crate) async fn on_frame(&mut self, frame: &[u8], calls: &impl Calls) {
        // Borrowed, not cloned: an `Arc` counted up and down per frame is
        // two atomic operations, a few percent of a small call.
        match parse_frame(frame, self.shared.router.parse_limits()) {
            Err(error) => self.send_error(Id::NULL, error),
            Ok(Frame::Single(item)) => self.on_item(item, calls),
            Ok(Frame::Batch(items)) => self.on_batch(items, calls),
        }
    }

    /// Handles the one item of a frame.
    fn on_item(&mut self, item: Incoming<'_>, calls: &impl Calls) {
        let item = match self.route(item, calls) {
            Routed::Done => return,
            Routed::Answer { reply, id } => {
                let kind = self.shared.reply(&id);
                return self.send(OutFrame::new(reply, kind));
            }
            Routed::Serve(item) => item,
        };
        if self.holds_back() {
            // Earlier notifications are still being handled: this request
            // waits for them, on its own task.
            if let Incoming::Request(request) = item {
                let barrier = self.notifications.queued;
                self.spawn_request(Owned::request(request), Some(barrier));
            }
            return;
        }
        // Straight after the burst's other replies answered on the spot.
        if self.joined.capacity() == 0 {
            self.joined.reserve(JOINED_CAPACITY);
        }
        let start = self.joined.len();
        // The reply's id, taken before the item is served (only for a sink
        // that reads kinds: one check otherwise).
        let kept_id = self.shared.kinds
            && match &item {
                Incoming::Request(request) => {
                    self.joined_ids.push(request.id.clone());
                    true
                }
                _ => false,
            };
        let left = serve::inline(
            &self.shared.router,
            item,
            &self.shared.connection,
            &mut self.joined,
        );
        if self.joined.len() > start {
            self.joined_ends.push(self.joined.len());
        } else if kept_id {
            // Not answered on the spot: no reply of its own in `joined`.
            self.joined_ids.pop();
        }
        if let Some(Incoming::Request(request)) = left {
            self.spawn_request(Owned::request(request), None);
        }
    }

    /// Serves a batch: each entry as if it came alone (bounded, cancellable,
    /// ordered, through the middleware), through the batch engine, whose
    /// reply is one frame once the last entry is in.
    fn on_batch(&mut self, items: Vec<Incoming<'_>>, calls: &impl Calls) {
        let mut batch = Batch::new(items.len());
        for item in items {
            let item = match self.route(item, calls) {
                Routed::Done => continue,
                Routed::Answer { reply: out, .. } => {
                    batch.answer(|reply| reply.extend_from_slice(&out));
                    continue;
                }
                Routed::Serve(item) => item,
            };
            let barrier = self.holds_back().then_some(self.notifications.queued);
            let left = match barrier {
                Some(_) => Some(item),
                None => {
                    batch.answer(|out| serve::inline(&self.shared.router, item, &self.shared.connection, out))
                }
            };
            let Some(Incoming::Request(request)) = left else {
                continue;
            };
            let Ok(queued) = Arc::clone(&self.queued).try_acquire_owned() else {
                let error = busy("too many requests in flight on this connection");
                batch.answer(|out| message::write_error(out, request.version, &request.id, &error));
                continue;
            };
            let cancel = self.shared.cancellation.as_ref().map(|c| c.register(&request.id));
            batch.later(
                true,
                Entry {
                    call: Owned::request(request),
                    barrier,
                    queued,
                    cancel,
                },
            );
        }
        if batch.is_settled() {
            if let Some(reply) = batch.settled() {
                self.send(OutFrame::new(reply, OutKind::Replies));
            }
            return;
        }
        let shared = Arc::clone(&self.shared);
        let running = Arc::clone(&self.running);
        let handled = self.notifications.handled.clone();
        let concurrency = shared.router.batch_limit();
        self.tasks.spawn(async move {
            let reply = batch
                .run(concurrency, |entry| {
                    let (shared, running, mut handled) =
                        (Arc::clone(&shared), Arc::clone(&running), handled.clone());
                    let Entry {
                        call,
                        barrier,
                        queued,
                        cancel,
                    } = entry;
                    let version = call.version;
                    let serving = async move {
                        let _queued = queued;
                        if let Some(barrier) = barrier {
                            let _ = handled.wait_for(|n| *n >= barrier).await;
                        }
                        let _running = running.acquire_owned().await;
                        serve_owned(shared, call).await
                    };
                    cancellable(cancel, version, serving)
                })
                .await;
            if let Some(reply) = reply {
                let _ = shared.outbox.send(OutFrame::new(reply, OutKind::Replies)).await;
            }
        });
    }

    /// Whether requests must wait now for notifications read before them.
    fn holds_back(&self) -> bool {
        self.bounds.ordered && self.notifications.pending()
    }

    /// Routes what is not this side's to serve now: responses to the calls
    /// waiting for them, notifications to their worker, requests while
    /// closing to a refusal.
    fn route<'a>(&mut self, item: Incoming<'a>, calls: &impl Calls) -> Routed<'a> {
        match item {
            Incoming::Response(response) if self.bounds.ordered_responses && self.notifications.pending() => {
                // Notifications that came before it are still being
                // handled (a server's progress before its result): the
                // caller gets the response after them. Taken off the
                // pending calls now, so that the connection ending
                // meanwhile does not fail a call already answered.
                let Some(waiter) = calls.waiter_of(&response) else {
                    tracing::debug!(id = %response.id, "response to no pending call");
                    return Routed::Done;
                };
                let barrier = self.notifications.queued;
                let mut handled = self.notifications.handled.clone();
                let outcome = crate::caller::answered(response);
                tokio::spawn(async move {
                    // Ends early if the worker stops (the connection closed).
                    let _ = handled.wait_for(|n| *n >= barrier).await;
                    let _ = waiter.send(outcome);
                });
                Routed::Done
            }
            Incoming::Response(response) => {
                if calls.is_stray(&response) {
                    return Routed::Answer {
                        reply: error_reply(response.version, &response.id, &Error::invalid_request()),
                        id: response.id,
                    };
                }
                match calls.waiter_of(&response) {
                    Some(tx) => {
                        let _ = tx.send(crate::caller::answered(response));
                    }
                    None => tracing::debug!(id = %response.id, "response to no pending call"),
                }
                Routed::Done
            }
            Incoming::Notification(notification) => {
                if let Some(cancellation) = self.shared.cancellation.as_ref() {
                    if cancellation.is_cancel(&notification.method) {
                        cancellation.cancel(notification.params);
                        return Routed::Done;
                    }
                }
                let call = Owned::notification(notification);
                let shared = &self.shared;
                self.notifications
                    .push(&shared.router, &shared.connection, &mut self.tasks, call);
                Routed::Done
            }
            Incoming::Request(request) if self.draining => Routed::Answer {
                reply: error_reply(request.version, &request.id, &closing()),
                id: request.id,
            },
            Incoming::Invalid(invalid) => {
                // A malformed reply to a call of ours fails that call.
                calls.fail_invalid_reply(&invalid.id);
                Routed::Answer {
                    reply: error_reply(invalid.version, &invalid.id, &invalid.error),
                    id: invalid.id,
                }
            }
            item => Routed::Serve(item),
        }
    }

    /// Runs a request's handler on its own task, within the bounds. With a
    /// `barrier`, the handler first waits until that many notifications
    /// have been handled, and then takes its turn in arrival order.
    fn spawn_request(&mut self, call: Owned, barrier: Option<u64>) {
        let id = call.id.clone().unwrap_or(Id::NULL);
        let version = call.version;
        let Ok(queued) = Arc::clone(&self.queued).try_acquire_owned() else {
            let busy = busy("too many requests in flight on this connection");
            let reply = error_reply(version, &id, &busy);
            let kind = self.shared.reply(&id);
            return self.send(OutFrame::new(reply, kind));
        };
        let shared = Arc::clone(&self.shared);
        let register = |shared: &ConnectionContext| shared.cancellation.as_ref().map(|c| c.register(&id));
        // A call through middleware is polled here once, as a plain handler
        // would run: most finish at once (sync handlers, quick layers) and
        // need no task of their own. One that does not moves to a task.
        if barrier.is_none() && shared.router.has_layers() {
            if let Ok(running) = Arc::clone(&self.running).try_acquire_owned() {
                let mut serving = Box::pin(serve_layered(Arc::clone(&shared), call));
                if let Some(out) = (&mut serving).now_or_never() {
                    if !out.is_empty() {
                        let kind = self.shared.reply(&id);
                        self.send(OutFrame::new(out, kind));
                    }
                    return;
                }
                // Only a call that waits can be cancelled: registered now
                // (this reader reads the cancel notifications, so none
                // came in between), not before every call.
                let cancel = register(&shared);
                self.tasks.spawn(async move {
                    let _queued = queued;
                    let _running = running;
                    let out = cancellable(cancel, version, serving).await;
                    if !out.is_empty() {
                        let kind = shared.reply(&id);
                        let _ = shared.outbox.send(OutFrame::new(out, kind)).await;
                    }
                });
                return;
            }
        }
        let cancel = register(&shared);
        let running = Arc::clone(&self.running);
        let mut handled = self.notifications.handled.clone();
        let turn = barrier.map(|_| self.turns.take());
        self.tasks.spawn(async move {
            let _queued = queued;
            let serving = async {
                if let Some(barrier) = barrier {
                    let _ = handled.wait_for(|n| *n >= barrier).await;
                }
                match turn {
                    // Woken together once the notifications are done, these
                    // requests start one by one in the order they arrived:
                    // each runs until it first waits, as a request that
                    // needed no barrier would have.
                    Some(turn) => {
                        turn.wait().await;
                        let _running = running.acquire_owned().await;
                        let mut serving = Box::pin(serve_owned(Arc::clone(&shared), call));
                        let first = (&mut serving).now_or_never();
                        turn.done();
                        match first {
                            Some(out) => out,
                            None => serving.await,
                        }
                    }
                    None => {
                        let _running = running.acquire_owned().await;
                        serve_owned(Arc::clone(&shared), call).await
                    }
                }
            };
            let out = cancellable(cancel, version, serving).await;
            if !out.is_empty() {
                let kind = shared.reply(&id);
                let _ = shared.outbox.send(OutFrame::new(out, kind)).await;
            }
        });
    }

    /// Queues `frame` with the others of this burst of reading.
    fn send(&mut self, frame: OutFrame) {
        // Replies answered on the spot before it go before it.
        self.seal_joined();
        if self.burst.is_empty() {
            // Most bursts are a few frames: room for them up front.
            self.burst.reserve(8);
        }
        self.burst.push(frame);
    }

    /// Hands the frames of this burst to the writer, all at once (one
    /// queue operation and one wakeup for them, not one each). Frames sent
    /// meanwhile by handler tasks (their replies, and what a handler sends
    /// through `ctx.peer()`) go to the writer directly and may overtake
    /// them: JSON-RPC orders neither replies nor a reply against other
    /// messages.
    pub(crate) async fn end_burst(&mut self) {
        self.seal_joined();
        if !self.burst.is_empty() {
            let frames = std::mem::take(&mut self.burst);
            // Fails only once the writer is gone, and then nothing can be sent.
            let _ = self.shared.outbox.send(Outbound::Frames(frames)).await;
        }
    }

    /// Moves the replies gathered in `joined` into `burst`, each a slice
    /// of one `Bytes`.
    fn seal_joined(&mut self) {
        let mut ids = self.joined_ids.drain(..);
        let mut kind = || ids.next().map_or(OutKind::Unknown, OutKind::Reply);
        match self.joined_ends.len() {
            0 => return,
            1 => {
                let reply = Bytes::from(std::mem::take(&mut self.joined));
                self.burst.push(OutFrame::new(reply, kind()));
            }
            n => {
                let joined = Bytes::from(std::mem::take(&mut self.joined));
                self.burst.reserve(n);
                let mut start = 0;
                for &end in &self.joined_ends {
                    self.burst.push(OutFrame::new(joined.slice(start..end), kind()));
                    start = end;
                }
            }
        }
        drop(ids);
        self.joined_ends.clear();
    }
}

/// What [`Engine::route`] made of an item.
enum Routed<'a> {
    /// Nothing more to do.
    Done,
    /// Answered: this is its reply, to the item of this id.
    Answer { reply: Vec<u8>, id: Id },
    /// A request or notification to serve.
    Serve(Incoming<'a>),
}

/// A batch entry served later than on the spot.
struct Entry {
    call: Owned,
    /// Notifications to wait for first (`ordered` mode).
    barrier: Option<u64>,
    /// Its place among the connection's requests in flight.
    queued: OwnedSemaphorePermit,
    cancel: Option<Registration>,
}

/// Serves `serving` unless the request is cancelled first.
async fn cancellable(
    cancel: Option<Registration>,
    version: message::Version,
    serving: impl std::future::Future<Output = Vec<u8>>,
) -> Vec<u8> {
    match cancel {
        Some(cancel) => cancel.serve(version, serving).await,
        None => serving.await,
    }
}

/// Serves a request copied out of its frame; the reply to send.
async fn serve_owned(shared: Arc<ConnectionContext>, call: Owned) -> Vec<u8> {
    let mut out = Vec::new();
    serve::owned(&shared.router, call, &shared.connection, &mut out).await;
    out
}

/// Serves a request through the router's middleware; the reply to send.
/// A future of its own, apart from [`serve_owned`]: boxed for every call,
/// it is kept small.
async fn serve_layered(shared: Arc<ConnectionContext>, call: Owned) -> Vec<u8> {
    let mut out = Vec::new();
    serve::layered(&shared.router, call, &shared.connection, &mut out).await;
    out
}
