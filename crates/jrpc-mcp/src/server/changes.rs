//! Announcing changes: the server (or a handler) says that a list changed
//! or a resource was updated, and every listener hears it — legacy sessions
//! as `notifications/*/list_changed` and `notifications/resources/updated`,
//! modern `subscriptions/listen` streams as the notifications they asked
//! for.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc, oneshot};

use super::shared::StateError;

/// One change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    ToolsListChanged,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated(Arc<str>),
    /// A task's status or its input changed (the tasks extension).
    Task(Arc<str>),
}

impl Change {
    /// The notification's method.
    pub(crate) fn method(&self) -> &'static str {
        match self {
            Change::ToolsListChanged => "notifications/tools/list_changed",
            Change::PromptsListChanged => "notifications/prompts/list_changed",
            Change::ResourcesListChanged => "notifications/resources/list_changed",
            Change::ResourceUpdated(_) => "notifications/resources/updated",
            Change::Task(_) => "notifications/tasks",
        }
    }
}

/// Announces changes to whoever listens. Cheap to clone; get one from
/// [`McpServer::changes`](super::McpServer::changes) or
/// [`McpContext::changes`](super::McpContext::changes).
///
/// ```
/// # async fn run() {
/// let server = jrpc_mcp::McpServer::builder("s", "1").list_changed(true).build();
/// server.changes().resource_updated("file:///notes.txt");
/// server.changes().tools_changed();
/// # }
/// ```
#[derive(Clone)]
pub struct Changes {
    sender: broadcast::Sender<Change>,
    /// Where changes go to reach the other replicas, when the server's
    /// state is shared.
    replicas: Arc<OnceLock<mpsc::UnboundedSender<Outgoing>>>,
}

/// A change on its way to the other replicas, and who waits to learn it
/// arrived.
pub(crate) struct Outgoing {
    pub(crate) change: Change,
    pub(crate) sent: oneshot::Sender<Result<(), StateError>>,
}

/// A change announced: await it to wait until the other replicas can hear
/// it too (at once when the server's state is not shared), or drop it not
/// to wait.
///
/// A handler that answers only after its change has reached the shared
/// state loses no notification when its replica dies a moment later; one
/// that does not wait answers sooner.
///
/// ```
/// # async fn run(cx: jrpc_mcp::McpContext) {
/// // Fire and forget:
/// cx.changes().resource_updated("file:///notes.txt");
/// // Or known to every replica before the call is answered:
/// if let Err(e) = cx.changes().resource_updated("file:///notes.txt").await {
///     tracing::warn!(error = %e, "the other replicas will not hear of it");
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct Announced {
    sent: Option<oneshot::Receiver<Result<(), StateError>>>,
}

impl IntoFuture for Announced {
    type Output = Result<(), StateError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            match self.sent {
                None => Ok(()),
                Some(sent) => sent.await.unwrap_or_else(|_| {
                    Err(StateError::Unavailable(
                        "the server stopped before the change was shared".into(),
                    ))
                }),
            }
        })
    }
}

impl std::fmt::Debug for Changes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Changes")
            .field("listeners", &self.sender.receiver_count())
            .finish()
    }
}

impl Changes {
    /// A hub that holds at most `capacity` changes for a slow listener; one
    /// that falls further behind is told every list changed.
    pub(crate) fn new(capacity: usize) -> Self {
        Changes {
            sender: broadcast::channel(capacity.max(1)).0,
            replicas: Arc::default(),
        }
    }

    /// From now on, changes announced here also go to `replicas` (task
    /// changes excepted: replicas hear of those through the tasks' records).
    pub(crate) fn share(&self, replicas: mpsc::UnboundedSender<Outgoing>) {
        let _ = self.replicas.set(replicas);
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.sender.subscribe()
    }

    fn send(&self, change: Change) -> Announced {
        let mut announced = Announced { sent: None };
        if let Some(replicas) = self.replicas.get() {
            if !matches!(change, Change::Task(_)) {
                let (sent, heard) = oneshot::channel();
                let outgoing = Outgoing {
                    change: change.clone(),
                    sent,
                };
                if replicas.send(outgoing).is_ok() {
                    announced.sent = Some(heard);
                }
            }
        }
        self.send_here(change);
        announced
    }

