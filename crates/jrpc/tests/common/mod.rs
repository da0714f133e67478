//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod brokers;

use jrpc::Router;
use serde_json::Value;

/// Serves `input` with `router` and returns the reply as JSON, `None` when
/// no reply is due. Panics if the reply is not valid JSON.
pub async fn reply(router: &Router, input: &str) -> Option<Value> {
    let bytes = router.handle(input.as_bytes()).await?;
    Some(
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("reply is not JSON ({e}): {}", String::from_utf8_lossy(&bytes))),
    )
}

/// A batch reply's entries in a canonical order, so that batches compare as
/// sets; other values are returned unchanged.
pub fn canonical(value: Value) -> Value {
    match value {
        Value::Array(mut items) => {
            items.sort_by_key(|v| v.to_string());
            Value::Array(items)
        }
        other => other,
    }
}

/// Parses a JSON literal used as an expected value.
pub fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("bad expected JSON {text}: {e}"))
}

/// The demo methods over HTTP, with a count of the HTTP requests that reach
/// them (one per call, or one per batch).
#[cfg(all(feature = "http-server", feature = "demo"))]
pub async fn counted_demo_server() -> (
    jrpc::server::Serving,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use jrpc::middleware::{layer_fn, service_fn, ServiceExt};
    use jrpc::server::http::{HttpServer, HttpService};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let requests = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&requests);
    let count = layer_fn(move |inner: HttpService| {
        let counted = Arc::clone(&counted);
        service_fn(move |request| {
            counted.fetch_add(1, Ordering::Relaxed);
            inner.clone().oneshot(request)
        })
    });
    let serving = HttpServer::new(jrpc::demo::router())
        .layer(count)
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    (serving, requests)
}
