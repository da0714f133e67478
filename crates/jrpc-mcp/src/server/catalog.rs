//! Resources and prompts on the server: their handlers, type-erased.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use jrpc::Error;

use super::context::McpContext;
use super::run::BoxFuture;
use super::uri_template::UriTemplate;
use crate::types::{GetPromptResult, Prompt, ReadResourceResult, Resource, ResourceTemplate};

pub(crate) type ReadHandler = Arc<
    dyn Fn(String, BTreeMap<String, String>, McpContext) -> BoxFuture<Result<ReadResourceResult, Error>>
        + Send
        + Sync,
>;

pub(crate) type PromptHandler = Arc<
    dyn Fn(BTreeMap<String, String>, McpContext) -> BoxFuture<Result<GetPromptResult, Error>> + Send + Sync,
>;

pub(crate) type CompleteHandler = Arc<
    dyn Fn(crate::types::CompleteParams, McpContext) -> BoxFuture<Result<crate::types::Completion, Error>>
        + Send
        + Sync,
>;

pub(crate) fn complete_handler<F, Fut>(handler: F) -> CompleteHandler
where
    F: Fn(crate::types::CompleteParams, McpContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<crate::types::Completion, Error>> + Send + 'static,
{
    let handler = Arc::new(handler);
    Arc::new(move |params, cx| {
        let handler = Arc::clone(&handler);
        Box::pin(async move { handler(params, cx).await })
    })
}

/// A resource with a fixed URI.
#[derive(Clone)]
pub(crate) struct ResourceEntry {
    pub(crate) resource: Resource,
    pub(crate) read: ReadHandler,
}

/// A family of resources named by a URI template.
#[derive(Clone)]
pub(crate) struct TemplateEntry {
    pub(crate) template: ResourceTemplate,
    pub(crate) parsed: UriTemplate,
    pub(crate) read: ReadHandler,
}

/// A prompt and its handler.
#[derive(Clone)]
pub(crate) struct PromptEntry {
    pub(crate) prompt: Prompt,
    pub(crate) get: PromptHandler,
}

pub(crate) fn read_handler<F, Fut, R>(handler: F) -> ReadHandler
where
    F: Fn(String, BTreeMap<String, String>, McpContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, Error>> + Send + 'static,
    R: Into<ReadResourceResult>,
{
    let handler = Arc::new(handler);
    Arc::new(move |uri, vars, cx| {
        let handler = Arc::clone(&handler);
        Box::pin(async move { handler(uri, vars, cx).await.map(Into::into) })
    })
}

pub(crate) fn prompt_handler<F, Fut, R>(handler: F) -> PromptHandler
where
    F: Fn(BTreeMap<String, String>, McpContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, Error>> + Send + 'static,
    R: Into<GetPromptResult>,
{
    let handler = Arc::new(handler);
    Arc::new(move |args, cx| {
        let handler = Arc::clone(&handler);
        Box::pin(async move { handler(args, cx).await.map(Into::into) })
    })
}
