//! Requests/s and latency over HTTP and WebSocket: 1, 16 and 256
//! connections each keeping one call in flight, and batches of 100 over
//! HTTP. jrpc client against jrpc server on loopback.
//!
//! The server runs on its own thread with a single-threaded runtime; the
//! load generator on another. Every case is bounded by time.
//!
//! Run: `cargo bench -p jrpc-core --bench http` (optional: `-- SECONDS`, default 3)

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jrpc::client::Client;
use jrpc::server::http::HttpServer;
use jrpc::Router;

fn add_router() -> Router {
    Router::new()
        .sync_method("add", |(a, b): (i64, i64)| Ok(a + b))
        .max_batch_len(1000)
}

fn spawn_server(router: Router) -> String {
    common::spawn_server(|ready| async move {
        let serving = HttpServer::new(router)
            .compression(false)
            .bind("127.0.0.1:0")
            .await
            .unwrap();
        ready.send(serving.local_addr().to_owned()).unwrap();
        serving.wait().await;
    })
}

struct Figures {
    requests: u64,
    items: u64,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Figures {
    fn percentile(&mut self, p: f64) -> Duration {
        common::percentile(&mut self.latencies, p)
    }
}

/// `connections` clients, each calling back to back (`batch` calls per
/// request when given), for `duration`.
async fn load(url: &str, connections: usize, batch: Option<usize>, duration: Duration) -> Figures {
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let client = Client::connect(url).await.unwrap();
        // One call first, so that connecting is not measured.
        let _: i64 = client.call("add", (1, 2)).await.unwrap();
        let stop = Arc::clone(&stop);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                match batch {
                    None => {
                        let sum: i64 = client.call("add", (1, 2)).await.unwrap();
                        assert_eq!(sum, 3);
                    }
                    Some(n) => {
                        let mut b = client.batch();
                        let calls: Vec<_> = (0..n).map(|i| b.call::<i64>("add", (i, 1))).collect();
                        b.send().await.unwrap();
                        for call in calls {
                            call.await.unwrap();
                        }
                    }
                }
                latencies.push(t.elapsed());
            }
            latencies
        }));
    }
    let start = Instant::now();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let elapsed = start.elapsed();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let requests = latencies.len() as u64;
    Figures {
        requests,
        items: requests * batch.unwrap_or(1) as u64,
        elapsed,
        latencies,
    }
}

fn main() {
    let duration = common::seconds_from_args();
    let http = spawn_server(add_router());
    let ws = http.replacen("http", "ws", 1);
    // The same server with `--log-calls --metrics`'s layers (built with
    // `--features metrics`).
    #[cfg(feature = "metrics")]
    let layered = spawn_server(common::with_log_and_metrics(add_router()));
    #[cfg(feature = "metrics")]
    let layered_ws = layered.replacen("http", "ws", 1);
    let load_runtime = common::runtime();
    println!(
        "{:<32} {:>12} {:>12} {:>10} {:>10}",
        "case", "requests/s", "items/s", "p50", "p99"
    );
    #[allow(unused_mut)]
    let mut cases: Vec<(String, &str, usize, Option<usize>)> = vec![
        ("HTTP, 1 connection".into(), &http, 1, None),
        ("HTTP, 16 connections".into(), &http, 16, None),
        ("HTTP, 256 connections".into(), &http, 256, None),
        ("WebSocket, 1 connection".into(), &ws, 1, None),
        ("WebSocket, 16 connections".into(), &ws, 16, None),
        ("WebSocket, 256 connections".into(), &ws, 256, None),
        ("HTTP batch of 100, 16 conns".into(), &http, 16, Some(100)),
    ];
    #[cfg(feature = "metrics")]
    cases.extend([
        ("HTTP, 16 conns, log + metrics".into(), layered.as_str(), 16, None),
        (
            "WebSocket, 16 conns, log + metrics".into(),
            layered_ws.as_str(),
            16,
            None,
        ),
        (
            "HTTP batch of 100, log + metrics".into(),
            layered.as_str(),
            16,
            Some(100),
        ),
    ]);
    for (name, url, connections, batch) in cases {
        let mut f = load_runtime.block_on(load(url, connections, batch, duration));
        let secs = f.elapsed.as_secs_f64();
        println!(
            "{:<32} {:>12.0} {:>12.0} {:>10.1?} {:>10.1?}",
            name,
            f.requests as f64 / secs,
            f.items as f64 / secs,
            f.percentile(0.5),
            f.percentile(0.99)
        );
    }
}
