//! The tasks extension on the server: the store of tasks (kept across
//! requests, since the protocol is stateless), each task's state and the
//! input it waits for, and `tasks/get`, `tasks/update`, `tasks/cancel`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jrpc::message::codes::INVALID_PARAMS;
use jrpc::Error;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::era::Era;
use crate::types::{
    codes, ClientCapabilities, InputRequest, InputRequests, InputResponses, JsonObject,
    MissingCapabilityData, ResultType, Task, TaskStatus, TASKS_EXTENSION,
};

/// Whether a tool may run as a task (the tasks extension).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskSupport {
    /// Never: the tool always answers in its request.
    #[default]
    Forbidden,
    /// When the request's client declares the extension and the handler
    /// asks to ([`McpContext::run_as_task`](super::McpContext::run_as_task)).
    Optional,
    /// Only as a task: a client that does not declare the extension gets
    /// `-32021` before the handler runs.
    Required,
}

/// Settings of the tasks extension.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TaskSettings {
    /// How long a task is kept after it is created (its `ttlMs`); a task
    /// that ended is kept at least a minute more. Default 10 minutes.
    pub ttl: Duration,
    /// How often clients should poll (`pollIntervalMs`). Default 500 ms.
    pub poll_interval: Duration,
    /// The most tasks kept at once; past it a request that would start a
    /// task gets `-32007`. Default 1024.
    pub max_tasks: usize,
}

impl Default for TaskSettings {
    fn default() -> Self {
        TaskSettings {
            ttl: Duration::from_secs(600),
            poll_interval: Duration::from_millis(500),
            max_tasks: 1024,
        }
    }
}

/// How long an ended task is kept at least, whatever its ttl.
const KEEP_ENDED: Duration = Duration::from_secs(60);

/// An input the task waits for, and where its answer goes.
struct Waiting {
    request: InputRequest,
    answer: oneshot::Sender<Value>,
}

struct State {
    status: TaskStatus,
    status_message: Option<String>,
    last_updated: SystemTime,
    ended: Option<Instant>,
    result: Option<JsonObject>,
    error: Option<JsonObject>,
    waiting: BTreeMap<String, Waiting>,
    next_key: u64,
}

/// One task.
pub(crate) struct TaskEntry {
    id: String,
    /// The caller that created it: no one else sees it.
    owner: Option<String>,
    created: SystemTime,
    created_at: Instant,
    ttl: Duration,
    poll_interval: Duration,
    state: Mutex<State>,
    /// Cancelled by `tasks/cancel`: the task's work stops.
    pub(crate) cancel: CancellationToken,
    /// Told of every change, for listeners (`notifications/tasks`).
    changes: super::changes::Changes,
}

impl TaskEntry {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn changed(&self, state: &mut State) {
        state.last_updated = SystemTime::now();
        self.changes.task_changed(&self.id);
    }

