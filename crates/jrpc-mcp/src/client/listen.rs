//! Change notifications as a stream: [`McpClient::listen`](super::McpClient::listen).
//! A modern server is asked with `subscriptions/listen` (a long-lived
//! request whose notifications carry its id; over HTTP, its own SSE
//! stream); a legacy one with `resources/subscribe` for each URI, the
//! session's `list_changed` notifications coming anyway.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures_util::Stream;
use tokio::sync::mpsc;

use super::error::McpClientError;
use crate::types::{meta_keys, SubscriptionFilter};

/// A change notification from the server: its method
/// (`notifications/tools/list_changed`, `notifications/resources/updated`,
/// ...) and params.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The notification's method.
    pub method: String,
    /// Its params, if any (`{"uri": …}` for a resource update).
    pub params: Option<serde_json::Value>,
}

impl Change {
    /// The resource that changed, for `notifications/resources/updated`.
    pub fn uri(&self) -> Option<&str> {
        self.params.as_ref()?.get("uri")?.as_str()
    }
}

/// The notification a modern server acknowledges a subscription with.
pub(super) const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

/// The filter an acknowledgment says the server honours.
pub(super) fn acknowledged(params: Option<&serde_json::Value>) -> SubscriptionFilter {
    params
        .and_then(|p| p.get("notifications"))
        .and_then(|n| serde_json::from_value(n.clone()).ok())
        .unwrap_or_default()
}

/// Whether `filter` asks for the notification `method` with `params`.
pub(super) fn wants(filter: &SubscriptionFilter, method: &str, params: Option<&serde_json::Value>) -> bool {
    let on = |flag: Option<bool>| flag == Some(true);
    match method {
        "notifications/tools/list_changed" => on(filter.tools_list_changed),
        "notifications/prompts/list_changed" => on(filter.prompts_list_changed),
        "notifications/resources/list_changed" => on(filter.resources_list_changed),
        "notifications/resources/updated" => {
            let uri = params.and_then(|p| p.get("uri")).and_then(|u| u.as_str());
            match (uri, &filter.resource_subscriptions) {
                (Some(uri), Some(uris)) => uris.iter().any(|u| u == uri),
                _ => false,
            }
        }
        // A task's status (the tasks extension), by its id.
        "notifications/tasks" => {
            let id = params.and_then(|p| p.get("taskId")).and_then(|t| t.as_str());
            match (id, &filter.task_ids) {
                (Some(id), Some(ids)) => ids.iter().any(|t| t == id),
                _ => false,
            }
        }
        _ => false,
    }
}

type Sender = mpsc::UnboundedSender<Result<Change, McpClientError>>;

/// The subscription a notification says it belongs to: the id of the
/// `subscriptions/listen` request that opened it.
fn subscription_of(params: Option<&serde_json::Value>) -> Option<&serde_json::Value> {
    params?.get("_meta")?.get(meta_keys::SUBSCRIPTION_ID)
}

/// The streams open on a connection, fed by the notifications that come on
/// it (a connection's, not an HTTP request's: those feed their own).
///
/// On a connection every subscription shares one channel, and the
/// specification has the client tell them apart by the subscription id
/// each notification carries: the id of the `subscriptions/listen`
/// request. The peer numbers its requests itself, so a stream learns its
/// id from its acknowledgment instead; [`opening`](Self::opening) lets one
/// subscription at a time wait for its acknowledgment, so the
/// acknowledgment that comes is that one's.
#[derive(Default)]
pub(super) struct Listeners {
    open: Mutex<Vec<Open>>,
    next: std::sync::atomic::AtomicU64,
    /// Held from sending `subscriptions/listen` until its acknowledgment
    /// (or its refusal, or the wait's end).
    pub(super) opening: tokio::sync::Mutex<()>,
}

/// One stream: what it asked for, where its notifications go, where its
/// acknowledgment goes until it has come, and then the subscription id it
/// gave.
struct Open {
    key: u64,
    filter: SubscriptionFilter,
    tx: Sender,
    ack: Option<Ack>,
    id: Option<serde_json::Value>,
}

/// Where a subscription's acknowledgment goes.
pub(super) type Ack = tokio::sync::oneshot::Sender<SubscriptionFilter>;

impl Listeners {
    /// Opens a stream for `filter`; its key, to close it.
    pub(super) fn open(&self, filter: SubscriptionFilter, tx: Sender, ack: Option<Ack>) -> u64 {
        let key = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.open.lock().unwrap_or_else(|p| p.into_inner()).push(Open {
            key,
            filter,
            tx,
            ack,
            id: None,
        });
        key
    }

