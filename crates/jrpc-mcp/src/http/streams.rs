//! Where a legacy session's messages to the client go: each request's own
//! stream, the standalone GET stream, and the requests the server made of
//! the client that wait for an answer.
//!
//! Streams are resumable (2025-11-25's optional resumability): every
//! message gets an event id, `{stream}-{seq}`, and is kept in a bounded
//! per-session store, so that a client whose connection broke can come
//! back with `GET` and `Last-Event-ID` and get what it missed on that
//! stream, and then the rest of it. A request goes on when its stream's
//! connection breaks (2025-11-25: a disconnection is not a cancellation).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use jrpc::message::RawValue;
use jrpc::transport::{OutFrame, OutKind};
use jrpc::{CallError, Error, Id};
use tokio::sync::{mpsc, oneshot};

use crate::server::RequestOutbound;

/// One message to the client: its event id and its JSON text.
#[derive(Debug, Clone)]
pub(super) struct Message {
    pub(super) id: String,
    pub(super) data: Arc<str>,
    /// Whether it is the reply that ends its request's stream.
    pub(super) reply: bool,
}

/// A connection's view of one stream: its number, and the messages coming.
pub(super) struct Listener {
    pub(super) stream: u64,
    pub(super) messages: mpsc::UnboundedReceiver<Message>,
}

/// How much a session keeps for clients that come back.
#[derive(Debug, Clone, Copy)]
pub(super) struct StoreLimits {
    /// Messages kept at most (0: none, and no event ids).
    pub(super) events: usize,
    /// Bytes of messages kept at most.
    pub(super) bytes: usize,
}

struct Stream {
    /// The messages kept for a resumption, oldest first.
    log: VecDeque<(u64, Arc<str>)>,
    next_seq: u64,
    /// The connection that carries it now, if one does.
    live: Option<mpsc::UnboundedSender<Message>>,
    /// A request's stream ends with the response; the standalone stream
    /// ends when another replaces it.
    finished: bool,
}

impl Stream {
    fn new() -> Self {
        Stream {
            log: VecDeque::new(),
            next_seq: 1,
            live: None,
            finished: false,
        }
    }
}

#[derive(Default)]
struct State {
    streams: HashMap<u64, Stream>,
    by_request: HashMap<Id, u64>,
    standalone: Option<u64>,
    next_stream: u64,
    /// Every kept message, oldest first: (stream, seq, bytes).
    kept: VecDeque<(u64, u64, usize)>,
    kept_bytes: usize,
}

/// A session's streams, and the requests it made of the client.
pub(super) struct StreamTable {
    state: Mutex<State>,
    calls: Mutex<HashMap<String, Answering>>,
    next_call: AtomicU64,
    limits: StoreLimits,
}

/// Where the client's answer to a request of the server's goes.
type Answering = oneshot::Sender<Result<Box<RawValue>, CallError>>;

/// The prefix of the ids of requests the server sends through a request's
/// stream (the peer's own ids are numbers).
const CALL_PREFIX: &str = "srv-";

