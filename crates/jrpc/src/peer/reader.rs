//! A connection's reader: takes frames from the transport and hands each to
//! the connection's dispatch engine, watches the idle limit, and when
//! reading ends says why, fails the calls still waiting and lets the
//! requests already read finish.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{FutureExt, Sink, Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use super::state::PeerState;
use super::writer::write_loop;
use crate::caller::CallError;
use crate::codec::Inbound;
use crate::dispatch::connection::{Bounds, Calls, ConnectionContext, Engine};
use crate::dispatch::outbox::OutboxReceiver;
use crate::message::{Error, Id};
use crate::transport::CloseReason as EofReason;
use crate::transport::OutFrame;

/// How long to wait for an [`EofReason`] before settling for the plain one.
const EOF_REASON_WAIT: Duration = Duration::from_secs(2);

/// Frames taken from the read buffer per wake-up of the reader.
const READY_FRAMES_PER_ROUND: usize = 64;

/// The limits of one connection's reading and writing.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// Close the connection after this long with nothing read and no call
    /// in flight (servers' network connections only).
    pub(super) idle: Option<Duration>,
    /// Close the connection when one write waits this long for the peer.
    pub(super) write_timeout: Option<Duration>,
}

/// Starts the connection's reader and writer tasks.
#[allow(clippy::too_many_arguments)]
pub(super) fn start<S, K>(
    shared: Arc<PeerState>,
    dispatch: Arc<ConnectionContext>,
    stream: S,
    sink: K,
    outbox: OutboxReceiver,
    bounds: Bounds,
    limits: Limits,
    eof_reason: Option<EofReason>,
    resources: Vec<Box<dyn std::any::Any + Send>>,
) where
    S: Stream<Item = io::Result<Inbound>> + Send + Unpin + 'static,
    K: Sink<OutFrame, Error = io::Error> + Send + Unpin + 'static,
{
    let finish = CancellationToken::new();
    let writer = tokio::spawn(write_loop(
        Arc::clone(&shared),
        sink,
        outbox,
        limits.write_timeout,
        finish.clone(),
    ));
    let mut reader = Reader {
        shared: Arc::clone(&shared),
        engine: Engine::new(dispatch, bounds),
        idle: limits.idle,
        last_heard: tokio::time::Instant::now(),
        framed: false,
    };
    tokio::spawn(async move {
        let ended = reader.run(stream).await;
        // What was answered before reading ended goes out too.
        reader.engine.end_burst().await;
        let reason: Arc<str> = match ended {
            Ended::Eof => match eof_reason {
                Some(better) => tokio::time::timeout(EOF_REASON_WAIT, better)
                    .await
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| "end of stream".to_owned())
                    .into(),
                None => "end of stream".into(),
            },
            Ended::Closed => match shared.refusal() {
                CallError::Io(e) => format!("write error: {e}").into(),
                _ => "closed by this side".into(),
            },
            Ended::Failed(e) => {
                // The connection is broken (reset, say): no reply can reach
                // the other side, so its handlers are cancelled and the
                // connection released now, not when they would have ended.
                // A clean end of stream (a half-close) still lets requests
                // already read finish and answer.
                shared.fail_calls(CallError::Io(Arc::clone(&e)));
                shared.kill.cancel();
                format!("read error: {e}").into()
            }
            Ended::Killed => "aborted".into(),
            Ended::OverBudget => {
                "the server's budget for unfinished frames is spent: closed by this side".into()
            }
            Ended::Idle(limit) => format!("idle for {limit:?}: closed by this side").into(),
        };
        // Nothing more will be read, so no response can come: fail every
        // pending call now. Requests already read are still answered.
        shared.fail_calls(CallError::Closed(Arc::clone(&reason)));
        reader.engine.finish(&shared.kill).await;
        finish.cancel();
        tokio::select! {
            result = writer => match result {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!(error = %e, "writer ended with an error"),
                // The runtime is shutting down.
                Err(e) if e.is_cancelled() => {}
                Err(e) => tracing::error!(error = %e, "writer task failed"),
            },
            () = shared.kill.cancelled() => {}
        }
        shared.set_closed(reason);
        // Whatever the connection owned (a child process) goes last.
        drop(resources);
    });
}

