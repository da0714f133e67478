//! Running one tool, prompt or resource handler in the era of its request.
//!
//! A legacy request runs once: when its handler asks the client for input
//! (sampling, elicitation, roots), the server sends the client a request and
//! waits. 2026-07-28 forbids requests to the client, so a modern request
//! runs in *rounds*: the handler runs from the start with the answers the
//! client has given so far; when it asks for something it has no answer
//! for, it stops there, and the server answers `input_required` with every
//! question asked in that round (questions awaited together, with `join!`,
//! go out together) and a sealed `requestState` carrying the answers read
//! so far. The client asks again with the new answers and the handler runs
//! again, this time getting further. A handler with side effects before its
//! first question should make them idempotent or wrap them in
//! [`McpContext::once`](super::McpContext::once), which runs them in the
//! first round only.
//!
//! A tool that may run as a task (the tasks extension) turns into one when
//! its handler calls [`McpContext::run_as_task`](super::McpContext::run_as_task):
//! the request answers with the task at once, and the same handler goes on
//! in the background, its questions now waiting for `tasks/update`.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};

use jrpc::message::codes::INVALID_PARAMS;
use jrpc::Error;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::request_state::Carried;
use super::tasks::{TaskEntry, TaskStore};
use crate::types::{ClientCapabilities, InputRequest, InputRequests, InputResponses, JsonObject};

pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// One round of a modern request: what the client has answered, and what
/// the handler asked for that it has not.
#[derive(Default)]
pub(crate) struct Round {
    /// The answers the handler may read: carried from earlier rounds, then
    /// those of this request's `inputResponses`.
    answers: JsonObject,
    /// What [`McpContext::once`](super::McpContext::once) computed in
    /// earlier rounds.
    once: JsonObject,
    /// What goes to the next round: the answers read, `once`'s results.
    carried: Carried,
    asked: InputRequests,
    missing: Option<ClientCapabilities>,
    error: Option<Error>,
    next_key: u32,
}

impl Round {
    /// A round with `carried` from the request state (if any) and the
    /// request's `responses`; the carried answers are final, so a response
    /// to a key answered before is ignored.
    pub(crate) fn new(carried: Carried, responses: Option<InputResponses>) -> Self {
        let mut answers = carried.answers;
        for (key, value) in responses.into_iter().flatten() {
            answers.entry(key).or_insert(value);
        }
        Round {
            answers,
            once: carried.once,
            ..Round::default()
        }
    }
}

enum Mode {
    /// A legacy request: the client is asked directly.
    Legacy,
    /// A round of a modern request.
    Round(Box<Round>),
    /// Running as a task.
    Task(Arc<TaskEntry>),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum TaskGate {
    /// The request cannot become a task.
    Closed,
    /// It may, when the handler asks.
    Open,
    /// The handler asked; the runner has not answered yet.
    Requested,
    /// It is a task now.
    Granted,
}

struct Inner {
    mode: Mode,
    task: TaskGate,
    /// The runner's waker, so that a question asked from elsewhere (a task
    /// the handler spawned) still stops the round.
    waker: Option<Waker>,
    /// Who waits for the answer to `run_as_task`.
    task_waiter: Option<Waker>,
}

/// What a handler's context and the runner of its request share.
pub(crate) struct Control {
    inner: Mutex<Inner>,
}

/// How a question is answered.
pub(crate) enum Asked {
    /// Legacy: ask the client directly.
    Legacy,
    /// The answer the client gave (in this round or an earlier one).
    Answer(Value),
    /// The round stops here: the handler must wait forever (it is dropped).
    Stop,
    /// As a task: the answer comes from `tasks/update` (nothing, when the
    /// task ends first).
    Later(BoxFuture<Option<Value>>),
    /// As a task, for a capability the client did not declare.
    Unsupported,
}

impl Control {
    pub(crate) fn legacy() -> Arc<Self> {
        Self::new(Mode::Legacy, false)
    }

    /// A modern request's first (or next) round; `may_become_task` when the
    /// request may turn into a task.
    pub(crate) fn round(round: Round, may_become_task: bool) -> Arc<Self> {
        Self::new(Mode::Round(Box::new(round)), may_become_task)
    }

