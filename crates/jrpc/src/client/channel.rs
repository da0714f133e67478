//! What a client sends on, behind one interface.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;

use super::auto_batch::{self, BatchSink};
#[cfg(feature = "http-client")]
use super::http::HttpClient;
use super::pool;
use super::reconnect::Reconnecting;
use crate::caller::{BoxFuture, Caller, Outgoing};
use crate::peer::{Batch, CallError, Peer};

/// What a [`Client`](super::Client) sends on: one connection, the HTTP
/// client, a connection that is dialed again when it drops, or a pool of
/// connections. The client asks it for what it needs and never looks at
/// which it is.
#[derive(Clone)]
pub(super) enum Channel {
    Peer(Peer),
    #[cfg(feature = "http-client")]
    Http(HttpClient),
    Reconnecting(Arc<Reconnecting>),
    Pool(Arc<pool::Pool>),
}

impl Channel {
    /// Sends one call on the connection, past the client's layers.
    pub(super) fn send_direct(&self, call: Outgoing) -> BoxFuture<'_, Result<Box<RawValue>, CallError>> {
        Box::pin(async move {
            match self {
                Channel::Peer(peer) => Caller::send(peer, call).await,
                #[cfg(feature = "http-client")]
                Channel::Http(http) => http.send(call).await,
                Channel::Reconnecting(ws) => {
                    let (peer, call) = within_timeout(call, ws.peer()).await?;
                    Caller::send(&peer, call).await
                }
                Channel::Pool(pool) => {
                    let ((peer, _busy), call) = within_timeout(call, pool.pick_waiting()).await?;
                    Caller::send(&peer, call).await
                }
            }
        })
    }

    pub(super) fn batch(&self) -> Batch {
        match self {
            Channel::Peer(peer) => peer.batch(),
            #[cfg(feature = "http-client")]
            Channel::Http(http) => http.batch(),
            // A batch goes on the current connection; if it has dropped, the
            // batch fails and the next call reconnects.
            Channel::Reconnecting(ws) => ws.current().batch(),
            Channel::Pool(pool) => pool.batch().0,
        }
    }
}

impl Channel {
    /// The one connection, when that is what this is: the client's fast
    /// path, with no box.
    pub(super) fn as_peer(&self) -> Option<&Peer> {
        match self {
            Channel::Peer(peer) => Some(peer),
            _ => None,
        }
    }

    /// The HTTP client, when that is what this is.
    #[cfg(feature = "http-client")]
    pub(super) fn as_http(&self) -> Option<&HttpClient> {
        match self {
            Channel::Http(http) => Some(http),
            _ => None,
        }
    }

    /// The timeout of calls that do not set their own.
    pub(super) fn call_timeout(&self) -> Duration {
        match self {
            Channel::Peer(peer) => Caller::call_timeout(peer),
            #[cfg(feature = "http-client")]
            Channel::Http(http) => Caller::call_timeout(http),
            Channel::Reconnecting(ws) => Caller::call_timeout(&ws.current()),
            Channel::Pool(pool) => Caller::call_timeout(&pool.any()),
        }
    }

    /// The peer calls go on now; `None` over plain HTTP.
    pub(super) fn peer(&self) -> Option<Peer> {
        match self {
            Channel::Peer(peer) => Some(peer.clone()),
            #[cfg(feature = "http-client")]
            Channel::Http(_) => None,
            Channel::Reconnecting(ws) => Some(ws.current()),
            Channel::Pool(pool) => Some(pool.pick().map(|(peer, _)| peer).unwrap_or_else(|_| pool.any())),
        }
    }

    /// Closes gracefully; why it closed.
    pub(super) async fn close(&self) -> Arc<str> {
        match self {
            Channel::Peer(peer) => {
                peer.close();
                peer.closed().await
            }
            #[cfg(feature = "http-client")]
            Channel::Http(_) => "closed".into(),
            Channel::Reconnecting(ws) => {
                let peer = ws.current();
                peer.close();
                peer.closed().await
            }
            Channel::Pool(pool) => pool.close().await,
        }
    }
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Channel::Peer(peer) => f.debug_struct("Client").field("peer", peer).finish(),
            #[cfg(feature = "http-client")]
            Channel::Http(_) => f.debug_struct("Client").field("transport", &"http").finish(),
            Channel::Reconnecting(ws) => f.debug_struct("Client").field("peer", &ws.current()).finish(),
            Channel::Pool(pool) => f
                .debug_struct("Client")
                .field("live_connections", &pool.live())
                .finish(),
        }
    }
}

/// What waiting `patience` for something gave.
fn waited<T>(
    patience: Duration,
    outcome: Result<Result<T, CallError>, tokio::time::error::Elapsed>,
) -> Result<T, CallError> {
    outcome.unwrap_or(Err(CallError::Timeout(patience)))
}

/// Waits for `connection` within `call`'s timeout, then gives the call what
/// is left of it; a call that found no connection never left.
async fn within_timeout<T>(
    mut call: Outgoing,
    connection: impl Future<Output = Result<T, CallError>>,
) -> Result<(T, Outgoing), CallError> {
    let timeout = call.timeout();
    let started = tokio::time::Instant::now();
    match waited(timeout, tokio::time::timeout(timeout, connection).await) {
        Ok(connection) => {
            call.set_timeout(timeout.saturating_sub(started.elapsed()));
            Ok((connection, call))
        }
        Err(e) => {
            if let Some(delivery) = crate::caller::Delivery::of(&call) {
                delivery.mark_unsent();
            }
            Err(e)
        }
    }
}

impl BatchSink for Channel {
    fn send_one(&self, call: Outgoing) -> BoxFuture<'_, Result<Box<RawValue>, CallError>> {
        self.send_direct(call)
    }

    fn batch(
        &self,
        patience: Duration,
    ) -> BoxFuture<'_, Result<(Batch, Option<auto_batch::LoadGuard>), CallError>> {
        Box::pin(async move {
            match self {
                // As for a call: on the new connection, waiting for it as
                // long as the batch's calls may.
                Channel::Reconnecting(ws) => {
                    let peer = waited(patience, tokio::time::timeout(patience, ws.peer()).await)?;
                    Ok((peer.batch(), None))
                }
                Channel::Pool(pool) => {
                    let (peer, busy) = waited(
                        patience,
                        tokio::time::timeout(patience, pool.pick_waiting()).await,
                    )?;
                    let busy: auto_batch::LoadGuard = Box::new(busy);
                    Ok((peer.batch(), Some(busy)))
                }
                other => Ok((Channel::batch(other), None)),
            }
        })
    }
}
