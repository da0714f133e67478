//! `jrpc mcp call ... --timeout`: a call over its time ends then, with exit
//! 4, on every transport and in both eras (issue 42: over 2026-07-28 HTTP it
//! used to wait for the tool and exit 0).

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::JRPC;

/// The demo's `sleep` takes this long: far more than the timeout, so a call
/// that waited for it is told apart from one that timed out on any machine.
const SLEEP_MS: &str = "ms=10000";
const ERAS: [&str; 2] = ["2026-07-28", "2025-11-25"];

/// Runs `jrpc mcp call TARGET sleep ms=... --timeout 300ms` pinned to `era`
/// (`extra` after it: `-- COMMAND` for stdio); its exit code, how long it
/// took and its stderr.
fn call_sleep(target: &[&str], era: &str, extra: &[&str]) -> (Option<i32>, Duration, String) {
    let started = Instant::now();
    let output = Command::new(JRPC)
        .args(["mcp", "call"])
        .args(target)
        .args(["sleep", SLEEP_MS, "--timeout", "300ms", "--protocol-version", era])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code(),
        started.elapsed(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn assert_timed_out(what: &str, (code, took, err): (Option<i32>, Duration, String)) {
    assert_eq!(code, Some(4), "{what}: exit {code:?} after {took:?}: {err}");
    // Not a timing check: the tool sleeps 10 s, so anything well under that
    // is the timeout having ended the call (a loaded machine included).
    assert!(took < Duration::from_secs(8), "{what}: took {took:?}: {err}");
}

#[test]
fn a_call_over_its_timeout_exits_4_over_http_in_both_eras() {
    let (_server, url) = common::mcp_serve(&[]);
    for era in ERAS {
        assert_timed_out(&format!("http {era}"), call_sleep(&[&url], era, &[]));
    }
}

#[test]
fn a_call_over_its_timeout_exits_4_over_tcp_unix_and_websocket_in_both_eras() {
    let socket = std::env::temp_dir().join(format!("jrpc-mcp-timeout-{}.sock", std::process::id()));
    let socket = socket.to_str().unwrap().to_owned();
    for (flag, addr) in [
        ("--tcp", "127.0.0.1:0"),
        ("--unix", socket.as_str()),
        ("--ws", "127.0.0.1:0"),
    ] {
        let (_server, target) = common::mcp_serve_on(flag, addr, &[]);
        for era in ERAS {
            assert_timed_out(&format!("{flag} {era}"), call_sleep(&[&target], era, &[]));
        }
    }
}

#[test]
fn a_call_over_its_timeout_exits_4_over_stdio_in_both_eras() {
    for era in ERAS {
        let outcome = call_sleep(&[], era, &["--", JRPC, "mcp", "serve", "--stdio"]);
        assert_timed_out(&format!("stdio {era}"), outcome);
    }
}

/// The timeout bounds a call, not the client: a call within it succeeds.
#[test]
fn a_call_within_its_timeout_succeeds_over_http() {
    let (_server, url) = common::mcp_serve(&[]);
    for era in ERAS {
        let output = Command::new(JRPC)
            .args([
                "mcp",
                "call",
                &url,
                "sleep",
                "ms=50",
                "--timeout",
                "20s",
                "--protocol-version",
                era,
            ])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{era}: {output:?}");
    }
}
