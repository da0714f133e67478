//! Reconnecting: a client over TCP, a Unix socket, a WebSocket or any
//! [`Dialer`](crate::transport::Dialer) that dials again, with backoff, when
//! its connection drops. A background task watches the connection and
//! reconnects as soon as it drops (so server-to-client traffic resumes
//! without waiting for a call); calls made meanwhile wait for the new
//! connection within their own timeout, or fail at once, by setting; a hook
//! runs on every new connection before any call uses it, to subscribe or
//! initialize again.

use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{watch, Notify};

use super::retry::Retry;
use crate::caller::{BoxFuture, CallError};
use crate::peer::{Peer, PeerBuilder};
use crate::transport::{Connection, DynDialer};

/// What runs on each new connection before calls use it.
pub(crate) type ConnectHook = Arc<dyn Fn(Peer) -> BoxFuture<'static, Result<(), CallError>> + Send + Sync>;

/// The longest one attempt (dialing, handshakes, the hook) may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// How a client reconnects: the backoff [`Retry`] schedule of each
/// reconnection, whether calls wait for it, and a hook for each new
/// connection. A plain [`Retry`] is one of these, with calls waiting and no
/// hook.
///
/// ```
/// use std::time::Duration;
/// use jrpc::client::{Reconnect, Retry};
/// use jrpc::Caller;
///
/// let reconnect = Reconnect::new(Retry::exponential(10, Duration::from_millis(100), Duration::from_secs(5)))
///     .fail_fast(false)
///     .on_connect(|peer| async move {
///         // Each connection starts with the subscriptions the client needs.
///         peer.notify("subscribe", ["prices"]).await
///     });
/// ```
#[derive(Clone)]
pub struct Reconnect {
    schedule: Retry,
    fail_fast: bool,
    hook: Option<ConnectHook>,
}

impl std::fmt::Debug for Reconnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconnect")
            .field("schedule", &self.schedule)
            .field("fail_fast", &self.fail_fast)
            .field("hook", &self.hook.is_some())
            .finish()
    }
}

impl From<Retry> for Reconnect {
    fn from(schedule: Retry) -> Self {
        Reconnect::new(schedule)
    }
}

impl Reconnect {
    /// Reconnects on `schedule`; calls wait for the new connection.
    pub fn new(schedule: Retry) -> Self {
        Reconnect {
            schedule,
            fail_fast: false,
            hook: None,
        }
    }

    /// Whether calls made while the client reconnects fail at once (with
    /// [`CallError::Closed`], as never sent, so a [retry
    /// policy](super::RetryPolicy) may try them again) instead of waiting
    /// for the new connection within their timeout (the default). The
    /// reconnection goes on in the background either way.
    pub fn fail_fast(mut self, on: bool) -> Self {
        self.fail_fast = on;
        self
    }

    /// Runs `hook` on every new connection (the first one too) before any
    /// call uses it: to subscribe or initialize again. A hook that fails
    /// fails the connection, which counts as a failed attempt. The hook
    /// gets the new connection's [`Peer`]: call through it, not through the
    /// client, which is waiting for the hook to finish.
    pub fn on_connect<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(Peer) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), CallError>> + Send + 'static,
    {
        self.hook = Some(Arc::new(move |peer| Box::pin(hook(peer))));
        self
    }

    /// The backoff schedule of each reconnection.
    pub fn schedule(&self) -> Retry {
        self.schedule
    }

    /// Whether calls fail at once while reconnecting.
    pub(crate) fn fails_fast(&self) -> bool {
        self.fail_fast
    }
}

/// What a client needs to make a connection: the dialer, the settings of
/// each new peer, and how to reconnect. Holds no connection itself, so a
/// background task may keep it while the client goes.
pub(crate) struct Connector {
    dialer: Box<dyn DynDialer>,
    /// The settings each new connection's peer starts with (behind a lock
    /// only because a builder is not `Sync`).
    template: Mutex<PeerBuilder>,
    pub(crate) settings: Reconnect,
}

impl Connector {
    pub(crate) fn new(dialer: Box<dyn DynDialer>, template: PeerBuilder, settings: Reconnect) -> Arc<Self> {
        Arc::new(Connector {
            dialer,
            template: Mutex::new(template),
            settings,
        })
    }

    /// Starts a peer on `connection` and runs the hook on it; a peer whose
    /// hook failed, or that is dropped before the hook is done, is closed.
    pub(crate) async fn open(&self, connection: Connection) -> Result<Peer, CallError> {
        let builder = self
            .template
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .settings_clone();
        let peer = builder.connect(connection);
        let Some(hook) = &self.settings.hook else {
            return Ok(peer);
        };
        /// Closes the peer unless the hook finished well.
        struct Unfinished(Option<Peer>);
        impl Drop for Unfinished {
            fn drop(&mut self) {
                if let Some(peer) = self.0.take() {
                    peer.close();
                }
            }
        }
        let mut guard = Unfinished(Some(peer.clone()));
        hook(peer.clone()).await?;
        guard.0 = None;
        Ok(peer)
    }

