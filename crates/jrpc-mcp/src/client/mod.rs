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
use jrpc::transport::Connection;
use jrpc::{CallError, ConnectionConfig, Error, RequestContext, Router};

mod cache;
mod callbacks;
mod calls;
mod era;
mod error;
#[cfg(feature = "http-client")]
mod http;
mod listen;
#[cfg(feature = "http-client")]
mod modern_http;
#[cfg(feature = "http-client")]
mod sse;
mod wire;

use callbacks::{BoxFuture, Elicitor, Listener, Sampler};
pub use era::ProtocolChoice;
pub use error::McpClientError;
pub use listen::{Change, Subscription};
#[cfg(feature = "http-client")]
pub use modern_http::HttpStatusError;

use era::{ProbeError, ServerFacts};
use wire::Wire;

use crate::types::{
    ClientCapabilities, CreateMessageParams, CreateMessageResult, DiscoverResult, ElicitParams, ElicitResult,
    ElicitationCapability, Implementation, InitializeResult, JsonObject, ListRootsResult, LoggingLevel,
    LoggingMessageParams, ProgressParams, RequestEnvelope, Root, RootsCapability, ServerCapabilities,
    LEGACY_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS,
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

    /// The former name of [`call_timeout`](Self::call_timeout).
    #[deprecated(
        since = "0.1.0",
        note = "renamed `call_timeout`, as on jrpc's `ClientBuilder`"
    )]
    pub fn timeout(self, timeout: Duration) -> Self {
        self.call_timeout(timeout)
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
            extensions: None,
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

    /// Spawns `command` as an MCP server over stdio and starts speaking to
    /// it (probe, then handshake if it is a legacy server).
    pub async fn spawn(
        self,
        command: impl Into<tokio::process::Command>,
    ) -> Result<McpClient, McpClientError> {
        let client = self.jrpc_client().spawn(command)?;
        self.start(client).await
    }

    /// Connects to a Streamable HTTP endpoint (`http(s)://…/mcp`). A
    /// modern server is spoken to one POST per request; a legacy one
    /// through a session: every message is POSTed, replies come as JSON or
    /// as SSE streams, the server's own messages on the standalone GET
    /// stream, and closing the client ends the session (`DELETE`).
    #[cfg(feature = "http-client")]
    pub async fn connect_http(self, url: &str) -> Result<McpClient, McpClientError> {
        let mut builder = Client::builder().call_timeout(self.timeout);
        for (name, value) in &self.headers {
            builder = builder.header(name, value);
        }
        let http = builder.http(url)?;
        if let Some(version) = self.protocol.modern() {
            let modern = modern_http::ModernHttp::new(http.clone(), self.notify());
            let wire = Wire::Http(Arc::new(modern));
            match self.probe(&wire, version).await {
                Ok(facts) => return Ok(self.assemble(wire, facts, None)),
                Err(Probed::Failed(e)) => return Err(e),
                Err(Probed::Legacy(why)) => {
                    tracing::debug!(%why, "not a modern MCP server; initializing a session");
                }
            }
        }
        let (connection, session) = http::HttpSession::connect(http);
        let client = self
            .jrpc_client()
            .connect_with(Once(std::sync::Mutex::new(Some(connection))))
            .await?;
        let mut mcp = self.initialize(client).await?;
        session.set_version(mcp.protocol_version());
        // Open before the client is handed out, so that nothing the server
        // sends the session (a subscribed resource's update) is missed.
        Arc::clone(&session).start_listening().await;
        mcp.closing = Some(Box::new(move || Box::pin(async move { session.delete().await })));
        Ok(mcp)
    }

    /// Connects to the server `target` names: a Streamable HTTP endpoint
    /// (`http(s)://…/mcp`, see [`connect_http`](Self::connect_http)) or a
    /// connection of any scheme jrpc dials (`tcp://HOST:PORT`, `unix:PATH`,
    /// `ws(s)://…`; see [`jrpc::transport::dial`]), newline-delimited.
    pub async fn connect_url(self, target: &str) -> Result<McpClient, McpClientError> {
        use jrpc::transport::dial::{dialer, DialOptions, Scheme};
        if Scheme::of(target) == Some(Scheme::Http) {
            #[cfg(feature = "http-client")]
            return self.connect_http(target).await;
            #[cfg(not(feature = "http-client"))]
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{target}: Streamable HTTP needs jrpc-mcp's feature `http-client`"),
            )
            .into());
        }
        let connection = jrpc::transport::Dialer::dial(&dialer(target, &DialOptions::default())?).await?;
        self.connect(connection).await
    }

    /// Starts over a connection of your own (an in-memory pipe, a socket).
    pub async fn connect(self, connection: Connection) -> Result<McpClient, McpClientError> {
        let client = self
            .jrpc_client()
            .connect_with(Once(std::sync::Mutex::new(Some(connection))))
            .await?;
        self.start(client).await
    }

    /// Over a connection: probes for a modern server, else initializes.
    async fn start(self, client: Client) -> Result<McpClient, McpClientError> {
        if let Some(version) = self.protocol.modern() {
            // A clone: the same connection, kept for the handshake.
            let wire = Wire::Peer(client.clone());
            match self.probe(&wire, version).await {
                Ok(facts) => return Ok(self.assemble(wire, facts, None)),
                Err(Probed::Failed(e)) => {
                    wire.close().await;
                    return Err(e);
                }
                Err(Probed::Legacy(why)) => {
                    tracing::debug!(%why, "not a modern MCP server; initializing");
                }
            }
        }
        self.initialize(client).await
    }

    /// `server/discover` in `version` (and in the version a modern server
    /// names instead): the server's facts when it is modern.
    async fn probe(&self, wire: &Wire, version: &str) -> Result<ServerFacts, Probed> {
        let mut version = version.to_owned();
        let mut retried = false;
        loop {
            let params = serde_json::json!({ "_meta": self.envelope(&version, None) });
            let no_headers = wire::Headers::default();
            let asked = wire.call(&version, "server/discover", &params, &no_headers);
            // Over a connection a legacy server may never answer a request
            // before `initialize`: the probe is bounded.
            let answer = match wire {
                Wire::Peer(_) => tokio::time::timeout(self.probe_timeout, asked)
                    .await
                    .unwrap_or(Err(CallError::Timeout(self.probe_timeout))),
                #[cfg(feature = "http-client")]
                Wire::Http(_) => asked.await,
            };
            let error = match answer {
                Ok(raw) => {
                    return match serde_json::from_str::<DiscoverResult>(raw.get()) {
                        Ok(result) => Ok(ServerFacts::modern(pick_version(&version, &result), result)),
                        Err(e) => Err(Probed::Legacy(format!("server/discover answered {e}"))),
                    };
                }
                Err(error) => error,
            };
            match era::read_probe_error(&error, &version) {
                ProbeError::Retry(next) if !retried => {
                    retried = true;
                    version = next;
                }
                ProbeError::Legacy if self.protocol.legacy().is_some() => {
                    return Err(Probed::Legacy(error.to_string()))
                }
                ProbeError::Retry(_) | ProbeError::Modern | ProbeError::Legacy => {
                    return Err(Probed::Failed(match error.rpc() {
                        Some(e) if e.code() == crate::types::codes::UNSUPPORTED_PROTOCOL_VERSION => {
                            McpClientError::UnsupportedVersion(format!("{version} ({e})"))
                        }
                        _ => error.into(),
                    }))
                }
            }
        }
    }

    /// The `_meta` of a modern request in `version`.
    fn envelope(&self, version: &str, log_level: Option<LoggingLevel>) -> serde_json::Value {
        let mut envelope = RequestEnvelope::new(version, self.capabilities());
        envelope.client_info = Some(self.info.clone());
        envelope.log_level = log_level;
        serde_json::to_value(envelope).unwrap_or_default()
    }

    /// Where the notifications of a modern HTTP request's stream go: the
    /// same listeners the router serves over a connection.
    #[cfg(feature = "http-client")]
    fn notify(&self) -> modern_http::Notify {
        let (progress, log, other, results) = (
            self.on_progress.clone(),
            self.on_log.clone(),
            self.on_notification.clone(),
            Arc::clone(&self.results),
        );
        Arc::new(
            move |method: &str, params: Option<serde_json::Value>| match method {
                "notifications/progress" => {
                    if let (Some(listener), Some(params)) = (&progress, params) {
                        if let Ok(params) = serde_json::from_value(params) {
                            listener(params);
                        }
                    }
                }
                "notifications/message" => {
                    if let (Some(listener), Some(params)) = (&log, params) {
                        if let Ok(params) = serde_json::from_value(params) {
                            listener(params);
                        }
                    }
                }
                _ => {
                    results.changed(method);
                    if let Some(listener) = &other {
                        listener((method.to_owned(), params));
                    }
                }
            },
        )
    }

    async fn initialize(self, client: Client) -> Result<McpClient, McpClientError> {
        let Some(version) = self.protocol.legacy() else {
            client.close().await;
            return Err(McpClientError::UnsupportedVersion(format!(
                "{} (the server did not answer as a modern one)",
                self.protocol
            )));
        };
        let params = serde_json::json!({
            "protocolVersion": version,
            "capabilities": self.capabilities(),
            "clientInfo": self.info,
        });
        let result: InitializeResult = client.call("initialize", params).await?;
        if !LEGACY_PROTOCOL_VERSIONS.contains(&result.protocol_version.as_str()) {
            client.close().await;
            return Err(McpClientError::UnsupportedVersion(result.protocol_version));
        }
        client
            .notify("notifications/initialized", serde_json::json!({}))
            .await?;
        Ok(self.assemble(Wire::Peer(client), ServerFacts::legacy(result), None))
    }

    fn assemble(self, wire: Wire, server: ServerFacts, closing: Option<Closing>) -> McpClient {
        let envelope = server.modern.then(|| self.envelope(&server.version, None));
        McpClient {
            wire,
            envelope,
            log_level: std::sync::Mutex::new(None),
            answers: callbacks::Answers {
                sampling: self.sampling,
                elicitation: self.elicitation,
                roots: self.roots,
            },
            tool_headers: std::sync::Mutex::default(),
            max_rounds: self.max_rounds,
            results: self.results,
            listeners: self.listeners,
            server,
            progress: self.on_progress.is_some(),
            next_token: std::sync::atomic::AtomicI64::new(1),
            closing,
        }
    }
}

/// The revision to speak to a modern server: the one asked in, when the
/// server lists it (or lists nothing), else its first one this client
/// speaks.
fn pick_version(asked: &str, result: &DiscoverResult) -> String {
    if result.supported_versions.is_empty() || result.supported_versions.iter().any(|v| v == asked) {
        return asked.to_owned();
    }
    result
        .supported_versions
        .iter()
        .find(|v| MODERN_PROTOCOL_VERSIONS.contains(&v.as_str()))
        .cloned()
        .unwrap_or_else(|| asked.to_owned())
}

/// How a probe ended without a modern server to speak to.
enum Probed {
    /// Not a modern server: initialize.
    Legacy(String),
    /// Give up with this.
    Failed(McpClientError),
}

/// Dials one connection given up front.
struct Once(std::sync::Mutex<Option<Connection>>);

impl jrpc::transport::Dialer for Once {
    async fn dial(&self) -> std::io::Result<Connection> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the connection was used already",
                )
            })
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
