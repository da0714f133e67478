//! Serving a message transport (a broker's subject, topic or queue): each
//! message one frame, answered to its own reply address. See
//! [`Server::serve_messages`](super::Server::serve_messages). UDP, whose
//! datagrams are messages too, shares the classification and refusals.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::context::{ConnectionInfo, Extensions};
use crate::dispatch::{one_shot, FrameKind};
use crate::message::{Error, Id, Response};
use crate::transport::{Message, MessageListener};
use crate::Router;

/// How long a listener gets to send what is queued once serving is over.
const FLUSH: Duration = Duration::from_secs(5);

/// How a message listener is served.
pub(crate) struct Settings {
    pub(crate) router: Router,
    pub(crate) max_in_flight: usize,
    pub(crate) grace: Duration,
}

/// A reply frame of one error.
pub(crate) fn refusal(id: Id, error: Error) -> Bytes {
    Response {
        id,
        outcome: Err(error),
    }
    .to_bytes()
}

/// Takes messages until `shutdown` (or until the listener has no more),
/// each served on its own task, at most `max_in_flight` at once (past it,
/// the next waits for a slot). On shutdown the listener stops taking
/// messages, and what it took is served within the grace period; the
/// rest is stopped, and the listener flushes its replies.
pub(crate) async fn serve(
    mut listener: impl MessageListener,
    settings: Settings,
    shutdown: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(settings.max_in_flight.max(1)));
    let mut tasks = JoinSet::new();
    let mut deadline = None;
    loop {
        while tasks.try_join_next().is_some() {}
        let message = match deadline {
            None => tokio::select! {
                () = shutdown.cancelled() => {
                    listener.close().await;
                    deadline = Some(Instant::now() + settings.grace);
                    continue;
                }
                message = listener.next() => message,
            },
            Some(deadline) => tokio::time::timeout_at(deadline, listener.next())
                .await
                .ok()
                .flatten(),
        };
        let Some(message) = message else { break };
        let limits = settings.router.parse_limits();
        if message.frame.len() > limits.max_frame_len {
            let error = Error::frame_too_large().with_data(&format!(
                "a message may carry at most {} bytes",
                limits.max_frame_len
            ));
            tasks.spawn(refuse(message, Id::NULL, error));
            continue;
        }
        // At the bound, wait: what is not taken stays with the broker (or
        // in the client's buffer), for this server or another.
        let acquired = Arc::clone(&slots).acquire_owned();
        let cancelled = async {
            match deadline {
                None => shutdown.cancelled().await,
                Some(deadline) => tokio::time::sleep_until(deadline).await,
            }
        };
        let slot = tokio::select! {
            slot = acquired => slot,
            // Not settled: a broker that acknowledges gives it to another
            // server.
            () = cancelled => continue,
        };
        let Ok(slot) = slot else { break };
        let router = settings.router.clone();
        tasks.spawn(async move {
            let _slot = slot;
            let replying = message.reply_address().is_some();
            let answer = answer(
                &router,
                &message.frame,
                &message.info,
                replying,
                message.max_reply,
            )
            .await;
            message.settle(answer).await;
        });
    }
    let deadline = deadline.unwrap_or_else(|| Instant::now() + settings.grace);
    let finished = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout_at(deadline, finished).await.is_err() {
        tracing::warn!("requests still running at the end of the grace period were stopped");
        tasks.abort_all();
    }
    if tokio::time::timeout(FLUSH, listener.flush()).await.is_err() {
        tracing::warn!("replies still queued after {FLUSH:?} were dropped");
    }
}

/// Serves one message: the reply frame, if any is due and can be sent.
async fn answer(
    router: &Router,
    frame: &[u8],
    info: &ConnectionInfo,
    replying: bool,
    max_reply: usize,
) -> Option<Bytes> {
    let mut connection = Extensions::new();
    connection.insert(info.clone());
    let connection = Arc::new(connection);
    let outcome = one_shot(router, frame, &connection).await;
    if !replying {
        if outcome.kind == FrameKind::Unreadable {
            tracing::warn!(
                transport = info.transport,
                "a malformed message without a reply address is dropped"
            );
            return None;
        }
        if outcome.reply.is_some() {
            tracing::debug!(
                transport = info.transport,
                "a request without a reply address was served; its reply is dropped"
            );
        }
        return None;
    }
    let answer = outcome.reply?;
    if answer.len() <= max_reply {
        return Some(answer);
    }
    let error = Error::frame_too_large().with_data(&format!(
        "the reply of {} bytes is over what the {} broker carries ({max_reply})",
        answer.len(),
        info.transport,
    ));
    Some(refusal(outcome.kind.refusal_id().unwrap_or(Id::NULL), error))
}

/// Answers `message` with one error (when it has a reply address).
async fn refuse(message: Message, id: Id, error: Error) {
    if message.reply_address().is_none() {
        tracing::warn!(
            transport = message.info.transport,
            error = %error.message(),
            "a message without a reply address is dropped"
        );
    }
    message.settle(Some(refusal(id, error))).await;
}
