//! The client's response cache: hits without a request, one key whatever
//! the member order or whitespace, errors never kept, a time-to-live and
//! bounds, identical calls sharing one request in flight, invalidation
//! (also of a request still in flight), and property tests of the key.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use jrpc::client::cache::canonical_json;
use jrpc::client::{Client, ResponseCache};
use jrpc::message::RawValue;
use jrpc::server::{Server, Serving};
use jrpc::Router;
use proptest::prelude::*;
use serde_json::{json, Value};
use tokio::sync::{mpsc, Semaphore};

/// Fails the test instead of hanging when something never finishes.
async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish"))
}

async fn cached_client(serving: &Serving, cache: &ResponseCache) -> Client {
    Client::builder()
        .layer(cache.layer())
        .connect(serving.local_addr())
        .await
        .unwrap()
}

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).unwrap()
}

#[tokio::test]
async fn a_fresh_result_is_answered_without_a_request_whatever_the_member_order() {
    let (serving, requests) = common::counted_demo_server().await;
    let cache = ResponseCache::builder().methods(["subtract", "get_data"]).build();
    let client = cached_client(&serving, &cache).await;
    let one = raw(r#"{"minuend": 42, "subtrahend": 23}"#);
    let other = raw(r#"{ "subtrahend":23,
        "minuend":42 }"#);
    assert_eq!(client.call::<i64>("subtract", &*one).await.unwrap(), 19);
    assert_eq!(client.call::<i64>("subtract", &*other).await.unwrap(), 19);
    assert_eq!(requests.load(Ordering::Relaxed), 1, "the second call was a hit");
    // Other params, another method: their own entries. Positional params
    // are another key than named ones.
    assert_eq!(client.call::<i64>("subtract", [42, 23]).await.unwrap(), 19);
    assert_eq!(client.call::<(String, u32)>("get_data", ()).await.unwrap().1, 5);
    assert_eq!(client.call::<(String, u32)>("get_data", ()).await.unwrap().1, 5);
    assert_eq!(requests.load(Ordering::Relaxed), 3);
    // Methods not chosen are never kept; notifications pass.
    client.call::<i64>("add", [1, 2]).await.unwrap();
    client.call::<i64>("add", [1, 2]).await.unwrap();
    client.notify("update", [1]).await.unwrap();
    assert_eq!(requests.load(Ordering::Relaxed), 6);
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses, stats.entries), (2, 3, 3), "{stats:?}");
    serving.shutdown().await;
}

#[tokio::test]
async fn errors_are_not_kept_and_entries_expire() {
    let (serving, requests) = common::counted_demo_server().await;
    let cache = ResponseCache::builder().ttl(Duration::from_millis(50)).build();
    let client = cached_client(&serving, &cache).await;
    for _ in 0..2 {
        let error = client.call::<i64>("subtract", ["a", "b"]).await.unwrap_err();
        assert_eq!(error.rpc().map(|e| e.code()), Some(-32602));
    }
    assert_eq!(requests.load(Ordering::Relaxed), 2, "an error is asked again");
    client.call::<i64>("add", [1, 2]).await.unwrap();
    client.call::<i64>("add", [1, 2]).await.unwrap();
    assert_eq!(requests.load(Ordering::Relaxed), 3);
    // Well past the time-to-live, the entry is stale.
    tokio::time::sleep(Duration::from_millis(200)).await;
    client.call::<i64>("add", [1, 2]).await.unwrap();
    assert_eq!(
        requests.load(Ordering::Relaxed),
        4,
        "an expired entry is asked again"
    );
    serving.shutdown().await;
}

#[tokio::test]
async fn entries_stay_within_their_count_and_byte_bounds() {
    let (serving, _) = common::counted_demo_server().await;
    let cache = ResponseCache::builder().max_entries(4).build();
    let client = cached_client(&serving, &cache).await;
    for n in 0..20 {
        client.call::<i64>("add", [n, 1]).await.unwrap();
    }
    assert!(cache.stats().entries <= 4, "{:?}", cache.stats());
    assert!(cache.stats().entries >= 1, "{:?}", cache.stats());

    let cache = ResponseCache::builder().max_bytes(2_000).build();
    let client = cached_client(&serving, &cache).await;
    let text = "x".repeat(300);
    for n in 0..20 {
        client.call::<Value>("echo", [json!([n, text])]).await.unwrap();
    }
    let stats = cache.stats();
    assert!(stats.weight <= 2_000 && stats.entries <= 5, "{stats:?}");
    serving.shutdown().await;
}

#[tokio::test]
async fn invalidation_drops_entries() {
    let (serving, requests) = common::counted_demo_server().await;
    let cache = ResponseCache::builder().build();
    let client = cached_client(&serving, &cache).await;
    let ask = |n: i64| client.call::<i64>("add", [n, n]);
    ask(1).await.unwrap();
    ask(2).await.unwrap();
    assert_eq!(requests.load(Ordering::Relaxed), 2);
    assert!(cache.invalidate("add", [1, 1]));
    assert!(!cache.invalidate("add", [9, 9]), "nothing kept for those");
    ask(1).await.unwrap();
    ask(2).await.unwrap();
    assert_eq!(requests.load(Ordering::Relaxed), 3, "only [1, 1] was dropped");
    cache.invalidate_method("add");
    ask(2).await.unwrap();
    assert_eq!(requests.load(Ordering::Relaxed), 4);
    cache.clear();
    assert_eq!(cache.stats().entries, 0);
    serving.shutdown().await;
}

