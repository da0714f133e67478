//! The tasks extension on the server: each task's record, kept in the
//! server's [shared state](super::shared) (one process's memory, or NATS
//! JetStream for a fleet of replicas), the local runner of the tasks this
//! replica runs (the questions it waits on, its cancellation, its lease),
//! and `tasks/get`, `tasks/update`, `tasks/cancel`, served by any replica.
//!
//! Every change of a record is a compare-and-set of one small step
//! ([`TaskRecord`]'s methods) that refuses to touch a task that ended, so
//! no write ever overwrites a finished task. In a fleet the replica running
//! a task renews a lease in its record; when the lease lapses (the replica
//! went away) any replica fails the task, and a replica that cannot renew
//! its lease (cut off from the store) cancels the task itself.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use jrpc::message::codes::INVALID_PARAMS;
use jrpc::Error;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::era::Era;
use super::shared::{modify, SharedState, Space, StateError};
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
    /// The most tasks this server (replica) keeps at once; past it a
    /// request that would start a task gets `-32007`. Default 1024.
    pub max_tasks: usize,
    /// With state shared by replicas: how long a task outlives the last
    /// sign of life of the replica running it (renewed every third of it)
    /// before any replica reports it `failed`. Default 15 s.
    pub lease: Duration,
}

impl Default for TaskSettings {
    fn default() -> Self {
        TaskSettings {
            ttl: Duration::from_secs(600),
            poll_interval: Duration::from_millis(500),
            max_tasks: 1024,
            lease: Duration::from_secs(15),
        }
    }
}

/// How long an ended task is kept at least, whatever its ttl.
const KEEP_ENDED: Duration = Duration::from_secs(60);

/// The message of a task whose replica went away.
pub(crate) const WENT_AWAY: &str =
    "the server running the task went away (its lease lapsed before it finished)";

/// A task as the shared state keeps it: what `tasks/get` shows, and what
/// replicas need to agree on it. Times are milliseconds since 1970.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TaskRecord {
    /// The caller that created it: no one else sees it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
    created: u64,
    ttl: u64,
    poll: u64,
    status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    updated: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ended: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<JsonObject>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<JsonObject>,
    /// The questions it waits for, by key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    asked: InputRequests,
    /// Answers given (through any replica) to questions, by key, for the
    /// replica running the task to take.
    #[serde(default, skip_serializing_if = "JsonObject::is_empty")]
    answers: JsonObject,
    /// Until when the replica running it vouches for it; none when the
    /// state is one process's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lease: Option<u64>,
    /// The replica running it.
    runner: String,
    /// The replica that wrote this revision.
    by: String,
    /// How many times what `tasks/get` shows has changed (a lease renewed
    /// is no change): listeners hear of a record only when this moved.
    #[serde(default)]
    shown: u64,
}

impl TaskRecord {
    fn is_terminal(&self) -> bool {
        self.status.is_terminal()
    }

    /// What `tasks/get` shows of it, but its times.
    fn view(&self) -> (TaskStatus, Option<&str>, Vec<&String>, bool, bool) {
        (
            self.status,
            self.message.as_deref(),
            self.asked.keys().collect(),
            self.result.is_some(),
            self.error.is_some(),
        )
    }

    /// Waits for `request` under `key`.
    fn ask(&mut self, key: &str, request: &InputRequest) -> bool {
        if self.is_terminal() {
            return false;
        }
        self.asked.insert(key.to_owned(), request.clone());
        self.status = TaskStatus::InputRequired;
        true
    }

    /// Takes the answers to questions it waits for (others are ignored);
    /// once nothing is waited for, it is working again.
    fn answer(&mut self, responses: &InputResponses) -> bool {
        if self.is_terminal() {
            return false;
        }
        let mut any = false;
        for (key, value) in responses {
            if self.asked.remove(key).is_some() {
                self.answers.insert(key.clone(), value.clone());
                any = true;
            }
        }
        if any && self.asked.is_empty() {
            self.status = TaskStatus::Working;
        }
        any
    }

