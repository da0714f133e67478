//! What a tool, resource or prompt handler can do besides answering: report
//! progress, log, notice cancellation, ask the client for things, announce
//! changes — the same calls in both eras, each done the way the request's
//! revision says.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jrpc::peer::Peer;
use jrpc::{CallError, Id, RequestContext};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::changes::Changes;
use super::era::{Era, Modern};
use super::run::{malformed_answer, Asked, Control};
use super::session::Session;
use crate::types::{
    ClientCapabilities, CreateMessageParams, CreateMessageResult, ElicitParams, ElicitResult, Implementation,
    InputRequest, JsonObject, ListRootsResult, LoggingLevel, LoggingMessageParams, ProgressParams,
    ProgressToken,
};

/// Why a request to the client failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientRequestError {
    /// The client did not declare the capability the request needs, so it
    /// was not sent. (On a modern request this does not happen: the request
    /// ends with `-32021` instead; check
    /// [`McpContext::client_capabilities`] first to do without.)
    #[error("the client does not support {0}")]
    Unsupported(&'static str),
    /// The client has not said it is ready (`notifications/initialized`)
    /// within the client timeout; before that a server sends it no
    /// requests.
    #[error("the client has not finished initializing")]
    NotReady,
    /// The call failed: the client answered with an error, did not answer
    /// in time, or the connection closed (or, in a task, the task ended).
    #[error(transparent)]
    Call(#[from] CallError),
}

/// The context of one request to a tool, resource or prompt handler.
///
/// Cloning is cheap; clones share the request's progress and cancellation.
///
/// # One handler for both revisions
///
/// [`sample`](Self::sample), [`elicit`](Self::elicit) and
/// [`list_roots`](Self::list_roots) (or [`input`](Self::input) for a named
/// question) work in both eras. In a 2025-11-25 session they send the client
/// a request and wait. 2026-07-28 forbids requests to the client: there the
/// handler runs in *rounds*. When it asks something the client has not
/// answered yet, the round stops, the call is answered with
/// `input_required`, and when the client calls again with the answers the
/// handler runs again from the start and gets further. So:
///
/// - ask before you act, and ask together what you need together
///   (`tokio::join!`): questions awaited at once go out in one round;
/// - anything with a side effect before the last question runs again in
///   every round: make it idempotent, or wrap it in
///   [`once`](Self::once), which runs it in the first round that reaches
///   it and carries its result (readable by the client: no secrets) to the
///   later rounds;
/// - a question for a capability the client did not declare ends a modern
///   request with `-32021`: check
///   [`client_capabilities`](Self::client_capabilities) first to do without.
#[derive(Clone)]
pub struct McpContext {
    inner: Arc<Inner>,
}

/// A transport that carries a legacy request's own messages to the client
/// apart from the rest (Streamable HTTP: on the stream that answers that
/// request). Kept in the connection's extensions.
pub(crate) trait RequestOutbound: Send + Sync {
    /// Sends a notification related to the request `related`.
    fn notify(&self, related: &Id, frame: String);
    /// Sends a request related to `related` and waits for its result.
    fn call(
        &self,
        related: &Id,
        method: &str,
        params: Box<serde_json::value::RawValue>,
        timeout: Duration,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Box<serde_json::value::RawValue>, CallError>> + Send>,
    >;
    /// The request was cancelled: no response will come for it.
    fn abandoned(&self, related: &Id);
    /// Ends the connection carrying the request's messages now, leaving the
    /// request going (the client resumes its stream).
    fn close_stream(&self, related: &Id);
}

struct Inner {
    era: Era,
    control: Arc<Control>,
    /// Set when the transport routes a legacy request's messages apart.
    outbound: Option<Arc<dyn RequestOutbound>>,
    peer: Option<Peer>,
    request_id: Option<Id>,
    progress_token: Option<ProgressToken>,
    /// The last progress sent: each must be greater.
    last_progress: Mutex<Option<f64>>,
    cancel: CancellationToken,
    client_timeout: Duration,
    logger: Option<Arc<str>>,
    changes: Changes,
    shared: Arc<dyn super::shared::SharedState>,
    identity: Option<jrpc::router::Identity>,
    scopes: Option<jrpc::context::Scopes>,
}

/// What a request's context is made from.
pub(crate) struct ContextParts {
    pub(crate) era: Era,
    pub(crate) control: Arc<Control>,
    pub(crate) progress_token: Option<ProgressToken>,
    pub(crate) cancel: CancellationToken,
    pub(crate) client_timeout: Duration,
    pub(crate) logger: Option<Arc<str>>,
    pub(crate) changes: Changes,
    pub(crate) shared: Arc<dyn super::shared::SharedState>,
}

impl McpContext {
    pub(crate) fn new(ctx: &RequestContext, parts: ContextParts) -> Self {
        McpContext {
            inner: Arc::new(Inner {
                outbound: ctx.get::<Arc<dyn RequestOutbound>>().cloned(),
                peer: ctx.peer(),
                request_id: ctx.id().cloned(),
                era: parts.era,
                control: parts.control,
                progress_token: parts.progress_token,
                last_progress: Mutex::new(None),
                cancel: parts.cancel,
                client_timeout: parts.client_timeout,
                logger: parts.logger,
                changes: parts.changes,
                shared: parts.shared,
                identity: ctx.identity().cloned(),
                scopes: ctx.get::<jrpc::context::Scopes>().cloned(),
            }),
        }
    }

    fn session(&self) -> Option<&Arc<Session>> {
        match &self.inner.era {
            Era::Legacy(session) => Some(session),
            Era::Modern(_) => None,
        }
    }

    fn modern(&self) -> Option<&Arc<Modern>> {
        self.inner.era.modern()
    }

    /// Who is calling, when the transport authenticated the caller (over
    /// HTTP with OAuth, the token's subject).
    pub fn identity(&self) -> Option<&jrpc::router::Identity> {
        self.inner.identity.as_ref()
    }

    /// What the caller's token grants, when the transport authenticated
    /// the caller (over HTTP with OAuth).
    pub fn scopes(&self) -> Option<&jrpc::context::Scopes> {
        self.inner.scopes.as_ref()
    }

    /// The id of the request being served.
    pub fn request_id(&self) -> Option<&Id> {
        self.inner.request_id.as_ref()
    }

    /// The progress token the request carried, if any.
    pub fn progress_token(&self) -> Option<&ProgressToken> {
        self.inner.progress_token.as_ref()
    }

    /// The connection to the client, to call or notify it directly (legacy
    /// sessions and stdio; a modern request over HTTP has none).
    pub fn peer(&self) -> Option<&Peer> {
        self.inner.peer.as_ref()
    }

    /// Who the client said it is: in `initialize` (legacy), or in this
    /// request's `_meta` (modern).
    pub fn client_info(&self) -> Option<Implementation> {
        match &self.inner.era {
            Era::Legacy(session) => session.state().client_info.clone(),
            Era::Modern(modern) => modern.envelope.client_info.clone(),
        }
    }

    /// What the client declared it can do: in `initialize` (legacy), or for
    /// this request (modern).
    pub fn client_capabilities(&self) -> ClientCapabilities {
        match &self.inner.era {
            Era::Legacy(session) => session.state().client_capabilities.clone(),
            Era::Modern(modern) => modern.envelope.client_capabilities.clone(),
        }
    }

    /// Whether the client subscribed to the resource at `uri`
    /// (`resources/subscribe`, legacy sessions; a modern request belongs to
    /// no session and has no subscriptions).
    pub fn is_subscribed(&self, uri: &str) -> bool {
        self.session().is_some_and(|s| s.state().subscribed.contains(uri))
    }

    /// The protocol revision of the request: the session's (legacy) or the
    /// request's own (modern).
    pub fn protocol_version(&self) -> &'static str {
        match &self.inner.era {
            Era::Legacy(session) => session.state().protocol_version,
            Era::Modern(modern) => modern.version,
        }
    }

    /// Whether the request is served by 2026-07-28's stateless rules.
    pub fn is_modern(&self) -> bool {
        self.modern().is_some()
    }

    /// Announces changes to the server's lists and resources to everyone
    /// listening.
    pub fn changes(&self) -> &Changes {
        &self.inner.changes
    }

    /// What the server shares with its replicas: where a handler keeps
    /// records every replica must see (see
    /// [`McpServer::shared_state`](super::McpServer::shared_state)).
    pub fn shared_state(&self) -> &Arc<dyn super::shared::SharedState> {
        &self.inner.shared
    }

    /// Reports progress: a `notifications/progress` to the client when the
    /// request carried a progress token, nothing otherwise (nor in a task).
    /// Progress must increase; a value not greater than the last one is not
    /// sent.
    pub async fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let Some(token) = &self.inner.progress_token else {
            return;
        };
        {
            let mut last = self.inner.last_progress.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|last| progress <= last) || !progress.is_finite() {
                return;
            }
            *last = Some(progress);
        }
        let params = ProgressParams {
            progress_token: token.clone(),
            progress,
            total,
            message: message.map(str::to_owned),
            meta: None,
        };
        self.notify("notifications/progress", &params).await;
    }

    /// Logs to the client: a `notifications/message` when `level` is at
    /// least the level the client asked for — with `logging/setLevel`
    /// (legacy; the server's default until then), or in this request's
    /// `_meta` (modern; without it nothing is sent).
    pub async fn log(&self, level: LoggingLevel, data: impl Serialize) {
        let threshold = match &self.inner.era {
            Era::Legacy(session) => Some(session.state().log_level),
            Era::Modern(modern) => modern.envelope.log_level,
        };
        if threshold.map_or(true, |threshold| level < threshold) {
            return;
        }
        let Ok(data) = serde_json::to_value(data) else {
            return;
        };
        let params = LoggingMessageParams {
            level,
            logger: self.inner.logger.as_deref().map(str::to_owned),
            data,
            meta: None,
        };
        self.notify("notifications/message", &params).await;
    }

    /// Sends the client a notification about this request, on the way its
    /// transport carries them.
    pub(crate) async fn notify(&self, method: &str, params: &impl Serialize) {
        if self.inner.control.is_task() {
            // A task has no request to speak on.
            return;
        }
        let stream = self.modern().and_then(|m| m.stream.as_ref());
        if let Some(stream) = stream {
            let Ok(frame) = jrpc::message::Notification::new(method, params) else {
                return;
            };
            let _ = stream.send(frame.to_bytes()).await;
            return;
        }
        if let (Era::Legacy(_), Some(outbound), Some(id)) =
            (&self.inner.era, &self.inner.outbound, &self.inner.request_id)
        {
            let frame = serde_json::json!({"jsonrpc": "2.0", "method": method, "params": params});
            return outbound.notify(id, frame.to_string());
        }
        if let Some(peer) = &self.inner.peer {
            if let Err(e) = peer.notify(method, params).await {
                tracing::debug!(method, error = %e, "notification not sent");
            }
        }
    }

    /// Ends the HTTP response that carries this request's messages now,
    /// without ending the request: the client reconnects (`GET` with
    /// `Last-Event-ID`) after the stream's `retry:` delay and gets the rest,
    /// the response included. For long requests behind proxies that cut
    /// long responses. Only legacy sessions over Streamable HTTP have such
    /// streams; elsewhere this does nothing.
    pub fn close_stream(&self) {
        if let (Era::Legacy(_), Some(outbound), Some(id)) =
            (&self.inner.era, &self.inner.outbound, &self.inner.request_id)
        {
            outbound.close_stream(id);
        }
    }

    /// A token cancelled when the request is: by the client's
    /// `notifications/cancelled`, by closing its HTTP stream, because the
    /// connection closed, or (in a task) by `tasks/cancel`. The handler's
    /// future is dropped at that point; hand the token to work the handler
    /// started elsewhere (a blocking task, a spawned one) so that it stops
    /// too.
    pub fn cancellation(&self) -> CancellationToken {
        self.inner.cancel.clone()
    }

    /// Whether the request has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Waits until the request is cancelled.
    pub async fn cancelled(&self) {
        self.inner.cancel.cancelled().await
    }

    /// Asks the client to sample its LLM (`sampling/createMessage`). Needs
    /// the client's `sampling` capability. On a modern request the question
    /// goes out in an `input_required` result (see [`input`](Self::input)
    /// for the rules); on a legacy one, as a request to the client.
    pub async fn sample(
        &self,
        params: CreateMessageParams,
    ) -> Result<CreateMessageResult, ClientRequestError> {
        self.input_as(None).sample(params).await
    }

    /// Asks the client to ask its user to fill in a form
    /// (`elicitation/create`, form mode): `schema` is a flat JSON Schema
    /// object of primitive properties. Needs the client's `elicitation`
    /// capability (form mode).
    pub async fn elicit(
        &self,
        message: impl Into<String>,
        schema: JsonObject,
    ) -> Result<ElicitResult, ClientRequestError> {
        self.input_as(None).elicit(message, schema).await
    }

    /// Asks the client for its roots (`roots/list`). Needs the client's
    /// `roots` capability.
    pub async fn list_roots(&self) -> Result<ListRootsResult, ClientRequestError> {
        self.input_as(None).list_roots().await
    }

    /// A question to the client under `key`, the key of its entry in a
    /// modern request's `inputRequests` (and of the answer in
    /// `inputResponses`); [`sample`](Self::sample), [`elicit`](Self::elicit)
    /// and [`list_roots`](Self::list_roots) number their keys themselves.
    ///
    /// On a modern request a question the client has not answered stops the
    /// handler where it asks: the server answers `input_required` with every
    /// question asked so far in this run, and runs the handler again from
    /// the start when the client asks again with the answers. So:
    ///
    /// * ask for what you need before doing anything that must not happen
    ///   twice, or wrap that in [`once`](Self::once);
    /// * ask questions you need together at once (`tokio::join!`) so that
    ///   they go out in one round;
    /// * a question the client lacks the capability for ends the request
    ///   with `-32021` (check [`client_capabilities`](Self::client_capabilities)
    ///   first to do without), and an answer that is not what was asked for
    ///   ends it with `-32602`.
    ///
    /// ```no_run
    /// use jrpc_mcp::server::{McpContext, NoArgs, ToolError};
    ///
    /// async fn book(_: NoArgs, cx: McpContext) -> Result<String, ToolError> {
    ///     let schema = serde_json::json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
    ///     let schema = schema.as_object().cloned().unwrap_or_default();
    ///     let answer = cx.input("confirm").elicit("Book it?", schema).await?;
    ///     // Runs in the round that has the answer, once.
    ///     let booking: String = cx.once("booking", async { "B-1".to_owned() }).await;
    ///     Ok(format!("{:?}: {booking}", answer.action))
    /// }
    /// ```
    pub fn input<'a>(&'a self, key: &'a str) -> Input<'a> {
        self.input_as(Some(key))
    }

    fn input_as<'a>(&'a self, key: Option<&'a str>) -> Input<'a> {
        Input { cx: self, key }
    }

    /// Runs `work` once for this request: on a modern request that goes
    /// over several rounds, in the first round that gets here, its result
    /// (which the client can read: no secrets) carried to the later rounds
    /// in `requestState`; otherwise simply runs it.
    pub async fn once<T, F>(&self, key: &str, work: F) -> T
    where
        T: Serialize + DeserializeOwned,
        F: Future<Output = T>,
    {
        if let Some(value) = self.inner.control.once_value(key) {
            if let Ok(kept) = serde_json::from_value(value) {
                return kept;
            }
        }
        let value = work.await;
        if let Ok(json) = serde_json::to_value(&value) {
            self.inner.control.keep_once(key, json);
        }
        value
    }

    /// Goes on as a task (the tasks extension), when the tool may run as one
    /// and the request's client declared the extension: the request is
    /// answered with the task at once and this handler continues in the
    /// background; its questions then wait for `tasks/update`, and
    /// `tasks/cancel` cancels it. Returns whether it is a task now; when it
    /// is not, the handler simply goes on in its request.
    pub async fn run_as_task(&self) -> bool {
        let control = Arc::clone(&self.inner.control);
        std::future::poll_fn(|cx| match control.request_task(cx.waker()) {
            Some(granted) => std::task::Poll::Ready(granted),
            None => std::task::Poll::Pending,
        })
        .await
    }

    /// Sends a legacy request to the client and decodes its result.
    async fn request<R: DeserializeOwned>(
        &self,
        method: &str,
        params: &impl Serialize,
    ) -> Result<R, ClientRequestError> {
        let Era::Legacy(session) = &self.inner.era else {
            return Err(CallError::Closed("a modern request cannot call the client".into()).into());
        };
        if !session.wait_ready(self.inner.client_timeout).await {
            return Err(ClientRequestError::NotReady);
        }
        if let (Some(outbound), Some(id)) = (&self.inner.outbound, &self.inner.request_id) {
            let params = serde_json::value::to_raw_value(params)
                .map_err(|e| CallError::Encode(e.to_string().into()))?;
            let raw = outbound
                .call(id, method, params, self.inner.client_timeout)
                .await?;
            return serde_json::from_str(raw.get())
                .map_err(|e| ClientRequestError::Call(CallError::Decode(Arc::new(e))));
        }
        let peer = self
            .inner
            .peer
            .as_ref()
            .ok_or(CallError::Closed("no connection to the client".into()))?;
        Ok(peer
            .call_with_timeout(method, params, self.inner.client_timeout)
            .await?)
    }
}

