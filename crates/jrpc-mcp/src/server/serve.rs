//! Calls into tools, resources, prompts and completion: finding the
//! handler, giving it its context, and running it in its request's era —
//! once (legacy), in rounds of input (modern), or on as a task.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use futures_util::future::{ready, Either};
use jrpc::message::codes::INVALID_PARAMS;
use jrpc::message::RawValue;
use jrpc::{Error, Id, RequestContext};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::catalog::ReadHandler;
use super::context::{ContextParts, McpContext, RequestOutbound};
use super::era::Era;
use super::methods::{owner, resource_not_found};
use super::request_state::Binding;
use super::round_params::{PromptCall, ReadAlready, ReadCall, ToolCall};
use super::run::{self, BoxFuture, Control, Interrupt, Launch, Ran, Round};
use super::shape::{Answer, Shaped, Stamped};
use super::tasks::{declares_tasks, missing_capabilities, tasks_required, TaskSupport};
use super::tools::ToolHandler;
use super::McpServer;
use crate::types::{
    CallToolResult, CompleteParams, CompleteResult, GetPromptResult, InputRequiredResult, InputResponses,
    JsonObject, ProgressToken, ReadResourceResult, ResultType,
};

/// A request being served: if it is dropped before it finishes (cancelled,
/// or its connection closed), its token is cancelled and a legacy
/// transport is told no response will come.
struct Unfinished<'a> {
    token: &'a CancellationToken,
    outbound: Option<(Arc<dyn RequestOutbound>, Id)>,
    finished: bool,
}

impl Drop for Unfinished<'_> {
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

/// What a handler call needs to know about its request besides the
/// handler: what its state is bound to, what it answered already, whether
/// it may become a task.
struct Request<'a> {
    method: &'static str,
    target: &'a str,
    arguments: Arguments<'a>,
    progress_token: Option<&'a ProgressToken>,
    input_responses: Option<&'a InputResponses>,
    request_state: Option<&'a str>,
    tasks: TaskSupport,
}

/// The arguments a request's state is bound to, digested only when a round
/// carries state.
enum Arguments<'a> {
    None,
    /// A tool's, as they came.
    Raw(Option<&'a RawValue>),
    /// A prompt's.
    Map(&'a BTreeMap<String, String>),
}

impl Request<'_> {
    fn binding(&self, principal: Option<&str>) -> Binding {
        let (method, target) = (self.method, self.target);
        match self.arguments {
            Arguments::None => Binding::new(method, target, &(), principal),
            Arguments::Map(map) => Binding::new(method, target, map, principal),
            // As a value, so that the digest is of its canonical form.
            Arguments::Raw(raw) => {
                let value: serde_json::Value = raw
                    .and_then(|raw| serde_json::from_str(raw.get()).ok())
                    .unwrap_or_else(|| serde_json::Value::Object(JsonObject::new()));
                Binding::new(method, target, &value, principal)
            }
        }
    }
}

/// The params of a request for `method` read already, else `-32602` naming the field that is missing (as decoding the
/// absent params would have).
fn read_already(ctx: &RequestContext, method: &str) -> Result<ReadAlready, Error> {
    let taken = ctx
        .get::<Arc<super::era::Modern>>()
        .and_then(|modern| modern.take_read());
    taken.ok_or_else(|| {
        let field = if method == "resources/read" { "uri" } else { "name" };
        Error::invalid_params().with_data(&serde_json::json!({
            "param": field,
            "reason": format!("missing field `{field}`"),
        }))
    })
}

