//! The tasks that run one connection: a reader that routes every incoming
//! item, a writer that coalesces outgoing frames, a worker that runs
//! notification handlers in arrival order, and one task per request served
//! by an async handler.
//!
//! Nothing here lets the reader stop reading for long: responses to this
//! side's calls must always get through, or handlers waiting on them (a
//! server calling back its client) would wait forever. So requests beyond
//! the connection's bound are refused with `-32007` rather than queued,
//! notifications beyond their queue are dropped (and logged), and only a
//! full outgoing queue (a peer that does not read) holds the reader.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{FutureExt, Sink, SinkExt, Stream, StreamExt};
use serde_json::value::RawValue;
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::outbox::{Outbound, OutboxReceiver};
use super::state::{InFlight, PeerState};
use super::CallError;
use crate::codec::Inbound;
use crate::message::{
    self, codes, parse_frame, Error, Frame, Id, Incoming, NotificationRef, RequestRef, Response, Version,
};
use crate::middleware::Call;

use crate::transport::CloseReason as EofReason;

/// How long to wait for an [`EofReason`] before settling for the plain one.
const EOF_REASON_WAIT: Duration = Duration::from_secs(2);

/// Notifications waiting for their handler, at most.
const NOTIFICATION_QUEUE: usize = 1024;

/// Per-connection bounds on incoming requests served by async handlers.
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
    /// Close the connection after this long with nothing read and no call
    /// in flight (servers' network connections only).
    pub(crate) idle: Option<Duration>,
    /// Close the connection when one write waits this long for the peer.
    pub(crate) write_timeout: Option<Duration>,
}

fn busy(reason: &str) -> Error {
    Error::server_busy().with_data(reason)
}

pub(crate) fn start<S, K>(
    shared: Arc<PeerState>,
    stream: S,
    sink: K,
    outbox: OutboxReceiver,
    bounds: Bounds,
    eof_reason: Option<EofReason>,
    resources: Vec<Box<dyn std::any::Any + Send>>,
) where
    S: Stream<Item = io::Result<Inbound>> + Send + Unpin + 'static,
    K: Sink<Bytes, Error = io::Error> + Send + Unpin + 'static,
{
    let finish = CancellationToken::new();
    let writer = tokio::spawn(write_loop(
        Arc::clone(&shared),
        sink,
        outbox,
        bounds.write_timeout,
        finish.clone(),
    ));
    let (handled_tx, handled) = watch::channel(0u64);
    let mut reader = Reader {
        shared: Arc::clone(&shared),
        tasks: JoinSet::new(),
        notifications: Notifications::new(handled_tx),
        running: Arc::new(Semaphore::new(bounds.running.max(1))),
        queued: Arc::new(Semaphore::new(bounds.queued.max(bounds.running).max(1))),
        draining: false,
        ordered: bounds.ordered,
        ordered_responses: bounds.ordered_responses,
        notifications_queued: 0,
        notifications_handled: handled,
        idle: bounds.idle,
        last_heard: tokio::time::Instant::now(),
        turns: Turnstile::default(),
        framed: false,
        burst: Vec::new(),
        joined: Vec::new(),
        joined_ends: Vec::new(),
    };
    tokio::spawn(async move {
        let ended = reader.run(stream).await;
        // What was answered before reading ended goes out too.
        reader.end_burst().await;
        let reason: Arc<str> = match ended {
            Ended::Eof => match eof_reason {
                Some(better) => tokio::time::timeout(EOF_REASON_WAIT, better)
                    .await
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| "end of stream".to_owned())
                    .into(),
                None => "end of stream".into(),
            },
            Ended::Closed => match shared.refusal() {
                CallError::Io(e) => format!("write error: {e}").into(),
                _ => "closed by this side".into(),
            },
            Ended::Failed(e) => {
                // The connection is broken (reset, say): no reply can reach
                // the other side, so its handlers are cancelled and the
                // connection released now, not when they would have ended.
                // A clean end of stream (a half-close) still lets requests
                // already read finish and answer.
                shared.fail_calls(CallError::Io(Arc::clone(&e)));
                shared.kill.cancel();
                format!("read error: {e}").into()
            }
            Ended::Killed => "aborted".into(),
            Ended::OverBudget => {
                "the server's budget for unfinished frames is spent: closed by this side".into()
            }
            Ended::Idle(limit) => format!("idle for {limit:?}: closed by this side").into(),
        };
        // Nothing more will be read, so no response can come: fail every
        // pending call now. Requests already read are still answered.
        shared.fail_calls(CallError::Closed(Arc::clone(&reason)));
        reader.finish().await;
        finish.cancel();
        tokio::select! {
            result = writer => match result {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!(error = %e, "writer ended with an error"),
                // The runtime is shutting down.
                Err(e) if e.is_cancelled() => {}
                Err(e) => tracing::error!(error = %e, "writer task failed"),
            },
            () = shared.kill.cancelled() => {}
        }
        shared.set_closed(reason);
        // Whatever the connection owned (a child process) goes last.
        drop(resources);
    });
}

