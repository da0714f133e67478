//! Serving one item of a frame against a router: on the spot when it needs
//! no awaiting (a plain handler, no middleware), else as a future. Both
//! append the item's reply, if any, to a buffer.
//!
//! These are the only places a frame's item meets a handler; the one-shot
//! and connection engines differ only in where the reply goes.

use std::sync::Arc;

use serde_json::value::RawValue;

use crate::context::Extensions;
use crate::message::{self, codes, Error, Id, Incoming, NotificationRef, RequestRef, Version};
use crate::middleware::Call;
use crate::router::{notification_dropped, CallInfo, Choice, Router};

/// Serves `item` on the spot if that needs no awaiting, appending its reply
/// (if any) to `out`. Gives the item back when it must be awaited: its
/// handler is async, or call middleware is installed.
///
/// A response among incoming items is answered `-32600`: a router only
/// serves (a peer, which also makes calls, routes responses before this).
pub(crate) fn inline<'a>(
    router: &Router,
    item: Incoming<'a>,
    connection: &Arc<Extensions>,
    out: &mut Vec<u8>,
) -> Option<Incoming<'a>> {
    let table = router.table();
    match item {
        Incoming::Invalid(invalid) => {
            message::write_error(out, invalid.version, &invalid.id, &invalid.error);
            None
        }
        Incoming::Response(response) => {
            message::write_error(out, response.version, &response.id, &Error::invalid_request());
            None
        }
        item if router.has_layers() => Some(item),
        Incoming::Request(request) => {
            let Choice::Now(now) = table.select(&request.method) else {
                return Some(Incoming::Request(request));
            };
            let info = CallInfo {
                id: Some(&request.id),
                connection,
                call: None,
            };
            let RequestRef {
                version,
                ref id,
                ref method,
                params,
            } = request;
            // The result is serialized straight into the reply.
            let start = out.len();
            message::result_prefix(out, version);
            match table.run_now(now, method, params, &info, out) {
                Ok(()) => message::result_suffix(out, version, id),
                Err(error) => {
                    out.truncate(start);
                    table.write_error(out, version, id, error, params);
                }
            }
            None
        }
        Incoming::Notification(notification) => {
            let Choice::Now(now) = table.select(&notification.method) else {
                return Some(Incoming::Notification(notification));
            };
            let info = CallInfo {
                id: None,
                connection,
                call: None,
            };
            let NotificationRef { method, params, .. } = &notification;
            // Nothing to say, and no one to say it to: a result is dropped
            // (and the discovery document not even made).
            if now.is_discovery() {
                return None;
            }
            if let Err(error) = table.run_now(now, method, *params, &info, &mut Vec::new()) {
                notification_dropped(method, &error);
            }
            None
        }
    }
}

/// Serves an item that needs awaiting (as [`inline`] left it), appending
/// its reply (if any) to `out`; what the middleware made of it.
pub(crate) async fn awaited(
    router: &Router,
    item: Incoming<'_>,
    connection: &Arc<Extensions>,
    out: &mut Vec<u8>,
) -> Verdict {
    if router.has_layers() {
        return match item {
            Incoming::Request(r) => layered(router, Owned::request(r), connection, out).await,
            Incoming::Notification(n) => layered(router, Owned::notification(n), connection, out).await,
            Incoming::Invalid(_) | Incoming::Response(_) => Verdict::Served,
        };
    }
    let table = router.table();
    match item {
        Incoming::Request(RequestRef {
            version,
            id,
            method,
            params,
        }) => {
            let info = CallInfo {
                id: Some(&id),
                connection,
                call: None,
            };
            let Choice::Later(later) = table.select(&method) else {
                return Verdict::Served;
            };
            let outcome = match table.start(later, &method, params, &info) {
                Ok(started) => table.finish(&method, started).await,
                Err(error) => Err(error),
            };
            match outcome {
                Ok(result) => message::write_result(out, version, &id, &result),
                Err(error) => table.write_error(out, version, &id, error, params),
            }
        }
        Incoming::Notification(NotificationRef { method, params, .. }) => {
            let info = CallInfo {
                id: None,
                connection,
                call: None,
            };
            let Choice::Later(later) = table.select(&method) else {
                return Verdict::Served;
            };
            let outcome = match table.start(later, &method, params, &info) {
                Ok(started) => table.finish(&method, started).await.map(drop),
                Err(error) => Err(error),
            };
            if let Err(error) = outcome {
                notification_dropped(&method, &error);
            }
        }
        Incoming::Invalid(_) | Incoming::Response(_) => {}
    }
    Verdict::Served
}

