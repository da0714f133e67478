//! `jrpc connect`: at a terminal (driven through a pseudo-terminal by
//! `tests/connect/drive_pty.py`), and with piped input as a script over
//! stdio, TCP, HTTP and WebSocket.

use std::io::Write;
use std::process::{Command, Output, Stdio};

mod common;

use common::{text, Served, JRPC};

fn chatty_server() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/bridge/chatty_server.py").to_owned()
}

/// `jrpc connect ARGS` with `script` piped in.
fn script(args: &[&str], script: &str) -> Output {
    let mut child = Command::new(JRPC)
        .arg("connect")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

const SCRIPT: &str = "subtract 42 23
sum 1 2 3
:notify update 1 2
subtract minuend=10 subtrahend=3
echo 'hello world'
:batch
add 1 2
:notify update
add 3 4
:end
:raw {\"jsonrpc\":\"2.0\",\"method\":\"add\",\"params\":[5,5],\"id\":\"mine\"}
";

const RESULTS: &str = "19\n6\n7\n\"hello world\"\n3\n7\n10\n";

/// A script's results come one per line, in the order of its lines, on
/// every transport.
#[test]
fn a_script_prints_each_result_on_its_own_line() {
    let out = script(&["--", JRPC, "serve", "--stdio"], SCRIPT);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), RESULTS, "{}", text(&out));
    let served = Served::start(&["--http", "127.0.0.1:0", "--tcp", "127.0.0.1:0"]);
    for target in &served.targets {
        let out = script(&[target], SCRIPT);
        assert!(out.status.success(), "{target}: {}", text(&out));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            RESULTS,
            "{target}: {}",
            text(&out)
        );
    }
}

/// At the end of input the replies still due are awaited, in order; one
/// that does not come within --timeout fails the script.
#[test]
fn the_end_of_a_script_waits_for_replies_due() {
    let out = script(&["--", JRPC, "serve", "--stdio"], "sleep 300\nsubtract 5 3\n");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "300\n2\n");
    let out = script(
        &["--timeout", "500ms", "--", JRPC, "serve", "--stdio"],
        "sleep 10000\nsubtract 5 3\n",
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("#1 sleep no reply within"), "{}", text(&out));
    assert!(stdout.ends_with("\n2\n"), "{}", text(&out));
}

/// A call answered with an error, or a line that cannot be read, makes
/// the exit status 1; the rest still runs.
#[test]
fn a_failed_call_fails_the_script() {
    let out = script(
        &["--", JRPC, "serve", "--stdio"],
        "no.such.method\nsubtract 42 23\nsum [1\n:bogus\n",
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout,
        "#1 no.such.method error {\"code\":-32601,\"message\":\"Method not found\"}\n19\n"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("a bracket is not closed"), "{stderr}");
    assert!(stderr.contains(":bogus: no such command"), "{stderr}");
}

/// What a script sends last (a notification, an answer) is sent before
/// the session ends; a batch left open fails the script; `:quit` ends it.
#[test]
fn the_end_of_a_script_sends_what_is_queued() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target = format!("tcp://{}", listener.local_addr().unwrap());
    let received = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        std::io::BufRead::lines(std::io::BufReader::new(stream))
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    let out = script(&[&target], ":notify bye 1\n:quit\n:notify never\n");
    assert!(out.status.success(), "{}", text(&out));
    let lines = received.join().unwrap();
    assert_eq!(lines, [r#"{"jsonrpc":"2.0","method":"bye","params":[1]}"#]);

    let out = script(
        &["--", JRPC, "serve", "--stdio"],
        "subtract 2 1\n:batch\nsubtract 3 1\n",
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "1\n#2 subtract not sent: its batch had no :end\n"
    );
}

/// The server's own messages go to stderr; its requests are answered
/// -32601 in a script.
#[test]
fn a_script_shows_the_servers_own_messages() {
    let out = script(&["--", "python3", &chatty_server()], "progress\nask\n");
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "\"done\"");
    assert!(lines[1].contains("-32601"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("<- notification \"progress\" {\"percent\": 50}"),
        "{stderr}"
    );
    assert!(
        stderr.contains("<- request \"server-1\" \"client.name\""),
        "{stderr}"
    );
}

/// At a terminal: Tab completes method names from rpc.discover, Ctrl-R
/// searches the history (kept in a file), results print as they arrive,
/// the server's notification and request print and the request is
/// answered by hand, Ctrl-D ends with status 0.
#[test]
fn a_session_at_a_terminal() {
    let home = std::env::temp_dir().join(format!("jrpc-connect-pty-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let driver = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connect/drive_pty.py");
    let out = Command::new("python3")
        .args([driver, JRPC, &chatty_server(), home.to_str().unwrap()])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&home);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
}

/// Words after the TARGET are a usage error: calls are typed, not given.
#[test]
fn calls_are_not_given_on_the_command_line() {
    let out = Command::new(JRPC)
        .args(["connect", "tcp://127.0.0.1:1", "subtract", "1", "2"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}
