//! End to end: spawn `jrpc serve --stdio` and talk to it over pipes.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

/// Runs `jrpc serve --stdio ARGS`, writes `input`, closes stdin, and returns
/// the reply lines (as JSON) in arrival order, stderr, and the exit status.
fn session(args: &[&str], input: &[u8]) -> (Vec<Value>, String, std::process::ExitStatus) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_jrpc"))
        .args(["serve", "--stdio"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn jrpc");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        // The server may stop reading an oversized line early; ignore EPIPE.
        let _ = stdin.write_all(&input);
    });
    let output = child.wait_with_output().expect("wait for jrpc");
    writer.join().unwrap();
    let stdout = String::from_utf8(output.stdout).expect("stdout is UTF-8");
    let replies = stdout
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
        })
        .collect();
    (
        replies,
        String::from_utf8_lossy(&output.stderr).into_owned(),
        output.status,
    )
}

fn by_id(replies: &[Value], id: Value) -> &Value {
    replies
        .iter()
        .find(|r| r.is_object() && r["id"] == id)
        .unwrap_or_else(|| panic!("no reply with id {id} in {replies:?}"))
}

#[test]
fn serves_requests_batches_and_errors_and_goes_on_after_bad_lines() {
    let input = concat!(
        r#"{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}"#,
        "\n",
        "this is not json\n",
        r#"{"jsonrpc":"2.0","method":"update","params":[1,2]}"#,
        "\n",
        "\n",
        r#"[{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":"b1"},{"jsonrpc":"2.0","method":"notify_hello","params":[7]},{"jsonrpc":"2.0","method":"foo.get","id":"b2"}]"#,
        "\r\n",
        r#"{"jsonrpc":"2.0","method":"subtract","params":{"minuend":42,"subtrahend":23},"id":2}"#,
        "\n",
        r#"{"jsonrpc":"2.0","method":"echo","params":["last line without newline"],"id":3}"#,
    );
    let (replies, stderr, status) = session(&["--log-level", "debug"], input.as_bytes());
    assert!(status.success(), "exit status {status}; stderr: {stderr}");
    assert_eq!(replies.len(), 5, "one reply per line that needs one: {replies:?}");
    assert_eq!(by_id(&replies, json!(1))["result"], 19);
    assert_eq!(by_id(&replies, json!(2))["result"], 19);
    assert_eq!(by_id(&replies, json!(3))["result"], "last line without newline");
    let parse_error = by_id(&replies, Value::Null);
    assert_eq!(parse_error["error"]["code"], -32700);
    let batch = replies.iter().find(|r| r.is_array()).expect("a batch reply");
    assert_eq!(
        batch,
        &json!([
            {"jsonrpc":"2.0","result":7,"id":"b1"},
            {"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":"b2"}
        ])
    );
}

#[test]
fn oversized_lines_get_an_error_and_the_stream_goes_on() {
    let big = format!(
        r#"{{"jsonrpc":"2.0","method":"echo","params":["{}"],"id":9}}"#,
        "x".repeat(200_000)
    );
    let input = format!(
        "{}\n{big}\n{}\n",
        r#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}"#,
        r#"{"jsonrpc":"2.0","method":"add","params":[3,4],"id":2}"#
    );
    let (replies, stderr, status) = session(&["--max-frame-len", "1000"], input.as_bytes());
    assert!(status.success(), "{stderr}");
    assert_eq!(replies.len(), 3, "{replies:?}");
    assert_eq!(by_id(&replies, json!(1))["result"], 3);
    assert_eq!(by_id(&replies, json!(2))["result"], 7);
    assert_eq!(by_id(&replies, Value::Null)["error"]["code"], -32001);
}

#[test]
fn replies_come_as_they_are_ready_and_eof_waits_for_in_flight_calls() {
    let input = concat!(
        r#"{"jsonrpc":"2.0","method":"sleep","params":[400],"id":"slow"}"#,
        "\n",
        r#"{"jsonrpc":"2.0","method":"get_data","id":"fast"}"#,
        "\n",
    );
    let (replies, stderr, status) = session(&[], input.as_bytes());
    assert!(status.success(), "{stderr}");
    assert_eq!(
        replies.len(),
        2,
        "the slow call is answered before exit: {replies:?}"
    );
    assert_eq!(
        replies[0]["id"], "fast",
        "a slow call does not hold up the next one"
    );
    assert_eq!(replies[1]["result"], 400);
}

#[test]
fn logs_never_reach_stdout() {
    let input = concat!(
        r#"{"jsonrpc":"2.0","method":"update"}"#,
        "\n",
        "garbage\n",
        r#"{"jsonrpc":"2.0","method":"nope","id":1}"#,
        "\n",
    );
    let (replies, _stderr, status) = session(&["--log-level", "trace"], input.as_bytes());
    assert!(status.success());
    // `session` already fails on any stdout line that is not JSON.
    assert_eq!(replies.len(), 2);
}

#[test]
fn interactive_request_response_over_pipes() {
    // A client that waits for each reply before sending the next request.
    let mut child = Command::new(env!("CARGO_BIN_EXE_jrpc"))
        .args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for i in 0..20 {
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","method":"add","params":[{i},{i}],"id":{i}}}"#
        )
        .unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let reply: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(reply, json!({"jsonrpc":"2.0","result":2*i,"id":i}));
    }
    drop(stdin);
    assert!(child.wait().unwrap().success(), "exits cleanly on EOF");
}

#[test]
fn json_rpc_1_0_mode_from_the_command_line() {
    let input = concat!(r#"{"method":"subtract","params":[42,23],"id":1}"#, "\n");
    let (replies, _, status) = session(&["--accept-v1"], input.as_bytes());
    assert!(status.success());
    assert_eq!(replies, vec![json!({"result":19,"error":null,"id":1})]);
}
