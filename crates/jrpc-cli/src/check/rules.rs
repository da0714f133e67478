//! The rules of the JSON-RPC 2.0 specification, each a frame sent and what
//! its reply must be.

use serde_json::{json, Value};

use super::checker::{
    ids_equal, parse_reply, request, same_value, shape_problem, single_error, the_reply, Checker,
    NO_SUCH_METHOD,
};
use crate::wire::{raw_ids, Observed};

/// A rule of one frame answered by one error: rule, section, title, the
/// frame, the error code, and the ids the reply may carry.
pub(super) type ErrorRule = (
    &'static str,
    &'static str,
    &'static str,
    String,
    i64,
    &'static [&'static str],
);
pub(super) async fn rules(
    c: &mut Checker,
    method: Option<&str>,
    params: Option<Value>,
    expect: Option<Value>,
) {
    // What the server offers, for the success paths.
    let discover = c
        .send(&request("rpc.discover", None, "\"jrpc-check-discover\""), 1)
        .await
        .ok();
    let discovered: Option<Value> = discover
        .as_ref()
        .and_then(|d| d.frames().first().cloned())
        .and_then(|f| parse_reply(&f).ok())
        .and_then(|r| r.get("result").cloned())
        .filter(|r| r.get("methods").is_some_and(Value::is_array));

    // Frames that must get one error reply: (rule, section, title, frame,
    // code, the ids it may carry). An invalid request's id is echoed when
    // it can be read, or null.
    let m = NO_SUCH_METHOD;
    let errors: [ErrorRule; 12] = [
        (
            "parse-error",
            "§5.1",
            "invalid JSON → -32700 Parse error, id null",
            r#"{"jsonrpc":"2.0","method":"foobar,"params":"bar","baz]"#.into(),
            -32700,
            &["null"],
        ),
        (
            "parse-error-truncated",
            "§5.1",
            "a truncated frame → -32700 Parse error, id null",
            r#"{"jsonrpc":"2.0","method":"#.into(),
            -32700,
            &["null"],
        ),
        (
            "invalid-request",
            "§5.1",
            "\"method\" not a string → -32600 Invalid Request, id null",
            r#"{"jsonrpc":"2.0","method":1,"params":"bar"}"#.into(),
            -32600,
            &["null"],
        ),
        (
            "invalid-request-id",
            "§5.1",
            "an invalid request with a valid id → -32600, the id echoed (or null)",
            r#"{"jsonrpc":"2.0","method":1,"id":7}"#.into(),
            -32600,
            &["7", "null"],
        ),
        (
            "jsonrpc-missing",
            "§4",
            "no \"jsonrpc\" member → -32600",
            format!(r#"{{"method":"{m}","id":8}}"#),
            -32600,
            &["8", "null"],
        ),
        (
            "jsonrpc-exact",
            "§4",
            "\"jsonrpc\": \"2\" (not exactly \"2.0\") → -32600",
            format!(r#"{{"jsonrpc":"2","method":"{m}","id":9}}"#),
            -32600,
            &["9", "null"],
        ),
        (
            "jsonrpc-number",
            "§4",
            "\"jsonrpc\": 2.0 (a number) → -32600",
            format!(r#"{{"jsonrpc":2.0,"method":"{m}","id":10}}"#),
            -32600,
            &["10", "null"],
        ),
        (
            "method-missing",
            "§4",
            "no \"method\" member → -32600",
            r#"{"jsonrpc":"2.0","id":11}"#.into(),
            -32600,
            &["11", "null"],
        ),
        (
            "params-string",
            "§4.2",
            "params a string → -32600",
            format!(r#"{{"jsonrpc":"2.0","method":"{m}","params":"bar","id":12}}"#),
            -32600,
            &["12", "null"],
        ),
        (
            "params-number",
            "§4.2",
            "params a number → -32600",
            format!(r#"{{"jsonrpc":"2.0","method":"{m}","params":42,"id":13}}"#),
            -32600,
            &["13", "null"],
        ),
        (
            "method-not-found",
            "§5.1",
            "an unknown method → -32601 Method not found",
            request(m, Some(&json!([1, 2])), "\"a\""),
            -32601,
            &["\"a\""],
        ),
        (
            "batch-empty",
            "§6",
            "an empty batch [] → one -32600 reply (not an array), id null",
            "[]".into(),
            -32600,
            &["null"],
        ),
    ];
    for (rule, section, title, frame, code, ids) in errors {
        c.expect_error(rule, section, title, &frame, code, ids).await;
    }
    // §4: ids are echoed as they were sent.
    for (rule, kind, id) in [
        ("id-string", "a string", "\"id \\\"quoted\\\" ü\""),
        ("id-negative", "a negative integer", "-7"),
        ("id-fraction", "a fraction", "1.5"),
        ("id-exponent", "a number with an exponent", "1e3"),
        (
            "id-big",
            "an integer beyond 64 bits",
            "123456789012345678901234567890",
        ),
        ("id-null", "null", "null"),
    ] {
        let title = format!("id {kind} ({id}) echoed in the reply");
        c.expect_error(
            rule,
            "§4",
            &title,
            &request(NO_SUCH_METHOD, None, id),
            -32601,
            &[id],
        )
        .await;
    }
    // §4.1: notifications are never answered.
    c.expect_silence(
        "notification-unknown",
        "§4.1",
        "a notification of an unknown method gets no reply",
        &format!(r#"{{"jsonrpc":"2.0","method":"{NO_SUCH_METHOD}","params":[1]}}"#),
    )
    .await;
    // Only a method the user named: one found by discovery might do
    // something when it runs.
    match method {
        Some(name) => {
            let frame = format!(
                r#"{{"jsonrpc":"2.0","method":{},"params":["jrpc check: params no method takes",{{"x":[[[]]]}},-1]}}"#,
                json!(name)
            );
            c.expect_silence(
                "notification-failing",
                "§4.1",
                &format!("a notification of {name} with params it cannot take gets no reply"),
                &frame,
            )
            .await;
        }
        None => c.skip(
            "notification-failing",
            "§4.1",
            "a failing notification gets no reply",
            "give --method NAME to check a failing notification of it",
        ),
    }
    // §6: batches.
    for (rule, frame, count) in [
        ("batch-invalid-one", "[1]", 1usize),
        ("batch-invalid", "[1,2,3]", 3),
    ] {
        let title = format!("the batch {frame} → an array of {count} -32600 replies, id null");
        c.observe(rule, "§6", title, frame, |observed| {
            batch_of_errors(observed, count)
        })
        .await;
    }
    let mixed = format!(
        r#"[{}, {{"jsonrpc":"2.0","method":"{NO_SUCH_METHOD}","params":[7]}}, {{"foo":"boo"}}, {}, {}]"#,
        request(NO_SUCH_METHOD, Some(&json!([1, 2, 4])), "\"1\""),
        request(NO_SUCH_METHOD, Some(&json!({"name": "myself"})), "\"5\""),
        request(NO_SUCH_METHOD, None, "\"9\""),
    );
    c.observe(
        "batch-mixed",
        "§6",
        "a mixed batch → one reply per request and per invalid entry, none for the notification (matched by id, in any order)",
        &mixed,
        mixed_batch,
    )
    .await;
    c.expect_silence(
        "batch-notifications",
        "§6",
        "a batch of notifications only gets no reply",
        &format!(
            r#"[{{"jsonrpc":"2.0","method":"{NO_SUCH_METHOD}","params":[1,2,4]}},{{"jsonrpc":"2.0","method":"{NO_SUCH_METHOD}"}}]"#
        ),
    )
    .await;
    // §5: the success path.
    match method {
        Some(name) => {
            let title = match &expect {
                Some(value) => format!("{name} answers with a result equal to {value}"),
                None => format!("{name} answers with a result"),
            };
            let frame = request(name, params.as_ref(), "\"jrpc-check-success\"");
            c.observe("success", "§5", title, &frame, |observed| {
                success(observed, "\"jrpc-check-success\"", expect.as_ref())
            })
            .await;
        }
        None if discovered.is_some() => {
            let discover = discover.as_ref().expect("discovered through it");
            let result = success(discover, "\"jrpc-check-discover\"", None);
            c.record(
                "success",
                "§5",
                "rpc.discover answers with a result",
                result,
                &discover.evidence(),
            );
        }
        None => c.skip(
            "success",
            "§5",
            "a call answered with a result",
            "no method known: give --method (and --params, --expect)",
        ),
    }
    // After all that, the server (and this connection) still serve.
    let title = if c.http {
        "after the bad input, the server still answers"
    } else {
        "after the bad input, the connection still serves"
    };
    let frame = request(NO_SUCH_METHOD, None, "\"jrpc-check-after\"");
    c.observe("still-serving", "§5", title, &frame, |observed| {
        single_error(observed, -32601, &["\"jrpc-check-after\""])
    })
    .await;
}
/// An array of `count` -32600 replies with id null.
pub(super) fn batch_of_errors(observed: &Observed, count: usize) -> Result<(), String> {
    let (_, reply) = the_reply(observed)?;
    let Some(items) = reply.as_array() else {
        return Err("not an array".into());
    };
    if items.len() != count {
        return Err(format!("{} entries, not {count}", items.len()));
    }
    for item in items {
        if let Some(problem) = shape_problem(item) {
            return Err(problem);
        }
        if item["error"]["code"] != json!(-32600) || !item["id"].is_null() {
            return Err(format!("an entry {item}, not -32600 with id null"));
        }
    }
    Ok(())
}
/// The mixed batch's replies: -32601 for ids "1", "5" and "9", -32600 with
/// id null for the invalid entry, nothing else.
pub(super) fn mixed_batch(observed: &Observed) -> Result<(), String> {
    let (_, reply) = the_reply(observed)?;
    let Some(items) = reply.as_array() else {
        return Err("not an array".into());
    };
    let mut want = vec![
        ("\"1\"", -32601),
        ("\"5\"", -32601),
        ("\"9\"", -32601),
        ("null", -32600),
    ];
    for item in items {
        if let Some(problem) = shape_problem(item) {
            return Err(problem);
        }
        let id = item["id"].to_string();
        let code = item["error"]["code"].as_i64().unwrap_or(0);
        match want.iter().position(|(i, c)| *i == id && *c == code) {
            Some(at) => {
                want.remove(at);
            }
            None => return Err(format!("an unexpected entry {item}")),
        }
    }
    if !want.is_empty() {
        let missing: Vec<String> = want
            .iter()
            .map(|(id, code)| format!("{code} for id {id}"))
            .collect();
        return Err(format!("missing: {}", missing.join(", ")));
    }
    Ok(())
}
/// One reply with a result (equal to `expect` when given) and the id.
pub(super) fn success(observed: &Observed, id: &str, expect: Option<&Value>) -> Result<(), String> {
    let (frame, reply) = the_reply(observed)?;
    if let Some(problem) = shape_problem(&reply) {
        return Err(problem);
    }
    let Some(result) = reply.get("result") else {
        return Err(format!("an error: {}", reply["error"]));
    };
    let got_id = raw_ids(&frame).into_iter().next().unwrap_or_default();
    if !ids_equal(&got_id, id) {
        return Err(format!("id {got_id}, not {id}"));
    }
    match expect {
        Some(want) if !same_value(result, want) => Err(format!("the result {result}, not {want}")),
        _ => Ok(()),
    }
}
