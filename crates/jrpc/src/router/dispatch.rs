//! Serving one frame: parse it, send each item through the call middleware
//! (when any) to its handler, and build the reply frame.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::FuturesOrdered;
use futures_util::{FutureExt, StreamExt};
use serde_json::value::RawValue;

use super::handler::{CallInfo, ErasedFallback, ErasedMethod, ErasedNotification, ResultFuture};
use super::{Extensions, Router, Table};
use crate::message::{self, parse_frame, Error, Frame, Id, Incoming, NotificationRef, RequestRef, Version};
use crate::middleware::{Call, CallFuture, RawResult};

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
        self.handle_with(frame, crate::context::empty_connection()).await
    }

    /// As [`handle`](Self::handle), with what the transport knows about the
    /// connection, for handlers that take a [`RequestContext`](super::RequestContext).
    pub async fn handle_with(&self, frame: &[u8], connection: &Arc<Extensions>) -> Option<Bytes> {
        self.handle_parsed(parse_frame(frame, &self.inner.limits), connection)
            .await
    }

    /// As [`handle_with`](Self::handle_with), for a frame the transport has
    /// parsed already (with this router's limits) to look at it first.
    pub(crate) async fn handle_parsed(
        &self,
        parsed: Result<Frame<'_>, message::Error>,
        connection: &Arc<Extensions>,
    ) -> Option<Bytes> {
        match parsed {
            Err(error) => {
                let mut out = Vec::with_capacity(96);
                message::write_error(&mut out, Version::V2, &Id::NULL, &error);
                Some(out.into())
            }
            Ok(Frame::Single(item)) => {
                let mut out = Vec::with_capacity(128);
                if let Some(item) = self.handle_inline(item, connection, &mut out) {
                    self.handle_async(item, connection, &mut out).await;
                }
                (!out.is_empty()).then(|| out.into())
            }
            Ok(Frame::Batch(items)) => self.handle_batch(items, connection).await,
        }
    }

    /// Serves a batch. Entries whose handlers are plain functions (and
    /// invalid entries) are answered inline, straight into the reply; the
    /// others run concurrently, at most `batch_concurrency` at a time, and
    /// their replies are spliced in at their entries' places.
    async fn handle_batch(&self, items: Vec<Incoming<'_>>, connection: &Arc<Extensions>) -> Option<Bytes> {
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
            let Some(item) = self.handle_inline(item, connection, &mut out) else {
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
            // Polled once here first (within the bound): an entry that
            // finishes at once, such as a plain handler behind quick
            // middleware, is done without joining those running.
            let mut reply: BoxedReply<'_> = Box::pin(self.reply_to(slot, item, connection));
            if let Some((slot, reply)) = (&mut reply).now_or_never() {
                if let Some(at) = slot {
                    pending.push((at, reply));
                }
                continue;
            }
            in_flight.push_back(reply);
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
            // Entries finish in any order; their places are ascending.
            pending.sort_unstable_by_key(|(at, _)| *at);
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
    /// reply (if any) to `out`. Gives the item back when it must be awaited:
    /// its handler is async, or call middleware is installed.
    ///
    /// A response among incoming items is answered `-32600`: a router only
    /// serves (a peer, which also makes calls, routes responses before this).
    pub(crate) fn handle_inline<'a>(
        &self,
        item: Incoming<'a>,
        connection: &Arc<Extensions>,
        out: &mut Vec<u8>,
    ) -> Option<Incoming<'a>> {
        let table = &self.inner.table;
        match item {
            Incoming::Invalid(invalid) => {
                message::write_error(out, invalid.version, &invalid.id, &invalid.error);
                None
            }
            Incoming::Response(response) => {
                message::write_error(out, response.version, &response.id, &Error::invalid_request());
                None
            }
            item if self.has_layers() => Some(item),
            Incoming::Request(request) => {
                let info = CallInfo {
                    id: Some(&request.id),
                    connection,
                    call: None,
                };
                let RequestRef {
                    version,
                    ref id,
                    ref method,
                    params,
                } = request;
                match table.for_request(method) {
                    (Some(ErasedMethod::Sync(f)), _) => {
                        // Serialize the result straight into the reply.
                        let start = out.len();
                        message::result_prefix(out, version);
                        match table.guard(method, || f(params, &info, out)) {
                            Ok(()) => message::result_suffix(out, version, id),
                            Err(error) => {
                                out.truncate(start);
                                table.write_error(out, version, id, error, params);
                            }
                        }
                        None
                    }
                    // A request to a notification handler: run it, answer null.
                    (None, Some(ErasedNotification::Sync(f))) => {
                        match table.guard(method, || f(params, &info)) {
                            Ok(()) => message::write_result(out, version, id, b"null"),
                            Err(error) => table.write_error(out, version, id, error, params),
                        }
                        None
                    }
                    (None, None) if table.discovers(method) => {
                        match table.discovery(params) {
                            Ok(document) => message::write_result(out, version, id, document),
                            Err(error) => table.write_error(out, version, id, error, params),
                        }
                        None
                    }
                    (None, None) if table.fallback.is_none() => {
                        message::write_error(out, version, id, &Error::method_not_found());
                        None
                    }
                    _ => Some(Incoming::Request(request)),
                }
            }
            Incoming::Notification(notification) => {
                let info = CallInfo {
                    id: None,
                    connection,
                    call: None,
                };
                let NotificationRef { method, params, .. } = &notification;
                let outcome = match table.for_notification(method) {
                    (Some(ErasedNotification::Sync(f)), _) => table.guard(method, || f(*params, &info)),
                    // A notification to a method: run it, drop the result.
                    (None, Some(ErasedMethod::Sync(f))) => {
                        table.guard(method, || f(*params, &info, &mut Vec::new()))
                    }
                    // Nothing to say, and no one to say it to.
                    (None, None) if table.discovers(method) => Ok(()),
                    (None, None) if table.fallback.is_none() => Err(Error::method_not_found()),
                    _ => return Some(Incoming::Notification(notification)),
                };
                if let Err(error) = outcome {
                    notification_dropped(method, &error);
                }
                None
            }
        }
    }

    /// Serves an item that needs awaiting (as left by `handle_inline`),
    /// appending its reply (if any) to `out`.
    pub(crate) async fn handle_async(
        &self,
        item: Incoming<'_>,
        connection: &Arc<Extensions>,
        out: &mut Vec<u8>,
    ) {
        if self.has_layers() {
            return self.handle_layered(item, connection, out).await;
        }
        let table = &self.inner.table;
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
                    call: None,
                };
                let outcome = match table.for_request(&method) {
                    (Some(ErasedMethod::Async(f)), _) => match table.guard(&method, || f(params, &info)) {
                        Ok(future) => table.guard_async(&method, future).await,
                        Err(error) => Err(error),
                    },
                    (None, Some(ErasedNotification::Async(f))) => {
                        match table.guard(&method, || f(params, &info)) {
                            Ok(future) => table
                                .guard_async(&method, unit(future))
                                .await
                                .map(|()| b"null".to_vec()),
                            Err(error) => Err(error),
                        }
                    }
                    (None, None) => match &table.fallback {
                        Some(f) => table.run_fallback(f, &method, params, &info).await,
                        None => return,
                    },
                    _ => return,
                };
                match outcome {
                    Ok(result) => message::write_result(out, version, &id, &result),
                    Err(error) => table.write_error(out, version, &id, error, params),
                }
            }
            Incoming::Notification(NotificationRef { method, params, .. }) => {
                let info = CallInfo {
                    id: None,
                    connection,
                    call: None,
                };
                let outcome = match table.for_notification(&method) {
                    (Some(ErasedNotification::Async(f)), _) => {
                        match table.guard(&method, || f(params, &info)) {
                            Ok(future) => table.guard_async(&method, unit(future)).await,
                            Err(error) => Err(error),
                        }
                    }
                    (None, Some(ErasedMethod::Async(f))) => match table.guard(&method, || f(params, &info)) {
                        Ok(future) => table.guard_async(&method, future).await.map(drop),
                        Err(error) => Err(error),
                    },
                    (None, None) => match &table.fallback {
                        Some(f) => table.run_fallback(f, &method, params, &info).await.map(drop),
                        None => Ok(()),
                    },
                    _ => Ok(()),
                };
                if let Err(error) = outcome {
                    notification_dropped(&method, &error);
                }
            }
            Incoming::Invalid(_) | Incoming::Response(_) => {}
        }
    }

    /// Serves a request or notification through the call middleware.
    async fn handle_layered(&self, item: Incoming<'_>, connection: &Arc<Extensions>, out: &mut Vec<u8>) {
        let owned = |method: std::borrow::Cow<'_, str>, params: Option<&RawValue>| {
            (Arc::<str>::from(method), params.map(RawValue::to_owned))
        };
        match item {
            Incoming::Request(request) => {
                let (method, params) = owned(request.method, request.params);
                let call = Call::new(Some(request.id.clone()), method, params, Arc::clone(connection));
                match self.call(call).await {
                    Ok(result) => message::write_result(out, request.version, &request.id, result.as_bytes()),
                    Err(error) => message::write_error(out, request.version, &request.id, &error),
                }
            }
            Incoming::Notification(notification) => {
                let (method, params) = owned(notification.method, notification.params);
                let call = Call::new(None, method.clone(), params, Arc::clone(connection));
                if let Err(error) = self.call(call).await {
                    notification_dropped(&method, &error);
                }
            }
            Incoming::Invalid(_) | Incoming::Response(_) => {}
        }
    }
}

