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
//! One server speaks both eras of the protocol, on every transport and per
//! request, with the same handlers:
//!
//! * **2026-07-28 (modern)**: each request carries its protocol version,
//!   the client's capabilities and identity in `_meta`, and is served on its
//!   own, statelessly: `server/discover`, results with `resultType` and
//!   cache hints, input from the client by multi round-trip requests
//!   (`input_required`, see [`McpContext::input`]), change notifications on
//!   `subscriptions/listen`, and the tasks extension when turned on.
//! * **2025-11-25 and before (legacy)**: `initialize` opens a session. Its
//!   lifecycle is enforced: before `initialize` only `ping` is answered
//!   (anything else gets `-32600`), `notifications/initialized` is handled
//!   before any request that follows it on the wire, and requests to the
//!   client (sampling, elicitation, roots) are sent only when the client
//!   declared the capability.
//!
//! A tool that fails answers with a result of `isError: true` for the model
//! to read; an unknown tool, resource or prompt is a JSON-RPC error.

mod catalog;
mod changes;
mod context;
pub(crate) mod envelopes;
pub(crate) mod era;
mod ids;
mod listen;
mod methods;
mod replicas;
mod request_state;
pub(crate) mod round_params;
mod run;
pub(crate) mod serve;
mod session;
mod shape;
pub mod shared;
mod skills;
mod tasks;
mod tools;
pub mod uri_template;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use jrpc::codec::Framing;
use jrpc::peer::{CancelProtocol, Peer, PeerBuilder};
use jrpc::transport::Connection;
use jrpc::{ConnectionConfig, Error};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::types::{
    CacheHint, CacheScope, CallToolResult, GetPromptResult, Implementation, JsonObject,
    ListChangedCapability, LoggingLevel, Prompt, ReadResourceResult, Resource, ResourceTemplate,
    ResourcesCapability, ServerCapabilities, Tool, TASKS_EXTENSION,
};
use catalog::{PromptEntry, ResourceEntry, TemplateEntry};
pub use changes::{Announced, Changes};
pub(crate) use context::RequestOutbound;
pub use context::{ClientRequestError, Input, McpContext};
#[cfg(feature = "http")]
pub(crate) use era::Modern;
#[cfg(feature = "http")]
pub(crate) use ids::random_id;
use request_state::StateKey;
use session::Session;
pub use shared::{InMemory, SharedState};
#[cfg(feature = "nats")]
pub use shared::{NatsState, NatsStateBuilder};
pub use skills::{Skill, SkillError, MAX_SKILL_BYTES, MAX_SKILL_FILES};
pub use tasks::{TaskSettings, TaskSupport};
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
    /// `info` as `_meta["io.modelcontextprotocol/serverInfo"]` of modern
    /// results.
    identity: shape::Identity,
    /// The envelopes modern requests carried last, read once for every
    /// connection and endpoint of the server ([`envelopes`]).
    envelopes: Arc<envelopes::Envelopes>,
    /// The logger name of log messages: the server's name.
    logger: Arc<str>,
    /// Where each tool is in `tools`, by name.
    tool_index: std::collections::HashMap<String, usize>,
    instructions: Option<String>,
    tools: Vec<ToolEntry>,
    resources: Vec<ResourceEntry>,
    templates: Vec<TemplateEntry>,
    prompts: Vec<PromptEntry>,
    completion: Option<catalog::CompleteHandler>,
    subscriptions: bool,
    list_changed: bool,
    page_size: usize,
    log_level: LoggingLevel,
    client_timeout: Duration,
    list_cache: CacheHint,
    read_cache: CacheHint,
    state_key: StateKey,
    state_ttl: Duration,
    tasks: Option<Arc<tasks::TaskStore>>,
    changes: Changes,
    /// A permit per open `subscriptions/listen`.
    listens: Arc<tokio::sync::Semaphore>,
    /// What the server shares with its replicas (its own memory unless
    /// told otherwise).
    shared: Arc<dyn SharedState>,
    /// Keeps the server among its replicas while it lives.
    _replicas: Option<tokio_util::sync::DropGuard>,
    /// The skills served (the Skills extension), when there are any.
    skills: Option<Arc<skills::set::SkillSet>>,
}

