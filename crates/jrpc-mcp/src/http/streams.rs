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

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
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
    /// What was said before it listened, oldest first.
    ready: std::vec::IntoIter<Message>,
    /// What comes next; `None` when the stream had finished before it
    /// listened (a request answered at once: no channel is made).
    messages: Option<mpsc::UnboundedReceiver<Message>>,
}

impl Listener {
    fn new(stream: u64, ready: Vec<Message>, messages: Option<mpsc::UnboundedReceiver<Message>>) -> Self {
        Listener {
            stream,
            ready: ready.into_iter(),
            messages,
        }
    }

    /// The next message if one has come: `Err(Empty)` while the stream
    /// goes on, `Err(Disconnected)` once it has ended.
    pub(super) fn try_next(&mut self) -> Result<Message, mpsc::error::TryRecvError> {
        if let Some(message) = self.ready.next() {
            return Ok(message);
        }
        match &mut self.messages {
            Some(messages) => messages.try_recv(),
            None => Err(mpsc::error::TryRecvError::Disconnected),
        }
    }

    /// The next message; `None` once the stream has ended.
    pub(super) async fn next(&mut self) -> Option<Message> {
        if let Some(message) = self.ready.next() {
            return Some(message);
        }
        self.messages.as_mut()?.recv().await
    }
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
    /// Who its messages go to now.
    carrier: Carrier,
    /// A request's stream ends with the response; the standalone stream
    /// ends when another replaces it.
    finished: bool,
}

impl Stream {
    fn new(carrier: Carrier) -> Self {
        Stream {
            log: VecDeque::new(),
            next_seq: 1,
            carrier,
            finished: false,
        }
    }
}

/// Who a stream's messages go to now.
enum Carrier {
    /// No one: its connection closed or broke, it finished, or it waits to
    /// be resumed.
    None,
    /// A request's stream before its POST listens ([`StreamTable::listen`]):
    /// what is said waits here. Most requests are answered at once with
    /// nothing said, and their POST never listens: no channel is made for
    /// them. Eviction leaves such a stream alone: these are the POST's.
    Waiting(Vec<Message>),
    /// Its connection was closed before its POST listened: the POST gets
    /// what was said until then, and nothing more.
    ClosedEarly(Vec<Message>),
    /// A connection.
    Live(mpsc::UnboundedSender<Message>),
}

impl Carrier {
    /// Its connection ends (a stream still waiting for its POST keeps what
    /// it has for it).
    fn end_connection(&mut self) {
        if matches!(self, Carrier::Live(_)) {
            *self = Carrier::None;
        }
    }

    /// Whether its POST has yet to listen.
    fn awaits_post(&self) -> bool {
        matches!(self, Carrier::Waiting(_) | Carrier::ClosedEarly(_))
    }
}

/// Hashes the session's own stream numbers (counted up by the server, never
/// chosen by a client) with one multiplication rather than SipHash: every
/// request opens and forgets a stream. A key is one `u64`.
#[derive(Default)]
struct NumberHasher(u64);

impl Hasher for NumberHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.write_u64(self.0.rotate_left(8) ^ u64::from(*byte));
        }
    }

    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing: consecutive numbers spread over the high bits
        // the table's control bytes are taken from.
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[derive(Default)]
struct State {
    streams: HashMap<u64, Stream, BuildHasherDefault<NumberHasher>>,
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

    /// Adds `stream` under the next number.
    fn add_stream(state: &mut State, stream: Stream) -> u64 {
        state.next_stream += 1;
        let number = state.next_stream;
        state.streams.insert(number, stream);
        number
    }

