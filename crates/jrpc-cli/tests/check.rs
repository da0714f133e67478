//! `jrpc check`: every rule passes against `jrpc serve` over stdio, TCP,
//! HTTP, WebSocket and UDP; against a deliberately wrong server each planted
//! fault is reported, and the exit status says so.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

mod common;

use common::{text, Served, JRPC};

fn check(args: &[&str]) -> Output {
    Command::new(JRPC).arg("check").args(args).output().unwrap()
}

/// The check passes every rule: exit 0, no FAIL line, the summary line.
fn assert_all_pass(out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(out));
    assert!(!stdout.contains("FAIL"), "{}", text(out));
    assert_summary(&stdout, 0);
}

/// The last line is exactly `N passed, M failed` (`, K skipped` may
/// follow), as parsers of test results read it; the target is on the line
/// before.
fn assert_summary(stdout: &str, failed: usize) {
    let lines: Vec<&str> = stdout.lines().collect();
    let last = lines.last().copied().unwrap_or_default();
    let words: Vec<&str> = last.split(' ').collect();
    let shape_ok = matches!(
        words.as_slice(),
        [n, "passed,", m, "failed"] | [n, "passed,", m, "failed,", _, "skipped"]
            if n.parse::<usize>().is_ok() && m.parse::<usize>().is_ok()
    ) && (words.len() == 4 || words[4].parse::<usize>().is_ok());
    assert!(shape_ok, "last line {last:?}");
    assert_eq!(
        words[2].trim_end_matches(','),
        failed.to_string(),
        "last line {last:?}"
    );
    let before = lines.len().checked_sub(2).map(|i| lines[i]).unwrap_or_default();
    assert!(before.starts_with("target: "), "the line before: {before:?}");
}

#[test]
fn jrpc_serve_passes_over_every_transport() {
    let served = Served::start(&[
        "--http",
        "127.0.0.1:0",
        "--tcp",
        "127.0.0.1:0",
        "--udp",
        "127.0.0.1:0",
    ]);
    assert_eq!(served.targets.len(), 4, "{:?}", served.targets);
    for target in &served.targets {
        let out = check(&[
            target, "--method", "subtract", "--params", "[42,23]", "--expect", "19",
        ]);
        assert_all_pass(&out);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("PASS  §5.1  parse-error"), "{}", text(&out));
        assert!(
            !stdout.contains("SKIP"),
            "nothing skipped with --method: {}",
            text(&out)
        );
    }
    // Without --method, rpc.discover stands in for the success path.
    let out = check(&[&served.targets[0]]);
    assert_all_pass(&out);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("rpc.discover answers"),
        "{}",
        text(&out)
    );
}

