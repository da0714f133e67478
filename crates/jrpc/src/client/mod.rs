//! The calling side: connect to a server over TCP, a Unix socket, a child
//! process's stdio, HTTP or WebSocket, then call it. Every transport is
//! behind the same [`Client`] API.
//!
//! ```no_run
//! use jrpc::client::Client;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // By URL: tcp://, unix:, http(s)://, ws(s)://
//! let client = Client::builder()
//!     .header("Authorization", "Bearer s3cret")
//!     .connect("http://127.0.0.1:4000")
//!     .await?;
//! let difference: i64 = client.call("subtract", (42, 23)).await?;
//!
//! // Or run the server as a child process and talk over its stdin/stdout.
//! let mut command = tokio::process::Command::new("jrpc");
//! command.args(["serve", "--stdio"]);
//! let child = Client::builder().spawn(command)?;
//! let sum: i64 = child.call("sum", [1, 2, 3]).await?;
//! # Ok(()) }
//! ```

mod auto_batch;
mod builder;
#[cfg(feature = "cache")]
pub mod cache;
mod calling;
mod channel;
#[cfg(feature = "http-client")]
mod gunzip;
mod handle;
#[cfg(feature = "http-client")]
pub(crate) mod http;
#[cfg(feature = "http-client")]
mod http_error;
#[cfg(feature = "http-client")]
mod idle;
mod pool;
mod reconnect;
#[cfg(feature = "http-client")]
mod response_body;
mod retry;

pub use crate::transport::child::StderrMode;
#[cfg(feature = "http-client")]
pub use crate::transport::ws::WsOptions;
pub use auto_batch::AutoBatch;
pub use builder::ClientBuilder;
#[cfg(feature = "cache")]
pub use cache::{CacheStats, ResponseCache};
pub use handle::Client;
#[cfg(feature = "http-client")]
pub use http::HttpClient;
#[cfg(feature = "http-client")]
pub use http_error::HttpError;
pub use reconnect::Reconnect;
#[cfg(feature = "http-client")]
pub use response_body::{ResponseBody, ResponseBodyError};
pub use retry::{Retry, RetryLayer, RetryPolicy, RetryService, Retrying};
