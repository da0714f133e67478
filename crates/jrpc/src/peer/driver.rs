//! The tasks that run one connection: a reader that routes every incoming
//! item, a writer that coalesces outgoing frames, a worker that runs
//! notification handlers in arrival order, and one task per request served
//! by an async handler.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use serde_json::value::RawValue;
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::shared::Shared;
use super::CallError;
use crate::codec::Inbound;
use crate::message::{
    codes, parse_frame, Error, Frame, Id, Incoming, NotificationRef, RequestRef, Response, ResponseRef,
    Version,
};
use crate::router::Responses;

/// A future giving a better reason than "end of stream" once the stream
/// ends (a child process's exit status, say).
pub(crate) type EofReason = Pin<Box<dyn Future<Output = Option<String>> + Send>>;

/// How long to wait for an [`EofReason`] before settling for the plain one.
const EOF_REASON_WAIT: Duration = Duration::from_secs(2);

/// Per-connection bounds on incoming requests served by async handlers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// Handlers running at once.
    pub(crate) running: usize,
    /// Requests read but not yet finished; the reader pauses beyond this.
    pub(crate) queued: usize,
}

pub(crate) fn start<S, K>(
    shared: Arc<Shared>,
    stream: S,
    sink: K,
    outbox: mpsc::Receiver<Bytes>,
    bounds: Bounds,
    eof_reason: Option<EofReason>,
) where
    S: Stream<Item = io::Result<Inbound>> + Send + Unpin + 'static,
    K: Sink<Bytes, Error = io::Error> + Send + Unpin + 'static,
{
    let finish = CancellationToken::new();
    let writer = tokio::spawn(write_loop(Arc::clone(&shared), sink, outbox, finish.clone()));
    let tracker = TaskTracker::new();
    let (notify_tx, notify_rx) = mpsc::channel(64);
    tracker.spawn(notification_worker(Arc::clone(&shared), notify_rx));
    let reader = Reader {
        shared: Arc::clone(&shared),
        tracker: tracker.clone(),
        notifications: notify_tx,
        running: Arc::new(Semaphore::new(bounds.running.max(1))),
        queued: Arc::new(Semaphore::new(bounds.queued.max(bounds.running).max(1))),
    };
    tokio::spawn(async move {
        let ended = reader.run(stream).await;
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
            Ended::Stopped => "closed by this side".into(),
            Ended::Failed(e) => {
                shared.fail_calls(CallError::Io(Arc::clone(&e)));
                format!("read error: {e}").into()
            }
        };
        // Nothing more can be read, so no response can come: fail every
        // pending call now. Requests already read are still answered.
        shared.fail_calls(CallError::Closed(Arc::clone(&reason)));
        drop(reader);
        tracker.close();
        tracker.wait().await;
        finish.cancel();
        match writer.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "writer ended with an error"),
            // The runtime is shutting down.
            Err(e) if e.is_cancelled() => {}
            Err(e) => tracing::error!(error = %e, "writer task failed"),
        }
        shared.set_closed(reason);
    });
}

/// Writes frames as they come, coalescing whatever is queued into one flush.
/// On `finish`, writes what is left and closes the sink.
async fn write_loop<K>(
    shared: Arc<Shared>,
    mut sink: K,
    mut outbox: mpsc::Receiver<Bytes>,
    finish: CancellationToken,
) -> io::Result<()>
where
    K: Sink<Bytes, Error = io::Error> + Unpin,
{
    let result: io::Result<()> = async {
        // One waiter for the whole loop, not one per frame.
        let finished = finish.cancelled();
        tokio::pin!(finished);
        loop {
            let frame = tokio::select! {
                biased;
                frame = outbox.recv() => frame,
                () = &mut finished => {
                    while let Ok(frame) = outbox.try_recv() {
                        sink.feed(frame).await?;
                    }
                    break;
                }
            };
            let Some(frame) = frame else { break };
            sink.feed(frame).await?;
            while let Ok(frame) = outbox.try_recv() {
                sink.feed(frame).await?;
            }
            sink.flush().await?;
        }
        sink.close().await
    }
    .await;
    if let Err(e) = &result {
        // The other side is gone: stop reading and fail every call.
        let e = Arc::new(io::Error::new(e.kind(), e.to_string()));
        shared.fail_calls(CallError::Io(e));
        shared.stop_reading.cancel();
    }
    result
}

enum Ended {
    Eof,
    Stopped,
    Failed(Arc<io::Error>),
}

struct Reader {
    shared: Arc<Shared>,
    tracker: TaskTracker,
    notifications: mpsc::Sender<OwnedCall>,
    running: Arc<Semaphore>,
    queued: Arc<Semaphore>,
}

impl Reader {
    async fn run<S>(&self, mut stream: S) -> Ended
    where
        S: Stream<Item = io::Result<Inbound>> + Unpin,
    {
        let stopped = self.shared.stop_reading.cancelled();
        tokio::pin!(stopped);
        loop {
            let item = tokio::select! {
                biased;
                () = &mut stopped => return Ended::Stopped,
                item = stream.next() => item,
            };
            match item {
                None => return Ended::Eof,
                Some(Err(e)) => return Ended::Failed(Arc::new(e)),
                Some(Ok(Inbound::Frame(frame))) => self.on_frame(frame).await,
                Some(Ok(Inbound::Oversized { limit })) => {
                    tracing::warn!(limit, "oversized frame skipped");
                    let error = Error::new(codes::FRAME_TOO_LARGE, "Frame too large")
                        .with_data(&format!("frames may be at most {limit} bytes"));
                    self.send_error(Id::NULL, error).await;
                }
                Some(Ok(Inbound::Malformed(reason))) => {
                    tracing::warn!(%reason, "malformed framing skipped");
                    self.send_error(Id::NULL, Error::parse_error().with_data(&reason))
                        .await;
                }
            }
        }
    }

