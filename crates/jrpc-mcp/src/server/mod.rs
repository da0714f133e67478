//! The MCP server: tools, resources, prompts and instructions, served on
//! any jrpc connection (stdio here; Streamable HTTP builds on it).
//!
//! ```no_run
//! use jrpc_mcp::server::{McpServer, NoArgs, ToolError};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Add { a: f64, b: f64 }
//!
//! # async fn run() {
//! let server = McpServer::builder("calculator", "1.0.0")
//!     .instructions("Adds numbers.")
//!     .tool("add", "Adds two numbers", |args: Add, _cx| async move {
//!         Ok::<_, ToolError>(format!("{}", args.a + args.b))
//!     })
//!     .tool("ping", "Says pong", |_: NoArgs, _cx| async { Ok::<_, ToolError>("pong") })
//!     .build();
//! server.serve_stdio().await; // until stdin closes
//! # }
//! ```
//!
//! The lifecycle is enforced: before `initialize` only `ping` is answered
//! (anything else gets `-32600`), `notifications/initialized` is handled
//! before any request that follows it on the wire, and requests to the
//! client (sampling, elicitation, roots) are sent only when the client
//! declared the capability. A tool that fails answers with a result of
//! `isError: true` for the model to read; an unknown tool, resource or
//! prompt is a JSON-RPC error.

mod catalog;
mod context;
mod methods;
mod session;
mod tools;
pub mod uri_template;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use jrpc::codec::Framing;
use jrpc::peer::{CancelProtocol, Peer};
use jrpc::transport::Connection;
use jrpc::{ConnectionConfig, Error, Router};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::types::{
    CallToolResult, GetPromptResult, Implementation, JsonObject, ListChangedCapability, LoggingLevel, Prompt,
    ReadResourceResult, Resource, ResourceTemplate, ResourcesCapability, ServerCapabilities, Tool,
};
use catalog::{PromptEntry, ResourceEntry, TemplateEntry};
pub(crate) use context::RequestOutbound;
pub use context::{ClientRequestError, McpContext};
use session::Session;
use tools::ToolEntry;
pub use tools::{NoArgs, Structured, ToolError, ToolOutput};

/// An MCP server: what it offers, ready to serve any number of sessions.
/// Cloning is cheap.
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<Catalog>,
}

struct Catalog {
    info: Implementation,
    instructions: Option<String>,
    tools: Vec<ToolEntry>,
    resources: Vec<ResourceEntry>,
    templates: Vec<TemplateEntry>,
    prompts: Vec<PromptEntry>,
    completion: Option<catalog::CompleteHandler>,
    subscriptions: bool,
    page_size: usize,
    log_level: LoggingLevel,
    client_timeout: Duration,
}

impl McpServer {
    /// The default page size of list results: 100 items.
    pub const DEFAULT_PAGE_SIZE: usize = 100;
    /// The default wait for the client to answer a request (sampling,
    /// elicitation, roots): 5 minutes, since a person may be answering.
    pub const DEFAULT_CLIENT_TIMEOUT: Duration = Duration::from_secs(300);
    /// How long calls may go on after stdin closes: 1 s (clients wait a
    /// little longer before they signal the server).
    pub const STDIO_SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

    /// A server named `name` at `version` (its `serverInfo`).
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> McpServerBuilder {
        McpServerBuilder {
            catalog: Catalog {
                info: Implementation::new(name, version),
                instructions: None,
                tools: Vec::new(),
                resources: Vec::new(),
                templates: Vec::new(),
                prompts: Vec::new(),
                completion: None,
                subscriptions: false,
                page_size: Self::DEFAULT_PAGE_SIZE,
                log_level: LoggingLevel::Info,
                client_timeout: Self::DEFAULT_CLIENT_TIMEOUT,
            },
        }
    }

    /// Who the server says it is.
    pub fn info(&self) -> &Implementation {
        &self.inner.info
    }

    /// What the server offers: tools, resources and prompts when it has
    /// any, and logging always.
    pub fn capabilities(&self) -> ServerCapabilities {
        let catalog = &self.inner;
        let listed = Some(ListChangedCapability {
            list_changed: Some(false),
        });
        ServerCapabilities {
            tools: (!catalog.tools.is_empty()).then(|| listed.clone()).flatten(),
            resources: (!catalog.resources.is_empty() || !catalog.templates.is_empty()).then_some(
                ResourcesCapability {
                    subscribe: Some(catalog.subscriptions),
                    list_changed: Some(false),
                },
            ),
            prompts: (!catalog.prompts.is_empty()).then(|| listed.clone()).flatten(),
            logging: Some(JsonObject::new()),
            completions: catalog.completion.is_some().then(JsonObject::new),
            experimental: None,
        }
    }

    /// The tools, as `tools/list` describes them.
    pub fn tools(&self) -> impl Iterator<Item = &Tool> {
        self.inner.tools.iter().map(|entry| &entry.tool)
    }

