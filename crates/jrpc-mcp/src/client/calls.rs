//! Calling the server: each request in the era the server speaks (a
//! modern one with the `_meta` envelope and, over HTTP, its headers), the
//! rounds of input a modern server may ask for before it answers, and the
//! MCP methods on top.

use std::collections::BTreeMap;
use std::sync::Arc;

use jrpc::message::RawValue;
use jrpc::CallError;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::error::McpClientError;
use super::listen::{Registered, Subscription};
use super::repeat;
use super::sent::{Meta, Sent};
use super::wire::{Headers, Wire};
use super::{era, McpClient};
use crate::headers::{self, ParamHeader};
use crate::types::{
    codes, CallToolResult, CompleteParams, CompleteResult, GetPromptResult, InputRequiredResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingLevel,
    ProgressToken, Prompt, ReadResourceResult, Resource, ResourceTemplate, ResultType, SubscriptionFilter,
    Tool,
};

/// How a result says what it is.
#[derive(Deserialize)]
struct Kind {
    #[serde(rename = "resultType", default)]
    result_type: Option<ResultType>,
}

impl McpClient {
    /// `_meta` with a fresh progress token, when progress is listened to.
    fn progress_meta(&self) -> Option<ProgressToken> {
        self.progress.then(|| {
            let token = self.next_token.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            ProgressToken::Number(token)
        })
    }

    /// `params` as sent: with the envelope in `_meta` to a modern server,
    /// and a progress token when asked for. Written as they are sent,
    /// not copied first.
    fn with_meta<'p>(&'p self, params: &'p serde_json::Value, progress: bool) -> Sent<'p> {
        let token = if progress { self.progress_meta() } else { None };
        let envelope = match &self.envelope {
            Some(serde_json::Value::Object(envelope)) => Some(envelope),
            _ => None,
        };
        let log_level = match self.envelope {
            Some(_) => *self.log_level.lock().unwrap_or_else(|p| p.into_inner()),
            None => None,
        };
        let meta = Meta {
            envelope,
            envelope_text: self.envelope_text.as_deref(),
            log_level,
            token,
        };
        let added = !meta.is_empty() && params.is_object();
        Sent {
            params,
            meta: added.then_some(meta),
        }
    }

    /// The headers a modern HTTP request of `method` carries.
    fn headers(&self, method: &str, params: &serde_json::Value) -> Headers {
        let name = headers::name_param(method)
            .and_then(|member| params.get(member))
            .and_then(|v| v.as_str())
            .map(str::to_owned);
        let mut param_headers = Vec::new();
        if method == "tools/call" {
            let tool = name.as_deref().unwrap_or_default();
            let known = self.tool_headers.lock().unwrap_or_else(|p| p.into_inner());
            let arguments = params.get("arguments").and_then(|a| a.as_object());
            if let (Some(params), Some(arguments)) = (known.get(tool), arguments) {
                for param in params {
                    let rendered = param.value_in(arguments).and_then(headers::render_argument);
                    if let Some(value) = rendered {
                        param_headers.push((param.header_name(), headers::encode_value(&value).into_owned()));
                    }
                }
            }
        }
        Headers {
            name,
            params: param_headers,
        }
    }

    /// Sends one request and returns its raw result: to a legacy server
    /// straight to the wire; to a modern one through
    /// [`send_modern`](Self::send_modern).
    pub(super) async fn send(
        &self,
        method: &str,
        params: &serde_json::Value,
        progress: bool,
    ) -> Result<Box<RawValue>, McpClientError> {
        if self.server.modern {
            return self.send_modern(method, params, progress).await;
        }
        let sent = self.with_meta(params, progress);
        let version = &self.server.version;
        Ok(self
            .wire
            .call(version, method, &sent, &Headers::default())
            .await?)
    }