    async fn send(&self, frame: Bytes) {
        // Fails only once the writer is gone, and then nothing can be sent.
        let _ = self.shared.outbox.send(frame).await;
    }

    async fn send_error(&self, id: Id, error: Error) {
        self.send(
            Response {
                id,
                outcome: Err(error),
            }
            .to_bytes(),
        )
        .await;
    }

    async fn on_frame(&self, frame: Bytes) {
        match parse_frame(&frame, self.shared.router.parse_limits()) {
            Err(error) => self.send_error(Id::NULL, error).await,
            Ok(Frame::Single(item)) => self.on_item(item).await,
            Ok(Frame::Batch(items)) => {
                let mut to_serve = false;
                for item in items {
                    match item {
                        Incoming::Response(response) => {
                            to_serve |= self.shared.is_stray(&response);
                            self.shared.deliver(response);
                        }
                        _ => to_serve = true,
                    }
                }
                if to_serve {
                    // The batch is answered as one frame by its own task.
                    let queued = self.queue_permit().await;
                    let (shared, running) = (Arc::clone(&self.shared), Arc::clone(&self.running));
                    self.tracker.spawn(async move {
                        let _queued = queued;
                        let _running = running.acquire_owned().await;
                        let stray = |r: &ResponseRef<'_>| shared.is_stray(r);
                        if let Some(reply) = shared
                            .router
                            .handle_batch_frame(&frame, &shared.connection, &stray)
                            .await
                        {
                            let _ = shared.outbox.send(reply).await;
                        }
                    });
                }
            }
        }
    }

    async fn on_item(&self, item: Incoming<'_>) {
        match item {
            Incoming::Response(response) => {
                if self.shared.is_stray(&response) {
                    self.send_error(response.id, Error::invalid_request()).await;
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
                } else {
                    let _ = self
                        .notifications
                        .send(OwnedCall::notification(notification))
                        .await;
                }
            }
            item => {
                let mut out = Vec::new();
                let left = self.shared.router.handle_inline(
                    item,
                    &self.shared.connection,
                    &mut out,
                    Responses::Reject,
                );
                if !out.is_empty() {
                    self.send(out.into()).await;
                }
                if let Some(Incoming::Request(request)) = left {
                    self.spawn_request(OwnedCall::request(request)).await;
                }
            }
        }
    }

    async fn queue_permit(&self) -> tokio::sync::OwnedSemaphorePermit {
        Arc::clone(&self.queued)
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }

    /// Runs a request's async handler on its own task, within the bounds.
    async fn spawn_request(&self, call: OwnedCall) {
        let queued = self.queue_permit().await;
        let (shared, running) = (Arc::clone(&self.shared), Arc::clone(&self.running));
        let cancellable = shared.cancel.is_some();
        let id = call.id.clone().unwrap_or(Id::NULL);
        if cancellable {
            shared.serving().insert(id.clone(), None);
        }
        let task_id = id.clone();
        let handle = self.tracker.spawn(async move {
            let _queued = queued;
            let _running = running.acquire_owned().await;
            let mut out = Vec::new();
            shared
                .router
                .handle_async(call.as_incoming(), &shared.connection, &mut out)
                .await;
            // A cancellation that got here first has answered already.
            if cancellable && shared.serving().remove(&task_id).is_none() {
                return;
            }
            let _ = shared.outbox.send(out.into()).await;
        });
        if cancellable {
            if let Some(slot) = self.shared.serving().get_mut(&id) {
                *slot = Some(handle.abort_handle());
            }
        }
    }

    /// Handles a cancel notification: aborts the handler serving that id.
    async fn cancel_incoming(&self, params: Option<&RawValue>) {
        let Some(protocol) = &self.shared.cancel else {
            return;
        };
        let id = params
            .and_then(|p| serde_json::from_str::<BTreeMap<Cow<'_, str>, &RawValue>>(p.get()).ok())
            .and_then(|fields| fields.get(&*protocol.id_field).copied())
            .and_then(Id::from_raw);
        let Some(id) = id else {
            tracing::debug!("cancel notification without a usable id ignored");
            return;
        };
        let entry = self.shared.serving().remove(&id);
        let Some(handle) = entry else {
            tracing::debug!(%id, "cancel for a request not in flight ignored");
            return;
        };
        if let Some(handle) = handle {
            handle.abort();
        }
        tracing::debug!(%id, "incoming request cancelled");
        if let Some(error) = &protocol.reply {
            self.send_error(id, error.clone()).await;
        }
    }
}

/// Runs notification handlers one at a time, in arrival order.
async fn notification_worker(shared: Arc<Shared>, mut queue: mpsc::Receiver<OwnedCall>) {
    while let Some(call) = queue.recv().await {
        let mut out = Vec::new();
        let item = call.as_incoming();
        if let Some(item) = shared
            .router
            .handle_inline(item, &shared.connection, &mut out, Responses::Reject)
        {
            shared
                .router
                .handle_async(item, &shared.connection, &mut out)
                .await;
        }
    }
}

/// A request or notification copied out of its frame, for another task.
struct OwnedCall {
    version: Version,
    id: Option<Id>,
    method: Box<str>,
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
