//! Calls per second over TCP, jrpc client → jrpc server, beside a raw TCP
//! line-echo ceiling measured in the same run: a server that answers every
//! line with a constant reply line, no JSON at all.
//!
//! Server and load generator each get their own single-threaded runtime (one
//! core each on a 2-core machine). Every case is bounded by time.
//!
//! Run: `cargo bench -p jrpc-core --bench tcp` (optional: `-- SECONDS`, default 3)

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jrpc::client::Client;
use jrpc::server::Server;
use jrpc::Router;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const REQUEST: &[u8] = br#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}"#;
const REPLY: &[u8] = br#"{"jsonrpc":"2.0","result":3,"id":1}"#;

struct Figures {
    calls: u64,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Figures {
    fn rate(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile(&mut self, p: f64) -> Duration {
        common::percentile(&mut self.latencies, p)
    }
}

/// The ceiling: each connection keeps `in_flight` lines outstanding.
async fn raw_echo_load(addr: &str, in_flight: usize, duration: Duration) -> Figures {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let mut line = REQUEST.to_vec();
    line.push(b'\n');
    let window: Vec<u8> = line.repeat(in_flight);
    stream.write_all(&window).await.unwrap();
    let start = Instant::now();
    let mut calls = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::new();
    while start.elapsed() < duration {
        let n = stream.read(&mut buf).await.unwrap();
        let done = buf[..n].iter().filter(|b| **b == b'\n').count();
        calls += done as u64;
        out.clear();
        for _ in 0..done {
            out.extend_from_slice(&line);
        }
        stream.write_all(&out).await.unwrap();
    }
    Figures {
        calls,
        elapsed: start.elapsed(),
        latencies: Vec::new(),
    }
}

async fn raw_echo_server(ready: tokio::sync::oneshot::Sender<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    ready.send(listener.local_addr().unwrap().to_string()).unwrap();
    loop {
        let (mut stream, _) = listener.accept().await.unwrap();
        stream.set_nodelay(true).unwrap();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            let mut out = Vec::new();
            let mut reply = REPLY.to_vec();
            reply.push(b'\n');
            loop {
                let n = match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                out.clear();
                for _ in buf[..n].iter().filter(|b| **b == b'\n') {
                    out.extend_from_slice(&reply);
                }
                if stream.write_all(&out).await.is_err() {
                    return;
                }
            }
        });
    }
}

fn add_router() -> Router {
    Router::new().sync_method("add", |(a, b): (i64, i64)| Ok(a + b))
}

async fn jrpc_server(router: Router, ready: tokio::sync::oneshot::Sender<String>) {
    let serving = Server::new(router).bind_tcp("127.0.0.1:0").await.unwrap();
    ready
        .send(serving.local_addr().trim_start_matches("tcp://").to_owned())
        .unwrap();
    serving.wait().await;
}

/// jrpc: `in_flight` tasks calling `add` back to back on one connection.
async fn jrpc_load(addr: &str, in_flight: usize, duration: Duration) -> Figures {
    let client = Client::builder().connect_tcp(addr).await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..in_flight)
        .map(|_| {
            let (client, stop, calls) = (client.clone(), Arc::clone(&stop), Arc::clone(&calls));
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let sum: i64 = client.call("add", (1, 2)).await.unwrap();
                    latencies.push(t.elapsed());
                    assert_eq!(sum, 3);
                    calls.fetch_add(1, Ordering::Relaxed);
                }
                latencies
            })
        })
        .collect();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let elapsed = start.elapsed();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    Figures {
        calls: calls.load(Ordering::Relaxed),
        elapsed,
        latencies,
    }
}

fn main() {
    let duration = common::seconds_from_args();
    let raw_addr = common::spawn_server(raw_echo_server);
    let jrpc_addr = common::spawn_server(|ready| jrpc_server(add_router(), ready));
    // The same server with `--log-calls --metrics`'s layers (built with
    // `--features metrics`).
    #[cfg(feature = "metrics")]
    let layered_addr =
        common::spawn_server(|ready| jrpc_server(common::with_log_and_metrics(add_router()), ready));
    let load = common::runtime();
    println!(
        "{:<34} {:>12} {:>10} {:>10} {:>10}",
        "case", "calls/s", "vs raw", "p50", "p99"
    );
    // JRPC_BENCH_ONLY=jrpc skips the raw ceiling (for profiling jrpc alone).
    let only_jrpc = std::env::var("JRPC_BENCH_ONLY").is_ok_and(|v| v == "jrpc");
    for in_flight in [1usize, 64] {
        let raw = if only_jrpc {
            Figures {
                calls: 1,
                elapsed: Duration::from_secs(1),
                latencies: Vec::new(),
            }
        } else {
            load.block_on(raw_echo_load(&raw_addr, in_flight, duration))
        };
        let mut jrpc = load.block_on(jrpc_load(&jrpc_addr, in_flight, duration));
        println!(
            "{:<34} {:>12.0} {:>10} {:>10} {:>10}",
            format!("raw line echo, {in_flight} in flight"),
            raw.rate(),
            "1.00",
            "",
            ""
        );
        println!(
            "{:<34} {:>12.0} {:>10.2} {:>10.1?} {:>10.1?}",
            format!("jrpc add over TCP, {in_flight} in flight"),
            jrpc.rate(),
            jrpc.rate() / raw.rate(),
            jrpc.percentile(0.5),
            jrpc.percentile(0.99)
        );
        #[cfg(feature = "metrics")]
        {
            let mut layered = load.block_on(jrpc_load(&layered_addr, in_flight, duration));
            println!(
                "{:<34} {:>12.0} {:>10.2} {:>10.1?} {:>10.1?}   {:.3} of no layers",
                format!("  + call log + metrics"),
                layered.rate(),
                layered.rate() / raw.rate(),
                layered.percentile(0.5),
                layered.percentile(0.99),
                layered.rate() / jrpc.rate(),
            );
        }
    }
}