    /// A modern server's request: a `-32022` naming a version this client
    /// speaks is retried once in it, and a `tools/call` refused for its
    /// headers (`-32020`) is retried once after listing the tools again.
    /// Listing the tools sends requests too, and a future cannot contain
    /// itself: those (rare) calls are boxed, not every request.
    async fn send_modern(
        &self,
        method: &str,
        params: &serde_json::Value,
        progress: bool,
    ) -> Result<Box<RawValue>, McpClientError> {
        let sent = self.with_meta(params, progress);
        let version = &self.server.version;
        let mut retried = false;
        // One budget for every reason to send again, within the call's time.
        let started = tokio::time::Instant::now();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let headers = self.headers(method, params);
            let left = self.timeout.saturating_sub(started.elapsed());
            let within = (attempts > 1).then_some(left);
            let error = match self
                .wire
                .call_within(version, method, &sent, &headers, within)
                .await
            {
                Ok(raw) => return Ok(raw),
                Err(error) => error,
            };
            if attempts < repeat::MAX_ATTEMPTS
                && self.wire.can_repeat()
                && repeat::worth_repeating(&error)
                && self.safe_to_repeat(method, params).await
            {
                let wait = repeat::backoff(attempts);
                if started.elapsed() + wait < self.timeout {
                    tracing::debug!(method, attempt = attempts, error = %error, "sending a request safe to repeat again");
                    self.repeats.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tokio::time::sleep(wait).await;
                    continue;
                }
            }
            let code = error.rpc().map(jrpc::Error::code);
            let again = match code {
                Some(codes::UNSUPPORTED_PROTOCOL_VERSION) => {
                    matches!(era::read_probe_error(&error, version), era::ProbeError::Retry(v) if v == *version)
                }
                Some(codes::HEADER_MISMATCH) if method == "tools/call" && !retried => {
                    // The tool's annotations changed: learn them again.
                    self.results.forget("tools/list");
                    Box::pin(self.list_tools()).await?;
                    true
                }
                _ => false,
            };
            if !again || retried || attempts >= repeat::MAX_ATTEMPTS {
                return Err(error.into());
            }
            retried = true;
        }
    }

    /// Whether the request may be sent again after a loss: by its method,
    /// and for `tools/call` by the tool's annotations (the tool list read
    /// once, the first time it is needed).
    async fn safe_to_repeat(&self, method: &str, params: &serde_json::Value) -> bool {
        if let Some(safe) = repeat::safe_method(method) {
            return safe;
        }
        let Some(name) = params.get("name").and_then(|n| n.as_str()) else {
            return false;
        };
        let known = |client: &Self| {
            client
                .repeatable_tools
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .map(|tools| tools.contains(name))
        };
        if let Some(safe) = known(self) {
            return safe;
        }
        if Box::pin(self.list_tools()).await.is_err() {
            return false;
        }
        known(self).unwrap_or(false)
    }

    /// Any request, by its method name (`ping`, `completion/complete`,
    /// `logging/setLevel`, an extension's): the era's envelope and headers
    /// are added as for every other request, a modern server's
    /// `input_required` is answered with the callbacks, and the result
    /// comes back as JSON.
    ///
    /// ```no_run
    /// # async fn run(client: jrpc_mcp::client::McpClient) -> Result<(), jrpc_mcp::client::McpClientError> {
    /// let pong = client.send_request("ping", serde_json::json!({})).await?;
    /// # let _ = pong;
    /// # Ok(()) }
    /// ```
    pub async fn send_request(
        &self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, McpClientError> {
        self.request_with_rounds(method, params, false).await
    }

    /// A request whose result decodes into `R`.
    pub(super) async fn request<R: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> Result<R, McpClientError> {
        let params = serde_json::to_value(params).map_err(|e| CallError::Encode(e.to_string().into()))?;
        let key = self.results.key(method, &params);
        if let Some(kept) = key.as_deref().and_then(|key| self.results.get(key)) {
            return decode(&kept);
        }
        let raw = self.send(method, &params, false).await?;
        if let Some(key) = key {
            self.results.put(key, &raw);
        }
        decode(&raw)
    }

    /// A request a modern server may answer with `input_required`: its
    /// input is given with the callbacks and the request asked again (a
    /// new id, the same params, `inputResponses`, and `requestState` as it
    /// came), up to the bound on rounds. A result without `resultType` is
    /// complete.
    async fn request_with_rounds<R: DeserializeOwned>(
        &self,
        method: &str,
        mut params: serde_json::Value,
        progress: bool,
    ) -> Result<R, McpClientError> {
        let key = self.results.key(method, &params);
        if let Some(kept) = key.as_deref().and_then(|key| self.results.get(key)) {
            return decode(&kept);
        }
        let mut rounds = 0;
        loop {
            let raw = self.send(method, &params, progress).await?;
            if !self.server.modern {
                return decode(&raw);
            }
            if !may_ask_for_input(&raw)? {
                // Kept only when asked without input: an answer that took
                // rounds is not the answer to the params alone.
                if let (Some(key), 0) = (key, rounds) {
                    self.results.put(key, &raw);
                }
                return decode(&raw);
            }
            rounds += 1;
            if rounds > self.max_rounds {
                return Err(McpClientError::TooManyRounds(self.max_rounds));
            }
            let asked: InputRequiredResult = decode(&raw)?;
            let responses = self
                .answers
                .answer(asked.input_requests.unwrap_or_default())
                .await?;
            let Some(object) = params.as_object_mut() else {
                return Err(CallError::Encode("params are not an object".into()).into());
            };
            object.insert("inputResponses".into(), serde_json::Value::Object(responses));
            match asked.request_state {
                Some(state) => object.insert("requestState".into(), serde_json::Value::String(state)),
                None => object.remove("requestState"),
            };
        }
    }

    /// Pages through a list, following cursors to the end.
    pub(super) async fn list_all<P: DeserializeOwned, T>(
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

    /// Every tool, following cursors. From a modern server, a tool whose
    /// `x-mcp-header` annotations break the rules is left out (with a
    /// warning): its calls could not carry their headers.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, McpClientError> {
        let tools = self
            .list_all("tools/list", |page: ListToolsResult| {
                (page.tools, page.next_cursor)
            })
            .await?;
        if !self.server.modern {
            return Ok(tools);
        }
        let mut known: std::collections::HashMap<String, Vec<ParamHeader>> = Default::default();
        let tools: Vec<Tool> = tools
            .into_iter()
            .filter(|tool| match headers::param_headers(&tool.input_schema) {
                Ok(params) => {
                    known.insert(tool.name.clone(), params);
                    true
                }
                Err(why) => {
                    tracing::warn!(tool = %tool.name, %why, "a tool with invalid x-mcp-header annotations is left out");
                    false
                }
            })
            .collect();
        *self.tool_headers.lock().unwrap_or_else(|p| p.into_inner()) = known;
        let repeatable = tools
            .iter()
            .filter(|tool| super::repeat::safe_tool(tool))
            .map(|tool| tool.name.clone())
            .collect();
        *self.repeatable_tools.lock().unwrap_or_else(|p| p.into_inner()) = Some(repeatable);
        Ok(tools)
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
        if self.declares_tasks() {
            return self.call_tool_to_end(name, arguments).await;
        }
        let params = serde_json::json!({ "name": name, "arguments": arguments });
        self.request_with_rounds("tools/call", params, true).await
    }

    /// `tools/call` with `params`, its rounds of input answered: the
    /// result as JSON (a task, when the server made one).
    pub(super) async fn tool_request(
        &self,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, McpClientError> {
        self.request_with_rounds("tools/call", params, true).await
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

    /// Reads a resource. One the server does not have is
    /// [`McpClientError::ResourceNotFound`] (servers say it with `-32002`
    /// or `-32602`).
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, McpClientError> {
        let params = serde_json::json!({ "uri": uri });
        match self.request_with_rounds("resources/read", params, false).await {
            Err(McpClientError::Call(CallError::Rpc(error)))
                if matches!(
                    error.code(),
                    codes::RESOURCE_NOT_FOUND | jrpc::message::codes::INVALID_PARAMS
                ) =>
            {
                Err(McpClientError::ResourceNotFound {
                    uri: uri.to_owned(),
                    error,
                })
            }
            other => other,
        }
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
        let params = serde_json::json!({ "name": name, "arguments": arguments });
        self.request_with_rounds("prompts/get", params, false).await
    }

    /// Asks for completions of a prompt's or template's argument.
    pub async fn complete(&self, params: CompleteParams) -> Result<CompleteResult, McpClientError> {
        self.request("completion/complete", params).await
    }

    /// Sets the least severe log level the server sends: `logging/setLevel`
    /// to a legacy server; to a modern one, the level every request asks
    /// for from now on (its `_meta`).
    pub async fn set_log_level(&self, level: LoggingLevel) -> Result<(), McpClientError> {
        if self.server.modern {
            *self.log_level.lock().unwrap_or_else(|p| p.into_inner()) = Some(level);
            return Ok(());
        }
        let _: serde_json::Value = self
            .request("logging/setLevel", serde_json::json!({ "level": level }))
            .await?;
        Ok(())
    }

    /// Checks that the server answers: `ping` to a legacy server,
    /// `server/discover` to a modern one (2026-07-28 has no `ping`).
    pub async fn ping(&self) -> Result<(), McpClientError> {
        let method = if self.server.modern {
            "server/discover"
        } else {
            "ping"
        };
        let _: serde_json::Value = self.request(method, serde_json::json!({})).await?;
        Ok(())
    }
}

/// How long a subscription's request may stay open: as long as it is
/// listened to.
const LISTENING: std::time::Duration = std::time::Duration::from_secs(10 * 365 * 24 * 3600);

/// How long `listen` waits for the server to acknowledge a subscription.
const ACK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl McpClient {
    /// Listens for change notifications (`filter` says which: tool, prompt
    /// or resource lists, updates of resources by URI), returned as a
    /// stream that ends when the server ends the subscription. To a
    /// modern server this is `subscriptions/listen` (acknowledged before
    /// this returns, when the server does); to a legacy one
    /// `resources/subscribe` for each URI, the session's list changes
    /// coming as they do. Dropping the stream cancels it.
    pub async fn listen(&self, filter: SubscriptionFilter) -> Result<Subscription, McpClientError> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let (ack_tx, ack_rx) = tokio::sync::oneshot::channel();
        let mut opening = None;
        let task = if self.server.modern {
            let params = self
                .with_meta(&serde_json::json!({ "notifications": filter }), false)
                .to_value();
            match &self.wire {
                Wire::Peer(client) => {
                    // Until this one is acknowledged, no other may ask: the
                    // acknowledgment that comes names this one's id.
                    opening = Some(self.listeners.opening.lock().await);
                    let key = self.listeners.open(filter, tx.clone(), Some(ack_tx));
                    let registered = Registered(Arc::clone(&self.listeners), key);
                    let client = client.clone();
                    tokio::spawn(async move {
                        let _registered = registered;
                        let ended = client.call_raw("subscriptions/listen", params, LISTENING).await;
                        if let Err(e) = ended {
                            let _ = tx.send(Err(e.into()));
                        }
                    })
                }
                #[cfg(feature = "http-client")]
                Wire::Session(..) => unreachable!("a legacy session's server is not modern"),
                #[cfg(feature = "http-client")]
                Wire::Http(http) => {
                    let (http, version) = (Arc::clone(http), self.server.version.clone());
                    let ack = std::sync::Mutex::new(Some(ack_tx));
                    tokio::spawn(async move {
                        let sink = tx.clone();
                        let notify = move |method: &str, params: Option<serde_json::Value>| {
                            if method == super::listen::ACKNOWLEDGED {
                                if let Some(ack) = ack.lock().unwrap_or_else(|p| p.into_inner()).take() {
                                    let _ = ack.send(super::listen::acknowledged(params.as_ref()));
                                }
                            } else if super::listen::wants(&filter, method, params.as_ref()) {
                                let _ = sink.send(Ok(super::listen::Change {
                                    method: method.to_owned(),
                                    params,
                                }));
                            }
                        };
                        let ended = http
                            .call_with(
                                &version,
                                "subscriptions/listen",
                                &Sent::from(&params),
                                None,
                                &[],
                                &notify,
                                LISTENING,
                            )
                            .await;
                        if let Err(e) = ended {
                            let _ = tx.send(Err(e.into()));
                        }
                    })
                }
            }
        } else {
            for uri in filter.resource_subscriptions.iter().flatten() {
                let _: serde_json::Value = self
                    .request("resources/subscribe", serde_json::json!({ "uri": uri }))
                    .await?;
            }
            let key = self.listeners.open(filter, tx.clone(), None);
            let registered = Registered(Arc::clone(&self.listeners), key);
            let peer = self.wire.client().and_then(jrpc::client::Client::peer);
            drop(ack_tx);
            tokio::spawn(async move {
                let _registered = registered;
                // Ends with the session.
                let why = match peer {
                    Some(peer) => peer.closed().await,
                    None => std::future::pending().await,
                };
                let _ = tx.send(Err(CallError::Closed(why).into()));
            })
        };
        // Acknowledged, refused at once, or silent for a while.
        let acknowledged = match tokio::time::timeout(ACK_WAIT, ack_rx).await {
            Ok(Ok(filter)) => Some(filter),
            _ => match rx.try_recv() {
                Ok(Err(e)) => {
                    task.abort();
                    return Err(e);
                }
                _ => None,
            },
        };
        drop(opening);
        Ok(Subscription {
            rx,
            task,
            acknowledged,
        })
    }
}

/// Whether a modern result is `input_required`. Most are not, and say so
/// without the word anywhere in their text: then it is not read twice
/// (the word can be spelled otherwise only with a `\u` escape; anything
/// but an object is read, to be refused as before).
fn may_ask_for_input(raw: &RawValue) -> Result<bool, CallError> {
    let text = raw.get();
    if text.starts_with('{') && !text.contains("input_required") && !text.contains("\\u") {
        return Ok(false);
    }
    let kind: Kind = serde_json::from_str(text).map_err(|e| CallError::Decode(Arc::new(e)))?;
    Ok(kind.result_type == Some(ResultType::InputRequired))
}

pub(super) fn decode<R: DeserializeOwned>(raw: &RawValue) -> Result<R, McpClientError> {
    Ok(serde_json::from_str(raw.get()).map_err(|e| CallError::Decode(Arc::new(e)))?)
}