    /// The task as `tasks/get` (or, just created, `tools/call`) shows it.
    pub(crate) fn snapshot(&self, result_type: ResultType) -> Task {
        let state = self.state();
        let input_requests: InputRequests = state
            .waiting
            .iter()
            .map(|(key, waiting)| (key.clone(), waiting.request.clone()))
            .collect();
        Task {
            result_type: Some(result_type),
            task_id: self.id.clone(),
            status: state.status,
            status_message: state.status_message.clone(),
            created_at: rfc3339(self.created),
            last_updated_at: rfc3339(state.last_updated),
            ttl_ms: Some(u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX).max(1)),
            poll_interval_ms: Some(
                u64::try_from(self.poll_interval.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1),
            ),
            input_requests: (state.status == TaskStatus::InputRequired).then_some(input_requests),
            result: state.result.clone(),
            error: state.error.clone(),
            meta: None,
        }
    }

    /// Asks the client for `request` under a key new to this task (`name`
    /// when it is free); resolves with the client's answer, or with `None`
    /// when the task ends first.
    pub(crate) fn ask(&self, name: Option<&str>, request: InputRequest) -> oneshot::Receiver<Value> {
        let (tx, rx) = oneshot::channel();
        let mut state = self.state();
        if state.status.is_terminal() {
            return rx;
        }
        state.next_key += 1;
        let n = state.next_key;
        let key = match name {
            Some(name) if !state.waiting.contains_key(name) => name.to_owned(),
            Some(name) => format!("{name}-{n}"),
            None => format!("input-{n}"),
        };
        state.waiting.insert(key, Waiting { request, answer: tx });
        state.status = TaskStatus::InputRequired;
        self.changed(&mut state);
        rx
    }

    /// Hands the client's answers to what waits for them; answers to keys
    /// not waited for are ignored. Once nothing is waited for, the task is
    /// working again (before this returns, so a `tasks/get` that follows
    /// sees it).
    fn answer(&self, responses: InputResponses) {
        let mut state = self.state();
        if state.status.is_terminal() {
            return;
        }
        let mut any = false;
        for (key, value) in responses {
            if let Some(waiting) = state.waiting.remove(&key) {
                any = true;
                let _ = waiting.answer.send(value);
            }
        }
        if any {
            if state.waiting.is_empty() {
                state.status = TaskStatus::Working;
            }
            self.changed(&mut state);
        }
    }

    /// Ends the task with what its request returned, or the error it failed
    /// with; a task that has ended already (cancelled) keeps its end.
    pub(crate) fn finish(&self, outcome: Result<JsonObject, Error>) {
        let mut state = self.state();
        if state.status.is_terminal() {
            return;
        }
        state.waiting.clear();
        match outcome {
            Ok(result) => {
                state.status = TaskStatus::Completed;
                state.result = Some(result);
            }
            Err(error) => {
                state.status = TaskStatus::Failed;
                state.status_message = Some(error.message().to_string());
                state.error = serde_json::to_value(&error)
                    .ok()
                    .and_then(|v| v.as_object().cloned());
            }
        }
        state.ended = Some(Instant::now());
        self.changed(&mut state);
    }

    fn cancel(&self) {
        let mut state = self.state();
        if state.status.is_terminal() {
            return;
        }
        state.waiting.clear();
        state.status = TaskStatus::Cancelled;
        state.status_message = Some("cancelled by the client".into());
        state.ended = Some(Instant::now());
        self.changed(&mut state);
        drop(state);
        self.cancel.cancel();
    }

    fn expired(&self, now: Instant) -> bool {
        let state = self.state();
        match state.ended {
            Some(ended) => now >= (self.created_at + self.ttl).max(ended + KEEP_ENDED),
            None => false,
        }
    }
}

/// The tasks a server keeps.
pub(crate) struct TaskStore {
    settings: TaskSettings,
    tasks: Mutex<HashMap<String, Arc<TaskEntry>>>,
    changes: super::changes::Changes,
}

impl TaskStore {
    pub(crate) fn new(settings: TaskSettings, changes: super::changes::Changes) -> Self {
        TaskStore {
            settings,
            tasks: Mutex::default(),
            changes,
        }
    }

    fn tasks(&self) -> MutexGuard<'_, HashMap<String, Arc<TaskEntry>>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new working task for `owner`, in the store before this returns
    /// (so that `tasks/get` finds it as soon as the client hears of it), or
    /// `-32007` when the store is full. `cancel` stops its work.
    pub(crate) fn create(
        &self,
        owner: Option<&str>,
        cancel: CancellationToken,
    ) -> Result<Arc<TaskEntry>, Error> {
        let now = Instant::now();
        let mut tasks = self.tasks();
        tasks.retain(|_, task| !task.expired(now));
        if tasks.len() >= self.settings.max_tasks {
            return Err(Error::server_busy().with_data("too many tasks: try again later"));
        }
        let created = SystemTime::now();
        let entry = Arc::new(TaskEntry {
            id: super::ids::random_id(),
            owner: owner.map(str::to_owned),
            created,
            created_at: now,
            ttl: self.settings.ttl,
            poll_interval: self.settings.poll_interval,
            state: Mutex::new(State {
                status: TaskStatus::Working,
                status_message: None,
                last_updated: created,
                ended: None,
                result: None,
                error: None,
                waiting: BTreeMap::new(),
                next_key: 0,
            }),
            cancel,
            changes: self.changes.clone(),
        });
        tasks.insert(entry.id.clone(), Arc::clone(&entry));
        Ok(entry)
    }