    /// Ends it with its request's result or error.
    fn finish(&mut self, outcome: &Result<JsonObject, Error>, now: u64) -> bool {
        if self.is_terminal() {
            return false;
        }
        match outcome {
            Ok(result) => {
                self.status = TaskStatus::Completed;
                self.result = Some(result.clone());
            }
            Err(error) => self.fail(error, now),
        }
        self.end(now);
        true
    }

    fn fail(&mut self, error: &Error, now: u64) {
        self.status = TaskStatus::Failed;
        self.message = Some(error.message().to_string());
        self.error = serde_json::to_value(error)
            .ok()
            .and_then(|v| v.as_object().cloned());
        self.end(now);
    }

    fn end(&mut self, now: u64) {
        self.asked.clear();
        self.answers.clear();
        self.lease = None;
        self.ended = Some(now);
    }

    fn cancel(&mut self, now: u64) -> bool {
        if self.is_terminal() {
            return false;
        }
        self.status = TaskStatus::Cancelled;
        self.message = Some("cancelled by the client".into());
        self.end(now);
        true
    }

    /// Extends the runner's lease to `until`.
    fn renew(&mut self, until: u64) -> bool {
        if self.is_terminal() {
            return false;
        }
        self.lease = Some(until);
        true
    }

    /// Whether the runner's lease has lapsed by `now`.
    fn lapsed(&self, now: u64) -> bool {
        !self.is_terminal() && self.lease.is_some_and(|until| until < now)
    }

    /// Fails it when its runner's lease lapsed.
    fn lapse(&mut self, now: u64) -> bool {
        if !self.lapsed(now) {
            return false;
        }
        self.fail(&Error::internal_error().with_data(WENT_AWAY), now);
        self.message = Some(WENT_AWAY.into());
        true
    }

    fn expired(&self, now: u64) -> bool {
        let keep = u64::try_from(KEEP_ENDED.as_millis()).unwrap_or(u64::MAX);
        self.ended.is_some_and(|ended| {
            now >= self
                .created
                .saturating_add(self.ttl)
                .max(ended.saturating_add(keep))
        })
    }

    /// The task as `tasks/get` shows it.
    fn task(&self, id: &str, result_type: Option<ResultType>) -> Task {
        Task {
            result_type,
            task_id: id.to_owned(),
            status: self.status,
            status_message: self.message.clone(),
            created_at: rfc3339(UNIX_EPOCH + Duration::from_millis(self.created)),
            last_updated_at: rfc3339(UNIX_EPOCH + Duration::from_millis(self.updated)),
            ttl_ms: Some(self.ttl.max(1)),
            poll_interval_ms: Some(self.poll.max(1)),
            input_requests: (self.status == TaskStatus::InputRequired).then(|| self.asked.clone()),
            result: self.result.clone(),
            error: self.error.clone(),
            meta: None,
        }
    }

