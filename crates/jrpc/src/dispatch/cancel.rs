//! Cancellation of incoming calls (the LSP and MCP protocols): the other
//! side names a request it no longer wants, and its handler is stopped.
//!
//! Every request served later than on the spot registers under its id
//! before it starts; a cancel notification fires the registrations of that
//! id, and the serving future, raced against its registration, gives the
//! protocol's reply (or none) instead of the handler's. A registration
//! leaves the table when its request ends either way.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use super::serve::error_reply;
use crate::message::{write_json_str, Error, Id, Version};

/// How calls are cancelled across the connection: which notification is
/// sent when a call is dropped or times out, and which incoming notification
/// aborts the handler serving a request.
#[derive(Debug, Clone, PartialEq)]
pub struct CancelProtocol {
    /// The notification's method.
    pub method: Cow<'static, str>,
    /// The params member holding the cancelled request's id.
    pub id_field: Cow<'static, str>,
    /// A params member for a human-readable reason, if the protocol has one.
    pub reason_field: Option<Cow<'static, str>>,
    /// The error to answer a cancelled incoming request with; `None` sends
    /// no response at all.
    pub reply: Option<Error>,
}

impl CancelProtocol {
    /// MCP: `notifications/cancelled` with `{"requestId", "reason"}`; a
    /// cancelled request gets no response.
    pub fn mcp() -> Self {
        CancelProtocol {
            method: "notifications/cancelled".into(),
            id_field: "requestId".into(),
            reason_field: Some("reason".into()),
            reply: None,
        }
    }

    /// LSP: `$/cancelRequest` with `{"id"}`; a cancelled request is answered
    /// `-32800 Request cancelled`.
    pub fn lsp() -> Self {
        CancelProtocol {
            method: "$/cancelRequest".into(),
            id_field: "id".into(),
            reason_field: None,
            reply: Some(Error::new(-32800, "Request cancelled")),
        }
    }

    /// The notification that cancels this side's call `id`.
    pub(crate) fn notification(&self, id: u64, reason: &str) -> Bytes {
        let mut out = Vec::with_capacity(96);
        out.extend_from_slice(br#"{"jsonrpc":"2.0","method":"#);
        write_json_str(&mut out, &self.method);
        out.extend_from_slice(br#","params":{"#);
        write_json_str(&mut out, &self.id_field);
        out.push(b':');
        out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
        if let Some(field) = &self.reason_field {
            out.push(b',');
            write_json_str(&mut out, field);
            out.push(b':');
            write_json_str(&mut out, reason);
        }
        out.extend_from_slice(b"}}");
        out.into()
    }
}

/// The incoming requests that may be cancelled, by id (several may share
/// one: ids are the other side's to choose).
pub(crate) struct Cancellation {
    pub(crate) protocol: CancelProtocol,
    /// Each registration's serial number (to find it again) and token.
    serving: Mutex<HashMap<Id, Vec<(u64, CancellationToken)>>>,
    next: AtomicU64,
}

impl Cancellation {
    pub(crate) fn new(protocol: CancelProtocol) -> Arc<Self> {
        Arc::new(Cancellation {
            protocol,
            serving: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
        })
    }

    fn serving(&self) -> MutexGuard<'_, HashMap<Id, Vec<(u64, CancellationToken)>>> {
        // Every update is one insert or remove: a panic cannot leave it torn.
        self.serving.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a request about to be served.
    pub(crate) fn register(self: &Arc<Self>, id: &Id) -> Registration {
        let token = CancellationToken::new();
        let serial = self.next.fetch_add(1, Ordering::Relaxed);
        self.serving()
            .entry(id.clone())
            .or_default()
            .push((serial, token.clone()));
        Registration {
            table: Arc::clone(self),
            id: id.clone(),
            serial,
            token,
        }
    }

    /// Whether `method` is this protocol's cancel notification.
    pub(crate) fn is_cancel(&self, method: &str) -> bool {
        self.protocol.method == method
    }

    /// Handles a cancel notification: stops the requests it names.
    pub(crate) fn cancel(&self, params: Option<&RawValue>) {
        let id = params
            .and_then(|p| serde_json::from_str::<BTreeMap<Cow<'_, str>, &RawValue>>(p.get()).ok())
            .and_then(|fields| fields.get(&*self.protocol.id_field).copied())
            .and_then(Id::from_raw);
        let Some(id) = id else {
            return tracing::debug!("cancel notification without a usable id ignored");
        };
        for (_, token) in self.serving().remove(&id).unwrap_or_default() {
            tracing::debug!(%id, "incoming request cancelled");
            token.cancel();
        }
    }

    /// What a cancelled request is answered (empty: nothing).
    fn reply(&self, version: Version, id: &Id) -> Vec<u8> {
        match &self.protocol.reply {
            Some(error) => error_reply(version, id, error),
            None => Vec::new(),
        }
    }
}

/// One request's place in the [`Cancellation`] table, until dropped.
pub(crate) struct Registration {
    table: Arc<Cancellation>,
    id: Id,
    serial: u64,
    token: CancellationToken,
}

impl Registration {
    /// The token a cancel notification fires.
    pub(crate) fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// The error a cancelled request is answered with; `None`: no answer.
    pub(crate) fn cancelled_reply(&self) -> Option<Error> {
        self.table.protocol.reply.clone()
    }

    /// Serves with `serving` unless cancelled first; then its handler is
    /// dropped and the protocol's reply is given instead.
    pub(crate) async fn serve(self, version: Version, serving: impl Future<Output = Vec<u8>>) -> Vec<u8> {
        tokio::select! {
            biased;
            () = self.token.cancelled() => self.table.reply(version, &self.id),
            out = serving => out,
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if self.token.is_cancelled() {
            return;
        }
        let mut serving = self.table.serving();
        if let Some(tokens) = serving.get_mut(&self.id) {
            tokens.retain(|(serial, _)| *serial != self.serial);
            if tokens.is_empty() {
                serving.remove(&self.id);
            }
        }
    }
}
