//! Serving one call that its protocol parsed itself — MCP's 2026-07-28
//! HTTP path reads a request's body once and checks its headers against it
//! — as the engine serves a frame's request (the middleware, the handler
//! choice, a panic answered `-32603`), with the messages its handler sends
//! the caller before it answers streamed ahead of the reply.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio_util::sync::WaitForCancellationFutureOwned;

use super::cancel::{Cancellation, Registration};
use super::outlet::{outlet, CallMessages, CallOutlet};
use crate::message::{self, Error, Id, Version};
use crate::middleware::{Call, CallFuture, RawResult};
use crate::router::Router;

/// Serves `call` (a request its protocol parsed: id, method, params and
/// what the protocol learnt of it in the call's extensions) with `router`.
///
/// The handler finds a [`CallOutlet`] in the call's extensions
/// ([`RequestContext::get`](crate::RequestContext::get)): what it sends
/// there comes out of [`ServedCall::next`] before the reply. Nothing runs
/// until the served call is polled; dropping it cancels the handler.
///
/// ```
/// use jrpc::dispatch::{response_frame, serve_call, Said};
/// use jrpc::middleware::Call;
/// use jrpc::Router;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let router = Router::new().method("add", |(a, b): (i64, i64)| async move { Ok(a + b) });
/// let params = serde_json::value::to_raw_value(&[2, 3]).unwrap();
/// let mut served = serve_call(&router, Call::request(7, "add", Some(params)));
/// let Some(Said::Reply(outcome)) = served.next().await else { unreachable!() };
/// assert_eq!(&response_frame(served.id(), &outcome)[..], br#"{"jsonrpc":"2.0","result":5,"id":7}"#);
/// # });
/// ```
pub fn serve_call(router: &Router, mut call: Call) -> ServedCall {
    let (sender, messages) = call_outlet();
    call.extensions_mut().insert(sender);
    serve_call_with(router, call, messages)
}

/// A call's outlet: where its handler sends messages, and what
/// [`serve_call_with`] reads them from. For a protocol that hands the
/// sending side to its handlers in state of its own, rather than through
/// the call's extensions.
pub fn call_outlet() -> (CallOutlet, CallMessages) {
    outlet()
}

/// [`serve_call`], the messages read from `messages` (the reading side of
/// a [`call_outlet`] whose sending side the protocol gave its handler).
pub fn serve_call_with(router: &Router, call: Call, messages: CallMessages) -> ServedCall {
    let id = call.id().cloned().unwrap_or(Id::NULL);
    ServedCall {
        id,
        work: Some(router.start_call(call)),
        outcome: None,
        messages: Some(messages),
        cancel: None,
    }
}

/// A call under way (from [`serve_call`]): its messages, then its reply.
#[must_use = "the handler runs only while its served call is polled"]
pub struct ServedCall {
    id: Id,
    /// The handler, until it answers.
    work: Option<CallFuture>,
    /// Its answer, held while the messages sent before it are read.
    outcome: Option<Result<RawResult, Error>>,
    /// What its handler sends before it answers (none when it has no
    /// outlet: a peer's handler sends through the peer).
    messages: Option<CallMessages>,
    /// Its place in its connection's cancellation, for a request a peer
    /// serves ([`Peer::serve_call`](crate::peer::Peer::serve_call)).
    cancel: Option<Cancel>,
}

/// A served request's place in its connection's cancellation: only the
/// table until its handler first waits (most answer at once, and are never
/// registered), then its registration.
enum Cancel {
    Table(Arc<Cancellation>),
    Registered(Registration, Option<Pin<Box<WaitForCancellationFutureOwned>>>),
}

impl std::fmt::Debug for ServedCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServedCall")
            .field("id", &self.id)
            .field("answered", &self.work.is_none())
            .finish_non_exhaustive()
    }
}

/// What a served call says next.
#[derive(Debug)]
pub enum Said {
    /// A message its handler sent before it answered (a whole frame).
    Message(Bytes),
    /// Its reply: the last thing it says.
    Reply(Result<RawResult, Error>),
}

impl ServedCall {
    /// A call of a peer's connection (see
    /// [`Peer::serve_call`](crate::peer::Peer::serve_call)): no outlet, and
    /// cancellable through `cancellation` once it waits.
    pub(crate) fn of_peer(router: &Router, call: Call, cancellation: Option<&Arc<Cancellation>>) -> Self {
        let id = call.id().cloned();
        let cancel = cancellation
            .filter(|_| id.is_some())
            .map(|c| Cancel::Table(Arc::clone(c)));
        ServedCall {
            id: id.unwrap_or(Id::NULL),
            work: Some(router.start_call(call)),
            outcome: None,
            messages: None,
            cancel,
        }
    }