/// Writes frames as they come, coalescing whatever is queued into one flush.
/// On `finish`, writes what is left and closes the sink. The room frames
/// hold in the outbox is given back once they are flushed; a write that
/// waits longer than `write_timeout` for the peer to take its bytes ends
/// the connection.
async fn write_loop<K>(
    shared: Arc<PeerState>,
    mut sink: K,
    mut outbox: OutboxReceiver,
    write_timeout: Option<Duration>,
    finish: CancellationToken,
) -> io::Result<()>
where
    K: Sink<Bytes, Error = io::Error> + Unpin,
{
    let writing = async {
        let mut writer = Writer {
            sink: &mut sink,
            limit: write_timeout,
            unflushed: 0,
        };
        // One waiter for the whole loop, not one per frame.
        let finished = finish.cancelled();
        tokio::pin!(finished);
        loop {
            let queued = tokio::select! {
                biased;
                queued = outbox.recv() => queued,
                () = &mut finished => {
                    while let Some(queued) = outbox.try_recv() {
                        writer.feed(queued).await?;
                    }
                    break;
                }
            };
            let Some(queued) = queued else { break };
            writer.feed(queued).await?;
            while let Some(queued) = outbox.try_recv() {
                writer.feed(queued).await?;
            }
            // Under load the reader is still answering what it read in the
            // same burst: one turn for it first, so that those replies go
            // out in this write instead of one write (and one wakeup of the
            // other side) each.
            tokio::task::yield_now().await;
            while let Some(queued) = outbox.try_recv() {
                writer.feed(queued).await?;
            }
            writer.flush().await?;
            outbox.written(std::mem::take(&mut writer.unflushed));
        }
        writer.within(|sink| sink.close()).await
    };
    let result: io::Result<()> = tokio::select! {
        result = writing => result,
        () = shared.kill.cancelled() => Ok(()),
    };
    // Nothing more is written: whoever waits for room in the outbox (the
    // reader among them) stops waiting.
    outbox.close();
    if let Err(e) = &result {
        // The other side is gone: stop reading and fail every call.
        let e = Arc::new(io::Error::new(e.kind(), e.to_string()));
        shared.fail_calls(CallError::Io(e));
        shared.stop_reading.cancel();
    }
    result
}

/// The sink, with what it holds unflushed and how long a write may wait.
struct Writer<'a, K> {
    sink: &'a mut K,
    limit: Option<Duration>,
    /// The outbox room of the frames fed since the last flush.
    unflushed: u64,
}

impl<K> Writer<'_, K>
where
    K: Sink<Bytes, Error = io::Error> + Unpin,
{
    async fn feed(&mut self, queued: crate::peer::outbox::Queued) -> io::Result<()> {
        self.unflushed = self.unflushed.saturating_add(queued.room);
        let outbound = queued.outbound;
        self.within(|sink| feed(sink, outbound)).await
    }

    async fn flush(&mut self) -> io::Result<()> {
        self.within(|sink| sink.flush()).await
    }

    /// Runs a write, failing it when the peer takes nothing for longer
    /// than the limit.
    async fn within<'s, F, Fut>(&'s mut self, write: F) -> io::Result<()>
    where
        F: FnOnce(&'s mut K) -> Fut,
        Fut: std::future::Future<Output = io::Result<()>> + 's,
    {
        let Some(limit) = self.limit else {
            return write(self.sink).await;
        };
        // Most writes finish at once: no timer for them.
        let mut write = std::pin::pin!(write(self.sink));
        if let Some(result) = futures_util::FutureExt::now_or_never(write.as_mut()) {
            return result;
        }
        match tokio::time::timeout(limit, write).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the peer took no output for {limit:?}"),
            )),
        }
    }
}