    /// One attempt: dial and open, within [`ATTEMPT_TIMEOUT`].
    pub(crate) async fn attempt(&self) -> Result<Peer, CallError> {
        let opening = async {
            let connection = self
                .dialer
                .dial_boxed()
                .await
                .map_err(|e| CallError::Io(Arc::new(e)))?;
            self.open(connection).await
        };
        tokio::time::timeout(ATTEMPT_TIMEOUT, opening)
            .await
            .unwrap_or(Err(CallError::Timeout(ATTEMPT_TIMEOUT)))
    }

    /// Attempts on the schedule, while `wanted` says the connection is
    /// still wanted.
    pub(crate) async fn connect(&self, wanted: &(dyn Fn() -> bool + Sync)) -> Result<Peer, CallError> {
        let attempt = || async {
            if !wanted() {
                return Err(CallError::Closed(GONE.into()));
            }
            self.attempt().await
        };
        self.settings.schedule.run("connecting", attempt, is_gone).await
    }
}

const GONE: &str = "the client is gone";

fn is_gone(error: &CallError) -> bool {
    matches!(error, CallError::Closed(why) if &**why == GONE)
}

/// Where a reconnecting client's connection stands.
#[derive(Clone)]
enum Link {
    /// Connected (the peer may have just closed; the supervisor notices).
    Up(Peer),
    /// A round of attempts is running.
    Reconnecting,
    /// The last round gave up; the next call starts another.
    GaveUp(CallError),
}

/// A client's one connection, dialed again in the background when it
/// drops.
pub(crate) struct Reconnecting {
    link: watch::Sender<Link>,
    /// The last connection made, live or not.
    last: Mutex<Peer>,
    /// Asks the supervisor for another round after one gave up.
    kick: Arc<Notify>,
    fail_fast: bool,
}

impl Reconnecting {
    /// A reconnecting client whose first connection is `first`.
    pub(crate) fn start(connector: Arc<Connector>, first: Peer) -> Arc<Self> {
        let (link, _) = watch::channel(Link::Up(first.clone()));
        let this = Arc::new(Reconnecting {
            link,
            last: Mutex::new(first),
            kick: Arc::new(Notify::new()),
            fail_fast: connector.settings.fails_fast(),
        });
        tokio::spawn(supervise(
            Arc::downgrade(&this),
            connector,
            Arc::clone(&this.kick),
        ));
        this
    }

    /// The last connection made, live or not.
    pub(crate) fn current(&self) -> Peer {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn connected(&self, peer: Peer) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = peer.clone();
        self.link.send_replace(Link::Up(peer));
    }

    /// The live connection: at once, or once the supervisor has a new one
    /// (the caller bounds the wait), or an error at once when failing fast
    /// or when a round this call asked for gave up.
    pub(crate) async fn peer(&self) -> Result<Peer, CallError> {
        let mut link = self.link.subscribe();
        let mut kicked = false;
        loop {
            let now = link.borrow_and_update().clone();
            match now {
                Link::Up(peer) if !peer.is_refusing() => return Ok(peer),
                Link::GaveUp(error) if kicked || self.fail_fast => {
                    self.kick.notify_one();
                    return Err(error);
                }
                Link::GaveUp(_) => {
                    self.kick.notify_one();
                    kicked = true;
                }
                _ if self.fail_fast => return Err(CallError::Closed("reconnecting".into())),
                _ => {}
            }
            if link.changed().await.is_err() {
                return Err(CallError::Closed(GONE.into()));
            }
        }
    }
}

impl Drop for Reconnecting {
    fn drop(&mut self) {
        self.current().close();
    }
}

/// Watches a reconnecting client's connection and, when it drops, makes a
/// new one; runs until the client is gone.
async fn supervise(client: Weak<Reconnecting>, connector: Arc<Connector>, kick: Arc<Notify>) {
    let wanted = || client.strong_count() > 0;
    loop {
        // Wait for the live connection to close.
        let Some(peer) = client.upgrade().map(|c| c.current()) else {
            return;
        };
        peer.closed().await;
        drop(peer);
        loop {
            let Some(live) = client.upgrade() else {
                return;
            };
            live.link.send_replace(Link::Reconnecting);
            let mut gone = live.link.subscribe();
            drop(live);
            match connector.connect(&wanted).await {
                Ok(peer) => {
                    match client.upgrade() {
                        Some(live) => {
                            live.connected(peer);
                            tracing::debug!("reconnected");
                        }
                        None => peer.close(),
                    }
                    break;
                }
                Err(e) if is_gone(&e) => return,
                Err(e) => {
                    let Some(live) = client.upgrade() else {
                        return;
                    };
                    live.link.send_replace(Link::GaveUp(e));
                    drop(live);
                    // Another round when a call asks for one; none once
                    // the client is gone (its end of the link drops).
                    let closed = async { while gone.changed().await.is_ok() {} };
                    tokio::select! {
                        () = kick.notified() => {}
                        () = closed => return,
                    }
                }
            }
        }
    }
}
