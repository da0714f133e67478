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
//! Dropping a call's future cancels it: the server gets
//! `notifications/cancelled`.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use jrpc::client::Client;
use jrpc::peer::CancelProtocol;
use jrpc::transport::Connection;
use jrpc::{CallError, ConnectionConfig, Error, RequestContext, Router};
use serde::de::DeserializeOwned;
use serde::Serialize;

#[cfg(feature = "http-client")]
mod http;

use crate::types::{
    CallToolResult, ClientCapabilities, CompleteParams, CompleteResult, CreateMessageParams,
    CreateMessageResult, ElicitParams, ElicitResult, ElicitationCapability, GetPromptResult, Implementation,
    InitializeResult, JsonObject, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListRootsResult, ListToolsResult, LoggingLevel, LoggingMessageParams, ProgressParams, ProgressToken,
    Prompt, ReadResourceResult, Resource, ResourceTemplate, Root, RootsCapability, ServerCapabilities, Tool,
    LATEST_LEGACY_VERSION, LEGACY_PROTOCOL_VERSIONS,
};

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type Sampler =
    Arc<dyn Fn(CreateMessageParams) -> BoxFuture<Result<CreateMessageResult, Error>> + Send + Sync>;
type Elicitor = Arc<dyn Fn(ElicitParams) -> BoxFuture<Result<ElicitResult, Error>> + Send + Sync>;
type Listener<T> = Arc<dyn Fn(T) + Send + Sync>;

