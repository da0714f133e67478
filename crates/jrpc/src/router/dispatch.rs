//! Serving one frame: parse it, run each item's handler, and build the reply
//! frame.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::FuturesOrdered;
use futures_util::{FutureExt, StreamExt};

use super::handler::{CallInfo, ErasedMethod, ErasedNotification};
use super::{Extensions, Router};
use crate::message::{
    self, parse_frame, Error, Frame, Id, Incoming, NotificationRef, RequestRef, ResponseRef, Version,
};

/// What to do with a response object found among incoming items.
#[derive(Clone, Copy)]
pub(crate) enum Responses<'s> {
    /// Answer it `-32600`: a plain server makes no calls to be answered.
    Reject,
    /// A peer has routed it already; answer `-32600` only if this says so
    /// (a response to nothing the peer ever asked).
    RejectIf(&'s (dyn Fn(&ResponseRef<'_>) -> bool + Sync)),
}

impl Responses<'_> {
    fn reject(&self, response: &ResponseRef<'_>) -> bool {
        match self {
            Responses::Reject => true,
            Responses::RejectIf(stray) => stray(response),
        }
    }
}

impl Router {
    /// Serves one whole frame (a single message or a batch) and returns the
    /// whole reply frame, or `None` when no reply is due (notifications, a
    /// batch of only notifications).
    ///
    /// Never fails and never panics on any input: bad input gets the error
    /// reply the specification demands (see [`parse_frame`] for frame-level
    /// errors); a handler that panics is answered `-32603`.
    ///
    /// Batch entries run concurrently, at most
    /// [`batch_concurrency`](Self::batch_concurrency) at a time, and their
    /// replies come in request order.
    pub async fn handle(&self, frame: &[u8]) -> Option<Bytes> {
        self.handle_with(frame, &empty_connection()).await
    }

    /// As [`handle`](Self::handle), with what the transport knows about the
    /// connection, for handlers that take a [`RequestContext`](super::RequestContext).
    pub async fn handle_with(&self, frame: &[u8], connection: &Arc<Extensions>) -> Option<Bytes> {
        match parse_frame(frame, &self.inner.limits) {
            Err(error) => {
                let mut out = Vec::with_capacity(96);
                message::write_error(&mut out, Version::V2, &Id::NULL, &error);
                Some(out.into())
            }
            Ok(Frame::Single(item)) => {
                let mut out = Vec::with_capacity(128);
                if let Some(item) = self.handle_inline(item, connection, &mut out, Responses::Reject) {
                    self.handle_async(item, connection, &mut out).await;
                }
                (!out.is_empty()).then(|| out.into())
            }
            Ok(Frame::Batch(items)) => self.handle_batch(items, connection, Responses::Reject).await,
        }
    }