/// A reader that goes away (`jrpc check | head`) ends the command quietly,
/// with SIGPIPE's status, not a panic.
#[test]
fn a_closed_stdout_ends_quietly() {
    let mut child = Command::new(JRPC)
        .args(["check", "--", JRPC, "serve", "--stdio"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(141), "{}", text(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{}",
        text(&out)
    );
}

#[test]
fn jrpc_serve_passes_over_stdio() {
    let out = check(&[
        "--method", "sum", "--params", "[1,2,3]", "--expect", "6.0", "--", JRPC, "serve", "--stdio",
    ]);
    assert_all_pass(&out);
}

#[test]
fn the_json_report_lists_every_rule() {
    let served = Served::start(&["--tcp", "127.0.0.1:0"]);
    let out = check(&[&served.targets[0], "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["failed"], json!(0), "{report}");
    let rules = report["rules"].as_array().unwrap();
    assert_eq!(
        report["passed"].as_u64().unwrap() as usize + report["skipped"].as_u64().unwrap() as usize,
        rules.len()
    );
    for rule in [
        "parse-error",
        "invalid-request",
        "method-not-found",
        "id-big",
        "batch-empty",
        "batch-mixed",
        "notification-unknown",
        "still-serving",
    ] {
        let found = rules
            .iter()
            .find(|r| r["rule"] == rule)
            .unwrap_or_else(|| panic!("{rule} missing"));
        assert_eq!(found["outcome"], "pass", "{found}");
        assert!(found["section"].as_str().unwrap().starts_with('§'));
    }
}

#[test]
fn a_wrong_expectation_fails_the_success_rule() {
    let served = Served::start(&["--tcp", "127.0.0.1:0"]);
    let out = check(&[
        &served.targets[0],
        "--method",
        "subtract",
        "--params",
        "[42,23]",
        "--expect",
        "20",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find(|l| l.contains(" success ")).unwrap();
    assert!(line.starts_with("FAIL"), "{stdout}");
    assert!(stdout.contains("the result 19, not 20"), "{stdout}");
    assert_summary(&stdout, 1);
}

/// A line server with planted faults: parse errors answered -32603,
/// notifications answered, numeric ids echoed as strings, an empty batch
/// answered with an empty array.
fn wrong_server() -> String {
    line_server(|line| vec![wrong_reply(line)])
}

/// A line server answering each line with `replies(line)`.
fn line_server(replies: fn(&str) -> Vec<Value>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { return };
                    for reply in replies(&line) {
                        if writer.write_all(format!("{reply}\n").as_bytes()).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    format!("tcp://{addr}")
}

fn wrong_reply(line: &str) -> Value {
    let error =
        |id: Value, code: i64| json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": "no"}});
    let Ok(message) = serde_json::from_str::<Value>(line) else {
        return error(Value::Null, -32603);
    };
    let one = |message: &Value| {
        let id = match message.get("id") {
            Some(Value::Number(n)) => Value::String(n.to_string()),
            Some(other) => other.clone(),
            None => Value::Null,
        };
        let valid = message.get("jsonrpc") == Some(&json!("2.0"))
            && message.get("method").is_some_and(Value::is_string)
            && message
                .get("params")
                .map_or(true, |p| p.is_array() || p.is_object());
        if !valid {
            return error(id, -32600);
        }
        if message["method"] == "subtract" {
            return json!({"jsonrpc": "2.0", "id": id, "result": 19});
        }
        error(id, -32601)
    };
    match &message {
        Value::Array(items) => Value::Array(items.iter().map(one).collect()),
        other => one(other),
    }
}

#[test]
fn planted_faults_are_reported() {
    let target = wrong_server();
    let out = check(&[
        &target, "--method", "subtract", "--params", "[42,23]", "--expect", "19", "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let outcome = |rule: &str| {
        report["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["rule"] == rule)
            .unwrap_or_else(|| panic!("{rule} missing: {report}"))
            .clone()
    };
    for (rule, evidence) in [
        ("parse-error", "error code Some(-32603), not -32700"),
        ("notification-unknown", "a reply to what must not be answered"),
        ("notification-failing", "a reply to what must not be answered"),
        ("id-negative", "id \"-7\", not -7"),
        ("batch-empty", "a batch reply to a single message"),
        ("batch-notifications", "a reply to what must not be answered"),
    ] {
        let found = outcome(rule);
        assert_eq!(found["outcome"], "fail", "{found}");
        assert!(
            found["evidence"].as_str().unwrap().contains(evidence),
            "{rule}: {found}"
        );
    }
    // What it does right is not blamed.
    for rule in [
        "id-string",
        "method-not-found",
        "invalid-request",
        "success",
        "still-serving",
    ] {
        assert_eq!(outcome(rule)["outcome"], "pass", "{rule}: {report}");
    }
    assert!(report["failed"].as_u64().unwrap() >= 6, "{report}");
}

/// `JRPC_URL` names the target when none is given; one given wins.
#[test]
fn jrpc_url_is_the_default_target() {
    let served = Served::start(&["--tcp", "127.0.0.1:0"]);
    let target = &served.targets[0];
    let call = |args: &[&str], url: &str| {
        Command::new(JRPC)
            .env("JRPC_URL", url)
            .args(args)
            .output()
            .unwrap()
    };
    let out = call(&["call", "subtract", "42", "23"], target);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "19");
    let out = call(&["check"], target);
    assert_all_pass(&out);
    let out = call(&["call", target, "subtract", "42", "23"], "tcp://127.0.0.1:1");
    assert!(out.status.success(), "a TARGET given wins: {}", text(&out));
    let out = call(&["call", "subtract", "42", "23"], "nonsense");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("JRPC_URL"),
        "{}",
        text(&out)
    );
}

/// `--bearer TOKEN` authenticates to a server that wants a token.
#[test]
fn bearer_tokens_are_sent() {
    let served = Served::start(&["--http", "127.0.0.1:0", "--auth-token", "s3cret"]);
    let (http, ws) = (&served.targets[0], &served.targets[1]);
    for target in [http, ws] {
        let out = Command::new(JRPC)
            .args(["call", target, "subtract", "42", "23", "--bearer", "s3cret"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{target}: {}", text(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "19");
        let out = Command::new(JRPC)
            .args(["call", target, "subtract", "42", "23", "--bearer", "wrong"])
            .output()
            .unwrap();
        assert!(
            !out.status.success(),
            "{target}: a wrong token is refused: {}",
            text(&out)
        );
    }
    let out = check(&[http, "--bearer", "s3cret"]);
    assert_all_pass(&out);
}

/// `jrpc call -v` shows the wire on stderr: frames both ways, and over
/// HTTP the request and response heads; stdout keeps only the result.
#[test]
fn verbose_calls_show_the_wire() {
    let served = Served::start(&["--http", "127.0.0.1:0", "--tcp", "127.0.0.1:0"]);
    let (http, tcp) = (&served.targets[0], &served.targets[2]);
    let out = Command::new(JRPC)
        .args(["call", "-v", http, "subtract", "42", "23"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "19");
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "> POST http://",
        "> content-type: application/json",
        r#"> {"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":"#,
        "< HTTP/1.1 200 OK",
        r#"< {"jsonrpc":"2.0","result":19,"id":"#,
    ] {
        assert!(stderr.contains(needle), "{needle:?} missing:\n{stderr}");
    }
    let out = Command::new(JRPC)
        .args(["call", tcp, "-v", "subtract", "42", "23"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"> {"jsonrpc":"2.0","method":"subtract""#),
        "{stderr}"
    );
    assert!(stderr.contains(r#"< {"jsonrpc":"2.0","result":19"#), "{stderr}");
    // Without -v, nothing of the wire.
    let out = Command::new(JRPC)
        .args(["call", tcp, "subtract", "42", "23"])
        .output()
        .unwrap();
    assert!(out.stderr.is_empty(), "{}", text(&out));
}

/// `jrpc call --envelope` prints the whole response object as it came.
#[test]
fn envelopes_are_printed_whole() {
    let served = Served::start(&["--http", "127.0.0.1:0", "--tcp", "127.0.0.1:0"]);
    for target in [&served.targets[0], &served.targets[2]] {
        let out = Command::new(JRPC)
            .args(["call", target, "subtract", "42", "23", "--envelope"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(reply, json!({"jsonrpc": "2.0", "result": 19, "id": 1}));
        let out = Command::new(JRPC)
            .args(["call", target, "no_such_method", "--envelope", "--compact"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(reply["error"]["code"], json!(-32601), "{reply}");
        assert_eq!(reply["id"], json!(1));
    }
}

/// A client and a server framing differently: the call fails at once,
/// naming the mismatch, instead of waiting for its timeout.
#[test]
fn framing_mismatches_are_named() {
    let ndjson = Served::start(&["--tcp", "127.0.0.1:0"]);
    let content_length = Served::start(&["--tcp", "127.0.0.1:0", "--framing", "content-length"]);
    for (target, framing) in [
        (&ndjson.targets[0], "content-length"),
        (&content_length.targets[0], "ndjson"),
    ] {
        let out = Command::new(JRPC)
            .args([
                "call",
                target,
                "--framing",
                framing,
                "--timeout",
                "60s",
                "subtract",
                "42",
                "23",
            ])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(3),
            "a transport failure, not a timeout: {}",
            text(&out)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("framing mismatch"),
            "{}",
            text(&out)
        );
    }
}

/// `jrpc bridge --stdio TARGET` is transparent: a conformance check through
/// it gives what the server gives directly, over TCP, HTTP and WebSocket.
#[test]
fn the_stdio_bridge_is_transparent() {
    let served = Served::start(&["--http", "127.0.0.1:0", "--tcp", "127.0.0.1:0"]);
    for target in &served.targets {
        let out = check(&[
            "--method", "subtract", "--params", "[42,23]", "--expect", "19", "--", JRPC, "bridge", "--stdio",
            target,
        ]);
        assert_all_pass(&out);
        let out = Command::new(JRPC)
            .args([
                "call", "sum", "1", "2", "3", "--", JRPC, "bridge", "--stdio", target,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{target}: {}", text(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "6");
    }
}

/// At the end of stdin the bridge waits for the replies still due.
#[test]
fn the_stdio_bridge_waits_for_replies_due() {
    let served = Served::start(&["--http", "127.0.0.1:0", "--tcp", "127.0.0.1:0"]);
    for target in [&served.targets[0], &served.targets[2]] {
        let mut child = Command::new(JRPC)
            .args(["bridge", "--stdio", target])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let input = concat!(
            r#"{"jsonrpc":"2.0","method":"sleep","params":{"ms":300},"id":1}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":2}"#,
            "\n"
        );
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let replies: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let mut ids: Vec<i64> = replies.iter().map(|r| r["id"].as_i64().unwrap()).collect();
        ids.sort();
        assert_eq!(ids, [1, 2], "{target}: {replies:?}");
    }
}

/// A conformant server with ways of its own the specification allows:
/// `-32600` always with id null, members of its own in replies, and a log
/// notification of its own before each reply. Every rule passes but id-big.
fn lenient_reply(line: &str) -> Vec<Value> {
    let log = json!({"jsonrpc": "2.0", "method": "log", "params": ["a line came"]});
    let error = |id: Value, code: i64| json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": "no", "extra": true}, "meta": 1});
    let Ok(message) = serde_json::from_str::<Value>(line) else {
        return vec![log, error(Value::Null, -32700)];
    };
    let one = |message: &Value| -> Option<Value> {
        let valid = message.get("jsonrpc") == Some(&json!("2.0"))
            && message.get("method").is_some_and(Value::is_string)
            && message
                .get("params")
                .map_or(true, |p| p.is_array() || p.is_object());
        if !valid {
            return Some(error(Value::Null, -32600));
        }
        let id = message.get("id")?.clone();
        if message["method"] == "subtract" {
            return Some(json!({"jsonrpc": "2.0", "id": id, "result": 19}));
        }
        Some(error(id, -32601))
    };
    let reply = match &message {
        Value::Array(items) if items.is_empty() => Some(error(Value::Null, -32600)),
        Value::Array(items) => {
            let replies: Vec<Value> = items.iter().filter_map(one).collect();
            (!replies.is_empty()).then_some(Value::Array(replies))
        }
        other => one(other),
    };
    std::iter::once(log).chain(reply).collect()
}

#[test]
fn what_the_specification_allows_is_not_failed() {
    let target = line_server(lenient_reply);
    let out = check(&[
        &target, "--method", "subtract", "--params", "[42,23]", "--expect", "19", "--json",
    ]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    // This server keeps ids as doubles: an id beyond 64 bits comes back
    // rounded, which the check reports (ids are echoed digit for digit);
    // nothing else fails.
    let failed: Vec<&Value> = report["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["outcome"] == "fail")
        .collect();
    assert_eq!(failed.len(), 1, "{report}");
    assert_eq!(failed[0]["rule"], "id-big", "{report}");
    assert_eq!(report["skipped"], json!(0), "{report}");
}

/// A server that is not running is one line and exit 3 (a transport
/// failure), over HTTP as over TCP, not every rule failing (issue 44).
#[test]
fn a_server_that_is_not_there_is_a_transport_failure() {
    // A port nobody listens on: bound, then closed.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for target in [
        format!("http://127.0.0.1:{port}"),
        format!("tcp://127.0.0.1:{port}"),
    ] {
        let out = check(&[&target]);
        assert_eq!(out.status.code(), Some(3), "{target}: {}", text(&out));
        assert!(out.stdout.is_empty(), "{target}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{target}: {err}");
        assert!(err.contains(&port.to_string()), "{target}: {err}");
    }
}
