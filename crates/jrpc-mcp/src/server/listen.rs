//! Change notifications to clients: `subscriptions/listen` (2026-07-28), a
//! long-lived request whose stream carries the notifications the client
//! asked for, each tagged with the request's id; and, for legacy sessions,
//! the same changes sent on the session as `list_changed` and, for the
//! resources it subscribed to, `resources/updated`.

use std::sync::Arc;

use jrpc::dispatch::CallOutlet;
use jrpc::peer::Peer;
use jrpc::{Error, RequestContext};
use serde::Serialize;
use tokio::sync::broadcast::error::RecvError;

use super::changes::Change;
use super::era::Era;
use super::methods::owner;
use super::session::{Phase, Session};
use super::McpServer;
use crate::types::{
    meta_keys, AcknowledgedParams, ListenParams, Meta, ResourceUpdatedParams, ResultType, SubscriptionFilter,
};

/// The result that ends a subscription the server closed gracefully.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListenResult {
    result_type: ResultType,
    #[serde(rename = "_meta")]
    meta: Meta,
}

/// Where a listen stream's notifications go: the request's own stream
/// (HTTP), or the connection (stdio).
struct Sink {
    stream: Option<CallOutlet>,
    peer: Option<Peer>,
    subscription: serde_json::Value,
}

impl Sink {
    /// Sends `method` with `params`, tagged with the subscription; whether
    /// the client is still there.
    async fn send(&self, method: &str, params: impl Serialize) -> bool {
        let Ok(serde_json::Value::Object(mut params)) = serde_json::to_value(params) else {
            return true;
        };
        let meta = params
            .entry("_meta")
            .or_insert_with(|| serde_json::Value::Object(Meta::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(meta_keys::SUBSCRIPTION_ID.into(), self.subscription.clone());
        }
        if let Some(stream) = &self.stream {
            let Ok(frame) = jrpc::message::Notification::new(method, &params) else {
                return true;
            };
            return stream.send(frame.to_bytes()).await.is_ok();
        }
        match &self.peer {
            Some(peer) => peer.notify(method, &params).await.is_ok(),
            None => false,
        }
    }
}

/// Empty params: `{}`.
#[derive(Serialize)]
struct NoParams {}

impl McpServer {
    /// Whether the server has changes to announce: list changes, resource
    /// subscriptions, or tasks.
    pub(crate) fn announces_changes(&self) -> bool {
        let catalog = &self.inner;
        catalog.list_changed || catalog.subscriptions || catalog.tasks.is_some()
    }

    /// The part of `asked` this server honours.
    fn honoured(&self, asked: &SubscriptionFilter) -> SubscriptionFilter {
        let catalog = &self.inner;
        let lists = |wanted: Option<bool>, has: bool| {
            (wanted == Some(true) && has && catalog.list_changed).then_some(true)
        };
        let has_resources = !catalog.resources.is_empty() || !catalog.templates.is_empty();
        SubscriptionFilter {
            tools_list_changed: lists(asked.tools_list_changed, !catalog.tools.is_empty()),
            prompts_list_changed: lists(asked.prompts_list_changed, !catalog.prompts.is_empty()),
            resources_list_changed: lists(asked.resources_list_changed, has_resources),
            resource_subscriptions: asked
                .resource_subscriptions
                .clone()
                .filter(|uris| catalog.subscriptions && !uris.is_empty()),
            task_ids: asked
                .task_ids
                .clone()
                .filter(|ids| catalog.tasks.is_some() && !ids.is_empty()),
        }
    }

    /// `subscriptions/listen`: acknowledges what it will carry, then sends
    /// each change the client asked for until the client goes (closing the
    /// stream, or `notifications/cancelled` on stdio) or the server shuts
    /// down (then it answers, which ends the subscription gracefully).
    pub(crate) async fn listen(&self, p: ListenParams, ctx: RequestContext) -> Result<ListenResult, Error> {
        let era = Era::of(&ctx)?;
        let Era::Modern(modern) = &era else {
            return Err(Error::method_not_found());
        };
        if p.notifications
            .task_ids
            .as_ref()
            .is_some_and(|ids| !ids.is_empty())
            && !super::tasks::declares_tasks(&era)
        {
            return Err(super::tasks::tasks_required());
        }
        let _slot = Arc::clone(&self.inner.listens)
            .try_acquire_owned()
            .map_err(|_| Error::server_busy().with_data("too many subscriptions: try again later"))?;
        let subscription = serde_json::to_value(ctx.id()).unwrap_or(serde_json::Value::Null);
        let honoured = self.honoured(&p.notifications);
        // Listen before acknowledging, so that no change after it is missed.
        let mut changes = self.inner.changes.subscribe();
        let sink = Sink {
            stream: modern.stream.clone(),
            peer: ctx.peer(),
            subscription: subscription.clone(),
        };
        let ack = AcknowledgedParams {
            notifications: honoured.clone(),
            meta: None,
        };
        if !sink.send("notifications/subscriptions/acknowledged", &ack).await {
            return Err(Error::internal_error().with_data("the client is gone"));
        }
        let closing = modern.closing.clone().unwrap_or_default();
        loop {
            let change = tokio::select! {
                change = changes.recv() => change,
                () = closing.cancelled() => break,
            };
            let sent = match change {
                Ok(change) => self.deliver(&sink, &honoured, &change, owner(&ctx)).await,
                // Fallen behind: whatever was missed, every list may have
                // changed.
                Err(RecvError::Lagged(_)) => {
                    let mut ok = true;
                    for change in [
                        Change::ToolsListChanged,
                        Change::PromptsListChanged,
                        Change::ResourcesListChanged,
                    ] {
                        ok &= self.deliver(&sink, &honoured, &change, None).await;
                    }
                    ok
                }
                Err(RecvError::Closed) => break,
            };
            if !sent {
                return Err(Error::internal_error().with_data("the client is gone"));
            }
        }
        let mut meta = Meta::new();
        meta.insert(meta_keys::SUBSCRIPTION_ID.into(), subscription);
        meta.insert(meta_keys::SERVER_INFO.into(), self.inner.identity.value().clone());
        Ok(ListenResult {
            result_type: ResultType::Complete,
            meta,
        })
    }