    /// Serves a batch frame for a peer, which has already routed the
    /// batch's responses to its own calls: only those `stray` picks out are
    /// answered (`-32600`).
    pub(crate) async fn handle_batch_frame(
        &self,
        frame: &[u8],
        connection: &Arc<Extensions>,
        stray: &(dyn Fn(&ResponseRef<'_>) -> bool + Sync),
    ) -> Option<Bytes> {
        match parse_frame(frame, &self.inner.limits) {
            Ok(Frame::Batch(items)) => {
                self.handle_batch(items, connection, Responses::RejectIf(stray))
                    .await
            }
            // The caller parsed this frame as a batch already.
            Ok(Frame::Single(_)) | Err(_) => None,
        }
    }

    /// Serves a batch. Entries whose handlers are plain functions (and
    /// invalid entries) are answered inline, straight into the reply; the
    /// others run concurrently, at most `batch_concurrency` at a time, and
    /// their replies are spliced in at their entries' places.
    async fn handle_batch(
        &self,
        items: Vec<Incoming<'_>>,
        connection: &Arc<Extensions>,
        responses: Responses<'_>,
    ) -> Option<Bytes> {
        let mut out = Vec::with_capacity(items.len() * 48 + 2);
        out.push(b'[');
        let mut wrote_any = false;
        // Where in `out` each pending reply goes; `None` for notifications.
        let mut in_flight = FuturesOrdered::new();
        let mut pending: Vec<(usize, Vec<u8>)> = Vec::new();
        for item in items {
            let mark = out.len();
            if wrote_any {
                out.push(b',');
            }
            let start = out.len();
            let Some(item) = self.handle_inline(item, connection, &mut out, responses) else {
                if out.len() == start {
                    out.truncate(mark);
                } else {
                    wrote_any = true;
                }
                continue;
            };
            // A request always gets a reply; a notification never does.
            let slot = matches!(item, Incoming::Request(_)).then(|| {
                wrote_any = true;
                out.len()
            });
            if slot.is_none() {
                out.truncate(mark);
            }
            if in_flight.len() == self.inner.batch_concurrency {
                if let Some((Some(at), reply)) = in_flight.next().await {
                    pending.push((at, reply));
                }
            }
            in_flight.push_back(self.reply_to(slot, item, connection));
        }
        while let Some((slot, reply)) = in_flight.next().await {
            if let Some(at) = slot {
                pending.push((at, reply));
            }
        }
        if !wrote_any {
            return None;
        }
        out.push(b']');
        if !pending.is_empty() {
            out = splice(out, pending);
        }
        Some(out.into())
    }

    /// Serves one batch entry that needs awaiting; its slot and reply.
    async fn reply_to(
        &self,
        slot: Option<usize>,
        item: Incoming<'_>,
        connection: &Arc<Extensions>,
    ) -> (Option<usize>, Vec<u8>) {
        let mut out = Vec::new();
        self.handle_async(item, connection, &mut out).await;
        (slot, out)
    }

    /// Serves `item` on the spot if that needs no awaiting, appending its
    /// reply (if any) to `out`. Gives the item back when its handler is async.
    pub(crate) fn handle_inline<'a>(
        &self,
        item: Incoming<'a>,
        connection: &Arc<Extensions>,
        out: &mut Vec<u8>,
        responses: Responses<'_>,
    ) -> Option<Incoming<'a>> {
        match item {
            Incoming::Request(request) => match self.inner.methods.get(&*request.method) {
                Some(ErasedMethod::Sync(f)) => {
                    let RequestRef {
                        version,
                        id,
                        method,
                        params,
                    } = request;
                    let info = CallInfo {
                        id: Some(&id),
                        connection,
                    };
                    // Serialize the result straight into the reply.
                    let start = out.len();
                    message::result_prefix(out, version);
                    let error = match std::panic::catch_unwind(AssertUnwindSafe(|| f(params, &info, out))) {
                        Ok(Ok(())) => {
                            message::result_suffix(out, version, &id);
                            return None;
                        }
                        Ok(Err(error)) => error,
                        Err(panic) => self.panic_error(&method, panic),
                    };
                    out.truncate(start);
                    message::write_error(out, version, &id, &error);
                    None
                }
                Some(ErasedMethod::Async(_)) => Some(Incoming::Request(request)),
                // A request to a notification handler: run it, answer null.
                None => match self.inner.notifications.get(&*request.method) {
                    Some(ErasedNotification::Sync(f)) => {
                        let info = CallInfo {
                            id: Some(&request.id),
                            connection,
                        };
                        let outcome =
                            match std::panic::catch_unwind(AssertUnwindSafe(|| f(request.params, &info))) {
                                Ok(outcome) => outcome,
                                Err(panic) => Err(self.panic_error(&request.method, panic)),
                            };
                        match outcome {
                            Ok(()) => message::write_result(out, request.version, &request.id, b"null"),
                            Err(error) => message::write_error(out, request.version, &request.id, &error),
                        }
                        None
                    }
                    Some(ErasedNotification::Async(_)) => Some(Incoming::Request(request)),
                    None => {
                        message::write_error(out, request.version, &request.id, &Error::method_not_found());
                        None
                    }
                },
            },
            Incoming::Notification(notification) => {
                let info = CallInfo { id: None, connection };
                let NotificationRef { method, params, .. } = &notification;
                let outcome = match (
                    self.inner.notifications.get(&**method),
                    self.inner.methods.get(&**method),
                ) {
                    (Some(ErasedNotification::Sync(f)), _) => catch(|| f(*params, &info)),
                    // A notification to a method: run it, drop the result.
                    (None, Some(ErasedMethod::Sync(f))) => catch(|| f(*params, &info, &mut Vec::new())),
                    (None, None) => Err("no handler".to_owned()),
                    _ => return Some(Incoming::Notification(notification)),
                };
                if let Err(reason) = outcome {
                    tracing::debug!(method = %method, %reason, "notification dropped");
                }
                None
            }
            Incoming::Invalid(invalid) => {
                message::write_error(out, invalid.version, &invalid.id, &invalid.error);
                None
            }
            // A router only serves: a response is not a valid request here.
            // (A peer, which also makes calls, routes responses before this.)
            Incoming::Response(response) => {
                if responses.reject(&response) {
                    message::write_error(out, response.version, &response.id, &Error::invalid_request());
                }
                None
            }
        }
    }

