//! Calling the other side: typed calls, notifications and batches through
//! the outgoing middleware (when any) to the wire, each call registered in
//! the connection's table until its answer, timeout or cancellation.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::oneshot;

use super::state::PeerState;
use super::{Batch, CallError, Caller, Peer};
use crate::caller::{encode_params, null, BatchTarget, BoxFuture, Delivery, Outcome, Outgoing};
use crate::dispatch::outbox;
use crate::message::{encode_call, Id};
use crate::transport::{OutFrame, OutKind};

impl Peer {
    /// Calls `method` and decodes its result into `R`, within the default
    /// timeout. `params` must serialize to a JSON array or object (a tuple, a
    /// slice, a struct, a map), or to `null` (`()`) for none.
    ///
    /// Dropping the returned future cancels the call: it is forgotten
    /// locally and, when a [`CancelProtocol`](super::CancelProtocol) is set, a cancel notification
    /// is sent. (The same as [`Caller::call`], without importing the trait.)
    pub async fn call<R: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> Result<R, CallError> {
        Caller::call(self, method, params).await
    }

    /// As [`call`](Self::call), with its own timeout.
    pub async fn call_with_timeout<R: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
        timeout: Duration,
    ) -> Result<R, CallError> {
        Caller::call_with_timeout(self, method, params, timeout).await
    }

    /// As [`call`](Self::call), returning the raw JSON result.
    pub async fn call_raw(
        &self,
        method: &str,
        params: impl Serialize,
        timeout: Duration,
    ) -> Result<Box<RawValue>, CallError> {
        Caller::call_raw(self, method, params, timeout).await
    }

    /// Sends a notification: no response will come.
    pub async fn notify(&self, method: &str, params: impl Serialize) -> Result<(), CallError> {
        Caller::notify(self, method, params).await
    }

    /// Starts a batch: several calls and notifications sent as one frame
    /// (see [`Batch`]).
    pub fn batch(&self) -> Batch {
        Batch::new(Arc::new(self.clone()))
    }

    /// The innermost outgoing service: sends the call on this connection.
    pub(super) async fn send_outgoing(&self, call: Outgoing) -> Result<Box<RawValue>, CallError> {
        let delivery = Delivery::of(&call);
        let (method, params, notification, timeout) = call.into_parts();
        if notification {
            let frame = encode_call(&method, &params, None).map_err(|e| CallError::Encode(e.into()))?;
            self.send_notification(frame, timeout).await.map(|()| null())
        } else {
            let (guard, rx, frame) = self.start_call(&method, &params).inspect_err(|_| {
                // Refused before anything was written (the connection is
                // closing, say).
                if let Some(delivery) = &delivery {
                    delivery.mark_unsent();
                }
            })?;
            self.exchange(guard, rx, frame, timeout, delivery.as_ref()).await
        }
    }

    /// Registers a call and encodes its request; the guard forgets the call
    /// if it ends before its answer.
    fn start_call(
        &self,
        method: &str,
        params: &impl Serialize,
    ) -> Result<(CallGuard<'_>, oneshot::Receiver<Outcome>, Vec<u8>), CallError> {
        let (id, rx) = self.shared.register()?;
        let guard = CallGuard {
            shared: &self.shared,
            id,
            armed: true,
            sent: false,
        };
        // On failure the guard, dropped, forgets the call.
        let frame =
            encode_call(method, params, Some(&Id::from(id))).map_err(|e| CallError::Encode(e.into()))?;
        Ok((guard, rx, frame))
    }

    /// Sends a registered call's request and waits for its outcome.
    async fn exchange(
        &self,
        mut guard: CallGuard<'_>,
        mut rx: oneshot::Receiver<Outcome>,
        frame: Vec<u8>,
        timeout: Duration,
        delivery: Option<&Delivery>,
    ) -> Result<Box<RawValue>, CallError> {
        // One deadline for queueing the request and for its answer.
        let exchange = async {
            let kind = OutKind::Request(Id::from(guard.id));
            self.send(OutFrame::new(frame, kind)).await?;
            guard.sent = true;
            (&mut rx).await.unwrap_or_else(|_| Err(self.closed_error()))
        };
        let outcome = tokio::time::timeout(timeout, exchange).await;
        if let Some(delivery) = delivery {
            // Queued for writing is as good as sent: it may have gone out.
            if guard.sent {
                delivery.mark_sent();
            } else {
                delivery.mark_unsent();
            }
        }
        match outcome {
            Ok(outcome) => {
                guard.armed = false;
                outcome
            }
            Err(_) => {
                if !guard.cancel("timeout") {
                    // The answer came just as time ran out: take it.
                    if let Ok(outcome) = rx.try_recv() {
                        return outcome;
                    }
                }
                Err(CallError::Timeout(timeout))
            }
        }
    }

    async fn send_notification(&self, frame: Vec<u8>, timeout: Duration) -> Result<(), CallError> {
        tokio::time::timeout(timeout, self.send(OutFrame::new(frame, OutKind::Notification)))
            .await
            .unwrap_or(Err(CallError::Timeout(timeout)))
    }
}

