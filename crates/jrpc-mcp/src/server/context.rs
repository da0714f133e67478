//! What a tool, resource or prompt handler can do besides answering: report
//! progress, log, notice cancellation, and ask the client for things.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jrpc::peer::Peer;
use jrpc::{CallError, Id, RequestContext};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::session::Session;
use crate::types::{
    ClientCapabilities, CreateMessageParams, CreateMessageResult, ElicitParams, ElicitResult, Implementation,
    JsonObject, ListRootsResult, LoggingLevel, LoggingMessageParams, ProgressParams, ProgressToken,
};

/// Why a request to the client failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientRequestError {
    /// The client did not declare the capability the request needs, so it
    /// was not sent.
    #[error("the client does not support {0}")]
    Unsupported(&'static str),
    /// The client has not said it is ready (`notifications/initialized`)
    /// within the client timeout; before that a server sends it no
    /// requests.
    #[error("the client has not finished initializing")]
    NotReady,
    /// The call failed: the client answered with an error, did not answer
    /// in time, or the connection closed.
    #[error(transparent)]
    Call(#[from] CallError),
}

/// The context of one request to a tool, resource or prompt handler.
///
/// Cloning is cheap; clones share the request's progress and cancellation.
#[derive(Clone)]
pub struct McpContext {
    inner: Arc<Inner>,
}

/// A transport that carries a request's own messages to the client apart
/// from the rest (Streamable HTTP: on the stream that answers that
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
}

struct Inner {
    /// Set when the transport routes messages per request.
    outbound: Option<Arc<dyn RequestOutbound>>,
    peer: Option<Peer>,
    session: Arc<Session>,
    request_id: Option<Id>,
    progress_token: Option<ProgressToken>,
    /// The last progress sent: each must be greater.
    last_progress: Mutex<Option<f64>>,
    cancel: CancellationToken,
    client_timeout: Duration,
    logger: Option<String>,
}

impl McpContext {
    pub(crate) fn new(
        ctx: &RequestContext,
        session: Arc<Session>,
        progress_token: Option<ProgressToken>,
        cancel: CancellationToken,
        client_timeout: Duration,
        logger: Option<String>,
    ) -> Self {
        McpContext {
            inner: Arc::new(Inner {
                outbound: ctx.get::<Arc<dyn RequestOutbound>>().cloned(),
                peer: ctx.peer(),
                session,
                request_id: ctx.id().cloned(),
                progress_token,
                last_progress: Mutex::new(None),
                cancel,
                client_timeout,
                logger,
            }),
        }
    }

    /// The id of the request being served.
    pub fn request_id(&self) -> Option<&Id> {
        self.inner.request_id.as_ref()
    }

    /// The progress token the request carried, if any.
    pub fn progress_token(&self) -> Option<&ProgressToken> {
        self.inner.progress_token.as_ref()
    }

    /// The connection to the client, to call or notify it directly.
    pub fn peer(&self) -> Option<&Peer> {
        self.inner.peer.as_ref()
    }

    /// Who the client said it is.
    pub fn client_info(&self) -> Option<Implementation> {
        self.inner.session.state().client_info.clone()
    }

    /// What the client declared it can do.
    pub fn client_capabilities(&self) -> ClientCapabilities {
        self.inner.session.state().client_capabilities.clone()
    }

    /// Whether the client subscribed to the resource at `uri`.
    pub fn is_subscribed(&self, uri: &str) -> bool {
        self.inner.session.state().subscribed.contains(uri)
    }

    /// The protocol revision the session speaks.
    pub fn protocol_version(&self) -> &'static str {
        self.inner.session.state().protocol_version
    }

    /// Reports progress: a `notifications/progress` to the client when the
    /// request carried a progress token, nothing otherwise. Progress must
    /// increase; a value not greater than the last one is not sent.
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
    /// least the level the client set with `logging/setLevel` (info until
    /// then, or the server's default).
    pub async fn log(&self, level: LoggingLevel, data: impl Serialize) {
        if level < self.inner.session.state().log_level {
            return;
        }
        let Ok(data) = serde_json::to_value(data) else {
            return;
        };
        let params = LoggingMessageParams {
            level,
            logger: self.inner.logger.clone(),
            data,
            meta: None,
        };
        self.notify("notifications/message", &params).await;
    }

    async fn notify(&self, method: &str, params: &impl Serialize) {
        if let (Some(outbound), Some(id)) = (&self.inner.outbound, &self.inner.request_id) {
            let frame = serde_json::json!({"jsonrpc": "2.0", "method": method, "params": params});
            return outbound.notify(id, frame.to_string());
        }
        if let Some(peer) = &self.inner.peer {
            if let Err(e) = peer.notify(method, params).await {
                tracing::debug!(method, error = %e, "notification not sent");
            }
        }
    }

    /// A token cancelled when the request is: by the client's
    /// `notifications/cancelled`, or because the connection closed. The
    /// handler's future is dropped at that point; hand the token to work the
    /// handler started elsewhere (a blocking task, a spawned one) so that it
    /// stops too.
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
    /// the client's `sampling` capability.
    pub async fn sample(
        &self,
        params: CreateMessageParams,
    ) -> Result<CreateMessageResult, ClientRequestError> {
        if self.client_capabilities().sampling.is_none() {
            return Err(ClientRequestError::Unsupported("sampling"));
        }
        self.request("sampling/createMessage", &params).await
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
        let supported = self
            .client_capabilities()
            .elicitation
            .is_some_and(|e| e.supports_form());
        if !supported {
            return Err(ClientRequestError::Unsupported("elicitation"));
        }
        // `mode` arrived with 2025-11-25; older clients do not expect it.
        let modes = self.protocol_version() >= "2025-11-25";
        let params = ElicitParams {
            mode: modes.then(|| "form".to_owned()),
            message: message.into(),
            requested_schema: schema,
            meta: None,
        };
        self.request("elicitation/create", &params).await
    }

    /// Asks the client for its roots (`roots/list`). Needs the client's
    /// `roots` capability.
    pub async fn list_roots(&self) -> Result<ListRootsResult, ClientRequestError> {
        if self.client_capabilities().roots.is_none() {
            return Err(ClientRequestError::Unsupported("roots"));
        }
        self.request("roots/list", &serde_json::json!({})).await
    }

    async fn request<R: DeserializeOwned>(
        &self,
        method: &str,
        params: &impl Serialize,
    ) -> Result<R, ClientRequestError> {
        if !self.inner.session.wait_ready(self.inner.client_timeout).await {
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

impl std::fmt::Debug for McpContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpContext")
            .field("request_id", &self.inner.request_id)
            .field("progress_token", &self.inner.progress_token)
            .finish_non_exhaustive()
    }
}
