//! End to end: spawn `jrpc mcp serve --stdio` and talk MCP to it over pipes.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

fn spawn(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_jrpc"))
        .args(args)
        .args(["mcp", "serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn jrpc")
}

/// Every stdout line, as it arrives, on a channel.
fn lines(child: &mut std::process::Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn next(rx: &mpsc::Receiver<String>) -> Value {
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("a line within 20 s");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
}

#[test]
fn a_session_over_stdio_ends_when_stdin_closes() {
    // Debug logging on: logs must still go to stderr only.
    let mut child = spawn(&["--log-level", "debug"]);
    let rx = lines(&mut child);
    let mut stdin = child.stdin.take().unwrap();
    let mut send = |message: Value| writeln!(stdin, "{message}").unwrap();
    // (The closure borrows stdin; it is last used before stdin is dropped.)
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "cli-test", "version": "1"}}}));
    let init = next(&rx);
    assert_eq!(init["id"], 1);
    assert_eq!(init["result"]["serverInfo"]["name"], "jrpc-demo");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    // A text with newlines comes back on one line, escaped.
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "two\nlines\r\n"}}}));
    let echo = next(&rx);
    assert_eq!(echo["result"]["content"][0]["text"], "two\nlines\r\n");
    send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "add", "arguments": {"a": 2, "b": 40}}}));
    assert_eq!(next(&rx)["result"]["structuredContent"], json!({"result": 42}));
    drop(stdin);
    // Stdin closed: the server exits, and stdout held nothing else.
    let exit = wait_bounded(&mut child, Duration::from_secs(20));
    assert!(exit.success(), "{exit:?}");
    assert!(
        rx.recv_timeout(Duration::from_secs(1)).is_err(),
        "more output after the replies"
    );
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!stderr.contains("\"jsonrpc\""), "JSON-RPC on stderr: {stderr}");
}

#[test]
fn closing_stdin_ends_a_session_with_a_call_still_running() {
    let mut child = spawn(&[]);
    let rx = lines(&mut child);
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "cli-test", "version": "1"}}})
    )
    .unwrap();
    assert_eq!(next(&rx)["id"], 1);
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "sleep", "arguments": {"ms": 120000}}})
    )
    .unwrap();
    drop(stdin);
    // Far less than the two-minute sleep: the call is cancelled.
    let exit = wait_bounded(&mut child, Duration::from_secs(20));
    assert!(exit.success(), "{exit:?}");
}

