//! Typed methods: a type that names a method, its params and its result,
//! declared once and used on both sides — registered on a
//! [`Router`](crate::Router) with [`typed_method`](crate::Router::typed_method)
//! (the compiler checks the handler's params and result against it), called
//! on any [`Caller`](crate::Caller) with `typed_call`, and described in the
//! router's OpenRPC document.
//!
//! ```
//! use jrpc::typed::Method;
//! use jrpc::{Caller, Peer, Router};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct SubtractParams { minuend: i64, subtrahend: i64 }
//!
//! /// `subtract`: the minuend less the subtrahend.
//! struct Subtract;
//! impl Method for Subtract {
//!     const NAME: &'static str = "subtract";
//!     type Params = SubtractParams;
//!     type Result = i64;
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let router = Router::new().typed_sync_method::<Subtract, _>(|p: SubtractParams| Ok(p.minuend - p.subtrahend));
//! let (a, b) = tokio::io::duplex(4096);
//! let (ar, aw) = tokio::io::split(a);
//! let (br, bw) = tokio::io::split(b);
//! let _server = Peer::builder().router(router).start(ar, aw, Default::default());
//! let client = Peer::builder().start(br, bw, Default::default());
//! let difference = client.typed_call::<Subtract>(SubtractParams { minuend: 42, subtrahend: 23 }).await.unwrap();
//! assert_eq!(difference, 19);
//! # });
//! ```

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::openrpc::MethodDoc;

/// A method: its name, the type of its params and of its result.
///
/// `Params` is what goes on the wire as `params`: a struct (an object, also
/// accepted by position when served by a router), a tuple (an array), or
/// `()` for none.
pub trait Method: Send + Sync + 'static {
    /// The method's name on the wire.
    const NAME: &'static str;
    /// Its params.
    type Params: Serialize + DeserializeOwned + Send + 'static;
    /// Its result.
    type Result: Serialize + DeserializeOwned + Send + 'static;

    /// Its description for the router's OpenRPC document (`None`: listed by
    /// name only). With the `schemars` feature,
    /// [`MethodDoc::typed::<Self>()`](MethodDoc::typed) derives one from
    /// the types.
    fn doc() -> Option<MethodDoc> {
        None
    }
}

/// A notification: its name and the type of its params.
pub trait Notification: Send + Sync + 'static {
    /// The notification's name on the wire.
    const NAME: &'static str;
    /// Its params.
    type Params: Serialize + DeserializeOwned + Send + 'static;

    /// Its description for the router's OpenRPC document.
    fn doc() -> Option<MethodDoc> {
        None
    }
}

// Here rather than in `openrpc/`: the document's types know nothing of typed
// methods, which describe themselves with them.
#[cfg(feature = "schemars")]
impl MethodDoc {
    /// The description of a typed method: its params from
    /// [`params_of`](Self::params_of), its result from
    /// [`result_of`](Self::result_of).
    pub fn typed<M>() -> Self
    where
        M: Method,
        M::Params: schemars::JsonSchema,
        M::Result: schemars::JsonSchema,
    {
        MethodDoc::new()
            .params_of::<M::Params>()
            .result_of::<M::Result>("result")
    }

    /// The description of a typed notification: its params.
    pub fn typed_notification<N>() -> Self
    where
        N: Notification,
        N::Params: schemars::JsonSchema,
    {
        MethodDoc::new().params_of::<N::Params>()
    }
}
