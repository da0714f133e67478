//! The method table: register handlers, then hand the router whole frames.
//!
//! ```
//! use jrpc::{Error, Router};
//! use serde::Deserialize;
//!
//! #[derive(Deserialize)]
//! struct Subtract { minuend: i64, subtrahend: i64 }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let router = Router::new()
//!     // Typed params: a struct accepts `[42, 23]` and `{"minuend": 42, "subtrahend": 23}`.
//!     .method("subtract", |p: Subtract| async move { Ok(p.minuend - p.subtrahend) })
//!     // Plain functions run inline, without a task or a future.
//!     .sync_method("ping", || Ok("pong"))
//!     .sync_method("fail", || -> Result<(), Error> { Err(Error::new(-32050, "Not today")) });
//!
//! let reply = router.handle(br#"{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}"#).await;
//! assert_eq!(reply.unwrap(), r#"{"jsonrpc":"2.0","result":19,"id":1}"#);
//!
//! // Notifications get no reply.
//! assert!(router.handle(br#"{"jsonrpc":"2.0","method":"ping"}"#).await.is_none());
//! # });
//! ```

mod context;
mod dispatch;
#[cfg(feature = "runtime")]
pub(crate) use dispatch::Responses;
mod handler;
mod params;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

pub use context::{Extensions, RequestContext};
pub use handler::{AsyncMethod, AsyncNotification, SyncMethod, SyncNotification};
use handler::{ErasedMethod, ErasedNotification};

use crate::message::Limits;

/// Why a handler could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// Names beginning with `rpc.` are reserved by the specification for
    /// system extensions.
    #[error("method name {0:?} is reserved: names beginning with \"rpc.\" are for system extensions")]
    Reserved(String),
    /// A method (or notification handler) of that name is already registered.
    #[error("{0:?} is already registered")]
    Duplicate(String),
}

/// A JSON-RPC method table and the settings for serving it.
///
/// Build it once with the builder methods; it is cheap to clone (an `Arc`),
/// so every connection can hold its own copy. See the [module docs](self)
/// for an example.
#[derive(Clone, Default)]
pub struct Router {
    inner: Arc<Inner>,
}

#[derive(Clone)]
struct Inner {
    methods: HashMap<Box<str>, ErasedMethod>,
    notifications: HashMap<Box<str>, ErasedNotification>,
    limits: Limits,
    batch_concurrency: usize,
    expose_internal_errors: bool,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            methods: HashMap::new(),
            notifications: HashMap::new(),
            limits: Limits::default(),
            batch_concurrency: Router::DEFAULT_BATCH_CONCURRENCY,
            expose_internal_errors: false,
        }
    }
}

impl Router {
    /// The default bound on batch entries handled at the same time: 32.
    pub const DEFAULT_BATCH_CONCURRENCY: usize = 32;

    /// An empty router with default settings.
    pub fn new() -> Self {
        Self::default()
    }

    fn inner_mut(&mut self) -> &mut Inner {
        Arc::make_mut(&mut self.inner)
    }

    fn check_name(&self, name: &str) -> Result<(), RegisterError> {
        if name.starts_with("rpc.") {
            return Err(RegisterError::Reserved(name.to_owned()));
        }
        if self.inner.methods.contains_key(name) || self.inner.notifications.contains_key(name) {
            return Err(RegisterError::Duplicate(name.to_owned()));
        }
        Ok(())
    }

    fn add_method(mut self, name: &str, handler: ErasedMethod) -> Result<Self, RegisterError> {
        self.check_name(name)?;
        self.inner_mut().methods.insert(name.into(), handler);
        Ok(self)
    }

    fn add_notification(mut self, name: &str, handler: ErasedNotification) -> Result<Self, RegisterError> {
        self.check_name(name)?;
        self.inner_mut().notifications.insert(name.into(), handler);
        Ok(self)
    }