/// What the builder collects before the server exists.
struct Plan {
    catalog: Catalog,
    tasks: Option<TaskSettings>,
    task_support: Vec<(String, TaskSupport)>,
    max_subscriptions: usize,
    /// Whether `request_state_secret` was set (it wins over the shared
    /// state's key).
    own_secret: bool,
    /// Skills made in code.
    skills: Vec<Skill>,
    /// A folder of skills.
    skills_dir: Option<std::path::PathBuf>,
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
    /// The default cache hint of list results and `server/discover`: fresh
    /// for a minute, for anyone (the lists are the same for every caller).
    pub const DEFAULT_LIST_CACHE: CacheHint = CacheHint::new(Duration::from_secs(60), CacheScope::Public);
    /// The default cache hint of `resources/read`: stale at once, for the
    /// caller only (a resource may change at any time, and differ by
    /// caller).
    pub const DEFAULT_READ_CACHE: CacheHint = CacheHint::new(Duration::ZERO, CacheScope::Private);
    /// How long a multi round-trip request's `requestState` is good for: 10
    /// minutes, since a person may be answering.
    pub const DEFAULT_REQUEST_STATE_TTL: Duration = Duration::from_secs(600);
    /// The most `subscriptions/listen` streams open at once (default 1024);
    /// past it, one more gets `-32007`.
    pub const DEFAULT_MAX_SUBSCRIPTIONS: usize = 1024;

    /// A server named `name` at `version` (its `serverInfo`).
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> McpServerBuilder {
        McpServerBuilder {
            plan: Plan {
                catalog: Catalog {
                    info: Implementation::new(name, version),
                    identity: shape::Identity::new(&Implementation::new("", "")),
                    envelopes: Arc::default(),
                    logger: Arc::from(""),
                    tool_index: Default::default(),
                    instructions: None,
                    tools: Vec::new(),
                    resources: Vec::new(),
                    templates: Vec::new(),
                    prompts: Vec::new(),
                    completion: None,
                    subscriptions: false,
                    list_changed: false,
                    page_size: Self::DEFAULT_PAGE_SIZE,
                    log_level: LoggingLevel::Info,
                    client_timeout: Self::DEFAULT_CLIENT_TIMEOUT,
                    list_cache: Self::DEFAULT_LIST_CACHE,
                    read_cache: Self::DEFAULT_READ_CACHE,
                    state_key: StateKey::random(),
                    state_ttl: Self::DEFAULT_REQUEST_STATE_TTL,
                    tasks: None,
                    changes: Changes::new(256),
                    listens: Arc::new(tokio::sync::Semaphore::new(0)),
                    shared: Arc::new(InMemory::new()),
                    _replicas: None,
                    skills: None,
                },
                tasks: None,
                task_support: Vec::new(),
                max_subscriptions: Self::DEFAULT_MAX_SUBSCRIPTIONS,
                own_secret: false,
                skills: Vec::new(),
                skills_dir: None,
            },
        }
    }

    /// What the server shares with its replicas (see
    /// [`McpServerBuilder::shared_state`]): where an application keeps its
    /// own records so that every replica sees them, in
    /// [`Space::Server`](shared::Space::Server) by compare-and-set.
    pub fn shared_state(&self) -> &Arc<dyn SharedState> {
        &self.inner.shared
    }

    /// Who the server says it is.
    pub fn info(&self) -> &Implementation {
        &self.inner.info
    }

    /// What the server offers to a legacy session: tools, resources and
    /// prompts when it has any, and logging always.
    pub fn capabilities(&self) -> ServerCapabilities {
        self.capabilities_for(false)
    }

    /// What the server offers in `server/discover` (modern): the same, and
    /// its extensions.
    pub fn modern_capabilities(&self) -> ServerCapabilities {
        self.capabilities_for(true)
    }

    pub(crate) fn capabilities_for(&self, modern: bool) -> ServerCapabilities {
        let catalog = &self.inner;
        let listed = Some(ListChangedCapability {
            list_changed: Some(catalog.list_changed),
        });
        let mut extensions = BTreeMap::new();
        if modern && catalog.tasks.is_some() {
            extensions.insert(TASKS_EXTENSION.to_owned(), JsonObject::new());
        }
        if catalog.skills.is_some() {
            // Negotiated in both eras (SEP-2133): this server reads
            // directories too.
            let mut settings = JsonObject::new();
            settings.insert("directoryRead".into(), true.into());
            extensions.insert(crate::types::SKILLS_EXTENSION.to_owned(), settings);
        }
        let extensions = (!extensions.is_empty()).then_some(extensions);
        ServerCapabilities {
            tools: (!catalog.tools.is_empty()).then(|| listed.clone()).flatten(),
            resources: self.serves_resources().then_some(ResourcesCapability {
                subscribe: Some(catalog.subscriptions),
                list_changed: Some(catalog.list_changed),
            }),
            prompts: (!catalog.prompts.is_empty()).then(|| listed.clone()).flatten(),
            logging: Some(JsonObject::new()),
            completions: catalog.completion.is_some().then(JsonObject::new),
            experimental: None,
            extensions,
        }
    }

