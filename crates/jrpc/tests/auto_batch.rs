//! Automatic batching on the calling side: calls made together go out as
//! batch frames within the configured bounds, each caller gets its own
//! result, error or timeout, notifications ride along, and the client's
//! layers still see each call on its own. Over a raw TCP server written
//! here (so every frame is seen as sent) and over jrpc's HTTP server.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use jrpc::caller::{BoxOutgoingService, Outgoing};
use jrpc::client::{AutoBatch, Client};
use jrpc::middleware::{layer_fn, service_fn, ServiceExt};
use jrpc::CallError;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// Fails the test instead of hanging when something never finishes.
async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish"))
}

/// Every frame the line server received, parsed.
type Frames = Arc<Mutex<Vec<Value>>>;

/// A newline-delimited JSON-RPC server that records each frame: `add`
/// sums its params, `never` is never answered, anything else is unknown.
async fn line_server() -> (String, Frames) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = format!("tcp://{}", listener.local_addr().unwrap());
    let frames = Frames::default();
    let seen = Arc::clone(&frames);
    tokio::spawn(async move {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let (read, mut write) = stream.into_split();
        let mut lines = BufReader::new(read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let frame: Value = serde_json::from_str(&line).unwrap();
            seen.lock().unwrap().push(frame.clone());
            let reply = match &frame {
                Value::Array(entries) => {
                    let replies: Vec<Value> = entries.iter().filter_map(answer).collect();
                    (!replies.is_empty()).then_some(Value::Array(replies))
                }
                single => answer(single),
            };
            if let Some(reply) = reply {
                let mut text = reply.to_string();
                text.push('\n');
                write.write_all(text.as_bytes()).await.unwrap();
            }
        }
    });
    (addr, frames)
}

fn answer(request: &Value) -> Option<Value> {
    let id = request.get("id")?.clone();
    Some(match request["method"].as_str() {
        Some("add") => {
            let sum: i64 = request["params"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_i64().unwrap())
                .sum();
            json!({"jsonrpc": "2.0", "result": sum, "id": id})
        }
        Some("never") => return None,
        _ => json!({"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": id}),
    })
}

/// A line server, and a client batching to it whose calls pass a layer
/// that counts them.
async fn batching_to_line_server(batching: AutoBatch) -> (Client, Frames, Arc<AtomicUsize>) {
    let (addr, frames) = line_server().await;
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&seen);
    let count = layer_fn(move |inner: BoxOutgoingService| {
        let counted = Arc::clone(&counted);
        service_fn(move |call: Outgoing| {
            counted.fetch_add(1, Ordering::Relaxed);
            inner.clone().oneshot(call)
        })
    });
    let client = Client::builder()
        .auto_batch(batching)
        .layer(count)
        .connect(&addr)
        .await
        .unwrap();
    (client, frames, seen)
}

/// How many calls each frame carried (1 for a plain request).
fn entries_per_frame(frames: &Frames) -> Vec<usize> {
    frames
        .lock()
        .unwrap()
        .iter()
        .map(|f| f.as_array().map_or(1, Vec::len))
        .collect()
}

#[tokio::test]
async fn concurrent_calls_go_out_as_one_batch_and_each_caller_gets_its_own_result() {
    // The batch fills up at once; the long linger is never waited out.
    let (client, frames, _) =
        batching_to_line_server(AutoBatch::new(10).linger(Duration::from_secs(5))).await;
    let calls = (0..10).map(|i| client.call::<i64>("add", [i, 100]));
    let sums = bounded("the calls", join_all(calls)).await;
    for (i, sum) in sums.into_iter().enumerate() {
        assert_eq!(sum.unwrap(), i as i64 + 100);
    }
    assert_eq!(entries_per_frame(&frames), [10], "one frame of ten calls");
}