    fn encode(&self) -> Bytes {
        Bytes::from(serde_json::to_vec(self).unwrap_or_default())
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}

/// Milliseconds since 1970.
fn now_ms() -> u64 {
    millis(SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default())
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The questions a running task waits on, on the replica running it.
#[derive(Default)]
struct Waiting {
    answers: HashMap<String, oneshot::Sender<Value>>,
    /// Every key asked so far (a key is never reused).
    keys: std::collections::HashSet<String>,
    next_key: u64,
}

/// A task this replica runs (or ran, until it expires).
pub(crate) struct TaskEntry {
    id: String,
    store: Weak<TaskStore>,
    /// The task as it was made, for the answer to the request that made it.
    made: Task,
    created_at: Instant,
    ttl: Duration,
    ended: Mutex<Option<Instant>>,
    waiting: Mutex<Waiting>,
    /// Stops the task's work: `tasks/cancel` (through any replica), a lost
    /// lease.
    pub(crate) cancel: CancellationToken,
}

impl TaskEntry {
    fn waiting(&self) -> MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The task as it was made (status `working`).
    pub(crate) fn made(&self, result_type: ResultType) -> Task {
        let mut task = self.made.clone();
        task.result_type = Some(result_type);
        task
    }

    /// Asks the client for `request` under a key new to this task (`name`
    /// when it is free); resolves with the client's answer (given through
    /// any replica), or with `None` when the task ends first.
    pub(crate) fn ask(
        self: &Arc<Self>,
        name: Option<&str>,
        request: InputRequest,
    ) -> Pin<Box<dyn Future<Output = Option<Value>> + Send>> {
        let (tx, rx) = oneshot::channel();
        let key = {
            let mut waiting = self.waiting();
            waiting.next_key += 1;
            let n = waiting.next_key;
            let key = match name {
                Some(name) if !waiting.keys.contains(name) => name.to_owned(),
                Some(name) => format!("{name}-{n}"),
                None => format!("input-{n}"),
            };
            waiting.keys.insert(key.clone());
            waiting.answers.insert(key.clone(), tx);
            key
        };
        let entry = Arc::clone(self);
        Box::pin(async move {
            let store = entry.store.upgrade()?;
            let asked = store.write(&entry.id, |record| record.ask(&key, &request)).await;
            match asked {
                Ok(Some(record)) if !record.is_terminal() => rx.await.ok(),
                Ok(_) => None,
                Err(e) => {
                    tracing::warn!(task = %entry.id, error = %e, "tasks: cannot ask for input");
                    None
                }
            }
        })
    }

    /// Ends the task with what its request returned, or the error it failed
    /// with; a task that has ended already (cancelled) keeps its end. A
    /// result larger than the shared state keeps fails the task, saying so;
    /// while the state cannot be reached it tries again, up to a lease.
    pub(crate) async fn finish(&self, outcome: Result<JsonObject, Error>) {
        let Some(store) = self.store.upgrade() else {
            return;
        };
        let started = Instant::now();
        let mut outcome = outcome;
        let mut failures = 0u32;
        loop {
            let written = store
                .write(&self.id, |record| record.finish(&outcome, now_ms()))
                .await;
            match written {
                Ok(_) => break,
                Err(StateError::TooLarge { size, limit }) => {
                    outcome = Err(Error::internal_error().with_data(&format!(
                        "the task's result is {size} bytes, more than the shared state keeps ({limit} bytes)"
                    )));
                }
                Err(e) if started.elapsed() < store.settings.lease => {
                    failures += 1;
                    tracing::warn!(task = %self.id, error = %e, "tasks: cannot record the end; trying again");
                    tokio::time::sleep(Duration::from_millis(100 * u64::from(failures.min(20)))).await;
                }
                Err(e) => {
                    tracing::error!(task = %self.id, error = %e, "tasks: the end is lost; the task will lapse");
                    break;
                }
            }
        }
        self.ended();
    }

    fn ended(&self) {
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        ended.get_or_insert_with(Instant::now);
        drop(ended);
        // Whatever still waits hears that nothing will come.
        self.waiting().answers.clear();
    }

    fn is_ended(&self) -> bool {
        self.ended.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// Brings the runner in line with its record: answers given go to what
    /// waits for them; a task ended elsewhere (cancelled, failed for a
    /// lapsed lease) stops its work.
    fn reconcile(&self, record: &TaskRecord) {
        if record.is_terminal() {
            self.ended();
            self.cancel.cancel();
            return;
        }
        let mut waiting = self.waiting();
        for (key, value) in &record.answers {
            if let Some(answer) = waiting.answers.remove(key) {
                let _ = answer.send(value.clone());
            }
        }
    }

    fn expired(&self, now: Instant) -> bool {
        match *self.ended.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(ended) => now >= (self.created_at + self.ttl).max(ended + KEEP_ENDED),
            None => false,
        }
    }
}

/// The tasks of a server: their records in the shared state, and the
/// runners of those this replica runs.
pub(crate) struct TaskStore {
    settings: TaskSettings,
    state: Arc<dyn SharedState>,
    changes: super::changes::Changes,
    /// This replica, in the records it writes.
    replica: String,
    /// The tasks this replica runs or ran, until they expire.
    local: Mutex<HashMap<String, Arc<TaskEntry>>>,
    /// Tasks (any replica's) not yet ended, and their leases: the ones to
    /// fail when their runner goes away.
    leases: Mutex<HashMap<String, u64>>,
    /// What each task not yet ended last showed (its `shown`): a record
    /// written again with nothing new to show (a lease renewed, heard here
    /// twice) is not announced.
    seen: Mutex<HashMap<String, u64>>,
}

impl TaskStore {
    pub(crate) fn new(
        settings: TaskSettings,
        state: Arc<dyn SharedState>,
        changes: super::changes::Changes,
        replica: String,
    ) -> Arc<Self> {
        let store = Arc::new(TaskStore {
            settings,
            state,
            changes,
            replica,
            local: Mutex::default(),
            leases: Mutex::default(),
            seen: Mutex::default(),
        });
        if store.state.is_shared() {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(sweep(Arc::downgrade(&store)));
            }
        }
        store
    }

    fn local(&self) -> MutexGuard<'_, HashMap<String, Arc<TaskEntry>>> {
        self.local.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn leases(&self) -> MutexGuard<'_, HashMap<String, u64>> {
        self.leases.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new working task for `owner`, in the shared state before this
    /// returns (so that `tasks/get` through any replica finds it as soon as
    /// the client hears of it), or `-32007` when this replica keeps too
    /// many. `cancel` stops its work.
    pub(crate) async fn create(
        self: &Arc<Self>,
        owner: Option<&str>,
        cancel: CancellationToken,
    ) -> Result<Arc<TaskEntry>, Error> {
        let expired: Vec<String> = {
            let now = Instant::now();
            let mut local = self.local();
            let gone: Vec<String> = local
                .iter()
                .filter(|(_, task)| task.expired(now))
                .map(|(id, _)| id.clone())
                .collect();
            for id in &gone {
                local.remove(id);
            }
            if local.len() >= self.settings.max_tasks {
                return Err(Error::server_busy().with_data("too many tasks: try again later"));
            }
            gone
        };
        if !self.state.is_shared() {
            // One process's memory forgets what no one can read any more;
            // a shared store's records age out on their own.
            for id in &expired {
                let _ = self.state.delete(Space::Tasks, id).await;
            }
        }
        let now = now_ms();
        let shared = self.state.is_shared();
        let record = TaskRecord {
            owner: owner.map(str::to_owned),
            created: now,
            ttl: millis(self.settings.ttl),
            poll: millis(self.settings.poll_interval),
            status: TaskStatus::Working,
            message: None,
            updated: now,
            ended: None,
            result: None,
            error: None,
            asked: InputRequests::new(),
            answers: JsonObject::new(),
            lease: shared.then(|| now + millis(self.settings.lease)),
            runner: self.replica.clone(),
            by: self.replica.clone(),
            shown: 0,
        };
        let id = super::ids::random_id();
        let created = self
            .state
            .create(Space::Tasks, &id, record.encode())
            .await
            .map_err(unavailable)?;
        if created.is_none() {
            return Err(Error::internal_error().with_data("a task id was taken twice"));
        }
        let entry = Arc::new(TaskEntry {
            id: id.clone(),
            store: Arc::downgrade(self),
            made: record.task(&id, None),
            created_at: Instant::now(),
            ttl: self.settings.ttl,
            ended: Mutex::new(None),
            waiting: Mutex::default(),
            cancel,
        });
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), 0);
        self.local().insert(id, Arc::clone(&entry));
        if shared {
            tokio::spawn(keep_lease(Arc::downgrade(self), Arc::clone(&entry)));
        }
        Ok(entry)
    }

    /// Applies `step` to the record of task `id` by compare-and-set; when
    /// it changed it, listeners hear of it and this replica's runner (if it
    /// runs the task) follows. Returns the record as it stands (`None`:
    /// no such task).
    async fn write(
        &self,
        id: &str,
        mut step: impl FnMut(&mut TaskRecord) -> bool,
    ) -> Result<Option<TaskRecord>, StateError> {
        let mut after = None;
        let (_, wrote) = modify(&*self.state, Space::Tasks, id, |bytes| {
            let mut record = TaskRecord::decode(bytes?)?;
            let before = record.clone();
            let changed = step(&mut record);
            if changed {
                record.by = self.replica.clone();
                if record.view() != before.view() {
                    record.updated = now_ms().max(record.updated);
                    record.shown += 1;
                }
            }
            let bytes = changed.then(|| record.encode());
            after = Some(record);
            bytes
        })
        .await?;
        if let Some(record) = &after {
            if wrote {
                self.changed(id, record);
            }
        }
        Ok(after)
    }

    /// A record changed (here, or on another replica): listeners hear of
    /// it when what it shows changed, the runner follows, the lease is
    /// watched.
    fn changed(&self, id: &str, record: &TaskRecord) {
        let shown = {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            let before = if record.is_terminal() {
                seen.remove(id)
            } else {
                seen.insert(id.to_owned(), record.shown)
            };
            before != Some(record.shown)
        };
        if shown {
            self.changes.task_changed(id);
        }
        let entry = self.local().get(id).cloned();
        if let Some(entry) = entry {
            entry.reconcile(record);
        }
        if self.state.is_shared() {
            let mut leases = self.leases();
            match record.lease {
                Some(until) if !record.is_terminal() => {
                    leases.insert(id.to_owned(), until);
                }
                _ => {
                    leases.remove(id);
                }
            }
        }
    }

    /// Another replica wrote the record of task `id`.
    pub(crate) fn heard(&self, id: &str, bytes: &[u8]) {
        let Some(record) = TaskRecord::decode(bytes) else {
            return;
        };
        if record.by == self.replica {
            // Heard already, when it was written.
            return;
        }
        self.changed(id, &record);
    }

    /// The record of task `id` of `owner`; `-32602` for an unknown, expired
    /// or foreign one. A task whose runner's lease lapsed is failed first.
    async fn find(&self, id: &str, owner: Option<&str>) -> Result<TaskRecord, Error> {
        let not_found = || {
            Error::new(INVALID_PARAMS, "Failed to retrieve task: Task not found")
                .with_data(&serde_json::json!({ "taskId": id }))
        };
        let entry = self
            .state
            .get(Space::Tasks, id)
            .await
            .map_err(unavailable)?
            .ok_or_else(not_found)?;
        let mut record = TaskRecord::decode(&entry.value).ok_or_else(not_found)?;
        let now = now_ms();
        if record.owner.as_deref() != owner || record.expired(now) {
            return Err(not_found());
        }
        if record.lapsed(now) {
            if let Some(failed) = self.write(id, |r| r.lapse(now_ms())).await.map_err(unavailable)? {
                record = failed;
            }
        }
        Ok(record)
    }

    pub(crate) async fn get(&self, id: &str, owner: Option<&str>) -> Result<Task, Error> {
        Ok(self.find(id, owner).await?.task(id, Some(ResultType::Complete)))
    }

    pub(crate) async fn update(
        &self,
        id: &str,
        owner: Option<&str>,
        responses: InputResponses,
    ) -> Result<(), Error> {
        self.find(id, owner).await?;
        self.write(id, |record| record.answer(&responses))
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    pub(crate) async fn cancel(&self, id: &str, owner: Option<&str>) -> Result<(), Error> {
        self.find(id, owner).await?;
        self.write(id, |record| record.cancel(now_ms()))
            .await
            .map_err(unavailable)?;
        Ok(())
    }
}

