//! The protocol's methods as JSON-RPC handlers: the lifecycle, the lists,
//! and the calls into tools, resources and prompts.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use jrpc::message::codes::INVALID_PARAMS;
use jrpc::middleware::{BoxCallService, Call, CallFuture, Layer, RawResult, Service, ServiceExt};
use jrpc::{Error, RequestContext, Router};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::context::{McpContext, RequestOutbound};
use super::session::{Phase, Session};
use super::McpServer;
use crate::types::{
    codes, negotiate_version, CallToolParams, CallToolResult, CompleteParams, CompleteResult,
    GetPromptParams, GetPromptResult, InitializeParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedParams, ReadResourceParams,
    ReadResourceResult, RequestMeta, SetLevelParams,
};

/// Params that carry nothing but, perhaps, `_meta` (`ping`, notifications).
#[derive(Debug, Default, Deserialize)]
struct MetaOnly {
    #[serde(rename = "_meta", default)]
    _meta: Option<RequestMeta>,
}

/// The empty result: `{}`.
#[derive(Debug, Serialize)]
struct Empty {}

/// Refuses the protocol's requests (but `initialize` and `ping`) until the
/// session is initialized, before their params are even looked at. Methods
/// the server does not have pass through, to be answered -32601.
#[derive(Clone)]
struct Lifecycle {
    gated: Arc<HashSet<&'static str>>,
}

impl Layer<BoxCallService> for Lifecycle {
    type Service = LifecycleService;

    fn layer(&self, inner: BoxCallService) -> LifecycleService {
        LifecycleService {
            gated: Arc::clone(&self.gated),
            inner,
        }
    }
}

#[derive(Clone)]
struct LifecycleService {
    gated: Arc<HashSet<&'static str>>,
    inner: BoxCallService,
}

impl Service<Call> for LifecycleService {
    type Response = RawResult;
    type Error = Error;
    type Future = CallFuture;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: Call) -> CallFuture {
        if let Some(refusal) = refuse_request(&call) {
            return Box::pin(async move { Err(refusal) });
        }
        if !call.is_notification() && self.gated.contains(call.method()) {
            let session = call.get::<Arc<Session>>();
            if session.is_some_and(|s| s.state().phase == Phase::New) {
                return Box::pin(async { Err(not_initialized()) });
            }
        }
        let inner = self.inner.clone();
        Box::pin(inner.oneshot(call))
    }
}

/// What MCP forbids that JSON-RPC allows: a null or fractional request id
/// (ids are strings or integers), and a notification's method called as a
/// request (it has no result to give).
fn refuse_request(call: &Call) -> Option<Error> {
    let id = call.id()?;
    if id.is_null() {
        return Some(Error::invalid_request().with_data("MCP request ids must not be null"));
    }
    if id.as_number_text().is_some_and(|n| n.contains(['.', 'e', 'E'])) {
        return Some(Error::invalid_request().with_data("MCP request ids are strings or integers"));
    }
    if call.method().starts_with("notifications/") {
        return Some(Error::method_not_found().with_data("a notification's method, sent as a request"));
    }
    None
}

pub(crate) fn not_initialized() -> Error {
    Error::invalid_request().with_data("the session is not initialized: send initialize first")
}

pub(crate) fn router(server: &McpServer) -> Router {
    let router = methods(server);
    let gated = router
        .method_names()
        .into_iter()
        .filter_map(|name| GATED.iter().copied().find(|known| *known == name))
        .collect();
    router.layer(Lifecycle {
        gated: Arc::new(gated),
    })
}

/// Every request of the protocol that needs an initialized session.
const GATED: &[&str] = &[
    "logging/setLevel",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "resources/subscribe",
    "resources/unsubscribe",
];

