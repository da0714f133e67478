//! `jrpc bridge -- COMMAND`: a stdio server served to many clients at once.
//!
//! The bridge is a `jrpc serve` whose only handler is a fallback that
//! forwards every call and notification to the child, over one client
//! connection to its stdin and stdout. So the bridge parses, validates and
//! answers malformed input itself (the child only ever sees valid
//! requests), the limits, middleware and logs of `jrpc serve` apply, and
//! the client numbers the requests it sends: ids from different clients
//! cannot collide, and each answer goes back to the call that asked.
//!
//! The child's own messages go the other way, through the client
//! connection's router: to the client whose call is in flight when it is
//! the only one (it caused them), or else a notification to every client
//! that can be called back (WebSocket, TCP, Unix socket) and a request to
//! the one that called most recently.
//!
//! If the child exits, calls in flight fail with a clear error and it is
//! started again, 100 ms doubling to 5 s apart.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use jrpc::client::{Client, Reconnect, Retry, RetryPolicy};
use jrpc::message::{codes, RawValue};
use jrpc::transport::child::ChildDialer;
use jrpc::transport::{Connection, Dialer};
use jrpc::{CallError, ConnectionConfig, Error, Peer, RequestContext, Router};

use crate::serve::{Methods, ServeArgs};

/// How long a forwarded call waits when `--call-timeout` does not bound it:
/// five minutes (a client that gives up or hangs up ends it sooner). A call
/// the child never answers — one of several waiting when the child answered
/// a request it could not read, with id null, which none can be matched
/// to — ends then.
const BRIDGED_CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// How long the client connection to the child lets a call wait: the
/// forwarding bounds each call itself.
const NO_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// Serves `command` as `args` say; a client gets `answer_within` to answer
/// a request from it.
pub(super) async fn run(
    command: Vec<String>,
    args: ServeArgs,
    answer_within: Duration,
) -> anyhow::Result<()> {
    let name: Arc<str> = format!("`{}`", command.join(" ")).into();
    // A command that cannot start would only be restarted forever.
    find_program(&command[0]).with_context(|| format!("cannot start {name}"))?;
    let stopping = Arc::new(AtomicBool::new(false));
    let last = Arc::new(Mutex::new(None::<Peer>));
    let clients = Arc::new(Clients::default());
    let max_frame_len = args
        .max_frame_len()
        .max(jrpc::message::Limits::DEFAULT_MAX_FRAME_LEN);
    let dialer = Respawn {
        child: ChildDialer::new(move || {
            let mut child = tokio::process::Command::new(&command[0]);
            child.args(&command[1..]);
            // Ctrl-C at a terminal signals the bridge, which stops the
            // child itself once the calls in flight are done.
            #[cfg(unix)]
            child.process_group(0);
            child
        })
        .framing(args.framing(), max_frame_len),
        name: Arc::clone(&name),
        stopping: Arc::clone(&stopping),
        last: Arc::clone(&last),
    };
    // The connection to each child, for the next dial to say how it ended.
    let keep_last = move |peer: Peer| {
        *last.lock().unwrap_or_else(|e| e.into_inner()) = Some(peer);
        std::future::ready(Ok(()))
    };
    let restarts = Retry::exponential(u32::MAX, Duration::from_millis(100), Duration::from_secs(5));
    let mut builder = Client::builder()
        .router(back_to_clients(&clients, answer_within).max_frame_len(max_frame_len))
        // The child's notifications are handled (sent on) before the reply
        // they preceded: the client of that call is still known, and gets
        // them first.
        .connection(
            ConnectionConfig::default()
                .framing(args.framing())
                .ordered(true)
                .ordered_responses(true),
        )
        .call_timeout(NO_TIMEOUT)
        // While the child restarts, calls fail at once as unsent, and this
        // policy sends them again once it is back (within 10 s); a call in
        // flight when it exited is not repeated: it may have run.
        .reconnect(Reconnect::new(restarts).fail_fast(true).on_connect(keep_last))
        .retry(
            RetryPolicy::new(Retry::exponential(
                20,
                Duration::from_millis(50),
                Duration::from_secs(1),
            ))
            .on_busy(false)
            .max_elapsed(Duration::from_secs(10)),
        );
    if let Some(protocol) = args.cancel_protocol() {
        // A client that gives up cancels the call in the child too.
        builder = builder.cancellation(protocol);
    }
    let child = builder
        .connect_with(dialer)
        .await
        .with_context(|| format!("starting {name}"))?;
    let timeout = args
        .call_timeout()
        .map_or(BRIDGED_CALL_TIMEOUT, |t| t + Duration::from_secs(1));
    let methods = {
        let (child, clients, name) = (child.clone(), Arc::clone(&clients), Arc::clone(&name));
        Router::new().fallback(move |method: String, params, ctx| {
            forward(
                child.clone(),
                Arc::clone(&clients),
                Arc::clone(&name),
                method,
                params,
                ctx,
                timeout,
            )
        })
    };
    note!("jrpc: bridge: serving {name}");
    let methods = Methods {
        router: methods,
        example: None,
        proxied: true,
    };
    let served = crate::serve::serve(args, false, methods).await;
    stopping.store(true, Ordering::Relaxed);
    child.close().await;
    served
}

