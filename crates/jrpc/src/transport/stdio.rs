//! Serving a router over a byte stream of newline-delimited JSON, such as a
//! process's stdin and stdout.

use std::io;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;
use tokio_util::codec::{Encoder, FramedRead};

use crate::codec::{Inbound, NdjsonCodec};
use crate::message::{codes, Response};
use crate::router::Extensions;
use crate::{Error, Id, Router};

/// Settings for serving one stream.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Frames handled at the same time; reading pauses while this many are
    /// in flight. Default 128.
    pub max_in_flight: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions { max_in_flight: 128 }
    }
}

/// Which transport a connection came in on, recorded in the connection's
/// [`Extensions`] for handlers to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportKind(pub &'static str);

/// Serves `router` over this process's stdin and stdout, one JSON text per
/// line, until stdin ends. Replies may come in any order; every frame read
/// is answered (where a reply is due) before this returns.
pub async fn serve_stdio(router: Router) -> io::Result<()> {
    serve_ndjson(
        router,
        tokio::io::stdin(),
        tokio::io::stdout(),
        ServeOptions::default(),
    )
    .await
}

/// Serves `router` over any reader/writer pair carrying newline-delimited
/// JSON. Each line is one frame and is handled on its own task; a line that
/// is not JSON gets `-32700`, a line over the router's frame limit gets
/// `-32001` (and is skipped without being buffered), and the stream goes on.
/// Returns when `reader` ends and every reply has been written and flushed.
pub async fn serve_ndjson<R, W>(
    router: Router,
    reader: R,
    mut writer: W,
    options: ServeOptions,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut connection = Extensions::new();
    connection.insert(TransportKind("stdio"));
    let connection = Arc::new(connection);

    let codec = NdjsonCodec::new(router.parse_limits().max_frame_len);
    let mut frames = FramedRead::new(reader, codec.clone());
    let (replies, mut outbox) = mpsc::channel::<Bytes>(options.max_in_flight.max(1));
    let writer_task = tokio::spawn(async move {
        let mut codec = codec;
        let mut buf = BytesMut::new();
        while let Some(reply) = outbox.recv().await {
            codec.encode(reply, &mut buf)?;
            // Coalesce whatever else is ready into one write.
            while let Ok(reply) = outbox.try_recv() {
                codec.encode(reply, &mut buf)?;
            }
            writer.write_all(&buf).await?;
            writer.flush().await?;
            buf.clear();
        }
        writer.flush().await
    });

    let permits = Arc::new(Semaphore::new(options.max_in_flight.max(1)));
    let mut tasks = JoinSet::new();
    let mut read_result = Ok(());
    while let Some(item) = frames.next().await {
        match item {
            Ok(Inbound::Frame(frame)) => {
                let permit = Arc::clone(&permits)
                    .acquire_owned()
                    .await
                    .expect("semaphore never closed");
                let (router, connection, replies) =
                    (router.clone(), Arc::clone(&connection), replies.clone());
                tasks.spawn(async move {
                    if let Some(reply) = router.handle_with(&frame, &connection).await {
                        let _ = replies.send(reply).await;
                    }
                    drop(permit);
                });
            }
            Ok(Inbound::Oversized { limit }) => {
                tracing::warn!(limit, "oversized line skipped");
                let error = Error::new(codes::FRAME_TOO_LARGE, "Frame too large")
                    .with_data(&format!("lines may be at most {limit} bytes"));
                let _ = replies
                    .send(
                        Response {
                            id: Id::NULL,
                            outcome: Err(error),
                        }
                        .to_bytes(),
                    )
                    .await;
            }
            Ok(Inbound::Malformed(reason)) => {
                tracing::warn!(%reason, "malformed framing skipped");
                let error = Error::parse_error();
                let _ = replies.send(Response { id: Id::NULL, outcome: Err(error) }.to_bytes()).await;
            }
            Err(e) => {
                read_result = Err(e);
                break;
            }
        }
        // Reap finished tasks so the set does not grow with the stream.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    drop(replies);
    let write_result = writer_task.await.map_err(io::Error::other)?;
    read_result.and(write_result)
}
