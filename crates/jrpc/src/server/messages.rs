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
use crate::message::{codes, parse_frame, Error, Frame, Id, Incoming, Limits, Response};
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

/// What a frame is, as far as answering goes.
pub(crate) enum Kind {
    /// Only responses (or nothing answerable): never answered.
    Responses,
    /// A single request: its id, for refusals.
    Request(Id),
    /// A notification: never answered, not even to refuse it.
    Notification,
    /// A batch, or a frame the router answers with an error (id null).
    Other,
}

pub(crate) fn kind(parsed: &Result<Frame<'_>, Error>) -> Kind {
    match parsed {
        Ok(Frame::Single(Incoming::Response(_))) => Kind::Responses,
        Ok(Frame::Single(Incoming::Request(request))) => Kind::Request(request.id.clone()),
        Ok(Frame::Single(Incoming::Notification(_))) => Kind::Notification,
        Ok(Frame::Batch(items)) if items.iter().all(|i| matches!(i, Incoming::Response(_))) => {
            Kind::Responses
        }
        Ok(Frame::Batch(items))
            if items
                .iter()
                .all(|i| matches!(i, Incoming::Notification(_) | Incoming::Response(_))) =>
        {
            Kind::Notification
        }
        _ => Kind::Other,
    }
}

/// A reply frame of one error.
pub(crate) fn refusal(id: Id, error: Error) -> Bytes {
    Response {
        id,
        outcome: Err(error),
    }
    .to_bytes()
}

/// The id a refusal of `frame` carries; `None` when nothing in it may be
/// answered (responses, notifications).
pub(crate) fn refusal_id(frame: &[u8], limits: &Limits) -> Option<Id> {
    match kind(&parse_frame(frame, limits)) {
        Kind::Request(id) => Some(id),
        Kind::Other => Some(Id::NULL),
        Kind::Responses | Kind::Notification => None,
    }
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
            let error = Error::new(codes::FRAME_TOO_LARGE, "Frame too large").with_data(&format!(
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
    let parsed = parse_frame(frame, router.parse_limits());
    if !replying {
        if let Err(error) = &parsed {
            tracing::warn!(
                transport = info.transport,
                error = %error.message(),
                "a malformed message without a reply address is dropped"
            );
            return None;
        }
        if router.handle_parsed(parsed, &connection).await.is_some() {
            tracing::debug!(
                transport = info.transport,
                "a request without a reply address was served; its reply is dropped"
            );
        }
        return None;
    }
    let id = match kind(&parsed) {
        Kind::Request(id) => id,
        _ => Id::NULL,
    };
    let answer = router.handle_parsed(parsed, &connection).await?;
    if answer.len() <= max_reply {
        return Some(answer);
    }
    let error = Error::new(codes::FRAME_TOO_LARGE, "Frame too large").with_data(&format!(
        "the reply of {} bytes is over what the {} broker carries ({max_reply})",
        answer.len(),
        info.transport,
    ));
    Some(refusal(id, error))
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