enum Ended {
    Eof,
    Closed,
    /// Nothing read and no call in flight for this long.
    Idle(Duration),
    Failed(Arc<io::Error>),
    /// The server's budget for unfinished frames was spent: answered
    /// `-32007`, nothing more read.
    OverBudget,
    Killed,
}

struct Reader {
    shared: Arc<PeerState>,
    engine: Engine,
    /// The idle limit, if this connection has one.
    idle: Option<Duration>,
    /// When something was last read.
    last_heard: tokio::time::Instant,
    /// A JSON text has come: the framing agrees, so later garbage is just
    /// garbage, not a framing mismatch.
    framed: bool,
}

impl Reader {
    async fn run<S>(&mut self, mut stream: S) -> Ended
    where
        S: Stream<Item = io::Result<Inbound>> + Unpin,
    {
        let shared = Arc::clone(&self.shared);
        let stopped = shared.stop_reading.cancelled();
        let killed = shared.kill.cancelled();
        // Far enough never to fire when there is no idle limit.
        let quiet = tokio::time::sleep(self.idle.unwrap_or(Duration::from_secs(86_400 * 365)));
        tokio::pin!(stopped, killed, quiet);
        loop {
            if self.engine.is_draining() && !self.engine.has_tasks() {
                return Ended::Closed;
            }
            tokio::select! {
                biased;
                () = &mut killed => return Ended::Killed,
                () = &mut stopped, if !self.engine.is_draining() => self.engine.drain(),
                () = self.engine.join_next(), if self.engine.has_tasks() => {}
                () = &mut quiet, if self.idle.is_some() && !self.engine.is_draining() => {
                    let limit = self.idle.unwrap_or_default();
                    let now = tokio::time::Instant::now();
                    if now >= self.last_heard + limit && !self.busy() {
                        return Ended::Idle(limit);
                    }
                    // Heard from since, or still working: look again later.
                    quiet.as_mut().reset((self.last_heard + limit).max(now + limit / 4));
                }
                item = stream.next() => {
                    if self.idle.is_some() {
                        self.last_heard = tokio::time::Instant::now();
                    }
                    if let Some(ended) = self.on_inbound(item).await {
                        return ended;
                    }
                    // Frames already buffered are taken without another
                    // round through the select (and its two cancellation
                    // checks); a bounded number, so that stopping is prompt.
                    for _ in 1..READY_FRAMES_PER_ROUND {
                        if self.engine.is_draining() {
                            break;
                        }
                        let Some(item) = stream.next().now_or_never() else { break };
                        if let Some(ended) = self.on_inbound(item).await {
                            return ended;
                        }
                    }
                    self.engine.end_burst().await;
                }
            }
        }
    }

    /// Whether a call is in flight either way: an incoming one being served,
    /// or an outgoing one waiting for its answer.
    fn busy(&self) -> bool {
        self.engine.is_working() || self.shared.has_pending_calls()
    }