impl McpServer {
    /// Runs `work` (a handler, given its context) for `request` in `era`.
    async fn serve_request<T>(
        &self,
        ctx: &RequestContext,
        era: Era,
        request: &Request<'_>,
        work: impl FnOnce(McpContext) -> BoxFuture<Result<T, Error>>,
    ) -> Result<Answer<T>, Error>
    where
        T: Shaped + Serialize + Send + 'static,
    {
        let token = CancellationToken::new();
        let mut guard = Unfinished {
            token: &token,
            outbound: match era {
                Era::Legacy(_) => ctx
                    .get::<Arc<dyn RequestOutbound>>()
                    .cloned()
                    .zip(ctx.id().cloned()),
                Era::Modern(_) => None,
            },
            finished: false,
        };
        let (control, progress_token) = match &era {
            Era::Legacy(_) => (Control::legacy(), request.progress_token.cloned()),
            Era::Modern(modern) => {
                let carried = match request.request_state {
                    Some(state) => {
                        let binding = request.binding(owner(ctx));
                        self.inner.state_key.open(state, &binding)?
                    }
                    None => Default::default(),
                };
                let may_become_task = self.inner.tasks.is_some()
                    && request.tasks != TaskSupport::Forbidden
                    && declares_tasks(&era);
                let round = Round::new(carried, request.input_responses.cloned());
                (
                    Control::round(round, may_become_task),
                    modern.envelope.progress_token.clone(),
                )
            }
        };
        if request.tasks == TaskSupport::Required && !declares_tasks(&era) {
            return Err(tasks_required());
        }
        let cx = McpContext::new(
            ctx,
            ContextParts {
                era: era.clone(),
                control: Arc::clone(&control),
                progress_token,
                cancel: token.clone(),
                client_timeout: self.inner.client_timeout,
                logger: Some(Arc::clone(&self.inner.logger)),
                changes: self.inner.changes.clone(),
                shared: Arc::clone(&self.inner.shared),
            },
        );
        // What a task needs is gathered only for a request that becomes
        // one: most never do.
        let launch = match (&self.inner.tasks, &era) {
            (Some(store), Era::Modern(_)) if request.tasks != TaskSupport::Forbidden => Some(|| {
                let server = self.clone();
                let shaping = era.clone();
                Launch {
                    store: Arc::clone(store),
                    owner: owner(ctx).map(str::to_owned),
                    cancel: token.clone(),
                    finish: Box::new(move |out: Result<T, Error>| {
                        let result = server.shaped(&shaping, out?, server.inner.read_cache);
                        match serde_json::to_value(result) {
                            Ok(serde_json::Value::Object(map)) => Ok(map),
                            _ => Err(Error::internal_error().with_data("the result is not a JSON object")),
                        }
                    })
                        as Box<dyn FnOnce(Result<T, Error>) -> Result<JsonObject, Error> + Send>,
                }
            }),
            _ => None,
        };
        match run::run(&control, work(cx), launch).await? {
            Ran::Done(out) => {
                guard.finished = true;
                Ok(Answer::Complete(out?))
            }
            Ran::Task(task) => {
                guard.finished = true;
                let mut created = task.made(ResultType::Task);
                super::shape::stamp(&mut created.meta, self.inner.identity.value());
                Ok(Answer::Task(created))
            }
            Ran::Stopped(Interrupt::Error(error)) => Err(error),
            Ran::Stopped(Interrupt::Missing(required)) => Err(missing_capabilities(required)),
            Ran::Stopped(Interrupt::Task) => Err(Error::internal_error()),
            Ran::Stopped(Interrupt::Input { asked, carried }) => {
                let binding = request.binding(owner(ctx));
                let state = self
                    .inner
                    .state_key
                    .seal(&binding, carried, self.inner.state_ttl)?;
                let mut result = InputRequiredResult::new(asked, Some(state));
                super::shape::stamp(&mut result.meta, self.inner.identity.value());
                Ok(Answer::InputRequired(result))
            }
        }
    }

    /// Shapes a handler's complete answer for its era.
    fn answer<T: Shaped>(
        &self,
        era: &Era,
        answer: Answer<T>,
        cache: crate::types::CacheHint,
    ) -> Answer<Stamped<T>> {
        match answer {
            Answer::Complete(result) => Answer::Complete(self.shaped(era, result, cache)),
            Answer::InputRequired(input) => Answer::InputRequired(input),
            Answer::Task(task) => Answer::Task(task),
        }
    }

    /// Serves `tools/call`. What can fail before the handler runs is found
    /// before the future is made, and the future holds each thing once (an
    /// `async fn` holds its arguments twice): it is allocated for every
    /// call, and one past 1 KiB costs malloc's slow path.
    pub(crate) fn call_tool(
        self,
        p: Option<ToolCall>,
        ctx: RequestContext,
    ) -> impl Future<Output = Result<Answer<Stamped<CallToolResult>>, Error>> + Send {
        let (p, era, handler, tasks) = match self.find_tool(p, &ctx) {
            Ok(found) => found,
            Err(error) => return Either::Left(ready(Err(error))),
        };
        Either::Right(async move {
            let request = Request {
                method: "tools/call",
                target: &p.name,
                arguments: Arguments::Raw(p.arguments.as_deref()),
                progress_token: p.meta.as_ref().and_then(|m| m.progress_token.as_ref()),
                input_responses: p.input_responses.as_ref(),
                request_state: p.request_state.as_deref(),
                tasks,
            };
            let arguments = p.arguments.as_deref();
            let answer = self
                .serve_request(&ctx, era.clone(), &request, move |cx| handler(arguments, cx))
                .await?;
            Ok(self.answer(&era, answer, self.inner.read_cache))
        })
    }

