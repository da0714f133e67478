//! Issue 30: `jrpc serve --batch-concurrency N` bounds how many entries of
//! one batch run at once on every transport, the connection transports
//! (TCP, WebSocket) as well as HTTP POST.
//!
//! Seen without timing anything: a batch of two long `sleep`s and a short
//! one. With at most two entries running, the short one cannot start until
//! a long one has finished, so its call-log line comes after a long one's,
//! however slow the machine. With the default bound (32) it runs beside
//! them and, 1 ms against 1.5 s, finishes first.

use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::{text, Served, JRPC};

/// The params of the `sleep` calls in the order the server's call log
/// ended them, waiting for `count` of them.
fn ended(served: &Served, count: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut ids = Vec::new();
    while ids.len() < count {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = served.log.recv_timeout(left).expect("the call log lines in time");
        if line.contains("method=sleep") {
            let params = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("params="))
                .unwrap();
            ids.push(params.trim_matches('"').to_owned());
        }
    }
    ids
}

fn batch_over(target: &str) {
    let entries: Vec<String> = [1500, 1500, 1]
        .iter()
        .enumerate()
        .map(|(id, ms)| format!(r#"{{"jsonrpc":"2.0","method":"sleep","params":[{ms}],"id":{id}}}"#))
        .collect();
    let out = Command::new(JRPC)
        .args(["call", target, "--compact", "--batch"])
        .arg(format!("[{}]", entries.join(",")))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn batch_concurrency_bounds_a_batch_on_tcp_and_websocket() {
    for (bound, short_first) in [("2", false), ("32", true)] {
        let served = Served::start(&[
            "--tcp",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            "--batch-concurrency",
            bound,
            "--log-calls=full",
        ]);
        let ws = served
            .targets
            .iter()
            .find(|t| t.starts_with("ws://"))
            .unwrap()
            .clone();
        let http = served
            .targets
            .iter()
            .find(|t| t.starts_with("http://"))
            .unwrap()
            .clone();
        let tcp = served.targets[0].clone();
        for target in [&tcp, &ws, &http] {
            batch_over(target);
            let order = ended(&served, 3);
            assert_eq!(order.iter().filter(|p| *p == "[1500]").count(), 2, "{order:?}");
            assert_eq!(
                order[0] == "[1]",
                short_first,
                "--batch-concurrency {bound} over {target}: calls ended in the order {order:?}"
            );
        }
    }
}
