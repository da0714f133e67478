//! End to end through real brokers: `jrpc serve --nats/--mqtt/--amqp`
//! started twice on one subject, topic or queue, `jrpc call` and `jrpc
//! bench` against it, both servers taking calls, `jrpc check` passing; a
//! server killed (SIGKILL) under load.

#[path = "../../jrpc/tests/common/brokers.rs"]
#[allow(dead_code)]
mod brokers;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use brokers::{Broker, Kind};
use serde_json::{json, Value};

const JRPC: &str = env!("CARGO_BIN_EXE_jrpc");

/// A `jrpc serve` on a broker, its stderr collected; killed on drop.
struct Served {
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Served {
    fn start(args: &[&str]) -> Served {
        let mut child = Command::new(JRPC)
            .arg("serve")
            .args(args)
            .arg("--log-calls")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        loop {
            let mut line = String::new();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "jrpc serve exited early"
            );
            if line.starts_with("jrpc: listening on ") {
                break;
            }
        }
        let collected = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&collected);
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                let mut sink = sink.lock().unwrap();
                sink.push_str(&line);
                sink.push('\n');
            }
        });
        Served {
            child,
            stderr: collected,
        }
    }

    /// Calls to `method` in the call log so far.
    fn logged(&self, method: &str) -> usize {
        let needle = format!("method={method}");
        self.stderr
            .lock()
            .unwrap()
            .lines()
            .filter(|l| l.contains(&needle))
            .count()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.kill();
    }
}

/// All the errors a `jrpc bench --json` report counts.
fn errors(report: &Value) -> u64 {
    report["errors"]
        .as_object()
        .map_or(u64::MAX, |e| e.values().filter_map(Value::as_u64).sum())
}

fn jrpc(args: &[&str]) -> Output {
    Command::new(JRPC).args(args).output().unwrap()
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

/// The `jrpc serve` flags and the `jrpc call` target for `address`.
fn flags_and_target(broker: &Broker, kind: Kind, address: &str) -> (Vec<String>, String) {
    let url = broker.url();
    match kind {
        Kind::Nats => (
            vec!["--nats".into(), url.clone(), "--subject".into(), address.into()],
            format!("{url}/{address}"),
        ),
        Kind::Mosquitto => (
            vec!["--mqtt".into(), url.clone(), "--topic".into(), address.into()],
            format!("{url}/{address}"),
        ),
        Kind::RabbitMq => (
            vec!["--amqp".into(), url.clone(), "--queue".into(), address.into()],
            format!("{url}?queue={address}"),
        ),
    }
}

/// Two servers on one address: `jrpc call` gets 19, and a short bench
/// spreads calls over both.
fn two_servers_share_the_calls(kind: Kind, address: &str) {
    let broker = Broker::start(kind);
    let (flags, target) = flags_and_target(&broker, kind, address);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let servers = [Served::start(&flags), Served::start(&flags)];
    let out = jrpc(&["call", &target, "subtract", "42", "23"]);
    assert_eq!(stdout_json(&out), json!(19));
    // The broker connection closes cleanly: nothing logged on the way out.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("ERROR") && !stderr.contains("WARN"), "{stderr}");
    // The whole reply as it came, and the conformance check: malformed
    // frames reach the servers and their error replies come back.
    let out = jrpc(&["call", &target, "--envelope", "subtract", "42", "23"]);
    assert_eq!(
        stdout_json(&out),
        json!({"jsonrpc": "2.0", "result": 19, "id": 1})
    );
    let out = jrpc(&[
        "check", &target, "--method", "subtract", "--params", "[42,23]", "--expect", "19",
    ]);
    assert!(
        out.status.success(),
        "jrpc check {target}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let out = jrpc(&[
        "bench", &target, "add", "1", "2", "-c", "4", "-m", "16", "-n", "2000", "--json",
    ]);
    let report = stdout_json(&out);
    assert_eq!(errors(&report), 0, "{report}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("ERROR"), "{stderr}");
    // The call log is written as calls finish; wait for it, bounded.
    let deadline = Instant::now() + Duration::from_secs(20);
    while servers.iter().map(|s| s.logged("add")).sum::<usize>() < 2001 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let counts: Vec<usize> = servers.iter().map(|s| s.logged("add")).collect();
    // The bench's 2 000, and the one call it makes first to check the method.
    assert_eq!(counts.iter().sum::<usize>(), 2001, "{counts:?}");
    assert!(
        counts.iter().all(|&n| n > 0),
        "both servers take calls: {counts:?}"
    );
}

#[test]
fn nats_two_servers_share_the_calls() {
    two_servers_share_the_calls(Kind::Nats, "demo");
}

#[test]
fn mqtt_two_servers_share_the_calls() {
    two_servers_share_the_calls(Kind::Mosquitto, "demo/rpc");
}

#[test]
fn amqp_two_servers_share_the_calls() {
    two_servers_share_the_calls(Kind::RabbitMq, "demo");
}

/// One of two AMQP servers is killed (SIGKILL) while a bench runs: the
/// broker gives its unacknowledged calls to the other, and none is lost.
#[test]
fn amqp_a_killed_server_loses_no_call() {
    let broker = Broker::start(Kind::RabbitMq);
    let (flags, target) = flags_and_target(&broker, Kind::RabbitMq, "killed");
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut doomed = Served::start(&flags);
    let _survivor = Served::start(&flags);
    let bench = std::thread::spawn(move || {
        jrpc(&[
            "bench",
            &target,
            "sleep",
            "5",
            "-c",
            "4",
            "-m",
            "16",
            "-n",
            "1500",
            "--timeout",
            "30s",
            "--json",
        ])
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while doomed.logged("sleep") < 50 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    doomed.kill();
    let report = stdout_json(&bench.join().unwrap());
    assert_eq!(errors(&report), 0, "{report}");
}

/// `jrpc call` to a NATS subject nobody serves fails at once, saying so.
#[test]
fn nats_no_responders_is_reported() {
    let broker = Broker::start(Kind::Nats);
    let out = jrpc(&[
        "call",
        &format!("{}/nobody", broker.url()),
        "subtract",
        "42",
        "23",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not delivered: no responders"), "{stderr}");
}
