//! The HTTP/1.1 connections of a client waiting for their next request.

use std::sync::Mutex;

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1;

/// Idle HTTP/1.1 connections kept for reuse.
const MAX_IDLE: usize = 64;

/// A connection's sending side.
pub(super) type Sender = http1::SendRequest<Full<Bytes>>;

/// The idle connections of one client.
#[derive(Default)]
pub(super) struct Idle {
    senders: Mutex<Vec<Sender>>,
}

impl Idle {
    /// A connection ready for a request (the most recently used: its
    /// socket is the likeliest to be warm), the closed ones dropped.
    pub(super) fn take(&self) -> Option<Sender> {
        let mut idle = self.senders.lock().unwrap_or_else(|e| e.into_inner());
        idle.retain(|sender| !sender.is_closed());
        let ready = idle.iter().rposition(|sender| sender.is_ready())?;
        Some(idle.swap_remove(ready))
    }

    /// Keeps a connection for the next request (unless enough are kept).
    pub(super) fn put(&self, sender: Sender) {
        let mut idle = self.senders.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(sender);
        }
    }
}
