//! [`Client`]: the calling side of a connection, whatever carries it.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::Either;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::task::JoinHandle;

use super::auto_batch::Batcher;
use super::calling::Calling;
use super::channel::Channel;
use crate::caller::{build_stack, BoxFuture, BoxOutgoingService, Caller, Outgoing};
use crate::peer::{Batch, CallError, Peer};

/// How long a closing client waits for its spawned child to exit on its own.
const CHILD_EXIT_GRACE: Duration = Duration::from_secs(2);

/// Closes the connection (and kills a spawned child) when the last clone of
/// a [`Client`] goes.
pub(super) struct Owner {
    pub(super) peer: Peer,
    pub(super) child: Option<JoinHandle<()>>,
    pub(super) stderr: Option<Arc<Mutex<String>>>,
    pub(super) pid: Option<u32>,
    /// Set once a spawned child has exited.
    pub(super) child_exit: Option<crate::transport::child::ExitWatch>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.peer.close();
        if let Some(child) = &self.child {
            // The task owns the child; dropping it kills the child.
            child.abort();
        }
    }
}

/// The calling side of a connection. Cheap to clone; a connection closes
/// (and a spawned child is killed) when the last clone is dropped.
#[derive(Clone)]
pub struct Client {
    pub(super) channel: Channel,
    /// The layers and automatic batching calls go through, when there are
    /// any; the connection is at its bottom.
    pub(super) stack: Option<BoxOutgoingService>,
    pub(super) owner: Option<Arc<Owner>>,
}

impl Caller for Client {
    // A client on one connection sends straight through its peer; the
    // other kinds (HTTP, reconnecting) go through a box, so that their much
    // larger futures are not carried (and copied) by every call.
    fn send(&self, call: Outgoing) -> impl Future<Output = Result<Box<RawValue>, CallError>> + Send {
        match (&self.stack, self.channel.as_peer()) {
            (None, Some(peer)) => Either::Left(Caller::send(peer, call)),
            _ => Either::Right(self.send_boxed(call)),
        }
    }

    fn batch(&self) -> Batch {
        Client::batch(self)
    }

    fn call_timeout(&self) -> Duration {
        self.channel.call_timeout()
    }

    // On one connection, the peer's path encodes the params straight into
    // the request frame.
    fn call_raw(
        &self,
        method: &str,
        params: impl Serialize,
        timeout: Duration,
    ) -> impl Future<Output = Result<Box<RawValue>, CallError>> + Send {
        if self.stack.is_none() {
            if let Some(peer) = self.channel.as_peer() {
                return Either::Left(Caller::call_raw(peer, method, params, timeout));
            }
            #[cfg(feature = "http-client")]
            if let Some(http) = self.channel.as_http() {
                return Either::Right(http.start_call(method, params, timeout));
            }
        }
        let call = crate::caller::encode_params(params).map(|p| Outgoing::call(method, p, timeout));
        Either::Right(match call {
            Ok(call) => self.send_boxed(call),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        })
    }
}

impl Client {
    /// Sends through the layers and whatever this client is, boxed.
    fn send_boxed(&self, call: Outgoing) -> BoxFuture<'_, Result<Box<RawValue>, CallError>> {
        match &self.stack {
            Some(stack) => Box::pin(tower::ServiceExt::oneshot(stack.clone(), call)),
            None => self.channel.send_direct(call),
        }
    }

    /// A client over `inner`, its calls going through `calling`'s layers
    /// and automatic batching.
    pub(super) fn assemble(channel: Channel, owner: Option<Arc<Owner>>, calling: Calling) -> Client {
        let layers = calling.stack_layers();
        let auto_batch = calling.auto_batch;
        let stack = (!layers.is_empty() || auto_batch.is_some()).then(|| {
            let innermost = match auto_batch {
                Some(settings) => {
                    let batcher = Batcher::new(settings, Arc::new(channel.clone()));
                    BoxOutgoingService::new(tower::service_fn(move |call: Outgoing| {
                        let batcher = batcher.clone();
                        async move { batcher.send(call).await }
                    }))
                }
                None => {
                    let channel = channel.clone();
                    BoxOutgoingService::new(tower::service_fn(move |call: Outgoing| {
                        let channel = channel.clone();
                        async move { channel.send_direct(call).await }
                    }))
                }
            };
            build_stack(innermost, &layers)
        });
        Client {
            channel,
            stack,
            owner,
        }
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.channel.fmt(f)
    }
}

impl Client {
    pub(super) fn owning(
        peer: Peer,
        child: Option<JoinHandle<()>>,
        stderr: Option<Arc<Mutex<String>>>,
        calling: Calling,
    ) -> Client {
        let owner = Arc::new(Owner {
            peer: peer.clone(),
            child,
            stderr,
            pid: None,
            child_exit: None,
        });
        Client::assemble(Channel::Peer(peer), Some(owner), calling)
    }

    /// Calls `method` and decodes the result into `R` (the same as
    /// [`Caller::call`], without importing the trait). See [`Peer::call`].
    pub async fn call<R: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> Result<R, CallError> {
        Caller::call(self, method, params).await
    }

    /// Calls `method` with its own timeout.
    pub async fn call_with_timeout<R: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
        timeout: Duration,
    ) -> Result<R, CallError> {
        Caller::call_with_timeout(self, method, params, timeout).await
    }

    /// Calls `method`, returning the raw JSON result.
    pub async fn call_raw(
        &self,
        method: &str,
        params: impl Serialize,
        timeout: Duration,
    ) -> Result<Box<RawValue>, CallError> {
        Caller::call_raw(self, method, params, timeout).await
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: impl Serialize) -> Result<(), CallError> {
        Caller::notify(self, method, params).await
    }

    /// Starts a batch, sent on the connection past the client's layers.
    /// See [`Batch`].
    pub fn batch(&self) -> Batch {
        self.channel.batch()
    }

    /// The underlying peer (the current one for a reconnecting WebSocket),
    /// for connection-oriented transports; `None` over plain HTTP. Calls
    /// made on it go past the client's layers.
    pub fn peer(&self) -> Option<Peer> {
        self.channel.peer()
    }

    /// What a spawned child wrote to stderr (the last 64 KiB), when it was
    /// spawned with [`StderrMode::Capture`](crate::client::StderrMode::Capture).
    pub fn captured_stderr(&self) -> Option<String> {
        let buffer = self.owner.as_ref()?.stderr.as_ref()?;
        Some(buffer.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// The process id of a spawned child.
    pub fn child_id(&self) -> Option<u32> {
        self.owner.as_ref()?.pid
    }

    /// Closes the connection gracefully and waits until it is closed (see
    /// [`Peer::close`]): what was sent is flushed first, a WebSocket goes
    /// through its closing handshake, and a spawned child, its stdin
    /// closed, gets up to two seconds to read what it was sent and exit
    /// before it is killed. Nothing to close over plain HTTP.
    pub async fn close(self) -> Arc<str> {
        let reason = self.channel.close().await;
        if let Some(mut exit) = self.owner.as_ref().and_then(|o| o.child_exit.clone()) {
            let exited = exit.wait_for(|status| status.is_some());
            let _ = tokio::time::timeout(CHILD_EXIT_GRACE, exited).await;
        }
        reason
    }
}