    /// A call answered before it ran (`None`: with nothing, as a cancel
    /// notification is).
    pub(crate) fn answered(id: Id, outcome: Option<Result<RawResult, Error>>) -> Self {
        ServedCall {
            id,
            work: None,
            outcome,
            messages: None,
            cancel: None,
        }
    }

    /// The call's id.
    pub fn id(&self) -> &Id {
        &self.id
    }

    /// The reply, when the handler answers on the spot without having said
    /// anything first (most calls): the handler is polled once. `None`
    /// leaves everything to [`next`](Self::next).
    pub fn now(&mut self) -> Option<Result<RawResult, Error>> {
        if self.outcome.is_none() {
            let work = self.work.as_mut()?;
            let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
            match work.as_mut().poll(&mut cx) {
                Poll::Ready(outcome) => {
                    self.work = None;
                    self.outcome = Some(outcome);
                }
                Poll::Pending => self.register(),
            }
        }
        if self.messages.as_ref().map_or(true, CallMessages::is_empty) {
            self.outcome.take()
        } else {
            None
        }
    }

    /// Whether it has nothing more to say: answered and read, or ended
    /// without an answer (a notification applied on the spot, a call
    /// cancelled).
    pub fn is_finished(&self) -> bool {
        self.work.is_none()
            && self.outcome.is_none()
            && self.messages.as_ref().map_or(true, CallMessages::is_empty)
    }

    /// Registers the call for cancellation, now that it waits.
    fn register(&mut self) {
        if let Some(Cancel::Table(table)) = &self.cancel {
            self.cancel = Some(Cancel::Registered(table.register(&self.id), None));
        }
    }

    /// The handler stopped by a cancellation: the protocol's reply, if it
    /// has one, stands in for its answer.
    fn cancelled(&mut self) -> Option<Said> {
        self.work = None;
        match self.cancel.take() {
            Some(Cancel::Registered(registration, _)) => {
                registration.cancelled_reply().map(|e| Said::Reply(Err(e)))
            }
            _ => None,
        }
    }

    /// Whether the call has been cancelled (then its handler is dropped);
    /// registers `cx` to be woken when it is.
    fn poll_cancelled(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(Cancel::Registered(registration, waiting)) = &mut self.cancel else {
            return false;
        };
        let waiting = waiting.get_or_insert_with(|| Box::pin(registration.token().cancelled_owned()));
        waiting.as_mut().poll(cx).is_ready()
    }

    /// The next message, or the reply once the handler has answered and
    /// what it said before is read; `None` after the reply, or instead of
    /// it for a peer's call cancelled under a protocol that answers a
    /// cancelled request with nothing (MCP's). Cancel-safe: dropped before
    /// it completes, nothing is lost.
    pub async fn next(&mut self) -> Option<Said> {
        std::future::poll_fn(|cx| self.poll_said(cx)).await
    }

    fn poll_said(&mut self, cx: &mut Context<'_>) -> Poll<Option<Said>> {
        // Messages first: what the handler said before it answered goes
        // before the answer.
        if let Some(message) = self.messages.as_ref().and_then(CallMessages::try_recv) {
            return Poll::Ready(Some(Said::Message(message)));
        }
        if let Some(outcome) = self.outcome.take() {
            return Poll::Ready(Some(Said::Reply(outcome)));
        }
        if self.work.is_some() && self.poll_cancelled(cx) {
            return Poll::Ready(self.cancelled());
        }
        let Some(work) = self.work.as_mut() else {
            return Poll::Ready(None);
        };
        match work.as_mut().poll(cx) {
            Poll::Ready(outcome) => {
                self.work = None;
                self.cancel = None;
                match self.messages.as_ref().and_then(CallMessages::try_recv) {
                    Some(message) => {
                        self.outcome = Some(outcome);
                        Poll::Ready(Some(Said::Message(message)))
                    }
                    None => Poll::Ready(Some(Said::Reply(outcome))),
                }
            }
            Poll::Pending => {
                if matches!(self.cancel, Some(Cancel::Table(_))) {
                    self.register();
                    // Woken when it is cancelled, too.
                    if self.poll_cancelled(cx) {
                        cx.waker().wake_by_ref();
                    }
                }
                match &self.messages {
                    Some(messages) => messages.poll_recv(cx).map(|message| Some(Said::Message(message))),
                    None => Poll::Pending,
                }
            }
        }
    }
}

