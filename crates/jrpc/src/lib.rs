//! # jrpc
//!
//! A JSON-RPC 2.0 stack: the message model, a router for typed handlers, and
//! (with the `runtime` feature) framing codecs and transports.
//!
//! The layers, each a module:
//!
//! | module | job |
//! |---|---|
//! | [`message`] | ids, error objects, requests and responses; parse a frame into classified items; serialize replies |
//! | [`router`] | the method table; typed params; send each call through the middleware to its handler; build the reply frame |
//! | [`middleware`] | tower layers around every call: call logs with redaction, metrics, deadlines, concurrency and rate limits, authorization |
//! | [`context`] | what is known about a call and its connection |
//! | [`typed`] | typed methods: a type naming a method, its params and its result, for both sides |
//! | [`openrpc`] | describing a service: OpenRPC documents and `rpc.discover` |
//! | `codec` | split a byte stream into frames: newline-delimited JSON or `Content-Length` headers |
//! | `peer` | one live connection carrying both roles: serve incoming requests, call the other side |
//! | `caller` | the calling interface every side shares: `Caller`, `CallError`, batches, outgoing middleware |
//! | `transport` | carriers: `Listener`/`Dialer` and `Connection`; TCP, Unix sockets, stdio, child processes, WebSocket |
//! | `server` | serving a router on listeners and stdio (`Server`), and over HTTP and WebSocket (`server::http`) |
//! | `client` | the calling side: connect over any transport, call, notify, batch |
//! | `demo` | the demo methods used by examples, tests and `jrpc serve` |
//!
//! ```
//! use jrpc::Router;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let router = Router::new().method("add", |(a, b): (i64, i64)| async move { Ok(a + b) });
//! let reply = router.handle(br#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":"x"}"#).await;
//! assert_eq!(reply.unwrap(), r#"{"jsonrpc":"2.0","result":3,"id":"x"}"#);
//! # });
//! ```

#![warn(missing_docs)]

pub mod context;
pub mod message;
pub mod middleware;
pub mod openrpc;
pub mod router;
pub mod typed;

#[cfg(feature = "runtime")]
pub mod caller;
#[cfg(feature = "runtime")]
pub mod client;
#[cfg(feature = "runtime")]
pub mod codec;
#[cfg(feature = "runtime")]
pub mod peer;
#[cfg(feature = "runtime")]
pub mod server;
#[cfg(feature = "runtime")]
pub mod transport;

#[cfg(feature = "demo")]
pub mod demo;

#[cfg(feature = "runtime")]
pub use caller::{CallError, Caller};
#[cfg(feature = "runtime")]
pub use client::Client;
pub use message::{Error, Id};
#[cfg(feature = "runtime")]
pub use peer::{ConnectionConfig, Peer};
pub use router::{RequestContext, Router};
#[cfg(feature = "runtime")]
pub use server::Server;
