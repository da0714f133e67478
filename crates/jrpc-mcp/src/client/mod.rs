//! The MCP client: spawn a server (or use any jrpc connection), initialize,
//! list and call tools, read resources, get prompts, set the log level, and
//! answer what the server asks (sampling, elicitation, roots) through
//! callbacks, with callbacks for its progress, logs and other
//! notifications too.
//!
//! ```no_run
//! use jrpc_mcp::client::McpClient;
//!
//! # async fn run() -> Result<(), jrpc_mcp::client::McpClientError> {
//! let mut command = tokio::process::Command::new("jrpc");
//! command.args(["mcp", "serve", "--stdio"]);
//! let client = McpClient::builder("my-host", "1.0")
//!     .on_log(|message| eprintln!("server log: {:?}", message.data))
//!     .spawn(command)
//!     .await?;
//! let sum = client.call_tool("add", serde_json::json!({"a": 2, "b": 40})).await?;
//! assert_eq!(sum.joined_text(), "42");
//! client.close().await;
//! # Ok(()) }
//! ```
//!
//! The client speaks both eras of the protocol: it probes the server
//! (`server/discover`) and speaks 2026-07-28 to a modern server (the
//! `_meta` envelope on every request; over HTTP one POST per request with
//! the `Mcp-*` headers) and the `initialize` handshake to a legacy one
//! ([`ProtocolChoice`] pins either). A modern server that needs input
//! first (`resultType: "input_required"`) is answered with the callbacks
//! below (sampling, elicitation, roots), and the request asked again.
//!
//! Dropping a call's future cancels it: the server gets
//! `notifications/cancelled` (over modern HTTP, the request's stream is
//! closed).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use jrpc::client::Client;
use jrpc::peer::CancelProtocol;
use jrpc::{ConnectionConfig, Error, RequestContext, Router};

mod cache;
mod callbacks;
mod calls;
mod connect;
#[cfg(feature = "http-client")]
mod deadline;
#[cfg(feature = "http-client")]
mod endpoint;
mod era;
mod error;
#[cfg(feature = "http-client")]
mod http;
mod listen;
#[cfg(feature = "http-client")]
mod modern_http;
#[cfg(feature = "oauth")]
pub mod oauth;
mod repeat;
mod sent;
mod skills;
#[cfg(feature = "http-client")]
mod sse;
mod tasks;
mod wire;

use callbacks::{BoxFuture, Elicitor, Listener, Sampler};
pub use era::ProtocolChoice;
pub use error::{McpClientError, SkillVerifyError};
pub use listen::{Change, Subscription};
#[cfg(feature = "http-client")]
pub use modern_http::HttpStatusError;
pub use skills::{LoadedSkill, SkillFile};
pub use tasks::{task_result, Started};

use era::ServerFacts;
use wire::Wire;

use crate::types::{
    ClientCapabilities, CreateMessageParams, CreateMessageResult, ElicitParams, ElicitResult,
    ElicitationCapability, Implementation, JsonObject, ListRootsResult, LoggingLevel, LoggingMessageParams,
    ProgressParams, Root, RootsCapability, ServerCapabilities,
};

/// Builds an [`McpClient`]: who it is, what it can do, and the callbacks
/// that do it.
pub struct McpClientBuilder {
    info: Implementation,
    sampling: Option<Sampler>,
    elicitation: Option<Elicitor>,
    roots: Option<Arc<std::sync::Mutex<Vec<Root>>>>,
    on_progress: Option<Listener<ProgressParams>>,
    on_log: Option<Listener<LoggingMessageParams>>,
    on_notification: Option<Listener<(String, Option<serde_json::Value>)>>,
    timeout: Duration,
    /// Sent with every request over Streamable HTTP.
    #[cfg_attr(not(feature = "http-client"), allow(dead_code))]
    headers: Vec<(String, String)>,
    protocol: ProtocolChoice,
    probe_timeout: Duration,
    max_rounds: usize,
    /// Results kept by their `ttlMs`, shared with the listener that drops
    /// a list the server says changed.
    results: Arc<cache::ResultCache>,
    /// The change streams open on a connection ([`McpClient::listen`]).
    listeners: Arc<listen::Listeners>,
    /// How to log in to a server over HTTP that asks for it.
    #[cfg(feature = "oauth")]
    oauth: Option<oauth::OAuthClient>,
    /// Whether requests declare the tasks extension.
    tasks: bool,
}

impl McpClient {
    /// A client named `name` at `version` (its `clientInfo`).
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> McpClientBuilder {
        McpClientBuilder {
            info: Implementation::new(name, version),
            sampling: None,
            elicitation: None,
            roots: None,
            on_progress: None,
            on_log: None,
            on_notification: None,
            timeout: Duration::from_secs(60),
            headers: Vec::new(),
            protocol: ProtocolChoice::Auto,
            probe_timeout: Duration::from_secs(5),
            max_rounds: 8,
            results: Arc::new(cache::ResultCache::new(true)),
            listeners: Arc::default(),
            #[cfg(feature = "oauth")]
            oauth: None,
            tasks: false,
        }
    }
}

