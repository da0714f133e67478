//! One client's legacy (2025-11-25) session over Streamable HTTP: the peer
//! serving it, the frames on their way to it, and its open streams.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use jrpc::codec::Inbound;
use jrpc::peer::Peer;
use tokio::sync::mpsc;

use super::streams::StreamTable;

/// One client's session.
pub(super) struct HttpSession {
    pub(super) id: String,
    pub(super) incoming: mpsc::Sender<io::Result<Inbound>>,
    pub(super) peer: Peer,
    pub(super) streams: Arc<StreamTable>,
    /// When a request last came for this session.
    pub(super) last_seen: Mutex<tokio::time::Instant>,
    /// Who opened it (a token's subject), when tokens are required.
    pub(super) owner: Option<String>,
}

impl HttpSession {
    pub(super) fn touch(&self) {
        *self.last_seen.lock().unwrap_or_else(|p| p.into_inner()) = tokio::time::Instant::now();
    }

    /// Whether nothing has come for `limit` and no stream is open.
    pub(super) fn expired(&self, limit: Duration) -> bool {
        let idle = self.last_seen.lock().unwrap_or_else(|p| p.into_inner()).elapsed();
        idle >= limit && !self.streams.any_open()
    }

    pub(super) async fn deliver(&self, frame: Bytes) {
        let _ = self.incoming.send(Ok(Inbound::Frame(frame))).await;
    }
}
