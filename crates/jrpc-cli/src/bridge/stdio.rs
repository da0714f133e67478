//! `jrpc bridge --stdio TARGET`: a stdio-only client (an editor, an MCP
//! host) reaches a network server. Frames pass through untouched both ways:
//! what stdin carries goes to TARGET, what TARGET sends (replies, and over
//! WebSocket or TCP its own notifications and requests) comes out on
//! stdout. At the end of stdin the bridge waits (within --timeout) for the
//! replies still due, then exits.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use anyhow::anyhow;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use jrpc::codec::Inbound;
use jrpc::message::Limits;
use tokio::sync::mpsc;

use crate::call::{ConnectArgs, Failure, Target};
use crate::wire::{id_key, post, reply_ids, request_ids, Posted, Wire};

/// The ids of requests sent on and not yet answered, by their keys.
#[derive(Default)]
struct Due(Mutex<HashSet<String>>);

impl Due {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn sent(&self, frame: &[u8]) {
        let ids = request_ids(frame);
        self.lock().extend(ids.iter().map(|id| id_key(id)));
    }

    fn answered(&self, frame: &[u8]) {
        let ids = reply_ids(frame);
        let mut due = self.lock();
        for id in ids {
            due.remove(&id_key(&id));
        }
    }

    fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

pub(super) async fn run(name: &str, connect: ConnectArgs) -> Result<(), Failure> {
    let target = Target::parse(name).map_err(Failure::Usage)?;
    let headers = connect.dial.headers()?;
    let timeout = connect.dial.timeout;
    let wire = Wire::open(&target, &connect, &headers)
        .await
        .map_err(|e| Failure::Transport(e.context(format!("connecting to {name}"))))?;
    let local = jrpc::transport::stdio::connection(connect.framing, Limits::DEFAULT_MAX_FRAME_LEN);
    let (mut from_client, mut to_client, _) = local.into_parts();
    // Everything for stdout goes through one writer.
    let (out, mut outgoing) = mpsc::channel::<Bytes>(256);
    let writer = tokio::spawn(async move {
        while let Some(frame) = outgoing.recv().await {
            if to_client.send(frame).await.is_err() {
                break;
            }
        }
        let _ = to_client.close().await;
    });
    let due = Arc::new(Due::default());
    match wire {
        Wire::Stream {
            incoming: mut from_server,
            outgoing: mut to_server,
        } => {
            let reading = {
                let (out, due) = (out.clone(), Arc::clone(&due));
                tokio::spawn(async move {
                    while let Some(item) = from_server.next().await {
                        match item {
                            Ok(Inbound::Frame(frame)) => {
                                let answered = frame.clone();
                                if out.send(frame).await.is_err() {
                                    break;
                                }
                                // Only once it is on its way to stdout.
                                due.answered(&answered);
                            }
                            Ok(other) => tracing::warn!(?other, "bridge: a frame from the server skipped"),
                            Err(e) => {
                                tracing::warn!(error = %e, "bridge: reading the server failed");
                                break;
                            }
                        }
                    }
                })
            };
            while let Some(item) = from_client.next().await {
                match item {
                    Ok(Inbound::Frame(frame)) => {
                        due.sent(&frame);
                        to_server
                            .send(frame)
                            .await
                            .map_err(|e| Failure::Transport(anyhow!("sending to {name}: {e}")))?;
                    }
                    Ok(other) => tracing::warn!(?other, "bridge: a frame from stdin skipped"),
                    Err(e) => return Err(Failure::Transport(anyhow!("reading stdin: {e}"))),
                }
            }
            // Stdin ended: the replies still due, within the timeout.
            let waited = tokio::time::timeout(timeout, async {
                while !due.is_empty() && !reading.is_finished() {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            })
            .await;
            if waited.is_err() {
                note!("jrpc: bridge: replies still due after {timeout:?} are not awaited");
            }
            let _ = to_server.close().await;
            // What is still arriving goes out before the bridge ends.
            let abort = reading.abort_handle();
            if tokio::time::timeout(std::time::Duration::from_secs(1), reading)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        Wire::Http(http) => {
            let mut posts = tokio::task::JoinSet::new();
            while let Some(item) = from_client.next().await {
                match item {
                    Ok(Inbound::Frame(frame)) => {
                        let (out, http, name) = (out.clone(), http.clone(), name.to_owned());
                        let requests = request_ids(&frame);
                        let notifications_only = requests.is_empty();
                        let post = async move {
                            let failure = match post(http, &frame, timeout).await {
                                Posted::Reply { body, .. } => {
                                    let _ = out.send(body).await;
                                    return;
                                }
                                Posted::Nothing => return,
                                Posted::Failed(why) => format!("posting to {name}: {why}"),
                            };
                            note!("jrpc: bridge: {failure}");
                            // The client would wait forever: each request
                            // gets an error of its own.
                            let data = serde_json::Value::from(format!("jrpc bridge: {failure}"));
                            for id in requests {
                                let reply = format!(
                                    r#"{{"jsonrpc":"2.0","error":{{"code":-32603,"message":"Internal error","data":{data}}},"id":{id}}}"#
                                );
                                let _ = out.send(Bytes::from(reply)).await;
                            }
                        };
                        if notifications_only {
                            // Notifications keep their order.
                            post.await;
                        } else {
                            posts.spawn(post);
                        }
                    }
                    Ok(other) => tracing::warn!(?other, "bridge: a frame from stdin skipped"),
                    Err(e) => return Err(Failure::Transport(anyhow!("reading stdin: {e}"))),
                }
            }
            let _ = tokio::time::timeout(timeout, posts.join_all()).await;
        }
    }
    drop(out);
    let _ = writer.await;
    Ok(())
}
