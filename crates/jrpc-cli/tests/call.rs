//! End to end: `jrpc call` against `jrpc serve` over TCP, a Unix socket and
//! a spawned child, as a newcomer would use them.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

use serde_json::{json, Value};

const JRPC: &str = env!("CARGO_BIN_EXE_jrpc");

/// A `jrpc serve` with listeners, stopped (gracefully, by SIGTERM) on drop.
struct Served {
    child: Child,
    targets: Vec<String>,
}

impl Served {
    fn start(args: &[&str]) -> Served {
        let mut child = Command::new(JRPC)
            .arg("serve")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let listeners = args
            .iter()
            .filter(|a| matches!(**a, "--tcp" | "--unix" | "--udp"))
            .count();
        let mut targets = Vec::new();
        while targets.len() < listeners {
            let mut line = String::new();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "jrpc serve exited early"
            );
            if let Some(rest) = line.strip_prefix("jrpc: listening on ") {
                targets.push(rest.split_whitespace().next().unwrap().to_owned());
            }
        }
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || for _ in stderr.lines() {});
        Served { child, targets }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

fn call(args: &[&str]) -> Output {
    Command::new(JRPC).arg("call").args(args).output().unwrap()
}

fn stdout_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "status {}; stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn calls_over_tcp_and_unix_sockets() {
    let socket = std::env::temp_dir().join(format!("jrpc-cli-{}.sock", std::process::id()));
    let socket = socket.to_str().unwrap();
    let served = Served::start(&["--tcp", "127.0.0.1:0", "--unix", socket]);
    for target in &served.targets {
        let out = call(&[target, "subtract", "42", "23"]);
        assert_eq!(stdout_json(&out), json!(19));
        let out = call(&[
            target,
            "subtract",
            "--named",
            "minuend=42",
            "--named",
            "subtrahend=23",
        ]);
        assert_eq!(stdout_json(&out), json!(19));
        let out = call(&[target, "echo", "hello world"]);
        assert_eq!(stdout_json(&out), json!("hello world"));
        let out = call(&[target, "add", "-5", "-7", "--compact"]);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "-12\n");
        let out = call(&[
            target,
            "echo",
            "--raw",
            r#"{"value":{"big":123456789012345678901234567890}}"#,
            "--compact",
        ]);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "{\"big\":123456789012345678901234567890}\n"
        );
        let out = call(&[target, "get_data"]);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "[\n  \"hello\",\n  5\n]\n");
        let out = call(&[target, "update", "1", "2", "--notify"]);
        assert!(out.status.success() && out.stdout.is_empty());
    }
}

#[test]
fn calls_a_spawned_child() {
    let out = call(&["subtract", "42", "23", "--", JRPC, "serve", "--stdio"]);
    assert_eq!(stdout_json(&out), json!(19));
    let out = call(&["sum", "1", "2", "3.5", "--", JRPC, "serve", "--stdio"]);
    assert_eq!(stdout_json(&out), json!(6.5));
    let out = call(&[
        "--framing",
        "content-length",
        "get_data",
        "--",
        JRPC,
        "serve",
        "--stdio",
        "--framing",
        "content-length",
    ]);
    assert_eq!(stdout_json(&out), json!(["hello", 5]));
}

