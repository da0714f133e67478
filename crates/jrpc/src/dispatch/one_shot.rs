//! Serving a frame that is answered once, as a whole: an HTTP POST, a
//! datagram, a broker's message.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::batch::Batch;
use super::serve::{self, Verdict};
use crate::context::Extensions;
use crate::message::{self, parse_frame, Error, Frame, Id, Incoming, Version};
use crate::router::Router;

/// What serving a frame with [`one_shot`] came to.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Outcome {
    /// The whole reply frame; `None` when no reply is due (notifications,
    /// a batch of only notifications).
    pub reply: Option<Bytes>,
    /// What the frame held, as far as answering goes.
    pub kind: FrameKind,
    /// Set when calls went through the middleware and every one of them
    /// was refused by a limit: a transport that answers for the whole
    /// frame says so (HTTP: `429` with `Retry-After`, or `503`).
    pub refused: Option<Refusal>,
}

/// What a frame held, as far as answering it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameKind {
    /// Only responses: nothing a server should answer (a router answers
    /// them `-32600`; transports that cannot tell a client's stray reply
    /// from a call drop that).
    Responses,
    /// A single request, with its id (for a refusal in its place).
    Request(Id),
    /// Notifications (and responses) only: never answered, not even to
    /// refuse them.
    Notification,
    /// A batch with requests or invalid entries.
    Other,
    /// A frame that is not JSON-RPC at all (not JSON, too deep, an empty
    /// batch...): answered with one error of id `null`.
    Unreadable,
}

impl FrameKind {
    fn of(parsed: &Result<Frame<'_>, Error>) -> FrameKind {
        match parsed {
            Ok(Frame::Single(Incoming::Response(_))) => FrameKind::Responses,
            Ok(Frame::Single(Incoming::Request(request))) => FrameKind::Request(request.id.clone()),
            Ok(Frame::Single(Incoming::Notification(_))) => FrameKind::Notification,
            Ok(Frame::Batch(items)) if items.iter().all(|i| matches!(i, Incoming::Response(_))) => {
                FrameKind::Responses
            }
            Ok(Frame::Batch(items))
                if items
                    .iter()
                    .all(|i| matches!(i, Incoming::Notification(_) | Incoming::Response(_))) =>
            {
                FrameKind::Notification
            }
            Ok(_) => FrameKind::Other,
            Err(_) => FrameKind::Unreadable,
        }
    }

    /// The id an error in place of the whole reply carries: the request's,
    /// or `null`; `None` when nothing may be answered.
    pub fn refusal_id(&self) -> Option<Id> {
        match self {
            FrameKind::Request(id) => Some(id.clone()),
            FrameKind::Other | FrameKind::Unreadable => Some(Id::NULL),
            FrameKind::Responses | FrameKind::Notification => None,
        }
    }

    /// What `frame` holds, read with `limits`; for a transport that must
    /// refuse a frame without serving it.
    pub fn read(frame: &[u8], limits: &message::Limits) -> FrameKind {
        FrameKind::of(&parse_frame(frame, limits))
    }
}

/// Why every call of a frame was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// Over a rate limit (`-32005`): the client may try again after this.
    RateLimited {
        /// The longest wait any of the calls was told.
        retry_after: Duration,
    },
    /// Over a concurrency bound (`-32007`).
    Busy,
}