/// Spawns the child on each dial, saying why when it is a restart; none
/// once the bridge is stopping.
struct Respawn {
    child: ChildDialer,
    name: Arc<str>,
    stopping: Arc<AtomicBool>,
    /// The connection to the child before (set by the connect hook).
    last: Arc<Mutex<Option<Peer>>>,
}

impl Dialer for Respawn {
    async fn dial(&self) -> io::Result<Connection> {
        if self.stopping.load(Ordering::Relaxed) {
            return Err(io::Error::other("the bridge is stopping"));
        }
        let before = self.last.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(before) = before {
            let reason = before.closed().await;
            note!("jrpc: bridge: {} exited ({reason}); starting it again", self.name);
        }
        let connection = self.child.dial().await;
        if let Err(e) = &connection {
            note!("jrpc: bridge: cannot start {}: {e}", self.name);
        }
        connection
    }
}

/// A call or notification from a client, sent on to the child; the
/// child's answer (result or error object) goes back untouched.
async fn forward(
    child: Client,
    clients: Arc<Clients>,
    name: Arc<str>,
    method: String,
    params: Option<Box<RawValue>>,
    ctx: RequestContext,
    timeout: Duration,
) -> Result<Box<RawValue>, Error> {
    let from = ctx.peer();
    if ctx.id().is_none() {
        clients.seen(from);
        child
            .notify(&method, params)
            .await
            .map_err(|e| unanswered(&name, e))?;
        return Ok(null());
    }
    let _in_flight = InFlight::begin(&clients, from);
    match child.call_raw(&method, params, timeout).await {
        Ok(result) => Ok(result),
        Err(CallError::Rpc(error)) => Err(error),
        Err(other) => Err(unanswered(&name, other)),
    }
}

/// The error a client gets when the child could not answer its call.
fn unanswered(name: &str, error: CallError) -> Error {
    let message = match &error {
        CallError::Closed(_) => "The server exited before it answered; it is being started again",
        CallError::Timeout(_) => "The server did not answer in time",
        _ => "Internal error",
    };
    Error::new(codes::INTERNAL_ERROR, message).with_data(&format!("jrpc bridge: {name}: {error}"))
}

fn null() -> Box<RawValue> {
    RawValue::from_string("null".to_owned()).expect("null is JSON")
}

/// How long the child's notification for the client of a call may wait
/// for room on that client's connection (so that it goes before the
/// call's reply); a client that does not read holds the others up no
/// longer.
const NOTIFY_WITHIN: Duration = Duration::from_secs(1);

/// The router of the connection to the child: what the child sends of its
/// own goes to the clients. A client gets `answer_within` to answer a
/// request (the child cannot be started again while one is unanswered).
fn back_to_clients(clients: &Arc<Clients>, answer_within: Duration) -> Router {
    let clients = Arc::clone(clients);
    Router::new().fallback(
        move |method: String, params: Option<Box<RawValue>>, ctx: RequestContext| {
            let clients = Arc::clone(&clients);
            async move {
                if ctx.id().is_none() {
                    to_clients(&clients, method, params).await;
                    return Ok(null());
                }
                let to = match clients.cause() {
                    Cause::Reachable(peer) => Some(peer),
                    Cause::Unreachable | Cause::Gone => None,
                    Cause::Unknown => clients.latest(),
                };
                let Some(peer) = to else {
                    return Err(Error::method_not_found().with_data(
                        "jrpc bridge: no client connected over WebSocket, TCP or a Unix socket to answer",
                    ));
                };
                match peer.call_raw(&method, &params, answer_within).await {
                    Ok(result) => Ok(result),
                    Err(CallError::Rpc(error)) => Err(error),
                    Err(other) => Err(Error::new(codes::INTERNAL_ERROR, "Internal error")
                        .with_data(&format!("jrpc bridge: the client did not answer: {other}"))),
                }
            }
        },
    )
}

