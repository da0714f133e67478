//! `jrpc bridge -- COMMAND`: a stdio server served to many clients over
//! HTTP, WebSocket and TCP. The servers behind it are `jrpc serve --stdio`
//! and `tests/bridge/chatty_server.py`, a stdio server written apart from
//! jrpc that sends notifications and requests of its own and can be told
//! to die.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jrpc::{Client, Router};
use serde_json::{json, Value};

mod common;

use common::{jrpc, text, JRPC};

fn chatty_server() -> Vec<String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/bridge/chatty_server.py");
    vec!["python3".into(), script.into()]
}

fn jrpc_serve_stdio() -> Vec<String> {
    vec![JRPC.into(), "serve".into(), "--stdio".into()]
}

/// A `jrpc bridge` over HTTP+WebSocket and TCP, stopped on drop; its
/// stderr lines are kept.
struct Bridge {
    child: Child,
    http: String,
    ws: String,
    tcp: String,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Bridge {
    fn start(flags: &[&str], command: &[String]) -> Bridge {
        let mut child = Command::new(JRPC)
            .args(["bridge", "--http", "127.0.0.1:0", "--tcp", "127.0.0.1:0"])
            .args(flags)
            .arg("--")
            .args(command)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let (mut http, mut ws, mut tcp) = (String::new(), String::new(), String::new());
        while http.is_empty() || tcp.is_empty() {
            let mut line = String::new();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "jrpc bridge exited early"
            );
            if let Some(rest) = line.strip_prefix("jrpc: listening on ") {
                let words: Vec<&str> = rest.split_whitespace().collect();
                if words[0].starts_with("http://") {
                    http = words[0].to_owned();
                    ws = words.iter().find(|w| w.starts_with("ws://")).unwrap().to_string();
                } else {
                    tcp = words[0].to_owned();
                }
            }
        }
        let lines = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                kept.lock().unwrap().push(line);
            }
        });
        Bridge {
            child,
            http,
            ws,
            tcp,
            stderr: lines,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `jrpc check`'s outcome per rule (the titles differ by transport).
fn verdicts(out: &Output) -> Vec<(String, String)> {
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(out)));
    report["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| {
            (
                rule["rule"].as_str().unwrap().to_owned(),
                rule["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A check that knows a method of the demo.
const CHECK: [&str; 8] = [
    "check", "--json", "--method", "subtract", "--params", "[42,23]", "--expect", "19",
];

/// The bridge is transparent: `jrpc check` over HTTP, WebSocket and TCP
/// through it gives exactly the verdicts it gives the server over stdio.
#[test]
fn a_check_through_the_bridge_matches_the_check_over_stdio() {
    let mut direct = CHECK.to_vec();
    direct.push("--");
    let server = jrpc_serve_stdio();
    direct.extend(server.iter().map(String::as_str));
    let direct = jrpc(&direct);
    assert!(direct.status.success(), "{}", text(&direct));
    let expected = verdicts(&direct);
    assert!(expected.len() >= 25, "{expected:?}");
    assert!(
        expected.iter().all(|(_, outcome)| outcome == "pass"),
        "{expected:?}"
    );
    let bridge = Bridge::start(&[], &server);
    for target in [&bridge.http, &bridge.ws, &bridge.tcp] {
        let mut args = CHECK.to_vec();
        args.push(target);
        let through = jrpc(&args);
        assert!(through.status.success(), "{target}: {}", text(&through));
        assert_eq!(verdicts(&through), expected, "{target}");
    }
}

/// A stdio server that knows nothing of malformed input, batches or odd
/// ids passes the check through the bridge, which answers those itself.
#[test]
fn a_lax_stdio_server_passes_the_check_through_the_bridge() {
    let bridge = Bridge::start(&[], &chatty_server());
    for target in [&bridge.http, &bridge.ws, &bridge.tcp] {
        let out = jrpc(&[
            "check", "--method", "add", "--params", "[1,2]", "--expect", "3", target,
        ]);
        assert!(out.status.success(), "{target}: {}", text(&out));
    }
}

/// Many clients sending the same ids at once each get their own answers.
#[test]
fn ids_from_many_clients_do_not_collide() {
    let bridge = Bridge::start(&[], &chatty_server());
    let addr = bridge.tcp.strip_prefix("tcp://").unwrap().to_owned();
    let workers: Vec<_> = (0..8)
        .map(|client| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let stream = TcpStream::connect(&addr).unwrap();
                stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                for round in 0..20 {
                    // Every client uses the ids 1 and "a".
                    let frame = json!([
                        {"jsonrpc": "2.0", "id": 1, "method": "add", "params": [client, round]},
                        {"jsonrpc": "2.0", "id": "a", "method": "add", "params": [client, 1000]},
                    ]);
                    writeln!(writer, "{frame}").unwrap();
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    let replies: Value = serde_json::from_str(&line).unwrap();
                    let by_id = |id: Value| {
                        replies
                            .as_array()
                            .unwrap()
                            .iter()
                            .find(|r| r["id"] == id)
                            .unwrap_or_else(|| panic!("no reply to {id} in {line}"))["result"]
                            .clone()
                    };
                    assert_eq!(by_id(json!(1)), json!(client + round));
                    assert_eq!(by_id(json!("a")), json!(client + 1000));
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
}

/// A client over WebSocket or TCP that answers `client.name` with `name`
/// and keeps the notifications it gets.
async fn talking_client(url: &str, name: &'static str) -> (Client, Arc<Mutex<Vec<Value>>>) {
    let heard = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&heard);
    let router = Router::new()
        .method("client.name", move |_: Value| async move {
            Ok::<_, jrpc::Error>(name)
        })
        .notification("progress", move |params: Value| {
            kept.lock().unwrap().push(params);
            async {}
        });
    // The notification arrives before the reply it preceded; the client
    // handles it before it hands that reply over.
    let client = Client::builder()
        .connection(jrpc::ConnectionConfig::default().ordered_responses(true))
        .router(router)
        .connect(url)
        .await
        .unwrap();
    (client, heard)
}

/// The child's notifications and requests go to the client whose call
/// caused them; with no call in flight, a notification goes to every
/// client and a request to the one that called last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_childs_messages_reach_the_client_that_caused_them() {
    let bridge = Bridge::start(&[], &chatty_server());
    let (alice, alice_heard) = talking_client(&bridge.ws, "alice").await;
    let (bob, bob_heard) = talking_client(&bridge.tcp, "bob").await;
    // Both have called once, so both can be reached.
    let _: i64 = bob.call("add", (1, 2)).await.unwrap();
    let _: i64 = alice.call("add", (1, 2)).await.unwrap();

    let done: String = alice.call("progress", ()).await.unwrap();
    assert_eq!(done, "done");
    let answer: Value = alice.call("ask", ()).await.unwrap();
    assert_eq!(answer, json!({"client said": "alice"}));
    let answer: Value = bob.call("ask", ()).await.unwrap();
    assert_eq!(answer, json!({"client said": "bob"}));
    let done: String = bob.call("progress", ()).await.unwrap();
    assert_eq!(done, "done");
    // A notification comes before the reply it preceded.
    assert_eq!(*alice_heard.lock().unwrap(), vec![json!({"percent": 50})]);
    assert_eq!(*bob_heard.lock().unwrap(), vec![json!({"percent": 50})]);

    // Over plain HTTP nobody can be asked: the child gets -32601.
    let http = Client::connect(&bridge.http).await.unwrap();
    drop((alice, bob));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let answer: Value = http.call("ask", ()).await.unwrap();
    assert_eq!(answer["client said"]["code"], json!(-32601), "{answer}");
}

/// Notifications reach the child; the child's errors come back whole.
#[test]
fn notifications_and_errors_pass_through() {
    let bridge = Bridge::start(&[], &chatty_server());
    let sent = jrpc(&["call", &bridge.http, "--notify", "note", "hello"]);
    assert!(sent.status.success(), "{}", text(&sent));
    let notes = jrpc(&["call", &bridge.tcp, "notes"]);
    assert_eq!(
        serde_json::from_slice::<Value>(&notes.stdout).unwrap_or_default(),
        json!(["hello"]),
        "{}",
        text(&notes)
    );
    // A notification and the request after it, in one write: in order.
    let stream = TcpStream::connect(bridge.tcp.strip_prefix("tcp://").unwrap()).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    for round in 0..20 {
        let note = json!({"jsonrpc": "2.0", "method": "note", "params": [format!("n{round}")]});
        let ask = json!({"jsonrpc": "2.0", "method": "notes", "id": round});
        writer.write_all(format!("{note}\n{ask}\n").as_bytes()).unwrap();
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let reply: Value = serde_json::from_str(&line).unwrap();
        let notes = reply["result"].as_array().unwrap();
        assert_eq!(notes.last(), Some(&json!(format!("n{round}"))), "{line}");
    }
    // Error data passes through as the child sent it, not redacted.
    let secret = jrpc(&["call", &bridge.http, "--envelope", "secret"]);
    let reply: Value = serde_json::from_slice(&secret.stdout).unwrap_or_else(|_| panic!("{}", text(&secret)));
    assert_eq!(reply["error"]["data"], json!({"token": "abc", "password": "xyz"}));
    let missing = jrpc(&["call", &bridge.ws, "--envelope", "no.such.method"]);
    let reply: Value =
        serde_json::from_slice(&missing.stdout).unwrap_or_else(|_| panic!("{}", text(&missing)));
    assert_eq!(
        reply["error"],
        json!({"code": -32601, "message": "Method not found", "data": "no.such.method"})
    );
}

/// Issue 33, then 44: a child that answers a request with a null-id error
/// (it could not read the request) does not leave the client hanging: the
/// error reaches the one call waiting, passed on as the child sent it —
/// with id null, as the specification has such an error — over HTTP (the
/// response to that POST) and over TCP.
#[test]
fn a_null_id_error_from_the_child_reaches_its_client_with_id_null() {
    let bridge = Bridge::start(&[], &chatty_server());
    let request = r#"{"jsonrpc":"2.0","method":"unreadable","id":41}"#;
    let started = Instant::now();
    let over_http = raw_post(&bridge.http, request);
    let mut tcp = TcpStream::connect(bridge.tcp.trim_start_matches("tcp://")).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    writeln!(tcp, "{request}").unwrap();
    let mut over_tcp = String::new();
    BufReader::new(&tcp).read_line(&mut over_tcp).unwrap();
    for (how, reply) in [("http", over_http), ("tcp", over_tcp)] {
        let reply: Value =
            serde_json::from_str(reply.trim()).unwrap_or_else(|e| panic!("{how}: {e}: {reply}"));
        assert_eq!(reply["error"]["code"], json!(-32700), "{how}: {reply}");
        assert_eq!(
            reply["id"],
            Value::Null,
            "{how}: passed on as the child sent it: {reply}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "answered, not timed out"
    );
    // The bridge goes on serving.
    let sum = jrpc(&["call", &bridge.http, "add", "1", "2"]);
    assert_eq!(String::from_utf8_lossy(&sum.stdout).trim(), "3", "{}", text(&sum));
}

/// With several calls waiting, a null-id error from the child matches none
/// of them: it is logged, and the calls end by the bridged-call timeout
/// (`--call-timeout`), saying so.
#[test]
fn a_null_id_error_with_several_calls_waiting_ends_them_by_the_timeout() {
    let bridge = Bridge::start(&["--call-timeout", "1s"], &chatty_server());
    let slow = {
        let http = bridge.http.clone();
        std::thread::spawn(move || jrpc(&["call", &http, "--timeout", "30", "hang"]))
    };
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let out = jrpc(&["call", &bridge.http, "--timeout", "30", "unreadable"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "ended by the bridged-call timeout: {err}"
    );
    let hung = slow.join().unwrap();
    assert_ne!(hung.status.code(), Some(0), "{}", text(&hung));
    let logged = bridge.stderr.lock().unwrap().join("\n");
    assert!(logged.contains("none can be told to be it"), "{logged}");
}

/// An HTTP/1.1 POST of `body` to `url`: the response's body.
fn raw_post(url: &str, body: &str) -> String {
    let authority = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(authority).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        stream,
        "POST / HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    std::io::Read::read_to_string(&mut stream, &mut reply).unwrap();
    reply.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned()
}

/// A child that dies is started again with backoff; the call in flight
/// fails with a clear error, and later calls reach the new child.
#[test]
fn a_child_that_dies_is_started_again() {
    let bridge = Bridge::start(&[], &chatty_server());
    let pid = |target: &str| {
        let out = jrpc(&["call", target, "pid"]);
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let first = pid(&bridge.http);
    let died = jrpc(&["call", &bridge.tcp, "--envelope", "die"]);
    let reply: Value = serde_json::from_slice(&died.stdout).unwrap_or_else(|_| panic!("{}", text(&died)));
    assert_eq!(reply["error"]["code"], json!(-32603), "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("exited"), "{message}");
    assert!(
        reply["error"]["data"]
            .as_str()
            .unwrap()
            .contains("exit status: 3"),
        "{reply}"
    );
    // Calls made while it restarts wait for it (within 10 s).
    let second = pid(&bridge.http);
    assert_ne!(first, second);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !bridge.stderr().contains("starting it again") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        bridge
            .stderr()
            .contains("exited (child process python3 exited (exit status: 3)); starting it again"),
        "{}",
        bridge.stderr()
    );
}

/// `jrpc serve`'s limits and call logs apply to the calls bridged.
#[test]
fn the_limits_and_logs_of_jrpc_serve_apply() {
    let bridge = Bridge::start(&["--max-batch-len", "2", "--log-calls"], &chatty_server());
    let addr = bridge.tcp.strip_prefix("tcp://").unwrap();
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let call = |id: i64| json!({"jsonrpc": "2.0", "id": id, "method": "add", "params": [id, id]});
    writeln!(writer, "{}", json!([call(1), call(2), call(3)])).unwrap();
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["error"]["code"], json!(-32002), "{line}");
    writeln!(writer, "{}", call(21)).unwrap();
    line.clear();
    reader.read_line(&mut line).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&line).unwrap()["result"], json!(42));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !bridge.stderr().contains("add") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(bridge.stderr().contains("add"), "{}", bridge.stderr());
}

/// A command that cannot start is an error at once, not a restart loop;
/// the two ways of bridging exclude each other.
#[test]
fn usage_errors_are_named() {
    let out = jrpc(&["bridge", "--http", "127.0.0.1:0", "--", "/no/such/program"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("cannot start"), "{}", text(&out));
    let out = jrpc(&["bridge"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = jrpc(&["bridge", "--stdio", "tcp://127.0.0.1:1", "--tcp", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}
