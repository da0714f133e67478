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

mod handler;
mod params;
mod stack;
mod table;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use stack::Stack;

pub use crate::context::{ConnectionInfo, Extensions, Identity, RequestContext};
use handler::marker::Signature;
pub(crate) use handler::CallInfo;
use handler::ErasedFallback;
pub use handler::{AsyncMethod, AsyncNotification, SyncMethod, SyncNotification};
use handler::{ErasedMethod, ErasedNotification};
pub(crate) use table::{notification_dropped, Choice};

use crate::message::Limits;
use crate::middleware::{
    into_rpc_error, BoxCallService, BoxCloneSyncService, BoxError, Call, RawResult, Redaction,
};
use crate::openrpc::{Document, Info, MethodDoc};
use crate::typed::{Method, Notification};
use tower::{Layer, Service, ServiceExt};

/// Why a handler could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// Names beginning with `rpc.` are reserved by the specification for
    /// system extensions.
    #[error("method name {0:?} is reserved: names beginning with \"rpc.\" are for system extensions")]
    Reserved(String),
    /// A method (or notification handler) of that name is already registered.
    #[error("{0:?} is already registered")]
    Duplicate(String),
    /// A description was given for a name no handler is registered for.
    #[error("{0:?} is not registered: register the method before describing it")]
    NotRegistered(String),
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
    table: Arc<Table>,
    limits: Limits,
    batch_concurrency: usize,
    /// Call middleware, innermost first.
    layers: Vec<LayerFn>,
    /// The handlers wrapped in `layers`, built on first use (and built
    /// again after any change).
    stack: OnceLock<Stack>,
}

/// How the handler tables hash method names: every call looks its method
/// up, and std's default (SipHash, keyed against collision attacks) costs
/// more than the rest of a small call's dispatch. Callers only look names
/// up; the names that go in are the server's own, so an attacker choosing
/// the names looked up cannot degrade the table.
type Names = std::hash::BuildHasherDefault<NameHasher>;

/// A multiply-rotate hash over eight bytes at a time (the FxHash scheme).
#[derive(Default)]
pub(crate) struct NameHasher(u64);

impl std::hash::Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(byte)).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Wraps the call stack built so far in one more layer.
type LayerFn = Arc<dyn Fn(BoxCallService) -> BoxCallService + Send + Sync>;

/// The handlers, and how their failures are reported.
#[derive(Clone, Default)]
pub(crate) struct Table {
    methods: HashMap<Box<str>, ErasedMethod, Names>,
    notifications: HashMap<Box<str>, ErasedNotification, Names>,
    /// Serves calls to names no handler is registered for.
    pub(crate) fallback: Option<ErasedFallback>,
    expose_internal_errors: bool,
    redaction: Redaction,
    /// Descriptions of methods and notifications, by name.
    docs: HashMap<Box<str>, MethodDoc>,
    /// What `rpc.discover` says the service is; `None` when it is off.
    discover: Option<Info>,
    /// The serialized `rpc.discover` result, built on first use (and
    /// again after any change).
    discovery: OnceLock<Vec<u8>>,
}

impl Table {
    /// The OpenRPC document of this table's handlers.
    fn openrpc(&self) -> Document {
        let methods = self.methods.keys().map(|name| (name, false));
        let notifications = self.notifications.keys().map(|name| (name, true));
        let docs = methods
            .chain(notifications)
            .map(|(name, notification)| match self.docs.get(name) {
                Some(doc) => doc.clone(),
                None => MethodDoc::undescribed(name, notification),
            })
            .collect();
        crate::openrpc::document(self.discover.clone().unwrap_or_default(), docs)
    }

    /// Whether `method` is `rpc.discover` and this table answers it.
    pub(crate) fn discovers(&self, method: &str) -> bool {
        method == crate::openrpc::DISCOVER_METHOD && self.discover.is_some()
    }