/// Hands `outbound` to the sink, unflushed.
async fn feed<K>(sink: &mut K, outbound: Outbound) -> io::Result<()>
where
    K: Sink<Bytes, Error = io::Error> + Unpin,
{
    match outbound {
        Outbound::Frame(frame) => {
            crate::transport::trace_frame(">", &frame);
            sink.feed(frame).await
        }
        Outbound::Frames(frames) => {
            for frame in frames {
                crate::transport::trace_frame(">", &frame);
                sink.feed(frame).await?;
            }
            Ok(())
        }
    }
}

enum Ended {
    Eof,
    Closed,
    /// Nothing read and no call in flight for this long.
    Idle(Duration),
    Failed(Arc<io::Error>),
    /// The server's budget for unfinished frames was spent: answered
    /// `-32007`, nothing more read.
    OverBudget,
    Killed,
}

struct Reader {
    shared: Arc<PeerState>,
    /// Handler tasks and the notification worker; dropping aborts them.
    tasks: JoinSet<()>,
    notifications: Notifications,
    running: Arc<Semaphore>,
    queued: Arc<Semaphore>,
    /// Closing gracefully: new requests are refused, responses still routed.
    draining: bool,
    /// Requests wait for the notifications that arrived before them.
    ordered: bool,
    /// Responses wait for the notifications that arrived before them.
    ordered_responses: bool,
    /// Notifications handed to the worker so far.
    notifications_queued: u64,
    /// Notifications the worker has finished.
    notifications_handled: watch::Receiver<u64>,
    /// The idle limit, if this connection has one.
    idle: Option<Duration>,
    /// When something was last read.
    last_heard: tokio::time::Instant,
    /// Requests that waited for notifications start in arrival order.
    turns: Turnstile,
    /// A JSON text has come: the framing agrees, so later garbage is just
    /// garbage, not a framing mismatch.
    framed: bool,
    /// Frames produced while handling the current burst of reading.
    burst: Vec<Bytes>,
    /// Replies answered inline in this burst and not yet in `burst`, one
    /// after another: one buffer (and one shared `Bytes`, sliced) for all
    /// of them, instead of a vector and a `Bytes` header each.
    joined: Vec<u8>,
    /// Where each reply in `joined` ends.
    joined_ends: Vec<usize>,
}

/// Room for the replies of a burst, reserved at its first: a small reply is
/// about 40 bytes, a window of 64 calls about 2.5 KiB.
const JOINED_CAPACITY: usize = 1024;

/// Room for a batch entry's reply written inline (other inline replies go
/// into the burst's joined buffer): a small result fits without growing.
const REPLY_CAPACITY: usize = 128;

/// Frames taken from the read buffer per wake-up of the reader.
const READY_FRAMES_PER_ROUND: usize = 64;

impl Reader {
    async fn run<S>(&mut self, mut stream: S) -> Ended
    where
        S: Stream<Item = io::Result<Inbound>> + Unpin,
    {
        let shared = Arc::clone(&self.shared);
        let stopped = shared.stop_reading.cancelled();
        let killed = shared.kill.cancelled();
        // Far enough never to fire when there is no idle limit.
        let quiet = tokio::time::sleep(self.idle.unwrap_or(Duration::from_secs(86_400 * 365)));
        tokio::pin!(stopped, killed, quiet);
        loop {
            if self.draining && self.tasks.is_empty() {
                return Ended::Closed;
            }
            tokio::select! {
                biased;
                () = &mut killed => return Ended::Killed,
                () = &mut stopped, if !self.draining => {
                    // Take no new work; the worker ends once its queue is done.
                    self.draining = true;
                    self.notifications.close();
                }
                Some(_) = self.tasks.join_next(), if !self.tasks.is_empty() => {}
                () = &mut quiet, if self.idle.is_some() && !self.draining => {
                    let limit = self.idle.unwrap_or_default();
                    let now = tokio::time::Instant::now();
                    if now >= self.last_heard + limit && !self.busy() {
                        return Ended::Idle(limit);
                    }
                    // Heard from since, or still working: look again later.
                    quiet.as_mut().reset((self.last_heard + limit).max(now + limit / 4));
                }
                item = stream.next() => {
                    if self.idle.is_some() {
                        self.last_heard = tokio::time::Instant::now();
                    }
                    if let Some(ended) = self.on_inbound(item).await {
                        return ended;
                    }
                    // Frames already buffered are taken without another
                    // round through the select (and its two cancellation
                    // checks); a bounded number, so that stopping is prompt.
                    for _ in 1..READY_FRAMES_PER_ROUND {
                        if self.draining {
                            break;
                        }
                        let Some(item) = stream.next().now_or_never() else { break };
                        if let Some(ended) = self.on_inbound(item).await {
                            return ended;
                        }
                    }
                    self.end_burst().await;
                }
            }
        }
    }

