//! A server among replicas: what it does with state it shares with other
//! processes — its change announcements go to the others, theirs reach its
//! listeners, and their writes to task records reach its task store (the
//! runner of a task answered or cancelled elsewhere, `notifications/tasks`
//! on its listen streams).

use std::sync::{Arc, Weak};

use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::changes::{Change, Changes, Outgoing};
use super::shared::{Event, SharedState, Space};
use super::tasks::TaskStore;

/// Joins the server to its replicas, until the guard it returns is dropped
/// (with the server); `None` outside a tokio runtime, where nothing can run.
pub(crate) fn join(
    state: &Arc<dyn SharedState>,
    changes: &Changes,
    tasks: Option<Weak<TaskStore>>,
) -> Option<DropGuard> {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!("shared state: the server was built outside a tokio runtime; its replicas will not hear of each other");
        return None;
    };
    let stop = CancellationToken::new();
    let (outbound, mut announced) = mpsc::unbounded_channel::<Outgoing>();
    changes.share(outbound);
    let publisher = Arc::clone(state);
    runtime.spawn(async move {
        while let Some(outgoing) = announced.recv().await {
            let Some(message) = outgoing.change.encode() else {
                let _ = outgoing.sent.send(Ok(()));
                continue;
            };
            // The store tries for as long as a lost node usually takes to
            // be replaced; a change still not sent after that is lost.
            let sent = publisher.publish(bytes::Bytes::from(message)).await;
            if let Err(e) = &sent {
                tracing::warn!(error = %e, method = outgoing.change.method(), "shared state: a change could not reach the other replicas");
            }
            let _ = outgoing.sent.send(sent);
        }
    });
    let mut events = state.events();
    let changes = changes.clone();
    let stopped = stop.clone();
    runtime.spawn(async move {
        loop {
            let event = tokio::select! {
                event = events.next() => event,
                () = stopped.cancelled() => return,
            };
            match event {
                None => return,
                Some(Event::Message(message)) => {
                    if let Some(change) = Change::decode(&message) {
                        changes.send_here(change);
                    }
                }
                Some(Event::Record {
                    space: Space::Tasks,
                    key,
                    entry,
                }) => {
                    if let Some(store) = tasks.as_ref().and_then(Weak::upgrade) {
                        store.heard(&key, &entry.value);
                    }
                }
                Some(_) => {}
            }
        }
    });
    Some(stop.drop_guard())
}
