//! Serving a message transport (a broker's subject, topic or queue): each
//! message one frame, answered to its own reply address. See
//! [`Server::serve_messages`](super::Server::serve_messages).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::context::Extensions;
use crate::message::{codes, parse_frame, Error, Frame, Id, Incoming, Response};
use crate::transport::{Message, MessageListener};
use crate::Router;

/// How a message listener is served.
pub(crate) struct Settings {
    pub(crate) router: Router,
    pub(crate) max_in_flight: usize,
    pub(crate) grace: Duration,
}

/// Takes messages until `shutdown` (or until the listener has no more),
/// each served on its own task, at most `max_in_flight` at once (past it,
/// requests get `-32007 Server busy`); then waits for those in flight for
/// the grace period, and stops the rest.
pub(crate) async fn serve(
    mut listener: impl MessageListener,
    settings: Settings,
    shutdown: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(settings.max_in_flight.max(1)));
    let limits = settings.router.parse_limits().clone();
    let mut tasks = JoinSet::new();
    loop {
        while tasks.try_join_next().is_some() {}
        let message = tokio::select! {
            () = shutdown.cancelled() => break,
            message = listener.next() => match message {
                Some(message) => message,
                None => break,
            },
        };
        if message.frame.len() > limits.max_frame_len {
            let error = Error::new(codes::FRAME_TOO_LARGE, "Frame too large").with_data(&format!(
                "a message may carry at most {} bytes",
                limits.max_frame_len
            ));
            tasks.spawn(refuse(message, Id::NULL, error));
            continue;
        }
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            let id = match parse_frame(&message.frame, &limits) {
                Ok(Frame::Single(Incoming::Request(request))) => Some(request.id.clone()),
                Ok(Frame::Single(_)) => None,
                Ok(Frame::Batch(items)) if !items.iter().any(|i| matches!(i, Incoming::Request(_))) => None,
                _ => Some(Id::NULL),
            };
            let error = Error::server_busy().with_data("too many requests in flight: try again later");
            match id {
                Some(id) => tasks.spawn(refuse(message, id, error)),
                None => tasks.spawn(message.settle(None)),
            };
            continue;
        };
        let router = settings.router.clone();
        tasks.spawn(async move {
            let _slot = slot;
            let mut connection = Extensions::new();
            connection.insert(message.info.clone());
            let connection = Arc::new(connection);
            let parsed = parse_frame(&message.frame, router.parse_limits());
            let answer = match (&parsed, message.reply_address()) {
                (Err(error), None) => {
                    tracing::warn!(
                        transport = message.info.transport,
                        error = %error.message(),
                        "a malformed message without a reply address is dropped"
                    );
                    None
                }
                _ => router.handle_parsed(parsed, &connection).await,
            };
            if answer.is_some() && message.reply_address().is_none() {
                tracing::debug!(
                    transport = message.info.transport,
                    "a request without a reply address was served; its reply is dropped"
                );
            }
            message.settle(answer).await;
        });
    }
    drop(listener);
    let finished = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(settings.grace, finished).await.is_err() {
        tracing::warn!("requests still running at the end of the grace period were stopped");
        tasks.abort_all();
    }
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
    let answer = Response {
        id,
        outcome: Err(error),
    }
    .to_bytes();
    message.settle(Some(answer)).await;
}