/// Serves a call copied out of its frame: through the middleware when there
/// is any, else its handler (on the spot when it is plain).
#[cfg(feature = "runtime")]
pub(crate) async fn owned(
    router: &Router,
    call: Owned,
    connection: &Arc<Extensions>,
    out: &mut Vec<u8>,
) -> Verdict {
    if router.has_layers() {
        return layered(router, call, connection, out).await;
    }
    if let Some(item) = inline(router, call.as_incoming(), connection, out) {
        return awaited(router, item, connection, out).await;
    }
    Verdict::Served
}

/// Serves a call through the router's middleware (every layer, then its
/// handler); a request's reply is appended to `out`.
///
/// A future of its own, apart from the others: boxed for every call, it is
/// kept small (theirs are kilobytes, and allocating that much made the
/// allocator tidy its free lists on every call).
pub(crate) async fn layered(
    router: &Router,
    call: Owned,
    connection: &Arc<Extensions>,
    out: &mut Vec<u8>,
) -> Verdict {
    let Owned {
        version,
        id,
        method,
        params,
    } = call;
    // A notification's name is kept for the log line of its failure.
    let name = id.is_none().then(|| Arc::clone(&method));
    let outcome = router
        .handle_call(Call::new(id.clone(), method, params, Arc::clone(connection)))
        .await;
    let verdict = match &outcome {
        Err(error) => Verdict::of(error),
        Ok(_) => Verdict::Served,
    };
    match (id, outcome) {
        (Some(id), Ok(result)) => message::write_result(out, version, &id, result.as_bytes()),
        (Some(id), Err(error)) => message::write_error(out, version, &id, &error),
        (None, Err(error)) => notification_dropped(name.as_deref().unwrap_or_default(), &error),
        (None, Ok(_)) => {}
    }
    verdict
}

/// What became of a call that went through the middleware: served (its
/// handler ran, or an error unrelated to load), or refused by a limit.
/// A transport that answers for the whole frame (HTTP) says so when every
/// call of it was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Served,
    /// Refused by a rate limit (`-32005`), with how long to wait.
    RateLimited(std::time::Duration),
    /// Refused as over a concurrency bound (`-32007`).
    Busy,
}

impl Verdict {
    fn of(error: &Error) -> Verdict {
        match error.code() {
            codes::RATE_LIMITED => {
                let ms = error
                    .data()
                    .and_then(|data| serde_json::from_str::<serde_json::Value>(data.get()).ok())
                    .and_then(|data| data.get("retry_after_ms")?.as_u64())
                    .unwrap_or(1000);
                Verdict::RateLimited(std::time::Duration::from_millis(ms))
            }
            codes::SERVER_BUSY => Verdict::Busy,
            _ => Verdict::Served,
        }
    }
}

/// A request or notification copied out of its frame, for another task or
/// for the middleware (which takes calls by value).
pub(crate) struct Owned {
    pub(crate) version: Version,
    /// `None` for a notification.
    pub(crate) id: Option<Id>,
    pub(crate) method: Arc<str>,
    pub(crate) params: Option<Box<RawValue>>,
}

impl Owned {
    pub(crate) fn request(r: RequestRef<'_>) -> Self {
        Owned {
            version: r.version,
            id: Some(r.id),
            method: r.method.into(),
            params: r.params.map(RawValue::to_owned),
        }
    }

    pub(crate) fn notification(n: NotificationRef<'_>) -> Self {
        Owned {
            version: n.version,
            id: None,
            method: n.method.into(),
            params: n.params.map(RawValue::to_owned),
        }
    }

    #[cfg(feature = "runtime")]
    pub(crate) fn as_incoming(&self) -> Incoming<'_> {
        let (version, method, params) = (
            self.version,
            std::borrow::Cow::Borrowed(&*self.method),
            self.params.as_deref(),
        );
        match &self.id {
            Some(id) => Incoming::Request(RequestRef {
                version,
                id: id.clone(),
                method,
                params,
            }),
            None => Incoming::Notification(NotificationRef {
                version,
                method,
                params,
            }),
        }
    }
}

/// The reply of one error.
#[cfg(feature = "runtime")]
pub(crate) fn error_reply(version: Version, id: &Id, error: &Error) -> Vec<u8> {
    let mut out = Vec::new();
    message::write_error(&mut out, version, id, error);
    out
}