impl StreamTable {
    pub(super) fn new(limits: StoreLimits) -> Self {
        StreamTable {
            state: Mutex::default(),
            calls: Mutex::default(),
            next_call: AtomicU64::new(0),
            limits,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether streams keep their messages for resumption.
    pub(super) fn resumable(&self) -> bool {
        self.limits.events > 0
    }

    fn new_stream(state: &mut State) -> (u64, mpsc::UnboundedReceiver<Message>) {
        state.next_stream += 1;
        let number = state.next_stream;
        let (tx, rx) = mpsc::unbounded_channel();
        let mut stream = Stream::new();
        stream.live = Some(tx);
        state.streams.insert(number, stream);
        (number, rx)
    }

    /// The stream of the request `id`; `None` while another request with
    /// that id is in flight in the session (ids are unique in a session: two
    /// in flight at once could not be told apart, and one would never get
    /// its reply).
    pub(super) fn open(&self, id: &Id) -> Option<Listener> {
        let mut state = self.state();
        if state.by_request.contains_key(id) {
            return None;
        }
        let (stream, messages) = Self::new_stream(&mut state);
        state.by_request.insert(id.clone(), stream);
        Some(Listener { stream, messages })
    }

    /// A new standalone stream (GET), in place of the one before.
    pub(super) fn open_standalone(&self) -> Listener {
        let mut state = self.state();
        if let Some(old) = state.standalone.and_then(|n| state.streams.get_mut(&n)) {
            old.finished = true;
            old.live = None;
        }
        let (stream, messages) = Self::new_stream(&mut state);
        state.standalone = Some(stream);
        Listener { stream, messages }
    }

    /// The stream `last_event_id` belongs to, from the message after it:
    /// what was kept of it first, then (unless it has finished) what comes.
    /// `None` for an event id of no stream this session has.
    pub(super) fn resume(&self, last_event_id: &str) -> Option<Listener> {
        let (stream, seq) = last_event_id.split_once('-')?;
        let (number, after) = (stream.parse::<u64>().ok()?, seq.parse::<u64>().ok()?);
        let mut state = self.state();
        let stream = state.streams.get_mut(&number)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let last = stream.next_seq - 1;
        for (seq, data) in stream.log.iter().filter(|(seq, _)| *seq > after) {
            let _ = tx.send(Message {
                id: format!("{number}-{seq}"),
                data: Arc::clone(data),
                reply: stream.finished && *seq == last,
            });
        }
        if !stream.finished {
            stream.live = Some(tx);
        }
        Some(Listener {
            stream: number,
            messages: rx,
        })
    }

    /// Forgets a stream whose messages went out whole (a JSON reply).
    pub(super) fn forget(&self, stream: u64) {
        let mut state = self.state();
        if let Some(gone) = state.streams.remove(&stream) {
            let freed: usize = gone.log.iter().map(|(_, data)| data.len()).sum();
            state.kept_bytes -= freed;
            state.kept.retain(|(s, _, _)| *s != stream);
        }
    }

    /// Forgets the stream of the request `id` (and the request) when
    /// nothing has been sent on it; whether it was so.
    pub(super) fn forget_unused(&self, stream: u64, id: &Id) -> bool {
        let mut state = self.state();
        let unused = state.streams.get(&stream).is_some_and(|s| s.next_seq == 1);
        if unused {
            state.streams.remove(&stream);
            state.by_request.remove(id);
        }
        unused
    }

    /// Ends the connection that carries the stream of `related` now,
    /// leaving the stream (and its request) going: the client comes back
    /// for the rest with `Last-Event-ID`.
    pub(super) fn close_connection(&self, related: &Id) {
        let mut state = self.state();
        if let Some(number) = state.by_request.get(related).copied() {
            if let Some(stream) = state.streams.get_mut(&number) {
                stream.live = None;
            }
        }
    }

    /// Whether a connection carries one of the session's streams.
    pub(super) fn any_open(&self) -> bool {
        self.state()
            .streams
            .values()
            .any(|s| s.live.as_ref().is_some_and(|l| !l.is_closed()))
    }

    /// Adds `data` to stream `number`: kept (when streams are resumable)
    /// and sent to its connection, if it has one. Whether the stream
    /// exists.
    fn push(&self, state: &mut State, number: u64, data: Arc<str>, finish: bool) -> bool {
        let keep = self.limits.events > 0;
        let Some(stream) = state.streams.get_mut(&number) else {
            return false;
        };
        let seq = stream.next_seq;
        stream.next_seq += 1;
        if keep {
            stream.log.push_back((seq, Arc::clone(&data)));
        }
        if let Some(live) = &stream.live {
            let message = Message {
                id: format!("{number}-{seq}"),
                data: Arc::clone(&data),
                reply: finish,
            };
            if live.send(message).is_err() {
                stream.live = None;
            }
        }
        if finish {
            stream.finished = true;
            // The response ends the connection's stream too.
            stream.live = None;
        }
        if keep {
            state.kept.push_back((number, seq, data.len()));
            state.kept_bytes += data.len();
            self.evict(state);
        }
        true
    }

    /// Drops the oldest kept messages past the limits, and streams that
    /// have finished and have nothing left to replay.
    fn evict(&self, state: &mut State) {
        while state.kept.len() > self.limits.events || state.kept_bytes > self.limits.bytes {
            let Some((number, seq, len)) = state.kept.pop_front() else {
                break;
            };
            state.kept_bytes -= len;
            if let Some(stream) = state.streams.get_mut(&number) {
                if stream.log.front().is_some_and(|(s, _)| *s == seq) {
                    stream.log.pop_front();
                }
                if stream.finished && stream.log.is_empty() {
                    state.streams.remove(&number);
                }
            }
        }
    }

    /// Sends `message` on the stream of `related`, else on the standalone
    /// stream; whether one took it.
    fn send(&self, related: Option<&Id>, message: &str) -> bool {
        let mut state = self.state();
        let data: Arc<str> = message.into();
        if let Some(number) = related.and_then(|id| state.by_request.get(id)).copied() {
            return self.push(&mut state, number, data, false);
        }
        match state.standalone {
            Some(number) => self.push(&mut state, number, data, false),
            None => false,
        }
    }

    /// A frame from the session's peer: a reply ends its request's
    /// stream; anything else goes on the standalone stream.
    pub(super) fn route(&self, frame: &OutFrame) {
        let Ok(text) = std::str::from_utf8(&frame.bytes) else {
            return;
        };
        match frame.read_kind() {
            OutKind::Reply(id) => self.finish(&id, text),
            // The session serves one message per POST: no batch replies.
            OutKind::Replies => tracing::debug!("a batch reply on an MCP session; dropped"),
            _ => {
                if !self.send(None, text) {
                    tracing::debug!("no stream open for a message to the client; dropped");
                }
            }
        }
    }

    /// The reply to the request `id`, which ends its stream.
    pub(super) fn reply(&self, id: &Id, frame: &[u8]) {
        match std::str::from_utf8(frame) {
            Ok(text) => self.finish(id, text),
            Err(_) => tracing::debug!(%id, "a reply that is not UTF-8; dropped"),
        }
    }

    fn finish(&self, id: &Id, text: &str) {
        let mut state = self.state();
        if let Some(number) = state.by_request.remove(id) {
            self.push(&mut state, number, text.into(), true);
        }
    }

    /// A message of the request `id`'s handler, on its stream.
    pub(super) fn message(&self, id: &Id, frame: &[u8]) {
        let sent = std::str::from_utf8(frame).is_ok_and(|text| self.send(Some(id), text));
        if !sent {
            tracing::debug!(%id, "no stream open for a message of a request; dropped");
        }
    }

    /// Ends the stream of the request `id` with no reply (cancelled).
    pub(super) fn abandon(&self, id: &Id) {
        let mut state = self.state();
        if let Some(number) = state.by_request.remove(id) {
            if let Some(stream) = state.streams.get_mut(&number) {
                stream.finished = true;
                stream.live = None;
            }
        }
    }

    /// How many requests are in flight (their streams open, unanswered).
    pub(super) fn in_flight(&self) -> usize {
        self.state().by_request.len()
    }

    /// The client's answer to a request the server made through a stream;
    /// whether it was one.
    pub(super) fn answer(&self, id: &Id, body: &[u8]) -> bool {
        let Ok(value) = serde_json::to_value(id) else {
            return false;
        };
        let Some(key) = value.as_str().filter(|k| k.starts_with(CALL_PREFIX)) else {
            return false;
        };
        let Some(waiting) = self.calls.lock().unwrap_or_else(|p| p.into_inner()).remove(key) else {
            return false;
        };
        #[derive(serde::Deserialize)]
        struct Answer {
            #[serde(default)]
            result: Option<Box<RawValue>>,
            #[serde(default)]
            error: Option<Error>,
        }
        let outcome = match serde_json::from_slice::<Answer>(body) {
            Ok(Answer {
                error: Some(error), ..
            }) => Err(CallError::Rpc(error)),
            Ok(Answer {
                result: Some(result), ..
            }) => Ok(result),
            _ => Err(CallError::Protocol(
                "an answer with neither result nor error".into(),
            )),
        };
        let _ = waiting.send(outcome);
        true
    }
}

/// Forgets a request to the client that is no longer awaited, telling the
/// client it is cancelled.
struct PendingCall {
    table: Arc<StreamTable>,
    key: String,
    related: Id,
    done: bool,
}

impl PendingCall {
    /// Answered (or never sent): nothing to forget.
    fn disarm(&mut self) {
        self.done = true;
    }
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let waiting = self
            .table
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.key);
        if waiting.is_some() {
            let cancel = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                            "params": {"requestId": self.key, "reason": "no longer needed"}});
            self.table.send(Some(&self.related), &cancel.to_string());
        }
    }
}

