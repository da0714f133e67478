//! The calling side's shared vocabulary, below both [`peer`](crate::peer)
//! and [`client`](crate::client): why a call failed ([`CallError`]), and
//! middleware for outgoing calls ([`Outgoing`]), the mirror image of the
//! serving side's [`middleware`](crate::middleware).
//!
//! Layers added with [`PeerBuilder::layer`](crate::peer::PeerBuilder::layer)
//! or [`ClientBuilder::layer`](crate::client::ClientBuilder::layer) wrap
//! every call and notification made with `call`, `call_raw` and `notify`
//! (batches go out as one frame, past them): for logging, metrics, retries
//! or caching.
//!
//! ```
//! use jrpc::caller::{BoxOutgoingService, Outgoing};
//! use jrpc::middleware::{layer_fn, service_fn, ServiceExt};
//! use jrpc::peer::Peer;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::Arc;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let made = Arc::new(AtomicUsize::new(0));
//! let counted = Arc::clone(&made);
//! let count = layer_fn(move |inner: BoxOutgoingService| {
//!     let counted = Arc::clone(&counted);
//!     service_fn(move |call: Outgoing| {
//!         counted.fetch_add(1, Ordering::Relaxed);
//!         inner.clone().oneshot(call)
//!     })
//! });
//! let (a, b) = tokio::io::duplex(4096);
//! let (ar, aw) = tokio::io::split(a);
//! let (br, bw) = tokio::io::split(b);
//! let adder = jrpc::Router::new().sync_method("add", |(a, b): (i64, i64)| Ok(a + b));
//! let _server = Peer::builder().router(adder).start(ar, aw, Default::default());
//! let client = Peer::builder().layer(count).start(br, bw, Default::default());
//! let sum: i64 = client.call("add", (2, 3)).await.unwrap();
//! assert_eq!((sum, made.load(Ordering::Relaxed)), (5, 1));
//! # });
//! ```

mod batch;
mod error;
mod outcome;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;
use tower::Layer;

pub use batch::{Batch, BatchCall};
pub(crate) use batch::{BatchTarget, BoxFuture, Registered};
pub(crate) use error::answered;
pub use error::CallError;
pub use outcome::Delivery;
pub(crate) use outcome::{decode, Outcome};

use crate::context::Extensions;
use crate::middleware::{BoxCloneSyncService, BoxError};
use crate::typed::{Method, Notification};

/// The calling interface, one for every way of reaching the other side: a
/// [`Peer`](crate::peer::Peer) (which is also what a handler gets from
/// [`RequestContext::peer`](crate::RequestContext::peer) to call back its
/// client), a [`Client`](crate::client::Client) over any transport, and the
/// HTTP client. Code written against `Caller` works in both directions.
///
/// Implementors provide [`send`](Self::send), [`batch`](Self::batch) and
/// [`call_timeout`](Self::call_timeout); the typed calls come with them.
///
/// ```
/// use jrpc::caller::Caller;
/// use jrpc::CallError;
///
/// /// Works with a client, a peer, or the peer a handler is called from.
/// async fn total(caller: &impl Caller, numbers: &[i64]) -> Result<i64, CallError> {
///     caller.call("sum", numbers).await
/// }
/// ```
pub trait Caller: Send + Sync {
    /// Sends one call or notification (through this caller's outgoing
    /// middleware, if any) and waits for its raw result (`null` for a
    /// notification, once it is sent).
    fn send(&self, call: Outgoing) -> impl Future<Output = Result<Box<RawValue>, CallError>> + Send;

    /// Starts a batch: several calls and notifications sent as one frame.
    fn batch(&self) -> Batch;

    /// The timeout of calls that do not set their own.
    fn call_timeout(&self) -> Duration;

    /// Calls `method` and decodes its result into `R`, within the default
    /// timeout. `params` must serialize to a JSON array or object (a tuple,
    /// a slice, a struct, a map), or to `null` (`()`) for none.
    fn call<R: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> impl Future<Output = Result<R, CallError>> + Send {
        self.call_with_timeout(method, params, self.call_timeout())
    }

    /// As [`call`](Self::call), with its own timeout.
    fn call_with_timeout<R: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
        timeout: Duration,
    ) -> impl Future<Output = Result<R, CallError>> + Send {
        let sent = self.call_raw(method, params, timeout);
        async move { decode(&sent.await?) }
    }

    /// As [`call`](Self::call), returning the raw JSON result.
    fn call_raw(
        &self,
        method: &str,
        params: impl Serialize,
        timeout: Duration,
    ) -> impl Future<Output = Result<Box<RawValue>, CallError>> + Send {
        let call = encode_params(params).map(|params| Outgoing::call(method, params, timeout));
        async move { self.send(call?).await }
    }

    /// Sends a notification: no response will come.
    fn notify(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> impl Future<Output = Result<(), CallError>> + Send {
        let call =
            encode_params(params).map(|params| Outgoing::notification(method, params, self.call_timeout()));
        async move { self.send(call?).await.map(drop) }
    }

    /// Calls the typed method `M` (see [`typed`](crate::typed)): its
    /// params in, its result out, within the default timeout.
    fn typed_call<M: Method>(
        &self,
        params: M::Params,
    ) -> impl Future<Output = Result<M::Result, CallError>> + Send {
        self.call(M::NAME, params)
    }

    /// Sends the typed notification `N`.
    fn typed_notify<N: Notification>(
        &self,
        params: N::Params,
    ) -> impl Future<Output = Result<(), CallError>> + Send {
        self.notify(N::NAME, params)
    }
}