    fn new(mode: Mode, may_become_task: bool) -> Arc<Self> {
        Arc::new(Control {
            inner: Mutex::new(Inner {
                mode,
                task: if may_become_task {
                    TaskGate::Open
                } else {
                    TaskGate::Closed
                },
                waker: None,
                task_waiter: None,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wake(inner: &mut Inner) {
        if let Some(waker) = inner.waker.take() {
            waker.wake();
        }
    }

    /// Whether the request runs as a task now.
    pub(crate) fn is_task(&self) -> bool {
        matches!(self.lock().mode, Mode::Task(_))
    }

    /// Asks for `request` under `name` (or the next automatic key), when
    /// `declared` says the client can answer it; `require` adds the
    /// capability it needs to a capabilities object.
    pub(crate) fn ask(
        &self,
        name: Option<&str>,
        request: InputRequest,
        declared: bool,
        require: fn(&mut ClientCapabilities),
    ) -> Asked {
        let mut inner = self.lock();
        match &mut inner.mode {
            Mode::Legacy => Asked::Legacy,
            Mode::Task(task) => {
                if declared {
                    Asked::Later(task.ask(name, request))
                } else {
                    Asked::Unsupported
                }
            }
            Mode::Round(round) => {
                round.next_key += 1;
                let key =
                    name.map_or_else(|| format!("{}-{}", kind(&request), round.next_key), str::to_owned);
                if let Some(answer) = round.answers.get(&key) {
                    round.carried.answers.insert(key, answer.clone());
                    return Asked::Answer(answer.clone());
                }
                if declared {
                    round.asked.insert(key, request);
                } else {
                    require(round.missing.get_or_insert_with(ClientCapabilities::default));
                }
                Self::wake(&mut inner);
                Asked::Stop
            }
        }
    }

    /// Ends the round with `error` (a malformed answer).
    pub(crate) fn fail(&self, error: Error) {
        let mut inner = self.lock();
        if let Mode::Round(round) = &mut inner.mode {
            round.error.get_or_insert(error);
            Self::wake(&mut inner);
        }
    }

    /// What `once(key)` computed in an earlier round.
    pub(crate) fn once_value(&self, key: &str) -> Option<Value> {
        match &self.lock().mode {
            Mode::Round(round) => round.once.get(key).cloned(),
            _ => None,
        }
    }

    /// Keeps what `once(key)` computed for the rounds to come.
    pub(crate) fn keep_once(&self, key: &str, value: Value) {
        if let Mode::Round(round) = &mut self.lock().mode {
            round.carried.once.insert(key.to_owned(), value);
        }
    }

    /// The handler asks to go on as a task: `Some(true)` when it now is one,
    /// `Some(false)` when it cannot become one, `None` while the runner has
    /// not answered.
    pub(crate) fn request_task(&self, waker: &Waker) -> Option<bool> {
        let mut inner = self.lock();
        match inner.task {
            TaskGate::Closed => Some(false),
            TaskGate::Granted => Some(true),
            TaskGate::Open | TaskGate::Requested => {
                inner.task = TaskGate::Requested;
                inner.task_waiter = Some(waker.clone());
                Self::wake(&mut inner);
                None
            }
        }
    }

    /// Why the round must stop, if it must: an error, a capability the
    /// client lacks, a wish to become a task, or questions.
    fn interruption(&self, waker: &Waker) -> Option<Interrupt> {
        let mut inner = self.lock();
        if inner.task == TaskGate::Requested {
            return Some(Interrupt::Task);
        }
        inner.waker = Some(waker.clone());
        let Mode::Round(round) = &mut inner.mode else {
            return None;
        };
        if let Some(error) = round.error.take() {
            return Some(Interrupt::Error(error));
        }
        if let Some(missing) = round.missing.take() {
            return Some(Interrupt::Missing(missing));
        }
        if !round.asked.is_empty() {
            return Some(Interrupt::Input {
                asked: std::mem::take(&mut round.asked),
                carried: std::mem::take(&mut round.carried),
            });
        }
        None
    }

    /// The request is a task now.
    fn become_task(&self, task: Arc<TaskEntry>) {
        let mut inner = self.lock();
        inner.mode = Mode::Task(task);
        inner.task = TaskGate::Granted;
        if let Some(waiter) = inner.task_waiter.take() {
            waiter.wake();
        }
    }
}

/// The kind of a question, for its automatic key.
fn kind(request: &InputRequest) -> &'static str {
    match request {
        InputRequest::Sampling(_) => "sampling",
        InputRequest::Elicitation(_) => "elicitation",
        InputRequest::ListRoots => "roots",
    }
}

/// Why a round stopped before its handler finished.
pub(crate) enum Interrupt {
    /// A malformed answer: the request fails with this error.
    Error(Error),
    /// Capabilities the client did not declare: `-32021`.
    Missing(ClientCapabilities),
    /// Questions for the client, and what the next round needs.
    Input { asked: InputRequests, carried: Carried },
    /// The handler asks to go on as a task.
    Task,
}

/// How a handler's run ended.
pub(crate) enum Ran<T> {
    /// It finished.
    Done(T),
    /// The round stopped.
    Stopped(Interrupt),
    /// It goes on as this task.
    Task(Arc<TaskEntry>),
}

/// What turns a request into a task: where tasks are kept, who owns it, and
/// how its outcome becomes the task's result.
pub(crate) struct Launch<T> {
    pub(crate) store: Arc<TaskStore>,
    pub(crate) owner: Option<String>,
    pub(crate) cancel: CancellationToken,
    pub(crate) finish: Box<dyn FnOnce(T) -> Result<JsonObject, Error> + Send>,
}

/// Runs `work` until it finishes or its round stops; a handler that asks to
/// become a task (and may: `launch` is given) moves into the task `launch`
/// makes ready and goes on in the background.
///
/// One await for all of it: the task is made (in the shared state) within
/// the same poll, so that the future of every call — most never become
/// tasks — holds no room for a second suspension.
///
/// Not an `async fn`: one holds its arguments twice, in the future of every
/// call.
pub(crate) fn run<'a, T: Send + 'static>(
    control: &'a Arc<Control>,
    work: BoxFuture<T>,
    launch: Option<impl FnOnce() -> Launch<T> + Send + 'a>,
) -> impl Future<Output = Result<Ran<T>, Error>> + 'a {
    let mut work = Some(work);
    let mut launch = launch;
    let mut becoming: Option<BoxFuture<Result<Arc<TaskEntry>, Error>>> = None;
    std::future::poll_fn(move |cx| {
        if let Some(task) = becoming.as_mut() {
            return task.as_mut().poll(cx).map(|made| made.map(Ran::Task));
        }
        let Some(running) = work.as_mut() else {
            return Poll::Ready(Err(Error::internal_error().with_data("the request ran already")));
        };
        if let Poll::Ready(out) = running.as_mut().poll(cx) {
            return Poll::Ready(Ok(Ran::Done(out)));
        }
        match control.interruption(cx.waker()) {
            None => Poll::Pending,
            Some(Interrupt::Task) => {
                let (Some(running), Some(launch)) = (work.take(), launch.take()) else {
                    return Poll::Ready(Err(
                        Error::internal_error().with_data("this request cannot become a task")
                    ));
                };
                let task = becoming.insert(become_task(Arc::clone(control), running, launch()));
                task.as_mut().poll(cx).map(|made| made.map(Ran::Task))
            }
            Some(interrupt) => Poll::Ready(Ok(Ran::Stopped(interrupt))),
        }
    })
}

/// The request goes on as a task of `launch`: made in the shared state,
/// its work running in the background until it ends or is cancelled.
fn become_task<T: Send + 'static>(
    control: Arc<Control>,
    work: BoxFuture<T>,
    launch: Launch<T>,
) -> BoxFuture<Result<Arc<TaskEntry>, Error>> {
    Box::pin(async move {
        let task = launch
            .store
            .create(launch.owner.as_deref(), launch.cancel.clone())
            .await?;
        control.become_task(Arc::clone(&task));
        let running = Arc::clone(&task);
        let finish = launch.finish;
        let cancel = launch.cancel;
        tokio::spawn(async move {
            tokio::select! {
                out = work => running.finish(finish(out)).await,
                () = cancel.cancelled() => {}
            }
        });
        Ok(task)
    })
}

/// The error for an answer that is not what its question asked for.
pub(crate) fn malformed_answer(what: &str, error: &serde_json::Error) -> Error {
    Error::new(INVALID_PARAMS, "Invalid params").with_data(&format!("inputResponses: not {what}: {error}"))
}