impl McpClientBuilder {
    /// Answers the server's `sampling/createMessage` (and declares the
    /// `sampling` capability).
    pub fn sampling<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(CreateMessageParams) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<CreateMessageResult, Error>> + Send + 'static,
    {
        self.sampling = Some(Arc::new(move |params| Box::pin(handler(params))));
        self
    }

    /// Answers the server's `elicitation/create` in form mode (and declares
    /// the `elicitation` capability).
    pub fn elicitation<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(ElicitParams) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ElicitResult, Error>> + Send + 'static,
    {
        self.elicitation = Some(Arc::new(move |params| Box::pin(handler(params))));
        self
    }

    /// Offers `roots` to the server's `roots/list` (and declares the `roots`
    /// capability).
    pub fn roots(mut self, roots: impl IntoIterator<Item = Root>) -> Self {
        self.roots = Some(Arc::new(std::sync::Mutex::new(roots.into_iter().collect())));
        self
    }

    /// Called with each `notifications/progress` for this client's calls
    /// (every call then carries a progress token).
    pub fn on_progress(mut self, listener: impl Fn(ProgressParams) + Send + Sync + 'static) -> Self {
        self.on_progress = Some(Arc::new(listener));
        self
    }

    /// Called with each log message (`notifications/message`).
    pub fn on_log(mut self, listener: impl Fn(LoggingMessageParams) + Send + Sync + 'static) -> Self {
        self.on_log = Some(Arc::new(listener));
        self
    }

    /// Called with every other notification from the server (list changes,
    /// resource updates, ...): its method and params.
    pub fn on_notification(
        mut self,
        listener: impl Fn(String, Option<serde_json::Value>) + Send + Sync + 'static,
    ) -> Self {
        self.on_notification = Some(Arc::new(move |(method, params)| listener(method, params)));
        self
    }

    /// A header sent with every request over Streamable HTTP
    /// ([`connect_http`](Self::connect_http)): `Authorization: Bearer …`,
    /// say. A name or value that is not a valid header fails the connect.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Logs in to a server over HTTP that asks for it (`401`), with
    /// OAuth 2.1 as the MCP specification says: see [`oauth`].
    #[cfg(feature = "oauth")]
    pub fn oauth(mut self, client: oauth::OAuthClient) -> Self {
        self.oauth = Some(client);
        self
    }

    /// How long a call waits for its answer (default 60 s): named as on
    /// `ConnectionConfig` and jrpc's `ClientBuilder`.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Which protocol revision to speak: found out from the server (`Auto`,
    /// the default), the legacy handshake, or one revision.
    pub fn protocol(mut self, choice: ProtocolChoice) -> Self {
        self.protocol = choice;
        self
    }

    /// How long the `server/discover` probe waits over a connection before
    /// taking the server for a legacy one (default 5 s).
    pub fn probe_timeout(mut self, timeout: Duration) -> Self {
        self.probe_timeout = timeout;
        self
    }

    /// How many times a request is asked again with the input a modern
    /// server required (default 8) before it fails with
    /// [`McpClientError::TooManyRounds`].
    pub fn max_rounds(mut self, rounds: usize) -> Self {
        self.max_rounds = rounds;
        self
    }

    /// Whether list and read results are kept as long as the server says
    /// (`ttlMs`; default on): a second `list_tools` within that time sends
    /// nothing. A list the server says changed is asked for again.
    pub fn cache(mut self, on: bool) -> Self {
        self.results = Arc::new(cache::ResultCache::new(on));
        self
    }

    /// Declare the tasks extension (`io.modelcontextprotocol/tasks`, on a
    /// 2026-07-28 server): a tool that may run as a task then answers with
    /// one, [`McpClient::call_tool`] waits for its end, and
    /// [`McpClient::start_tool`] hands it over. Off by default.
    pub fn tasks(mut self, on: bool) -> Self {
        self.tasks = on;
        self
    }

    fn capabilities(&self) -> ClientCapabilities {
        ClientCapabilities {
            roots: self.roots.as_ref().map(|_| RootsCapability {
                list_changed: Some(false),
            }),
            sampling: self.sampling.as_ref().map(|_| JsonObject::new()),
            elicitation: self.elicitation.as_ref().map(|_| ElicitationCapability {
                form: Some(JsonObject::new()),
                url: None,
            }),
            experimental: None,
            extensions: self
                .tasks
                .then(|| [(crate::types::TASKS_EXTENSION.to_owned(), JsonObject::new())].into()),
        }
    }

