//! Serving frames: the one engine between the method table
//! ([`router`](crate::router)) and the carriers (HTTP, UDP, brokers, and
//! the connections of [`peer`](crate::peer)).
//!
//! Given a frame and what the transport knows about where it came from,
//! the engine produces the replies, within bounds. It holds the only copy
//! of:
//! - serving an item against the router (`serve`): the no-middleware
//!   inline fast path, the awaited path, the path through the middleware;
//! - batch handling (`batch`): entries concurrent, at most
//!   [`Router::batch_concurrency`](crate::Router::batch_concurrency) at a
//!   time on every transport, replies in request order;
//! - for connections (`connection`): the in-flight bounds and their
//!   `-32007` refusals, cancellation of incoming calls
//!   ([`CancelProtocol`]), ordering (notifications in arrival order,
//!   `ordered` mode), and the outbox bounded in bytes that holds a
//!   connection's output.
//!
//! Transports that answer each frame once (an HTTP POST, a datagram, a
//! broker's message) call [`one_shot`]; a connection's reader hands each
//! frame it reads to its engine; a protocol that parses a request itself
//! (MCP's stateless HTTP path) hands the call to [`serve_call`], which
//! streams the messages its handler sends before the reply.

mod batch;
mod one_shot;
mod serve;

#[cfg(feature = "runtime")]
mod call;
#[cfg(feature = "runtime")]
mod outlet;

#[cfg(feature = "runtime")]
mod cancel;
#[cfg(feature = "runtime")]
pub(crate) mod connection;
#[cfg(feature = "runtime")]
mod ordering;
#[cfg(feature = "runtime")]
pub(crate) mod outbox;

#[cfg(feature = "runtime")]
pub use call::{call_outlet, response_frame, serve_call, serve_call_with, Said, ServedCall};
#[cfg(feature = "runtime")]
pub use cancel::CancelProtocol;
#[cfg(feature = "runtime")]
pub(crate) use cancel::Cancellation;
pub use one_shot::{one_shot, FrameKind, Outcome, Refusal};
#[cfg(feature = "runtime")]
pub use outlet::{CallMessages, CallOutlet, Closed};