    /// Whether the server has resources: its own, templates, or skills'
    /// files.
    pub(crate) fn serves_resources(&self) -> bool {
        let catalog = &self.inner;
        !catalog.resources.is_empty() || !catalog.templates.is_empty() || catalog.skills.is_some()
    }

    /// The tool `name`.
    pub(crate) fn tool(&self, name: &str) -> Option<&ToolEntry> {
        self.inner.tool_index.get(name).map(|i| &self.inner.tools[*i])
    }

    /// Announces changes of the server's lists and resources to everyone
    /// listening: legacy sessions and modern `subscriptions/listen` streams.
    pub fn changes(&self) -> &Changes {
        &self.inner.changes
    }

    /// The tools, as `tools/list` describes them.
    pub fn tools(&self) -> impl Iterator<Item = &Tool> {
        self.inner.tools.iter().map(|entry| &entry.tool)
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
        self.connect_with(connection, None, |builder| builder)
    }

    /// [`connect`](Self::connect), with a transport that routes each
    /// request's messages to the client itself (Streamable HTTP).
    pub(crate) fn connect_with(
        &self,
        connection: Connection,
        outbound: Option<Arc<dyn RequestOutbound>>,
        facts: impl FnOnce(PeerBuilder) -> PeerBuilder,
    ) -> Peer {
        let mut builder = facts(self.peer_builder());
        if let Some(outbound) = outbound {
            builder = builder.extension(outbound);
        }
        builder.connect(connection)
    }

    /// The settings of one session's peer (its own session state, this
    /// server's methods and [`connection_config`](Self::connection_config),
    /// change notifications forwarded once it runs), for a transport that
    /// makes the peer itself: [`Server::serve_with`](jrpc::server::Server::serve_with)
    /// serves MCP on any listener this way.
    ///
    /// ```no_run
    /// use jrpc::server::Server;
    /// use jrpc::transport::unix::UnixListener;
    ///
    /// # async fn run(mcp: jrpc_mcp::McpServer) -> std::io::Result<()> {
    /// let listener = UnixListener::bind("/tmp/mcp.sock", Default::default(), 1 << 20).await?;
    /// let serving = Server::per_connection()
    ///     .max_connections(64)
    ///     .serve_with(listener, move |_| mcp.peer_builder());
    /// # serving.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn peer_builder(&self) -> PeerBuilder {
        let session = Session::new(self.inner.log_level);
        let server = self.clone();
        let forwarded = Arc::clone(&session);
        Peer::builder()
            .router(self.router())
            .connection(self.connection_config())
            .extension(session)
            .on_start(move |peer| server.forward_changes(peer.clone(), forwarded))
    }

    /// Serves a session on every connection `listener` accepts (TCP, Unix
    /// sockets, WebSocket, a transport of your own), newline-delimited,
    /// until shut down; with the defaults of [`Server`](jrpc::server::Server)
    /// for the connection bound and the shutdown grace. For other settings,
    /// give [`peer_builder`](Self::peer_builder) to
    /// [`Server::serve_with`](jrpc::server::Server::serve_with).
    pub fn serve(&self, listener: impl jrpc::transport::Listener) -> jrpc::server::Serving {
        let server = self.clone();
        jrpc::server::Server::per_connection().serve_with(listener, move |_| server.peer_builder())
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
            jrpc::transport::stdio::connection(Framing::Ndjson, max_frame_len).into_kinded_parts();
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
        let peer = self.connect(Connection::with_kinds(incoming, outgoing, info));
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
    plan: Plan,
}