/// A question to the client under a key of the handler's choosing; see
/// [`McpContext::input`].
pub struct Input<'a> {
    cx: &'a McpContext,
    key: Option<&'a str>,
}

impl Input<'_> {
    /// Asks the client to sample its LLM (`sampling/createMessage`).
    pub async fn sample(
        self,
        params: CreateMessageParams,
    ) -> Result<CreateMessageResult, ClientRequestError> {
        let declared = self.cx.client_capabilities().sampling.is_some();
        let question = InputRequest::Sampling(params.clone());
        let asked = self.ask("sampling/createMessage", question, declared, "sampling", |c| {
            c.sampling = Some(JsonObject::new())
        });
        match asked.await? {
            Some(answer) => Ok(answer),
            None => self.cx.request("sampling/createMessage", &params).await,
        }
    }

    /// Asks the client to have its user fill in a form
    /// (`elicitation/create`, form mode).
    pub async fn elicit(
        self,
        message: impl Into<String>,
        schema: JsonObject,
    ) -> Result<ElicitResult, ClientRequestError> {
        let declared = self
            .cx
            .client_capabilities()
            .elicitation
            .is_some_and(|e| e.supports_form());
        // `mode` arrived with 2025-11-25; older clients do not expect it.
        let modes = self.cx.protocol_version() >= "2025-11-25";
        let params = ElicitParams {
            mode: modes.then(|| "form".to_owned()),
            message: message.into(),
            requested_schema: schema,
            meta: None,
        };
        let question = InputRequest::Elicitation(params.clone());
        let asked = self.ask("elicitation/create", question, declared, "elicitation", |c| {
            c.elicitation = Some(Default::default())
        });
        match asked.await? {
            Some(answer) => Ok(answer),
            None => self.cx.request("elicitation/create", &params).await,
        }
    }

    /// Asks the client for its roots (`roots/list`).
    pub async fn list_roots(self) -> Result<ListRootsResult, ClientRequestError> {
        let declared = self.cx.client_capabilities().roots.is_some();
        let asked = self.ask("roots/list", InputRequest::ListRoots, declared, "roots", |c| {
            c.roots = Some(Default::default())
        });
        match asked.await? {
            Some(answer) => Ok(answer),
            None => self.cx.request("roots/list", &serde_json::json!({})).await,
        }
    }

    /// The answer, `Ok(None)` when the question goes to the client as a
    /// legacy request instead.
    async fn ask<R: DeserializeOwned>(
        &self,
        method: &'static str,
        question: InputRequest,
        declared: bool,
        capability: &'static str,
        require: fn(&mut ClientCapabilities),
    ) -> Result<Option<R>, ClientRequestError> {
        let control = &self.cx.inner.control;
        match control.ask(self.key, question, declared, require) {
            Asked::Legacy if !declared => Err(ClientRequestError::Unsupported(capability)),
            Asked::Legacy => Ok(None),
            Asked::Unsupported => Err(ClientRequestError::Unsupported(capability)),
            Asked::Answer(value) => match serde_json::from_value(value) {
                Ok(answer) => Ok(Some(answer)),
                Err(e) => {
                    control.fail(malformed_answer(&format!("the result of {method}"), &e));
                    std::future::pending().await
                }
            },
            Asked::Stop => std::future::pending().await,
            Asked::Later(answer) => {
                let value = answer
                    .await
                    .ok_or_else(|| CallError::Closed("the task ended".into()))?;
                serde_json::from_value(value)
                    .map(Some)
                    .map_err(|e| ClientRequestError::Call(CallError::Decode(Arc::new(e))))
            }
        }
    }
}

impl std::fmt::Debug for McpContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpContext")
            .field("request_id", &self.inner.request_id)
            .field("progress_token", &self.inner.progress_token)
            .field("modern", &self.is_modern())
            .finish_non_exhaustive()
    }
}