#[test]
fn mcp_serve_needs_a_transport() {
    let output = Command::new(env!("CARGO_BIN_EXE_jrpc"))
        .args(["mcp", "serve"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("--stdio"));
}

fn wait_bounded(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("jrpc mcp serve did not exit after stdin closed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `jrpc mcp serve ARGS...`: the child and the first line it writes on
/// stderr (where it listens).
fn spawn_serve(args: &[&str]) -> (std::process::Child, String) {
    let (child, mut lines) = serve_lines(args, 1);
    (child, lines.remove(0))
}

/// `jrpc mcp serve --http 127.0.0.1:0 EXTRA...`: the child, its URL and
/// its address.
fn spawn_http(extra: &[&str]) -> (std::process::Child, String, String) {
    let (child, line) = spawn_serve(&[&["--http", "127.0.0.1:0"], extra].concat());
    let url = line
        .trim()
        .rsplit(' ')
        .next()
        .filter(|u| u.starts_with("http://") && u.ends_with("/mcp"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_owned();
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    (child, url, addr)
}

/// POSTs an `initialize` to `addr` naming `host`; the whole raw reply.
fn raw_initialize(addr: &str, host: &str) -> String {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    std::io::Read::read_to_string(&mut stream, &mut reply).unwrap();
    reply
}

/// `jrpc mcp serve --http` serves Streamable HTTP at /mcp, does not stop
/// when stdin closes, and stops on SIGTERM.
#[test]
fn mcp_serve_http_runs_until_sigterm() {
    let (mut child, url, addr) = spawn_http(&[]);
    // Stdin is closed from the start; the server still answers.
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "exited with stdin closed");
    let reply = raw_initialize(&addr, &addr);
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.to_ascii_lowercase().contains("mcp-session-id:"), "{reply}");
    // The client commands over the same URL.
    let jrpc = env!("CARGO_BIN_EXE_jrpc");
    let call = Command::new(jrpc)
        .args(["mcp", "call", &url, "add", "a=2", "b=40"])
        .output()
        .unwrap();
    assert_eq!(call.status.code(), Some(0), "{call:?}");
    assert_eq!(String::from_utf8_lossy(&call.stdout), "42\n");
    let list = Command::new(jrpc)
        .args(["mcp", "list", &url, "tools"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&list.stdout).contains("tools (8):"),
        "{list:?}"
    );
    let read = Command::new(jrpc)
        .args(["mcp", "read", &url, "demo://greeting"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&read.stdout), "hello\n");
    let prompt = Command::new(jrpc)
        .args(["mcp", "prompt", &url, "greet", "name=Ada"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&prompt.stdout).contains("Ada"),
        "{prompt:?}"
    );
    let failed = Command::new(jrpc)
        .args(["mcp", "call", &url, "fail"])
        .output()
        .unwrap();
    assert_eq!(failed.status.code(), Some(1));
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = wait_bounded(&mut child, Duration::from_secs(20));
    assert!(exit.success(), "{exit:?}");
}

/// The jrpc-mcp client spawns `jrpc mcp serve --stdio` and uses it.
#[tokio::test]
async fn the_mcp_client_spawns_the_demo_server() {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_jrpc"));
    command.args(["mcp", "serve", "--stdio"]);
    let client = jrpc_mcp::McpClient::builder("cli-test", "1")
        .spawn(command)
        .await
        .expect("spawned and initialized");
    assert_eq!(client.server_info().name, "jrpc-demo");
    let sum = client.call_tool("add", json!({"a": 2, "b": 40})).await.unwrap();
    assert_eq!(sum.joined_text(), "42");
    let reason = tokio::time::timeout(Duration::from_secs(20), client.close())
        .await
        .expect("closed in time");
    assert!(!reason.is_empty());
}

/// `jrpc mcp list|call|read|prompt ... -- COMMAND` against the demo server.
fn mcp_client(args: &[&str]) -> (Option<i32>, String, String) {
    let jrpc = env!("CARGO_BIN_EXE_jrpc");
    let output = Command::new(jrpc)
        .arg("mcp")
        .args(args)
        .args(["--", jrpc, "mcp", "serve", "--stdio"])
        .stdin(Stdio::null())
        .output()
        .expect("run jrpc mcp");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn an_unreachable_url_is_a_transport_failure() {
    let output = Command::new(env!("CARGO_BIN_EXE_jrpc"))
        .args(["mcp", "call", "http://127.0.0.1:1/mcp", "add", "a=1", "b=2"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("127.0.0.1:1"),
        "{output:?}"
    );
}

#[test]
fn the_mcp_client_commands_over_stdio() {
    let (code, out, _) = mcp_client(&["call", "add", "a=2", "b=40"]);
    assert_eq!((code, out.as_str()), (Some(0), "42\n"));
    let (code, out, _) = mcp_client(&["call", "add", "--json", r#"{"a": 1.5, "b": 1}"#]);
    assert_eq!(code, Some(0));
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"result": 2.5})
    );
    let (code, out, _) = mcp_client(&["call", "echo", "text=hello world"]);
    assert_eq!((code, out.as_str()), (Some(0), "hello world\n"));
    // A failed tool exits 1; an unknown one too, with the error on stderr.
    let (code, out, _) = mcp_client(&["call", "fail"]);
    assert_eq!(code, Some(1));
    assert!(!out.is_empty());
    // An unknown tool, prompt or resource: one sentence each, of one shape,
    // listing what the server has (issue 44); exit 1.
    for (args, sentence) in [
        (
            &["call", "nope"][..],
            r#"jrpc: the server has no tool "nope"; it has: add, echo, "#,
        ),
        (
            &["prompt", "nope"][..],
            r#"jrpc: the server has no prompt "nope"; it has: greet"#,
        ),
        (
            &["read", "demo://nope"][..],
            r#"jrpc: the server has no resource "demo://nope"; it has: demo://greeting, demo://counter, demo://echo/{text}"#,
        ),
    ] {
        let (code, _, err) = mcp_client(args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.starts_with(sentence), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one sentence: {err}");
    }
    // Progress is shown on stderr, not stdout.
    let (code, out, err) = mcp_client(&["call", "sleep", "ms=250"]);
    assert_eq!((code, out.as_str()), (Some(0), "slept 250\n"));
    assert!(err.contains("progress"), "{err}");

    let (code, out, _) = mcp_client(&["list"]);
    assert_eq!(code, Some(0));
    for expected in [
        "tools (8):",
        "add(a: number, b: number)",
        "sleep(ms: integer)",
        "list_roots()",
        "resources (2):",
        "demo://counter",
        "demo://greeting",
        "demo://echo/{text}",
        "prompts (1):",
        "greet",
    ] {
        assert!(out.contains(expected), "{expected} in {out}");
    }
    let (code, out, _) = mcp_client(&["list", "prompts", "--json"]);
    assert_eq!(code, Some(0));
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed["prompts"][0]["name"], "greet");
    assert!(listed.get("tools").is_none());

    let (code, out, _) = mcp_client(&["read", "demo://echo/abc"]);
    assert_eq!((code, out.as_str()), (Some(0), "abc\n"));
    // Not found (-32002 in 2025-11-25, -32602 in 2026-07-28): said so, in
    // both eras.
    for era in ["2026-07-28", "legacy"] {
        let (code, _, err) = mcp_client(&["read", "demo://nothing", "--protocol-version", era]);
        assert_eq!(code, Some(1), "{era}: {err}");
        assert!(
            err.contains(r#"the server has no resource "demo://nothing""#),
            "{era}: {err}"
        );
    }
    let (code, out, _) = mcp_client(&["prompt", "greet", "name=Ada"]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("user: ") && out.contains("Ada"), "{out}");

    // Usage errors exit 2.
    let (code, _, _) = mcp_client(&["call"]);
    assert_eq!(code, Some(2));
    let (code, _, _) = mcp_client(&["list", "everything"]);
    assert_eq!(code, Some(2));
    let (code, _, _) = mcp_client(&["call", "add", "a"]);
    assert_eq!(code, Some(2));
}

/// `--allow-host` lets a Host header through that DNS-rebinding protection
/// would refuse.
#[test]
fn mcp_serve_http_allows_named_hosts() {
    let (mut child, _url, addr) = spawn_http(&["--allow-host", "mcp.example.test"]);
    let port = addr.rsplit(':').next().unwrap().to_owned();
    let status_for = |host: &str| {
        let reply = raw_initialize(&addr, host);
        reply.split(' ').nth(1).unwrap_or_default().to_owned()
    };
    assert_eq!(status_for(&format!("mcp.example.test:{port}")), "200");
    assert_eq!(status_for(&format!("other.example.test:{port}")), "421");
    let _ = child.kill();
    let _ = child.wait();
}

/// Issue 33: an HTTP URL that is not an MCP endpoint (the path `/mcp`
/// forgotten, or a plain JSON-RPC server) says so and suggests `/mcp`;
/// `-H`/`--bearer` headers and `-v` (the wire) work as in `jrpc call`.
#[test]
fn a_url_that_is_not_an_mcp_endpoint_says_so() {
    let (mut child, url, addr) = spawn_http(&[]);
    let jrpc = env!("CARGO_BIN_EXE_jrpc");
    let output = Command::new(jrpc)
        .args(["mcp", "list", &format!("http://{addr}/")])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{err}");
    assert!(err.contains("not an MCP endpoint"), "{err}");
    assert!(err.contains(&format!("try http://{addr}/mcp")), "{err}");
    let output = Command::new(jrpc)
        .args([
            "mcp",
            "call",
            &url,
            "add",
            "a=1",
            "b=2",
            "--bearer",
            "t0ken",
            "-H",
            "X-Trace: 7",
            "-v",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(String::from_utf8_lossy(&output.stdout), "3\n", "{err}");
    // The server is dual-era: the client probes and speaks 2026-07-28.
    assert!(
        err.contains(r#"> {"jsonrpc":"2.0","id":1,"method":"server/discover""#),
        "{err}"
    );
    assert!(err.contains(r#""method":"tools/call""#), "{err}");
    let _ = child.kill();
    let _ = child.wait();
}

/// `jrpc mcp serve --tcp | --unix | --ws` (issue 30): a session per
/// connection, served until SIGTERM; `jrpc mcp list/call/read` reach them
/// by URL. Two clients one after another each get their own session.
#[test]
fn mcp_serve_over_tcp_unix_and_websocket() {
    let socket = std::env::temp_dir().join(format!("jrpc-mcp-test-{}.sock", std::process::id()));
    let socket = socket.to_str().unwrap().to_owned();
    for (flag, addr) in [
        ("--tcp", "127.0.0.1:0"),
        ("--unix", socket.as_str()),
        ("--ws", "127.0.0.1:0"),
    ] {
        let (mut child, line) = spawn_serve(&[flag, addr]);
        let target = line
            .trim()
            .strip_prefix("jrpc: MCP at ")
            .unwrap_or_else(|| panic!("{flag}: no target in {line:?}"))
            .to_owned();
        let expected_scheme = match flag {
            "--tcp" => "tcp://",
            "--unix" => "unix:",
            _ => "ws://",
        };
        assert!(target.starts_with(expected_scheme), "{flag}: {target}");
        let run = |args: &[&str]| {
            let output = Command::new(env!("CARGO_BIN_EXE_jrpc"))
                .arg("mcp")
                .args(args)
                .output()
                .unwrap();
            (
                output.status.code(),
                String::from_utf8_lossy(&output.stdout).into_owned(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            )
        };
        let (code, out, err) = run(&["list", &target, "tools"]);
        assert_eq!(code, Some(0), "{flag}: {err}");
        assert!(out.contains("add(a: number, b: number)"), "{flag}: {out}");
        let (code, out, err) = run(&["call", &target, "add", "a=2", "b=40"]);
        assert_eq!((code, out.as_str()), (Some(0), "42\n"), "{flag}: {err}");
        let (code, out, err) = run(&["read", &target, "demo://echo/abc"]);
        assert_eq!((code, out.as_str()), (Some(0), "abc\n"), "{flag}: {err}");
        sigterm(&child);
        let status = wait_bounded(&mut child, Duration::from_secs(20));
        assert!(status.success(), "{flag}: {status:?}");
    }
}

/// Sends SIGTERM to `child` (stopped only here, by its PID).
fn sigterm(child: &std::process::Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// `jrpc mcp` with stdin given: the answers to an elicitation's prompts.
fn mcp_client_with_input(args: &[&str], input: &str) -> (Option<i32>, String, String) {
    use std::io::Write as _;
    let jrpc = env!("CARGO_BIN_EXE_jrpc");
    let mut child = Command::new(jrpc)
        .arg("mcp")
        .args(args)
        .args(["--", jrpc, "mcp", "serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run jrpc mcp");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Issue 31: the client commands find the server's era (the demo server
/// is dual-era: 2026-07-28) unless `--protocol-version` pins one, say which
/// with `--json` and `-v`, and answer a server's request for input in both
/// eras: an elicitation by asking on the terminal (`--no-input` declines),
/// a sampling declined (no model).
#[test]
fn the_client_commands_speak_either_era_and_answer_input() {
    for (pin, version) in [
        (None, "2026-07-28"),
        (Some("legacy"), "2025-11-25"),
        (Some("2025-06-18"), "2025-06-18"),
    ] {
        let mut args = vec!["list", "tools", "--json", "-v"];
        if let Some(pin) = pin {
            args.extend(["--protocol-version", pin]);
        }
        let (code, out, err) = mcp_client(&args);
        assert_eq!(code, Some(0), "{err}");
        let listed: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(listed["protocolVersion"], version, "{pin:?}");
        assert!(err.contains(&format!("jrpc: MCP {version}")), "{err}");

        let mut call = vec!["call", "elicit", "message=Who?"];
        if let Some(pin) = pin {
            call.extend(["--protocol-version", pin]);
        }
        let (code, out, err) = mcp_client_with_input(&call, "\nAda\n");
        assert_eq!((code, out.as_str()), (Some(0), "hello Ada\n"), "{pin:?}: {err}");
        // Required: asked again after an empty answer.
        assert!(err.contains("(required)"), "{err}");
        call.push("--no-input");
        let (code, out, err) = mcp_client_with_input(&call, "");
        assert_eq!((code, out.as_str()), (Some(0), "declined\n"), "{pin:?}: {err}");

        let mut sample = vec!["call", "sample", "prompt=hi"];
        if let Some(pin) = pin {
            sample.extend(["--protocol-version", pin]);
        }
        let (code, _, err) = mcp_client(&sample);
        assert_eq!(code, Some(1), "{pin:?}: {err}");
        assert!(err.contains("no model"), "{err}");
    }
    let (code, _, err) = mcp_client(&["list", "--protocol-version", "1999-01-01"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unknown protocol version"), "{err}");
}

/// Issue 31: `jrpc mcp watch URL demo://counter` prints each update as it
/// comes, in both eras, and exits 0 on Ctrl-C (SIGINT). A watch outlasts
/// `--timeout`, which bounds each request, not the stream.
#[test]
fn watch_prints_changes_until_interrupted() {
    use std::io::BufRead as _;
    let (mut server, url, _) = spawn_http(&[]);
    let jrpc = env!("CARGO_BIN_EXE_jrpc");
    for pin in ["2026-07-28", "legacy"] {
        let mut watch = Command::new(jrpc)
            .args([
                "mcp",
                "watch",
                &url,
                "demo://counter",
                "--protocol-version",
                pin,
                "--timeout",
                "2s",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Subscribed once it says it is watching.
        let mut err = std::io::BufReader::new(watch.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        assert!(line.starts_with("jrpc: watching demo://counter"), "{line}");
        let mut out = std::io::BufReader::new(watch.stdout.take().unwrap());
        let mut seen = String::new();
        // Past the watch's --timeout: its stream is still open.
        std::thread::sleep(Duration::from_secs(3));
        let bumped = Command::new(jrpc)
            .args(["mcp", "call", &url, "bump", "--protocol-version", pin])
            .output()
            .unwrap();
        assert!(bumped.status.success(), "{bumped:?}");
        out.read_line(&mut seen).unwrap();
        assert_eq!(seen, "resources/updated demo://counter\n", "{pin}");
        let status = Command::new("kill")
            .args(["-INT", &watch.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(watch.wait().unwrap().code(), Some(0), "{pin}");
    }
    sigterm(&server);
    let _ = server.wait();
}

/// `jrpc mcp serve --http` answers `GET /health` with 200 for load
/// balancers (issue 42), with OAuth on too: the health check needs no token.
#[test]
fn mcp_serve_http_answers_health_checks() {
    use std::io::Read as _;
    for extra in [&[][..], &["--oauth-issuer", "http://127.0.0.1:1"][..]] {
        let (mut child, _url, addr) = spawn_http(extra);
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        write!(
            stream,
            "GET /health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).unwrap();
        assert!(reply.starts_with("HTTP/1.1 200"), "{extra:?}: {reply}");
        assert!(reply.contains(r#""status":"ok""#), "{extra:?}: {reply}");
        sigterm(&child);
        let _ = wait_bounded(&mut child, Duration::from_secs(20));
    }
}

/// `jrpc mcp serve ARGS` and its first `count` stderr lines; the rest of
/// stderr is drained (the server's stderr must not fill up or close).
fn serve_lines(args: &[&str], count: usize) -> (std::process::Child, Vec<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_jrpc"))
        .args(["mcp", "serve"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut lines = Vec::new();
    while lines.len() < count {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "stderr ended: {lines:?}"
        );
        // Log lines (timestamped, a WARN) may come between.
        if !line.contains(" WARN ") {
            lines.push(line.trim_end().to_owned());
        }
    }
    std::thread::spawn(move || for _ in stderr.lines() {});
    (child, lines)
}

/// `jrpc mcp serve` prints ready-to-paste commands, as `jrpc serve` does,
/// and says when OAuth is required (issue 44); the call runs as printed.
#[test]
fn mcp_serve_prints_commands_that_run_as_printed() {
    let (mut child, lines) = serve_lines(&["--http", "127.0.0.1:0"], 4);
    let url = lines[0].rsplit(' ').next().unwrap().to_owned();
    assert_eq!(lines[1], "jrpc: try it:", "{lines:?}");
    assert!(lines[2].ends_with(&format!(" mcp list {url}")), "{lines:?}");
    let call: Vec<&str> = lines[3].split_whitespace().collect();
    assert_eq!(
        call[1..],
        ["mcp", "call", url.as_str(), "add", "a=2", "b=40"],
        "{lines:?}"
    );
    let out = Command::new(call[0]).args(&call[1..]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "42\n", "{out:?}");
    sigterm(&child);
    let _ = wait_bounded(&mut child, Duration::from_secs(20));

    let (mut child, lines) = serve_lines(
        &["--http", "127.0.0.1:0", "--oauth-issuer", "http://127.0.0.1:1"],
        3,
    );
    assert!(
        lines[1].starts_with("jrpc: OAuth required: access tokens from http://127.0.0.1:1"),
        "{lines:?}"
    );
    assert!(
        lines[2].ends_with(&format!(" mcp login {}", lines[0].rsplit(' ').next().unwrap())),
        "{lines:?}"
    );
    sigterm(&child);
    let _ = wait_bounded(&mut child, Duration::from_secs(20));
}

/// `jrpc mcp bench`: calls of one tool, measured as `jrpc bench` measures
/// JSON-RPC; a tool that fails is refused before the run.
#[test]
fn mcp_bench_measures_calls_of_a_tool() {
    let (_server, url) = common::mcp_serve(&[]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_jrpc"))
        .args(["mcp", "bench", &url, "bump", "-c", "2", "-n", "40", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["method"], "tools/call bump");
    assert_eq!(report["requests"], 40);
    assert_eq!(report["ok"], 40);
    assert_eq!(report["retried"], 0);
    assert_eq!(report["connections"], 2);
    // Every call ran once (the check before the run too): 41 bumps.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_jrpc"))
        .args(["mcp", "read", &url, "demo://counter"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "41",
        "{}",
        common::text(&out)
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_jrpc"))
        .args(["mcp", "bench", &url, "fail", "-n", "5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", common::text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("fail fails before the run"),
        "{}",
        common::text(&out)
    );
}

/// `jrpc mcp watch` with nothing the server announces says so (exit 1)
/// instead of waiting forever for changes that never come.
#[test]
fn watch_with_nothing_to_watch_says_so() {
    let (_server, url) = common::mcp_serve(&[]);
    let jrpc = env!("CARGO_BIN_EXE_jrpc");
    let run = |args: &[&str]| {
        let out = Command::new(jrpc)
            .args(["mcp", "watch", &url])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for pin in ["2026-07-28", "legacy"] {
        // The demo announces no list changes, only resource updates.
        let (code, err) = run(&["--protocol-version", pin]);
        assert_eq!(code, Some(1), "{pin}: {err}");
        assert!(
            err.contains("nothing to watch") && err.contains("demo://counter"),
            "{pin}: {err}"
        );
        let (code, err) = run(&["tools", "--protocol-version", pin]);
        assert_eq!(code, Some(1), "{pin}: {err}");
        assert!(
            err.contains("does not announce changes of its tools list"),
            "{pin}: {err}"
        );
    }
    // With list changes announced, the lists are watched (until the timeout
    // of this test's own kill).
    let (mut conformance, url) = common::mcp_serve(&["--conformance"]);
    let mut watch = Command::new(jrpc)
        .args(["mcp", "watch", &url])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(watch.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("watching tools, prompts, resources"), "{line}");
    let _ = watch.kill();
    let _ = watch.wait();
    let _ = conformance.0.kill();
}
