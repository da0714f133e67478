//! What the client answers a server with: the callbacks the builder is
//! given (sampling, elicitation, roots), for a legacy server's own requests
//! and a modern server's input requests alike.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use jrpc::{CallError, Error};

use super::error::McpClientError;
use crate::types::{
    CreateMessageParams, CreateMessageResult, ElicitParams, ElicitResult, InputRequest, JsonObject,
    ListRootsResult, Root,
};

pub(super) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
pub(super) type Sampler =
    Arc<dyn Fn(CreateMessageParams) -> BoxFuture<'static, Result<CreateMessageResult, Error>> + Send + Sync>;
pub(super) type Elicitor =
    Arc<dyn Fn(ElicitParams) -> BoxFuture<'static, Result<ElicitResult, Error>> + Send + Sync>;
pub(super) type Listener<T> = Arc<dyn Fn(T) + Send + Sync>;

/// What answers a modern server's input requests: the callbacks the
/// builder was given.
pub(super) struct Answers {
    pub(super) sampling: Option<Sampler>,
    pub(super) elicitation: Option<Elicitor>,
    pub(super) roots: Option<Arc<std::sync::Mutex<Vec<Root>>>>,
}

impl Answers {
    /// Answers each request, by its key (`inputResponses`).
    pub(super) async fn answer(
        &self,
        requests: BTreeMap<String, InputRequest>,
    ) -> Result<JsonObject, McpClientError> {
        let mut responses = JsonObject::new();
        for (key, request) in requests {
            let method = request.method();
            let value = match request {
                InputRequest::Sampling(params) => {
                    let sampling = self
                        .sampling
                        .as_ref()
                        .ok_or_else(|| McpClientError::CannotAnswer(method.into()))?;
                    serde_json::to_value(sampling(params).await.map_err(CallError::Rpc)?)
                }
                InputRequest::Elicitation(params) => {
                    let elicitation = self
                        .elicitation
                        .as_ref()
                        .ok_or_else(|| McpClientError::CannotAnswer(method.into()))?;
                    serde_json::to_value(elicitation(params).await.map_err(CallError::Rpc)?)
                }
                InputRequest::ListRoots => {
                    let roots = self
                        .roots
                        .as_ref()
                        .ok_or_else(|| McpClientError::CannotAnswer(method.into()))?;
                    let roots = roots.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    serde_json::to_value(ListRootsResult { roots, meta: None })
                }
            }
            .map_err(|e| CallError::Encode(e.to_string().into()))?;
            responses.insert(key, value);
        }
        Ok(responses)
    }
}