/// A server whose `slow` method reports each start and then waits for a
/// permit, so a test decides when it answers.
async fn gated_server() -> (Serving, mpsc::UnboundedReceiver<()>, Arc<Semaphore>) {
    let (started, starts) = mpsc::unbounded_channel();
    let gate = Arc::new(Semaphore::new(0));
    let permits = Arc::clone(&gate);
    let router = Router::new().method("slow", move |(n,): (i64,)| {
        let (started, permits) = (started.clone(), Arc::clone(&permits));
        async move {
            let _ = started.send(());
            permits.acquire().await.unwrap().forget();
            Ok(n * 2)
        }
    });
    let serving = Server::new(router).bind_tcp("127.0.0.1:0").await.unwrap();
    (serving, starts, gate)
}

#[tokio::test]
async fn identical_calls_in_flight_share_one_request() {
    let (serving, mut starts, gate) = gated_server().await;
    let cache = ResponseCache::builder().build();
    let client = cached_client(&serving, &cache).await;
    let waiting = tokio::spawn({
        let client = client.clone();
        async move { join_all((0..8).map(|_| client.call::<i64>("slow", [21]))).await }
    });
    bounded("the first request", starts.recv()).await.unwrap();
    gate.add_permits(1);
    let results = bounded("the calls", waiting).await.unwrap();
    assert!(results.iter().all(|r| matches!(r, Ok(42))), "{results:?}");
    assert!(starts.try_recv().is_err(), "one request for eight calls");
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.joined), (8, 7), "{stats:?}");
    serving.shutdown().await;
}

#[tokio::test]
async fn a_result_in_flight_at_an_invalidation_is_not_kept() {
    let (serving, mut starts, gate) = gated_server().await;
    let cache = ResponseCache::builder().build();
    let client = cached_client(&serving, &cache).await;
    let first = tokio::spawn({
        let client = client.clone();
        async move { client.call::<i64>("slow", [1]).await }
    });
    bounded("the request", starts.recv()).await.unwrap();
    cache.invalidate_method("slow");
    // The same call now does not join the request begun before.
    let second = tokio::spawn({
        let client = client.clone();
        async move { client.call::<i64>("slow", [1]).await }
    });
    bounded("a request of its own", starts.recv()).await.unwrap();
    gate.add_permits(2);
    assert_eq!(bounded("the call", first).await.unwrap().unwrap(), 2);
    assert_eq!(bounded("the call", second).await.unwrap().unwrap(), 2);
    cache.invalidate_method("slow");
    assert_eq!(cache.stats().entries, 0, "it may predate the invalidation");
    gate.add_permits(1);
    assert_eq!(
        bounded("the call", client.call::<i64>("slow", [1]))
            .await
            .unwrap(),
        2
    );
    assert!(starts.try_recv().is_ok(), "asked again");
    serving.shutdown().await;
}

// ---- the key ----

/// Any JSON value, with integers beyond 64 bits among the numbers.
fn json_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_owned()),
        any::<bool>().prop_map(|b| b.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        (any::<u64>(), 0..1000u32).prop_map(|(n, d)| format!("{n}{d:03}")),
        (-1e6f64..1e6).prop_map(|f| format!("{f:e}")),
        "[a-zA-Z0-9 é\"\\\\]{0,8}".prop_map(|s| serde_json::to_string(&s).unwrap()),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(|items| format!("[{}]", items.join(","))),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..6).prop_map(|members| {
                let members: Vec<String> = members
                    .into_iter()
                    .map(|(k, v)| format!("{}:{v}", serde_json::to_string(&k).unwrap()))
                    .collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    })
}

/// `text` with its objects' members reversed and spaces added between
/// tokens: the same JSON value, written differently.
fn rewritten(text: &str) -> String {
    let value: &RawValue = serde_json::from_str(text).unwrap();
    let inner = value.get();
    match inner.as_bytes()[0] {
        b'{' => {
            let members: Vec<(String, &RawValue)> =
                serde_json::from_str::<std::collections::BTreeMap<String, &RawValue>>(inner)
                    .unwrap()
                    .into_iter()
                    .rev()
                    .collect();
            let members: Vec<String> = members
                .into_iter()
                .map(|(k, v)| {
                    format!(
                        "\n  {} : {}",
                        serde_json::to_string(&k).unwrap(),
                        rewritten(v.get())
                    )
                })
                .collect();
            format!("{{ {} }}", members.join(" ,"))
        }
        b'[' => {
            let items: Vec<&RawValue> = serde_json::from_str(inner).unwrap();
            let items: Vec<String> = items.into_iter().map(|v| rewritten(v.get())).collect();
            format!("[ {} ]", items.join(" , "))
        }
        _ => format!(" {inner} "),
    }
}

fn canonical(text: &str) -> String {
    let value: &RawValue = serde_json::from_str(text).unwrap();
    let mut out = String::new();
    canonical_json(value, &mut out).unwrap();
    out
}

proptest! {
    #[test]
    fn member_order_and_whitespace_do_not_change_the_key(text in json_value()) {
        prop_assert_eq!(canonical(&text), canonical(&rewritten(&text)));
    }

    #[test]
    fn the_key_keeps_the_value_and_every_digit(text in json_value()) {
        let key = canonical(&text);
        let original: Value = serde_json::from_str(&text).unwrap();
        let back: Value = serde_json::from_str(&key).unwrap();
        prop_assert_eq!(original, back);
        // Numbers are kept as written: digits beyond 64 bits included.
        for number in text.split(|c: char| !(c.is_ascii_digit())).filter(|n| n.len() > 19) {
            prop_assert!(key.contains(number));
        }
    }

    #[test]
    fn different_values_have_different_keys(a in json_value(), b in json_value()) {
        let (va, vb): (Value, Value) = (serde_json::from_str(&a).unwrap(), serde_json::from_str(&b).unwrap());
        if va != vb && a.trim() != b.trim() {
            prop_assert_ne!(canonical(&a), canonical(&b));
        }
    }
}