impl Delivery {
    /// The call's tracker, if a layer above asked for one.
    pub(crate) fn of(call: &Outgoing) -> Option<Delivery> {
        call.extensions().get::<Delivery>().cloned()
    }
}

/// One outgoing call or notification on its way out.
pub struct Outgoing {
    method: Box<str>,
    params: Option<Box<RawValue>>,
    notification: bool,
    timeout: Duration,
    extensions: Extensions,
}

impl Outgoing {
    /// A call of `method` that waits at most `timeout` for its result.
    pub fn call(method: impl Into<Box<str>>, params: Option<Box<RawValue>>, timeout: Duration) -> Self {
        Outgoing {
            method: method.into(),
            params,
            notification: false,
            timeout,
            extensions: Extensions::new(),
        }
    }

    /// A notification of `method`; `timeout` bounds sending it.
    pub fn notification(
        method: impl Into<Box<str>>,
        params: Option<Box<RawValue>>,
        timeout: Duration,
    ) -> Self {
        Outgoing {
            notification: true,
            ..Outgoing::call(method, params, timeout)
        }
    }

    /// The method called.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The params (an array or an object); `None` for none.
    pub fn params(&self) -> Option<&RawValue> {
        self.params.as_deref()
    }

    /// Whether no response is expected.
    pub fn is_notification(&self) -> bool {
        self.notification
    }

    /// How long the call may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Changes how long the call may take (a retry layer may shorten it).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Facts the layers before this one recorded about the call.
    pub fn extensions(&self) -> &Extensions {
        &self.extensions
    }

    /// Facts about the call, for the layers after this one.
    pub fn extensions_mut(&mut self) -> &mut Extensions {
        &mut self.extensions
    }

    pub(crate) fn into_parts(self) -> (Box<str>, Option<Box<RawValue>>, bool, Duration) {
        (self.method, self.params, self.notification, self.timeout)
    }
}

impl Clone for Outgoing {
    /// A copy without the facts layers recorded (they need not be
    /// cloneable): for a retry layer that sends the call again.
    fn clone(&self) -> Self {
        Outgoing {
            method: self.method.clone(),
            params: self.params.clone(),
            notification: self.notification,
            timeout: self.timeout,
            extensions: Extensions::new(),
        }
    }
}

impl fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outgoing")
            .field("method", &self.method)
            .field("params", &self.params.as_deref().map(RawValue::get))
            .field("notification", &self.notification)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// The outgoing stack as layers see it: a call in, its raw result out (a
/// notification's result is `null`).
pub type BoxOutgoingService = BoxCloneSyncService<Outgoing, Box<RawValue>, CallError>;

/// Wraps the outgoing stack built so far in one more layer.
pub(crate) type OutgoingLayerFn = Arc<dyn Fn(BoxOutgoingService) -> BoxOutgoingService + Send + Sync>;

/// Erases a layer for a builder's list of outgoing layers.
pub(crate) fn erase_layer<L>(layer: L) -> OutgoingLayerFn
where
    L: Layer<BoxOutgoingService> + Send + Sync + 'static,
    L::Service: tower::Service<Outgoing, Response = Box<RawValue>> + Clone + Send + Sync + 'static,
    <L::Service as tower::Service<Outgoing>>::Error: Into<BoxError>,
    <L::Service as tower::Service<Outgoing>>::Future: Send + 'static,
{
    use tower::ServiceExt;
    Arc::new(move |inner| {
        let service = layer.layer(inner).map_err(|e| into_call_error(e.into()));
        BoxCloneSyncService::new(service)
    })
}

/// Wraps `innermost` in `layers`, the first innermost.
pub(crate) fn build_stack(innermost: BoxOutgoingService, layers: &[OutgoingLayerFn]) -> BoxOutgoingService {
    layers.iter().fold(innermost, |stack, wrap| wrap(stack))
}

fn into_call_error(error: BoxError) -> CallError {
    match error.downcast::<CallError>() {
        Ok(error) => *error,
        Err(other) => match other.downcast::<crate::Error>() {
            Ok(error) => CallError::Rpc(*error),
            Err(other) => CallError::Protocol(other.to_string().into()),
        },
    }
}

/// The `null` a notification "returns" through the outgoing stack.
pub(crate) fn null() -> Box<RawValue> {
    RawValue::from_string("null".to_owned()).expect("null is JSON")
}

/// Serializes params for an [`Outgoing`] call: an array or an object, or
/// nothing for `null`.
pub(crate) fn encode_params(params: impl Serialize) -> Result<Option<Box<RawValue>>, CallError> {
    let raw = crate::message::to_raw(&params).map_err(|e| CallError::Encode(e.to_string().into()))?;
    match raw.get().as_bytes().first() {
        Some(b'[' | b'{') => Ok(Some(raw)),
        _ if raw.get() == "null" => Ok(None),
        _ => Err(CallError::Encode(
            "params must serialize to a JSON array or object, or to null for none".into(),
        )),
    }
}