    /// What the client serves: the server's requests and notifications.
    fn router(&self) -> Router {
        let mut router = Router::new().method("ping", |_: Option<serde_json::Value>| async {
            Ok(serde_json::json!({}))
        });
        if let Some(sampling) = self.sampling.clone() {
            router = router.method("sampling/createMessage", move |params: CreateMessageParams| {
                let sampling = Arc::clone(&sampling);
                async move { sampling(params).await }
            });
        }
        if let Some(elicitation) = self.elicitation.clone() {
            router = router.method("elicitation/create", move |params: ElicitParams| {
                let elicitation = Arc::clone(&elicitation);
                async move { elicitation(params).await }
            });
        }
        if let Some(roots) = self.roots.clone() {
            router = router.method("roots/list", move |_: Option<serde_json::Value>| {
                let roots = roots.lock().unwrap_or_else(|p| p.into_inner()).clone();
                async move { Ok(ListRootsResult { roots, meta: None }) }
            });
        }
        let progress = self.on_progress.clone();
        router = router.sync_notification("notifications/progress", move |params: ProgressParams| {
            if let Some(listener) = &progress {
                listener(params);
            }
        });
        let log = self.on_log.clone();
        router = router.sync_notification("notifications/message", move |params: LoggingMessageParams| {
            if let Some(listener) = &log {
                listener(params);
            }
        });
        let other = self.on_notification.clone();
        let results = Arc::clone(&self.results);
        let listeners = Arc::clone(&self.listeners);
        router.fallback(
            move |method: String, params: Option<Box<serde_json::value::RawValue>>, ctx: RequestContext| {
                let other = other.clone();
                let results = Arc::clone(&results);
                let listeners = Arc::clone(&listeners);
                async move {
                    // Only notifications reach a listener; a request the
                    // client does not serve is "method not found".
                    if ctx.id().is_some() {
                        return Err::<(), _>(Error::method_not_found());
                    }
                    results.changed(&method);
                    let params: Option<serde_json::Value> =
                        params.and_then(|p| serde_json::from_str(p.get()).ok());
                    listeners.dispatch(&method, params.as_ref());
                    if let Some(listener) = other {
                        listener((method, params));
                    }
                    Ok(())
                }
            },
        )
    }

    fn jrpc_client(&self) -> jrpc::client::ClientBuilder {
        Client::builder().router(self.router()).connection(
            ConnectionConfig::default()
                .cancellation(CancelProtocol::mcp())
                .ordered(true)
                .call_timeout(self.timeout),
        )
    }
}

/// What closing does besides closing the connection (ending an HTTP
/// session).
type Closing = Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send + Sync>;

/// A client of one MCP server, ready to call it.
pub struct McpClient {
    wire: Wire,
    server: ServerFacts,
    /// The `_meta` every modern request carries; `None` for a legacy
    /// server.
    envelope: Option<serde_json::Value>,
    /// The envelope as JSON text, written once.
    envelope_text: Option<Box<serde_json::value::RawValue>>,
    /// The log level modern requests ask for (`set_log_level`).
    log_level: std::sync::Mutex<Option<LoggingLevel>>,
    /// What answers a modern server's input requests.
    answers: callbacks::Answers,
    /// The `x-mcp-header` parameters of the tools listed, by tool name.
    tool_headers: std::sync::Mutex<std::collections::HashMap<String, Vec<crate::headers::ParamHeader>>>,
    max_rounds: usize,
    results: Arc<cache::ResultCache>,
    listeners: Arc<listen::Listeners>,
    /// Whether calls carry progress tokens (a progress listener is set).
    progress: bool,
    next_token: std::sync::atomic::AtomicI64,
    /// Whether requests declare the tasks extension.
    tasks: bool,
    /// The tools whose calls are safe to repeat (read-only or idempotent),
    /// once the tool list has been read.
    repeatable_tools: std::sync::Mutex<Option<std::collections::HashSet<String>>>,
    /// Requests sent again after a loss.
    repeats: std::sync::atomic::AtomicU64,
    /// How long a call may take, all its attempts together.
    timeout: Duration,
    closing: Option<Closing>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("server", &self.server.info)
            .field("protocol_version", &self.server.version)
            .finish_non_exhaustive()
    }
}

impl McpClient {
    /// Who the server says it is.
    pub fn server_info(&self) -> &Implementation {
        &self.server.info
    }

    /// How many requests this client sent again after a lost connection
    /// or a proxy's `502`/`503`/`504` (only requests safe to repeat are:
    /// lists, reads, `server/discover`, `tasks/get`, and calls of tools
    /// annotated read-only or idempotent).
    pub fn repeats(&self) -> u64 {
        self.repeats.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What the server offers.
    pub fn server_capabilities(&self) -> &ServerCapabilities {
        &self.server.capabilities
    }

    /// The protocol revision spoken.
    pub fn protocol_version(&self) -> &str {
        &self.server.version
    }

    /// Whether the server is spoken to in a modern revision (2026-07-28:
    /// no handshake, the client's facts on every request).
    pub fn is_modern(&self) -> bool {
        self.server.modern
    }

    /// The server's instructions for the model, if any.
    pub fn instructions(&self) -> Option<&str> {
        self.server.instructions.as_deref()
    }

    /// Closes the session (a spawned server gets its stdin closed and a
    /// moment to exit); returns why it ended.
    pub async fn close(self) -> Arc<str> {
        if let Some(closing) = self.closing {
            closing().await;
        }
        self.wire.close().await
    }
}