/// The handlers registered for a name: a method's, a notification
/// handler's, or none (a name is in one table at most).
type Handlers<'t> = (Option<&'t ErasedMethod>, Option<&'t ErasedNotification>);

impl Table {
    /// The handler for a request to `method`, looked up in the method table
    /// first (one hash lookup for the common case).
    fn for_request(&self, method: &str) -> Handlers<'_> {
        match self.methods.get(method) {
            Some(handler) => (Some(handler), None),
            None => (None, self.notifications.get(method)),
        }
    }

    /// The handler for a notification of `method`: notification handlers
    /// first. The same pair, in the order (notification, method).
    fn for_notification(&self, method: &str) -> (Option<&ErasedNotification>, Option<&ErasedMethod>) {
        match self.notifications.get(method) {
            Some(handler) => (Some(handler), None),
            None => (None, self.methods.get(method)),
        }
    }

    /// The innermost call service: runs the call's handler.
    pub(crate) fn dispatch(self: &Arc<Self>, call: Call) -> CallFuture {
        let parts = call.into_parts();
        let info = CallInfo {
            id: parts.id.as_ref(),
            connection: &parts.connection,
            call: parts.extensions.as_ref(),
        };
        let (method, params) = (parts.method, parts.params);
        let raw = params.as_deref();
        let ready = |outcome: Result<RawResult, Error>| -> CallFuture {
            let outcome = outcome.map_err(|error| self.redaction.scrub_error(error, raw));
            Box::pin(std::future::ready(outcome))
        };
        // Handlers that finish at once are answered here; the others give
        // a future of the serialized result.
        let started: Result<ResultFuture, Error> = match self.for_request(&method) {
            (Some(ErasedMethod::Sync(f)), _) => {
                let mut out = Vec::new();
                return ready(
                    self.guard(&method, || f(raw, &info, &mut out))
                        .map(|()| RawResult::from_serialized(out)),
                );
            }
            (Some(ErasedMethod::Async(f)), _) => self.guard(&method, || f(raw, &info)),
            // A request to a notification handler is answered null.
            (None, Some(ErasedNotification::Sync(f))) => {
                return ready(self.guard(&method, || f(raw, &info)).map(|()| RawResult::null()));
            }
            (None, Some(ErasedNotification::Async(f))) => {
                self.guard(&method, || f(raw, &info)).map(|future| {
                    Box::pin(async move {
                        future.await;
                        Ok(b"null".to_vec())
                    }) as ResultFuture
                })
            }
            (None, None) if self.discovers(&method) => {
                return ready(
                    self.discovery(raw)
                        .map(|document| RawResult::from_serialized(document.to_vec())),
                );
            }
            (None, None) => match &self.fallback {
                Some(f) => self.guard(&method, || Ok(f(&method, raw, &info))),
                None => return ready(Err(Error::method_not_found())),
            },
        };
        match started {
            Ok(future) => {
                let table = Arc::clone(self);
                Box::pin(async move {
                    let outcome = table.guard_async(&method, future).await;
                    outcome
                        .map(RawResult::from_serialized)
                        .map_err(|error| table.redaction.scrub_error(error, params.as_deref()))
                })
            }
            Err(error) => ready(Err(error)),
        }
    }

    /// Runs the fallback handler for an unknown method.
    async fn run_fallback(
        &self,
        fallback: &ErasedFallback,
        method: &str,
        params: Option<&RawValue>,
        info: &CallInfo<'_>,
    ) -> Result<Vec<u8>, Error> {
        match self.guard(method, || Ok(fallback(method, params, info))) {
            Ok(future) => self.guard_async(method, future).await,
            Err(error) => Err(error),
        }
    }

    /// Runs a handler step, turning a panic into the `-32603` error.
    fn guard<T>(&self, method: &str, step: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        std::panic::catch_unwind(AssertUnwindSafe(step))
            .unwrap_or_else(|panic| Err(self.panic_error(method, panic)))
    }

    /// Awaits a handler's future, turning a panic into the `-32603` error.
    async fn guard_async<T>(
        &self,
        method: &str,
        future: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        AssertUnwindSafe(future)
            .catch_unwind()
            .await
            .unwrap_or_else(|panic| Err(self.panic_error(method, panic)))
    }

    /// Writes an error reply, without the secrets of `params` it may quote.
    fn write_error(
        &self,
        out: &mut Vec<u8>,
        version: Version,
        id: &Id,
        error: Error,
        params: Option<&RawValue>,
    ) {
        let error = if error.data().is_some() || params.is_some() {
            self.redaction.scrub_error(error, params)
        } else {
            error
        };
        message::write_error(out, version, id, &error);
    }

    fn panic_error(&self, method: &str, panic: Box<dyn Any + Send>) -> Error {
        let text = panic_text(panic);
        tracing::error!(method, panic = %text, "handler panicked");
        let error = Error::internal_error();
        if self.expose_internal_errors {
            error.with_data(&format!("handler panicked: {text}"))
        } else {
            error
        }
    }
}

/// A notification handler's future as a fallible one.
async fn unit(future: impl Future<Output = ()>) -> Result<(), Error> {
    future.await;
    Ok(())
}

fn notification_dropped(method: &str, error: &Error) {
    tracing::debug!(method, %error, "notification dropped");
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

/// A batch entry's place in the reply and its reply, on the way.
type BoxedReply<'a> = std::pin::Pin<Box<dyn Future<Output = (Option<usize>, Vec<u8>)> + Send + 'a>>;

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
