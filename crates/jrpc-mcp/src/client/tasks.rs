//! The tasks extension on the client: a tool call that answers with a
//! task, and `tasks/get`, `tasks/update`, `tasks/cancel`, and waiting for a
//! task's end (polling at the interval the server asks for, answering its
//! questions with the client's callbacks).

use std::time::Duration;

use jrpc::{CallError, Error};
use serde::Serialize;
use serde_json::Value;

use super::{McpClient, McpClientError};
use crate::types::{CallToolResult, InputResponses, Task, TaskStatus};

/// What a tool call started ([`McpClient::start_tool`]).
#[derive(Debug, Clone)]
pub enum Started {
    /// The tool answered in its request.
    Complete(CallToolResult),
    /// The tool goes on as this task (status `working` or further).
    Task(Task),
}

/// The least and most time between two polls of a task.
const LEAST_POLL: Duration = Duration::from_millis(50);
const MOST_POLL: Duration = Duration::from_secs(5);

impl McpClient {
    /// Calls a tool, letting it go on as a task when the client declared
    /// the extension ([`tasks`](super::McpClientBuilder::tasks)) and the
    /// server makes one: its result, or the task to follow with
    /// [`get_task`](Self::get_task) and [`wait_task`](Self::wait_task).
    ///
    /// ```no_run
    /// # async fn run(client: jrpc_mcp::client::McpClient) -> Result<(), jrpc_mcp::client::McpClientError> {
    /// use jrpc_mcp::client::Started;
    ///
    /// match client.start_tool("sleep", serde_json::json!({"ms": 5000})).await? {
    ///     Started::Complete(result) => println!("{}", result.joined_text()),
    ///     Started::Task(task) => {
    ///         let ended = client.wait_task(&task.task_id).await?;
    ///         println!("{:?}", ended.status);
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn start_tool(&self, name: &str, arguments: impl Serialize) -> Result<Started, McpClientError> {
        let arguments =
            serde_json::to_value(arguments).map_err(|e| CallError::Encode(e.to_string().into()))?;
        let params = serde_json::json!({ "name": name, "arguments": arguments });
        let raw: Value = self.tool_request(params).await?;
        let is_task = raw.get("resultType").and_then(Value::as_str) == Some("task");
        if is_task {
            let task: Task = serde_json::from_value(raw).map_err(|e| CallError::Decode(e.into()))?;
            Ok(Started::Task(task))
        } else {
            let result = serde_json::from_value(raw).map_err(|e| CallError::Decode(e.into()))?;
            Ok(Started::Complete(result))
        }
    }

    /// The task `id` as the server shows it now (`tasks/get`).
    pub async fn get_task(&self, id: &str) -> Result<Task, McpClientError> {
        let raw = self
            .send("tasks/get", &serde_json::json!({ "taskId": id }), false)
            .await?;
        super::calls::decode(&raw)
    }

    /// Answers the questions task `id` waits for (`tasks/update`), by the
    /// keys of its `inputRequests`.
    pub async fn update_task(&self, id: &str, responses: InputResponses) -> Result<(), McpClientError> {
        let params = serde_json::json!({ "taskId": id, "inputResponses": responses });
        self.send("tasks/update", &params, false).await?;
        Ok(())
    }

    /// Cancels task `id` (`tasks/cancel`); the server stops its work, on
    /// whichever replica runs it.
    pub async fn cancel_task(&self, id: &str) -> Result<(), McpClientError> {
        self.send("tasks/cancel", &serde_json::json!({ "taskId": id }), false)
            .await?;
        Ok(())
    }

    /// Waits for task `id` to end, polling at the interval the server asks
    /// for (50 ms to 5 s), answering the questions it asks with the
    /// client's callbacks (sampling, elicitation, roots): the task as it
    /// ended (`completed`, `failed` or `cancelled`). Each poll is a call of
    /// its own, within the client's call timeout.
    pub async fn wait_task(&self, id: &str) -> Result<Task, McpClientError> {
        loop {
            let task = self.get_task(id).await?;
            if task.status.is_terminal() {
                return Ok(task);
            }
            if task.status == TaskStatus::InputRequired {
                if let Some(asked) = task.input_requests.clone().filter(|a| !a.is_empty()) {
                    let responses = self.answers.answer(asked).await?;
                    self.update_task(id, responses).await?;
                    continue;
                }
            }
            let poll = Duration::from_millis(task.poll_interval_ms.unwrap_or(500));
            tokio::time::sleep(poll.clamp(LEAST_POLL, MOST_POLL)).await;
        }
    }

    /// A tool call as [`call_tool`](Self::call_tool) makes it: when the
    /// server answers with a task, its end.
    pub(super) async fn call_tool_to_end(
        &self,
        name: &str,
        arguments: Value,
    ) -> Result<CallToolResult, McpClientError> {
        match self.start_tool(name, arguments).await? {
            Started::Complete(result) => Ok(result),
            Started::Task(task) => task_result(self.wait_task(&task.task_id).await?),
        }
    }

    /// Whether requests declare the tasks extension.
    pub(super) fn declares_tasks(&self) -> bool {
        self.tasks && self.server.modern
    }
}

/// The tool result a task of `tools/call` ended with: its result, the
/// error it failed with (a [`Call`](McpClientError::Call) error), or that
/// it was cancelled ([`TaskEnded`](McpClientError::TaskEnded)).
pub fn task_result(task: Task) -> Result<CallToolResult, McpClientError> {
    match task.status {
        TaskStatus::Completed => {
            let result = Value::Object(task.result.unwrap_or_default());
            serde_json::from_value(result).map_err(|e| CallError::Decode(e.into()).into())
        }
        TaskStatus::Failed => {
            let error: Error = task
                .error
                .and_then(|e| serde_json::from_value(Value::Object(e)).ok())
                .unwrap_or_else(|| {
                    Error::internal_error().with_data(&task.status_message.clone().unwrap_or_default())
                });
            Err(CallError::Rpc(error).into())
        }
        status => Err(McpClientError::TaskEnded {
            id: task.task_id,
            status: status_word(status).into(),
            message: task.status_message,
        }),
    }
}

fn status_word(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Working => "working",
        TaskStatus::InputRequired => "input_required",
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "cancelled",
    }
}
