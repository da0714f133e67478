//! `jrpc connect TARGET`: an interactive session with a server.
//!
//! A line `method params…` becomes a request with an id of its own; its
//! result prints when it comes, while the next line is typed. What the
//! server sends of its own (notifications, requests) prints as it arrives,
//! and the user may answer a request. Commands start with `:` (`:help`).
//! Frames go over the raw [`Wire`], below the client library, so that
//! `:raw` can send anything and every reply is shown as it came.
//!
//! Piped input (not a terminal) is a script: each line runs in turn
//! (calls do not wait for each other), each result prints on its own line
//! of stdout in the order of the lines, the server's own messages go to
//! stderr, and at the end of input the session waits (within --timeout)
//! for the replies still due; the exit status is 0 only if every call
//! succeeded.

use std::collections::{BTreeMap, HashMap};
use std::io::IsTerminal as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::anyhow;
use bytes::Bytes;
use clap::Args;
use futures_util::{SinkExt as _, StreamExt as _};
use jrpc::codec::Inbound;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::editor;
use super::lines::{answer, method_and_params, HELP};
use crate::call::{report, ConnectArgs, Failure, Target};
use crate::pretty::format_json;
use crate::wire::{id_key, message, post, present, request_ids, Posted, Wire};

#[derive(Debug, Args)]
#[command(after_help = "LINES:
  METHOD [PARAM]...          call METHOD: each PARAM a JSON value or a bare word
                             (a string); NAME=VALUE words send named params (not
                             mixed with the others; '\"a=b\"' is a string)
  :notify METHOD [PARAM]...  send a notification
  :batch ... :end            gather the calls and notifications typed in between
                             into one batch
  :raw JSON                  send JSON exactly as typed (:raw! TEXT: anything);
                             a line that starts with { or [ is sent so too
  :reply ID JSON             answer the server's request ID with a result
  :error ID CODE MESSAGE     answer the server's request ID with an error
  :help                      this list
  :quit                      end the session (or Ctrl-D)

Piped input runs the lines as a script: results on stdout, one line each, in
the order of the lines; exit status 0 only if every call succeeded. The
server's requests are answered -32601 there.")]
pub struct ConnectCmdArgs {
    /// The server: tcp://HOST:PORT, unix:PATH, udp://HOST:PORT,
    /// http(s)://..., ws(s)://... (or -- COMMAND; or $JRPC_URL).
    #[arg(value_name = "TARGET")]
    target: Vec<String>,

    #[command(flatten)]
    connect: ConnectArgs,

    /// A stdio server to spawn and talk to, after --.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

pub async fn run(args: ConnectCmdArgs) -> ExitCode {
    match session(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(failure) => report(failure),
    }
}

async fn session(args: ConnectCmdArgs) -> Result<bool, Failure> {
    let (target, rest) = Target::from_words(args.target, &args.command)?;
    if let Some(word) = rest.as_slice().first() {
        return Err(Failure::Usage(anyhow!(
            "{word:?}: jrpc connect takes only a TARGET; type calls at its prompt (or pipe them in)"
        )));
    }
    let headers = args.connect.dial.headers()?;
    let timeout = args.connect.dial.timeout;
    let mut wire = Wire::open(&target, &args.connect, &headers)
        .await
        .map_err(|e| Failure::Transport(e.context(format!("connecting to {target}"))))?;
    let interactive = std::io::stdin().is_terminal();
    let (methods, early) = if interactive {
        discover(&mut wire, timeout.min(Duration::from_secs(3))).await
    } else {
        (Vec::new(), Vec::new())
    };
    let (lines_tx, mut lines) = mpsc::unbounded_channel::<String>();
    let mut editor_thread = None;
    let out = if interactive {
        println!(
            "jrpc: connected to {target}{}. Type METHOD [PARAM]... or :help; Ctrl-D ends.",
            if methods.is_empty() {
                String::new()
            } else {
                format!(" ({} methods; Tab completes them)", methods.len())
            }
        );
        let (printer, thread) =
            editor::start(methods.clone(), lines_tx).map_err(|e| Failure::Transport(anyhow!(e)))?;
        editor_thread = Some(thread);
        Out::Terminal(Mutex::new(printer))
    } else {
        // A thread of its own: a runtime task reading stdin would keep the
        // process from ending while the pipe stays open.
        std::thread::spawn(move || {
            for line in std::io::stdin().lines() {
                let Ok(line) = line else { break };
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        Out::Script(Mutex::new(InOrder::default()))
    };
    let (frames, outgoing) = mpsc::unbounded_channel::<Bytes>();
    let shared = Arc::new(Shared {
        out,
        pending: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(1),
        next_seq: AtomicU64::new(0),
        next_token: AtomicU64::new(0),
        unsent: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
        closed: AtomicBool::new(false),
        interactive,
        frames,
        timeout,
    });
    start_wire(wire, outgoing, Arc::clone(&shared));
    // What the server sent of its own while it was asked for its methods.
    for frame in early {
        shared.arrived(&frame);
    }

    let mut batch: Option<Vec<Queued>> = None;
    while let Some(line) = lines.recv().await {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match shared.run_line(line, &mut batch) {
            Ok(Flow::Go) => {}
            Ok(Flow::Quit) => break,
            Err(e) => {
                shared.say(&format!("jrpc: {e:#}"));
                if !interactive {
                    shared.failed.store(true, Ordering::Relaxed);
                }
            }
        }
    }
    if let Some(entries) = batch {
        shared.say("jrpc: a batch without :end was not sent");
        for call in entries.into_iter().filter_map(|e| e.call) {
            shared.finish(call.1, Err("not sent: its batch had no :end".to_owned()));
        }
    }
    // What is queued goes out; in a script, the replies still due come
    // (each call's own timer reports one that does not, at its timeout).
    let deadline = tokio::time::Instant::now() + timeout + Duration::from_millis(100);
    let done =
        || shared.unsent.load(Ordering::Relaxed) == 0 && (interactive || shared.lock_pending().is_empty());
    while !done() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if let Some(thread) = editor_thread {
        // It has ended (the terminal is back as it was) or ends now.
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    }
    // A session at a terminal ends well however its calls went.
    Ok(interactive || !shared.failed.load(Ordering::Relaxed))
}

/// The methods `rpc.discover` names, for completion (none if the server
/// does not answer it), and the messages the server sent of its own
/// meanwhile.
async fn discover(wire: &mut Wire, timeout: Duration) -> (Vec<String>, Vec<Bytes>) {
    #[derive(Deserialize)]
    struct Reply {
        result: Document,
    }
    #[derive(Deserialize)]
    struct Document {
        methods: Vec<Method>,
    }
    #[derive(Deserialize)]
    struct Method {
        name: String,
    }
    let frame = r#"{"jsonrpc":"2.0","method":"rpc.discover","id":"jrpc-connect-discover"}"#;
    let Ok(observed) = wire
        .exchange_until(frame, r#""jrpc-connect-discover""#, timeout)
        .await
    else {
        return (Vec::new(), Vec::new());
    };
    let mut names: Vec<String> = observed
        .frames()
        .iter()
        .filter_map(|f| serde_json::from_slice::<Reply>(f).ok())
        .flat_map(|r| r.result.methods.into_iter().map(|m| m.name))
        .collect();
    names.sort();
    names.dedup();
    (names, observed.own().to_vec())
}

/// Sends what the session queues and hands what arrives to it.
fn start_wire(wire: Wire, mut outgoing: mpsc::UnboundedReceiver<Bytes>, shared: Arc<Shared>) {
    match wire {
        Wire::Stream {
            mut incoming,
            outgoing: mut sink,
        } => {
            let writer_shared = Arc::clone(&shared);
            tokio::spawn(async move {
                while let Some(frame) = outgoing.recv().await {
                    let sent = sink.send(frame).await;
                    writer_shared.unsent.fetch_sub(1, Ordering::Relaxed);
                    if let Err(e) = sent {
                        writer_shared.connection_lost(&format!("sending failed: {e}"));
                        break;
                    }
                }
                let _ = sink.close().await;
            });
            tokio::spawn(async move {
                let why = loop {
                    match incoming.next().await {
                        Some(Ok(Inbound::Frame(frame))) => shared.arrived(&frame),
                        Some(Ok(Inbound::Malformed(reason))) => {
                            shared.say(&format!("<- unreadable: {reason}"))
                        }
                        Some(Ok(Inbound::Oversized { limit })) => {
                            shared.say(&format!("<- a frame over {limit} bytes, skipped"))
                        }
                        Some(Ok(Inbound::Undelivered { reason, .. })) => {
                            shared.say(&format!("<- not delivered: {reason}"))
                        }
                        Some(Ok(Inbound::Lost { reason, .. })) => {
                            shared.say(&format!("<- replies lost: {reason}"))
                        }
                        Some(Ok(_)) => {}
                        Some(Err(e)) => break format!("reading failed: {e}"),
                        None => break "the server closed the connection".to_owned(),
                    }
                };
                shared.connection_lost(&why);
            });
        }
        Wire::Http(http) => {
            tokio::spawn(async move {
                while let Some(frame) = outgoing.recv().await {
                    let (shared, http) = (Arc::clone(&shared), http.clone());
                    let calls = request_ids(&frame);
                    let posting = async move {
                        match post(http, &frame, shared.timeout).await {
                            Posted::Nothing => {}
                            Posted::Reply { status, body } => {
                                if status >= 400 {
                                    shared.say(&format!("<- HTTP {status}"));
                                }
                                shared.arrived(&body);
                            }
                            Posted::Failed(why) => shared.fail_frame(&frame, &why),
                        }
                        // The response was all there is: a call it did not
                        // answer gets no answer.
                        shared.fail_frame_quietly(&frame, "the HTTP response did not answer it");
                        shared.unsent.fetch_sub(1, Ordering::Relaxed);
                    };
                    if calls.is_empty() {
                        // Notifications (and answers) keep their order.
                        posting.await;
                    } else {
                        tokio::spawn(posting);
                    }
                }
            });
        }
    }
}

/// What the session does after a line.
enum Flow {
    Go,
    Quit,
}

/// A message made from a line, not yet sent (in a batch until `:end`).
struct Queued {
    frame: String,
    call: Option<(String, Call)>,
}

/// A call waiting for its reply.
struct Call {
    /// How the call is shown: `#3 subtract`.
    label: String,
    /// Its place in a script's output.
    seq: Option<u64>,
    token: u64,
}

struct Shared {
    out: Out,
    /// Calls waiting for replies, by the key of their id.
    pending: Mutex<HashMap<String, Call>>,
    next_id: AtomicU64,
    next_seq: AtomicU64,
    /// Tells a call's timer its own call from a later one with its id.
    next_token: AtomicU64,
    /// Frames queued but not yet written (or posted).
    unsent: AtomicUsize,
    failed: AtomicBool,
    closed: AtomicBool,
    interactive: bool,
    frames: mpsc::UnboundedSender<Bytes>,
    timeout: Duration,
}

impl Shared {
    fn lock_pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, Call>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs one line typed or read.
    fn run_line(self: &Arc<Self>, line: &str, batch: &mut Option<Vec<Queued>>) -> anyhow::Result<Flow> {
        // A line that starts as an object or an array is a frame of its
        // own, as `:raw` sends it: not a method named `{"jsonrpc"…`.
        let (command, rest) = if line.trim_start().starts_with(['{', '[']) {
            (":raw", line.trim())
        } else {
            match line.split_once(char::is_whitespace) {
                Some((command, rest)) => (command, rest.trim()),
                None => (line, ""),
            }
        };
        let queued = match command {
            ":help" | ":h" | ":?" => {
                self.say(HELP);
                return Ok(Flow::Go);
            }
            ":quit" | ":q" | ":exit" => return Ok(Flow::Quit),
            ":batch" => {
                if batch.is_some() {
                    anyhow::bail!("a batch is already open: :end sends it");
                }
                *batch = Some(Vec::new());
                return Ok(Flow::Go);
            }
            ":end" => {
                let entries = batch.take().ok_or_else(|| anyhow!(":end without :batch"))?;
                if entries.is_empty() {
                    anyhow::bail!("the batch is empty (send `:raw []` to try an empty batch)");
                }
                let frame = format!(
                    "[{}]",
                    entries
                        .iter()
                        .map(|e| e.frame.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                );
                let calls = entries.into_iter().filter_map(|e| e.call).collect();
                self.send(frame, calls);
                return Ok(Flow::Go);
            }
            ":raw" => {
                let raw: &RawValue = serde_json::from_str(rest)
                    .map_err(|e| anyhow!(":raw is not JSON ({e}): send it anyway with :raw! TEXT"))?;
                let calls = request_ids(raw.get().as_bytes())
                    .into_iter()
                    .map(|id| (id_key(&id), self.call(format!("raw {id}"))))
                    .collect();
                self.send(rest.to_owned(), calls);
                return Ok(Flow::Go);
            }
            ":raw!" => {
                // Not JSON at all: to see what the server makes of it.
                self.send(rest.to_owned(), Vec::new());
                return Ok(Flow::Go);
            }
            ":reply" | ":error" => {
                let frame = answer(command, rest)?;
                self.send(frame, Vec::new());
                return Ok(Flow::Go);
            }
            ":notify" => {
                let (method, params) = method_and_params(rest)?;
                Queued {
                    frame: message(&method, params.as_deref().map(RawValue::get), None),
                    call: None,
                }
            }
            other if other.starts_with(':') => anyhow::bail!("{other}: no such command (:help lists them)"),
            _ => {
                let (method, params) = method_and_params(line)?;
                let id = self.fresh_id();
                Queued {
                    frame: message(
                        &method,
                        params.as_deref().map(RawValue::get),
                        Some(&id.to_string()),
                    ),
                    call: Some((id_key(&id.to_string()), self.call(format!("#{id} {method}")))),
                }
            }
        };
        match batch {
            Some(entries) => entries.push(queued),
            None => self.send(queued.frame, queued.call.into_iter().collect()),
        }
        Ok(Flow::Go)
    }

    /// A call's label and, in a script, its place in the output.
    fn call(&self, label: String) -> Call {
        let seq = (!self.interactive).then(|| self.next_seq.fetch_add(1, Ordering::Relaxed));
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        Call { label, seq, token }
    }

    /// The next automatic id: one no call waiting has (a `:raw` one may).
    fn fresh_id(&self) -> u64 {
        loop {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            if !self.lock_pending().contains_key(&id_key(&id.to_string())) {
                return id;
            }
        }
    }

    /// Sends a frame, its calls waiting for their replies within the
    /// timeout.
    fn send(self: &Arc<Self>, frame: String, calls: Vec<(String, Call)>) {
        if self.closed.load(Ordering::Relaxed) {
            self.say(if self.interactive {
                "jrpc: the connection is closed: nothing sent (Ctrl-D ends the session)"
            } else {
                "jrpc: the connection is closed: nothing sent"
            });
            for (_, call) in calls {
                self.finish(call, Err("the connection is closed".to_owned()));
            }
            return;
        }
        let timers: Vec<(String, u64)> = calls.iter().map(|(k, c)| (k.clone(), c.token)).collect();
        let superseded: Vec<Call> = {
            let mut pending = self.lock_pending();
            calls
                .into_iter()
                .filter_map(|(key, call)| pending.insert(key, call))
                .collect()
        };
        // Replies are told apart by id: the later call with an id takes
        // the reply.
        for earlier in superseded {
            self.finish(
                earlier,
                Err("not awaited: a later call has the same id".to_owned()),
            );
        }
        if self.interactive {
            self.say(&format!("-> {frame}"));
        }
        self.unsent.fetch_add(1, Ordering::Relaxed);
        if self.frames.send(Bytes::from(frame)).is_err() {
            self.unsent.fetch_sub(1, Ordering::Relaxed);
            self.give_up(&timers, "the connection is closed");
            return;
        }
        let this = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(this.timeout).await;
            this.give_up(&timers, &format!("no reply within {:?}", this.timeout));
        });
    }

    /// The calls among `calls` (key and token) still waiting fail with
    /// `why`; a later call that took a key over is left alone.
    fn give_up(&self, calls: &[(String, u64)], why: &str) {
        for (key, token) in calls {
            let waiting = {
                let mut pending = self.lock_pending();
                match pending.get(key) {
                    Some(call) if call.token == *token => pending.remove(key),
                    _ => None,
                }
            };
            if let Some(call) = waiting {
                self.finish(call, Err(why.to_owned()));
            }
        }
    }

    /// A frame from the server: replies to calls, or its own messages.
    fn arrived(&self, frame: &[u8]) {
        let items: Vec<&RawValue> = match serde_json::from_slice::<&RawValue>(frame) {
            Ok(raw) if raw.get().starts_with('[') => serde_json::from_str(raw.get()).unwrap_or_default(),
            Ok(raw) => vec![raw],
            Err(_) => {
                self.say(&format!("<- not JSON: {}", String::from_utf8_lossy(frame)));
                return;
            }
        };
        if items.is_empty() {
            self.say(&format!("<- {}", String::from_utf8_lossy(frame)));
        }
        for item in items {
            self.item(item);
        }
    }

    fn item(&self, item: &RawValue) {
        #[derive(Deserialize)]
        struct Probe<'a> {
            #[serde(borrow, default)]
            method: Option<&'a RawValue>,
            #[serde(borrow, default, deserialize_with = "present")]
            id: Option<&'a RawValue>,
            #[serde(borrow, default)]
            params: Option<&'a RawValue>,
            #[serde(borrow, default)]
            result: Option<&'a RawValue>,
            #[serde(borrow, default)]
            error: Option<&'a RawValue>,
        }
        let Ok(probe) = serde_json::from_str::<Probe<'_>>(item.get()) else {
            return self.say(&format!("<- {}", item.get()));
        };
        let params = probe.params.map_or("", RawValue::get);
        match (probe.method, probe.id) {
            (Some(method), None) => self.say(&format!("<- notification {} {params}", method.get())),
            (Some(method), Some(id)) => {
                let method = method.get();
                if self.interactive {
                    self.say(&format!(
                        "<- request {} {method} {params}   (answer: :reply {} JSON, or :error {} CODE MESSAGE)",
                        id.get(),
                        id.get(),
                        id.get()
                    ));
                } else {
                    self.say(&format!(
                        "<- request {} {method} {params} (answered -32601)",
                        id.get()
                    ));
                    let reply = format!(
                        r#"{{"jsonrpc":"2.0","error":{{"code":-32601,"message":"Method not found","data":"jrpc connect runs a script: it answers no requests"}},"id":{}}}"#,
                        id.get()
                    );
                    self.unsent.fetch_add(1, Ordering::Relaxed);
                    if self.frames.send(Bytes::from(reply)).is_err() {
                        self.unsent.fetch_sub(1, Ordering::Relaxed);
                    }
                }
            }
            (None, id) => {
                let waiting = id.and_then(|id| self.lock_pending().remove(&id_key(id.get())));
                let outcome = match (probe.result, probe.error) {
                    (Some(result), None) => Ok(result.get().to_owned()),
                    (None, Some(error)) => Err(format!("error {}", error.get())),
                    _ => Err(format!("invalid reply {}", item.get())),
                };
                match waiting {
                    Some(call) => self.finish(call, outcome.map_err(|e| e.to_string())),
                    None => {
                        self.say(&format!("<- {}", item.get()));
                        // A reply to nothing asked (an error about a frame
                        // that could not be read, say): a script failed.
                        if probe.error.is_some() {
                            self.failed.store(true, Ordering::Relaxed);
                        }
                    }
                }
            }
        }
    }

    /// Prints a call's outcome: at once at a terminal, in the order of the
    /// lines in a script.
    fn finish(&self, call: Call, outcome: Result<String, String>) {
        if outcome.is_err() {
            self.failed.store(true, Ordering::Relaxed);
        }
        match (&self.out, call.seq) {
            (Out::Script(order), Some(seq)) => {
                let line = match outcome {
                    Ok(result) => format_json(&result, false),
                    Err(e) => format!("{} {e}", call.label),
                };
                order.lock().unwrap_or_else(|e| e.into_inner()).ready(seq, line);
            }
            _ => {
                let text = match outcome {
                    Ok(result) => format_json(&result, true),
                    Err(e) => e,
                };
                self.say(&format!("[{}] {text}", call.label));
            }
        }
    }

    /// A frame that got no reply at all (HTTP): each of its calls fails.
    fn fail_frame(&self, frame: &[u8], why: &str) {
        self.fail_frame_quietly(frame, why);
        self.say(&format!("jrpc: {why}"));
    }

    /// The calls of `frame` still waiting fail with `why`.
    fn fail_frame_quietly(&self, frame: &[u8], why: &str) {
        for id in request_ids(frame) {
            let waiting = self.lock_pending().remove(&id_key(&id));
            if let Some(call) = waiting {
                self.finish(call, Err(why.to_owned()));
            }
        }
    }

    /// The connection is gone: the calls waiting fail.
    fn connection_lost(&self, why: &str) {
        if self.closed.swap(true, Ordering::Relaxed) {
            return;
        }
        let waiting: Vec<Call> = self.lock_pending().drain().map(|(_, c)| c).collect();
        for call in waiting {
            self.finish(call, Err(why.to_owned()));
        }
        self.say(&format!("jrpc: {why}"));
    }

    /// A line of the session's own: above the prompt, or on stderr in a
    /// script.
    fn say(&self, text: &str) {
        match &self.out {
            Out::Terminal(printer) => {
                let _ = printer
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .print(format!("{text}\n"));
            }
            Out::Script(_) => eprintln!("{text}"),
        }
    }
}

/// Where the session prints.
enum Out {
    /// Above the prompt, while a line is being typed.
    Terminal(Mutex<Box<dyn rustyline::ExternalPrinter + Send>>),
    /// Stdout, in the order of the lines.
    Script(Mutex<InOrder>),
}

/// Script output, one line per call in the order of the lines.
#[derive(Default)]
struct InOrder {
    next: u64,
    ready: BTreeMap<u64, String>,
}

impl InOrder {
    fn ready(&mut self, seq: u64, line: String) {
        self.ready.insert(seq, line);
        while let Some(line) = self.ready.remove(&self.next) {
            println!("{line}");
            self.next += 1;
        }
    }
}