/// Serves one whole frame (a single message or a batch) with `router`,
/// with what the transport knows about where it came from (`facts`, read
/// by handlers through [`RequestContext`](crate::RequestContext)).
///
/// Never fails and never panics on any input: bad input gets the error
/// reply the specification demands; a handler that panics is answered
/// `-32603`. Batch entries run concurrently, at most
/// [`Router::batch_concurrency`] at a time, and their replies come in
/// request order.
///
/// ```
/// use std::sync::Arc;
/// use jrpc::context::Extensions;
/// use jrpc::dispatch::{one_shot, FrameKind};
/// use jrpc::Router;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let router = Router::new().sync_method("ping", || Ok("pong"));
/// let frame = br#"{"jsonrpc":"2.0","method":"ping","id":1}"#;
/// let outcome = one_shot(&router, frame, &Arc::new(Extensions::new())).await;
/// assert_eq!(outcome.reply.unwrap(), r#"{"jsonrpc":"2.0","result":"pong","id":1}"#);
/// assert_eq!(outcome.kind, FrameKind::Request(1.into()));
/// assert!(outcome.refused.is_none());
/// # });
/// ```
pub async fn one_shot(router: &Router, frame: &[u8], connection: &Arc<Extensions>) -> Outcome {
    let parsed = parse_frame(frame, router.parse_limits());
    let kind = FrameKind::of(&parsed);
    let tally = Tally::default();
    let reply = match parsed {
        Err(error) => {
            let mut out = Vec::with_capacity(96);
            message::write_error(&mut out, Version::V2, &Id::NULL, &error);
            Some(out.into())
        }
        Ok(Frame::Single(item)) => {
            let mut out = Vec::with_capacity(128);
            if let Some(item) = serve::inline(router, item, connection, &mut out) {
                tally.count(serve::awaited(router, item, connection, &mut out).await);
            }
            (!out.is_empty()).then(|| out.into())
        }
        Ok(Frame::Batch(items)) => {
            let mut batch = Batch::new(items.len());
            for item in items {
                if let Some(item) = batch.answer(|out| serve::inline(router, item, connection, out)) {
                    batch.later(matches!(item, Incoming::Request(_)), item);
                }
            }
            if batch.is_settled() {
                batch.settled()
            } else {
                let tally = &tally;
                batch
                    .run(router.batch_limit(), |item| async move {
                        let mut out = Vec::new();
                        tally.count(serve::awaited(router, item, connection, &mut out).await);
                        out
                    })
                    .await
            }
        }
    };
    Outcome {
        reply,
        kind,
        refused: tally.all_refused(),
    }
}

/// The verdicts of a frame's calls through the middleware. Atomics: a
/// batch's entries run concurrently (within one task, but the future must
/// be `Send`).
#[derive(Default)]
struct Tally {
    seen: AtomicU32,
    rate_limited: AtomicU32,
    busy: AtomicU32,
    retry_after_ms: AtomicU64,
}

impl Tally {
    fn count(&self, verdict: Verdict) {
        self.seen.fetch_add(1, Ordering::Relaxed);
        match verdict {
            Verdict::Served => {}
            Verdict::RateLimited(wait) => {
                let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                self.retry_after_ms.fetch_max(ms, Ordering::Relaxed);
                self.rate_limited.fetch_add(1, Ordering::Relaxed);
            }
            Verdict::Busy => {
                self.busy.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn all_refused(&self) -> Option<Refusal> {
        let seen = self.seen.load(Ordering::Relaxed);
        let rate_limited = self.rate_limited.load(Ordering::Relaxed);
        let busy = self.busy.load(Ordering::Relaxed);
        if seen == 0 || rate_limited + busy < seen {
            return None;
        }
        Some(if rate_limited > 0 {
            Refusal::RateLimited {
                retry_after: Duration::from_millis(self.retry_after_ms.load(Ordering::Relaxed).max(1)),
            }
        } else {
            Refusal::Busy
        })
    }
}

impl Router {
    /// Serves one whole frame (a single message or a batch) and returns the
    /// whole reply frame, or `None` when no reply is due (notifications, a
    /// batch of only notifications): [`one_shot`] without the connection's
    /// facts.
    ///
    /// Never fails and never panics on any input: bad input gets the error
    /// reply the specification demands (see [`parse_frame`] for frame-level
    /// errors); a handler that panics is answered `-32603`.
    ///
    /// Batch entries run concurrently, at most
    /// [`batch_concurrency`](Self::batch_concurrency) at a time, and their
    /// replies come in request order.
    pub async fn handle(&self, frame: &[u8]) -> Option<Bytes> {
        self.handle_with(frame, crate::context::empty_connection()).await
    }

    /// As [`handle`](Self::handle), with what the transport knows about the
    /// connection, for handlers that take a [`RequestContext`](crate::RequestContext).
    pub async fn handle_with(&self, frame: &[u8], connection: &Arc<Extensions>) -> Option<Bytes> {
        one_shot(self, frame, connection).await.reply
    }
}
