//! The protocol's methods as JSON-RPC handlers: the table, the legacy
//! lifecycle (`initialize`, `ping`, `logging/setLevel`, subscriptions),
//! `server/discover`, and the lists. Calls into tools, resources and prompts
//! are in [`serve`](super::serve).

use std::sync::Arc;

use jrpc::message::codes::INVALID_PARAMS;
use jrpc::{Error, RequestContext, Router};
use serde::{Deserialize, Serialize};

use super::era::{Era, EraLayer};
use super::session::{Phase, Session};
use super::shape::{Shaped, Stamped};
use super::McpServer;
use crate::types::{
    codes, negotiate_version, CompleteParams, DiscoverResult, InitializeParams, InitializeResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, ListenParams,
    PaginatedParams, ReadResourceParams, Resource, ResultType, SetLevelParams, TaskParams, TaskUpdateParams,
    SUPPORTED_PROTOCOL_VERSIONS,
};

/// Params that carry nothing but, perhaps, `_meta` (`ping`, notifications,
/// `server/discover`).
#[derive(Debug, Default, Deserialize)]
struct MetaOnly {
    #[serde(rename = "_meta", default)]
    _meta: Option<serde::de::IgnoredAny>,
}

/// The empty result: `{}` (legacy), `{"resultType": "complete"}` (modern).
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Empty {
    #[serde(skip_serializing_if = "Option::is_none")]
    result_type: Option<ResultType>,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    meta: Option<crate::types::Meta>,
}

pub(crate) fn router(server: &McpServer) -> Router {
    let router = methods(server);
    let layer = EraLayer::new(router.method_names(), server.envelopes());
    router.layer(layer)
}

/// The server's methods without the era layer, for requests whose era is
/// decided and checked already (Streamable HTTP's modern POST).
#[cfg(feature = "http")]
pub(crate) fn table(server: &McpServer) -> Router {
    methods(server)
}

/// Registers `$name` as a method of `$server` that takes `$params` (and the
/// request's context) and runs `$handler`.
macro_rules! route {
    ($router:ident, $server:ident, $name:literal, |$s:ident, $p:ident: $params:ty, $ctx:ident| $body:expr) => {{
        let $s = $server.clone();
        $router = $router.method($name, move |$p: $params, $ctx: RequestContext| {
            let $s = $s.clone();
            async move { $body }
        });
    }};
}

/// A method whose handler is a method of the server taking it by value:
/// its future is the handler's own (an `async` block around it would hold
/// the params and the context twice, making every call's allocation
/// larger).
macro_rules! route_owned {
    ($router:ident, $server:ident, $name:literal, $params:ty, $handler:ident) => {{
        let server = $server.clone();
        $router = $router.method($name, move |p: $params, ctx: RequestContext| {
            server.clone().$handler(p, ctx)
        });
    }};
}

fn methods(server: &McpServer) -> Router {
    let mut router = Router::new().notification(
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
    );
    router = router.method("ping", |_: Option<MetaOnly>| async { Ok(Empty::default()) });
    route!(router, server, "initialize", |s, p: InitializeParams, ctx| s
        .initialize(p, &ctx));
    route!(
        router,
        server,
        "logging/setLevel",
        |_s, p: SetLevelParams, ctx| {
            Session::ready(&ctx)?.state().log_level = p.level;
            Ok(Empty::default())
        }
    );
    route!(
        router,
        server,
        "server/discover",
        |s, _p: Option<MetaOnly>, ctx| s.discover(&ctx)
    );
    let catalog = &server.inner;
    if !catalog.tools.is_empty() {
        route!(
            router,
            server,
            "tools/list",
            |s, p: Option<PaginatedParams>, ctx| s.list_tools(p.unwrap_or_default(), &ctx)
        );
        route_owned!(
            router,
            server,
            "tools/call",
            Option<super::round_params::ToolCall>,
            call_tool
        );
    }
    if server.serves_resources() {
        route!(
            router,
            server,
            "resources/list",
            |s, p: Option<PaginatedParams>, ctx| s.list_resources(p.unwrap_or_default(), &ctx)
        );
        route!(
            router,
            server,
            "resources/templates/list",
            |s, p: Option<PaginatedParams>, ctx| s.list_templates(p.unwrap_or_default(), &ctx)
        );
        route_owned!(
            router,
            server,
            "resources/read",
            Option<super::round_params::ReadCall>,
            read_resource
        );
    }
    if catalog.skills.is_some() {
        route!(
            router,
            server,
            "skills/list",
            |s, p: Option<PaginatedParams>, ctx| s.list_skills(p.unwrap_or_default(), &ctx)
        );
        route!(
            router,
            server,
            "skills/get",
            |s, p: crate::types::GetSkillParams, ctx| s.get_skill(p, &ctx)
        );
        route!(
            router,
            server,
            "resources/directory/read",
            |s, p: crate::types::ReadDirectoryParams, ctx| s.read_directory(p, &ctx)
        );
    }
    if catalog.subscriptions {
        route!(
            router,
            server,
            "resources/subscribe",
            |s, p: ReadResourceParams, ctx| s.subscribe(p, &ctx, true)
        );
        route!(
            router,
            server,
            "resources/unsubscribe",
            |s, p: ReadResourceParams, ctx| s.subscribe(p, &ctx, false)
        );
    }
    if catalog.completion.is_some() {
        route!(
            router,
            server,
            "completion/complete",
            |s, p: CompleteParams, ctx| s.complete(p, ctx).await
        );
    }
    if !catalog.prompts.is_empty() {
        route!(
            router,
            server,
            "prompts/list",
            |s, p: Option<PaginatedParams>, ctx| s.list_prompts(p.unwrap_or_default(), &ctx)
        );
        route_owned!(
            router,
            server,
            "prompts/get",
            Option<super::round_params::PromptCall>,
            get_prompt
        );
    }
    if server.announces_changes() {
        route!(
            router,
            server,
            "subscriptions/listen",
            |s, p: ListenParams, ctx| s.listen(p, ctx).await
        );
    }
    if catalog.tasks.is_some() {
        route!(router, server, "tasks/get", |s, p: TaskParams, ctx| s
            .task_get(p, &ctx)
            .await);
        route!(router, server, "tasks/update", |s, p: TaskUpdateParams, ctx| s
            .task_update(p, &ctx)
            .await);
        route!(router, server, "tasks/cancel", |s, p: TaskParams, ctx| s
            .task_cancel(p, &ctx)
            .await);
    }
    router
}