    /// Registers an async method handler.
    ///
    /// A notification sent to a method runs the handler and drops its result.
    ///
    /// # Panics
    /// When `name` begins with `rpc.` or is already registered; use
    /// [`try_method`](Self::try_method) to get an error instead.
    #[track_caller]
    pub fn method<M>(self, name: &str, handler: impl AsyncMethod<M>) -> Self {
        self.try_method(name, handler).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Registers an async method handler, or says why it cannot be.
    pub fn try_method<M>(self, name: &str, handler: impl AsyncMethod<M>) -> Result<Self, RegisterError> {
        self.add_method(name, handler.erase())
    }

    /// Registers a plain (non-async) method handler. It runs inline, without
    /// a future or a task, which makes it the fastest kind; it must not block.
    ///
    /// # Panics
    /// As [`method`](Self::method).
    #[track_caller]
    pub fn sync_method<M>(self, name: &str, handler: impl SyncMethod<M>) -> Self {
        self.try_sync_method(name, handler)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Registers a plain method handler, or says why it cannot be.
    pub fn try_sync_method<M>(self, name: &str, handler: impl SyncMethod<M>) -> Result<Self, RegisterError> {
        self.add_method(name, handler.erase())
    }

    /// Registers an async notification handler. A request (with an id) to a
    /// name that has only a notification handler runs it too, and is
    /// answered with a `null` result.
    ///
    /// # Panics
    /// As [`method`](Self::method).
    #[track_caller]
    pub fn notification<M>(self, name: &str, handler: impl AsyncNotification<M>) -> Self {
        self.try_notification(name, handler)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Registers an async notification handler, or says why it cannot be.
    pub fn try_notification<M>(
        self,
        name: &str,
        handler: impl AsyncNotification<M>,
    ) -> Result<Self, RegisterError> {
        self.add_notification(name, handler.erase())
    }

    /// Registers a plain notification handler.
    ///
    /// # Panics
    /// As [`method`](Self::method).
    #[track_caller]
    pub fn sync_notification<M>(self, name: &str, handler: impl SyncNotification<M>) -> Self {
        self.try_sync_notification(name, handler)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Registers a plain notification handler, or says why it cannot be.
    pub fn try_sync_notification<M>(
        self,
        name: &str,
        handler: impl SyncNotification<M>,
    ) -> Result<Self, RegisterError> {
        self.add_notification(name, handler.erase())
    }

    /// Adds every handler of `other` to this router; this router's settings
    /// are kept.
    ///
    /// # Panics
    /// When both routers have a handler of the same name.
    #[track_caller]
    pub fn merge(mut self, other: Router) -> Self {
        for (name, handler) in &other.inner.methods {
            self = self
                .add_method(name, handler.clone())
                .unwrap_or_else(|e| panic!("{e}"));
        }
        for (name, handler) in &other.inner.notifications {
            self = self
                .add_notification(name, handler.clone())
                .unwrap_or_else(|e| panic!("{e}"));
        }
        self
    }

    /// Replaces all parsing limits at once.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.inner_mut().limits = limits;
        self
    }

    /// Largest frame accepted, in bytes (default 8 MiB). Larger frames are
    /// answered with `-32001`.
    pub fn max_frame_len(mut self, bytes: usize) -> Self {
        self.inner_mut().limits.max_frame_len = bytes;
        self
    }

    /// Most entries in one batch (default 10 000). Longer batches are answered
    /// with one `-32002` error.
    pub fn max_batch_len(mut self, entries: usize) -> Self {
        self.inner_mut().limits.max_batch_len = entries;
        self
    }

    /// Deepest nesting of arrays and objects in a frame (default 128). Deeper
    /// frames are answered with `-32003`.
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.inner_mut().limits.max_depth = depth;
        self
    }

    /// How many entries of one batch run at the same time (default 32; at
    /// least 1). Replies still come in request order.
    pub fn batch_concurrency(mut self, entries: usize) -> Self {
        self.inner_mut().batch_concurrency = entries.max(1);
        self
    }

    /// Accept JSON-RPC 1.0 messages (off by default). With it on:
    /// - an object without `"jsonrpc"` is read as a 1.0 message;
    /// - a 1.0 request is answered in 1.0 form: `{"result": R, "error": null,
    ///   "id": ID}` or `{"result": null, "error": {"code", "message",
    ///   "data"?}, "id": ID}`, with no `"jsonrpc"` member;
    /// - a 1.0 request with `"id": null` (or no id) is a notification and gets
    ///   no reply;
    /// - params may be an array, an object, `null` or absent;
    /// - invalid 1.0 messages are answered `-32600` in 1.0 form;
    /// - 2.0 messages are served as always, also mixed with 1.0 in a batch.
    pub fn accept_v1(mut self, on: bool) -> Self {
        self.inner_mut().limits.accept_v1 = on;
        self
    }

    /// Put a panicking handler's message into the `data` of the `-32603`
    /// reply (off by default, so internals never leak to callers).
    pub fn expose_internal_errors(mut self, on: bool) -> Self {
        self.inner_mut().expose_internal_errors = on;
        self
    }

    /// The parsing limits in force; transports use them to bound frames
    /// before they reach the router.
    pub fn parse_limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// Whether a method of that name is registered.
    pub fn has_method(&self, name: &str) -> bool {
        self.inner.methods.contains_key(name)
    }

    /// The registered method names, sorted.
    pub fn method_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.inner.methods.keys().map(|k| &**k).collect();
        names.sort_unstable();
        names
    }
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut notifications: Vec<&str> = self.inner.notifications.keys().map(|k| &**k).collect();
        notifications.sort_unstable();
        f.debug_struct("Router")
            .field("methods", &self.method_names())
            .field("notifications", &notifications)
            .field("limits", &self.inner.limits)
            .field("batch_concurrency", &self.inner.batch_concurrency)
            .finish()
    }
}
