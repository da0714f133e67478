//! Handler traits: which functions can serve a method or a notification, and
//! how each is erased into the one shape the router stores.
//!
//! A method handler is an async or plain function taking nothing, the typed
//! params, or the typed params and a [`RequestContext`], and returning
//! `Result<impl Serialize, jrpc::Error>`. A notification handler is the same
//! but returns nothing (async) or `()` (plain).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;

use super::params;
use crate::context::{Extensions, RequestContext};
use crate::message::serialize_into;
use crate::{Error, Id};

/// What a handler sees of the call besides its params: erased handlers build
/// a [`RequestContext`] from it only when the function asks for one.
#[doc(hidden)]
pub struct CallInfo<'a> {
    pub(crate) id: Option<&'a Id>,
    pub(crate) connection: &'a Arc<Extensions>,
    /// What middleware recorded about this call, if anything.
    pub(crate) call: Option<&'a Arc<Extensions>>,
}

impl CallInfo<'_> {
    fn context(&self) -> RequestContext {
        RequestContext::new(self.id, self.connection, self.call)
    }
}

pub type ResultFuture = Pin<Box<dyn Future<Output = Result<Vec<u8>, Error>> + Send>>;
pub type UnitFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

pub(crate) type SyncMethodFn =
    dyn Fn(Option<&RawValue>, &CallInfo<'_>, &mut Vec<u8>) -> Result<(), Error> + Send + Sync;
pub(crate) type AsyncMethodFn =
    dyn Fn(Option<&RawValue>, &CallInfo<'_>) -> Result<ResultFuture, Error> + Send + Sync;
pub(crate) type SyncNotifyFn = dyn Fn(Option<&RawValue>, &CallInfo<'_>) -> Result<(), Error> + Send + Sync;
pub(crate) type AsyncNotifyFn =
    dyn Fn(Option<&RawValue>, &CallInfo<'_>) -> Result<UnitFuture, Error> + Send + Sync;

/// A method handler, erased.
#[derive(Clone)]
#[doc(hidden)]
pub enum ErasedMethod {
    /// Runs inline and serializes its result straight into the reply.
    Sync(Arc<SyncMethodFn>),
    /// Params are decoded before the future is built, so a bad call fails
    /// without allocating one.
    Async(Arc<AsyncMethodFn>),
}

/// The handler of calls to unknown methods, erased: it takes the method
/// name, the params and the context.
pub(crate) type ErasedFallback =
    Arc<dyn Fn(&str, Option<&RawValue>, &CallInfo<'_>) -> ResultFuture + Send + Sync>;

/// Erases a fallback handler.
pub(crate) fn erase_fallback<F, Fut, T>(handler: F) -> ErasedFallback
where
    F: Fn(String, Option<Box<RawValue>>, RequestContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T, Error>> + Send + 'static,
    T: Serialize + 'static,
{
    Arc::new(move |method, params, info| {
        boxed_result(handler(
            method.to_owned(),
            params.map(RawValue::to_owned),
            info.context(),
        ))
    })
}

/// A notification handler, erased.
#[derive(Clone)]
#[doc(hidden)]
pub enum ErasedNotification {
    Sync(Arc<SyncNotifyFn>),
    Async(Arc<AsyncNotifyFn>),
}

/// An async function that can serve a method: `async fn()`, `async fn(P)` or
/// `async fn(P, RequestContext)`, where `P: DeserializeOwned` are the params,
/// returning `Result<T, jrpc::Error>` with `T: Serialize`.
pub trait AsyncMethod<M>: Send + Sync + 'static {
    #[doc(hidden)]
    fn erase(self) -> ErasedMethod;
}

/// A plain function that can serve a method: `fn()`, `fn(P)` or
/// `fn(P, &RequestContext)`, returning `Result<T, jrpc::Error>`. It runs
/// inline on the task that reads the request, so it should not block.
pub trait SyncMethod<M>: Send + Sync + 'static {
    #[doc(hidden)]
    fn erase(self) -> ErasedMethod;
}

/// An async function that can handle a notification: `async fn()`,
/// `async fn(P)` or `async fn(P, RequestContext)`, returning `()`.
pub trait AsyncNotification<M>: Send + Sync + 'static {
    #[doc(hidden)]
    fn erase(self) -> ErasedNotification;
}

/// A plain function that can handle a notification: `fn()`, `fn(P)` or
/// `fn(P, &RequestContext)`, returning `()`.
pub trait SyncNotification<M>: Send + Sync + 'static {
    #[doc(hidden)]
    fn erase(self) -> ErasedNotification;
}

/// Marker types telling the handler shapes apart.
#[doc(hidden)]
pub mod marker {
    use std::marker::PhantomData;
    pub struct AsyncNoParams<T>(PhantomData<T>);
    pub struct AsyncParams<P, T>(PhantomData<(P, T)>);
    pub struct AsyncParamsCtx<P, T>(PhantomData<(P, T)>);
    pub struct SyncNoParams<T>(PhantomData<T>);
    pub struct SyncParams<P, T>(PhantomData<(P, T)>);
    pub struct SyncParamsCtx<P, T>(PhantomData<(P, T)>);

    /// The params and result types a handler shape stands for, so typed
    /// registration can hold a handler to a method's declared types.
    pub trait Signature {
        type Params;
        type Result;
    }

    impl<T> Signature for AsyncNoParams<T> {
        type Params = ();
        type Result = T;
    }
    impl<T> Signature for SyncNoParams<T> {
        type Params = ();
        type Result = T;
    }
    macro_rules! signature {
        ($($shape:ident),*) => {$(
            impl<P, T> Signature for $shape<P, T> {
                type Params = P;
                type Result = T;
            }
        )*};
    }
    signature!(AsyncParams, AsyncParamsCtx, SyncParams, SyncParamsCtx);
}
use marker::*;

// ---- async methods ----

impl<F, Fut, T> AsyncMethod<AsyncNoParams<T>> for F
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T, Error>> + Send + 'static,
    T: Serialize + 'static,
{
    fn erase(self) -> ErasedMethod {
        ErasedMethod::Async(Arc::new(move |raw, _info| {
            params::decode::<()>(raw)?;
            Ok(boxed_result(self()))
        }))
    }
}

impl<F, Fut, P, T> AsyncMethod<AsyncParams<P, T>> for F
where
    F: Fn(P) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T, Error>> + Send + 'static,
    P: DeserializeOwned + 'static,
    T: Serialize + 'static,
{
    fn erase(self) -> ErasedMethod {
        ErasedMethod::Async(Arc::new(move |raw, _info| {
            Ok(boxed_result(self(params::decode(raw)?)))
        }))
    }
}

impl<F, Fut, P, T> AsyncMethod<AsyncParamsCtx<P, T>> for F
where
    F: Fn(P, RequestContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T, Error>> + Send + 'static,
    P: DeserializeOwned + 'static,
    T: Serialize + 'static,
{
    fn erase(self) -> ErasedMethod {
        ErasedMethod::Async(Arc::new(move |raw, info| {
            Ok(boxed_result(self(params::decode(raw)?, info.context())))
        }))
    }
}

fn boxed_result<T: Serialize>(fut: impl Future<Output = Result<T, Error>> + Send + 'static) -> ResultFuture {
    Box::pin(Serialized { fut })
}

pin_project_lite::pin_project! {
    /// A handler's future whose result is serialized when it is ready.
    /// Not an `async` block: one awaiting `fut` holds it twice (captured,
    /// and moved to be awaited), which doubled the allocation of every
    /// async handler's future.
    struct Serialized<F> {
        #[pin]
        fut: F,
    }
}

impl<F, T> Future for Serialized<F>
where
    F: Future<Output = Result<T, Error>>,
    T: Serialize,
{
    type Output = Result<Vec<u8>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let value = std::task::ready!(self.project().fut.poll(cx))?;
        // Most results are objects of a few hundred bytes: start there
        // rather than grow from nothing.
        let mut out = Vec::with_capacity(crate::message::RESULT_CAPACITY);
        serialize_into(&mut out, &value)?;
        std::task::Poll::Ready(Ok(out))
    }
}

// ---- plain methods ----

impl<F, T> SyncMethod<SyncNoParams<T>> for F
where
    F: Fn() -> Result<T, Error> + Send + Sync + 'static,
    T: Serialize + 'static,
{
    fn erase(self) -> ErasedMethod {
        ErasedMethod::Sync(Arc::new(move |raw, _info, out| {
            params::decode::<()>(raw)?;
            serialize_into(out, &self()?)
        }))
    }
}

impl<F, P, T> SyncMethod<SyncParams<P, T>> for F
where
    F: Fn(P) -> Result<T, Error> + Send + Sync + 'static,
    P: DeserializeOwned + 'static,
    T: Serialize + 'static,
{
    fn erase(self) -> ErasedMethod {
        ErasedMethod::Sync(Arc::new(move |raw, _info, out| {
            serialize_into(out, &self(params::decode(raw)?)?)
        }))
    }
}

impl<F, P, T> SyncMethod<SyncParamsCtx<P, T>> for F
where
    F: Fn(P, &RequestContext) -> Result<T, Error> + Send + Sync + 'static,
    P: DeserializeOwned + 'static,
    T: Serialize + 'static,
{
    fn erase(self) -> ErasedMethod {
        ErasedMethod::Sync(Arc::new(move |raw, info, out| {
            serialize_into(out, &self(params::decode(raw)?, &info.context())?)
        }))
    }
}

// ---- async notifications ----

impl<F, Fut> AsyncNotification<AsyncNoParams<()>> for F
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    fn erase(self) -> ErasedNotification {
        ErasedNotification::Async(Arc::new(move |raw, _info| {
            params::decode::<()>(raw)?;
            Ok(Box::pin(self()))
        }))
    }
}

impl<F, Fut, P> AsyncNotification<AsyncParams<P, ()>> for F
where
    F: Fn(P) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
    P: DeserializeOwned + 'static,
{
    fn erase(self) -> ErasedNotification {
        ErasedNotification::Async(Arc::new(move |raw, _info| {
            Ok(Box::pin(self(params::decode(raw)?)))
        }))
    }
}

impl<F, Fut, P> AsyncNotification<AsyncParamsCtx<P, ()>> for F
where
    F: Fn(P, RequestContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
    P: DeserializeOwned + 'static,
{
    fn erase(self) -> ErasedNotification {
        ErasedNotification::Async(Arc::new(move |raw, info| {
            Ok(Box::pin(self(params::decode(raw)?, info.context())))
        }))
    }
}

// ---- plain notifications ----

impl<F> SyncNotification<SyncNoParams<()>> for F
where
    F: Fn() + Send + Sync + 'static,
{
    fn erase(self) -> ErasedNotification {
        ErasedNotification::Sync(Arc::new(move |raw, _info| {
            params::decode::<()>(raw)?;
            self();
            Ok(())
        }))
    }
}

impl<F, P> SyncNotification<SyncParams<P, ()>> for F
where
    F: Fn(P) + Send + Sync + 'static,
    P: DeserializeOwned + 'static,
{
    fn erase(self) -> ErasedNotification {
        ErasedNotification::Sync(Arc::new(move |raw, _info| {
            self(params::decode(raw)?);
            Ok(())
        }))
    }
}

impl<F, P> SyncNotification<SyncParamsCtx<P, ()>> for F
where
    F: Fn(P, &RequestContext) + Send + Sync + 'static,
    P: DeserializeOwned + 'static,
{
    fn erase(self) -> ErasedNotification {
        ErasedNotification::Sync(Arc::new(move |raw, info| {
            self(params::decode(raw)?, &info.context());
            Ok(())
        }))
    }
}
