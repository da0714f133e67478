//! One client's legacy (2025-11-25) session over Streamable HTTP: the peer
//! serving it, the frames on their way to it, and its open streams.
//!
//! The client's requests and notifications are served from their POSTs'
//! own tasks, through the peer ([`Peer::serve_call`]): its router, its
//! facts and its cancellation, without a trip through its reader and
//! writer. The peer's connection carries the rest: what the server sends
//! the client outside a request (to the standalone stream), and the
//! client's answers to the server's own calls.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use jrpc::codec::Inbound;
use jrpc::dispatch::{response_frame, Said, ServedCall};
use jrpc::middleware::Call;
use jrpc::peer::Peer;
use jrpc::Id;
use tokio::sync::{mpsc, watch};

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
    /// How many of the client's notifications are still being handled: a
    /// request waits for those before it, as the peer's reader orders them
    /// (`notifications/initialized` before the first request).
    pub(super) notifying: watch::Sender<usize>,
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

    /// Hands a frame to the peer's connection (the client's answer to a
    /// call the peer made).
    pub(super) async fn deliver(&self, frame: Bytes) {
        let _ = self.incoming.send(Ok(Inbound::Frame(frame))).await;
    }

    /// Serves a request of the client's, whose stream is open. Most
    /// handlers answer at once, in the POST's task: their reply is
    /// returned. One that waits goes on in a task of its own, through a
    /// broken connection too (2025-11-25: a disconnection is not a
    /// cancellation), until it answers (on its stream), is cancelled or
    /// the session ends.
    pub(super) fn serve(self: &Arc<Self>, call: Call) -> Option<Bytes> {
        let id = call.id().cloned().unwrap_or(Id::NULL);
        let mut served = self.peer.serve_call(call);
        if let Some(outcome) = served.now() {
            return Some(response_frame(&id, &outcome));
        }
        let session = Arc::clone(self);
        tokio::spawn(async move {
            let streams = &session.streams;
            loop {
                match session.next(&mut served).await {
                    Some(Said::Message(message)) => streams.message(&id, &message),
                    Some(Said::Reply(outcome)) => return streams.reply(&id, &response_frame(&id, &outcome)),
                    // Cancelled, or the session ended: no reply.
                    None => return streams.abandon(&id),
                }
            }
        });
        None
    }

    /// Serves a notification of the client's: one handled at once (most
    /// are) before the POST is answered; one that waits goes on in a task
    /// of its own, and the requests after it wait for it.
    pub(super) fn notify(self: &Arc<Self>, call: Call) {
        let mut served = self.peer.serve_call(call);
        if served.now().is_some() || served.is_finished() {
            return;
        }
        self.notifying.send_modify(|n| *n += 1);
        let session = Arc::clone(self);
        tokio::spawn(async move {
            while session.next(&mut served).await.is_some() {}
            session.notifying.send_modify(|n| *n -= 1);
        });
    }

    /// What `served` says next; `None` once it has said all, or when the
    /// session ends first.
    async fn next(&self, served: &mut ServedCall) -> Option<Said> {
        tokio::select! {
            said = served.next() => said,
            _ = self.peer.closed() => None,
        }
    }

    /// Once the client's notifications before now are handled.
    pub(super) async fn after_notifications(&self) {
        if *self.notifying.borrow() == 0 {
            return;
        }
        let _ = self.notifying.subscribe().wait_for(|n| *n == 0).await;
    }
}
