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
use crate::types::SubscriptionFilter;

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
        _ => false,
    }
}

type Sender = mpsc::UnboundedSender<Result<Change, McpClientError>>;

/// The streams open on a connection, fed by the notifications that come on
/// it (a connection's, not an HTTP request's: those feed their own).
#[derive(Default)]
pub(super) struct Listeners {
    open: Mutex<Vec<Open>>,
    next: std::sync::atomic::AtomicU64,
}

/// One stream: what it asked for, where its notifications go, and where
/// its acknowledgment goes until it has come.
struct Open {
    key: u64,
    filter: SubscriptionFilter,
    tx: Sender,
    ack: Option<Ack>,
}

/// Where a subscription's acknowledgment goes.
pub(super) type Ack = tokio::sync::oneshot::Sender<SubscriptionFilter>;

impl Listeners {
    /// Opens a stream for `filter`; its key, to close it.
    pub(super) fn open(&self, filter: SubscriptionFilter, tx: Sender, ack: Option<Ack>) -> u64 {
        let key = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Open { key, filter, tx, ack });
        key
    }

    pub(super) fn close(&self, key: u64) {
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|open| open.key != key);
    }

    /// Hands a notification to the streams that asked for it. An
    /// acknowledgment goes to the oldest stream still waiting for one (a
    /// connection's subscriptions are acknowledged in the order they were
    /// asked for).
    pub(super) fn dispatch(&self, method: &str, params: Option<&serde_json::Value>) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if method == ACKNOWLEDGED {
            if let Some(ack) = open.iter_mut().find_map(|o| o.ack.take()) {
                let _ = ack.send(acknowledged(params));
            }
            return;
        }
        open.retain(|o| {
            if !wants(&o.filter, method, params) {
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
    fn filters_choose_the_notifications() {
        let filter = SubscriptionFilter {
            tools_list_changed: Some(true),
            resource_subscriptions: Some(vec!["demo://counter".into()]),
            ..SubscriptionFilter::default()
        };
        let updated = |uri: &str| serde_json::json!({"uri": uri});
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