    /// The task `id` of `owner`; `-32602` for an unknown, expired or
    /// foreign one.
    pub(crate) fn find(&self, id: &str, owner: Option<&str>) -> Result<Arc<TaskEntry>, Error> {
        let tasks = self.tasks();
        tasks
            .get(id)
            .filter(|task| task.owner.as_deref() == owner && !task.expired(Instant::now()))
            .cloned()
            .ok_or_else(|| {
                Error::new(INVALID_PARAMS, "Failed to retrieve task: Task not found")
                    .with_data(&serde_json::json!({ "taskId": id }))
            })
    }

    pub(crate) fn get(&self, id: &str, owner: Option<&str>) -> Result<Task, Error> {
        Ok(self.find(id, owner)?.snapshot(ResultType::Complete))
    }

    pub(crate) fn update(
        &self,
        id: &str,
        owner: Option<&str>,
        responses: InputResponses,
    ) -> Result<(), Error> {
        self.find(id, owner)?.answer(responses);
        Ok(())
    }

    pub(crate) fn cancel(&self, id: &str, owner: Option<&str>) -> Result<(), Error> {
        self.find(id, owner)?.cancel();
        Ok(())
    }
}

/// `time` as RFC 3339 in UTC, to the millisecond.
pub(crate) fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's
/// days-to-civil algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Whether the request's client declared the tasks extension (only modern
/// requests can).
pub(crate) fn declares_tasks(era: &Era) -> bool {
    era.modern().is_some_and(|m| {
        m.envelope
            .client_capabilities
            .extensions
            .as_ref()
            .is_some_and(|e| e.contains_key(TASKS_EXTENSION))
    })
}

/// `-32021`: the request needs the tasks extension the client did not
/// declare.
pub(crate) fn tasks_required() -> Error {
    missing_capabilities(ClientCapabilities {
        extensions: Some([(TASKS_EXTENSION.to_owned(), JsonObject::new())].into()),
        ..Default::default()
    })
}

pub(crate) fn missing_capabilities(required: ClientCapabilities) -> Error {
    Error::new(
        codes::MISSING_REQUIRED_CLIENT_CAPABILITY,
        "Missing required client capability",
    )
    .with_data(&MissingCapabilityData {
        required_capabilities: required,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_764_066_600_250);
        assert_eq!(rfc3339(t), "2025-11-25T10:30:00.250Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }

    #[tokio::test]
    async fn a_task_waits_for_its_answers_and_ends_once() {
        let store = TaskStore::new(TaskSettings::default(), super::super::changes::Changes::new(16));
        let task = store.create(Some("ada"), CancellationToken::new()).unwrap();
        let id = task.snapshot(ResultType::Task).task_id;
        assert!(store.get(&id, None).is_err(), "another caller does not see it");
        let first = task.ask(Some("name"), InputRequest::ListRoots);
        let second = task.ask(Some("name"), InputRequest::ListRoots);
        let got = store.get(&id, Some("ada")).unwrap();
        assert_eq!(got.status, TaskStatus::InputRequired);
        let keys: Vec<String> = got.input_requests.unwrap().into_keys().collect();
        assert_eq!(keys, ["name", "name-2"]);
        let mut answers = InputResponses::new();
        answers.insert("name".into(), serde_json::json!({"roots": []}));
        answers.insert("unknown".into(), serde_json::json!({"ignored": true}));
        store.update(&id, Some("ada"), answers).unwrap();
        assert_eq!(first.await.unwrap(), serde_json::json!({"roots": []}));
        let got = store.get(&id, Some("ada")).unwrap();
        assert_eq!(
            got.status,
            TaskStatus::InputRequired,
            "one answer is still missing"
        );
        store.cancel(&id, Some("ada")).unwrap();
        assert!(second.await.is_err(), "a cancelled task answers nothing more");
        task.finish(Ok(JsonObject::new()));
        let got = store.get(&id, Some("ada")).unwrap();
        assert_eq!((got.status, got.result), (TaskStatus::Cancelled, None));
        assert!(task.cancel.is_cancelled());
        // Cancelling an ended task is acknowledged, and changes nothing.
        store.cancel(&id, Some("ada")).unwrap();
        assert_eq!(store.get("nope", None).unwrap_err().code(), INVALID_PARAMS);
    }
}
