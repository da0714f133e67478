//! A connection's writer: writes frames as they come from the outbox,
//! coalescing whatever is queued into one flush.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{Sink, SinkExt};
use tokio_util::sync::CancellationToken;

use super::state::PeerState;
use crate::caller::CallError;
use crate::dispatch::outbox::{Outbound, OutboxReceiver, Queued};
use crate::transport::OutFrame;

/// Writes frames as they come, coalescing whatever is queued into one flush.
/// On `finish`, writes what is left and closes the sink. The room frames
/// hold in the outbox is given back once they are flushed; a write that
/// waits longer than `write_timeout` for the peer to take its bytes ends
/// the connection.
pub(super) async fn write_loop<K>(
    shared: Arc<PeerState>,
    mut sink: K,
    mut outbox: OutboxReceiver,
    write_timeout: Option<Duration>,
    finish: CancellationToken,
) -> io::Result<()>
where
    K: Sink<OutFrame, Error = io::Error> + Unpin,
{
    let writing = async {
        let mut writer = Writer {
            sink: &mut sink,
            limit: write_timeout,
            unflushed: 0,
        };
        // One waiter for the whole loop, not one per frame.
        let finished = finish.cancelled();
        tokio::pin!(finished);
        loop {
            let queued = tokio::select! {
                biased;
                queued = outbox.recv() => queued,
                () = &mut finished => {
                    while let Some(queued) = outbox.try_recv() {
                        writer.feed(queued).await?;
                    }
                    break;
                }
            };
            let Some(queued) = queued else { break };
            writer.feed(queued).await?;
            while let Some(queued) = outbox.try_recv() {
                writer.feed(queued).await?;
            }
            // Under load the reader is still answering what it read in the
            // same burst: one turn for it first, so that those replies go
            // out in this write instead of one write (and one wakeup of the
            // other side) each.
            tokio::task::yield_now().await;
            while let Some(queued) = outbox.try_recv() {
                writer.feed(queued).await?;
            }
            writer.flush().await?;
            outbox.written(std::mem::take(&mut writer.unflushed));
        }
        writer.within(|sink| sink.close()).await
    };
    let result: io::Result<()> = tokio::select! {
        result = writing => result,
        () = shared.kill.cancelled() => Ok(()),
    };
    // Nothing more is written: whoever waits for room in the outbox (the
    // reader among them) stops waiting.
    outbox.close();
    if let Err(e) = &result {
        // The other side is gone: stop reading and fail every call.
        let e = Arc::new(io::Error::new(e.kind(), e.to_string()));
        shared.fail_calls(CallError::Io(e));
        shared.stop_reading.cancel();
    }
    result
}

/// The sink, with what it holds unflushed and how long a write may wait.
struct Writer<'a, K> {
    sink: &'a mut K,
    limit: Option<Duration>,
    /// The outbox room of the frames fed since the last flush.
    unflushed: u64,
}

impl<K> Writer<'_, K>
where
    K: Sink<OutFrame, Error = io::Error> + Unpin,
{
    async fn feed(&mut self, queued: Queued) -> io::Result<()> {
        self.unflushed = self.unflushed.saturating_add(queued.room);
        let outbound = queued.outbound;
        self.within(|sink| feed(sink, outbound)).await
    }

    async fn flush(&mut self) -> io::Result<()> {
        self.within(|sink| sink.flush()).await
    }

    /// Runs a write, failing it when the peer takes nothing for longer
    /// than the limit.
    async fn within<'s, F, Fut>(&'s mut self, write: F) -> io::Result<()>
    where
        F: FnOnce(&'s mut K) -> Fut,
        Fut: std::future::Future<Output = io::Result<()>> + 's,
    {
        let Some(limit) = self.limit else {
            return write(self.sink).await;
        };
        // Most writes finish at once: no timer for them.
        let mut write = std::pin::pin!(write(self.sink));
        if let Some(result) = futures_util::FutureExt::now_or_never(write.as_mut()) {
            return result;
        }
        match tokio::time::timeout(limit, write).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the peer took no output for {limit:?}"),
            )),
        }
    }
}

/// Hands `outbound` to the sink, unflushed.
async fn feed<K>(sink: &mut K, outbound: Outbound) -> io::Result<()>
where
    K: Sink<OutFrame, Error = io::Error> + Unpin,
{
    match outbound {
        Outbound::Frame(frame) => {
            crate::transport::trace_frame(">", &frame.bytes);
            sink.feed(frame).await
        }
        Outbound::Frames(frames) => {
            for frame in frames {
                crate::transport::trace_frame(">", &frame.bytes);
                sink.feed(frame).await?;
            }
            Ok(())
        }
    }
}