/// A notification of the child's: to the client of the call that caused
/// it (before that call's reply), or to every client when that is not
/// known; dropped when its caller cannot get it.
async fn to_clients(clients: &Clients, method: String, params: Option<Box<RawValue>>) {
    match clients.cause() {
        Cause::Reachable(peer) => {
            let sent = tokio::time::timeout(NOTIFY_WITHIN, peer.notify(&method, &params)).await;
            if !matches!(sent, Ok(Ok(()))) {
                tracing::debug!(%method, "bridge: a notification not delivered");
            }
        }
        Cause::Unreachable | Cause::Gone => {
            tracing::debug!(%method, "bridge: a notification for a caller that cannot get it dropped");
        }
        Cause::Unknown => {
            for peer in clients.everyone() {
                let (method, params) = (method.clone(), params.clone());
                tokio::spawn(async move { peer.notify(&method, &params).await });
            }
        }
    }
}

/// The clients that have called through the bridge, and their calls in
/// flight: who the child's own messages go to.
#[derive(Default)]
struct Clients(Mutex<Callers>);

#[derive(Default)]
struct Callers {
    /// Connections that can be called back, most recent call last.
    peers: Vec<Caller>,
    /// Calls in flight from HTTP requests, which cannot be called back.
    unreachable_in_flight: usize,
}

struct Caller {
    peer: Peer,
    in_flight: usize,
}

/// Whose call the child is serving, as far as can be known.
enum Cause {
    /// Only this client has a call in flight.
    Reachable(Peer),
    /// Only HTTP requests have calls in flight.
    Unreachable,
    /// Only this client had a call in flight, and it has gone.
    Gone,
    /// Several clients, or none.
    Unknown,
}

impl Clients {
    fn lock(&self) -> std::sync::MutexGuard<'_, Callers> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A client made a call or sent a notification: it is the most recent.
    fn seen(&self, from: Option<Peer>) {
        if let Some(peer) = from {
            self.touch(peer, 0);
        }
    }

    /// Moves `peer` to the end (most recent), adding it if new, with
    /// `calls` more in flight; drops closed connections.
    fn touch(&self, peer: Peer, calls: usize) {
        let mut callers = self.lock();
        callers.peers.retain(|c| !c.peer.is_closed() || c.in_flight > 0);
        let mut entry = match callers.peers.iter().position(|c| c.peer == peer) {
            Some(at) => callers.peers.remove(at),
            None => Caller { peer, in_flight: 0 },
        };
        entry.in_flight += calls;
        callers.peers.push(entry);
    }

    fn cause(&self) -> Cause {
        let callers = self.lock();
        let mut busy = callers.peers.iter().filter(|c| c.in_flight > 0);
        match (busy.next(), busy.next(), callers.unreachable_in_flight > 0) {
            (Some(only), None, false) if only.peer.is_closed() => Cause::Gone,
            (Some(only), None, false) => Cause::Reachable(only.peer.clone()),
            (None, None, true) => Cause::Unreachable,
            _ => Cause::Unknown,
        }
    }

    /// Every client that can be called back.
    fn everyone(&self) -> Vec<Peer> {
        let callers = self.lock();
        callers
            .peers
            .iter()
            .filter(|c| !c.peer.is_closed())
            .map(|c| c.peer.clone())
            .collect()
    }

    /// The client that called most recently, preferring one with a call in
    /// flight.
    fn latest(&self) -> Option<Peer> {
        let callers = self.lock();
        let live = || callers.peers.iter().rev().filter(|c| !c.peer.is_closed());
        live()
            .find(|c| c.in_flight > 0)
            .or_else(|| live().next())
            .map(|c| c.peer.clone())
    }
}

/// A call in flight from one client, counted until it is answered (or
/// abandoned).
struct InFlight {
    clients: Arc<Clients>,
    from: Option<Peer>,
}

impl InFlight {
    fn begin(clients: &Arc<Clients>, from: Option<Peer>) -> Self {
        match &from {
            Some(peer) => clients.touch(peer.clone(), 1),
            None => clients.lock().unreachable_in_flight += 1,
        }
        InFlight {
            clients: Arc::clone(clients),
            from,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut callers = self.clients.lock();
        match &self.from {
            Some(peer) => {
                if let Some(caller) = callers.peers.iter_mut().find(|c| c.peer == *peer) {
                    caller.in_flight = caller.in_flight.saturating_sub(1);
                }
            }
            None => callers.unreachable_in_flight = callers.unreachable_in_flight.saturating_sub(1),
        }
    }
}

/// Where `program` would be found: a path as given, or a name on `PATH`.
fn find_program(program: &str) -> anyhow::Result<std::path::PathBuf> {
    use std::path::{Path, PathBuf};
    let runnable = |path: &Path| {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            path.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        }
        #[cfg(not(unix))]
        path.is_file()
    };
    if program.contains(std::path::MAIN_SEPARATOR) || program.contains('/') {
        let path = PathBuf::from(program);
        return if runnable(&path) {
            Ok(path)
        } else {
            anyhow::bail!("{program}: no such executable file")
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| runnable(candidate))
        .ok_or_else(|| anyhow::anyhow!("{program}: not found on PATH"))
}
