//! Edge cases of the specification, table-driven against the demo router:
//! id kinds, invalid members, params kinds, nested batches, responses sent to
//! a server, reserved names, unicode, big numbers, trailing garbage, nesting
//! and size limits.

mod common;

use common::{canonical, json, reply};
use jrpc::message::codes;
use jrpc::Router;
use serde_json::Value;

enum Expect {
    /// No reply at all.
    Nothing,
    /// This reply, compared as JSON values (batches as sets).
    Json(&'static str),
    /// This reply, byte for byte.
    Text(&'static str),
    /// An error reply with this code and id (data not pinned).
    Error(i64, &'static str),
    /// A `-32602` reply for this id naming this parameter in its data.
    BadParam(&'static str, &'static str),
}
use Expect::*;

const R1: &str = r#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":1}"#;
const RNULL: &str = r#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null}"#;
const PARSE: &str = r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}"#;

const CASES: &[(&str, &str, Expect)] = &[
    // ---- id kinds ----
    (
        "string id",
        r#"{"jsonrpc":"2.0","method":"get_data","id":"abc"}"#,
        Json(r#"{"jsonrpc":"2.0","result":["hello",5],"id":"abc"}"#),
    ),
    (
        "null id is a request",
        r#"{"jsonrpc":"2.0","method":"get_data","id":null}"#,
        Text(r#"{"jsonrpc":"2.0","result":["hello",5],"id":null}"#),
    ),
    (
        "negative id",
        r#"{"jsonrpc":"2.0","method":"get_data","id":-7}"#,
        Text(r#"{"jsonrpc":"2.0","result":["hello",5],"id":-7}"#),
    ),
    (
        "fractional id echoed as written",
        r#"{"jsonrpc":"2.0","method":"get_data","id":1.50}"#,
        Text(r#"{"jsonrpc":"2.0","result":["hello",5],"id":1.50}"#),
    ),
    (
        "exponent id echoed as written",
        r#"{"jsonrpc":"2.0","method":"get_data","id":1E3}"#,
        Text(r#"{"jsonrpc":"2.0","result":["hello",5],"id":1E3}"#),
    ),
    (
        "id beyond 64 bits",
        r#"{"jsonrpc":"2.0","method":"get_data","id":123456789012345678901234567890}"#,
        Text(r#"{"jsonrpc":"2.0","result":["hello",5],"id":123456789012345678901234567890}"#),
    ),
    (
        "id beyond u64",
        r#"{"jsonrpc":"2.0","method":"get_data","id":18446744073709551616}"#,
        Text(r#"{"jsonrpc":"2.0","result":["hello",5],"id":18446744073709551616}"#),
    ),
    (
        "escaped string id",
        r#"{"jsonrpc":"2.0","method":"get_data","id":"\u00e9\"\n"}"#,
        Json(r#"{"jsonrpc":"2.0","result":["hello",5],"id":"é\"\n"}"#),
    ),
    (
        "empty string id",
        r#"{"jsonrpc":"2.0","method":"get_data","id":""}"#,
        Text(r#"{"jsonrpc":"2.0","result":["hello",5],"id":""}"#),
    ),
    (
        "boolean id",
        r#"{"jsonrpc":"2.0","method":"get_data","id":true}"#,
        Json(RNULL),
    ),
    (
        "object id",
        r#"{"jsonrpc":"2.0","method":"get_data","id":{"a":1}}"#,
        Json(RNULL),
    ),
    (
        "array id",
        r#"{"jsonrpc":"2.0","method":"get_data","id":[1]}"#,
        Json(RNULL),
    ),
    (
        "error echoes a valid id",
        r#"{"jsonrpc":"2.0","method":"nope","id":[]}"#,
        Json(RNULL),
    ),
    // ---- invalid members ----
    ("missing jsonrpc", r#"{"method":"get_data","id":1}"#, Json(R1)),
    (
        "jsonrpc 1.0",
        r#"{"jsonrpc":"1.0","method":"get_data","id":1}"#,
        Json(R1),
    ),
    (
        "jsonrpc as a number",
        r#"{"jsonrpc":2.0,"method":"get_data","id":1}"#,
        Json(R1),
    ),
    (
        "jsonrpc null",
        r#"{"jsonrpc":null,"method":"get_data","id":1}"#,
        Json(R1),
    ),
    (
        "escaped jsonrpc",
        r#"{"jsonrpc":"2\u002e0","method":"get_data","id":1}"#,
        Json(r#"{"jsonrpc":"2.0","result":["hello",5],"id":1}"#),
    ),
    ("missing method", r#"{"jsonrpc":"2.0","id":1}"#, Json(R1)),
    (
        "method a number",
        r#"{"jsonrpc":"2.0","method":1,"id":1}"#,
        Json(R1),
    ),
    (
        "method null",
        r#"{"jsonrpc":"2.0","method":null,"id":1}"#,
        Json(R1),
    ),
    (
        "escaped method name",
        r#"{"jsonrpc":"2.0","method":"get\u005fdata","id":1}"#,
        Json(r#"{"jsonrpc":"2.0","result":["hello",5],"id":1}"#),
    ),
    (
        "params a string",
        r#"{"jsonrpc":"2.0","method":"get_data","params":"bar","id":1}"#,
        Json(R1),
    ),
    (
        "params a number",
        r#"{"jsonrpc":"2.0","method":"get_data","params":3,"id":1}"#,
        Json(R1),
    ),
    (
        "params null",
        r#"{"jsonrpc":"2.0","method":"get_data","params":null,"id":1}"#,
        Json(R1),
    ),
    (
        "params true",
        r#"{"jsonrpc":"2.0","method":"get_data","params":true,"id":1}"#,
        Json(R1),
    ),
    (
        "invalid notification-shaped object still answered",
        r#"{"jsonrpc":"2.0","method":"update","params":"x"}"#,
        Json(RNULL),
    ),
    (
        "duplicate id member",
        r#"{"jsonrpc":"2.0","method":"get_data","id":1,"id":2}"#,
        Error(codes::INVALID_REQUEST, "2"),
    ),
    (
        "duplicate method member",
        r#"{"jsonrpc":"2.0","method":"get_data","method":"x","id":1}"#,
        Json(R1),
    ),
    (
        "unknown members are ignored",
        r#"{"jsonrpc":"2.0","method":"get_data","id":1,"extra":{"a":[1]}}"#,
        Json(r#"{"jsonrpc":"2.0","result":["hello",5],"id":1}"#),
    ),
    ("empty object", "{}", Json(RNULL)),
    (
        "method names are case-sensitive",
        r#"{"jsonrpc":"2.0","method":"Get_Data","id":1}"#,
        Error(codes::METHOD_NOT_FOUND, "1"),
    ),
    // ---- params kinds ----
    (
        "subtract: too few",
        r#"{"jsonrpc":"2.0","method":"subtract","params":[1],"id":1}"#,
        BadParam("1", "subtrahend"),
    ),
    (
        "subtract: too many",
        r#"{"jsonrpc":"2.0","method":"subtract","params":[1,2,3],"id":1}"#,
        Error(codes::INVALID_PARAMS, "1"),
    ),
    (
        "subtract: empty",
        r#"{"jsonrpc":"2.0","method":"subtract","params":[],"id":1}"#,
        BadParam("1", "minuend"),
    ),
    (
        "subtract: omitted",
        r#"{"jsonrpc":"2.0","method":"subtract","id":1}"#,
        BadParam("1", "minuend"),
    ),
    (
        "subtract: wrong type",
        r#"{"jsonrpc":"2.0","method":"subtract","params":["a",1],"id":1}"#,
        BadParam("1", "minuend"),
    ),
    (
        "subtract: null operand",
        r#"{"jsonrpc":"2.0","method":"subtract","params":[1,null],"id":1}"#,
        BadParam("1", "subtrahend"),
    ),
    (
        "subtract: missing name",
        r#"{"jsonrpc":"2.0","method":"subtract","params":{"minuend":1},"id":1}"#,
        BadParam("1", "subtrahend"),
    ),
    (
        "subtract: unknown name",
        r#"{"jsonrpc":"2.0","method":"subtract","params":{"minuend":1,"subtrahend":2,"x":3},"id":1}"#,
        BadParam("1", "x"),
    ),
    (
        "subtract: named wrong type",
        r#"{"jsonrpc":"2.0","method":"subtract","params":{"minuend":1,"subtrahend":"2"},"id":1}"#,
        BadParam("1", "subtrahend"),
    ),
    (
        "subtract: floats",
        r#"{"jsonrpc":"2.0","method":"subtract","params":[1.5,0.25],"id":1}"#,
        Json(r#"{"jsonrpc":"2.0","result":1.25,"id":1}"#),
    ),
    (
        "subtract: int and float",
        r#"{"jsonrpc":"2.0","method":"subtract","params":[3,0.5],"id":1}"#,
        Json(r#"{"jsonrpc":"2.0","result":2.5,"id":1}"#),
    ),
    (
        "subtract: negative exponent",
        r#"{"jsonrpc":"2.0","method":"subtract","params":[1e2,1],"id":1}"#,
        Json(r#"{"jsonrpc":"2.0","result":99.0,"id":1}"#),
    ),
    (
        "get_data: empty array",
        r#"{"jsonrpc":"2.0","method":"get_data","params":[],"id":1}"#,
        Json(r#"{"jsonrpc":"2.0","result":["hello",5],"id":1}"#),
    ),
    (
        "get_data: empty object",
        r#"{"jsonrpc":"2.0","method":"get_data","params":{},"id":1}"#,
        Json(r#"{"jsonrpc":"2.0","result":["hello",5],"id":1}"#),
    ),
    (
        "get_data: unexpected params",
        r#"{"jsonrpc":"2.0","method":"get_data","params":[1],"id":1}"#,
        Error(codes::INVALID_PARAMS, "1"),
    ),
    (
        "sum: none",
        r#"{"jsonrpc":"2.0","method":"sum","params":[],"id":1}"#,
        Json(r#"{"jsonrpc":"2.0","result":0,"id":1}"#),
    ),
    (
        "sum: floats",
        r#"{"jsonrpc":"2.0","method":"sum","params":[1.5,2,0.5],"id":1}"#,
        Json(r#"{"jsonrpc":"2.0","result":4.0,"id":1}"#),
    ),
    (
        "sum: named is refused",
        r#"{"jsonrpc":"2.0","method":"sum","params":{"a":1},"id":1}"#,
        Error(codes::INVALID_PARAMS, "1"),
    ),
    (
        "sum: a string",
        r#"{"jsonrpc":"2.0","method":"sum","params":[1,"x"],"id":1}"#,
        Error(codes::INVALID_PARAMS, "1"),
    ),
    (
        "add: named",
        r#"{"jsonrpc":"2.0","method":"add","params":{"a":1,"b":2},"id":1}"#,
        Json(r#"{"jsonrpc":"2.0","result":3,"id":1}"#),
    ),
    (
        "add: positional",
        r#"{"jsonrpc":"2.0","method":"add","params":[1,-2],"id":1}"#,
        Json(r#"{"jsonrpc":"2.0","result":-1,"id":1}"#),
    ),
    (
        "echo: value unchanged",
        r#"{"jsonrpc":"2.0","method":"echo","params":[{"b":[1.10,true,null],"a":"x"}],"id":1}"#,
        Text(r#"{"jsonrpc":"2.0","result":{"b":[1.10,true,null],"a":"x"},"id":1}"#),
    ),
    (
        "echo: named",
        r#"{"jsonrpc":"2.0","method":"echo","params":{"value":null},"id":1}"#,
        Text(r#"{"jsonrpc":"2.0","result":null,"id":1}"#),
    ),
    (
        "echo: nothing to echo",
        r#"{"jsonrpc":"2.0","method":"echo","params":[],"id":1}"#,
        BadParam("1", "value"),
    ),
    (
        "echo: two values",
        r#"{"jsonrpc":"2.0","method":"echo","params":[1,2],"id":1}"#,
        Error(codes::INVALID_PARAMS, "1"),
    ),
    (
        "sleep: zero",
        r#"{"jsonrpc":"2.0","method":"sleep","params":[0],"id":1}"#,
        Json(r#"{"jsonrpc":"2.0","result":0,"id":1}"#),
    ),
    (
        "sleep: named",
        r#"{"jsonrpc":"2.0","method":"sleep","params":{"ms":1},"id":1}"#,
        Json(r#"{"jsonrpc":"2.0","result":1,"id":1}"#),
    ),
    (
        "sleep: negative",
        r#"{"jsonrpc":"2.0","method":"sleep","params":[-1],"id":1}"#,
        BadParam("1", "ms"),
    ),
    (
        "sleep: integral float",
        r#"{"jsonrpc":"2.0","method":"sleep","params":[1e1],"id":1}"#,
        Json(r#"{"jsonrpc":"2.0","result":10,"id":1}"#),
    ),
    (
        "sleep: fraction",
        r#"{"jsonrpc":"2.0","method":"sleep","params":[0.5],"id":1}"#,
        BadParam("1", "ms"),
    ),
    (
        "sleep: too long",
        r#"{"jsonrpc":"2.0","method":"sleep","params":[99999999999],"id":1}"#,
        Error(codes::INVALID_PARAMS, "1"),
    ),
    // ---- notifications never get a reply ----
    (
        "notification with bad params",
        r#"{"jsonrpc":"2.0","method":"subtract","params":["x"]}"#,
        Nothing,
    ),
    (
        "notification to a method",
        r#"{"jsonrpc":"2.0","method":"subtract","params":[1,2]}"#,
        Nothing,
    ),
    (
        "notification to rpc.",
        r#"{"jsonrpc":"2.0","method":"rpc.discover"}"#,
        Nothing,
    ),
    (
        "request to a notification handler",
        r#"{"jsonrpc":"2.0","method":"update","params":[1],"id":1}"#,
        Text(r#"{"jsonrpc":"2.0","result":null,"id":1}"#),
    ),
    // ---- nested batches ----
    (
        "batch holding an empty batch",
        "[[]]",
        Json(r#"[{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null}]"#),
    ),
    (
        "batch holding a batch",
        r#"[[{"jsonrpc":"2.0","method":"get_data","id":1}]]"#,
        Json(r#"[{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null}]"#),
    ),
    (
        "batch mixing",
        r#"[{"jsonrpc":"2.0","method":"get_data","id":1},[1],null,"x"]"#,
        Json(
            r#"[{"jsonrpc":"2.0","result":["hello",5],"id":1},{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null},{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null},{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null}]"#,
        ),
    ),
    (
        "batch with one request among notifications",
        r#"[{"jsonrpc":"2.0","method":"update"},{"jsonrpc":"2.0","method":"get_data","id":7}]"#,
        Json(r#"[{"jsonrpc":"2.0","result":["hello",5],"id":7}]"#),
    ),
    (
        "batch with invalid JSON deep inside",
        r#"[{"jsonrpc":"2.0","method":"get_data","id":1},{"a":[1,}]"#,
        Json(PARSE),
    ),
    // ---- responses sent to a server ----
    (
        "result response",
        r#"{"jsonrpc":"2.0","result":1,"id":1}"#,
        Json(R1),
    ),
    (
        "error response",
        r#"{"jsonrpc":"2.0","error":{"code":-1,"message":"x"},"id":1}"#,
        Json(R1),
    ),
    (
        "response with both members",
        r#"{"jsonrpc":"2.0","result":1,"error":{"code":-1,"message":"x"},"id":1}"#,
        Json(R1),
    ),
    (
        "response without id",
        r#"{"jsonrpc":"2.0","result":1}"#,
        Json(RNULL),
    ),
    (
        "response in a batch",
        r#"[{"jsonrpc":"2.0","result":1,"id":1},{"jsonrpc":"2.0","method":"get_data","id":2}]"#,
        Json(
            r#"[{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":1},{"jsonrpc":"2.0","result":["hello",5],"id":2}]"#,
        ),
    ),
    // ---- reserved names ----
    (
        "rpc. method",
        r#"{"jsonrpc":"2.0","method":"rpc.discover","id":1}"#,
        Error(codes::METHOD_NOT_FOUND, "1"),
    ),
    // ---- unicode ----
    (
        "unicode round trip",
        r#"{"jsonrpc":"2.0","method":"echo","params":["héllo ☃ 😀 \u2028"],"id":"ü"}"#,
        Json(r#"{"jsonrpc":"2.0","result":"héllo ☃ 😀 \u2028","id":"ü"}"#),
    ),
    (
        "unicode method name",
        r#"{"jsonrpc":"2.0","method":"méthode","id":1}"#,
        Error(codes::METHOD_NOT_FOUND, "1"),
    ),
    (
        "surrogate pair escape",
        r#"{"jsonrpc":"2.0","method":"echo","params":["\ud83d\ude00"],"id":1}"#,
        Json(r#"{"jsonrpc":"2.0","result":"😀","id":1}"#),
    ),
    // ---- big numbers ----
    (
        "subtract beyond u64",
        r#"{"jsonrpc":"2.0","method":"subtract","params":[18446744073709551616,1],"id":1}"#,
        Text(r#"{"jsonrpc":"2.0","result":18446744073709551615,"id":1}"#),
    ),
    (
        "add past i64",
        r#"{"jsonrpc":"2.0","method":"add","params":[9223372036854775807,1],"id":1}"#,
        Text(r#"{"jsonrpc":"2.0","result":9223372036854775808,"id":1}"#),
    ),
    (
        "subtract below i64",
        r#"{"jsonrpc":"2.0","method":"subtract","params":[-9223372036854775808,1],"id":1}"#,
        Text(r#"{"jsonrpc":"2.0","result":-9223372036854775809,"id":1}"#),
    ),
    (
        "number out of range",
        r#"{"jsonrpc":"2.0","method":"subtract","params":[1e400,1],"id":1}"#,
        BadParam("1", "minuend"),
    ),
    (
        "echo keeps big numbers",
        r#"{"jsonrpc":"2.0","method":"echo","params":[123456789012345678901234567890.5e-3],"id":1}"#,
        Text(r#"{"jsonrpc":"2.0","result":123456789012345678901234567890.5e-3,"id":1}"#),
    ),
    // ---- not JSON, trailing garbage ----
    (
        "trailing garbage",
        r#"{"jsonrpc":"2.0","method":"get_data","id":1} x"#,
        Json(PARSE),
    ),
    (
        "two values",
        r#"{"jsonrpc":"2.0","method":"get_data","id":1}{"jsonrpc":"2.0","method":"get_data","id":2}"#,
        Json(PARSE),
    ),
    (
        "surrounding whitespace is fine",
        " \t\r\n{\"jsonrpc\":\"2.0\",\"method\":\"get_data\",\"id\":1}\n ",
        Json(r#"{"jsonrpc":"2.0","result":["hello",5],"id":1}"#),
    ),
    ("empty frame", "", Json(PARSE)),
    ("whitespace only", "  \n", Json(PARSE)),
    (
        "truncated",
        r#"{"jsonrpc":"2.0","method":"get_data","#,
        Json(PARSE),
    ),
    (
        "single quotes",
        "{'jsonrpc':'2.0','method':'get_data','id':1}",
        Json(PARSE),
    ),
    (
        "trailing comma",
        r#"{"jsonrpc":"2.0","method":"get_data","id":1,}"#,
        Json(PARSE),
    ),
    (
        "NaN",
        r#"{"jsonrpc":"2.0","method":"echo","params":[NaN],"id":1}"#,
        Json(PARSE),
    ),
    (
        "raw control character in a string",
        "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[\"a\u{1}b\"],\"id\":1}",
        Json(PARSE),
    ),
    (
        "bad escape",
        r#"{"jsonrpc":"2.0","method":"echo","params":["\x"],"id":1}"#,
        Json(PARSE),
    ),
    ("null frame", "null", Json(RNULL)),
    ("string frame", r#""hello""#, Json(RNULL)),
    ("number frame", "42", Json(RNULL)),
    // ---- nesting ----
];

#[tokio::test]
async fn edge_cases() {
    let router = jrpc::demo::router();
    let mut failures = Vec::new();
    for (name, input, expect) in CASES {
        if let Err(why) = check(&router, input, expect).await {
            failures.push(format!("{name}: {why}\n  sent {input}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
}

async fn check(router: &Router, input: &str, expect: &Expect) -> Result<(), String> {
    let raw = router.handle(input.as_bytes()).await;
    let text = raw
        .as_ref()
        .map(|b| String::from_utf8(b.to_vec()).expect("replies are UTF-8"));
    let value: Option<Value> = text
        .as_deref()
        .map(|t| serde_json::from_str(t).expect("replies are JSON"));
    let fail = || Err(format!("got {}", text.as_deref().unwrap_or("no reply")));
    match expect {
        Nothing if value.is_none() => Ok(()),
        Json(want) if value.clone().map(canonical) == Some(canonical(json(want))) => Ok(()),
        Text(want) if text.as_deref() == Some(*want) => Ok(()),
        Error(code, id) => match &value {
            Some(v) if v["error"]["code"] == *code && v["id"] == json(id) && v.get("result").is_none() => {
                Ok(())
            }
            _ => fail(),
        },
        BadParam(id, param) => match &value {
            Some(v)
                if v["error"]["code"] == codes::INVALID_PARAMS
                    && v["id"] == json(id)
                    && v["error"]["data"]["param"] == *param =>
            {
                Ok(())
            }
            _ => fail(),
        },
        _ => fail(),
    }
}

#[tokio::test]
async fn invalid_utf8_is_a_parse_error() {
    let router = jrpc::demo::router();
    let mut frame = br#"{"jsonrpc":"2.0","method":"echo","params":[""#.to_vec();
    frame.push(0xff);
    frame.extend_from_slice(br#""],"id":1}"#);
    let got = router.handle(&frame).await.unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&got).unwrap(), json(PARSE));
    // A leading byte order mark is ignored, as RFC 8259 allows.
    let bom = b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"method\":\"get_data\",\"id\":1}";
    let got = router.handle(bom).await.unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&got).unwrap()["result"],
        json(r#"["hello",5]"#)
    );
}

#[tokio::test]
async fn nesting_limit_counts_every_level() {
    let router = jrpc::demo::router();
    // The frame object is level 1 and params level 2, so 126 more fit in 128.
    let echo = |depth: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"echo","params":[{}{}],"id":1}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        )
    };
    let ok = reply(&router, &echo(126)).await.unwrap();
    assert!(ok.get("result").is_some(), "{ok}");
    let deep = reply(&router, &echo(127)).await.unwrap();
    assert_eq!(deep["error"]["code"], codes::NESTING_TOO_DEEP);
    let tight = jrpc::demo::router().max_depth(4);
    assert_eq!(reply(&tight, &echo(2)).await.unwrap()["result"], json("[[]]"));
    assert_eq!(
        reply(&tight, &echo(3)).await.unwrap()["error"]["code"],
        codes::NESTING_TOO_DEEP
    );
    // Far beyond any parser's recursion: still a clean error, no stack overflow.
    let huge = reply(&router, &echo(100_000)).await.unwrap();
    assert_eq!(huge["error"]["code"], codes::NESTING_TOO_DEEP);
    assert_eq!(huge["id"], Value::Null);
}

#[tokio::test]
async fn frame_and_batch_limits() {
    let router = jrpc::demo::router().max_frame_len(100).max_batch_len(3);
    let request = r#"{"jsonrpc":"2.0","method":"get_data","id":1}"#;

    let big = format!(
        r#"{{"jsonrpc":"2.0","method":"echo","params":["{}"],"id":1}}"#,
        "x".repeat(60)
    );
    assert!(big.len() > 100);
    let got = reply(&router, &big).await.unwrap();
    assert_eq!(got["error"]["code"], codes::FRAME_TOO_LARGE, "{got}");
    assert_eq!(got["id"], Value::Null);

    let three = format!("[{request},{request},{request}]");
    let router = router.max_frame_len(10_000);
    assert_eq!(reply(&router, &three).await.unwrap().as_array().unwrap().len(), 3);
    let four = format!("[{request},{request},{request},{request}]");
    let got = reply(&router, &four).await.unwrap();
    assert!(got.is_object(), "one error object for the whole batch: {got}");
    assert_eq!(got["error"]["code"], codes::BATCH_TOO_LARGE);
    assert_eq!(got["id"], Value::Null);

    // A batch far beyond the limit is refused without parsing it all.
    let many = format!("[{}1]", "1,".repeat(1_000_000));
    let got = router
        .max_frame_len(usize::MAX)
        .handle(many.as_bytes())
        .await
        .unwrap();
    assert!(std::str::from_utf8(&got).unwrap().contains("-32002"));
}