#[tokio::test]
async fn batches_keep_within_their_count_and_byte_bounds() {
    let (client, frames, _) =
        batching_to_line_server(AutoBatch::new(4).linger(Duration::from_millis(300))).await;
    let sums = bounded(
        "the calls",
        join_all((0..10).map(|i| client.call::<i64>("add", [i, 1]))),
    )
    .await;
    assert!(sums.iter().all(Result::is_ok));
    let sizes = entries_per_frame(&frames);
    assert!(sizes.iter().all(|n| *n <= 4), "{sizes:?}");
    assert_eq!(sizes.iter().sum::<usize>(), 10);
    assert_eq!(sizes.len(), 3, "{sizes:?}");

    // Three calls of about 1 KB each, at most 2.5 KB a batch: never three
    // together.
    let (client, frames, _) = batching_to_line_server(
        AutoBatch::new(100)
            .max_bytes(2_500)
            .linger(Duration::from_millis(300)),
    )
    .await;
    let big: Vec<i64> = vec![0; 500];
    let sums = bounded(
        "the calls",
        join_all((0..3).map(|_| client.call::<i64>("add", &big))),
    )
    .await;
    assert!(sums.iter().all(Result::is_ok));
    let sizes = entries_per_frame(&frames);
    assert!(sizes.iter().all(|n| *n <= 2), "{sizes:?}");
    assert_eq!(sizes.iter().sum::<usize>(), 3);
}

#[tokio::test]
async fn errors_timeouts_and_notifications_stay_with_their_own_callers() {
    let (client, frames, _) = batching_to_line_server(AutoBatch::new(4).linger(Duration::from_secs(5))).await;
    let ok = client.call::<i64>("add", [20, 22]);
    let unknown = client.call::<i64>("nope", [1]);
    let silent = client.call_with_timeout::<i64>("never", [1], Duration::from_millis(300));
    let note = client.notify("update", [1]);
    let (ok, unknown, silent, note) =
        bounded("the calls", async { tokio::join!(ok, unknown, silent, note) }).await;
    assert_eq!(ok.unwrap(), 42);
    assert_eq!(unknown.unwrap_err().rpc().map(|e| e.code()), Some(-32601));
    assert!(matches!(silent, Err(CallError::Timeout(_))), "{silent:?}");
    note.unwrap();
    let frames = frames.lock().unwrap().clone();
    assert_eq!(frames.len(), 1, "the notification rode along: {frames:?}");
    let batch = frames[0].as_array().unwrap();
    assert_eq!(batch.len(), 4);
    assert!(batch
        .iter()
        .any(|e| e["method"] == "update" && e.get("id").is_none()));
}

#[tokio::test]
async fn a_lone_call_goes_out_as_a_plain_request_and_layers_see_each_call() {
    let (client, frames, _) = batching_to_line_server(AutoBatch::new(8).linger(Duration::ZERO)).await;
    assert_eq!(
        bounded("a call", client.call::<i64>("add", [1, 2]))
            .await
            .unwrap(),
        3
    );
    assert!(
        frames.lock().unwrap()[0].is_object(),
        "a batch of one is a plain request"
    );

    let batching = AutoBatch::new(5).linger(Duration::from_secs(5));
    let (client, frames, seen) = batching_to_line_server(batching).await;
    bounded(
        "the calls",
        join_all((0..5).map(|i| client.call::<i64>("add", [i, i]))),
    )
    .await;
    assert_eq!(seen.load(Ordering::Relaxed), 5, "the layer saw each call");
    assert_eq!(entries_per_frame(&frames), [5]);
}

#[tokio::test]
async fn over_http_one_request_carries_many_calls() {
    let (serving, requests) = common::counted_demo_server().await;
    let batching = AutoBatch::new(20).linger(Duration::from_secs(5));
    let client = Client::builder()
        .auto_batch(batching)
        .connect(serving.local_addr())
        .await
        .unwrap();
    let results = bounded(
        "the calls",
        join_all((0..20).map(|i| client.call::<i64>("subtract", json!({"minuend": 100, "subtrahend": i})))),
    )
    .await;
    for (i, result) in results.into_iter().enumerate() {
        assert_eq!(result.unwrap(), 100 - i as i64);
    }
    assert_eq!(
        requests.load(Ordering::Relaxed),
        1,
        "twenty calls, one HTTP request"
    );
    serving.shutdown().await;
}