    /// A `tools/call`'s params (as the call carries them, or as they were
    /// read with its envelope), its era, and its tool's handler and task
    /// support.
    fn find_tool(
        &self,
        p: Option<ToolCall>,
        ctx: &RequestContext,
    ) -> Result<(ToolCall, Era, ToolHandler, TaskSupport), Error> {
        let p = match p {
            Some(p) => p,
            None => match read_already(ctx, "tools/call")? {
                ReadAlready::Tool(p) => p,
                _ => return Err(Error::internal_error()),
            },
        };
        let era = Era::of(ctx)?;
        let Some(entry) = self.tool(&p.name) else {
            return Err(Error::new(INVALID_PARAMS, format!("Unknown tool: {}", p.name)));
        };
        let (handler, tasks) = (entry.handler.clone(), entry.tasks);
        Ok((p, era, handler, tasks))
    }

    /// The reader of the resource at `uri` (a fixed one, or the first
    /// template it matches, with its variables).
    pub(crate) fn find_resource(&self, uri: &str) -> Option<(ReadHandler, BTreeMap<String, String>)> {
        if let Some(entry) = self
            .inner
            .resources
            .iter()
            .find(|entry| entry.resource.uri == uri)
        {
            return Some((entry.read.clone(), BTreeMap::new()));
        }
        if let Some(read) = self.skill_file(uri) {
            return Some((read, BTreeMap::new()));
        }
        self.inner
            .templates
            .iter()
            .find_map(|entry| entry.parsed.matches(uri).map(|vars| (entry.read.clone(), vars)))
    }

    pub(crate) async fn read_resource(
        self,
        p: Option<ReadCall>,
        ctx: RequestContext,
    ) -> Result<Answer<Stamped<ReadResourceResult>>, Error> {
        let p = match p {
            Some(p) => p,
            None => match read_already(&ctx, "resources/read")? {
                ReadAlready::Resource(p) => p,
                _ => return Err(Error::internal_error()),
            },
        };
        let era = Era::of(&ctx)?;
        let Some((read, vars)) = self.find_resource(&p.uri) else {
            return Err(resource_not_found(&era, &p.uri));
        };
        let uri = p.uri.clone();
        let request = Request {
            method: "resources/read",
            target: &p.uri,
            arguments: Arguments::None,
            progress_token: p.meta.as_ref().and_then(|m| m.progress_token.as_ref()),
            input_responses: p.input_responses.as_ref(),
            request_state: p.request_state.as_deref(),
            tasks: TaskSupport::Forbidden,
        };
        let answer = self
            .serve_request(&ctx, era.clone(), &request, move |cx| read(uri, vars, cx))
            .await?;
        Ok(self.answer(&era, answer, self.inner.read_cache))
    }

    pub(crate) async fn get_prompt(
        self,
        p: Option<PromptCall>,
        ctx: RequestContext,
    ) -> Result<Answer<Stamped<GetPromptResult>>, Error> {
        let p = match p {
            Some(p) => p,
            None => match read_already(&ctx, "prompts/get")? {
                ReadAlready::Prompt(p) => p,
                _ => return Err(Error::internal_error()),
            },
        };
        let era = Era::of(&ctx)?;
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
        let get = entry.get.clone();
        let request = Request {
            method: "prompts/get",
            target: &p.name,
            arguments: Arguments::Map(&args),
            progress_token: p.meta.as_ref().and_then(|m| m.progress_token.as_ref()),
            input_responses: p.input_responses.as_ref(),
            request_state: p.request_state.as_deref(),
            tasks: TaskSupport::Forbidden,
        };
        let for_handler = args.clone();
        let answer = self
            .serve_request(&ctx, era.clone(), &request, move |cx| get(for_handler, cx))
            .await?;
        Ok(self.answer(&era, answer, self.inner.read_cache))
    }

    pub(crate) async fn complete(
        &self,
        p: CompleteParams,
        ctx: RequestContext,
    ) -> Result<Stamped<CompleteResult>, Error> {
        let era = Era::of(&ctx)?;
        let Some(handler) = self.inner.completion.clone() else {
            return Err(Error::method_not_found());
        };
        let progress_token = p.meta.as_ref().and_then(|m| m.progress_token.clone());
        let request = Request {
            method: "completion/complete",
            target: "",
            arguments: Arguments::None,
            progress_token: progress_token.as_ref(),
            input_responses: None,
            request_state: None,
            tasks: TaskSupport::Forbidden,
        };
        let answer = self
            .serve_request(&ctx, era.clone(), &request, move |cx| {
                Box::pin(async move {
                    let mut completion = handler(p, cx).await?;
                    completion.values.truncate(crate::types::Completion::MAX_VALUES);
                    Ok(CompleteResult {
                        completion,
                        ..Default::default()
                    })
                })
            })
            .await?;
        match self.answer(&era, answer, self.inner.read_cache) {
            Answer::Complete(result) => Ok(result),
            // Completion asks the client nothing: its handler's questions
            // have nowhere to go.
            _ => Err(Error::internal_error().with_data("completion cannot ask the client for input")),
        }
    }
}
