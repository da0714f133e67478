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
use crate::message::{self, parse_frame, Error, Frame, Id, Incoming, NotificationRef, RequestRef, Version};

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
                self.handle_item(item, connection, &mut out).await;
                (!out.is_empty()).then(|| out.into())
            }
            Ok(Frame::Batch(items)) => {
                // A window of at most `batch_concurrency` entries in flight;
                // `FuturesOrdered` yields replies in request order.
                let mut items = items.into_iter();
                let mut in_flight = FuturesOrdered::new();
                let mut out = vec![b'['];
                loop {
                    while in_flight.len() < self.inner.batch_concurrency {
                        let Some(item) = items.next() else { break };
                        in_flight.push_back(self.reply_to(item, connection));
                    }
                    let Some(reply) = in_flight.next().await else {
                        break;
                    };
                    if reply.is_empty() {
                        continue;
                    }
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
        }
    }

    /// Serves one batch entry; its reply, or nothing.
    async fn reply_to(&self, item: Incoming<'_>, connection: &Arc<Extensions>) -> Vec<u8> {
        let mut out = Vec::new();
        self.handle_item(item, connection, &mut out).await;
        out
    }

    /// Serves one item, appending its reply (if any) to `out`.
    async fn handle_item(&self, item: Incoming<'_>, connection: &Arc<Extensions>, out: &mut Vec<u8>) {
        match item {
            Incoming::Request(request) => self.handle_request(request, connection, out).await,
            Incoming::Notification(notification) => self.handle_notification(notification, connection).await,
            Incoming::Invalid(invalid) => {
                message::write_error(out, invalid.version, &invalid.id, &invalid.error)
            }
            // A router only serves: a response is not a valid request here.
            // (A peer, which also makes calls, routes responses before this.)
            Incoming::Response(response) => {
                message::write_error(out, response.version, &response.id, &Error::invalid_request())
            }
        }
    }

    async fn handle_request(&self, request: RequestRef<'_>, connection: &Arc<Extensions>, out: &mut Vec<u8>) {
        let RequestRef {
            version,
            id,
            method,
            params,
        } = request;
        let Some(handler) = self.inner.methods.get(&*method) else {
            return message::write_error(out, version, &id, &Error::method_not_found());
        };
        let info = CallInfo {
            id: Some(&id),
            connection,
        };
        let start = out.len();
        let outcome = match handler {
            ErasedMethod::Sync(f) => {
                // Serialize the result straight into the reply.
                message::result_prefix(out, version);
                match std::panic::catch_unwind(AssertUnwindSafe(|| f(params, &info, out))) {
                    Ok(Ok(())) => return message::result_suffix(out, version, &id),
                    Ok(Err(error)) => Err(error),
                    Err(panic) => Err(self.panic_error(&method, panic)),
                }
            }
            ErasedMethod::Async(f) => match std::panic::catch_unwind(AssertUnwindSafe(|| f(params, &info))) {
                Ok(Ok(future)) => match AssertUnwindSafe(future).catch_unwind().await {
                    Ok(outcome) => outcome,
                    Err(panic) => Err(self.panic_error(&method, panic)),
                },
                Ok(Err(error)) => Err(error),
                Err(panic) => Err(self.panic_error(&method, panic)),
            },
        };
        match outcome {
            Ok(result) => message::write_result(out, version, &id, &result),
            Err(error) => {
                out.truncate(start);
                message::write_error(out, version, &id, &error)
            }
        }
    }

    async fn handle_notification(&self, notification: NotificationRef<'_>, connection: &Arc<Extensions>) {
        let NotificationRef { method, params, .. } = notification;
        let info = CallInfo { id: None, connection };
        let outcome = if let Some(handler) = self.inner.notifications.get(&*method) {
            match handler {
                ErasedNotification::Sync(f) => catch(|| f(params, &info)),
                ErasedNotification::Async(f) => match catch(|| f(params, &info)) {
                    Ok(future) => AssertUnwindSafe(future).catch_unwind().await.map_err(panic_text),
                    Err(e) => Err(e),
                },
            }
        } else if let Some(handler) = self.inner.methods.get(&*method) {
            // A notification to a method: run it, drop the result.
            match handler {
                ErasedMethod::Sync(f) => catch(|| f(params, &info, &mut Vec::new())),
                ErasedMethod::Async(f) => match catch(|| f(params, &info)) {
                    Ok(future) => match AssertUnwindSafe(future).catch_unwind().await {
                        Ok(result) => result.map(drop).map_err(|e| e.to_string()),
                        Err(panic) => Err(panic_text(panic)),
                    },
                    Err(e) => Err(e),
                },
            }
        } else {
            Err("no handler".to_owned())
        };
        if let Err(reason) = outcome {
            tracing::debug!(method = %method, %reason, "notification dropped");
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

fn empty_connection() -> Arc<Extensions> {
    static EMPTY: std::sync::OnceLock<Arc<Extensions>> = std::sync::OnceLock::new();
    Arc::clone(EMPTY.get_or_init(|| Arc::new(Extensions::new())))
}