    fn new_stream(state: &mut State) -> (u64, mpsc::UnboundedReceiver<Message>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self::add_stream(state, Stream::new(Carrier::Live(tx))), rx)
    }

    /// The stream of the request `id` (its number), which keeps what is
    /// sent on it until its POST [listens](Self::listen); `None` while
    /// another request with that id is in flight in the session (ids are
    /// unique in a session: two in flight at once could not be told apart,
    /// and one would never get its reply).
    pub(super) fn open(&self, id: &Id) -> Option<u64> {
        let mut state = self.state();
        let number = state.next_stream + 1;
        match state.by_request.entry(id.clone()) {
            Entry::Occupied(_) => return None,
            Entry::Vacant(vacant) => vacant.insert(number),
        };
        Some(Self::add_stream(
            &mut state,
            Stream::new(Carrier::Waiting(Vec::new())),
        ))
    }

    /// The connection of a request's stream, `stream` from [`open`](Self::open):
    /// what was sent on it so far, then the rest until it finishes. Listened
    /// to once; a stream whose connection was closed before ends after
    /// what was said until then (a resumable one is resumed with
    /// `Last-Event-ID`).
    pub(super) fn listen(&self, stream: u64) -> Listener {
        let mut state = self.state();
        let Some(open) = state.streams.get_mut(&stream) else {
            return Listener::new(stream, Vec::new(), None);
        };
        let early = match std::mem::replace(&mut open.carrier, Carrier::None) {
            Carrier::Waiting(early) if !open.finished => {
                let (tx, messages) = mpsc::unbounded_channel();
                open.carrier = Carrier::Live(tx);
                return Listener::new(stream, early, Some(messages));
            }
            Carrier::Waiting(early) | Carrier::ClosedEarly(early) => early,
            // Listened to already: nothing more for this POST.
            other => {
                open.carrier = other;
                return Listener::new(stream, Vec::new(), None);
            }
        };
        // Eviction spared it for this POST; finished, with nothing left to
        // replay, it can go now.
        if open.finished && open.log.is_empty() {
            state.streams.remove(&stream);
        }
        Listener::new(stream, early, None)
    }

    /// A new standalone stream (GET), in place of the one before.
    pub(super) fn open_standalone(&self) -> Listener {
        let mut state = self.state();
        if let Some(old) = state.standalone.and_then(|n| state.streams.get_mut(&n)) {
            old.finished = true;
            old.carrier.end_connection();
        }
        let (stream, messages) = Self::new_stream(&mut state);
        state.standalone = Some(stream);
        Listener::new(stream, Vec::new(), Some(messages))
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
        // A stream whose POST has yet to listen stays its POST's.
        if !stream.finished && !stream.carrier.awaits_post() {
            stream.carrier = Carrier::Live(tx);
        }
        Some(Listener::new(number, Vec::new(), Some(rx)))
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
        let Entry::Occupied(open) = state.streams.entry(stream) else {
            return false;
        };
        if open.get().next_seq != 1 {
            return false;
        }
        open.remove();
        state.by_request.remove(id);
        true
    }

    /// Ends the connection that carries the stream of `related` now,
    /// leaving the stream (and its request) going: the client comes back
    /// for the rest with `Last-Event-ID`.
    pub(super) fn close_connection(&self, related: &Id) {
        let mut state = self.state();
        if let Some(number) = state.by_request.get(related).copied() {
            if let Some(stream) = state.streams.get_mut(&number) {
                stream.carrier = match std::mem::replace(&mut stream.carrier, Carrier::None) {
                    Carrier::Waiting(early) => Carrier::ClosedEarly(early),
                    Carrier::ClosedEarly(early) => Carrier::ClosedEarly(early),
                    Carrier::Live(_) | Carrier::None => Carrier::None,
                };
            }
        }
    }

    /// Whether a connection carries one of the session's streams.
    pub(super) fn any_open(&self) -> bool {
        self.state()
            .streams
            .values()
            .any(|s| matches!(&s.carrier, Carrier::Live(live) if !live.is_closed()))
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
        let message = || Message {
            id: format!("{number}-{seq}"),
            data: Arc::clone(&data),
            reply: finish,
        };
        match &mut stream.carrier {
            Carrier::Live(live) => {
                if live.send(message()).is_err() {
                    stream.carrier = Carrier::None;
                }
            }
            Carrier::Waiting(early) => early.push(message()),
            Carrier::ClosedEarly(_) | Carrier::None => {}
        }
        if finish {
            stream.finished = true;
            // The response ends the connection's stream too.
            stream.carrier.end_connection();
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
                if stream.finished && stream.log.is_empty() && !stream.carrier.awaits_post() {
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
                stream.carrier.end_connection();
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
        while let Ok(m) = listener.try_next() {
            out.push((m.id, m.data.to_string()));
        }
        out
    }

    #[test]
    fn a_broken_stream_resumes_after_its_last_event() {
        let table = Arc::new(table(100, 1 << 20));
        let id = Id::from(7);
        let mut first = table.listen(table.open(&id).unwrap());
        // Another request with that id, while it is in flight: refused.
        assert!(table.open(&id).is_none());
        table.notify(&id, r#"{"n":1}"#.into());
        assert_eq!(drain(&mut first), [("1-1".to_owned(), r#"{"n":1}"#.to_owned())]);
        // The connection breaks; messages go on into the store.
        table.close_connection(&id);
        table.notify(&id, r#"{"n":2}"#.into());
        let reply = Bytes::from_static(br#"{"jsonrpc":"2.0","id":7,"result":{}}"#);
        table.route(&OutFrame::new(reply, OutKind::Reply(Id::from(7))));
        assert!(first.try_next().is_err());
        // Answered: the id is free again.
        assert!(table.open(&id).is_some());
        let mut again = table.resume("1-1").unwrap();
        let replayed: Vec<String> = drain(&mut again).into_iter().map(|(id, _)| id).collect();
        assert_eq!(replayed, ["1-2", "1-3"]);
        // A finished stream ends after its replay.
        assert!(again.try_next().is_err());
        assert!(table.resume("9-0").is_none());
        assert!(table.resume("junk").is_none());
    }

    #[test]
    fn the_store_is_bounded() {
        let table = Arc::new(table(2, 1 << 20));
        let id = Id::from(1);
        let _live = table.listen(table.open(&id).unwrap());
        for n in 0..5 {
            table.notify(&id, format!("{{\"n\":{n}}}"));
        }
        let mut again = table.resume("1-0").unwrap();
        let replayed: Vec<String> = drain(&mut again).into_iter().map(|(_, data)| data).collect();
        assert_eq!(replayed, [r#"{"n":3}"#, r#"{"n":4}"#]);
        // Without a store: no replay, but messages still flow.
        let table = Arc::new(self::table(0, 0));
        let mut live = table.listen(table.open(&id).unwrap());
        table.notify(&id, "{}".into());
        assert_eq!(drain(&mut live).len(), 1);
        assert!(drain(&mut table.resume("1-0").unwrap()).is_empty());
    }

    #[test]
    fn what_comes_before_the_post_listens_is_kept_for_it() {
        let id = Id::from(3);
        for events in [0, 100] {
            let table = Arc::new(table(events, 1 << 20));
            let stream = table.open(&id).unwrap();
            table.notify(&id, r#"{"n":1}"#.into());
            table.reply(&id, br#"{"jsonrpc":"2.0","id":3,"result":{}}"#);
            let mut listener = table.listen(stream);
            let got: Vec<(String, bool)> = std::iter::from_fn(|| listener.try_next().ok())
                .map(|m| (m.id, m.reply))
                .collect();
            assert_eq!(got, [("1-1".to_owned(), false), ("1-2".to_owned(), true)]);
            // Finished: the connection ends after what was said.
            assert!(matches!(
                listener.try_next(),
                Err(mpsc::error::TryRecvError::Disconnected)
            ));
            // A stream answered at once with nothing said is forgotten whole.
            let stream = table.open(&id).unwrap();
            assert!(table.forget_unused(stream, &id));
            assert_eq!(table.in_flight(), 0);
            // A connection closed before the POST listens ends after what
            // was said until then.
            let stream = table.open(&id).unwrap();
            table.notify(&id, r#"{"n":2}"#.into());
            table.close_connection(&id);
            table.notify(&id, r#"{"n":3}"#.into());
            let mut listener = table.listen(stream);
            table.notify(&id, r#"{"n":4}"#.into());
            assert_eq!(drain(&mut listener).len(), 1);
            assert!(matches!(
                listener.try_next(),
                Err(mpsc::error::TryRecvError::Disconnected)
            ));
            table.reply(&id, br#"{"jsonrpc":"2.0","id":3,"result":{}}"#);
        }
    }

    #[test]
    fn eviction_spares_what_a_post_has_not_read() {
        // A reply larger than the whole store, said before its POST
        // listens: evicted from the store at once, but the POST gets it.
        let id = Id::from(5);
        let table = Arc::new(table(100, 8));
        let stream = table.open(&id).unwrap();
        table.reply(&id, br#"{"jsonrpc":"2.0","id":5,"result":{"big":true}}"#);
        let mut listener = table.listen(stream);
        let got = drain(&mut listener);
        assert_eq!(got.len(), 1);
        assert!(got[0].1.contains("big"));
        // Finished and not replayable: it is gone now, not kept.
        assert!(table.resume(&format!("{stream}-0")).is_none());
        // Other streams' messages pushing this one's reply out of the
        // store before its POST listens: the same.
        let table = Arc::new(self::table(1, 1 << 20));
        let stream = table.open(&id).unwrap();
        table.reply(&id, br#"{"jsonrpc":"2.0","id":5,"result":{}}"#);
        let other = Id::from(6);
        let _other = table.listen(table.open(&other).unwrap());
        table.notify(&other, "{}".into());
        assert_eq!(drain(&mut table.listen(stream)).len(), 1);
    }
}