impl Caller for Peer {
    fn send(&self, call: Outgoing) -> impl Future<Output = Result<Box<RawValue>, CallError>> + Send {
        let stack = self.shared.outgoing.clone();
        async move {
            match stack {
                Some(stack) => tower::ServiceExt::oneshot(stack, call).await,
                None => self.send_outgoing(call).await,
            }
        }
    }

    fn batch(&self) -> Batch {
        Peer::batch(self)
    }

    fn call_timeout(&self) -> Duration {
        self.shared.call_timeout
    }

    // Without outgoing layers, a call is encoded straight into its frame
    // (no copy of the params on the way).
    fn call_raw(
        &self,
        method: &str,
        params: impl Serialize,
        timeout: Duration,
    ) -> impl Future<Output = Result<Box<RawValue>, CallError>> + Send {
        let prepared = match self.shared.outgoing {
            None => Ok(self.start_call(method, &params)),
            Some(_) => Err(encode_params(params).map(|params| Outgoing::call(method, params, timeout))),
        };
        async move {
            match prepared {
                Ok(started) => {
                    let (guard, rx, frame) = started?;
                    self.exchange(guard, rx, frame, timeout, None).await
                }
                Err(call) => Caller::send(self, call?).await,
            }
        }
    }

    fn notify(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> impl Future<Output = Result<(), CallError>> + Send {
        let timeout = self.shared.call_timeout;
        let prepared = match self.shared.outgoing {
            None => Ok(encode_call(method, &params, None).map_err(|e| CallError::Encode(e.into()))),
            Some(_) => {
                Err(encode_params(params).map(|params| Outgoing::notification(method, params, timeout)))
            }
        };
        async move {
            match prepared {
                Ok(frame) => self.send_notification(frame?, timeout).await,
                Err(call) => Caller::send(self, call?).await.map(drop),
            }
        }
    }
}

impl BatchTarget for Peer {
    fn register(&self) -> Result<crate::caller::Registered, CallError> {
        let (id, rx) = self.shared.register()?;
        Ok((id, rx, None))
    }

    fn forget(&self, id: u64) {
        self.shared.forget(id);
    }

    fn call_timeout(&self) -> Duration {
        self.shared.call_timeout
    }

    fn send<'a>(
        &'a self,
        frame: OutFrame,
        _waiters: Vec<(u64, oneshot::Sender<Outcome>)>,
        delivery: Option<&'a Delivery>,
    ) -> BoxFuture<'a, Result<(), CallError>> {
        // Responses come back through the connection's own call table.
        Box::pin(async move {
            let sent = Peer::send(self, frame).await;
            if let Some(delivery) = delivery {
                match sent {
                    Ok(()) => delivery.mark_sent(),
                    Err(_) => delivery.mark_unsent(),
                }
            }
            sent
        })
    }

    fn cancel(&self, id: u64, reason: &str) {
        let mut guard = CallGuard {
            shared: &self.shared,
            id,
            armed: true,
            sent: true,
        };
        guard.cancel(reason);
    }
}

/// Cleans up an outgoing call that ends without its response (dropped or
/// timed out): forgets it and, where configured, tells the other side.
pub(crate) struct CallGuard<'a> {
    pub(crate) shared: &'a Arc<PeerState>,
    pub(crate) id: u64,
    pub(crate) armed: bool,
    /// Whether the request went out (else there is nothing to cancel there).
    pub(crate) sent: bool,
}

impl CallGuard<'_> {
    /// Forgets the call and, if it was sent, tells the other side. Returns
    /// whether the call was still pending (false: its answer already came).
    pub(crate) fn cancel(&mut self, reason: &str) -> bool {
        if !std::mem::take(&mut self.armed) || !self.shared.forget(self.id) {
            return false;
        }
        let Some(protocol) = self.shared.cancel_protocol().filter(|_| self.sent) else {
            return true;
        };
        let frame = OutFrame::new(protocol.notification(self.id, reason), OutKind::Notification);
        match self.shared.outbox().try_send(frame) {
            Ok(()) | Err(outbox::TrySendError::Closed) => {}
            Err(outbox::TrySendError::Full(frame)) => {
                // Cannot wait here; hand the send to a task.
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    let outbox = self.shared.outbox().clone();
                    runtime.spawn(async move { outbox.send(frame).await });
                }
            }
        }
        true
    }
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        let _ = self.cancel("cancelled by the caller");
    }
}