    pub(super) fn close(&self, key: u64) {
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|open| open.key != key);
    }

    /// Hands a notification to the stream it belongs to: the one whose
    /// subscription id it carries, or, from a server that sends none (a
    /// legacy session's notifications), every stream whose filter asks for
    /// it. An acknowledgment goes to the stream waiting for one (there is
    /// at most one: see [`opening`](Self::opening)), which keeps its id.
    pub(super) fn dispatch(&self, method: &str, params: Option<&serde_json::Value>) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let id = subscription_of(params);
        if method == ACKNOWLEDGED {
            // (One that stopped waiting, unacknowledged, has closed its end.)
            let waiting = open
                .iter_mut()
                .find(|o| o.ack.as_ref().is_some_and(|ack| !ack.is_closed()));
            if let Some(waiting) = waiting {
                waiting.id = id.cloned();
                if let Some(ack) = waiting.ack.take() {
                    let _ = ack.send(acknowledged(params));
                }
            }
            return;
        }
        open.retain(|o| {
            let ours = match id {
                Some(id) => o.id.as_ref() == Some(id),
                None => wants(&o.filter, method, params),
            };
            if !ours {
                return !o.tx.is_closed();
            }
            o.tx.send(Ok(Change {
                method: method.to_owned(),
                params: params.cloned(),
            }))
            .is_ok()
        });
    }
}

/// Change notifications as they come, until the server ends the
/// subscription (the stream ends), it fails (an `Err`, then the end), or
/// this is dropped (which cancels it on the server).
pub struct Subscription {
    pub(super) rx: mpsc::UnboundedReceiver<Result<Change, McpClientError>>,
    /// What keeps the subscription open; aborted on drop.
    pub(super) task: tokio::task::JoinHandle<()>,
    pub(super) acknowledged: Option<SubscriptionFilter>,
}

impl Subscription {
    /// What the server agreed to send, when it said (a modern server
    /// acknowledges before anything else).
    pub fn acknowledged(&self) -> Option<&SubscriptionFilter> {
        self.acknowledged.as_ref()
    }
}

impl Stream for Subscription {
    type Item = Result<Change, McpClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("acknowledged", &self.acknowledged)
            .finish_non_exhaustive()
    }
}

/// Closes a stream of [`Listeners`] when the task serving it ends.
pub(super) struct Registered(pub(super) Arc<Listeners>, pub(super) u64);

impl Drop for Registered {
    fn drop(&mut self) {
        self.0.close(self.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_go_to_the_subscription_they_name() {
        let listeners = Listeners::default();
        let tools = SubscriptionFilter {
            tools_list_changed: Some(true),
            ..SubscriptionFilter::default()
        };
        let with_id = |id: u64, extra: serde_json::Value| {
            let mut params = serde_json::json!({"_meta": {meta_keys::SUBSCRIPTION_ID: id}});
            params
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            params
        };
        // Two subscriptions asking for the same thing, acknowledged in turn.
        let mut streams = Vec::new();
        for id in [7, 9] {
            let (tx, rx) = mpsc::unbounded_channel();
            let (ack_tx, mut ack_rx) = tokio::sync::oneshot::channel();
            listeners.open(tools.clone(), tx, Some(ack_tx));
            let ack = with_id(
                id,
                serde_json::json!({"notifications": {"toolsListChanged": true}}),
            );
            listeners.dispatch(ACKNOWLEDGED, Some(&ack));
            assert_eq!(ack_rx.try_recv().unwrap(), tools);
            streams.push(rx);
        }
        let changed = "notifications/tools/list_changed";
        listeners.dispatch(changed, Some(&with_id(9, serde_json::json!({}))));
        assert!(streams[0].try_recv().is_err(), "not the first one's");
        assert_eq!(streams[1].try_recv().unwrap().unwrap().method, changed);
        // One naming no subscription goes where the filters ask for it;
        // one naming an unknown subscription goes nowhere.
        listeners.dispatch(changed, None);
        listeners.dispatch(changed, Some(&with_id(8, serde_json::json!({}))));
        for stream in &mut streams {
            assert_eq!(stream.try_recv().unwrap().unwrap().method, changed);
            assert!(stream.try_recv().is_err());
        }
    }

    #[test]
    fn filters_choose_the_notifications() {
        let filter = SubscriptionFilter {
            tools_list_changed: Some(true),
            resource_subscriptions: Some(vec!["demo://counter".into()]),
            task_ids: Some(vec!["t1".into()]),
            ..SubscriptionFilter::default()
        };
        let updated = |uri: &str| serde_json::json!({"uri": uri});
        let task = |id: &str| serde_json::json!({"taskId": id, "status": "completed"});
        let cases = [
            ("notifications/tools/list_changed", None, true),
            ("notifications/prompts/list_changed", None, false),
            ("notifications/resources/list_changed", None, false),
            (
                "notifications/resources/updated",
                Some(updated("demo://counter")),
                true,
            ),
            (
                "notifications/resources/updated",
                Some(updated("demo://other")),
                false,
            ),
            ("notifications/resources/updated", None, false),
            ("notifications/tasks", Some(task("t1")), true),
            ("notifications/tasks", Some(task("t2")), false),
            ("notifications/message", None, false),
        ];
        for (method, params, expected) in cases {
            assert_eq!(
                wants(&filter, method, params.as_ref()),
                expected,
                "{method} {params:?}"
            );
        }
    }
}
