//! The tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28): a
//! `tools/call` the server chooses to run in the background answers with a
//! task at once; the client polls it (`tasks/get`), answers the input it
//! asks for (`tasks/update`) and may cancel it (`tasks/cancel`).

use serde::{Deserialize, Serialize};

use super::{InputRequests, InputResponses, JsonObject, Meta, ResultType};

/// The extension's identifier, in capabilities' `extensions`.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for the client to answer its `inputRequests`.
    InputRequired,
    /// Done: `result` holds what the request would have returned (a tool
    /// result with `isError: true` included).
    Completed,
    /// Ended by a JSON-RPC error, in `error`.
    Failed,
    /// Cancelled before it finished.
    Cancelled,
}

impl TaskStatus {
    /// Whether the task has ended (it changes no more).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }
}

/// A task as `tasks/get` shows it (the `DetailedTask` of the extension):
/// its state and, by status, the input it waits for, its result or its
/// error. As the result of `tools/call` it is a `CreateTaskResult`
/// (`resultType: "task"`); as the result of `tasks/get`, `resultType` is
/// `"complete"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// `"task"` when the task was just created, `"complete"` from
    /// `tasks/get`; none in `notifications/tasks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// The task's id, for `tasks/get`, `tasks/update` and `tasks/cancel`.
    pub task_id: String,
    /// Where it is.
    pub status: TaskStatus,
    /// What it is doing, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// When it last changed (RFC 3339).
    pub last_updated_at: String,
    /// How long it is kept after its creation, in milliseconds; `None`
    /// (`null`) for as long as the server likes.
    pub ttl_ms: Option<u64>,
    /// How often to poll it, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_ms: Option<u64>,
    /// What it waits for (status `input_required`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<InputRequests>,
    /// What the request returned (status `completed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<JsonObject>,
    /// The JSON-RPC error it ended with (status `failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<JsonObject>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The params of `tasks/get` and `tasks/cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskParams {
    /// The task.
    pub task_id: String,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The params of `tasks/update`: answers to the task's `inputRequests`.
/// Answers to keys the task is not waiting for are ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskUpdateParams {
    /// The task.
    pub task_id: String,
    /// The answers, by the keys of the requests they answer.
    pub input_responses: InputResponses,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}