fn methods(server: &McpServer) -> Router {
    let s = server.clone();
    let mut router = Router::new()
        .method("initialize", move |p: InitializeParams, ctx: RequestContext| {
            let s = s.clone();
            async move { s.initialize(p, &ctx) }
        })
        .method("ping", |_: Option<MetaOnly>| async { Ok(Empty {}) })
        .notification(
            "notifications/initialized",
            |_: Option<MetaOnly>, ctx: RequestContext| async move {
                if let Ok(session) = Session::of(&ctx) {
                    // Only once initialize has been answered does it count.
                    let initialized = session.state().phase == Phase::Initialized;
                    if initialized {
                        session.set_ready();
                    }
                }
            },
        )
        .method(
            "logging/setLevel",
            |p: SetLevelParams, ctx: RequestContext| async move {
                Session::ready(&ctx)?.state().log_level = p.level;
                Ok(Empty {})
            },
        );
    let capabilities = server.capabilities();
    if capabilities.tools.is_some() {
        let (list, call) = (server.clone(), server.clone());
        router = router
            .method(
                "tools/list",
                move |p: Option<PaginatedParams>, ctx: RequestContext| {
                    let s = list.clone();
                    async move { s.list_tools(p.unwrap_or_default(), &ctx) }
                },
            )
            .method("tools/call", move |p: CallToolParams, ctx: RequestContext| {
                let s = call.clone();
                async move { s.call_tool(p, ctx).await }
            });
    }
    if capabilities.resources.is_some() {
        let (list, templates, read) = (server.clone(), server.clone(), server.clone());
        router = router
            .method(
                "resources/list",
                move |p: Option<PaginatedParams>, ctx: RequestContext| {
                    let s = list.clone();
                    async move { s.list_resources(p.unwrap_or_default(), &ctx) }
                },
            )
            .method(
                "resources/templates/list",
                move |p: Option<PaginatedParams>, ctx: RequestContext| {
                    let s = templates.clone();
                    async move { s.list_templates(p.unwrap_or_default(), &ctx) }
                },
            )
            .method(
                "resources/read",
                move |p: ReadResourceParams, ctx: RequestContext| {
                    let s = read.clone();
                    async move { s.read_resource(p, ctx).await }
                },
            );
    }
    if capabilities.resources.as_ref().and_then(|r| r.subscribe) == Some(true) {
        let (subscribe, unsubscribe) = (server.clone(), server.clone());
        router = router
            .method(
                "resources/subscribe",
                move |p: ReadResourceParams, ctx: RequestContext| {
                    let s = subscribe.clone();
                    async move { s.subscribe(p, &ctx, true) }
                },
            )
            .method(
                "resources/unsubscribe",
                move |p: ReadResourceParams, ctx: RequestContext| {
                    let s = unsubscribe.clone();
                    async move { s.subscribe(p, &ctx, false) }
                },
            );
    }
    if capabilities.completions.is_some() {
        let complete = server.clone();
        router = router.method(
            "completion/complete",
            move |p: CompleteParams, ctx: RequestContext| {
                let s = complete.clone();
                async move { s.complete(p, ctx).await }
            },
        );
    }
    if capabilities.prompts.is_some() {
        let (list, get) = (server.clone(), server.clone());
        router = router
            .method(
                "prompts/list",
                move |p: Option<PaginatedParams>, ctx: RequestContext| {
                    let s = list.clone();
                    async move { s.list_prompts(p.unwrap_or_default(), &ctx) }
                },
            )
            .method("prompts/get", move |p: GetPromptParams, ctx: RequestContext| {
                let s = get.clone();
                async move { s.get_prompt(p, ctx).await }
            });
    }
    router
}

/// `-32002`, naming the URI.
fn resource_not_found(uri: &str) -> Error {
    Error::new(codes::RESOURCE_NOT_FOUND, "Resource not found").with_data(&serde_json::json!({ "uri": uri }))
}

/// Which items make the page that starts at `cursor` (an offset this
/// server handed out), and where the next one starts.
fn page(
    len: usize,
    cursor: Option<&str>,
    size: usize,
) -> Result<(std::ops::Range<usize>, Option<String>), Error> {
    let start = match cursor {
        None => 0,
        Some(cursor) => cursor
            .parse::<usize>()
            .ok()
            .filter(|start| *start <= len)
            .ok_or_else(|| {
                Error::new(INVALID_PARAMS, "Invalid cursor").with_data(&format!("unknown cursor {cursor:?}"))
            })?,
    };
    let end = (start + size).min(len);
    let next = (end < len).then(|| end.to_string());
    Ok((start..end, next))
}