    /// The answer to `rpc.discover` (the serialized document), which takes
    /// no params.
    pub(crate) fn discovery(
        &self,
        params: Option<&serde_json::value::RawValue>,
    ) -> Result<&[u8], crate::Error> {
        params::decode::<()>(params)?;
        Ok(self.discovery.get_or_init(|| {
            serde_json::to_vec(&self.openrpc()).expect("a document of JSON values serializes")
        }))
    }
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            table: Arc::new(Table::default()),
            limits: Limits::default(),
            batch_concurrency: Router::DEFAULT_BATCH_CONCURRENCY,
            layers: Vec::new(),
            stack: OnceLock::new(),
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
        let inner = Arc::make_mut(&mut self.inner);
        // Whatever changes, the stack is built anew from the new state.
        inner.stack = OnceLock::new();
        inner
    }

    fn table_mut(&mut self) -> &mut Table {
        let table = Arc::make_mut(&mut self.inner_mut().table);
        table.discovery = OnceLock::new();
        table
    }

    fn check_name(&self, name: &str) -> Result<(), RegisterError> {
        if name.starts_with("rpc.") {
            return Err(RegisterError::Reserved(name.to_owned()));
        }
        let table = &self.inner.table;
        if table.methods.contains_key(name) || table.notifications.contains_key(name) {
            return Err(RegisterError::Duplicate(name.to_owned()));
        }
        Ok(())
    }

    fn add_method(mut self, name: &str, handler: ErasedMethod) -> Result<Self, RegisterError> {
        self.check_name(name)?;
        self.table_mut().methods.insert(name.into(), handler);
        Ok(self)
    }

    fn add_notification(mut self, name: &str, handler: ErasedNotification) -> Result<Self, RegisterError> {
        self.check_name(name)?;
        self.table_mut().notifications.insert(name.into(), handler);
        Ok(self)
    }

    /// Serves calls to methods that have no handler, instead of answering
    /// `-32601 Method not found`: the handler gets the method name, the raw
    /// params and the context (a proxy, or methods known only at run time).
    /// A notification to an unknown method runs it too, its result dropped.
    ///
    /// ```
    /// use jrpc::{Error, Router};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let router = Router::new().fallback(|method: String, _params, _ctx| async move {
    ///     match method.strip_prefix("echo.") {
    ///         Some(word) => Ok(word.to_owned()),
    ///         None => Err(Error::method_not_found()),
    ///     }
    /// });
    /// let reply = router.handle(br#"{"jsonrpc":"2.0","method":"echo.hi","id":1}"#).await;
    /// assert_eq!(reply.unwrap(), r#"{"jsonrpc":"2.0","result":"hi","id":1}"#);
    /// # });
    /// ```
    pub fn fallback<F, Fut, T>(mut self, handler: F) -> Self
    where
        F: Fn(String, Option<Box<serde_json::value::RawValue>>, RequestContext) -> Fut
            + Send
            + Sync
            + 'static,
        Fut: std::future::Future<Output = Result<T, crate::Error>> + Send + 'static,
        T: serde::Serialize + 'static,
    {
        self.table_mut().fallback = Some(handler::erase_fallback(handler));
        self
    }

    /// Wraps every handler of this router in a call middleware layer: each
    /// incoming request and notification, on every transport, single or a
    /// batch entry, passes through it exactly once (see
    /// [`middleware`](crate::middleware)).
    ///
    /// Each call wraps everything added before it, so the layer added last
    /// runs first. Handlers registered after the layer are wrapped too. A
    /// layer may fail with any error: a [`jrpc::Error`](crate::Error) is
    /// sent as it is, anything else as `-32603 Internal error`.
    ///
    /// ```
    /// use jrpc::middleware::CallTimeout;
    /// use jrpc::Router;
    /// use std::time::Duration;
    ///
    /// let router = Router::new()
    ///     .method("slow", |(): ()| async { Ok(()) })
    ///     .layer(CallTimeout::new(Duration::from_secs(5)));
    /// assert!(router.has_layers());
    /// ```
    pub fn layer<L>(mut self, layer: L) -> Self
    where
        L: Layer<BoxCallService> + Send + Sync + 'static,
        L::Service: Service<Call, Response = RawResult> + Clone + Send + Sync + 'static,
        <L::Service as Service<Call>>::Error: Into<BoxError>,
        <L::Service as Service<Call>>::Future: Send + 'static,
    {
        let wrap: LayerFn = Arc::new(move |inner| {
            let service = layer.layer(inner).map_err(|e| into_rpc_error(e.into()));
            BoxCloneSyncService::new(service)
        });
        self.inner_mut().layers.push(wrap);
        self
    }

    /// Whether any call middleware is installed.
    pub fn has_layers(&self) -> bool {
        !self.inner.layers.is_empty()
    }

    /// The handlers, for the dispatch engine.
    pub(crate) fn table(&self) -> &Table {
        &self.inner.table
    }

    /// How many entries of one batch run at once.
    pub(crate) fn batch_limit(&self) -> usize {
        self.inner.batch_concurrency
    }

    /// The call stack: the handlers inside every layer.
    fn stack(&self) -> &Stack {
        self.inner.stack.get_or_init(|| {
            let table = Arc::clone(&self.inner.table);
            let handlers = tower::service_fn(move |call: Call| table.call_handler(call));
            let mut stack = BoxCloneSyncService::new(handlers);
            for wrap in &self.inner.layers {
                stack = wrap(stack);
            }
            Stack::new(stack)
        })
    }

    /// Serves one call through the middleware (when any is installed) and
    /// its handler: what the router's [`Service`] impl does, without
    /// `&mut self` (named apart from `Service::call`, which it would shadow).
    pub async fn handle_call(&self, call: Call) -> Result<RawResult, crate::Error> {
        if self.has_layers() {
            self.stack().call(call).await
        } else {
            self.inner.table.call_handler(call).await
        }
    }

    /// Starts one call as [`handle_call`](Self::handle_call) serves it,
    /// as one boxed future that borrows nothing.
    pub(crate) fn start_call(&self, call: Call) -> crate::middleware::CallFuture {
        if self.has_layers() {
            let router = self.clone();
            Box::pin(async move { router.stack().call(call).await })
        } else {
            self.inner.table.call_handler(call)
        }
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

    /// Registers an async handler for the typed method `M`: its params and
    /// result must be `M`'s (see [`typed`](crate::typed)), and `M`'s
    /// description, if any, goes into the OpenRPC document.
    ///
    /// # Panics
    /// As [`method`](Self::method).
    #[track_caller]
    pub fn typed_method<M: Method, K>(self, handler: impl AsyncMethod<K>) -> Self
    where
        K: Signature<Params = M::Params, Result = M::Result>,
    {
        self.method(M::NAME, handler).with_doc(M::NAME, M::doc())
    }

    /// Registers a plain handler for the typed method `M` (see
    /// [`typed_method`](Self::typed_method) and
    /// [`sync_method`](Self::sync_method)).
    ///
    /// # Panics
    /// As [`method`](Self::method).
    #[track_caller]
    pub fn typed_sync_method<M: Method, K>(self, handler: impl SyncMethod<K>) -> Self
    where
        K: Signature<Params = M::Params, Result = M::Result>,
    {
        self.sync_method(M::NAME, handler).with_doc(M::NAME, M::doc())
    }

    /// Registers an async handler for the typed notification `N`.
    ///
    /// # Panics
    /// As [`method`](Self::method).
    #[track_caller]
    pub fn typed_notification<N: Notification, K>(self, handler: impl AsyncNotification<K>) -> Self
    where
        K: Signature<Params = N::Params, Result = ()>,
    {
        self.notification(N::NAME, handler).with_doc(N::NAME, N::doc())
    }

    /// Registers a plain handler for the typed notification `N`.
    ///
    /// # Panics
    /// As [`method`](Self::method).
    #[track_caller]
    pub fn typed_sync_notification<N: Notification, K>(self, handler: impl SyncNotification<K>) -> Self
    where
        K: Signature<Params = N::Params, Result = ()>,
    {
        self.sync_notification(N::NAME, handler)
            .with_doc(N::NAME, N::doc())
    }

    fn with_doc(mut self, name: &str, doc: Option<MethodDoc>) -> Self {
        if let Some(mut doc) = doc {
            doc.name = name.to_owned();
            self.table_mut().docs.insert(name.into(), doc);
        }
        self
    }

    /// Attaches a description to the method or notification `name`, for the
    /// OpenRPC document (see [`openrpc`](crate::openrpc)); it replaces any
    /// earlier one.
    ///
    /// # Panics
    /// When no handler of that name is registered; use
    /// [`try_describe`](Self::try_describe) to get an error instead.
    #[track_caller]
    pub fn describe(self, name: &str, doc: MethodDoc) -> Self {
        self.try_describe(name, doc).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Attaches a description, or says why it cannot be.
    pub fn try_describe(self, name: &str, doc: MethodDoc) -> Result<Self, RegisterError> {
        let table = &self.inner.table;
        if !table.methods.contains_key(name) && !table.notifications.contains_key(name) {
            return Err(RegisterError::NotRegistered(name.to_owned()));
        }
        Ok(self.with_doc(name, Some(doc)))
    }

    /// Answers `rpc.discover` with this router's OpenRPC document (off by
    /// default), `info` saying what the service is. The call passes through
    /// the middleware like any other.
    pub fn discover(mut self, info: Info) -> Self {
        self.table_mut().discover = Some(info);
        self
    }

    /// This router's OpenRPC document: every method and notification,
    /// described where a description was attached, sorted by name.
    pub fn openrpc(&self) -> Document {
        self.inner.table.openrpc()
    }

    /// Adds every handler of `other` to this router; this router's settings
    /// are kept.
    ///
    /// # Panics
    /// When both routers have a handler of the same name.
    #[track_caller]
    pub fn merge(mut self, other: Router) -> Self {
        for (name, handler) in &other.inner.table.methods {
            self = self
                .add_method(name, handler.clone())
                .unwrap_or_else(|e| panic!("{e}"));
        }
        for (name, handler) in &other.inner.table.notifications {
            self = self
                .add_notification(name, handler.clone())
                .unwrap_or_else(|e| panic!("{e}"));
        }
        for (name, doc) in &other.inner.table.docs {
            self = self.with_doc(name, Some(doc.clone()));
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
        self.table_mut().expose_internal_errors = on;
        self
    }

    /// Which params members are secret (default: [`Redaction::default`]).
    /// An error reply that quotes one of them (a decoding error naming a bad
    /// password, say) has it replaced by `"[REDACTED]"`.
    pub fn redaction(mut self, redaction: Redaction) -> Self {
        self.table_mut().redaction = redaction;
        self
    }

    /// The parsing limits in force; transports use them to bound frames
    /// before they reach the router.
    pub fn parse_limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// Whether a method of that name is registered.
    pub fn has_method(&self, name: &str) -> bool {
        self.inner.table.methods.contains_key(name)
    }

    /// The registered method names, sorted.
    pub fn method_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.inner.table.methods.keys().map(|k| &**k).collect();
        names.sort_unstable();
        names
    }
}

/// A router is the innermost call service: a [`Call`] goes through its
/// middleware (when any) to its handler. So a router composes with tower
/// like any service — wrapped in more layers, or driven by
/// `tower::ServiceExt::oneshot`.
///
/// ```
/// use jrpc::middleware::Call;
/// use jrpc::Router;
/// use tower::ServiceExt;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let router = Router::new().sync_method("add", |(a, b): (i64, i64)| Ok(a + b));
/// let params = serde_json::value::RawValue::from_string("[2,3]".into()).unwrap();
/// let call = Call::request(1, "add", Some(params));
/// let result = router.oneshot(call).await.unwrap();
/// assert_eq!(result.as_bytes(), b"5");
/// # });
/// ```
impl Service<Call> for Router {
    type Response = RawResult;
    type Error = crate::Error;
    type Future = crate::middleware::CallFuture;

    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        // The stack's layers are asked when the call comes (see `Stack`).
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: Call) -> Self::Future {
        self.start_call(call)
    }
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut notifications: Vec<&str> = self.inner.table.notifications.keys().map(|k| &**k).collect();
        notifications.sort_unstable();
        f.debug_struct("Router")
            .field("methods", &self.method_names())
            .field("notifications", &notifications)
            .field("limits", &self.inner.limits)
            .field("batch_concurrency", &self.inner.batch_concurrency)
            .field("layers", &self.inner.layers.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn method_names_hash_apart() {
        // Names as services have them: short, sharing prefixes, differing
        // in one byte or in length.
        let mut names: Vec<String> = Vec::new();
        for prefix in ["", "rpc.", "tools/", "textDocument/", "eth_get"] {
            for i in 0..200 {
                names.push(format!("{prefix}m{i}"));
                names.push(format!("{prefix}{i}m"));
            }
        }
        let hashes: std::collections::HashSet<u64> = names
            .iter()
            .map(|n| Names::default().hash_one(n.as_str()))
            .collect();
        assert_eq!(hashes.len(), names.len(), "two names hash alike");
    }

    #[test]
    fn lookups_find_every_name() {
        let mut router = Router::new();
        let names: Vec<String> = (0..300).map(|i| format!("ns{}.method_{i}", i % 7)).collect();
        for name in &names {
            router = router.sync_method(name, |()| Ok(1));
        }
        for name in &names {
            assert!(router.has_method(name), "{name}");
        }
        assert!(!router.has_method("ns0.method_300"));
    }
}
