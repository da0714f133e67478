//! One rule for arguments (issue 44): a word that starts like JSON and is
//! not JSON is refused, a line of `jrpc connect` that starts like JSON is a
//! frame, `jrpc mcp` takes a bare HOST:PORT as `jrpc call` does, and
//! `jrpc mcp serve` refuses OAuth flags where there are no tokens.

mod common;

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use common::{jrpc, text, Served, JRPC};

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
        // The hint: the word as a JSON string, which goes through (below).
        let as_string = serde_json::to_string(broken).unwrap();
        assert!(
            err.contains(&format!("send it as a string, written as JSON: {as_string}")),
            "{broken}: {err}"
        );
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
    let suggested = format!("use http://{authority} instead (jrpc call http://{authority} ");
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

/// `jrpc mcp ... -- jrpc mcp serve --stdio` with `args`, pinned to `era`.
fn mcp_stdio(args: &[&str], era: &str) -> Output {
    Command::new(JRPC)
        .arg("mcp")
        .args(args)
        .args(["--protocol-version", era, "--", JRPC, "mcp", "serve", "--stdio"])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `--roots DIR...` declares roots, which the server lists (issue 44).
#[test]
fn the_client_offers_roots() {
    let base = std::env::temp_dir().join(format!("jrpc-roots-{}", std::process::id()));
    let spaced = base.join("two words");
    std::fs::create_dir_all(&spaced).unwrap();
    let base = std::fs::canonicalize(&base).unwrap();
    for era in ["2026-07-28", "legacy"] {
        let out = mcp_stdio(
            &[
                "call",
                "list_roots",
                "--roots",
                base.to_str().unwrap(),
                spaced.to_str().unwrap(),
            ],
            era,
        );
        assert!(out.status.success(), "{era}: {}", text(&out));
        let listed = String::from_utf8_lossy(&out.stdout);
        let expected = format!(
            "file://{}\nfile://{}/two%20words\n",
            base.display(),
            base.display()
        );
        assert_eq!(listed, expected, "{era}: {}", text(&out));
    }
    let out = mcp_stdio(&["call", "list_roots", "--roots", "/no/such/dir"], "legacy");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let _ = std::fs::remove_dir_all(&base);
}

/// A sampling request goes to `--sampling-command` (its params on stdin,
/// its output the answer, a non-zero exit a refusal); without one, a
/// sentence says how to give one (issue 44).
#[test]
fn sampling_goes_to_the_sampling_command() {
    for era in ["2026-07-28", "legacy"] {
        let answer = r#"grep -q '"hi there"' && echo "a model's answer""#;
        let out = mcp_stdio(
            &["call", "sample", "prompt=hi there", "--sampling-command", answer],
            era,
        );
        assert!(out.status.success(), "{era}: {}", text(&out));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "a model's answer",
            "{era}: {}",
            text(&out)
        );
        let out = mcp_stdio(
            &["call", "sample", "prompt=hi", "--sampling-command", "exit 3"],
            era,
        );
        assert!(!out.status.success(), "{era}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("declined"),
            "{era}: {}",
            text(&out)
        );
        let out = mcp_stdio(&["call", "sample", "prompt=hi"], era);
        assert!(!out.status.success(), "{era}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--sampling-command"),
            "{era}: {}",
            text(&out)
        );
    }
}

/// `jrpc mcp request [TARGET] METHOD [PARAMS|K=V...]`: any method, its result
/// as JSON, exit codes as for `jrpc mcp call` (issue 44).
#[test]
fn any_method_is_one_request_away() {
    for era in ["2026-07-28", "legacy"] {
        let out = mcp_stdio(&["request", "tools/list"], era);
        assert!(out.status.success(), "{era}: {}", text(&out));
        let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            result["tools"].as_array().is_some_and(|t| !t.is_empty()),
            "{era}: {result}"
        );
        let out = mcp_stdio(
            &[
                "request",
                "prompts/get",
                r#"{"name": "greet", "arguments": {"name": "Ada"}}"#,
            ],
            era,
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Ada"),
            "{era}: {}",
            text(&out)
        );
        let out = mcp_stdio(&["request", "resources/read", "uri=demo://greeting"], era);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("hello"),
            "{era}: {}",
            text(&out)
        );
        let out = mcp_stdio(&["request", "no/such/method"], era);
        assert_eq!(out.status.code(), Some(1), "{era}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("-32601"),
            "{era}: {}",
            text(&out)
        );
    }
    let out = mcp_stdio(&["request", "ping"], "legacy");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "{}",
        "{}",
        text(&out)
    );
}

/// `jrpc mcp call ... echo text=42` sends the string "42": k=v words are
/// read by the tool's input schema (issue 44), in both eras; numbers stay
/// numbers where the schema says so.
#[test]
fn tool_arguments_follow_the_input_schema() {
    for era in ["2026-07-28", "legacy"] {
        let out = mcp_stdio(&["call", "echo", "text=42"], era);
        assert!(out.status.success(), "{era}: {}", text(&out));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "42\n",
            "{era}: {}",
            text(&out)
        );
        let out = mcp_stdio(&["call", "echo", "text=true"], era);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "true\n",
            "{era}: {}",
            text(&out)
        );
        let out = mcp_stdio(&["call", "add", "a=2", "b=40"], era);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "42\n",
            "{era}: {}",
            text(&out)
        );
    }
}
