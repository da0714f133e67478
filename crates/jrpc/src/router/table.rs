//! Looking handlers up by name and running them: the innermost call
//! service, and the guards that turn a handler's panic into `-32603`.
//! (Serving frames — batches, bounds, the inline fast path — is
//! [`dispatch`](crate::dispatch)'s job.)

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use serde_json::value::RawValue;

use super::handler::{CallInfo, ErasedFallback, ErasedMethod, ErasedNotification, ResultFuture};
use super::Table;
use crate::message::{self, Error, Id, Version};
use crate::middleware::{Call, CallFuture, RawResult};

/// The handlers registered for a name: a method's, a notification
/// handler's, or none (a name is in one table at most).
pub(crate) type Handlers<'t> = (Option<&'t ErasedMethod>, Option<&'t ErasedNotification>);

impl Table {
    /// The handler for a request to `method`, looked up in the method table
    /// first (one hash lookup for the common case).
    pub(crate) fn for_request(&self, method: &str) -> Handlers<'_> {
        match self.methods.get(method) {
            Some(handler) => (Some(handler), None),
            None => (None, self.notifications.get(method)),
        }
    }

    /// The handler for a notification of `method`: notification handlers
    /// first. The same pair, in the order (notification, method).
    pub(crate) fn for_notification(
        &self,
        method: &str,
    ) -> (Option<&ErasedNotification>, Option<&ErasedMethod>) {
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
    pub(crate) async fn run_fallback(
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
    pub(crate) fn guard<T>(&self, method: &str, step: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        std::panic::catch_unwind(AssertUnwindSafe(step))
            .unwrap_or_else(|panic| Err(self.panic_error(method, panic)))
    }

    /// Awaits a handler's future, turning a panic into the `-32603` error.
    pub(crate) async fn guard_async<T>(
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
    pub(crate) fn write_error(
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
pub(crate) async fn unit(future: impl Future<Output = ()>) -> Result<(), Error> {
    future.await;
    Ok(())
}

pub(crate) fn notification_dropped(method: &str, error: &Error) {
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