    /// Serves an item whose handler is async (as left by `handle_inline`).
    pub(crate) async fn handle_async(
        &self,
        item: Incoming<'_>,
        connection: &Arc<Extensions>,
        out: &mut Vec<u8>,
    ) {
        match item {
            Incoming::Request(RequestRef {
                version,
                id,
                method,
                params,
            }) => {
                let info = CallInfo {
                    id: Some(&id),
                    connection,
                };
                let f = match (
                    self.inner.methods.get(&*method),
                    self.inner.notifications.get(&*method),
                ) {
                    (Some(ErasedMethod::Async(f)), _) => f,
                    (None, Some(ErasedNotification::Async(f))) => {
                        let outcome = match std::panic::catch_unwind(AssertUnwindSafe(|| f(params, &info))) {
                            Ok(Ok(future)) => AssertUnwindSafe(future)
                                .catch_unwind()
                                .await
                                .map_err(|panic| self.panic_error(&method, panic)),
                            Ok(Err(error)) => Err(error),
                            Err(panic) => Err(self.panic_error(&method, panic)),
                        };
                        return match outcome {
                            Ok(()) => message::write_result(out, version, &id, b"null"),
                            Err(error) => message::write_error(out, version, &id, &error),
                        };
                    }
                    _ => return,
                };
                let outcome = match std::panic::catch_unwind(AssertUnwindSafe(|| f(params, &info))) {
                    Ok(Ok(future)) => match AssertUnwindSafe(future).catch_unwind().await {
                        Ok(outcome) => outcome,
                        Err(panic) => Err(self.panic_error(&method, panic)),
                    },
                    Ok(Err(error)) => Err(error),
                    Err(panic) => Err(self.panic_error(&method, panic)),
                };
                match outcome {
                    Ok(result) => message::write_result(out, version, &id, &result),
                    Err(error) => message::write_error(out, version, &id, &error),
                }
            }
            Incoming::Notification(NotificationRef { method, params, .. }) => {
                let info = CallInfo { id: None, connection };
                let outcome = match (
                    self.inner.notifications.get(&*method),
                    self.inner.methods.get(&*method),
                ) {
                    (Some(ErasedNotification::Async(f)), _) => match catch(|| f(params, &info)) {
                        Ok(future) => AssertUnwindSafe(future).catch_unwind().await.map_err(panic_text),
                        Err(e) => Err(e),
                    },
                    (None, Some(ErasedMethod::Async(f))) => match catch(|| f(params, &info)) {
                        Ok(future) => match AssertUnwindSafe(future).catch_unwind().await {
                            Ok(result) => result.map(drop).map_err(|e| e.to_string()),
                            Err(panic) => Err(panic_text(panic)),
                        },
                        Err(e) => Err(e),
                    },
                    _ => Ok(()),
                };
                if let Err(reason) = outcome {
                    tracing::debug!(method = %method, %reason, "notification dropped");
                }
            }
            Incoming::Invalid(_) | Incoming::Response(_) => {}
        }
    }

    fn panic_error(&self, method: &str, panic: Box<dyn Any + Send>) -> Error {
        let text = panic_text(panic);
        tracing::error!(method, panic = %text, "handler panicked");
        let error = Error::internal_error();
        if self.inner.expose_internal_errors {
            error.with_data(&format!("handler panicked: {text}"))
        } else {
            error
        }
    }
}

/// Runs a plain notification step, turning an error or a panic into text for
/// the log.
fn catch<T>(f: impl FnOnce() -> Result<T, Error>) -> Result<T, String> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(error.to_string()),
        Err(panic) => Err(panic_text(panic)),
    }
}

fn panic_text(panic: Box<dyn Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_owned()
    }
}

/// Inserts each reply at its position (ascending) into `out`.
fn splice(out: Vec<u8>, replies: Vec<(usize, Vec<u8>)>) -> Vec<u8> {
    let extra: usize = replies.iter().map(|(_, r)| r.len()).sum();
    let mut joined = Vec::with_capacity(out.len() + extra);
    let mut copied = 0;
    for (at, reply) in replies {
        joined.extend_from_slice(&out[copied..at]);
        joined.extend_from_slice(&reply);
        copied = at;
    }
    joined.extend_from_slice(&out[copied..]);
    joined
}

fn empty_connection() -> Arc<Extensions> {
    static EMPTY: std::sync::OnceLock<Arc<Extensions>> = std::sync::OnceLock::new();
    Arc::clone(EMPTY.get_or_init(|| Arc::new(Extensions::new())))
}