    /// The JSON-RPC methods of the protocol. Each connection it serves needs
    /// a session of its own, which [`connect`](Self::connect) and
    /// [`serve_stdio`](Self::serve_stdio) give it.
    pub(crate) fn router(&self) -> Router {
        methods::router(self)
    }

    /// How MCP connections behave: MCP's cancellation
    /// (`notifications/cancelled`, no answer for a cancelled request),
    /// requests ordered after the notifications before them (so that
    /// `notifications/initialized` comes first), newline-delimited frames,
    /// and the client's answers awaited for the client timeout.
    pub fn connection_config(&self) -> ConnectionConfig {
        ConnectionConfig::default()
            .framing(Framing::Ndjson)
            .cancellation(CancelProtocol::mcp())
            .ordered(true)
            .call_timeout(self.inner.client_timeout)
            .idle_timeout(None)
    }

    /// Serves one session over `connection` (stdio, a child's pipes, a
    /// socket, an in-memory pipe of your own); the peer runs until the
    /// connection closes.
    pub fn connect(&self, connection: Connection) -> Peer {
        self.connect_with(connection, None)
    }

    /// [`connect`](Self::connect), with a transport that routes each
    /// request's messages to the client itself (Streamable HTTP).
    pub(crate) fn connect_with(
        &self,
        connection: Connection,
        outbound: Option<Arc<dyn RequestOutbound>>,
    ) -> Peer {
        let mut builder = Peer::builder()
            .router(self.router())
            .config(self.connection_config())
            .extension(Session::new(self.inner.log_level));
        if let Some(outbound) = outbound {
            builder = builder.extension(outbound);
        }
        builder.connect(connection)
    }

    /// Serves one session on this process's stdin and stdout until stdin
    /// closes; returns why the session ended. Nothing else may write to
    /// stdout meanwhile: send logs to stderr.
    ///
    /// Closing stdin is how an MCP client shuts a stdio server down: calls
    /// still running get [`STDIO_SHUTDOWN_GRACE`](Self::STDIO_SHUTDOWN_GRACE)
    /// to finish, then they are cancelled, so that the server exits before
    /// the client resorts to signals.
    pub async fn serve_stdio(&self) -> Arc<str> {
        let max_frame_len = jrpc::message::Limits::DEFAULT_MAX_FRAME_LEN;
        let (incoming, outgoing, info) =
            jrpc::transport::stdio::connection(Framing::Ndjson, max_frame_len).into_parts();
        let stdin_closed = Arc::new(tokio::sync::Notify::new());
        let notify = Arc::clone(&stdin_closed);
        // Tells when stdin has ended, passing every frame through.
        let incoming = futures_util::stream::unfold(Some(incoming), move |stream| {
            let notify = Arc::clone(&notify);
            async move {
                let mut stream = stream?;
                match futures_util::StreamExt::next(&mut stream).await {
                    Some(item) => Some((item, Some(stream))),
                    None => {
                        notify.notify_one();
                        None
                    }
                }
            }
        });
        let peer = self.connect(Connection::new(incoming, outgoing, info));
        tokio::select! {
            reason = peer.closed() => return reason,
            () = stdin_closed.notified() => {}
        }
        match tokio::time::timeout(Self::STDIO_SHUTDOWN_GRACE, peer.closed()).await {
            Ok(reason) => reason,
            Err(_) => {
                tracing::info!("stdin closed: cancelling the calls still running");
                peer.abort();
                peer.closed().await
            }
        }
    }
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |items: Vec<&str>| items.join(", ");
        f.debug_struct("McpServer")
            .field("info", &self.inner.info)
            .field(
                "tools",
                &names(self.inner.tools.iter().map(|t| t.tool.name.as_str()).collect()),
            )
            .field(
                "resources",
                &names(
                    self.inner
                        .resources
                        .iter()
                        .map(|r| r.resource.uri.as_str())
                        .collect(),
                ),
            )
            .field(
                "prompts",
                &names(
                    self.inner
                        .prompts
                        .iter()
                        .map(|p| p.prompt.name.as_str())
                        .collect(),
                ),
            )
            .finish_non_exhaustive()
    }
}

/// Builds an [`McpServer`]. A tool, resource, template or prompt added
/// under a name (or URI) already taken replaces the earlier one.
pub struct McpServerBuilder {
    catalog: Catalog,
}

