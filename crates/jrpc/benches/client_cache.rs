//! The client's response cache: the latency of a call answered from the
//! cache beside one that misses (and so makes its request), and beside the
//! same call with no cache at all, one call at a time over TCP loopback to
//! a jrpc server on its own thread. Every case is bounded by time.
//!
//! Run: `cargo bench -p jrpc-core --features cache --bench client_cache` (optional:
//! `-- SECONDS` per case, default 3)

mod common;

use std::time::{Duration, Instant};

use jrpc::client::{Client, ResponseCache};
use jrpc::server::Server;
use jrpc::Router;

/// Sequential calls for `duration`; `params(i)` gives the i-th call's
/// params. Returns the latencies.
async fn calls(client: &Client, duration: Duration, params: impl Fn(i64) -> (i64, i64)) -> Vec<Duration> {
    let mut latencies = Vec::new();
    let start = Instant::now();
    let mut i = 0;
    while start.elapsed() < duration {
        let t = Instant::now();
        let sum: i64 = client.call("add", params(i)).await.unwrap();
        latencies.push(t.elapsed());
        std::hint::black_box(sum);
        i += 1;
    }
    latencies
}

fn report(name: &str, mut latencies: Vec<Duration>) -> f64 {
    let mean = latencies.iter().sum::<Duration>() / latencies.len() as u32;
    let p50 = common::percentile(&mut latencies, 0.5);
    let p99 = common::percentile(&mut latencies, 0.99);
    println!(
        "{name:<28} {:>9} calls  mean {:>9.2?}  p50 {:>9.2?}  p99 {:>9.2?}",
        latencies.len(),
        mean,
        p50,
        p99
    );
    mean.as_secs_f64()
}

fn main() {
    let duration = common::seconds_from_args();
    let addr = common::spawn_server(|ready| async move {
        let router = Router::new().sync_method("add", |(a, b): (i64, i64)| Ok(a + b));
        let serving = Server::new(router).bind_tcp("127.0.0.1:0").await.unwrap();
        ready.send(serving.local_addr().to_owned()).unwrap();
        serving.wait().await;
    });
    common::runtime().block_on(async move {
        let plain = Client::connect(&addr).await.unwrap();
        let cache = ResponseCache::builder().max_entries(100_000).build();
        let cached = Client::builder()
            .layer(cache.layer())
            .connect(&addr)
            .await
            .unwrap();
        // Warm up both connections.
        calls(&plain, Duration::from_millis(300), |_| (1, 2)).await;
        calls(&cached, Duration::from_millis(300), |i| (i, -1)).await;

        let none = report("no cache", calls(&plain, duration, |_| (1, 2)).await);
        // Keys never seen before: each call is a miss, a request, and a store.
        let miss = report(
            "cache miss",
            calls(&cached, duration, |i| (i + 1_000_000, 1)).await,
        );
        let hit = report("cache hit", calls(&cached, duration, |_| (1, 2)).await);
        println!(
            "miss / no cache: {:.2}x   hit / miss: {:.4}x",
            miss / none,
            hit / miss
        );
        println!("{:?}", cache.stats());
    });
}
