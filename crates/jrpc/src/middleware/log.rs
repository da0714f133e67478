//! The call log: one `tracing` event per call.

use std::task::{Context, Poll};
use std::time::Instant;

use tower::{Layer, Service};
use tracing::field::display;

use super::{Call, CallFuture, RawResult, Redaction};
use crate::message::{Error, Id};
use std::sync::Arc;

/// How much of each call the log shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LogDetail {
    /// Method, id, transport, duration and outcome (the error code).
    #[default]
    Brief,
    /// Also the params and the result (or error data), with secrets
    /// redacted.
    Full,
}

/// Logs every call as one `tracing` event at `INFO` level with target
/// `jrpc::call`: the method, the id (none for a notification), the
/// transport, the caller's identity when known, the duration and the outcome
/// (`ok`; `error` with the `code` and the `error` message; or `cancelled`
/// for a call dropped before it ended). With [`LogDetail::Full`] also the
/// params and the result, with the members a [`Redaction`] names replaced.
///
/// ```
/// use jrpc::middleware::{CallLog, LogDetail, Redaction};
///
/// let log = CallLog::new()
///     .detail(LogDetail::Full)
///     .redaction(Redaction::default().with("pin"));
/// let router = jrpc::Router::new().sync_method("ping", || Ok("pong")).layer(log);
/// ```
#[derive(Debug, Clone, Default)]
pub struct CallLog {
    detail: LogDetail,
    redaction: Redaction,
}

/// The `tracing` target of call log events.
pub const TARGET: &str = "jrpc::call";

impl CallLog {
    /// Brief lines, with the default redaction for when detail is raised.
    pub fn new() -> Self {
        Self::default()
    }

    /// How much to log (default [`LogDetail::Brief`]).
    pub fn detail(mut self, detail: LogDetail) -> Self {
        self.detail = detail;
        self
    }

    /// Which members to hide in logged params and results (default
    /// [`Redaction::default`]).
    pub fn redaction(mut self, redaction: Redaction) -> Self {
        self.redaction = redaction;
        self
    }
}

impl<S> Layer<S> for CallLog {
    type Service = CallLogService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallLogService {
            log: self.clone(),
            inner,
        }
    }
}

/// The service made by [`CallLog`].
#[derive(Debug, Clone)]
pub struct CallLogService<S> {
    log: CallLog,
    inner: S,
}

impl<S> Service<Call> for CallLogService<S>
where
    S: Service<Call, Response = RawResult, Error = Error>,
    S::Future: Send + 'static,
{
    type Response = RawResult;
    type Error = Error;
    type Future = CallFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: Call) -> CallFuture {
        // Filtered out (no subscriber wants call lines): no work at all.
        if !tracing::enabled!(target: TARGET, tracing::Level::INFO) {
            return Box::pin(self.inner.call(call));
        }
        let full = self.log.detail == LogDetail::Full;
        let mut line = Line {
            method: call.method_shared(),
            id: call.id().cloned(),
            transport: call.connection_info().map(|info| info.transport),
            identity: call.identity().map(|who| who.name().into()),
            started: Instant::now(),
            params: call
                .params()
                .filter(|_| full)
                .map(|p| self.log.redaction.redact_json(p.get())),
            redaction: full.then(|| self.log.redaction.clone()),
            logged: false,
        };
        let future = self.inner.call(call);
        Box::pin(async move {
            let outcome = future.await;
            line.outcome(&outcome);
            outcome
        })
    }
}

/// What every log line says; a call whose future is dropped before it
/// ends (cancelled by a cancel notification, or aborted with its connection
/// at shutdown) is logged as `cancelled`.
struct Line {
    method: Arc<str>,
    id: Option<Id>,
    transport: Option<&'static str>,
    identity: Option<Box<str>>,
    started: Instant,
    /// Redacted params, and what redacts the result, when logged in full.
    params: Option<String>,
    redaction: Option<Redaction>,
    logged: bool,
}

impl Line {
    fn outcome(&mut self, outcome: &Result<RawResult, Error>) {
        self.logged = true;
        let elapsed = self.started.elapsed();
        let redacted = |json: &str| self.redaction.as_ref().map(|r| r.redact_json(json));
        let (method, id) = (display(&*self.method), self.id.as_ref().map(display));
        let (transport, identity) = (self.transport.map(display), self.identity.as_deref().map(display));
        match outcome {
            Ok(result) => tracing::info!(
                target: TARGET,
                method,
                id,
                transport,
                identity,
                duration = %Took(elapsed),
                outcome = "ok",
                params = self.params.as_deref(),
                result = redacted(result.as_str()).as_deref(),
                "call"
            ),
            Err(error) => tracing::info!(
                target: TARGET,
                method,
                id,
                transport,
                identity,
                duration = %Took(elapsed),
                outcome = "error",
                code = error.code(),
                error = error.message(),
                params = self.params.as_deref(),
                data = error.data().and_then(|d| redacted(d.get())).as_deref(),
                "call"
            ),
        }
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if !self.logged {
            tracing::info!(
                target: TARGET,
                method = display(&*self.method),
                id = self.id.as_ref().map(display),
                transport = self.transport.map(display),
                identity = self.identity.as_deref().map(display),
                duration = %Took(self.started.elapsed()),
                outcome = "cancelled",
                params = self.params.as_deref(),
                "call"
            );
        }
    }
}

/// A call's duration, printed in whole microseconds below 10 ms and in
/// milliseconds above (integer formatting: cheaper than `Duration`'s).
struct Took(std::time::Duration);

impl std::fmt::Display for Took {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let micros = self.0.as_micros();
        if micros < 10_000 {
            write!(f, "{micros}µs")
        } else {
            write!(f, "{}ms", micros / 1000)
        }
    }
}
