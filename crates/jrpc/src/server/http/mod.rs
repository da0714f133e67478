//! HTTP and WebSocket on one port, with TLS, compression, CORS, auth, rate
//! limits and request timeouts.
//!
//! - `POST /` (the path is configurable) with a JSON-RPC frame (a message or
//!   a batch) as the body; the reply frame comes back as the response body
//!   with `Content-Type: application/json`. A frame that needs no reply
//!   (notifications only) gets `204 No Content` with an empty body.
//! - `GET /` with a WebSocket upgrade: one JSON text per message, both ways;
//!   each connection is a full [`Peer`](crate::peer::Peer), so handlers can
//!   call and notify the client.
//! - `GET /health` answers `200 {"status":"ok"}` for load balancers.
//! - `GET /playground`, when [turned on](HttpServer::playground): a page to
//!   try the server's methods from a browser.
//!
//! Refusals, each with a JSON-RPC error body (`"id": null`): another method
//! on the RPC path → `405` (with `Allow`); a body that is not JSON → `415`;
//! a body over the frame limit → `413`, decided from `Content-Length` before
//! reading when it is announced; a missing or wrong token → `401`; a client
//! over its rate → `429` with `Retry-After`; a request over its time →
//! `504`. Bodies may be gzip- or brotli-compressed (`Content-Encoding`), and
//! replies are compressed when the client accepts it (`Accept-Encoding`).
//! HTTP/1.1 keep-alive and HTTP/2 (h2c, and by ALPN over TLS) are both served.
//!
//! ```no_run
//! use std::time::Duration;
//! use jrpc::server::http::{HttpServer, RateLimit};
//!
//! # async fn run() -> std::io::Result<()> {
//! let router = jrpc::Router::new().sync_method("ping", || Ok("pong"));
//! let serving = HttpServer::new(router)
//!     .auth_tokens(["s3cret"])
//!     .rate_limit(RateLimit::per_second(100, 200))
//!     .request_timeout(Duration::from_secs(10))
//!     .tls_pem("cert.pem", "key.pem")?
//!     .bind("127.0.0.1:8443")
//!     .await?;
//! println!("serving on {}", serving.local_addr());
//! # Ok(()) }
//! ```

mod accept;
mod activity;
#[cfg(feature = "oauth")]
mod bearer;
mod bodies;
mod builder;
mod connection;
mod exchange;
mod first_request;
mod head_timer;
mod layers;
mod linger;
#[cfg(feature = "metrics")]
mod metrics_server;
mod playground;
pub mod route;
mod service;
pub mod sse;
mod stack;
mod when_woken;

#[cfg(feature = "oauth")]
pub use bearer::{BearerAuth, BearerService};
pub use builder::HttpServer;
pub use exchange::{error_response, ClientAddr, ErrorBody, HttpBody};
pub use layers::{
    Auth, AuthLayer, Gate, Gated, RateLimit, RateLimited, RequestRateLimitLayer, RequestTimeout,
    RequestTimeoutLayer,
};
#[cfg(feature = "metrics")]
pub use metrics_server::serve_metrics;
pub use service::RpcService;
pub use stack::HttpService;
