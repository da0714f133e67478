//! The in-process path, request bytes → reply bytes, beside a serde_json
//! floor doing the least any JSON-RPC server must: parse the envelope with
//! raw params, look the method up, decode the params, serialize a response.
//!
//! Run: `cargo bench -p jrpc-core --bench inprocess`

#[cfg(feature = "metrics")]
mod common;

use std::collections::HashMap;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use futures_util::FutureExt;
use jrpc::Router;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

const POSITIONAL: &[u8] = br#"{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}"#;
const NAMED: &[u8] =
    br#"{"jsonrpc":"2.0","method":"subtract","params":{"minuend":42,"subtrahend":23},"id":1}"#;

#[derive(Deserialize)]
struct Subtract {
    minuend: i64,
    subtrahend: i64,
}

fn router() -> Router {
    Router::new().sync_method("subtract", |p: Subtract| Ok(p.minuend - p.subtrahend))
}

// ---- the floor ----

#[derive(Deserialize)]
struct Envelope<'a> {
    #[allow(dead_code)]
    jsonrpc: &'a str,
    method: &'a str,
    #[serde(borrow)]
    params: &'a RawValue,
    #[serde(borrow)]
    id: &'a RawValue,
}

#[derive(Serialize)]
struct Reply<'a, T> {
    jsonrpc: &'static str,
    result: T,
    id: &'a RawValue,
}

type FloorMethod = fn(&RawValue) -> i64;

fn floor_table() -> HashMap<&'static str, FloorMethod> {
    let mut table: HashMap<&'static str, FloorMethod> = HashMap::new();
    table.insert("subtract", |params| {
        let p: Subtract = serde_json::from_str(params.get()).unwrap();
        p.minuend - p.subtrahend
    });
    table
}

fn floor_one(table: &HashMap<&'static str, FloorMethod>, env: &Envelope<'_>, out: &mut Vec<u8>) {
    let result = table[env.method](env.params);
    serde_json::to_writer(
        out,
        &Reply {
            jsonrpc: "2.0",
            result,
            id: env.id,
        },
    )
    .unwrap();
}

fn floor_single(table: &HashMap<&'static str, FloorMethod>, frame: &[u8]) -> Vec<u8> {
    let env: Envelope<'_> = serde_json::from_slice(frame).unwrap();
    let mut out = Vec::with_capacity(64);
    floor_one(table, &env, &mut out);
    out
}

fn floor_batch(table: &HashMap<&'static str, FloorMethod>, frame: &[u8]) -> Vec<u8> {
    let envs: Vec<Envelope<'_>> = serde_json::from_slice(frame).unwrap();
    let mut out = Vec::with_capacity(envs.len() * 40);
    out.push(b'[');
    for (i, env) in envs.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        floor_one(table, env, &mut out);
    }
    out.push(b']');
    out
}

fn batch_of(n: usize) -> Vec<u8> {
    let items: Vec<String> = (0..n)
        .map(|i| format!(r#"{{"jsonrpc":"2.0","method":"subtract","params":[{i},23],"id":{i}}}"#))
        .collect();
    format!("[{}]", items.join(",")).into_bytes()
}

fn bench(c: &mut Criterion) {
    let router = router();
    let demo = jrpc::demo::router();
    let table = floor_table();
    // Both paths must agree before their speed means anything.
    for frame in [POSITIONAL, NAMED] {
        let jrpc = router.handle(frame).now_or_never().unwrap().unwrap();
        assert_eq!(jrpc, floor_single(&table, frame));
    }

    let mut single = c.benchmark_group("single");
    for (name, frame) in [("positional", POSITIONAL), ("named", NAMED)] {
        single.bench_function(format!("serde_json_floor/{name}"), |b| {
            b.iter(|| floor_single(&table, black_box(frame)))
        });
        single.bench_function(format!("jrpc/{name}"), |b| {
            b.iter(|| router.handle(black_box(frame)).now_or_never().unwrap())
        });
        single.bench_function(format!("jrpc_demo/{name}"), |b| {
            b.iter(|| demo.handle(black_box(frame)).now_or_never().unwrap())
        });
    }
    // What call middleware costs per call: a layer that does nothing, and
    // the call log and metrics `jrpc serve --log-calls --metrics` installs.
    let passthrough = router.clone().layer(tower::layer::util::Identity::new());
    single.bench_function("jrpc_identity_layer/positional", |b| {
        b.iter(|| passthrough.handle(black_box(POSITIONAL)).now_or_never().unwrap())
    });
    #[cfg(feature = "metrics")]
    {
        let metrics = jrpc::middleware::Metrics::new();
        let metrics_only = router.clone().layer(metrics.layer());
        single.bench_function("jrpc_metrics/positional", |b| {
            b.iter(|| metrics_only.handle(black_box(POSITIONAL)).now_or_never().unwrap())
        });
        let layered = common::with_log_and_metrics(router.clone());
        single.bench_function("jrpc_log_metrics/positional", |b| {
            b.iter(|| layered.handle(black_box(POSITIONAL)).now_or_never().unwrap())
        });
    }
    single.finish();

    let batch = batch_of(100);
    let mut group = c.benchmark_group("batch_100");
    group.throughput(Throughput::Elements(100));
    group.bench_function("serde_json_floor", |b| {
        b.iter(|| floor_batch(&table, black_box(&batch)))
    });
    group.bench_function("jrpc", |b| {
        b.iter(|| router.handle(black_box(&batch)).now_or_never().unwrap())
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