    /// Whether a call is in flight either way: an incoming one being served
    /// (the notification worker, once started, is among the tasks), a
    /// notification waiting, or an outgoing one waiting for its answer.
    fn busy(&self) -> bool {
        self.tasks.len() > usize::from(self.notifications.worker_started)
            || *self.notifications_handled.borrow() < self.notifications_queued
            || self.shared.has_pending_calls()
    }

    /// Before the first JSON text: marks the connection framed when this
    /// frame is one, or says the framing disagrees (Content-Length headers
    /// on a line-delimited connection, with calls of ours waiting).
    fn framing_mismatch(&mut self, frame: &[u8]) -> Option<Ended> {
        if matches!(frame.iter().find(|b| !b.is_ascii_whitespace()), Some(b'{' | b'[')) {
            self.framed = true;
            return None;
        }
        let headers = frame.len() >= 15 && frame[..15].eq_ignore_ascii_case(b"content-length:");
        if !headers || !self.shared.has_pending_calls() {
            return None;
        }
        Some(Ended::Failed(Arc::new(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: the other side sends Content-Length headers, this side reads one JSON text per line: use content-length framing",
                crate::codec::FRAMING_MISMATCH
            ),
        ))))
    }

    /// Handles one item from the frame stream; `Some` when reading ends.
    async fn on_inbound(&mut self, item: Option<io::Result<Inbound>>) -> Option<Ended> {
        match item {
            None => return Some(Ended::Eof),
            Some(Err(e)) => return Some(Ended::Failed(Arc::new(e))),
            Some(Ok(Inbound::Frame(frame))) => {
                crate::transport::trace_frame("<", &frame);
                // Until a JSON text has come, a Content-Length header line
                // means the framing disagrees: waiting for replies that
                // cannot be read would only end in timeouts, so name it.
                // Once framed, nothing more is looked at per frame.
                if !self.framed {
                    if let Some(ended) = self.framing_mismatch(&frame) {
                        return Some(ended);
                    }
                }
                self.on_frame(frame).await
            }
            Some(Ok(Inbound::Oversized { limit })) => {
                tracing::warn!(limit, "oversized frame skipped");
                let error = Error::new(codes::FRAME_TOO_LARGE, "Frame too large")
                    .with_data(&format!("frames may be at most {limit} bytes"));
                self.send_error(Id::NULL, error);
            }
            Some(Ok(Inbound::Malformed(reason)))
                if reason.starts_with(crate::codec::FRAMING_MISMATCH)
                    && !self.framed
                    && self.shared.has_pending_calls() =>
            {
                return Some(Ended::Failed(Arc::new(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{reason}: use newline-delimited framing"),
                ))));
            }
            Some(Ok(Inbound::Malformed(reason))) => {
                tracing::warn!(%reason, "malformed framing skipped");
                self.send_error(Id::NULL, Error::parse_error().with_data(&reason));
            }
            Some(Ok(Inbound::OverBudget { limit })) => {
                tracing::warn!(limit, "buffer budget spent: connection closed");
                let error = Error::server_busy().with_data(&format!(
                    "the server holds too many unfinished frames ({limit} bytes across connections): try again later"
                ));
                self.send_error(Id::NULL, error);
                return Some(Ended::OverBudget);
            }
        }
        None
    }

    /// After reading has ended: lets the handlers finish (unless killed).
    async fn finish(&mut self) {
        self.notifications.close();
        let killed = self.shared.kill.cancelled();
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

    /// Queues `frame` with the others of this burst of reading.
    fn send(&mut self, frame: Bytes) {
        // Replies answered inline before it go before it.
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
    async fn end_burst(&mut self) {
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
        match self.joined_ends.len() {
            0 => return,
            1 => self.burst.push(Bytes::from(std::mem::take(&mut self.joined))),
            n => {
                let joined = Bytes::from(std::mem::take(&mut self.joined));
                self.burst.reserve(n);
                let mut start = 0;
                for &end in &self.joined_ends {
                    self.burst.push(joined.slice(start..end));
                    start = end;
                }
            }
        }
        self.joined_ends.clear();
    }

    fn send_error(&mut self, id: Id, error: Error) {
        self.send(
            Response {
                id,
                outcome: Err(error),
            }
            .to_bytes(),
        );
    }

    async fn on_frame(&mut self, frame: Bytes) {
        // Borrowed, not cloned: an `Arc` counted up and down per frame is
        // two atomic operations, a few percent of a small call.
        match parse_frame(&frame, self.shared.router.parse_limits()) {
            Err(error) => self.send_error(Id::NULL, error),
            Ok(Frame::Single(item)) => self.on_item(item, ReplyTo::Direct).await,
            // Each entry is served as if it came alone (bounded, cancellable,
            // ordered, through the middleware); their replies are gathered
            // into one frame, sent once the last is in.
            Ok(Frame::Batch(items)) => {
                let batch = Arc::new(BatchReply::default());
                for item in items {
                    self.on_item(item, ReplyTo::Batch(Arc::clone(&batch), usize::MAX))
                        .await;
                }
                if let Some(reply) = batch.seal() {
                    self.send(reply);
                }
            }
        }
    }

    /// Handles one incoming item; a reply to it goes where `reply` says.
    async fn on_item(&mut self, item: Incoming<'_>, reply: ReplyTo) {
        match item {
            Incoming::Response(response)
                if self.ordered_responses
                    && *self.notifications_handled.borrow() < self.notifications_queued =>
            {
                // Notifications that came before it are still being
                // handled (a server's progress before its result): the
                // caller gets the response after them. Taken off the
                // pending calls now, so that the connection ending
                // meanwhile does not fail a call already answered.
                let Some(waiter) = self.shared.waiter_of(&response) else {
                    return tracing::debug!(id = %response.id, "response to no pending call");
                };
                let barrier = self.notifications_queued;
                let mut handled = self.notifications_handled.clone();
                let outcome = response.outcome.map(RawValue::to_owned).map_err(CallError::Rpc);
                tokio::spawn(async move {
                    // Ends early if the worker stops (the connection closed).
                    let _ = handled.wait_for(|n| *n >= barrier).await;
                    let _ = waiter.send(outcome);
                });
            }
            Incoming::Response(response) => {
                if self.shared.is_stray(&response) {
                    let mut out = Vec::new();
                    message::write_error(
                        &mut out,
                        response.version,
                        &response.id,
                        &Error::invalid_request(),
                    );
                    self.reply(reply.slot(), out);
                } else {
                    self.shared.deliver(response);
                }
            }
            Incoming::Notification(notification) => {
                let is_cancel = self
                    .shared
                    .cancel
                    .as_ref()
                    .is_some_and(|c| c.method == notification.method);
                if is_cancel {
                    self.cancel_incoming(notification.params).await;
                    return;
                }
                let Some(queue) = self.notifications.queue(&self.shared, &mut self.tasks) else {
                    return tracing::debug!(method = %notification.method, "notification while closing dropped");
                };
                if queue.try_send(OwnedCall::notification(notification)).is_err() {
                    tracing::warn!("notification queue full: notification dropped");
                } else {
                    self.notifications_queued += 1;
                }
            }
            Incoming::Request(request) if self.draining => {
                let out = error_reply(request.version, &request.id, &busy("the connection is closing"));
                self.reply(reply.slot(), out);
            }
            Incoming::Request(request)
                if self.ordered && *self.notifications_handled.borrow() < self.notifications_queued =>
            {
                // Earlier notifications are still being handled: this
                // request waits for them, on its own task.
                let barrier = self.notifications_queued;
                self.spawn_request(OwnedCall::request(request), Some(barrier), reply.slot())
                    .await;
            }
            item => {
                if let Incoming::Invalid(invalid) = &item {
                    // A malformed reply to a call of ours fails that call.
                    self.shared.fail_invalid_reply(&invalid.id);
                }
                let left = if let ReplyTo::Direct = reply {
                    // Straight after the burst's other inline replies.
                    if self.joined.capacity() == 0 {
                        self.joined.reserve(JOINED_CAPACITY);
                    }
                    let start = self.joined.len();
                    let left =
                        self.shared
                            .router
                            .handle_inline(item, &self.shared.connection, &mut self.joined);
                    if self.joined.len() > start {
                        self.joined_ends.push(self.joined.len());
                    }
                    left
                } else {
                    let mut out = Vec::with_capacity(REPLY_CAPACITY);
                    let left = self
                        .shared
                        .router
                        .handle_inline(item, &self.shared.connection, &mut out);
                    // A place in the batch only for an entry with a reply.
                    if left.is_none() && !out.is_empty() {
                        self.reply(reply.clone().slot(), out);
                    }
                    left
                };
                if let Some(Incoming::Request(request)) = left {
                    self.spawn_request(OwnedCall::request(request), None, reply.slot())
                        .await;
                }
            }
        }
    }

    /// Sends `out` where `reply` says (once a batch is whole, for an entry).
    fn reply(&mut self, reply: ReplyTo, out: Vec<u8>) {
        if let Some(frame) = reply.frame(out) {
            self.send(frame);
        }
    }

    /// Runs a request's async handler on its own task, within the bounds.
    /// With a `barrier`, the handler first waits until that many
    /// notifications have been handled.
    async fn spawn_request(&mut self, call: OwnedCall, barrier: Option<u64>, reply: ReplyTo) {
        let id = call.id.clone().unwrap_or(Id::NULL);
        let version = call.version;
        let Ok(queued) = Arc::clone(&self.queued).try_acquire_owned() else {
            let busy = busy("too many requests in flight on this connection");
            return self.reply(reply, error_reply(version, &id, &busy));
        };
        let shared = Arc::clone(&self.shared);
        // A call through middleware is polled here once, as a plain handler
        // would run: most finish at once (sync handlers, quick layers) and
        // need no task of their own. One that does not moves to a task.
        let mut started = None;
        let mut call = Some(call);
        if barrier.is_none() && shared.router.has_layers() {
            if let Ok(running) = Arc::clone(&self.running).try_acquire_owned() {
                let taken = call.take().expect("taken once");
                let mut serving = Box::pin(serve_layered(Arc::clone(&shared), taken));
                match (&mut serving).now_or_never() {
                    Some(out) => return self.reply(reply, out),
                    None => started = Some((serving, running)),
                }
            }
        }
        let running = Arc::clone(&self.running);
        let answered = Arc::new(AtomicBool::new(false));
        let cancellable = shared.cancel.is_some();
        if cancellable {
            // Registered before the task starts, so its cleanup finds it.
            shared.serving().entry(id.clone()).or_default().push(InFlight {
                answered: Arc::clone(&answered),
                abort: None,
                version,
                reply: reply.clone(),
            });
        }
        let task_answered = Arc::clone(&answered);
        let mut handled = self.notifications_handled.clone();
        let task_id = id.clone();
        let turn = barrier.map(|_| self.turns.take());
        let handle = self.tasks.spawn(async move {
            let _queued = queued;
            let out = match (started, call) {
                (Some((serving, _running)), _) => serving.await,
                (None, Some(call)) => {
                    if let Some(barrier) = barrier {
                        let _ = handled.wait_for(|n| *n >= barrier).await;
                    }
                    match turn {
                        // Woken together once the notifications are done,
                        // these requests start one by one in the order they
                        // arrived: each runs until it first waits, as a
                        // request that needed no barrier would have.
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
                }
                // The call is either started or still here.
                (None, None) => Vec::new(),
            };
            // A cancellation that got here first has answered already.
            if !task_answered.swap(true, Ordering::AcqRel) {
                if let Some(frame) = reply.frame(out) {
                    let _ = shared.outbox.send(frame).await;
                }
            }
            if cancellable {
                forget_in_flight(&shared, &task_id, &task_answered);
            }
        });
        if cancellable {
            let mut serving = self.shared.serving();
            let entry = serving
                .get_mut(&id)
                .and_then(|entries| entries.iter_mut().find(|e| Arc::ptr_eq(&e.answered, &answered)));
            if let Some(entry) = entry {
                entry.abort = Some(handle);
            }
        }
    }

    /// Handles a cancel notification: aborts the handlers serving that id.
    async fn cancel_incoming(&mut self, params: Option<&RawValue>) {
        let shared = Arc::clone(&self.shared);
        let Some(protocol) = &shared.cancel else {
            return;
        };
        let id = params
            .and_then(|p| serde_json::from_str::<BTreeMap<Cow<'_, str>, &RawValue>>(p.get()).ok())
            .and_then(|fields| fields.get(&*protocol.id_field).copied())
            .and_then(Id::from_raw);
        let Some(id) = id else {
            return tracing::debug!("cancel notification without a usable id ignored");
        };
        let entries = self.shared.serving().remove(&id).unwrap_or_default();
        for entry in entries {
            if entry.answered.swap(true, Ordering::AcqRel) {
                continue;
            }
            if let Some(handle) = entry.abort {
                handle.abort();
            }
            tracing::debug!(%id, "incoming request cancelled");
            // No reply at all when the protocol says so (but a batch entry
            // still takes its place, empty, so that the batch completes).
            let out = match &protocol.reply {
                Some(error) => error_reply(entry.version, &id, error),
                None => Vec::new(),
            };
            self.reply(entry.reply, out);
        }
    }
}

/// Hands out turns in arrival order: a request's turn comes once every
/// earlier one has started (or gone away).
#[derive(Default)]
struct Turnstile {
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
    fn take(&mut self) -> Turn {
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
struct Turn {
    ticket: u64,
    state: Arc<watch::Sender<TurnState>>,
    done: bool,
}

impl Turn {
    async fn wait(&self) {
        let mut state = self.state.subscribe();
        let _ = state.wait_for(|s| s.serving == self.ticket).await;
    }

    /// This request has started: the next may.
    fn done(mut self) {
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

fn error_reply(version: Version, id: &Id, error: &Error) -> Vec<u8> {
    let mut out = Vec::new();
    message::write_error(&mut out, version, id, error);
    out
}

/// Where the reply to a request goes.
#[derive(Clone)]
pub(crate) enum ReplyTo {
    /// Straight out, as its own frame.
    Direct,
    /// Into a place of a batch reply (`usize::MAX` until a place is taken
    /// with [`slot`](Self::slot)).
    Batch(Arc<BatchReply>, usize),
}

impl ReplyTo {
    /// Takes this entry's place in its batch reply (a no-op for `Direct`).
    fn slot(self) -> ReplyTo {
        match self {
            ReplyTo::Batch(batch, _) => {
                let at = batch.take_place();
                ReplyTo::Batch(batch, at)
            }
            direct => direct,
        }
    }

    /// The frame to send now that `out` (empty: no reply) is ready.
    fn frame(self, out: Vec<u8>) -> Option<Bytes> {
        match self {
            ReplyTo::Direct => (!out.is_empty()).then(|| out.into()),
            ReplyTo::Batch(batch, at) => batch.fill(at, out),
        }
    }
}

/// The replies to one batch's entries, gathered in entry order; whoever
/// fills the last place (after the reader has seen the whole batch) sends it.
#[derive(Default)]
pub(crate) struct BatchReply {
    state: std::sync::Mutex<BatchState>,
}

#[derive(Default)]
struct BatchState {
    /// Each place's reply, once in (an empty one: no reply).
    places: Vec<Option<Vec<u8>>>,
    waiting: usize,
    /// The reader has seen every entry.
    sealed: bool,
}

impl BatchReply {
    fn state(&self) -> std::sync::MutexGuard<'_, BatchState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn take_place(&self) -> usize {
        let mut state = self.state();
        state.places.push(None);
        state.waiting += 1;
        state.places.len() - 1
    }

    /// Puts a reply in its place; the whole batch reply when it was the last.
    fn fill(&self, at: usize, out: Vec<u8>) -> Option<Bytes> {
        let mut state = self.state();
        let place = state.places.get_mut(at)?;
        if place.replace(out).is_some() {
            return None;
        }
        state.waiting -= 1;
        (state.sealed && state.waiting == 0)
            .then(|| join(&mut state.places))
            .flatten()
    }

    /// Marks the batch seen whole; the batch reply when every place is in.
    fn seal(&self) -> Option<Bytes> {
        let mut state = self.state();
        state.sealed = true;
        (state.waiting == 0).then(|| join(&mut state.places)).flatten()
    }
}

/// The batch reply: the non-empty replies as one array; `None` when there
/// are none (a batch of notifications gets no reply at all).
fn join(places: &mut [Option<Vec<u8>>]) -> Option<Bytes> {
    let mut out = vec![b'['];
    for reply in places
        .iter_mut()
        .filter_map(Option::take)
        .filter(|r| !r.is_empty())
    {
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(&reply);
    }
    if out.len() == 1 {
        return None;
    }
    out.push(b']');
    Some(out.into())
}

/// Serves a request copied out of its frame: through the middleware when
/// there is any, else its handler; the reply to send.
async fn serve_owned(shared: Arc<PeerState>, call: OwnedCall) -> Vec<u8> {
    if shared.router.has_layers() {
        return serve_layered(shared, call).await;
    }
    let mut out = Vec::new();
    let router = &shared.router;
    if let Some(item) = router.handle_inline(call.as_incoming(), &shared.connection, &mut out) {
        router.handle_async(item, &shared.connection, &mut out).await;
    }
    out
}

/// Serves a request through the router's middleware. A future of its own,
/// apart from [`serve_owned`]'s other branch: boxed for every call, it is
/// kept small (that branch's state is kilobytes, and allocating that much
/// made the allocator tidy its free lists on every call).
async fn serve_layered(shared: Arc<PeerState>, call: OwnedCall) -> Vec<u8> {
    let mut out = Vec::new();
    let OwnedCall {
        version,
        id,
        method,
        params,
    } = call;
    let Some(id) = id else {
        return out;
    };
    let outcome = shared
        .router
        .call(Call::new(
            Some(id.clone()),
            method,
            params,
            Arc::clone(&shared.connection),
        ))
        .await;
    match outcome {
        Ok(result) => message::write_result(&mut out, version, &id, result.as_bytes()),
        Err(error) => message::write_error(&mut out, version, &id, &error),
    }
    out
}

/// Drops a finished request's cancellation entry.
fn forget_in_flight(shared: &PeerState, id: &Id, answered: &Arc<AtomicBool>) {
    let mut serving = shared.serving();
    if let Some(entries) = serving.get_mut(id) {
        entries.retain(|e| !Arc::ptr_eq(&e.answered, answered));
        if entries.is_empty() {
            serving.remove(id);
        }
    }
}

/// The queue to the notification worker, which starts with the first
/// notification: most connections never get one, and an idle connection
/// should not hold a task and a queue for them.
struct Notifications {
    queue: NotificationQueue,
    worker_started: bool,
}

enum NotificationQueue {
    /// No notification yet: the worker's progress counter, for when it starts.
    NotStarted(watch::Sender<u64>),
    Open(mpsc::Sender<OwnedCall>),
    /// Closing: notifications are dropped, and the worker ends once it has
    /// handled those already queued.
    Closed,
}

impl Notifications {
    fn new(handled: watch::Sender<u64>) -> Self {
        Notifications {
            queue: NotificationQueue::NotStarted(handled),
            worker_started: false,
        }
    }

    fn close(&mut self) {
        self.queue = NotificationQueue::Closed;
    }

    /// The worker's queue, starting the worker on first use; `None` once
    /// closed.
    fn queue(
        &mut self,
        shared: &Arc<PeerState>,
        tasks: &mut JoinSet<()>,
    ) -> Option<&mpsc::Sender<OwnedCall>> {
        self.queue = match std::mem::replace(&mut self.queue, NotificationQueue::Closed) {
            NotificationQueue::NotStarted(handled) => {
                let (queue, received) = mpsc::channel(NOTIFICATION_QUEUE);
                tasks.spawn(notification_worker(Arc::clone(shared), received, handled));
                self.worker_started = true;
                NotificationQueue::Open(queue)
            }
            started_or_closed => started_or_closed,
        };
        match &self.queue {
            NotificationQueue::Open(queue) => Some(queue),
            _ => None,
        }
    }
}

/// Runs notification handlers one at a time, in arrival order.
async fn notification_worker(
    shared: Arc<PeerState>,
    mut queue: mpsc::Receiver<OwnedCall>,
    handled: watch::Sender<u64>,
) {
    while let Some(call) = queue.recv().await {
        let mut out = Vec::new();
        let item = call.as_incoming();
        let left = shared.router.handle_inline(item, &shared.connection, &mut out);
        if let Some(item) = left {
            shared
                .router
                .handle_async(item, &shared.connection, &mut out)
                .await;
        }
        handled.send_modify(|n| *n += 1);
    }
}

/// A request or notification copied out of its frame, for another task.
struct OwnedCall {
    version: Version,
    id: Option<Id>,
    method: Arc<str>,
    params: Option<Box<RawValue>>,
}

impl OwnedCall {
    fn request(r: RequestRef<'_>) -> Self {
        OwnedCall {
            version: r.version,
            id: Some(r.id),
            method: r.method.into(),
            params: r.params.map(RawValue::to_owned),
        }
    }

    fn notification(n: NotificationRef<'_>) -> Self {
        OwnedCall {
            version: n.version,
            id: None,
            method: n.method.into(),
            params: n.params.map(RawValue::to_owned),
        }
    }

    fn as_incoming(&self) -> Incoming<'_> {
        let (version, method, params) = (self.version, Cow::Borrowed(&*self.method), self.params.as_deref());
        match &self.id {
            Some(id) => Incoming::Request(RequestRef {
                version,
                id: id.clone(),
                method,
                params,
            }),
            None => Incoming::Notification(NotificationRef {
                version,
                method,
                params,
            }),
        }
    }
}