impl McpServerBuilder {
    /// The server's title, for people.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.plan.catalog.info.title = Some(title.into());
        self
    }

    /// Its `serverInfo` in full.
    pub fn info(mut self, info: Implementation) -> Self {
        self.plan.catalog.info = info;
        self
    }

    /// How to use the server, for the model (`instructions` in the
    /// `initialize` result).
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.plan.catalog.instructions = Some(text.into());
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
        let tools = &mut self.plan.catalog.tools;
        tools.retain(|entry| entry.tool.name != tool.name);
        let param_headers = crate::headers::param_headers(&tool.input_schema)
            .unwrap_or_else(|why| {
                tracing::warn!(tool = %tool.name, %why, "clients will drop this tool: its x-mcp-header annotations are invalid");
                Vec::new()
            })
            .into();
        tools.push(ToolEntry {
            tool,
            handler,
            tasks: TaskSupport::Forbidden,
            param_headers,
        });
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
        let resources = &mut self.plan.catalog.resources;
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
        let templates = &mut self.plan.catalog.templates;
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
        let prompts = &mut self.plan.catalog.prompts;
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
        self.plan.catalog.completion = Some(catalog::complete_handler(handler));
        self
    }

    /// Let clients subscribe to the server's resources (the `subscribe`
    /// capability): `resources/subscribe` in legacy sessions, the
    /// `resourceSubscriptions` of `subscriptions/listen` in 2026-07-28.
    /// Subscribers hear of [`Changes::resource_updated`].
    pub fn resource_subscriptions(mut self, on: bool) -> Self {
        self.plan.catalog.subscriptions = on;
        self
    }

    /// Say that the lists of tools, prompts and resources may change (the
    /// `listChanged` capabilities), and send listeners the
    /// [`Changes`] announced: legacy sessions as `notifications/*/list_changed`,
    /// modern clients on `subscriptions/listen`. Default off.
    pub fn list_changed(mut self, on: bool) -> Self {
        self.plan.catalog.list_changed = on;
        self
    }

    /// The cache hint of list results and `server/discover` (2026-07-28):
    /// default [`McpServer::DEFAULT_LIST_CACHE`].
    pub fn list_cache(mut self, hint: CacheHint) -> Self {
        self.plan.catalog.list_cache = hint;
        self
    }

    /// The cache hint of `resources/read` results whose handler set none
    /// (2026-07-28): default [`McpServer::DEFAULT_READ_CACHE`].
    pub fn read_cache(mut self, hint: CacheHint) -> Self {
        self.plan.catalog.read_cache = hint;
        self
    }

    /// The secret `requestState` is signed with (at least 32 bytes), so
    /// that several servers behind one address accept each other's; by
    /// default each server has a random key of its own. Shorter secrets
    /// are refused.
    ///
    /// # Panics
    /// When `secret` is shorter than 32 bytes.
    pub fn request_state_secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        let secret = secret.as_ref();
        assert!(
            secret.len() >= 32,
            "a request-state secret needs at least 32 bytes"
        );
        self.plan.catalog.state_key = StateKey::from_secret(secret);
        self.plan.own_secret = true;
        self
    }

    /// Where the server keeps what its replicas share — tasks, change
    /// notifications, the `requestState` key, the application's own
    /// records ([`McpServer::shared_state`]): by default this process's
    /// memory ([`InMemory`]); [`NatsState`] (feature `nats`) for replicas
    /// behind a load balancer. Build the server inside a tokio runtime when
    /// the state is shared: it starts listening to the other replicas.
    ///
    /// ```no_run
    /// # #[cfg(feature = "nats")]
    /// # async fn run() -> std::io::Result<()> {
    /// use jrpc_mcp::server::{McpServer, NatsState, TaskSettings};
    ///
    /// let shared = NatsState::connect("nats://127.0.0.1:4222", "notes").await?;
    /// let server = McpServer::builder("notes", "1.0")
    ///     .tasks(TaskSettings::default())
    ///     .shared_state(shared)
    ///     .build();
    /// # Ok(()) }
    /// ```
    pub fn shared_state(mut self, state: impl SharedState) -> Self {
        self.plan.catalog.shared = Arc::new(state);
        self
    }

    /// How long a `requestState` is good for: default
    /// [`McpServer::DEFAULT_REQUEST_STATE_TTL`].
    pub fn request_state_ttl(mut self, ttl: Duration) -> Self {
        self.plan.catalog.state_ttl = ttl;
        self
    }

    /// Turn on the tasks extension (`io.modelcontextprotocol/tasks`,
    /// 2026-07-28): tools allowed to by [`task_support`](Self::task_support)
    /// may run as tasks for clients that declare the extension.
    pub fn tasks(mut self, settings: TaskSettings) -> Self {
        self.plan.tasks = Some(settings);
        self
    }

    /// Whether the tool `name` (added before or after this) may run as a
    /// task; see [`McpContext::run_as_task`].
    pub fn task_support(mut self, name: impl Into<String>, support: TaskSupport) -> Self {
        self.plan.task_support.push((name.into(), support));
        self
    }

    /// The most `subscriptions/listen` streams open at once: default
    /// [`McpServer::DEFAULT_MAX_SUBSCRIPTIONS`].
    pub fn max_subscriptions(mut self, streams: usize) -> Self {
        self.plan.max_subscriptions = streams;
        self
    }

    /// Items per page of `tools/list`, `resources/list`, ... (default 100).
    pub fn page_size(mut self, items: usize) -> Self {
        self.plan.catalog.page_size = items.max(1);
        self
    }

    /// The least severe log level sent before the client sets one with
    /// `logging/setLevel` (default info).
    pub fn log_level(mut self, level: LoggingLevel) -> Self {
        self.plan.catalog.log_level = level;
        self
    }

    /// How long to wait for the client to answer a request (sampling,
    /// elicitation, roots); default 5 minutes. The timeout of this side's
    /// calls, named as on `ConnectionConfig` and the clients.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.plan.catalog.client_timeout = timeout;
        self
    }

    /// Serves `skill` (the Skills extension, `io.modelcontextprotocol/skills`):
    /// its files as resources at `skill://<skill-path>/…`, its entry in
    /// `skills/list` and `skills/get`, its folders through
    /// `resources/directory/read`.
    ///
    /// ```
    /// use jrpc_mcp::server::{McpServer, Skill};
    ///
    /// let skill = Skill::new("---\nname: git-workflow\ndescription: Our Git conventions\n---\nBranch from main.\n")?;
    /// let server = McpServer::builder("docs", "1.0.0").skill(skill).build();
    /// assert!(server.capabilities().extensions.unwrap().contains_key("io.modelcontextprotocol/skills"));
    /// # Ok::<(), jrpc_mcp::server::SkillError>(())
    /// ```
    pub fn skill(mut self, skill: Skill) -> Self {
        self.plan.skills.push(skill);
        self
    }

    /// Serves the skills in folder `dir` (the Skills extension): every
    /// folder below it holding a `SKILL.md` is a skill at its path from
    /// `dir` (`dir/acme/refunds/SKILL.md` is `skill://acme/refunds/SKILL.md`;
    /// the folder's name is the skill's name). The folder is looked at
    /// every second: a skill changed on disk is served changed, and
    /// listeners are told the list of resources changed. A skill that
    /// breaks the rules (no frontmatter, a bad name, over 512 files or
    /// 16 MiB) is left out with a warning naming it.
    pub fn skills_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.plan.skills_dir = Some(dir.into());
        self
    }

    /// The server.
    pub fn build(self) -> McpServer {
        let Plan {
            mut catalog,
            tasks,
            task_support,
            max_subscriptions,
            own_secret,
            skills,
            skills_dir,
        } = self.plan;
        catalog.identity = shape::Identity::new(&catalog.info);
        catalog.logger = Arc::from(catalog.info.name.as_str());
        catalog.tool_index = catalog
            .tools
            .iter()
            .enumerate()
            .map(|(i, entry)| (entry.tool.name.clone(), i))
            .collect();
        let replica = ids::random_id();
        catalog.tasks = tasks.map(|settings| {
            tasks::TaskStore::new(
                settings,
                Arc::clone(&catalog.shared),
                catalog.changes.clone(),
                replica,
            )
        });
        if !own_secret {
            if let Some(secret) = catalog.shared.request_state_secret() {
                catalog.state_key = StateKey::from_secret(&secret);
            }
        }
        if catalog.shared.is_shared() {
            catalog._replicas = replicas::join(
                &catalog.shared,
                &catalog.changes,
                catalog.tasks.as_ref().map(Arc::downgrade),
            );
        }
        catalog.listens = Arc::new(tokio::sync::Semaphore::new(
            max_subscriptions.min(tokio::sync::Semaphore::MAX_PERMITS),
        ));
        if !skills.is_empty() || skills_dir.is_some() {
            let set = Arc::new(skills::set::SkillSet::new(skills, skills_dir));
            set.watch(catalog.changes.clone());
            catalog.skills = Some(set);
        }
        for (name, support) in task_support {
            if let Some(entry) = catalog.tools.iter_mut().find(|entry| entry.tool.name == name) {
                entry.tasks = support;
            }
        }
        McpServer {
            inner: Arc::new(catalog),
        }
    }
}
