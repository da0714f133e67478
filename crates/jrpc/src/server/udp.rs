//! Serving over UDP: each datagram one frame, answered with one datagram to
//! its sender (nothing for notifications). See
//! [`Server::bind_udp`](super::Server::bind_udp).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::UdpSocket;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::context::Extensions;
use crate::message::{codes, Error, Id, Response};
use crate::Router;

/// How a UDP listener serves.
pub(crate) struct Settings {
    pub(crate) router: Router,
    pub(crate) max_datagram: usize,
    pub(crate) max_in_flight: usize,
    pub(crate) grace: Duration,
}

/// A reply frame of one error, id null.
fn refusal(error: Error) -> Bytes {
    Response {
        id: Id::NULL,
        outcome: Err(error),
    }
    .to_bytes()
}

/// Reads datagrams until `shutdown`, each served on its own task (at most
/// `max_in_flight` at once: past it, `-32007 Server busy`); then waits for
/// the replies in flight, at most the grace period.
pub(crate) async fn serve(socket: UdpSocket, settings: Settings, shutdown: CancellationToken) {
    let socket = Arc::new(socket);
    let local_addr = socket.local_addr().ok().map(|a| a.to_string());
    let slots = Arc::new(Semaphore::new(settings.max_in_flight.max(1)));
    let tasks = TaskTracker::new();
    let limit = settings.max_datagram;
    // One byte more than the limit tells a datagram over it.
    let mut buffer = vec![0u8; limit + 1];
    loop {
        let received = tokio::select! {
            () = shutdown.cancelled() => break,
            received = socket.recv_from(&mut buffer) => received,
        };
        let (n, from) = match received {
            Ok(received) => received,
            // A "port unreachable" for an earlier reply, and the like: the
            // listener goes on.
            Err(e) => {
                tracing::debug!(error = %e, "udp: receive failed");
                continue;
            }
        };
        if n > limit {
            let error = Error::new(codes::FRAME_TOO_LARGE, "Frame too large")
                .with_data(&format!("a datagram may carry at most {limit} bytes"));
            reply(&socket, refusal(error), from, limit).await;
            continue;
        }
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            let error = Error::server_busy().with_data("too many requests in flight: try again later");
            reply(&socket, refusal(error), from, limit).await;
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
        tasks.spawn(async move {
            let _slot = slot;
            if let Some(answer) = router.handle_with(&frame, &connection).await {
                reply(&socket, answer, from, limit).await;
            }
        });
    }
    tasks.close();
    if tokio::time::timeout(settings.grace, tasks.wait()).await.is_err() {
        tracing::warn!("udp: replies still running at the end of the grace period were dropped");
    }
}

/// Sends `answer` to `to`; one over the datagram limit is replaced by an
/// error saying so.
async fn reply(socket: &UdpSocket, answer: Bytes, to: SocketAddr, limit: usize) {
    let answer = if answer.len() > limit {
        let error = Error::new(codes::FRAME_TOO_LARGE, "Frame too large").with_data(&format!(
            "the reply of {} bytes is over the datagram limit of {limit}",
            answer.len()
        ));
        refusal(error)
    } else {
        answer
    };
    if let Err(e) = socket.send_to(&answer, to).await {
        tracing::debug!(error = %e, %to, "udp: cannot send a reply");
    }
}
