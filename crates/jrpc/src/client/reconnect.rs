//! Reconnecting: a client over TCP, a Unix socket, a WebSocket or any
//! [`Dialer`](crate::transport::Dialer) that dials again, with backoff, when
//! its connection drops. Calls made meanwhile wait for the new connection
//! (within their own timeout) or fail at once, by setting; a hook runs on
//! every new connection before any call uses it, to subscribe or initialize
//! again.

use std::future::Future;
use std::sync::{Arc, Mutex};

use super::Retry;
use crate::caller::{BoxFuture, CallError};
use crate::peer::{Peer, PeerBuilder};
use crate::transport::{Connection, DynDialer};

/// What runs on each new connection before calls use it.
pub(crate) type ConnectHook = Arc<dyn Fn(Peer) -> BoxFuture<'static, Result<(), CallError>> + Send + Sync>;

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
    /// fails the connection, which counts as a failed attempt.
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

    pub(crate) fn hook(&self) -> Option<&ConnectHook> {
        self.hook.as_ref()
    }
}

/// Starts a peer on `connection` and runs the hook on it; a peer whose hook
/// failed is closed.
pub(crate) async fn open(
    connection: Connection,
    template: &Mutex<PeerBuilder>,
    hook: Option<&ConnectHook>,
) -> Result<Peer, CallError> {
    let builder = template
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .settings_clone();
    let peer = builder.connect(connection);
    if let Some(hook) = hook {
        if let Err(e) = hook(peer.clone()).await {
            peer.close();
            return Err(e);
        }
    }
    Ok(peer)
}

/// Dials and opens a connection, trying `schedule.attempts` more times with
/// backoff while `wanted` says the connection is still wanted.
async fn reopen(
    dialer: &dyn DynDialer,
    template: &Mutex<PeerBuilder>,
    hook: Option<&ConnectHook>,
    schedule: Retry,
    wanted: &(dyn Fn() -> bool + Sync),
) -> Result<Peer, CallError> {
    const GONE: &str = "the client is gone";
    let attempt = || async {
        if !wanted() {
            return Err(CallError::Closed(GONE.into()));
        }
        match dialer.dial_boxed().await {
            Ok(connection) => open(connection, template, hook).await,
            Err(e) => Err(CallError::Io(Arc::new(e))),
        }
    };
    let gone = |e: &CallError| matches!(e, CallError::Closed(why) if &**why == GONE);
    schedule.run("reconnecting", attempt, gone).await
}

/// A client's one connection, dialed again when it drops.
pub(crate) struct Reconnecting {
    dialer: Box<dyn DynDialer>,
    /// The settings each new connection's peer starts with (behind a lock
    /// only because a builder is not `Sync`).
    template: Mutex<PeerBuilder>,
    settings: Reconnect,
    current: Mutex<Peer>,
    /// One reconnection at a time.
    reconnecting: tokio::sync::Mutex<()>,
}

impl Reconnecting {
    pub(crate) fn new(
        dialer: Box<dyn DynDialer>,
        template: PeerBuilder,
        first: Peer,
        settings: Reconnect,
    ) -> Arc<Self> {
        Arc::new(Reconnecting {
            dialer,
            template: Mutex::new(template),
            settings,
            current: Mutex::new(first),
            reconnecting: tokio::sync::Mutex::new(()),
        })
    }

    pub(crate) fn current(&self) -> Peer {
        self.current.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The live connection, reconnecting (with backoff) if it dropped; or,
    /// failing fast, an error at once while a reconnection runs.
    pub(crate) async fn peer(self: &Arc<Self>) -> Result<Peer, CallError> {
        let peer = self.current();
        if !peer.is_refusing() {
            return Ok(peer);
        }
        if self.settings.fail_fast {
            let this = Arc::clone(self);
            tokio::spawn(async move {
                // Only while some client still holds it (this task holds
                // one reference itself).
                let wanted = || Arc::strong_count(&this) > 1;
                let _ = this.reconnect(&wanted).await;
            });
            return Err(CallError::Closed("reconnecting".into()));
        }
        self.reconnect(&|| true).await
    }

    async fn reconnect(&self, wanted: &(dyn Fn() -> bool + Sync)) -> Result<Peer, CallError> {
        let _one = self.reconnecting.lock().await;
        let peer = self.current();
        if !peer.is_refusing() {
            return Ok(peer);
        }
        let hook = self.settings.hook();
        let peer = reopen(
            &*self.dialer,
            &self.template,
            hook,
            self.settings.schedule,
            wanted,
        )
        .await?;
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = peer.clone();
        tracing::debug!("reconnected");
        Ok(peer)
    }
}

impl Drop for Reconnecting {
    fn drop(&mut self) {
        self.current().close();
    }
}