/// Renews the lease of a task this replica runs, every third of a lease,
/// until it ends; when the shared state cannot be reached until the lease
/// lapses, the task is cancelled here (another replica reports it failed).
async fn keep_lease(store: Weak<TaskStore>, entry: Arc<TaskEntry>) {
    let Some(lease) = store.upgrade().map(|s| s.settings.lease) else {
        return;
    };
    let mut vouched_until = Instant::now() + lease;
    loop {
        tokio::select! {
            () = tokio::time::sleep(lease / 3) => {}
            () = entry.cancel.cancelled() => return,
        }
        if entry.is_ended() {
            return;
        }
        let Some(store) = store.upgrade() else {
            return;
        };
        let asked_at = Instant::now();
        let until = now_ms() + millis(lease);
        match store.write(&entry.id, |record| record.renew(until)).await {
            Ok(Some(record)) if record.is_terminal() => return,
            Ok(_) => vouched_until = asked_at + lease,
            Err(e) if Instant::now() >= vouched_until => {
                tracing::warn!(task = %entry.id, error = %e, "tasks: the lease lapsed (the shared state cannot be reached); cancelling the task");
                entry.ended();
                entry.cancel.cancel();
                return;
            }
            Err(e) => {
                tracing::warn!(task = %entry.id, error = %e, "tasks: cannot renew the lease; trying again")
            }
        }
    }
}