/// Why an MCP client call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpClientError {
    /// The server could not be reached or started.
    #[error("cannot reach the server: {0}")]
    Connect(#[from] std::io::Error),
    /// The server answered `initialize` with a protocol revision this
    /// client does not speak.
    #[error("the server speaks protocol {0}, which this client does not")]
    UnsupportedVersion(String),
    /// The call failed: the server answered with an error, did not answer
    /// in time, or the connection closed.
    #[error(transparent)]
    Call(#[from] CallError),
}

impl McpClientError {
    /// The server's error object, when it answered with one.
    pub fn rpc(&self) -> Option<&Error> {
        match self {
            McpClientError::Call(e) => e.rpc(),
            _ => None,
        }
    }
}

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
        router.fallback(
            move |method: String, params: Option<Box<serde_json::value::RawValue>>, ctx: RequestContext| {
                let other = other.clone();
                async move {
                    // Only notifications reach a listener; a request the
                    // client does not serve is "method not found".
                    if ctx.id().is_some() {
                        return Err::<(), _>(Error::method_not_found());
                    }
                    if let Some(listener) = other {
                        let params = params.and_then(|p| serde_json::from_str(p.get()).ok());
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

    /// Spawns `command` as an MCP server over stdio and initializes.
    pub async fn spawn(
        self,
        command: impl Into<tokio::process::Command>,
    ) -> Result<McpClient, McpClientError> {
        let client = self.jrpc_client().spawn(command)?;
        self.initialize(client).await
    }

    /// Connects to a Streamable HTTP endpoint (`http(s)://…/mcp`):
    /// every message is POSTed, replies come as JSON or as SSE streams, the
    /// server's own messages on the standalone GET stream; closing the
    /// client ends the session (`DELETE`).
    #[cfg(feature = "http-client")]
    pub async fn connect_http(self, url: &str) -> Result<McpClient, McpClientError> {
        let mut builder = Client::builder();
        for (name, value) in &self.headers {
            builder = builder.header(name, value);
        }
        let http = builder.http(url)?;
        let (connection, session) = http::HttpSession::connect(http);
        let client = self
            .jrpc_client()
            .connect_with(Once(std::sync::Mutex::new(Some(connection))))
            .await?;
        let mut mcp = self.initialize(client).await?;
        session.set_version(mcp.protocol_version());
        tokio::spawn(Arc::clone(&session).listen());
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

    /// Initializes over a connection of your own (an in-memory pipe, a
    /// socket).
    pub async fn connect(self, connection: Connection) -> Result<McpClient, McpClientError> {
        let client = self
            .jrpc_client()
            .connect_with(Once(std::sync::Mutex::new(Some(connection))))
            .await?;
        self.initialize(client).await
    }

    async fn initialize(self, client: Client) -> Result<McpClient, McpClientError> {
        let params = serde_json::json!({
            "protocolVersion": LATEST_LEGACY_VERSION,
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
        Ok(McpClient {
            client,
            server: result,
            progress: self.on_progress.is_some(),
            next_token: std::sync::atomic::AtomicI64::new(1),
            closing: None,
        })
    }
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

/// A client of one MCP server, initialized.
pub struct McpClient {
    client: Client,
    server: InitializeResult,
    /// Whether calls carry progress tokens (a progress listener is set).
    progress: bool,
    next_token: std::sync::atomic::AtomicI64,
    /// What closing does besides closing the connection (ending an HTTP
    /// session).
    closing: Option<Box<dyn FnOnce() -> BoxFuture<()> + Send + Sync>>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("server", &self.server.server_info)
            .field("protocol_version", &self.server.protocol_version)
            .finish_non_exhaustive()
    }
}

impl McpClient {
    /// Who the server says it is.
    pub fn server_info(&self) -> &Implementation {
        &self.server.server_info
    }

    /// What the server offers.
    pub fn server_capabilities(&self) -> &ServerCapabilities {
        &self.server.capabilities
    }

    /// The protocol revision agreed on.
    pub fn protocol_version(&self) -> &str {
        &self.server.protocol_version
    }

    /// The server's instructions for the model, if any.
    pub fn instructions(&self) -> Option<&str> {
        self.server.instructions.as_deref()
    }

    async fn request<R: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> Result<R, McpClientError> {
        Ok(self.client.call(method, params).await?)
    }

    /// `_meta` with a fresh progress token, when progress is listened to.
    fn meta(&self) -> Option<serde_json::Value> {
        self.progress.then(|| {
            let token = self.next_token.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            serde_json::json!({ "progressToken": ProgressToken::Number(token) })
        })
    }

    /// Pages through a list, following cursors to the end.
    async fn list_all<P: DeserializeOwned, T>(
        &self,
        method: &str,
        take: impl Fn(P) -> (Vec<T>, Option<String>),
    ) -> Result<Vec<T>, McpClientError> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        // Bounded, in case a server hands out cursors forever.
        for _ in 0..10_000 {
            let params = match &cursor {
                Some(cursor) => serde_json::json!({ "cursor": cursor }),
                None => serde_json::json!({}),
            };
            let (items, next) = take(self.request(method, params).await?);
            all.extend(items);
            match next {
                Some(next) if Some(&next) != cursor.as_ref() => cursor = Some(next),
                _ => return Ok(all),
            }
        }
        Ok(all)
    }

    /// Every tool, following cursors.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, McpClientError> {
        self.list_all("tools/list", |page: ListToolsResult| {
            (page.tools, page.next_cursor)
        })
        .await
    }

    /// Calls a tool. A tool that failed is a result with
    /// [`failed`](CallToolResult::failed); an unknown tool or a broken
    /// connection is an error.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: impl Serialize,
    ) -> Result<CallToolResult, McpClientError> {
        let arguments =
            serde_json::to_value(arguments).map_err(|e| CallError::Encode(e.to_string().into()))?;
        let mut params = serde_json::json!({ "name": name, "arguments": arguments });
        if let Some(meta) = self.meta() {
            params["_meta"] = meta;
        }
        self.request("tools/call", params).await
    }

    /// Every resource, following cursors.
    pub async fn list_resources(&self) -> Result<Vec<Resource>, McpClientError> {
        self.list_all("resources/list", |page: ListResourcesResult| {
            (page.resources, page.next_cursor)
        })
        .await
    }

    /// Every resource template, following cursors.
    pub async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, McpClientError> {
        self.list_all("resources/templates/list", |page: ListResourceTemplatesResult| {
            (page.resource_templates, page.next_cursor)
        })
        .await
    }

    /// Reads a resource.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, McpClientError> {
        self.request("resources/read", serde_json::json!({ "uri": uri }))
            .await
    }

    /// Every prompt, following cursors.
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, McpClientError> {
        self.list_all("prompts/list", |page: ListPromptsResult| {
            (page.prompts, page.next_cursor)
        })
        .await
    }

    /// Gets a prompt with its arguments.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: BTreeMap<String, String>,
    ) -> Result<GetPromptResult, McpClientError> {
        self.request(
            "prompts/get",
            serde_json::json!({ "name": name, "arguments": arguments }),
        )
        .await
    }

    /// Asks for completions of a prompt's or template's argument.
    pub async fn complete(&self, params: CompleteParams) -> Result<CompleteResult, McpClientError> {
        self.request("completion/complete", params).await
    }

    /// Sets the least severe log level the server sends.
    pub async fn set_log_level(&self, level: LoggingLevel) -> Result<(), McpClientError> {
        let _: serde_json::Value = self
            .request("logging/setLevel", serde_json::json!({ "level": level }))
            .await?;
        Ok(())
    }

    /// Pings the server.
    pub async fn ping(&self) -> Result<(), McpClientError> {
        let _: serde_json::Value = self.request("ping", serde_json::json!({})).await?;
        Ok(())
    }

    /// Closes the session (a spawned server gets its stdin closed and a
    /// moment to exit); returns why it ended.
    pub async fn close(self) -> Arc<str> {
        if let Some(closing) = self.closing {
            closing().await;
        }
        self.client.close().await
    }
}
