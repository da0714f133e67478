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

use super::handler::{
    AsyncMethodFn, AsyncNotifyFn, CallInfo, ErasedFallback, ErasedMethod, ErasedNotification, ResultFuture,
    SyncMethodFn, SyncNotifyFn, UnitFuture,
};
use super::Table;
use crate::message::{self, Error, Id, Version};
use crate::middleware::{Call, CallFuture, RawResult};

/// What answers a call to a name, chosen once by [`Table::select`]: the
/// one place that knows the rules (a method's handler; a notification
/// handler, which a request to it gets `null` from; `rpc.discover`; the
/// fallback; else method not found). A name is in one of the two handler
/// tables at most, so a request and a notification to it choose alike:
/// the caller decides what becomes of the result (a notification drops it).
pub(crate) enum Choice<'t> {
    /// Answered on the spot, with no future: see [`Table::run_now`].
    Now(Now<'t>),
    /// Answered by a future: see [`Table::start`].
    Later(Later<'t>),
}

/// A choice that is answered on the spot.
pub(crate) struct Now<'t>(NowHandler<'t>);

enum NowHandler<'t> {
    Method(&'t SyncMethodFn),
    Notification(&'t SyncNotifyFn),
    Discovery,
    NotFound,
}

impl Now<'_> {
    /// Whether this is `rpc.discover`: a notification to it asks for
    /// nothing, so the document need not be made.
    pub(crate) fn is_discovery(&self) -> bool {
        matches!(self.0, NowHandler::Discovery)
    }
}

/// A choice that is answered by a future.
pub(crate) struct Later<'t>(LaterHandler<'t>);

enum LaterHandler<'t> {
    Method(&'t AsyncMethodFn),
    Notification(&'t AsyncNotifyFn),
    Fallback(&'t ErasedFallback),
}

/// A handler under way (from [`Table::start`]); [`Table::finish`] awaits it.
pub(crate) enum Started {
    /// Gives the serialized result.
    Result(ResultFuture),
    /// A notification handler's: its result is `null`.
    Unit(UnitFuture),
}

impl Table {
    /// What answers a call to `method`: one hash lookup for the common
    /// case (a method).
    #[inline]
    pub(crate) fn select(&self, method: &str) -> Choice<'_> {
        if let Some(handler) = self.methods.get(method) {
            return match handler {
                ErasedMethod::Sync(f) => Choice::Now(Now(NowHandler::Method(&**f))),
                ErasedMethod::Async(f) => Choice::Later(Later(LaterHandler::Method(&**f))),
            };
        }
        if let Some(handler) = self.notifications.get(method) {
            return match handler {
                ErasedNotification::Sync(f) => Choice::Now(Now(NowHandler::Notification(&**f))),
                ErasedNotification::Async(f) => Choice::Later(Later(LaterHandler::Notification(&**f))),
            };
        }
        if self.discovers(method) {
            return Choice::Now(Now(NowHandler::Discovery));
        }
        match &self.fallback {
            Some(fallback) => Choice::Later(Later(LaterHandler::Fallback(fallback))),
            None => Choice::Now(Now(NowHandler::NotFound)),
        }
    }

    /// Runs a choice answered on the spot, appending its result's JSON to
    /// `out` (`null` from a notification handler, the OpenRPC document for
    /// `rpc.discover`); a handler's panic is `-32603`. On an error, `out`
    /// may hold part of a result: the caller cuts it.
    #[inline]
    pub(crate) fn run_now(
        &self,
        now: Now<'_>,
        method: &str,
        params: Option<&RawValue>,
        info: &CallInfo<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        match now.0 {
            NowHandler::Method(f) => self.guard(method, || f(params, info, out)),
            NowHandler::Notification(f) => {
                self.guard(method, || f(params, info))?;
                out.extend_from_slice(b"null");
                Ok(())
            }
            NowHandler::Discovery => {
                out.extend_from_slice(self.discovery(params)?);
                Ok(())
            }
            NowHandler::NotFound => Err(Error::method_not_found()),
        }
    }

    /// Starts a choice answered by a future (its params decoded on the
    /// spot, so a bad call fails before any future is made); a handler's
    /// panic is `-32603`. The future borrows nothing: it may be moved to
    /// another task.
    #[inline]
    pub(crate) fn start(
        &self,
        later: Later<'_>,
        method: &str,
        params: Option<&RawValue>,
        info: &CallInfo<'_>,
    ) -> Result<Started, Error> {
        match later.0 {
            LaterHandler::Method(f) => self.guard(method, || f(params, info)).map(Started::Result),
            LaterHandler::Notification(f) => self.guard(method, || f(params, info)).map(Started::Unit),
            LaterHandler::Fallback(fallback) => self
                .guard(method, || Ok(fallback(method, params, info)))
                .map(Started::Result),
        }
    }

    /// Awaits a started handler: its serialized result; a panic is
    /// `-32603`.
    pub(crate) async fn finish(&self, method: &str, started: Started) -> Result<Vec<u8>, Error> {
        match started {
            Started::Result(future) => self.guard_async(method, future).await,
            Started::Unit(future) => self
                .guard_async(method, unit(future))
                .await
                .map(|()| b"null".to_vec()),
        }
    }

    /// The innermost call service, under the router's middleware: runs the
    /// call's handler.
    pub(crate) fn call_handler(self: &Arc<Self>, call: Call) -> CallFuture {
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
        let started = match self.select(&method) {
            Choice::Now(now) => {
                let mut out = Vec::new();
                let outcome = self.run_now(now, &method, raw, &info, &mut out);
                return ready(outcome.map(|()| RawResult::from_serialized(out)));
            }
            Choice::Later(later) => self.start(later, &method, raw, &info),
        };
        match started {
            Ok(started) => {
                let table = Arc::clone(self);
                Box::pin(async move {
                    let outcome = table.finish(&method, started).await;
                    outcome
                        .map(RawResult::from_serialized)
                        .map_err(|error| table.redaction.scrub_error(error, params.as_deref()))
                })
            }
            Err(error) => ready(Err(error)),
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
async fn unit(future: impl Future<Output = ()>) -> Result<(), Error> {
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
