//! Errors a newcomer meets first: each says what went wrong, names the
//! target, and exits with the documented code (2 usage, 3 transport).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

const JRPC: &str = env!("CARGO_BIN_EXE_jrpc");

fn jrpc(args: &[&str]) -> Output {
    Command::new(JRPC)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `jrpc serve ARGS`, its first listener's address; stopped on drop.
struct Served {
    child: Child,
    target: String,
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
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let target = loop {
            let line = lines.next().expect("jrpc serve exited early").unwrap();
            if let Some(rest) = line.strip_prefix("jrpc: listening on ") {
                break rest.split_whitespace().next().unwrap().to_owned();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Served { child, target }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn malformed_listen_addresses_are_usage_errors() {
    for args in [
        ["serve", "--http", "nonsense"],
        ["serve", "--tcp", "127.0.0.1:99999"],
        ["serve", "--http", "::1:4000"],
        ["serve", "--metrics-addr", ":4000"],
    ] {
        let out = jrpc(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("HOST:PORT") || stderr(&out).contains("port"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn a_port_out_of_range_is_a_usage_error_naming_the_target() {
    for target in ["http://127.0.0.1:99999", "ws://127.0.0.1:99999"] {
        let out = jrpc(&["call", target, "add", "1", "2"]);
        assert_eq!(out.status.code(), Some(2), "{target}: {}", stderr(&out));
        assert!(stderr(&out).contains(target), "{target}: {}", stderr(&out));
        assert!(stderr(&out).contains("99999"), "{}", stderr(&out));
    }
}

#[test]
fn transport_failures_name_the_target() {
    // Nothing listens on port 1.
    for target in ["http://127.0.0.1:1", "tcp://127.0.0.1:1", "ws://127.0.0.1:1"] {
        let out = jrpc(&["call", target, "add", "1", "2"]);
        assert_eq!(out.status.code(), Some(3), "{target}: {}", stderr(&out));
        assert!(stderr(&out).contains(target), "{target}: {}", stderr(&out));
    }
}

#[test]
fn a_zero_timeout_is_refused() {
    let out = jrpc(&["call", "tcp://127.0.0.1:1", "add", "1", "2", "--timeout", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn ipv6_literal_targets_connect() {
    let served = Served::start(&["--http", "[::1]:0"]);
    let ws = served.target.replacen("http", "ws", 1);
    for target in [served.target.as_str(), ws.as_str()] {
        let out = jrpc(&["call", target, "add", "1", "2"]);
        assert_eq!(out.status.code(), Some(0), "{target}: {}", stderr(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "3");
    }
}

/// Writes a certificate and key; `ca` makes it a CA certificate, as
/// `openssl req -x509` does by default.
fn certificate(dir: &std::path::Path, name: &str, ca: bool) -> (String, String) {
    let mut params =
        rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    if ca {
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    }
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let cert_path = dir.join(format!("{name}-cert.pem"));
    let key_path = dir.join(format!("{name}-key.pem"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (cert_path.display().to_string(), key_path.display().to_string())
}

#[test]
fn tls_failures_say_what_to_do() {
    let dir = std::env::temp_dir().join(format!("jrpc-tls-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ca_cert, ca_key) = certificate(&dir, "ca", true);
    let (ee_cert, ee_key) = certificate(&dir, "leaf", false);
    let ca_server = Served::start(&[
        "--http",
        "127.0.0.1:0",
        "--tls-cert",
        &ca_cert,
        "--tls-key",
        &ca_key,
    ]);
    let leaf_server = Served::start(&[
        "--http",
        "127.0.0.1:0",
        "--tls-cert",
        &ee_cert,
        "--tls-key",
        &ee_key,
    ]);
    let plain = Served::start(&["--http", "127.0.0.1:0"]);

    // A CA certificate used as the server's: say how to make a usable one.
    let out = jrpc(&["call", &ca_server.target, "add", "1", "2", "--cacert", &ca_cert]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("CA:FALSE"), "{}", stderr(&out));
    // A certificate not trusted: point at --cacert.
    let out = jrpc(&["call", &leaf_server.target, "add", "1", "2"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("--cacert"), "{}", stderr(&out));
    // Trusted: works.
    let out = jrpc(&["call", &leaf_server.target, "add", "1", "2", "--cacert", &ee_cert]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The raw-frame commands trust it too, over https:// and wss://.
    let wss = leaf_server.target.replacen("https", "wss", 1);
    for target in [&leaf_server.target, &wss] {
        let out = jrpc(&["check", target, "--cacert", &ee_cert]);
        assert_eq!(out.status.code(), Some(0), "{target}: {}", stderr(&out));
        let out = jrpc(&[
            "call",
            target,
            "--envelope",
            "add",
            "1",
            "2",
            "--cacert",
            &ee_cert,
        ]);
        assert_eq!(out.status.code(), Some(0), "{target}: {}", stderr(&out));
    }
    // https:// to a plain server.
    let https = plain.target.replacen("http", "https", 1);
    let out = jrpc(&["call", &https, "add", "1", "2"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("does not speak TLS"), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Waits (at most 10 s) until `path` contains `needle`.
fn file_contains(path: &std::path::Path, needle: &str) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if std::fs::read_to_string(path).is_ok_and(|text| text.contains(needle)) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

/// Issue 11, item 8: a notification sent by `jrpc call --notify` (or a batch
/// of notifications) reaches the server before `jrpc call` exits, over a
/// spawned child and over WebSocket.
#[test]
fn notifications_are_not_lost_when_jrpc_call_exits() {
    let dir = std::env::temp_dir().join(format!("jrpc-notify-exit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // A child: its call log goes to the stderr `jrpc call` passes on.
    let child_log = dir.join("child.log");
    let out = Command::new(JRPC)
        .args([
            "call",
            "--notify",
            "notify_hello",
            "[1]",
            "--",
            JRPC,
            "serve",
            "--stdio",
            "--log-calls",
        ])
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&child_log).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        file_contains(&child_log, "method=notify_hello"),
        "the child never handled the notification: {}",
        std::fs::read_to_string(&child_log).unwrap_or_default()
    );

    // WebSocket, a single notification and a batch of notifications only.
    let server_log = dir.join("server.log");
    let mut server = Command::new(JRPC)
        .args(["serve", "--http", "127.0.0.1:0", "--log-calls"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&server_log).unwrap())
        .spawn()
        .unwrap();
    assert!(
        file_contains(&server_log, "jrpc: listening on "),
        "the server did not start"
    );
    let log = std::fs::read_to_string(&server_log).unwrap();
    let http = log
        .lines()
        .find_map(|l| l.strip_prefix("jrpc: listening on "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_owned();
    let ws = http.replacen("http", "ws", 1);
    let out = jrpc(&["call", &ws, "--notify", "notify_sum", "[1,2]"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = jrpc(&[
        "call",
        &ws,
        "--batch",
        r#"[{"jsonrpc":"2.0","method":"update","params":[7]}]"#,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let seen_sum = file_contains(&server_log, "method=notify_sum");
    let seen_update = file_contains(&server_log, "method=update");
    let _ = server.kill();
    let _ = server.wait();
    let log = std::fs::read_to_string(&server_log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(seen_sum, "the WebSocket notification was lost: {log}");
    assert!(
        seen_update,
        "the WebSocket batch of notifications was lost: {log}"
    );
}
