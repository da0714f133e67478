//! Helpers shared by the integration tests.
#![allow(dead_code)]

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
