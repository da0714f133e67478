//! Call middleware: [`tower`] layers around every call a router serves.
//!
//! A call — its method, id (none for a notification), raw params and
//! context — goes in as a [`Call`]; its outcome comes out as a
//! [`RawResult`] or a JSON-RPC [`Error`]. Layers added with
//! [`Router::layer`](crate::Router::layer) wrap the router's handlers, and
//! every incoming request and notification passes through them exactly
//! once, whatever carried it (stdio, TCP, Unix sockets, child processes,
//! HTTP, WebSocket) and whether it came alone or as a batch entry. There is
//! no separate batch hook a layer could forget: the router splits batches
//! and sends each entry through the stack.
//!
//! With no layer installed, plain handlers keep the router's inline path
//! (no task, no future, no copy of the params).
//!
//! Built-in layers: [`CallLog`] (one `tracing` event per call, with
//! [`Redaction`] of secrets), [`Metrics`] (Prometheus, with the `metrics`
//! feature), [`CallTimeout`], [`ConcurrencyLimit`], [`RateLimitLayer`] and
//! [`Authorize`].
//!
//! A layer of your own is an ordinary tower layer:
//!
//! ```
//! use jrpc::middleware::{layer_fn, service_fn, BoxCallService, Call, Service, ServiceExt};
//! use jrpc::{Error, Router};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! // Refuse every method whose name starts with "admin.", let the rest through.
//! let no_admin = layer_fn(|inner: BoxCallService| {
//!     service_fn(move |call: Call| {
//!         let inner = inner.clone();
//!         async move {
//!             if call.method().starts_with("admin.") {
//!                 return Err(Error::new(-32004, "Unauthorized"));
//!             }
//!             inner.oneshot(call).await
//!         }
//!     })
//! });
//! let router = Router::new()
//!     .sync_method("admin.reset", || Ok(true))
//!     .sync_method("ping", || Ok("pong"))
//!     .layer(no_admin);
//! let reply = router.handle(br#"{"jsonrpc":"2.0","method":"admin.reset","id":1}"#).await;
//! assert_eq!(reply.unwrap(), r#"{"jsonrpc":"2.0","error":{"code":-32004,"message":"Unauthorized"},"id":1}"#);
//! # });
//! ```

mod call;
#[cfg(feature = "runtime")]
mod limits;
#[cfg(feature = "runtime")]
mod log;
#[cfg(feature = "metrics")]
mod metrics;
mod redact;

use std::future::Future;
use std::pin::Pin;

pub use tower::layer::layer_fn;
pub use tower::util::{service_fn, BoxCloneSyncService};
pub use tower::{Layer, Service, ServiceExt};

pub use call::{Call, RawResult};
#[cfg(feature = "runtime")]
pub use limits::{
    Authorize, AuthorizeService, CallTimeout, CallTimeoutService, ConcurrencyLimit, ConcurrencyLimitService,
    RateLimit, RateLimitLayer, RateLimitService,
};
#[cfg(feature = "runtime")]
pub use log::{CallLog, CallLogService, LogDetail, TARGET as CALL_LOG_TARGET};
#[cfg(feature = "metrics")]
pub use metrics::{ConnectionGauge, Metrics, MetricsLayer, MetricsService};
pub use redact::Redaction;

use crate::message::Error;

/// Any error a layer may fail with; the router turns it into an error
/// reply (a [`jrpc::Error`](crate::Error) as itself, anything else as
/// `-32603 Internal error`).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What a call service's future yields.
pub type CallOutcome = Result<RawResult, Error>;

/// A boxed future of a call's outcome.
pub type CallFuture = Pin<Box<dyn Future<Output = CallOutcome> + Send>>;

/// The call stack as layers see it: the router's handlers, with the layers
/// added before this one around them.
pub type BoxCallService = BoxCloneSyncService<Call, RawResult, Error>;

/// Turns a layer's error into the error reply for the call.
pub(crate) fn into_rpc_error(error: BoxError) -> Error {
    match error.downcast::<Error>() {
        Ok(error) => *error,
        Err(other) => {
            tracing::error!(error = %other, "call middleware failed");
            Error::internal_error()
        }
    }
}
