//! Batches: several calls and notifications sent as one frame, each call's
//! result typed on its own. Works over a [`Peer`] and over HTTP.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
#[cfg(feature = "http")]
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::oneshot;

use super::{decode, CallError, CallGuard, Peer};
use crate::caller::Outcome;
use crate::message::{encode_call, Id};

/// Where a batch goes.
enum Target {
    Peer(Peer),
    /// Request/response transports: the batch's own calls wait here for
    /// the reply frame.
    #[cfg(feature = "http")]
    Http {
        transport: Arc<crate::client::http::HttpTransport>,
        waiters: Vec<(u64, oneshot::Sender<Outcome>)>,
    },
}

/// Calls and notifications to send as one batch frame. See [`Peer::batch`].
pub struct Batch {
    target: Target,
    frame: Vec<u8>,
    ids: Vec<u64>,
    sent: bool,
}

impl Batch {
    pub(crate) fn for_peer(peer: Peer) -> Self {
        Batch {
            target: Target::Peer(peer),
            frame: vec![b'['],
            ids: Vec::new(),
            sent: false,
        }
    }

    #[cfg(feature = "http")]
    pub(crate) fn for_http(transport: Arc<crate::client::http::HttpTransport>) -> Self {
        Batch {
            target: Target::Http {
                transport,
                waiters: Vec::new(),
            },
            frame: vec![b'['],
            ids: Vec::new(),
            sent: false,
        }
    }

    fn push(&mut self, entry: &[u8]) {
        if self.frame.len() > 1 {
            self.frame.push(b',');
        }
        self.frame.extend_from_slice(entry);
    }

    /// A new call id and where its outcome will arrive.
    fn register(&mut self) -> Result<(u64, oneshot::Receiver<Outcome>), CallError> {
        match &mut self.target {
            Target::Peer(peer) => peer.shared.register(),
            #[cfg(feature = "http")]
            Target::Http { transport, waiters } => {
                let id = transport.next_id();
                let (tx, rx) = oneshot::channel();
                waiters.push((id, tx));
                Ok((id, rx))
            }
        }
    }

    fn forget(&mut self, id: u64) {
        match &mut self.target {
            Target::Peer(peer) => {
                peer.shared.forget(id);
            }
            #[cfg(feature = "http")]
            Target::Http { waiters, .. } => waiters.retain(|(w, _)| *w != id),
        }
    }

    /// Adds a call; its result comes through the returned [`BatchCall`]
    /// once the batch is sent.
    pub fn call<R: DeserializeOwned>(&mut self, method: &str, params: impl Serialize) -> BatchCall<R> {
        let registered =
            self.register().and_then(
                |(id, rx)| match encode_call(method, &params, Some(&Id::from(id))) {
                    Ok(entry) => {
                        self.push(&entry);
                        self.ids.push(id);
                        Ok((id, rx))
                    }
                    Err(e) => {
                        self.forget(id);
                        Err(CallError::Encode(e.into()))
                    }
                },
            );
        let (peer, timeout) = match &self.target {
            Target::Peer(peer) => (Some(peer.clone()), peer.shared.call_timeout),
            #[cfg(feature = "http")]
            Target::Http { transport, .. } => (None, transport.timeout()),
        };
        BatchCall {
            peer,
            timeout,
            registered,
            _result: PhantomData,
        }
    }

    /// Adds a notification. Params that do not encode are left out (and
    /// logged).
    pub fn notify(&mut self, method: &str, params: impl Serialize) -> &mut Self {
        match encode_call(method, &params, None) {
            Ok(entry) => self.push(&entry),
            Err(e) => tracing::warn!(method, error = %e, "batch notification dropped: params do not encode"),
        }
        self
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.frame.len() == 1
    }

    /// Sends the batch. The calls' results then arrive through their
    /// [`BatchCall`]s. An empty batch sends nothing.
    pub async fn send(mut self) -> Result<(), CallError> {
        self.sent = true;
        if self.is_empty() {
            return Ok(());
        }
        let mut frame = std::mem::take(&mut self.frame);
        frame.push(b']');
        match &mut self.target {
            Target::Peer(peer) => {
                let result = peer.send(frame.into()).await;
                if result.is_err() {
                    self.sent = false;
                }
                result
            }
            #[cfg(feature = "http")]
            Target::Http { transport, waiters } => {
                let waiters = std::mem::take(waiters);
                Arc::clone(transport).send_batch(frame.into(), waiters).await
            }
        }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        if !self.sent {
            for id in std::mem::take(&mut self.ids) {
                self.forget(id);
            }
        }
    }
}

/// The result of one call in a [`Batch`]: await it after the batch is sent.
pub struct BatchCall<R> {
    /// The peer to forget (and cancel) the call on, for peer batches.
    peer: Option<Peer>,
    timeout: Duration,
    registered: Result<(u64, oneshot::Receiver<Outcome>), CallError>,
    _result: PhantomData<fn() -> R>,
}

impl<R: DeserializeOwned + Send + 'static> IntoFuture for BatchCall<R> {
    type Output = Result<R, CallError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<R, CallError>> + Send>>;

    fn into_future(mut self) -> Self::IntoFuture {
        let registered = std::mem::replace(&mut self.registered, Err(CallError::Closed("taken".into())));
        let (peer, timeout) = (self.peer.take(), self.timeout);
        Box::pin(async move {
            let (id, rx) = registered?;
            let mut guard = peer.as_ref().map(|peer| CallGuard {
                shared: &peer.shared,
                id,
                armed: true,
                sent: true,
            });
            let outcome = tokio::time::timeout(timeout, rx).await;
            if let Some(guard) = &mut guard {
                if outcome.is_ok() {
                    guard.armed = false;
                } else {
                    let _ = guard.cancel("timeout");
                }
            }
            match outcome {
                Ok(Ok(outcome)) => decode(&outcome?),
                Ok(Err(_)) => Err(CallError::Closed("the batch was not sent".into())),
                Err(_) => Err(CallError::Timeout(timeout)),
            }
        })
    }
}

impl<R> Drop for BatchCall<R> {
    fn drop(&mut self) {
        // Dropped without being awaited (awaiting takes the entry): forget it.
        if let (Some(peer), Ok((id, _))) = (&self.peer, &self.registered) {
            peer.shared.forget(*id);
        }
    }
}