/// The JSON-RPC 2.0 response frame for a call `id` answered with
/// `outcome`, as the engine writes it (an error for an unreadable request
/// carries id `null`).
pub fn response_frame(id: &Id, outcome: &Result<RawResult, Error>) -> Bytes {
    // Room for the envelope around a result: written without growing.
    let room = outcome
        .as_ref()
        .map_or(128, |result| result.as_bytes().len() + 48);
    let mut out = Vec::with_capacity(room);
    match outcome {
        Ok(result) => {
            message::result_prefix(&mut out, Version::V2);
            out.extend_from_slice(result.as_bytes());
            message::result_suffix(&mut out, Version::V2, id);
        }
        Err(error) => message::write_error(&mut out, Version::V2, id, error),
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RequestContext;
    use std::time::Duration;

    fn router() -> Router {
        Router::new()
            .sync_method("now", || Ok("at once"))
            .method("chatty", |(): (), ctx: RequestContext| async move {
                let outlet = ctx.get::<CallOutlet>().cloned().expect("an outlet");
                for i in 0..3 {
                    outlet.send(Bytes::from(format!("m{i}"))).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                Ok::<_, Error>("done")
            })
            .method("quiet_then_chatty", |(): (), ctx: RequestContext| async move {
                let outlet = ctx.get::<CallOutlet>().cloned().expect("an outlet");
                outlet.send(Bytes::from_static(b"before")).await.unwrap();
                Ok::<_, Error>("answer")
            })
    }

    fn reply_text(said: Option<Said>, id: &Id) -> String {
        match said {
            Some(Said::Reply(outcome)) => String::from_utf8(response_frame(id, &outcome).to_vec()).unwrap(),
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_call_answered_on_the_spot_has_its_reply_now() {
        let mut served = serve_call(&router(), Call::request(1, "now", None));
        let outcome = served.now().expect("answered at once");
        assert_eq!(
            &response_frame(served.id(), &outcome)[..],
            br#"{"jsonrpc":"2.0","result":"at once","id":1}"#
        );
        assert!(served.next().await.is_none(), "nothing after the reply");
    }

    #[tokio::test]
    async fn messages_come_in_order_before_the_reply() {
        let mut served = serve_call(&router(), Call::request("a", "chatty", None));
        assert!(served.now().is_none());
        for i in 0..3 {
            match served.next().await {
                Some(Said::Message(m)) => assert_eq!(m, format!("m{i}")),
                other => panic!("expected message {i}, got {other:?}"),
            }
        }
        let id = served.id().clone();
        assert_eq!(
            reply_text(served.next().await, &id),
            r#"{"jsonrpc":"2.0","result":"done","id":"a"}"#
        );
        assert!(served.next().await.is_none());
    }

    #[tokio::test]
    async fn a_message_sent_by_a_handler_that_answers_at_once_is_not_lost() {
        let mut served = serve_call(&router(), Call::request(2, "quiet_then_chatty", None));
        // Answered on the first poll, but it said something first.
        assert!(served.now().is_none());
        match served.next().await {
            Some(Said::Message(m)) => assert_eq!(m, "before"),
            other => panic!("expected the message, got {other:?}"),
        }
        assert_eq!(
            reply_text(served.next().await, &Id::from(2)),
            r#"{"jsonrpc":"2.0","result":"answer","id":2}"#
        );
    }

    #[tokio::test]
    async fn the_engine_rules_apply_unknown_methods_and_notification_handlers() {
        let router = router().notification("note", || async {});
        let mut served = serve_call(&router, Call::request(3, "missing", None));
        assert_eq!(
            reply_text(served.next().await, &Id::from(3)),
            r#"{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":3}"#
        );
        // A request to a notification handler is answered null.
        let mut served = serve_call(&router, Call::request(4, "note", None));
        assert_eq!(
            reply_text(served.next().await, &Id::from(4)),
            r#"{"jsonrpc":"2.0","result":null,"id":4}"#
        );
    }

    #[tokio::test]
    async fn next_is_cancel_safe() {
        let mut served = serve_call(&router(), Call::request(5, "chatty", None));
        let mut seen = Vec::new();
        let reply = loop {
            // A timer far shorter than the handler's pauses cuts most waits.
            let said = tokio::select! {
                said = served.next() => said,
                () = tokio::time::sleep(Duration::from_micros(300)) => continue,
            };
            match said {
                Some(Said::Message(m)) => seen.push(m),
                Some(Said::Reply(outcome)) => break outcome,
                None => panic!("ended without a reply"),
            }
        };
        assert_eq!(seen, ["m0", "m1", "m2"]);
        assert_eq!(reply.unwrap().as_bytes(), b"\"done\"");
    }
}