/// Fails the tasks whose runner's lease lapsed (any replica's), every
/// second, while the store lives.
async fn sweep(store: Weak<TaskStore>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(store) = store.upgrade() else {
            return;
        };
        let now = now_ms();
        let lapsed: Vec<String> = store
            .leases()
            .iter()
            .filter(|(_, until)| **until < now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in lapsed {
            match store.write(&id, |record| record.lapse(now_ms())).await {
                Ok(Some(record)) if !record.lapsed(now_ms()) && !record.is_terminal() => {
                    // Renewed meanwhile: `changed` has the new lease.
                }
                Ok(None) => {
                    store.leases().remove(&id);
                }
                Ok(Some(_)) => {}
                Err(e) => tracing::debug!(task = %id, error = %e, "tasks: cannot check a lease"),
            }
        }
    }
}

fn unavailable(e: StateError) -> Error {
    Error::internal_error().with_data(&e.to_string())
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
    use crate::server::shared::InMemory;

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_764_066_600_250);
        assert_eq!(rfc3339(t), "2025-11-25T10:30:00.250Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }

    fn store() -> Arc<TaskStore> {
        TaskStore::new(
            TaskSettings::default(),
            Arc::new(InMemory::new()),
            super::super::changes::Changes::new(16),
            "r1".into(),
        )
    }

    #[tokio::test]
    async fn a_task_waits_for_its_answers_and_ends_once() {
        let store = store();
        let task = store.create(Some("ada"), CancellationToken::new()).await.unwrap();
        let id = task.made(ResultType::Task).task_id;
        assert!(
            store.get(&id, None).await.is_err(),
            "another caller does not see it"
        );
        let first = task.ask(Some("name"), InputRequest::ListRoots);
        let second = task.ask(Some("name"), InputRequest::ListRoots);
        let (first, second) = (tokio::spawn(first), tokio::spawn(second));
        tokio::task::yield_now().await;
        let got = store.get(&id, Some("ada")).await.unwrap();
        assert_eq!(got.status, TaskStatus::InputRequired);
        let keys: Vec<String> = got.input_requests.unwrap().into_keys().collect();
        assert_eq!(keys, ["name", "name-2"]);
        let mut answers = InputResponses::new();
        answers.insert("name".into(), serde_json::json!({"roots": []}));
        answers.insert("unknown".into(), serde_json::json!({"ignored": true}));
        store.update(&id, Some("ada"), answers).await.unwrap();
        assert_eq!(first.await.unwrap(), Some(serde_json::json!({"roots": []})));
        let got = store.get(&id, Some("ada")).await.unwrap();
        assert_eq!(
            got.status,
            TaskStatus::InputRequired,
            "one answer is still missing"
        );
        store.cancel(&id, Some("ada")).await.unwrap();
        assert_eq!(
            second.await.unwrap(),
            None,
            "a cancelled task answers nothing more"
        );
        task.finish(Ok(JsonObject::new())).await;
        let got = store.get(&id, Some("ada")).await.unwrap();
        assert_eq!((got.status, got.result), (TaskStatus::Cancelled, None));
        assert!(task.cancel.is_cancelled());
        // Cancelling an ended task is acknowledged, and changes nothing.
        store.cancel(&id, Some("ada")).await.unwrap();
        assert_eq!(store.get("nope", None).await.unwrap_err().code(), INVALID_PARAMS);
    }

    /// One process's memory that keeps records of at most 2 KiB.
    #[derive(Debug, Default)]
    struct Small(InMemory);

    impl SharedState for Small {
        fn get<'a>(
            &'a self,
            space: Space,
            key: &'a str,
        ) -> crate::server::shared::StateFuture<'a, Option<crate::server::shared::Entry>> {
            self.0.get(space, key)
        }
        fn create<'a>(
            &'a self,
            space: Space,
            key: &'a str,
            value: Bytes,
        ) -> crate::server::shared::StateFuture<'a, Option<u64>> {
            self.0.create(space, key, value)
        }
        fn update<'a>(
            &'a self,
            space: Space,
            key: &'a str,
            value: Bytes,
            revision: u64,
        ) -> crate::server::shared::StateFuture<'a, Option<u64>> {
            self.0.update(space, key, value, revision)
        }
        fn delete<'a>(&'a self, space: Space, key: &'a str) -> crate::server::shared::StateFuture<'a, ()> {
            self.0.delete(space, key)
        }
        fn publish(&self, message: Bytes) -> crate::server::shared::StateFuture<'_, ()> {
            self.0.publish(message)
        }
        fn events(&self) -> futures_util::stream::BoxStream<'static, crate::server::shared::Event> {
            self.0.events()
        }
        fn is_shared(&self) -> bool {
            false
        }
        fn max_record(&self) -> usize {
            2048
        }
    }

    #[tokio::test]
    async fn a_result_larger_than_the_store_keeps_fails_the_task_saying_so() {
        let store = TaskStore::new(
            TaskSettings::default(),
            Arc::new(Small::default()),
            super::super::changes::Changes::new(16),
            "r1".into(),
        );
        let task = store.create(None, CancellationToken::new()).await.unwrap();
        let mut big = JsonObject::new();
        big.insert("text".into(), Value::String("x".repeat(10_000)));
        task.finish(Ok(big)).await;
        let got = store
            .get(&task.made(ResultType::Task).task_id, None)
            .await
            .unwrap();
        assert_eq!(got.status, TaskStatus::Failed);
        let data = got.error.unwrap()["data"].as_str().unwrap().to_owned();
        assert!(
            data.contains("more than the shared state keeps (2048 bytes)"),
            "{data}"
        );
    }

    fn record() -> TaskRecord {
        TaskRecord {
            owner: None,
            created: 1_000,
            ttl: 60_000,
            poll: 500,
            status: TaskStatus::Working,
            message: None,
            updated: 1_000,
            ended: None,
            result: None,
            error: None,
            asked: InputRequests::new(),
            answers: JsonObject::new(),
            lease: Some(16_000),
            runner: "a".into(),
            by: "a".into(),
            shown: 0,
        }
    }

    #[tokio::test]
    async fn listeners_hear_of_what_tasks_get_shows_not_of_a_renewed_lease() {
        let changes = super::super::changes::Changes::new(64);
        let mut heard = changes.subscribe();
        let store = TaskStore::new(
            TaskSettings::default(),
            Arc::new(InMemory::new()),
            changes,
            "r1".into(),
        );
        let task = store.create(None, CancellationToken::new()).await.unwrap();
        let id = task.made(ResultType::Task).task_id;
        let before = store.get(&id, None).await.unwrap().last_updated_at;
        store.write(&id, |r| r.renew(u64::MAX)).await.unwrap();
        assert!(heard.try_recv().is_err(), "a renewed lease is no news");
        assert_eq!(store.get(&id, None).await.unwrap().last_updated_at, before);
        // Another replica's write of the same record, heard twice: once.
        let entry = store.state.get(Space::Tasks, &id).await.unwrap().unwrap();
        let mut record = TaskRecord::decode(&entry.value).unwrap();
        record.by = "r2".into();
        record.status = TaskStatus::InputRequired;
        record.shown += 1;
        let written = store
            .state
            .update(Space::Tasks, &id, record.encode(), entry.revision);
        written.await.unwrap().unwrap();
        store.heard(&id, &record.encode());
        store.heard(&id, &record.encode());
        assert!(matches!(
            heard.try_recv(),
            Ok(super::super::changes::Change::Task(_))
        ));
        assert!(heard.try_recv().is_err(), "heard twice, told once");
        store.cancel(&id, None).await.unwrap();
        assert!(matches!(
            heard.try_recv(),
            Ok(super::super::changes::Change::Task(_))
        ));
    }

    #[test]
    fn no_step_changes_a_task_that_ended() {
        let ended = |status| {
            let mut r = record();
            r.status = status;
            r.ended = Some(2_000);
            r
        };
        for status in [TaskStatus::Completed, TaskStatus::Failed, TaskStatus::Cancelled] {
            let mut r = ended(status);
            let before = r.clone();
            assert!(!r.ask("k", &InputRequest::ListRoots));
            assert!(!r.answer(&[("k".to_string(), Value::Null)].into_iter().collect()));
            assert!(!r.finish(&Ok(JsonObject::new()), 3_000));
            assert!(!r.finish(&Err(Error::internal_error()), 3_000));
            assert!(!r.cancel(3_000));
            assert!(!r.renew(99_000));
            assert!(!r.lapse(99_000));
            assert_eq!(r, before, "{status:?}");
        }
    }

    #[test]
    fn a_lapsed_lease_fails_the_task_saying_why() {
        let mut r = record();
        assert!(!r.lapse(16_000), "not before the lease ends");
        assert!(r.renew(20_000));
        assert!(!r.lapse(19_999));
        assert!(r.lapse(20_001));
        assert_eq!(r.status, TaskStatus::Failed);
        assert_eq!(r.message.as_deref(), Some(WENT_AWAY));
        assert!(r.error.is_some() && r.lease.is_none());
        let mut local = record();
        local.lease = None;
        assert!(!local.lapse(u64::MAX), "a task of one process has no lease");
    }

    #[test]
    fn answers_wait_for_the_runner_and_the_record_round_trips() {
        let mut r = record();
        assert!(r.ask("a", &InputRequest::ListRoots));
        assert!(r.ask("b", &InputRequest::ListRoots));
        let one: InputResponses = [("a".to_string(), serde_json::json!(1))].into_iter().collect();
        assert!(r.answer(&one));
        assert_eq!(r.status, TaskStatus::InputRequired);
        assert!(!r.answer(&one), "an answer is taken once");
        let two: InputResponses = [("b".to_string(), serde_json::json!(2))].into_iter().collect();
        assert!(r.answer(&two));
        assert_eq!(r.status, TaskStatus::Working);
        assert_eq!(r.answers.len(), 2);
        assert_eq!(TaskRecord::decode(&r.encode()), Some(r.clone()));
        assert!(r.finish(&Ok(JsonObject::new()), 5_000));
        assert!(r.answers.is_empty() && r.asked.is_empty());
        assert!(!r.expired(64_999) && r.expired(65_000), "a minute after its end");
    }
}