impl RequestOutbound for Arc<StreamTable> {
    fn notify(&self, related: &Id, frame: String) {
        if !self.send(Some(related), &frame) {
            tracing::debug!("no stream open for a notification; dropped");
        }
    }

    fn call(
        &self,
        related: &Id,
        method: &str,
        params: Box<RawValue>,
        timeout: Duration,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Box<RawValue>, CallError>> + Send>> {
        let key = format!(
            "{CALL_PREFIX}{}",
            self.next_call.fetch_add(1, Ordering::Relaxed) + 1
        );
        let (tx, rx) = oneshot::channel();
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone(), tx);
        let frame = serde_json::json!({"jsonrpc": "2.0", "id": key, "method": method, "params": params});
        let sent = self.send(Some(related), &frame.to_string());
        let mut pending = PendingCall {
            table: Arc::clone(self),
            key,
            related: related.clone(),
            done: false,
        };
        Box::pin(async move {
            if !sent {
                pending.disarm();
                pending
                    .table
                    .calls
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&pending.key);
                return Err(CallError::Closed("no stream open to the client".into()));
            }
            match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(outcome)) => {
                    pending.disarm();
                    outcome
                }
                Ok(Err(_)) => Err(CallError::Closed("the session ended".into())),
                Err(_) => Err(CallError::Timeout(timeout)),
            }
        })
    }

    fn abandoned(&self, related: &Id) {
        self.abandon(related);
    }

    fn close_stream(&self, related: &Id) {
        self.close_connection(related);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn table(events: usize, bytes: usize) -> StreamTable {
        StreamTable::new(StoreLimits { events, bytes })
    }

    fn drain(listener: &mut Listener) -> Vec<(String, String)> {
        let mut out = Vec::new();
        while let Ok(m) = listener.messages.try_recv() {
            out.push((m.id, m.data.to_string()));
        }
        out
    }

    #[test]
    fn a_broken_stream_resumes_after_its_last_event() {
        let table = Arc::new(table(100, 1 << 20));
        let id = Id::from(7);
        let mut first = table.open(&id).unwrap();
        // Another request with that id, while it is in flight: refused.
        assert!(table.open(&id).is_none());
        table.notify(&id, r#"{"n":1}"#.into());
        assert_eq!(drain(&mut first), [("1-1".to_owned(), r#"{"n":1}"#.to_owned())]);
        // The connection breaks; messages go on into the store.
        table.close_connection(&id);
        table.notify(&id, r#"{"n":2}"#.into());
        let reply = Bytes::from_static(br#"{"jsonrpc":"2.0","id":7,"result":{}}"#);
        table.route(&OutFrame::new(reply, OutKind::Reply(Id::from(7))));
        assert!(first.messages.try_recv().is_err());
        // Answered: the id is free again.
        assert!(table.open(&id).is_some());
        let mut again = table.resume("1-1").unwrap();
        let replayed: Vec<String> = drain(&mut again).into_iter().map(|(id, _)| id).collect();
        assert_eq!(replayed, ["1-2", "1-3"]);
        // A finished stream ends after its replay.
        assert!(again.messages.try_recv().is_err());
        assert!(table.resume("9-0").is_none());
        assert!(table.resume("junk").is_none());
    }

    #[test]
    fn the_store_is_bounded() {
        let table = Arc::new(table(2, 1 << 20));
        let id = Id::from(1);
        let _live = table.open(&id).unwrap();
        for n in 0..5 {
            table.notify(&id, format!("{{\"n\":{n}}}"));
        }
        let mut again = table.resume("1-0").unwrap();
        let replayed: Vec<String> = drain(&mut again).into_iter().map(|(_, data)| data).collect();
        assert_eq!(replayed, [r#"{"n":3}"#, r#"{"n":4}"#]);
        // Without a store: no replay, but messages still flow.
        let table = Arc::new(self::table(0, 0));
        let mut live = table.open(&id).unwrap();
        table.notify(&id, "{}".into());
        assert_eq!(drain(&mut live).len(), 1);
        assert!(drain(&mut table.resume("1-0").unwrap()).is_empty());
    }
}