    /// Before the first JSON text: marks the connection framed when this
    /// frame is one, or says the framing disagrees (Content-Length headers
    /// on a line-delimited connection, with calls of ours waiting).
    fn framing_mismatch(&mut self, frame: &[u8]) -> Option<Ended> {
        if matches!(frame.iter().find(|b| !b.is_ascii_whitespace()), Some(b'{' | b'[')) {
            self.framed = true;
            return None;
        }
        // An HTTP server answers a JSON line with a status line (`HTTP/1.1
        // 400 Bad Request`): say what it is, not that its headers are off.
        if frame.starts_with(b"HTTP/1.") && self.shared.has_pending_calls() {
            let status = String::from_utf8_lossy(&frame[..frame.len().min(64)]);
            return Some(Ended::Failed(Arc::new(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: the other side is an HTTP server (it answered {:?}): use an http:// URL",
                    crate::codec::FRAMING_MISMATCH,
                    status.trim_end()
                ),
            ))));
        }
        let headers = frame.len() >= 15 && frame[..15].eq_ignore_ascii_case(b"content-length:");
        if !headers || !self.shared.has_pending_calls() {
            return None;
        }
        Some(Ended::Failed(Arc::new(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: the other side sends Content-Length headers, this side reads one JSON text per line: use content-length framing",
                crate::codec::FRAMING_MISMATCH
            ),
        ))))
    }

    /// Fails the calls of `ids` still waiting for their replies.
    fn fail_waiting(&self, ids: &[Id], error: &CallError) {
        for id in ids {
            if let Some(waiter) = self.shared.take_waiter(id) {
                let _ = waiter.send(Err(error.clone()));
            }
        }
    }

    /// Handles one item from the frame stream; `Some` when reading ends.
    async fn on_inbound(&mut self, item: Option<io::Result<Inbound>>) -> Option<Ended> {
        match item {
            None => return Some(Ended::Eof),
            Some(Err(e)) => return Some(Ended::Failed(Arc::new(e))),
            Some(Ok(Inbound::Frame(frame))) => {
                crate::transport::trace_frame("<", &frame);
                // Until a JSON text has come, a Content-Length header line
                // means the framing disagrees: waiting for replies that
                // cannot be read would only end in timeouts, so name it.
                // Once framed, nothing more is looked at per frame.
                if !self.framed {
                    if let Some(ended) = self.framing_mismatch(&frame) {
                        return Some(ended);
                    }
                }
                self.engine.on_frame(&frame, &*self.shared).await;
            }
            Some(Ok(Inbound::Oversized { limit })) => {
                tracing::warn!(limit, "oversized frame skipped");
                let error =
                    Error::frame_too_large().with_data(&format!("frames may be at most {limit} bytes"));
                self.engine.send_error(Id::NULL, error);
            }
            Some(Ok(Inbound::Malformed(reason)))
                if reason.starts_with(crate::codec::FRAMING_MISMATCH)
                    && !self.framed
                    && self.shared.has_pending_calls() =>
            {
                return Some(Ended::Failed(Arc::new(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{reason}: use newline-delimited framing"),
                ))));
            }
            Some(Ok(Inbound::Malformed(reason))) => {
                tracing::warn!(%reason, "malformed framing skipped");
                self.engine
                    .send_error(Id::NULL, Error::parse_error().with_data(&reason));
            }
            Some(Ok(Inbound::Undelivered { ids, reason })) => {
                tracing::debug!(%reason, calls = ids.len(), "calls not delivered");
                let reason = reason.into();
                let error = CallError::Transport(Arc::new(crate::transport::Undelivered { reason }));
                self.fail_waiting(&ids, &error);
            }
            Some(Ok(Inbound::Lost { ids, reason })) => {
                tracing::debug!(%reason, calls = ids.len(), "replies lost");
                self.fail_waiting(&ids, &CallError::Closed(reason.into()));
            }
            Some(Ok(Inbound::OverBudget { limit })) => {
                tracing::warn!(limit, "buffer budget spent: connection closed");
                let error = Error::server_busy().with_data(&format!(
                    "the server holds too many unfinished frames ({limit} bytes across connections): try again later"
                ));
                self.engine.send_error(Id::NULL, error);
                return Some(Ended::OverBudget);
            }
        }
        None
    }
}

impl Calls for PeerState {
    fn is_stray(&self, response: &crate::message::ResponseRef<'_>) -> bool {
        PeerState::is_stray(self, response)
    }

    fn waiter_of(
        &self,
        response: &crate::message::ResponseRef<'_>,
    ) -> Option<tokio::sync::oneshot::Sender<crate::caller::Outcome>> {
        PeerState::waiter_of(self, response)
    }

    fn fail_invalid_reply(&self, id: &Id) {
        PeerState::fail_invalid_reply(self, id)
    }
}
