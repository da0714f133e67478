//! Announcing changes: the server (or a handler) says that a list changed
//! or a resource was updated, and every listener hears it — legacy sessions
//! as `notifications/*/list_changed` and `notifications/resources/updated`,
//! modern `subscriptions/listen` streams as the notifications they asked
//! for.

use std::sync::Arc;

use tokio::sync::broadcast;

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
        }
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.sender.subscribe()
    }

    fn send(&self, change: Change) {
        // No listener is not an error: nobody is interested yet.
        let _ = self.sender.send(change);
    }

    /// The list of tools changed.
    pub fn tools_changed(&self) {
        self.send(Change::ToolsListChanged);
    }

    /// The list of prompts changed.
    pub fn prompts_changed(&self) {
        self.send(Change::PromptsListChanged);
    }

    /// The list of resources (or resource templates) changed.
    pub fn resources_changed(&self) {
        self.send(Change::ResourcesListChanged);
    }

    /// The resource at `uri` changed: its subscribers hear of it.
    pub fn resource_updated(&self, uri: impl Into<Arc<str>>) {
        self.send(Change::ResourceUpdated(uri.into()));
    }

    pub(crate) fn task_changed(&self, id: &str) {
        self.send(Change::Task(id.into()));
    }
}