/// Runs `work` with a token that is cancelled if the work is dropped before
/// it finishes (the request was cancelled, or the connection closed).
async fn cancellable<T>(mut guard: Unfinished, work: impl std::future::Future<Output = T>) -> T {
    let out = work.await;
    guard.finished = true;
    out
}

/// A request being served: if it is dropped before it finishes (cancelled,
/// or its connection closed), its token is cancelled and the transport is
/// told no response will come.
struct Unfinished {
    token: CancellationToken,
    outbound: Option<(Arc<dyn RequestOutbound>, jrpc::Id)>,
    finished: bool,
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.token.cancel();
        if let Some((outbound, id)) = &self.outbound {
            outbound.abandoned(id);
        }
    }
}

impl McpServer {
    fn initialize(&self, params: InitializeParams, ctx: &RequestContext) -> Result<InitializeResult, Error> {
        let session = Session::of(ctx)?;
        let mut state = session.state();
        if state.phase != Phase::New {
            return Err(Error::invalid_request().with_data("the session is already initialized"));
        }
        let version = negotiate_version(&params.protocol_version);
        state.phase = Phase::Initialized;
        state.protocol_version = version;
        state.client_info = Some(params.client_info);
        state.client_capabilities = params.capabilities;
        Ok(InitializeResult {
            protocol_version: version.to_owned(),
            capabilities: self.capabilities(),
            server_info: self.inner.info.clone(),
            instructions: self.inner.instructions.clone(),
            meta: None,
        })
    }

    fn context(
        &self,
        ctx: &RequestContext,
        session: std::sync::Arc<Session>,
        meta: Option<RequestMeta>,
    ) -> (McpContext, Unfinished) {
        let token = CancellationToken::new();
        let cx = McpContext::new(
            ctx,
            session,
            meta.and_then(|m| m.progress_token),
            token.clone(),
            self.inner.client_timeout,
            Some(self.inner.info.name.clone()),
        );
        let outbound = ctx
            .get::<Arc<dyn RequestOutbound>>()
            .cloned()
            .zip(ctx.id().cloned());
        let guard = Unfinished {
            token,
            outbound,
            finished: false,
        };
        (cx, guard)
    }

    /// One page of `items`, each as `pick` describes it, for an initialized
    /// session.
    fn listed<T, U>(
        &self,
        ctx: &RequestContext,
        p: &PaginatedParams,
        items: &[T],
        pick: impl Fn(&T) -> U,
    ) -> Result<(Vec<U>, Option<String>), Error> {
        Session::ready(ctx)?;
        let (range, next) = page(items.len(), p.cursor.as_deref(), self.inner.page_size)?;
        Ok((items[range].iter().map(pick).collect(), next))
    }

    fn list_tools(&self, p: PaginatedParams, ctx: &RequestContext) -> Result<ListToolsResult, Error> {
        let (tools, next_cursor) = self.listed(ctx, &p, &self.inner.tools, |entry| entry.tool.clone())?;
        Ok(ListToolsResult {
            tools,
            next_cursor,
            meta: None,
        })
    }

    async fn call_tool(&self, p: CallToolParams, ctx: RequestContext) -> Result<CallToolResult, Error> {
        let session = Session::ready(&ctx)?;
        let Some(entry) = self.inner.tools.iter().find(|entry| entry.tool.name == p.name) else {
            return Err(Error::new(INVALID_PARAMS, format!("Unknown tool: {}", p.name)));
        };
        let (cx, token) = self.context(&ctx, session, p.meta);
        let handler = entry.handler.clone();
        Ok(cancellable(token, handler(p.arguments.unwrap_or_default(), cx)).await)
    }

    fn list_resources(&self, p: PaginatedParams, ctx: &RequestContext) -> Result<ListResourcesResult, Error> {
        let (resources, next_cursor) =
            self.listed(ctx, &p, &self.inner.resources, |entry| entry.resource.clone())?;
        Ok(ListResourcesResult {
            resources,
            next_cursor,
            meta: None,
        })
    }

