//! Batches: several calls and notifications sent as one frame, each call's
//! result typed on its own. Works over anything that can carry a batch (a
//! [`Peer`](crate::peer::Peer), HTTP), through [`BatchTarget`].

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::oneshot;

use super::{decode, CallError, Delivery, Outcome};
use crate::message::{encode_call, Id};
use crate::transport::{OutFrame, OutKind};

/// A boxed future, for the object-safe [`BatchTarget`].
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A registered batch call: its id, where its outcome arrives, and the
/// sender when the batch itself must deliver it.
pub(crate) type Registered = (u64, oneshot::Receiver<Outcome>, Option<oneshot::Sender<Outcome>>);

/// Where a batch goes: a connection that matches responses itself (a peer),
/// or a request/response carrier whose reply frame the batch hands out.
pub(crate) trait BatchTarget: Send + Sync + 'static {
    /// A new call id and where its outcome will arrive; with the sender
    /// when the batch itself must deliver it (request/response carriers).
    fn register(&self) -> Result<Registered, CallError>;

    /// Forgets a call that will not be sent or awaited.
    fn forget(&self, id: u64);

    /// How long a call waits for its result.
    fn call_timeout(&self) -> Duration;

    /// Sends the batch frame; `waiters` are the senders `register` handed
    /// out, to be given their outcomes. With `delivery`, says whether the
    /// frame went out, and leaves retrying to whoever asked.
    fn send<'a>(
        &'a self,
        frame: OutFrame,
        waiters: Vec<(u64, oneshot::Sender<Outcome>)>,
        delivery: Option<&'a Delivery>,
    ) -> BoxFuture<'a, Result<(), CallError>>;

    /// Gives up on a sent call whose result is no longer awaited (a peer
    /// tells the other side, where cancellation is configured).
    fn cancel(&self, id: u64, reason: &str);
}

/// Calls and notifications to send as one batch frame: see
/// [`Caller::batch`](super::Caller::batch).
///
/// ```
/// # async fn demo(peer: jrpc::peer::Peer) -> Result<(), jrpc::CallError> {
/// let mut batch = peer.batch();
/// let sum = batch.call::<i64>("sum", [1, 2, 3]);
/// let data = batch.call::<(String, u32)>("get_data", ());
/// batch.notify("update", [1]);
/// batch.send().await?;
/// assert_eq!(sum.await?, 6);
/// assert_eq!(data.await?.1, 5);
/// # Ok(()) }
/// ```
pub struct Batch {
    target: Arc<dyn BatchTarget>,
    /// Outcomes this batch hands out itself, once its reply comes.
    waiters: Vec<(u64, oneshot::Sender<Outcome>)>,
    frame: Vec<u8>,
    ids: Vec<u64>,
    sent: bool,
}

impl Batch {
    pub(crate) fn new(target: Arc<dyn BatchTarget>) -> Self {
        Batch {
            target,
            waiters: Vec::new(),
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
        let (id, rx, tx) = self.target.register()?;
        if let Some(tx) = tx {
            self.waiters.push((id, tx));
        }
        Ok((id, rx))
    }

    fn forget(&mut self, id: u64) {
        self.waiters.retain(|(w, _)| *w != id);
        self.target.forget(id);
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
        BatchCall {
            target: Arc::clone(&self.target),
            timeout: self.target.call_timeout(),
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
    pub async fn send(self) -> Result<(), CallError> {
        self.send_tracked(None).await
    }

    /// Sends the batch, telling `delivery` whether the frame went out.
    pub(crate) async fn send_tracked(mut self, delivery: Option<&Delivery>) -> Result<(), CallError> {
        self.sent = true;
        if self.is_empty() {
            if let Some(delivery) = delivery {
                delivery.mark_unsent();
            }
            return Ok(());
        }
        let mut frame = std::mem::take(&mut self.frame);
        frame.push(b']');
        let waiters = std::mem::take(&mut self.waiters);
        let kind = OutKind::Calls(self.ids.iter().map(|&id| Id::from(id)).collect());
        let result = self
            .target
            .send(OutFrame::new(frame, kind), waiters, delivery)
            .await;
        if result.is_err() {
            // Nothing went out: the calls are forgotten on drop.
            self.sent = false;
        }
        result
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
    /// Where to forget (and cancel) the call when its result is not awaited.
    target: Arc<dyn BatchTarget>,
    timeout: Duration,
    registered: Result<(u64, oneshot::Receiver<Outcome>), CallError>,
    _result: PhantomData<fn() -> R>,
}

impl<R> BatchCall<R> {
    /// Whether the call made it into the batch (it could be registered and
    /// its params encoded).
    pub(crate) fn is_registered(&self) -> bool {
        self.registered.is_ok()
    }

    /// Waits at most `timeout` for the result (instead of the caller's
    /// default call timeout).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

impl<R: DeserializeOwned + Send + 'static> IntoFuture for BatchCall<R> {
    type Output = Result<R, CallError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<R, CallError>> + Send>>;

    fn into_future(mut self) -> Self::IntoFuture {
        let registered = std::mem::replace(&mut self.registered, Err(CallError::Closed("taken".into())));
        let (target, timeout) = (Arc::clone(&self.target), self.timeout);
        Box::pin(async move {
            let (id, rx) = registered?;
            // Cancels the call if this future is dropped before its end.
            struct Guard(Option<(Arc<dyn BatchTarget>, u64)>);
            impl Drop for Guard {
                fn drop(&mut self) {
                    if let Some((target, id)) = self.0.take() {
                        target.cancel(id, "cancelled by the caller");
                    }
                }
            }
            let mut guard = Guard(Some((target, id)));
            let outcome = tokio::time::timeout(timeout, rx).await;
            if let Some((target, id)) = guard.0.take() {
                if outcome.is_err() {
                    target.cancel(id, "timeout");
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
        if let Ok((id, _)) = &self.registered {
            self.target.forget(*id);
        }
    }
}