#[test]
fn exit_codes_tell_failures_apart() {
    let served = Served::start(&["--tcp", "127.0.0.1:0"]);
    let target = served.targets[0].as_str();

    let out = call(&[target, "foobar"]);
    assert_eq!(out.status.code(), Some(1), "rpc error");
    let error: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(error, json!({"code": -32601, "message": "Method not found"}));
    assert!(out.stdout.is_empty());

    let out = call(&[target, "sleep", "1000", "--timeout", "200ms"]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "timeout: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = call(&["tcp://127.0.0.1:1", "subtract", "1", "2"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "transport: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = call(&["sleep", "5000", "--", "sh", "-c", "read line; exit 7"]);
    assert_eq!(out.status.code(), Some(3), "child died");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("exit status: 7"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = call(&["subtract", "1"]);
    assert_eq!(out.status.code(), Some(2), "usage: no target");
    let out = call(&["ftp://x", "subtract"]);
    assert_eq!(out.status.code(), Some(2), "usage: bad target");
}

#[test]
fn batches_from_stdin_keep_the_callers_ids() {
    let served = Served::start(&["--tcp", "127.0.0.1:0"]);
    let mut child = Command::new(JRPC)
        .args(["call", &served.targets[0], "--batch", "-", "--compact"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let batch = r#"[{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":"1"},{"jsonrpc":"2.0","method":"notify_hello","params":[7]},{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":"2"},{"jsonrpc":"2.0","method":"foo.get","params":{"name":"myself"},"id":"5"}]"#;
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), batch.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "one entry failed");
    let replies: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        replies,
        json!([
            {"jsonrpc":"2.0","result":7,"id":"1"},
            {"jsonrpc":"2.0","result":19,"id":"2"},
            {"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":"5"}
        ])
    );
}

#[test]
fn serve_shuts_down_gracefully_on_sigterm() {
    let served = Served::start(&["--tcp", "127.0.0.1:0"]);
    let target = served.targets[0].clone();
    let slow = std::thread::spawn(move || call(&[&target, "sleep", "500"]));
    std::thread::sleep(std::time::Duration::from_millis(200));
    drop(served); // SIGTERM, then wait for exit
    let out = slow.join().unwrap();
    assert_eq!(stdout_json(&out), json!(500), "the call in flight was answered");
}

/// A server whose stderr reader has gone (`jrpc serve 2>&1 | head -1`)
/// keeps serving, and still shuts down cleanly: printing its notes must
/// not kill it (CI once saw the suggested call refused because the
/// server had died printing the line after it).
#[test]
fn serve_keeps_serving_after_its_stderr_closes() {
    let mut child = Command::new(JRPC)
        .args(["serve", "--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let line = BufReader::new(child.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("jrpc: listening on tcp"))
        .expect("a listening line");
    // The reader is dropped here: the pipe's read end is closed.
    let target = line["jrpc: listening on ".len()..]
        .split_whitespace()
        .next()
        .unwrap();
    for _ in 0..3 {
        assert_eq!(stdout_json(&call(&[target, "add", "1", "2"])), json!(3));
    }
    // Shutting down prints a note to the closed stderr.
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap();
    assert!(status.success(), "jrpc serve ended with {status}");
}

#[test]
fn negative_numbers_are_params_not_flags() {
    let out = call(&["echo", "-2.5e-3", "--compact", "--", JRPC, "serve", "--stdio"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "-2.5e-3\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = call(&["add", "-1e2", "-5", "--", JRPC, "serve", "--stdio"]);
    assert_eq!(stdout_json(&out), json!(-105.0));
}

#[test]
fn bench_reports_requests_latency_and_errors() {
    let served = Served::start(&["--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0"]);
    for target in &served.targets {
        let out = Command::new(JRPC)
            .args([
                "bench",
                target,
                "add",
                "1",
                "2",
                "-c",
                "2",
                "-m",
                "4",
                "--requests",
                "300",
                "--json",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["requests"], 300, "{report}");
        assert_eq!(report["ok"], 300);
        assert!(report["requests_per_second"].as_f64().unwrap() > 0.0);
        assert!(
            report["latency_us"]["p99"].as_u64().unwrap() >= report["latency_us"]["p50"].as_u64().unwrap()
        );
    }
    // Errors are counted by kind, not fatal, once the first call has worked.
    let out = Command::new(JRPC)
        .args([
            "bench",
            "sleep",
            "200",
            "--timeout",
            "50ms",
            "--requests",
            "3",
            "--json",
            "--",
            JRPC,
            "serve",
            "--stdio",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "the first call times out: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(JRPC)
        .args([
            "bench",
            "add",
            "1",
            "2",
            "--batch",
            "10",
            "--requests",
            "20",
            "--json",
            "--",
            JRPC,
            "serve",
            "--stdio",
        ])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ratio =
        report["items_per_second"].as_f64().unwrap() / report["requests_per_second"].as_f64().unwrap();
    assert!(
        (ratio - 10.0).abs() < 1e-9,
        "a request is a batch of 10 items: {report}"
    );
    assert_eq!(report["requests"], 20);
}

#[test]
fn bench_auto_batch_counts_calls_and_refuses_bad_settings() {
    let served = Served::start(&["--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0"]);
    for target in &served.targets {
        let words = "add 1 2 -c 1 -m 16 --requests 400 --auto-batch 8/2ms --json";
        let out = Command::new(JRPC)
            .args(["bench", target])
            .args(words.split(' '))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["requests"], 400, "calls, not frames: {report}");
        assert_eq!(report["ok"], 400);
        assert_eq!(report["auto_batch"]["max_entries"], 8);
        assert_eq!(report["items_per_second"], report["requests_per_second"]);
    }
    for bad in [
        &["--auto-batch", "0"][..],
        &["--auto-batch", "8/soon"],
        &["--auto-batch", "8", "--batch", "2"],
    ] {
        let out = Command::new(JRPC)
            .args(["bench", &served.targets[0], "add", "1", "2", "--requests", "1"])
            .args(bad)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{bad:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn retries_wait_out_a_rate_limit_and_retry_on_needs_retries() {
    // One call a second, bursts of two: the third call at once is refused
    // with -32005 and the time to wait.
    let served = Served::start(&["--tcp", "127.0.0.1:0", "--rate-limit", "1"]);
    let target = &served.targets[0];
    for _ in 0..2 {
        assert!(call(&[target, "add", "1", "2"]).status.success());
    }
    let refused = call(&[target, "add", "1", "2"]);
    assert_eq!(
        refused.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(String::from_utf8_lossy(&refused.stderr).contains("-32005"));
    let patient = call(&[target, "add", "1", "2", "--retries", "5"]);
    assert!(
        patient.status.success(),
        "{}",
        String::from_utf8_lossy(&patient.stderr)
    );
    assert_eq!(stdout_json(&patient), json!(3));

    let out = call(&[target, "add", "1", "2", "--retry-on", "-32099,-32098"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--retries"));
}

/// A stdio server (Python) that answers each request with its params, but
/// never the requests whose numbers (1 for the first) it is given: a server
/// host that died with them.
const FORGETFUL: &str = r#"
import json, sys
forgotten = {int(n) for n in sys.argv[1:]}
seen = 0
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    seen += 1
    if seen not in forgotten:
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": message.get("params")}), flush=True)
"#;

#[test]
fn idempotent_calls_are_sent_again_after_a_timed_out_attempt() {
    fn forgetful<'a>(forgotten: &[&'a str]) -> Vec<&'a str> {
        let mut words = vec!["--", "python3", "-c", FORGETFUL];
        words.extend(forgotten);
        words
    }
    let mut args = vec![
        "echo",
        "7",
        "--timeout",
        "20s",
        "--idempotent",
        "--retries",
        "2",
        "--attempt-timeout",
        "300ms",
    ];
    args.extend(forgetful(&["1"]));
    assert_eq!(stdout_json(&call(&args)), json!([7]));

    // By default the attempts grow, together the timeout: the first one
    // of three in 3 s waits 3/7 s.
    let mut args = vec!["echo", "7", "--timeout", "3s", "--idempotent", "--retries", "2"];
    args.extend(forgetful(&["1"]));
    assert_eq!(stdout_json(&call(&args)), json!([7]));

    // Not idempotent: the one attempt takes the whole timeout.
    let mut args = vec!["echo", "7", "--timeout", "1s", "--retries", "2"];
    args.extend(forgetful(&["1"]));
    let out = call(&args);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // --idempotent needs --retries; --attempt-timeout needs --idempotent.
    for flags in [
        &["--idempotent"][..],
        &["--retries", "2", "--attempt-timeout", "1s"],
    ] {
        let mut args = vec!["echo", "7"];
        args.extend(flags);
        args.extend(forgetful(&[]));
        let out = call(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{flags:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // jrpc bench counts the calls tried again apart from errors; the first
    // request is its check, the 3rd and 6th are the run's 2nd and 5th.
    let mut args = vec![
        "bench",
        "echo",
        "7",
        "--requests",
        "20",
        "--json",
        "--timeout",
        "20s",
        "--idempotent",
        "--retries",
        "2",
        "--attempt-timeout",
        "300ms",
        "--mark",
        "100ms,1h",
    ];
    args.extend(forgetful(&["3", "6"]));
    let out = Command::new(JRPC).args(&args).output().unwrap();
    let report = stdout_json(&out);
    assert_eq!(
        (report["requests"].as_u64(), report["ok"].as_u64()),
        (Some(20), Some(20)),
        "{report}"
    );
    assert_eq!(report["retried"], 2, "{report}");
    assert_eq!(report["retries"], 2, "{report}");
    let phases = report["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 3, "{report}");
    let counted: u64 = phases.iter().map(|p| p["requests"].as_u64().unwrap()).sum();
    assert_eq!(counted, 20, "{report}");
    let retried: u64 = report["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["retried"].as_u64().unwrap())
        .sum();
    assert_eq!(retried, 2, "{report}");
}

#[test]
fn calls_over_udp() {
    let served = Served::start(&["--udp", "127.0.0.1:0"]);
    let target = &served.targets[0];
    assert!(target.starts_with("udp://127.0.0.1:"), "{target}");
    let out = call(&[target, "subtract", "42", "23"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout_json(&out), json!(19));
    let out = call(&[
        target,
        "--batch",
        r#"[{"jsonrpc":"2.0","method":"sum","params":[1,2,3],"id":1},{"jsonrpc":"2.0","method":"update","params":[1]}]"#,
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout_json(&out)[0]["result"], json!(6));
}

/// Issue 33: the `jrpc call` line `jrpc serve` suggests runs as printed,
/// from where the server was started — after `cargo run` there is no
/// `jrpc` on the PATH, so it names the binary by its path.
#[test]
fn the_suggested_call_runs_as_printed() {
    let mut child = std::process::Command::new(JRPC)
        .args(["serve", "--http", "127.0.0.1:0"])
        .env("PATH", "/usr/bin:/bin")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = stderr
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.trim_start().contains(" call http"))
        .expect("a suggested call");
    std::thread::spawn(move || for _ in stderr {});
    let out = std::process::Command::new("sh")
        .args(["-c", line.trim()])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        out.status.success(),
        "{line}\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stdout).trim().is_empty(), "{line}");
}

/// Issue 33: one rule for PARAM words in `jrpc call`, `jrpc connect` and
/// `jrpc mcp`: NAME=VALUE is a named param; a string with `=` is written
/// as JSON; the two kinds do not mix.
#[test]
fn name_value_words_are_named_params() {
    let call = |words: &[&str]| {
        Command::new(JRPC)
            .arg("call")
            .args(words)
            .args(["--", JRPC, "serve", "--stdio"])
            .output()
            .unwrap()
    };
    let named = call(&["subtract", "minuend=42", "subtrahend=23"]);
    assert_eq!(
        String::from_utf8_lossy(&named.stdout).trim(),
        "19",
        "{}",
        String::from_utf8_lossy(&named.stderr)
    );
    let literal = call(&["echo", r#""a=b""#]);
    assert_eq!(String::from_utf8_lossy(&literal.stdout).trim(), r#""a=b""#);
    let mixed = call(&["subtract", "42", "subtrahend=23"]);
    assert_eq!(mixed.status.code(), Some(2));
    let said = String::from_utf8_lossy(&mixed.stderr);
    assert!(
        said.contains("named param") && said.contains(r#"'"subtrahend=23"'"#),
        "{said}"
    );
}