    fn list_templates(
        &self,
        p: PaginatedParams,
        ctx: &RequestContext,
    ) -> Result<ListResourceTemplatesResult, Error> {
        let (resource_templates, next_cursor) =
            self.listed(ctx, &p, &self.inner.templates, |entry| entry.template.clone())?;
        Ok(ListResourceTemplatesResult {
            resource_templates,
            next_cursor,
            meta: None,
        })
    }

    /// The reader of the resource at `uri` (a fixed one, or the first
    /// template it matches, with its variables).
    fn find_resource(&self, uri: &str) -> Option<(super::catalog::ReadHandler, BTreeMap<String, String>)> {
        if let Some(entry) = self
            .inner
            .resources
            .iter()
            .find(|entry| entry.resource.uri == uri)
        {
            return Some((entry.read.clone(), BTreeMap::new()));
        }
        self.inner
            .templates
            .iter()
            .find_map(|entry| entry.parsed.matches(uri).map(|vars| (entry.read.clone(), vars)))
    }

    async fn read_resource(
        &self,
        p: ReadResourceParams,
        ctx: RequestContext,
    ) -> Result<ReadResourceResult, Error> {
        let session = Session::ready(&ctx)?;
        let found = self.find_resource(&p.uri);
        let Some((read, vars)) = found else {
            return Err(resource_not_found(&p.uri));
        };
        let (cx, token) = self.context(&ctx, session, p.meta);
        cancellable(token, read(p.uri, vars, cx)).await
    }

    fn list_prompts(&self, p: PaginatedParams, ctx: &RequestContext) -> Result<ListPromptsResult, Error> {
        let (prompts, next_cursor) =
            self.listed(ctx, &p, &self.inner.prompts, |entry| entry.prompt.clone())?;
        Ok(ListPromptsResult {
            prompts,
            next_cursor,
            meta: None,
        })
    }

    /// Subscribes (or not) the session to a resource the server has.
    fn subscribe(&self, p: ReadResourceParams, ctx: &RequestContext, on: bool) -> Result<Empty, Error> {
        let session = Session::ready(ctx)?;
        if self.find_resource(&p.uri).is_none() {
            return Err(resource_not_found(&p.uri));
        }
        let mut state = session.state();
        if on {
            state.subscribed.insert(p.uri);
        } else {
            state.subscribed.remove(&p.uri);
        }
        Ok(Empty {})
    }

    async fn complete(&self, p: CompleteParams, ctx: RequestContext) -> Result<CompleteResult, Error> {
        let session = Session::ready(&ctx)?;
        let Some(handler) = self.inner.completion.clone() else {
            return Err(Error::method_not_found());
        };
        let (cx, guard) = self.context(&ctx, session, p.meta.clone());
        let mut completion = cancellable(guard, handler(p, cx)).await?;
        completion.values.truncate(crate::types::Completion::MAX_VALUES);
        Ok(CompleteResult {
            completion,
            meta: None,
        })
    }

    async fn get_prompt(&self, p: GetPromptParams, ctx: RequestContext) -> Result<GetPromptResult, Error> {
        let session = Session::ready(&ctx)?;
        let Some(entry) = self
            .inner
            .prompts
            .iter()
            .find(|entry| entry.prompt.name == p.name)
        else {
            return Err(Error::new(INVALID_PARAMS, format!("Unknown prompt: {}", p.name)));
        };
        let args = p.arguments.unwrap_or_default();
        let missing: Vec<&str> = entry
            .prompt
            .arguments
            .iter()
            .flatten()
            .filter(|a| a.required == Some(true) && !args.contains_key(&a.name))
            .map(|a| a.name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(Error::new(
                INVALID_PARAMS,
                format!("Missing required arguments: {}", missing.join(", ")),
            ));
        }
        let (cx, token) = self.context(&ctx, session, p.meta);
        let get = entry.get.clone();
        cancellable(token, get(args, cx)).await
    }
}
