//! The examples of the JSON-RPC 2.0 specification (section 7), each checked
//! on the exact reply. Batch replies are compared as sets: the spec lets a
//! server answer batch entries in any order.

mod common;

use common::{canonical, json, reply};

/// (name, request, expected reply or `None` for no reply at all)
const EXAMPLES: &[(&str, &str, Option<&str>)] = &[
    (
        "positional params",
        r#"{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}"#,
        Some(r#"{"jsonrpc": "2.0", "result": 19, "id": 1}"#),
    ),
    (
        "positional params, reversed",
        r#"{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}"#,
        Some(r#"{"jsonrpc": "2.0", "result": -19, "id": 2}"#),
    ),
    (
        "named params",
        r#"{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}"#,
        Some(r#"{"jsonrpc": "2.0", "result": 19, "id": 3}"#),
    ),
    (
        "named params, other order",
        r#"{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}"#,
        Some(r#"{"jsonrpc": "2.0", "result": 19, "id": 4}"#),
    ),
    (
        "notification",
        r#"{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}"#,
        None,
    ),
    (
        "notification to an unknown method",
        r#"{"jsonrpc": "2.0", "method": "foobar"}"#,
        None,
    ),
    (
        "non-existent method",
        r#"{"jsonrpc": "2.0", "method": "foobar", "id": "1"}"#,
        Some(r#"{"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "1"}"#),
    ),
    (
        "invalid JSON",
        r#"{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]"#,
        Some(r#"{"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": null}"#),
    ),
    (
        "invalid request object",
        r#"{"jsonrpc": "2.0", "method": 1, "params": "bar"}"#,
        Some(r#"{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}"#),
    ),
    (
        "batch, invalid JSON",
        r#"[
  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
  {"jsonrpc": "2.0", "method"
]"#,
        Some(r#"{"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": null}"#),
    ),
    (
        "empty array",
        "[]",
        Some(r#"{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}"#),
    ),
    (
        "invalid batch, not empty",
        "[1]",
        Some(r#"[{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}]"#),
    ),
    (
        "invalid batch",
        "[1,2,3]",
        Some(
            r#"[
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}
]"#,
        ),
    ),
    (
        "batch",
        r#"[
  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
  {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
  {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
  {"foo": "boo"},
  {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
  {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
]"#,
        Some(
            r#"[
  {"jsonrpc": "2.0", "result": 7, "id": "1"},
  {"jsonrpc": "2.0", "result": 19, "id": "2"},
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
  {"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "5"},
  {"jsonrpc": "2.0", "result": ["hello", 5], "id": "9"}
]"#,
        ),
    ),
    (
        "batch of notifications only",
        r#"[
  {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},
  {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}
]"#,
        None,
    ),
];

#[tokio::test]
async fn every_specification_example_gets_the_exact_reply() {
    let router = jrpc::demo::router();
    let mut failures = Vec::new();
    for (name, request, expected) in EXAMPLES {
        let got = reply(&router, request).await.map(canonical);
        let want = expected.map(|e| canonical(json(e)));
        if got != want {
            failures.push(format!(
                "{name}:\n  sent     {request}\n  expected {want:?}\n  got      {got:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn batch_replies_keep_request_order() {
    // Order is not required by the spec, but jrpc promises it.
    let router = jrpc::demo::router();
    let (_, request, _) = EXAMPLES.iter().find(|(name, ..)| *name == "batch").unwrap();
    let got = reply(&router, request).await.unwrap();
    let ids: Vec<String> = got
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].to_string())
        .collect();
    assert_eq!(ids, [r#""1""#, r#""2""#, "null", r#""5""#, r#""9""#]);
}
