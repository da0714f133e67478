//! One rule for arguments (issue 44): a word that starts like JSON and is
//! not JSON is refused, a line of `jrpc connect` that starts like JSON is a
//! frame, `jrpc mcp` takes a bare HOST:PORT as `jrpc call` does, and
//! `jrpc mcp serve` refuses OAuth flags where there are no tokens.

mod common;

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use common::{text, Served, JRPC};

fn jrpc(args: &[&str]) -> Output {
    Command::new(JRPC)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_word_that_starts_like_json_and_is_not_is_refused() {
    let served = Served::start(&["--tcp", "127.0.0.1:0"]);
    let target = &served.targets[0];
    for broken in [r#"{"a": [1, 2.50"#, "[1, 2", r#"  {"a" 1}"#] {
        let out = jrpc(&["call", target, "echo", broken]);
        assert_eq!(out.status.code(), Some(2), "{broken}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("starts like JSON but is not JSON"),
            "{broken}: {err}"
        );
        // The hint is a command that works: the word as a JSON string.
        assert!(err.contains("to send it as a string"), "{broken}: {err}");
        // Named values follow the same rule.
        let out = jrpc(&["call", target, "echo", &format!("text={broken}")]);
        assert_eq!(out.status.code(), Some(2), "text={broken}: {}", text(&out));
    }
    // What the hint says to send goes through as a string.
    let quoted = serde_json::to_string(r#"{"a": [1, 2.50"#).unwrap();
    let out = jrpc(&["call", target, "echo", &quoted]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), quoted);
    // Words that are not JSON and do not start like it are still strings.
    let out = jrpc(&["call", target, "echo", "hello"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#""hello""#,
        "{}",
        text(&out)
    );
}

#[test]
fn a_connect_line_that_starts_like_json_is_a_frame() {
    let mut child = Command::new(JRPC)
        .args(["connect", "--", JRPC, "serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"subtract\",\"params\":[42,23],\"id\":\"x\"}\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "19\n", "{}", text(&out));
}

#[test]
fn mcp_commands_take_a_bare_host_and_port() {
    let (_server, url) = common::mcp_serve(&[]);
    let authority = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let out = jrpc(&["mcp", "call", &authority, "add", "a=2", "b=40"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "42\n");
    // With a path, that path.
    let out = jrpc(&["mcp", "call", &format!("{authority}/mcp"), "add", "a=1", "b=1"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2\n", "{}", text(&out));
}

#[test]
fn mcp_serve_refuses_oauth_without_http() {
    for transport in [
        &["--stdio"][..],
        &["--tcp", "127.0.0.1:0"],
        &["--ws", "127.0.0.1:0"],
    ] {
        let mut args = vec!["mcp", "serve"];
        args.extend_from_slice(transport);
        args.extend(["--oauth-issuer", "https://auth.example.com"]);
        let out = jrpc(&args);
        assert_eq!(out.status.code(), Some(2), "{transport:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--http"),
            "{}",
            text(&out)
        );
    }
}

/// `jrpc call tcp://HOST:PORT` on an HTTP port says it is an HTTP server and
/// gives the command that works (issue 44), instead of a framing riddle.
#[test]
fn a_tcp_call_to_an_http_server_says_so() {
    let served = Served::start(&["--http", "127.0.0.1:0"]);
    let authority = served.targets[0].trim_start_matches("http://").to_owned();
    let out = jrpc(&["call", &format!("tcp://{authority}"), "subtract", "42", "23"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("it is an HTTP server"), "{err}");
    let suggested = format!("jrpc call http://{authority} ");
    assert!(err.contains(&suggested), "{err}");
    // The suggestion works.
    let out = jrpc(&["call", &format!("http://{authority}"), "subtract", "42", "23"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "19",
        "{}",
        text(&out)
    );
}

/// A JSON-RPC server that is not MCP: one plain sentence; the /mcp hint only
/// for HTTP, where MCP has a path of its own (a WebSocket serves any path).
#[test]
fn a_server_that_is_not_mcp_is_named_plainly() {
    let served = Served::start(&["--http", "127.0.0.1:0"]);
    let ws = served.targets[1].clone();
    assert!(ws.starts_with("ws://"), "{ws}");
    let out = jrpc(&["mcp", "list", &ws]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not an MCP endpoint: it does not know MCP's initialize"),
        "{err}"
    );
    assert!(!err.contains("/mcp"), "no /mcp hint for a WebSocket: {err}");
    assert!(!err.contains("answered initialize with the peer"), "{err}");
    let out = jrpc(&["mcp", "list", &served.targets[0]]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/mcp"), "the /mcp hint for HTTP: {err}");
}