    /// Tells this replica's listeners only (a change another replica
    /// announced).
    pub(crate) fn send_here(&self, change: Change) {
        // No listener is not an error: nobody is interested yet.
        let _ = self.sender.send(change);
    }

    /// The list of tools changed.
    pub fn tools_changed(&self) -> Announced {
        self.send(Change::ToolsListChanged)
    }

    /// The list of prompts changed.
    pub fn prompts_changed(&self) -> Announced {
        self.send(Change::PromptsListChanged)
    }

    /// The list of resources (or resource templates) changed.
    pub fn resources_changed(&self) -> Announced {
        self.send(Change::ResourcesListChanged)
    }

    /// The resource at `uri` changed: its subscribers hear of it.
    pub fn resource_updated(&self, uri: impl Into<Arc<str>>) -> Announced {
        self.send(Change::ResourceUpdated(uri.into()))
    }

    pub(crate) fn task_changed(&self, id: &str) {
        self.send_here(Change::Task(id.into()));
    }
}

/// A change as replicas tell each other of it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case")]
enum Wire {
    ToolsListChanged,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated { uri: String },
}

impl Change {
    /// The change as a message to other replicas (task changes travel as
    /// records instead).
    pub(crate) fn encode(&self) -> Option<Vec<u8>> {
        let wire = match self {
            Change::ToolsListChanged => Wire::ToolsListChanged,
            Change::PromptsListChanged => Wire::PromptsListChanged,
            Change::ResourcesListChanged => Wire::ResourcesListChanged,
            Change::ResourceUpdated(uri) => Wire::ResourceUpdated { uri: uri.to_string() },
            Change::Task(_) => return None,
        };
        serde_json::to_vec(&wire).ok()
    }

    /// A change another replica told of; `None` for anything else.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Change> {
        Some(match serde_json::from_slice(bytes).ok()? {
            Wire::ToolsListChanged => Change::ToolsListChanged,
            Wire::PromptsListChanged => Change::PromptsListChanged,
            Wire::ResourcesListChanged => Change::ResourcesListChanged,
            Wire::ResourceUpdated { uri } => Change::ResourceUpdated(uri.into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_travel_between_replicas_intact() {
        for change in [
            Change::ToolsListChanged,
            Change::PromptsListChanged,
            Change::ResourcesListChanged,
            Change::ResourceUpdated("demo://counter".into()),
        ] {
            let bytes = change.encode().unwrap();
            assert_eq!(Change::decode(&bytes), Some(change));
        }
        assert_eq!(Change::Task("t".into()).encode(), None);
        assert_eq!(Change::decode(b"{\"change\":\"unknown\"}"), None);
        assert_eq!(Change::decode(b"not json"), None);
    }

    #[tokio::test]
    async fn shared_changes_go_to_replicas_but_task_changes_do_not() {
        let changes = Changes::new(8);
        let (tx, mut rx) = mpsc::unbounded_channel();
        changes.share(tx);
        let mut here = changes.subscribe();
        let announced = changes.resource_updated("demo://counter");
        changes.task_changed("t");
        changes.send_here(Change::ToolsListChanged);
        let outgoing = rx.recv().await.unwrap();
        assert_eq!(outgoing.change, Change::ResourceUpdated("demo://counter".into()));
        // The announcer learns how the sharing went.
        outgoing
            .sent
            .send(Err(StateError::Unavailable("down".into())))
            .unwrap();
        assert!(matches!(announced.await, Err(StateError::Unavailable(_))));
        assert!(
            rx.try_recv().is_err(),
            "a task change or a change heard stays here"
        );
        assert_eq!(
            here.recv().await.unwrap(),
            Change::ResourceUpdated("demo://counter".into())
        );
        assert_eq!(here.recv().await.unwrap(), Change::Task("t".into()));
        assert_eq!(here.recv().await.unwrap(), Change::ToolsListChanged);
    }

    #[tokio::test]
    async fn a_change_of_an_unshared_server_is_announced_at_once() {
        let changes = Changes::new(8);
        let mut here = changes.subscribe();
        changes.tools_changed().await.unwrap();
        assert_eq!(here.recv().await.unwrap(), Change::ToolsListChanged);
    }
}