impl McpServerBuilder {
    /// The server's title, for people.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.catalog.info.title = Some(title.into());
        self
    }

    /// Its `serverInfo` in full.
    pub fn info(mut self, info: Implementation) -> Self {
        self.catalog.info = info;
        self
    }

    /// How to use the server, for the model (`instructions` in the
    /// `initialize` result).
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.catalog.instructions = Some(text.into());
        self
    }

    /// A tool whose arguments are `A` (its input schema comes from `A`'s
    /// [`JsonSchema`]) and whose output is `R` (text, content, or
    /// [`Structured`] with an output schema). Arguments that do not decode
    /// get a result with `isError: true` saying why.
    pub fn tool<A, R, F, Fut>(
        self,
        name: impl Into<String>,
        description: impl Into<String>,
        handler: F,
    ) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        R: ToolOutput,
        F: Fn(A, McpContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
    {
        self.tool_with(Tool::new(name).description(description), handler)
    }

    /// As [`tool`](Self::tool), described by `tool` (title, annotations,
    /// icons); its input and output schemas come from `A` and `R`.
    pub fn tool_with<A, R, F, Fut>(self, mut tool: Tool, handler: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        R: ToolOutput,
        F: Fn(A, McpContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
    {
        tool.input_schema = tools::input_schema::<A>();
        tool.output_schema = R::output_schema();
        self.add_tool(tool, tools::typed_handler(handler))
    }

    /// A tool described by `tool` as it is (its schemas given as JSON),
    /// whose handler takes the arguments as a JSON object.
    pub fn raw_tool<F, Fut>(self, tool: Tool, handler: F) -> Self
    where
        F: Fn(JsonObject, McpContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<CallToolResult, ToolError>> + Send + 'static,
    {
        let schema = tool.input_schema.clone();
        let tool = tool.input_schema(schema);
        self.add_tool(tool, tools::raw_handler(handler))
    }

    fn add_tool(mut self, tool: Tool, handler: tools::ToolHandler) -> Self {
        let tools = &mut self.catalog.tools;
        tools.retain(|entry| entry.tool.name != tool.name);
        tools.push(ToolEntry { tool, handler });
        self
    }

    /// A resource at a fixed URI; `read` gets the URI and returns its
    /// contents (one [`ResourceContents`](crate::types::ResourceContents)
    /// or several).
    pub fn resource<F, Fut, R>(mut self, resource: Resource, read: F) -> Self
    where
        F: Fn(String, McpContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, Error>> + Send + 'static,
        R: Into<ReadResourceResult>,
    {
        let read = catalog::read_handler(move |uri, _vars, cx| read(uri, cx));
        let resources = &mut self.catalog.resources;
        resources.retain(|entry| entry.resource.uri != resource.uri);
        resources.push(ResourceEntry { resource, read });
        self
    }

    /// Resources named by a URI template (RFC 6570: `{var}` for one path
    /// segment, `{+var}` for the rest); `read` gets the URI and the
    /// template's variables, decoded.
    pub fn resource_template<F, Fut, R>(mut self, template: ResourceTemplate, read: F) -> Self
    where
        F: Fn(String, BTreeMap<String, String>, McpContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, Error>> + Send + 'static,
        R: Into<ReadResourceResult>,
    {
        let parsed = uri_template::UriTemplate::parse(&template.uri_template);
        let templates = &mut self.catalog.templates;
        templates.retain(|entry| entry.template.uri_template != template.uri_template);
        templates.push(TemplateEntry {
            template,
            parsed,
            read: catalog::read_handler(read),
        });
        self
    }

    /// A prompt; `get` gets its arguments (the required ones are checked
    /// before it is called) and returns its messages.
    pub fn prompt<F, Fut, R>(mut self, prompt: Prompt, get: F) -> Self
    where
        F: Fn(BTreeMap<String, String>, McpContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, Error>> + Send + 'static,
        R: Into<GetPromptResult>,
    {
        let prompts = &mut self.catalog.prompts;
        prompts.retain(|entry| entry.prompt.name != prompt.name);
        prompts.push(PromptEntry {
            prompt,
            get: catalog::prompt_handler(get),
        });
        self
    }

    /// Suggestions for prompt arguments and resource template variables
    /// (`completion/complete`; the `completions` capability). The handler
    /// gets what is being completed and what has been typed;
    /// [`Completion::of`](crate::types::Completion::of) keeps to the 100
    /// values a reply may hold.
    pub fn completion<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(crate::types::CompleteParams, McpContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<crate::types::Completion, Error>> + Send + 'static,
    {
        self.catalog.completion = Some(catalog::complete_handler(handler));
        self
    }

    /// Accept `resources/subscribe` and `resources/unsubscribe` for the
    /// server's resources (the `subscribe` capability). A session's
    /// subscriptions are kept for [`McpContext::is_subscribed`]; the
    /// server does not yet announce changes by itself.
    pub fn resource_subscriptions(mut self, on: bool) -> Self {
        self.catalog.subscriptions = on;
        self
    }

    /// Items per page of `tools/list`, `resources/list`, ... (default 100).
    pub fn page_size(mut self, items: usize) -> Self {
        self.catalog.page_size = items.max(1);
        self
    }

    /// The least severe log level sent before the client sets one with
    /// `logging/setLevel` (default info).
    pub fn log_level(mut self, level: LoggingLevel) -> Self {
        self.catalog.log_level = level;
        self
    }

    /// How long to wait for the client to answer a request (sampling,
    /// elicitation, roots); default 5 minutes.
    pub fn client_timeout(mut self, timeout: Duration) -> Self {
        self.catalog.client_timeout = timeout;
        self
    }

    /// The server.
    pub fn build(self) -> McpServer {
        McpServer {
            inner: Arc::new(self.catalog),
        }
    }
}
