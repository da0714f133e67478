//! One client's session: where it is in the lifecycle, what it declared,
//! and the log level it asked for. Each connection (stdio, or an HTTP
//! session) has its own, kept in the connection's extensions.

use std::sync::{Arc, Mutex, MutexGuard};

use jrpc::{Error, RequestContext};

use crate::types::{ClientCapabilities, Implementation, LoggingLevel};

/// Where a session is in the lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Nothing but `initialize` and `ping` yet.
    New,
    /// `initialize` answered; the client may go on (it should send
    /// `notifications/initialized` first, and requests wait for it when it
    /// comes first on the wire).
    Initialized,
}

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) phase: Phase,
    pub(crate) protocol_version: &'static str,
    pub(crate) client_info: Option<Implementation>,
    pub(crate) client_capabilities: ClientCapabilities,
    /// The least severe level sent as `notifications/message`.
    pub(crate) log_level: LoggingLevel,
    /// Resources the client subscribed to.
    pub(crate) subscribed: std::collections::BTreeSet<String>,
}

/// A client's session with the server.
#[derive(Debug)]
pub(crate) struct Session {
    state: Mutex<State>,
    /// Whether `notifications/initialized` has come: the server sends the
    /// client no requests before it.
    ready: tokio::sync::watch::Sender<bool>,
}

impl Session {
    pub(crate) fn new(log_level: LoggingLevel) -> Arc<Self> {
        Arc::new(Session {
            state: Mutex::new(State {
                phase: Phase::New,
                protocol_version: crate::types::LATEST_PROTOCOL_VERSION,
                client_info: None,
                client_capabilities: ClientCapabilities::default(),
                log_level,
                subscribed: Default::default(),
            }),
            ready: tokio::sync::watch::Sender::new(false),
        })
    }

    /// The client has said it is ready (`notifications/initialized`).
    pub(crate) fn set_ready(&self) {
        self.ready.send_replace(true);
    }

    /// Waits until the client is ready, at most `limit`; whether it is.
    pub(crate) async fn wait_ready(&self, limit: std::time::Duration) -> bool {
        let mut ready = self.ready.subscribe();
        let waited = tokio::time::timeout(limit, ready.wait_for(|r| *r)).await;
        matches!(waited, Ok(Ok(_)))
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half-written
        // (every write is one assignment), so a poisoned lock is still good.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The session of the connection a request came on.
    pub(crate) fn of(ctx: &RequestContext) -> Result<Arc<Session>, Error> {
        ctx.get::<Arc<Session>>()
            .cloned()
            .ok_or_else(|| Error::internal_error().with_data("no MCP session on this connection"))
    }

    /// The session, once `initialize` has been answered: every request but
    /// `initialize` and `ping` needs it.
    pub(crate) fn ready(ctx: &RequestContext) -> Result<Arc<Session>, Error> {
        let session = Self::of(ctx)?;
        if session.state().phase == Phase::New {
            return Err(
                Error::invalid_request().with_data("the session is not initialized: send initialize first")
            );
        }
        Ok(session)
    }
}
