//! Serving over UDP: each datagram one frame, answered with one datagram to
//! its sender (nothing for notifications). See
//! [`Server::bind_udp`](super::Server::bind_udp).
//!
//! A datagram's sender address can be forged, so the server takes care not
//! to be used against a third party: it never answers a response (two
//! servers told of each other would answer each other's errors forever),
//! and a reply may be at most a few times the size of its request, so a
//! small forged request cannot make a large reply land on someone else.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::UdpSocket;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::messages::refusal;
use crate::context::Extensions;
use crate::dispatch::{one_shot, FrameKind};
use crate::message::{Error, Id};
use crate::Router;

/// Replies up to this size are always allowed, whatever the request's.
pub(crate) const SMALL_REPLY: usize = 1200;

/// How a UDP listener serves.
pub(crate) struct Settings {
    pub(crate) router: Router,
    pub(crate) max_datagram: usize,
    pub(crate) max_in_flight: usize,
    /// A reply may be this many times its request's size (or
    /// [`SMALL_REPLY`]); 0: no bound but the datagram limit.
    pub(crate) amplification: usize,
    pub(crate) grace: Duration,
}

/// Reads datagrams until `shutdown`, each served on its own task (at most
/// `max_in_flight` at once: past it, `-32007 Server busy`); then waits for
/// the replies in flight for the grace period, and stops the rest.
pub(crate) async fn serve(socket: UdpSocket, settings: Settings, shutdown: CancellationToken) {
    let socket = Arc::new(socket);
    let local_addr = socket.local_addr().ok().map(|a| a.to_string());
    let slots = Arc::new(Semaphore::new(settings.max_in_flight.max(1)));
    let mut tasks = JoinSet::new();
    let limit = settings.max_datagram;
    // One byte more than the limit tells a datagram over it.
    let mut buffer = vec![0u8; limit + 1];
    loop {
        // Reap what finished, so the set stays as large as what runs.
        while tasks.try_join_next().is_some() {}
        let received = tokio::select! {
            () = shutdown.cancelled() => break,
            received = socket.recv_from(&mut buffer) => received,
        };
        let (n, from) = match received {
            Ok(received) => received,
            Err(e) => {
                tracing::debug!(error = %e, "udp: receive failed");
                // Whatever it was, do not spin on it.
                tokio::time::sleep(Duration::from_millis(1)).await;
                continue;
            }
        };
        if n > limit {
            let error =
                Error::frame_too_large().with_data(&format!("a datagram may carry at most {limit} bytes"));
            refuse(&socket, refusal(Id::NULL, error), from, limit);
            continue;
        }
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            // Parsed here only to refuse it well; served frames are parsed
            // once, on their own task.
            let kind = FrameKind::read(&buffer[..n], settings.router.parse_limits());
            let Some(id) = kind.refusal_id() else {
                continue;
            };
            let error = Error::server_busy().with_data("too many requests in flight: try again later");
            refuse(&socket, refusal(id, error), from, limit);
            continue;
        };
        let frame = Bytes::copy_from_slice(&buffer[..n]);
        let (socket, router) = (Arc::clone(&socket), settings.router.clone());
        let mut connection = Extensions::new();
        connection.insert(crate::context::ConnectionInfo {
            transport: "udp",
            peer_addr: Some(from.to_string()),
            local_addr: local_addr.clone(),
        });
        let connection = Arc::new(connection);
        let most = match settings.amplification {
            0 => limit,
            factor => n.saturating_mul(factor).max(SMALL_REPLY).min(limit),
        };
        tasks.spawn(async move {
            let _slot = slot;
            let outcome = one_shot(&router, &frame, &connection).await;
            let id = match outcome.kind {
                FrameKind::Responses => {
                    tracing::debug!(%from, "udp: a response from a client is not answered");
                    return;
                }
                FrameKind::Notification => return,
                ref kind => kind.refusal_id().unwrap_or(Id::NULL),
            };
            let Some(mut answer) = outcome.reply else {
                return;
            };
            if answer.len() > most {
                let error = Error::frame_too_large().with_data(&format!(
                    "the reply of {} bytes is over what this request may get over UDP ({most}): ask over TCP or HTTP",
                    answer.len()
                ));
                answer = refusal(id, error);
            }
            if answer.len() <= limit {
                if let Err(e) = socket.send_to(&answer, from).await {
                    tracing::debug!(error = %e, %from, "udp: cannot send a reply");
                }
            }
        });
    }
    let finished = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(settings.grace, finished).await.is_err() {
        tracing::warn!("udp: requests still running at the end of the grace period were stopped");
        tasks.abort_all();
    }
}

/// Sends a refusal, if it fits in a datagram, without waiting: with the
/// send buffer full it is dropped rather than stall the receiving.
fn refuse(socket: &UdpSocket, answer: Bytes, to: SocketAddr, limit: usize) {
    if answer.len() <= limit {
        if let Err(e) = socket.try_send_to(&answer, to) {
            tracing::debug!(error = %e, %to, "udp: cannot send a refusal");
        }
    }
}