/// The resource at a URI names no resource: `-32002` (legacy) or `-32602`
/// (modern), naming the URI.
pub(crate) fn resource_not_found(era: &Era, uri: &str) -> Error {
    let code = match era {
        Era::Legacy(_) => codes::RESOURCE_NOT_FOUND,
        Era::Modern(_) => INVALID_PARAMS,
    };
    Error::new(code, "Resource not found").with_data(&serde_json::json!({ "uri": uri }))
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

impl McpServer {
    /// `result` in the shape of `era`.
    pub(crate) fn shaped<T: Shaped>(
        &self,
        era: &Era,
        mut result: T,
        cache: crate::types::CacheHint,
    ) -> Stamped<T> {
        match era {
            Era::Modern(_) => {
                result.modern(cache);
                self.inner.identity.stamp(result)
            }
            Era::Legacy(_) => {
                result.legacy();
                Stamped::plain(result)
            }
        }
    }

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
            capabilities: self.capabilities_for(false),
            server_info: self.inner.info.clone(),
            instructions: self.inner.instructions.clone(),
            meta: None,
        })
    }

    fn discover(&self, ctx: &RequestContext) -> Result<DiscoverResult, Error> {
        // The era layer lets only modern requests through to here.
        Era::of(ctx)?;
        let hint = self.inner.list_cache;
        let mut meta = None;
        super::shape::stamp(&mut meta, self.inner.identity.value());
        Ok(DiscoverResult {
            result_type: ResultType::Complete,
            supported_versions: SUPPORTED_PROTOCOL_VERSIONS
                .iter()
                .map(|v| (*v).to_owned())
                .collect(),
            capabilities: self.capabilities_for(true),
            instructions: self.inner.instructions.clone(),
            ttl_ms: hint.ttl_ms(),
            cache_scope: hint.scope,
            meta,
        })
    }

    /// One page of `items`, each as `pick` describes it.
    pub(crate) fn listed<T, U>(
        &self,
        p: &PaginatedParams,
        items: &[T],
        pick: impl Fn(&T) -> U,
    ) -> Result<(Vec<U>, Option<String>), Error> {
        let (range, next) = page(items.len(), p.cursor.as_deref(), self.inner.page_size)?;
        Ok((items[range].iter().map(pick).collect(), next))
    }

    fn list_tools(
        &self,
        p: PaginatedParams,
        ctx: &RequestContext,
    ) -> Result<Stamped<ListToolsResult>, Error> {
        let era = Era::of(ctx)?;
        let (tools, next_cursor) = self.listed(&p, &self.inner.tools, |entry| entry.tool.clone())?;
        let result = ListToolsResult {
            tools,
            next_cursor,
            ..Default::default()
        };
        Ok(self.shaped(&era, result, self.inner.list_cache))
    }

    fn list_resources(
        &self,
        p: PaginatedParams,
        ctx: &RequestContext,
    ) -> Result<Stamped<ListResourcesResult>, Error> {
        let era = Era::of(ctx)?;
        let (resources, next_cursor) = if self.inner.skills.is_some() {
            // The server's own resources, then each skill's SKILL.md.
            let mut all: Vec<Resource> = self.inner.resources.iter().map(|e| e.resource.clone()).collect();
            all.extend(self.skill_resources());
            self.listed(&p, &all, Resource::clone)?
        } else {
            self.listed(&p, &self.inner.resources, |entry| entry.resource.clone())?
        };
        let result = ListResourcesResult {
            resources,
            next_cursor,
            ..Default::default()
        };
        Ok(self.shaped(&era, result, self.inner.list_cache))
    }

    fn list_templates(
        &self,
        p: PaginatedParams,
        ctx: &RequestContext,
    ) -> Result<Stamped<ListResourceTemplatesResult>, Error> {
        let era = Era::of(ctx)?;
        let (resource_templates, next_cursor) =
            self.listed(&p, &self.inner.templates, |entry| entry.template.clone())?;
        let result = ListResourceTemplatesResult {
            resource_templates,
            next_cursor,
            ..Default::default()
        };
        Ok(self.shaped(&era, result, self.inner.list_cache))
    }

    fn list_prompts(
        &self,
        p: PaginatedParams,
        ctx: &RequestContext,
    ) -> Result<Stamped<ListPromptsResult>, Error> {
        let era = Era::of(ctx)?;
        let (prompts, next_cursor) = self.listed(&p, &self.inner.prompts, |entry| entry.prompt.clone())?;
        let result = ListPromptsResult {
            prompts,
            next_cursor,
            ..Default::default()
        };
        Ok(self.shaped(&era, result, self.inner.list_cache))
    }

    /// Subscribes (or not) the session to a resource the server has
    /// (legacy; modern clients use `subscriptions/listen`).
    fn subscribe(&self, p: ReadResourceParams, ctx: &RequestContext, on: bool) -> Result<Empty, Error> {
        let session = Session::ready(ctx)?;
        if self.find_resource(&p.uri).is_none() {
            return Err(resource_not_found(&Era::Legacy(Arc::clone(&session)), &p.uri));
        }
        let mut state = session.state();
        if on {
            state.subscribed.insert(p.uri);
        } else {
            state.subscribed.remove(&p.uri);
        }
        Ok(Empty::default())
    }

    /// The task store, for a request whose client declared the extension;
    /// `-32021` when it did not (before the task is looked up).
    fn task_store(&self, ctx: &RequestContext) -> Result<&Arc<super::tasks::TaskStore>, Error> {
        let era = Era::of(ctx)?;
        let store = self.inner.tasks.as_ref().ok_or_else(Error::method_not_found)?;
        if !super::tasks::declares_tasks(&era) {
            return Err(super::tasks::tasks_required());
        }
        Ok(store)
    }

    async fn task_get(&self, p: TaskParams, ctx: &RequestContext) -> Result<crate::types::Task, Error> {
        let mut task = self.task_store(ctx)?.get(&p.task_id, owner(ctx)).await?;
        super::shape::stamp(&mut task.meta, self.inner.identity.value());
        Ok(task)
    }

    async fn task_update(&self, p: TaskUpdateParams, ctx: &RequestContext) -> Result<Empty, Error> {
        self.task_store(ctx)?
            .update(&p.task_id, owner(ctx), p.input_responses)
            .await?;
        Ok(self.modern_empty())
    }

    async fn task_cancel(&self, p: TaskParams, ctx: &RequestContext) -> Result<Empty, Error> {
        self.task_store(ctx)?.cancel(&p.task_id, owner(ctx)).await?;
        Ok(self.modern_empty())
    }

    fn modern_empty(&self) -> Empty {
        let mut meta = None;
        super::shape::stamp(&mut meta, self.inner.identity.value());
        Empty {
            result_type: Some(ResultType::Complete),
            meta,
        }
    }
}

/// The authenticated caller, whom tasks and request state are bound to.
pub(crate) fn owner(ctx: &RequestContext) -> Option<&str> {
    ctx.identity().map(|identity| identity.name())
}

impl McpServer {
    /// The JSON-RPC methods of the protocol. Each connection it serves needs
    /// a session of its own, which [`connect`](Self::connect) and
    /// [`serve_stdio`](Self::serve_stdio) give it.
    pub(crate) fn router(&self) -> Router {
        router(self)
    }

    /// The envelopes modern requests carried last, shared by the era layer
    /// of every connection and by Streamable HTTP.
    pub(crate) fn envelopes(&self) -> Arc<super::envelopes::Envelopes> {
        Arc::clone(&self.inner.envelopes)
    }

    /// The methods without the era layer (see [`table`]).
    #[cfg(feature = "http")]
    pub(crate) fn table(&self) -> Router {
        table(self)
    }
}
