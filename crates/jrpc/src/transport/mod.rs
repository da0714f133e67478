//! Carriers of frames: each module connects a [`Peer`](crate::peer::Peer) to
//! one kind of byte stream.
//!
//! | module | serving | calling |
//! |---|---|---|
//! | [`stdio`] | this process's stdin/stdout | — |
//! | [`tcp`] | [`Server::bind_tcp`] | [`Client::connect_tcp`](crate::client::ClientBuilder::connect_tcp) |
//! | [`unix`] | [`Server::bind_unix`] | [`Client::connect_unix`](crate::client::ClientBuilder::connect_unix) |
//! | [`child`] | — | [`Client::spawn`](crate::client::ClientBuilder::spawn): a command's stdin/stdout |

pub mod child;
#[cfg(feature = "http")]
pub mod http;
mod server;
pub mod stdio;
pub mod tcp;
#[cfg(feature = "http")]
pub mod tls;
#[cfg(unix)]
pub mod unix;
#[cfg(feature = "http")]
pub mod ws;

pub use server::{Server, Serving};
pub use stdio::serve_stdio;