    /// Sends `change` on a stream that asked for it; whether the client is
    /// still there.
    async fn deliver(
        &self,
        sink: &Sink,
        wants: &SubscriptionFilter,
        change: &Change,
        owner: Option<&str>,
    ) -> bool {
        let method = change.method();
        match change {
            Change::ToolsListChanged if wants.tools_list_changed == Some(true) => {
                sink.send(method, NoParams {}).await
            }
            Change::PromptsListChanged if wants.prompts_list_changed == Some(true) => {
                sink.send(method, NoParams {}).await
            }
            Change::ResourcesListChanged if wants.resources_list_changed == Some(true) => {
                sink.send(method, NoParams {}).await
            }
            Change::ResourceUpdated(uri)
                if wants
                    .resource_subscriptions
                    .iter()
                    .flatten()
                    .any(|wanted| wanted.as_str() == &**uri) =>
            {
                let params = ResourceUpdatedParams {
                    uri: uri.to_string(),
                    meta: None,
                };
                sink.send(method, params).await
            }
            Change::Task(id)
                if wants
                    .task_ids
                    .iter()
                    .flatten()
                    .any(|wanted| wanted.as_str() == &**id) =>
            {
                let Some(store) = &self.inner.tasks else {
                    return true;
                };
                match store.get(id, owner).await {
                    Ok(mut task) => {
                        task.result_type = None;
                        sink.send(method, task).await
                    }
                    Err(_) => true,
                }
            }
            _ => true,
        }
    }

    /// Sends a legacy session the changes it should hear of, until its
    /// connection closes: list changes (when the server announces them)
    /// once the session is ready, and updates of the resources it
    /// subscribed to.
    pub(crate) fn forward_changes(&self, peer: Peer, session: Arc<Session>) {
        if !self.announces_changes() {
            return;
        }
        let mut changes = self.inner.changes.subscribe();
        let server = self.clone();
        tokio::spawn(async move {
            loop {
                let change = tokio::select! {
                    change = changes.recv() => change,
                    _ = peer.closed() => return,
                };
                let ready = session.state().phase == Phase::Initialized;
                let missed = [
                    Change::ToolsListChanged,
                    Change::PromptsListChanged,
                    Change::ResourcesListChanged,
                ];
                let changes: &[Change] = match &change {
                    Ok(change) => std::slice::from_ref(change),
                    Err(RecvError::Lagged(_)) => &missed,
                    Err(RecvError::Closed) => return,
                };
                for change in changes {
                    if ready {
                        server.tell_session(&peer, &session, change).await;
                    }
                }
            }
        });
    }

    async fn tell_session(&self, peer: &Peer, session: &Session, change: &Change) {
        let catalog = &self.inner;
        let sent = match change {
            Change::ToolsListChanged if catalog.list_changed && !catalog.tools.is_empty() => {
                peer.notify(change.method(), &NoParams {}).await
            }
            Change::PromptsListChanged if catalog.list_changed && !catalog.prompts.is_empty() => {
                peer.notify(change.method(), &NoParams {}).await
            }
            Change::ResourcesListChanged if catalog.list_changed => {
                peer.notify(change.method(), &NoParams {}).await
            }
            Change::ResourceUpdated(uri) if session.state().subscribed.contains(&**uri) => {
                let params = ResourceUpdatedParams {
                    uri: uri.to_string(),
                    meta: None,
                };
                peer.notify(change.method(), &params).await
            }
            _ => Ok(()),
        };
        if let Err(e) = sent {
            tracing::debug!(error = %e, "change not sent to the session");
        }
    }
}
