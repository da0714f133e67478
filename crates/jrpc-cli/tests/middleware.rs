//! End to end: the per-call middleware of `jrpc serve` (--log-calls,
//! --redact, --metrics, --metrics-addr, --call-timeout, --rate-limit,
//! --cancel) on every transport, checked from the outside: the replies, the
//! call log on stderr and the Prometheus page.
//!
//! The clients here are small and local on purpose (raw TCP, Unix sockets,
//! pipes, a minimal WebSocket and HTTP/1.1 client), so that a call travels
//! exactly as a foreign client would send it.

#![cfg(unix)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const JRPC: &str = env!("CARGO_BIN_EXE_jrpc");

/// The longest any one wait in these tests may take before it fails.
const WAIT: Duration = Duration::from_secs(10);

// ---- the server ----

/// A `jrpc serve`, with its stderr forwarded line by line so that tests can
/// wait for a line; stopped (SIGTERM) on drop.
struct Served {
    child: Child,
    stderr: Receiver<String>,
    /// Every stderr line received so far.
    seen: Vec<String>,
    /// The addresses of the `jrpc: listening on ADDR ...` lines, in order.
    targets: Vec<String>,
    /// The URL of the `jrpc: metrics at URL` line.
    metrics_url: Option<String>,
    /// With --stdio: the server's stdin and stdout, until [`Served::stdio`].
    stdio: Option<(ChildStdin, ChildStdout)>,
    stdio_mode: bool,
}

impl Served {
    /// Starts `jrpc serve ARGS` and waits until every listener is up.
    fn start(args: &[&str]) -> Served {
        let stdio_mode = args.contains(&"--stdio");
        let pipe = || if stdio_mode { Stdio::piped() } else { Stdio::null() };
        let mut child = Command::new(JRPC)
            .arg("serve")
            .args(args)
            .stdin(pipe())
            .stdout(pipe())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn jrpc serve");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            // Keeps draining after the test stops listening, so that the
            // server never blocks on a full pipe.
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let stdio = stdio_mode.then(|| (child.stdin.take().unwrap(), child.stdout.take().unwrap()));
        let mut served = Served {
            child,
            stderr: rx,
            seen: Vec::new(),
            targets: Vec::new(),
            metrics_url: None,
            stdio,
            stdio_mode,
        };
        let listeners = args
            .iter()
            .filter(|a| matches!(**a, "--tcp" | "--unix" | "--http"))
            .count();
        let wants_metrics_url = args.contains(&"--metrics-addr");
        let deadline = Instant::now() + WAIT;
        while served.targets.len() < listeners || (wants_metrics_url && served.metrics_url.is_none()) {
            let Some(line) = served.next_line(deadline) else {
                panic!(
                    "jrpc serve {args:?} did not start; stderr:\n{}",
                    served.seen.join("\n")
                );
            };
            if let Some(rest) = line.strip_prefix("jrpc: listening on ") {
                served.targets.push(first_word(rest));
            } else if let Some(rest) = line.strip_prefix("jrpc: metrics at ") {
                served.metrics_url = Some(first_word(rest));
            }
        }
        served
    }

    /// The next stderr line; `None` at the deadline or once stderr closed.
    fn next_line(&mut self, deadline: Instant) -> Option<String> {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = self.stderr.recv_timeout(left).ok()?;
        self.seen.push(line.clone());
        Some(line)
    }

    /// The first stderr line, seen already or arriving within `within`,
    /// that `matches`.
    fn wait_for(&mut self, what: &str, within: Duration, matches: impl Fn(&str) -> bool) -> String {
        if let Some(line) = self.seen.iter().find(|line| matches(line)) {
            return line.clone();
        }
        let deadline = Instant::now() + within;
        while let Some(line) = self.next_line(deadline) {
            if matches(&line) {
                return line;
            }
        }
        panic!(
            "no stderr line with {what} within {within:?}; stderr:\n{}",
            self.seen.join("\n")
        );
    }

    /// The listener whose address starts with `scheme`.
    fn target(&self, scheme: &str) -> String {
        self.targets
            .iter()
            .find(|t| t.starts_with(scheme))
            .unwrap_or_else(|| panic!("no {scheme} listener in {:?}", self.targets))
            .clone()
    }

    /// A client of this server over `transport`: tcp, unix, http, websocket
    /// or stdio.
    fn connect(&mut self, transport: &str) -> Conn {
        match transport {
            "stdio" => {
                let (stdin, stdout) = self.stdio.take().expect("started with --stdio, connected once");
                Conn::lines(stdout, stdin)
            }
            "tcp" => Conn::connect(&self.target("tcp://")),
            "unix" => Conn::connect(&self.target("unix:")),
            "http" => Conn::connect(&self.target("http://")),
            "websocket" => Conn::connect(&self.target("http://").replacen("http", "ws", 1)),
            other => panic!("no transport {other}"),
        }
    }

    /// Stops the server and returns its whole stderr. A --stdio server
    /// stops at the end of its stdin: drop its [`Conn`] first.
    fn finish(mut self) -> String {
        if self.stdio_mode {
            self.stdio = None;
        } else {
            sigterm(&self.child);
        }
        if wait_bounded(&mut self.child, WAIT).is_none() {
            panic!("jrpc serve did not stop; stderr:\n{}", self.seen.join("\n"));
        }
        // stderr is complete once the forwarding thread hangs up.
        let deadline = Instant::now() + WAIT;
        while self.next_line(deadline).is_some() {}
        self.seen.join("\n")
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stdio = None;
        if matches!(self.child.try_wait(), Ok(None)) {
            sigterm(&self.child);
            if wait_bounded(&mut self.child, WAIT).is_none() {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
    }
}

fn sigterm(child: &Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
}

/// The child's exit status, or `None` if it still runs after `within`.
fn wait_bounded(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `jrpc ARGS` to its end, killing it (and failing) after `within`.
fn run(args: &[&str], within: Duration) -> Output {
    let mut child = Command::new(JRPC)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn jrpc");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let Some(status) = wait_bounded(&mut child, within) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("jrpc {args:?} still running after {within:?}");
    };
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

fn first_word(text: &str) -> String {
    text.split_whitespace().next().unwrap_or_default().to_owned()
}

fn socket_path(tag: &str) -> String {
    let path = std::env::temp_dir().join(format!("jrpc-mw-{}-{tag}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path.to_str().unwrap().to_owned()
}

// ---- JSON-RPC clients ----

fn request(method: &str, params: Value, id: u64) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params, "id": id}).to_string()
}

/// A batch of `add [id, 1]` calls with ids 1..=n.
fn batch_of_adds(n: u64) -> String {
    let entries: Vec<Value> = (1..=n)
        .map(|id| json!({"jsonrpc": "2.0", "method": "add", "params": [id, 1], "id": id}))
        .collect();
    Value::Array(entries).to_string()
}

/// Where a line-framed client writes; hanging up shuts a socket down even
/// while the reading thread holds a clone of it.
trait Outgoing: Write + Send {
    fn hang_up(&self) {}
}

impl Outgoing for TcpStream {
    fn hang_up(&self) {
        let _ = self.shutdown(Shutdown::Both);
    }
}

impl Outgoing for UnixStream {
    fn hang_up(&self) {
        let _ = self.shutdown(Shutdown::Both);
    }
}

impl Outgoing for ChildStdin {}

/// One client connection.
enum Conn {
    /// TCP, a Unix socket or stdio: one JSON text per line.
    Lines {
        write: Box<dyn Outgoing>,
        replies: Receiver<String>,
    },
    WebSocket {
        stream: TcpStream,
        replies: Receiver<String>,
    },
    /// One POST (and one connection) per frame sent.
    Http { addr: String, replies: VecDeque<String> },
}

impl Conn {
    fn connect(target: &str) -> Conn {
        if let Some(addr) = target.strip_prefix("tcp://") {
            let stream = TcpStream::connect(addr).expect("connect over TCP");
            Conn::lines(stream.try_clone().unwrap(), stream)
        } else if let Some(path) = target.strip_prefix("unix:") {
            let stream = UnixStream::connect(path).expect("connect over a Unix socket");
            Conn::lines(stream.try_clone().unwrap(), stream)
        } else if let Some(addr) = target.strip_prefix("ws://") {
            Conn::websocket(addr.trim_end_matches('/'))
        } else if let Some(addr) = target.strip_prefix("http://") {
            Conn::Http {
                addr: addr.trim_end_matches('/').to_owned(),
                replies: VecDeque::new(),
            }
        } else {
            panic!("not a target: {target}")
        }
    }

    fn lines(read: impl Read + Send + 'static, write: impl Outgoing + 'static) -> Conn {
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(read).lines().map_while(Result::ok) {
                if !line.trim().is_empty() && tx.send(line).is_err() {
                    break;
                }
            }
        });
        Conn::Lines {
            write: Box::new(write),
            replies: rx,
        }
    }

    fn websocket(addr: &str) -> Conn {
        let mut stream = TcpStream::connect(addr).expect("connect for a WebSocket");
        let upgrade = format!(
            "GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        stream.write_all(upgrade.as_bytes()).unwrap();
        // The response head, byte by byte, so that no frame byte is taken.
        stream.set_read_timeout(Some(WAIT)).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            stream.read_exact(&mut byte).expect("the WebSocket handshake");
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head);
        assert!(
            head.starts_with("HTTP/1.1 101"),
            "WebSocket upgrade refused:\n{head}"
        );
        stream.set_read_timeout(None).unwrap();
        let mut reader = stream.try_clone().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            while let Some(text) = read_ws_message(&mut reader) {
                if tx.send(text).is_err() {
                    break;
                }
            }
        });
        Conn::WebSocket { stream, replies: rx }
    }

    fn send(&mut self, frame: &str) {
        match self {
            Conn::Lines { write, .. } => {
                write
                    .write_all(format!("{frame}\n").as_bytes())
                    .expect("send a line");
                write.flush().unwrap();
            }
            Conn::WebSocket { stream, .. } => stream.write_all(&ws_frame(frame)).expect("send a frame"),
            Conn::Http { addr, replies } => {
                let response = http_exchange(addr, "POST", "/", Some(frame));
                if !response.body.is_empty() {
                    replies.push_back(response.body);
                }
            }
        }
    }

    /// The next reply, whatever its id.
    fn recv(&mut self) -> Value {
        let text = match self {
            Conn::Lines { replies, .. } | Conn::WebSocket { replies, .. } => replies
                .recv_timeout(WAIT)
                .unwrap_or_else(|e| panic!("no reply within {WAIT:?}: {e}")),
            Conn::Http { replies, .. } => replies.pop_front().expect("the HTTP response had no body"),
        };
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("a reply that is not JSON ({e}): {text}"))
    }

    fn call(&mut self, frame: &str) -> Value {
        self.send(frame);
        self.recv()
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        match self {
            Conn::Lines { write, .. } => write.hang_up(),
            Conn::WebSocket { stream, .. } => {
                let _ = stream.shutdown(Shutdown::Both);
            }
            Conn::Http { .. } => {}
        }
    }
}

/// A masked text frame, as a client must send it.
fn ws_frame(text: &str) -> Vec<u8> {
    let payload = text.as_bytes();
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    let mut frame = vec![0x81]; // FIN, text
    match payload.len() {
        n if n < 126 => frame.push(0x80 | n as u8),
        n if n <= 0xffff => {
            frame.push(0x80 | 126);
            frame.extend((n as u16).to_be_bytes());
        }
        n => {
            frame.push(0x80 | 127);
            frame.extend((n as u64).to_be_bytes());
        }
    }
    frame.extend(mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    frame
}

/// The next text or binary message; `None` at a close frame or the end of
/// the stream. Pings and pongs are skipped.
fn read_ws_message(stream: &mut impl Read) -> Option<String> {
    let mut message = Vec::new();
    loop {
        let mut head = [0u8; 2];
        stream.read_exact(&mut head).ok()?;
        let (fin, opcode) = (head[0] & 0x80 != 0, head[0] & 0x0f);
        let len = match head[1] & 0x7f {
            126 => {
                let mut n = [0u8; 2];
                stream.read_exact(&mut n).ok()?;
                u64::from(u16::from_be_bytes(n))
            }
            127 => {
                let mut n = [0u8; 8];
                stream.read_exact(&mut n).ok()?;
                u64::from_be_bytes(n)
            }
            n => u64::from(n),
        };
        let mut mask = None;
        if head[1] & 0x80 != 0 {
            let mut m = [0u8; 4];
            stream.read_exact(&mut m).ok()?;
            mask = Some(m);
        }
        let mut payload = vec![0u8; usize::try_from(len).ok()?];
        stream.read_exact(&mut payload).ok()?;
        if let Some(m) = mask {
            payload.iter_mut().enumerate().for_each(|(i, b)| *b ^= m[i % 4]);
        }
        match opcode {
            0x8 => return None,
            0x9 | 0xa => continue,
            _ => message.extend(payload),
        }
        if fin {
            return String::from_utf8(message).ok();
        }
    }
}

struct HttpResponse {
    status: u16,
    /// Names lowercased.
    headers: Vec<(String, String)>,
    body: String,
}

impl HttpResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`).
fn http_exchange(addr: &str, method: &str, path: &str, body: Option<&str>) -> HttpResponse {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let body = body.unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .unwrap_or_else(|e| panic!("{method} http://{addr}{path}: {e}"));
    let raw = String::from_utf8(raw).expect("a UTF-8 response");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a whole HTTP response");
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|status_line| status_line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {raw:?}"));
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let response = HttpResponse {
        status,
        headers,
        body: body.to_owned(),
    };
    assert!(
        response.header("transfer-encoding").is_none(),
        "this client reads Content-Length bodies only: {raw}"
    );
    response
}

// ---- what the server says ----

/// The Prometheus page at `url` (http://HOST:PORT/metrics).
fn scrape(url: &str) -> String {
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (addr, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let page = http_exchange(addr, "GET", path, None);
    assert_eq!(page.status, 200, "GET {url}: {}", page.body);
    assert!(
        page.header("content-type")
            .is_some_and(|t| t.starts_with("text/plain")),
        "GET {url}: content type {:?}",
        page.header("content-type")
    );
    page.body
}

/// The value of the sample `name{labels}` on a Prometheus page, with
/// exactly these labels in any order.
fn sample(page: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut wanted = labels.to_vec();
    wanted.sort_unstable();
    page.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (metric, label_text) = match series.split_once('{') {
            Some((metric, rest)) => (metric, rest.strip_suffix('}')?),
            None => (series, ""),
        };
        let mut found: Vec<(&str, &str)> = label_text
            .split(',')
            .filter(|pair| !pair.is_empty())
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k, v.trim_matches('"')))
            .collect();
        found.sort_unstable();
        (metric == name && found == wanted)
            .then(|| value.parse().ok())
            .flatten()
    })
}

/// Waits until the sample has `value` on the page at `url`.
fn wait_for_sample(url: &str, name: &str, labels: &[(&str, &str)], value: f64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let page = scrape(url);
        if sample(&page, name, labels) == Some(value) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name}{labels:?} is not {value} after {WAIT:?}:\n{page}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// The value of `name=` in a log line, unquoted (`method="add"` and
/// `method=add` both give `add`).
fn field(line: &str, name: &str) -> Option<String> {
    let at = line.find(&format!(" {name}="))? + name.len() + 2;
    let rest = &line[at..];
    let Some(quoted) = rest.strip_prefix('"') else {
        return Some(first_word(rest));
    };
    let mut value = String::new();
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => value.push(chars.next()?),
            '"' => return Some(value),
            c => value.push(c),
        }
    }
    None
}

/// Whether `line` is a call log line (target `jrpc::call`) with these
/// field values.
fn is_call_line(line: &str, fields: &[(&str, &str)]) -> bool {
    line.contains(" jrpc::call:")
        && fields
            .iter()
            .all(|(name, value)| field(line, name).as_deref() == Some(*value))
}

fn error_code(reply: &Value) -> Option<i64> {
    reply["error"]["code"].as_i64()
}

// ---- the tests ----

#[test]
fn calls_on_every_listener_are_logged_and_counted() {
    let socket = socket_path("logged");
    let mut served = Served::start(&[
        "--http",
        "127.0.0.1:0",
        "--tcp",
        "127.0.0.1:0",
        "--unix",
        &socket,
        "--metrics",
        "--log-calls",
    ]);
    // One method per transport, so that the counters tell them apart.
    let cases = [
        ("tcp", "add", json!([1, 2]), json!(3)),
        ("unix", "echo", json!(["hi"]), json!("hi")),
        ("websocket", "subtract", json!([42, 23]), json!(19)),
        ("http", "sum", json!([1, 2, 3]), json!(6)),
    ];
    let mut open = Vec::new();
    for (transport, method, params, result) in &cases {
        let mut conn = served.connect(transport);
        let reply = conn.call(&request(method, params.clone(), 1));
        assert_eq!(reply["result"], *result, "{transport}: {reply}");
        let line = served.wait_for(&format!("the {transport} call to {method}"), WAIT, |line| {
            is_call_line(
                line,
                &[
                    ("method", method),
                    ("transport", transport),
                    ("outcome", "ok"),
                    ("id", "1"),
                ],
            )
        });
        assert!(field(&line, "duration").is_some(), "{line}");
        assert!(
            field(&line, "params").is_none(),
            "brief lines carry no params: {line}"
        );
        open.push(conn);
    }

    let page = scrape(&format!("{}/metrics", served.target("http://")));
    for (_, method, ..) in &cases {
        let ok = [("code", ""), ("method", method), ("outcome", "ok")];
        assert_eq!(
            sample(&page, "jrpc_calls_total", &ok),
            Some(1.0),
            "{method}:\n{page}"
        );
        assert_eq!(
            sample(&page, "jrpc_call_duration_seconds_count", &[("method", method)]),
            Some(1.0),
            "{method}:\n{page}"
        );
    }
    assert_eq!(sample(&page, "jrpc_calls_in_flight", &[]), Some(0.0), "{page}");
    for transport in ["tcp", "unix", "websocket"] {
        assert_eq!(
            sample(&page, "jrpc_connections_open", &[("transport", transport)]),
            Some(1.0),
            "{transport} connection still open:\n{page}"
        );
    }
    drop(open);
    drop(served);
    let _ = std::fs::remove_file(&socket);
}

#[test]
fn stdio_calls_are_logged_and_counted_on_the_metrics_port() {
    let mut served = Served::start(&["--stdio", "--log-calls", "--metrics-addr", "127.0.0.1:0"]);
    let url = served.metrics_url.clone().unwrap();
    let mut conn = served.connect("stdio");
    let reply = conn.call(&request("echo", json!(["over stdio"]), 1));
    assert_eq!(reply["result"], "over stdio", "{reply}");
    served.wait_for("the stdio call to echo", WAIT, |line| {
        is_call_line(
            line,
            &[
                ("method", "echo"),
                ("transport", "stdio"),
                ("outcome", "ok"),
                ("id", "1"),
            ],
        )
    });
    let page = scrape(&url);
    let ok = [("code", ""), ("method", "echo"), ("outcome", "ok")];
    assert_eq!(sample(&page, "jrpc_calls_total", &ok), Some(1.0), "{page}");
    assert_eq!(
        sample(&page, "jrpc_connections_open", &[("transport", "stdio")]),
        Some(1.0),
        "{page}"
    );
    drop(conn);
    served.finish();
}

#[test]
fn secrets_never_reach_the_call_log_or_error_replies() {
    const SECRETS: [&str; 3] = ["hunter2", "t0ps3cret", "98765"];
    let mut served = Served::start(&["--stdio", "--log-calls=full", "--redact", "pin"]);
    let mut conn = served.connect("stdio");

    let account = json!({"user": "ann", "password": "hunter2", "nested": {"Token": "t0ps3cret"}});
    let reply = conn.call(&request("echo", json!([account]), 1));
    assert_eq!(
        reply["result"], account,
        "the caller gets its own value back untouched"
    );
    let reply = conn.call(&request("echo", json!([{"user": "ann", "pin": "98765"}]), 2));
    assert_eq!(reply["result"]["pin"], "98765", "{reply}");

    // Secrets where typed methods want numbers: the -32602 error describes
    // the bad value, and must not quote the secret in it.
    let wrong_types = [
        (3, "add", json!({"a": {"password": "hunter2"}, "b": 1})),
        (4, "add", json!([{"token": "t0ps3cret"}, 1])),
        (5, "sum", json!([1, {"nested": {"password": "hunter2"}}])),
        (
            6,
            "subtract",
            json!({"minuend": {"pin": "98765"}, "subtrahend": 1}),
        ),
        (7, "add", json!({"a": 1, "b": 2, "password": "hunter2"})),
    ];
    for (id, method, params) in &wrong_types {
        let reply = conn.call(&request(method, params.clone(), *id));
        assert_eq!(error_code(&reply), Some(-32602), "{method} {params}: {reply}");
        let text = reply.to_string();
        for secret in SECRETS {
            assert!(
                !text.contains(secret),
                "{method} {params}: the error reply leaks {secret}: {text}"
            );
        }
    }
    drop(conn);
    let stderr = served.finish();

    let calls: Vec<&str> = stderr.lines().filter(|l| l.contains(" jrpc::call:")).collect();
    assert_eq!(calls.len(), 2 + wrong_types.len(), "one line per call:\n{stderr}");
    for secret in SECRETS {
        assert!(!stderr.contains(secret), "stderr leaks {secret}:\n{stderr}");
    }
    let echo = calls
        .iter()
        .find(|l| is_call_line(l, &[("method", "echo"), ("id", "1")]))
        .unwrap_or_else(|| panic!("no line for the echo call:\n{stderr}"));
    for name in ["params", "result"] {
        let logged = field(echo, name).unwrap_or_else(|| panic!("no {name}= in full mode: {echo}"));
        assert!(
            logged.contains("[REDACTED]") && logged.contains("ann"),
            "{name} is logged, its secrets redacted: {echo}"
        );
    }
    let pin = calls
        .iter()
        .find(|l| is_call_line(l, &[("method", "echo"), ("id", "2")]))
        .unwrap_or_else(|| panic!("no line for the pin call:\n{stderr}"));
    assert!(
        field(pin, "params").is_some_and(|p| p.contains("[REDACTED]")),
        "--redact pin: {pin}"
    );
    for (id, method, _) in &wrong_types {
        let id = id.to_string();
        assert!(
            calls
                .iter()
                .any(|l| is_call_line(l, &[("method", method), ("id", &id), ("outcome", "error")])),
            "no error line for {method} id {id}:\n{stderr}"
        );
    }
}

/// The replies to five calls sent at once, as (ok, refused) counts.
fn five_quick_calls(conn: &mut Conn) -> (usize, usize) {
    for id in 1..=5 {
        conn.send(&request("add", json!([id, 1]), id));
    }
    let replies: Vec<Value> = (0..5).map(|_| conn.recv()).collect();
    let ok = replies.iter().filter(|r| r.get("result").is_some()).count();
    let refused: Vec<&Value> = replies.iter().filter(|r| error_code(r) == Some(-32005)).collect();
    assert_eq!(ok + refused.len(), 5, "only results and -32005: {replies:?}");
    for reply in &refused {
        assert!(
            reply["error"]["data"]["retry_after_ms"]
                .as_u64()
                .is_some_and(|ms| ms >= 1),
            "a refusal says when to retry: {reply}"
        );
    }
    (ok, refused.len())
}

#[test]
fn rate_limit_refuses_calls_over_the_budget_on_every_transport() {
    let socket = socket_path("rate");
    let cases: [(&str, &[&str]); 5] = [
        ("tcp", &["--tcp", "127.0.0.1:0"]),
        ("unix", &["--unix", &socket]),
        ("stdio", &["--stdio"]),
        ("websocket", &["--http", "127.0.0.1:0"]),
        ("http", &["--http", "127.0.0.1:0"]),
    ];
    for (transport, listen) in cases {
        // A server of its own for each, so that each starts with a full budget.
        let mut served = Served::start(&[listen, &["--rate-limit", "1"]].concat());
        let mut conn = served.connect(transport);
        // 1 call a second, bursts of 2: five at once cannot all pass.
        let (ok, refused) = five_quick_calls(&mut conn);
        assert!(ok >= 1, "{transport}: the first calls are within the burst");
        assert!(refused >= 1, "{transport}: {ok} of 5 calls passed, none refused");
        drop(conn);
        drop(served);
    }
    let _ = std::fs::remove_file(&socket);
}

#[test]
fn each_batch_entry_is_charged_to_the_rate_limit() {
    let mut served = Served::start(&["--tcp", "127.0.0.1:0", "--rate-limit", "1"]);
    let mut conn = served.connect("tcp");
    let reply = conn.call(&batch_of_adds(5));
    let entries = reply
        .as_array()
        .unwrap_or_else(|| panic!("a batch reply: {reply}"));
    assert_eq!(entries.len(), 5, "one reply per entry: {reply}");
    for id in 1..=5 {
        assert!(
            entries.iter().any(|e| e["id"] == id),
            "no reply for id {id}: {reply}"
        );
    }
    let ok = entries.iter().filter(|e| e.get("result").is_some()).count();
    let refused = entries.iter().filter(|e| error_code(e) == Some(-32005)).count();
    assert!(ok >= 1 && refused >= 1 && ok + refused == 5, "{reply}");
}

#[test]
fn rate_limited_http_requests_get_429_only_when_every_call_is_refused() {
    let served = Served::start(&["--http", "127.0.0.1:0", "--rate-limit", "1"]);
    let http = served.target("http://");
    let addr = http.strip_prefix("http://").unwrap();

    // A batch on a fresh budget: some entries pass, so 200 with per-entry
    // refusals.
    let response = http_exchange(addr, "POST", "/", Some(&batch_of_adds(5)));
    assert_eq!(response.status, 200, "{}", response.body);
    let entries: Vec<Value> = serde_json::from_str(&response.body).unwrap();
    assert_eq!(entries.len(), 5, "{}", response.body);
    assert!(
        entries.iter().any(|e| error_code(e) == Some(-32005))
            && entries.iter().any(|e| e.get("result").is_some()),
        "{}",
        response.body
    );

    // The budget is spent: a request whose only call is refused is a 429.
    let single = request("add", json!([1, 2]), 9);
    let refused = (0..20)
        .map(|_| http_exchange(addr, "POST", "/", Some(&single)))
        .find(|response| response.status != 200)
        .expect("20 quick requests at 1/s are not all answered 200");
    assert_eq!(refused.status, 429, "{}", refused.body);
    let retry_after = refused
        .header("retry-after")
        .unwrap_or_else(|| panic!("no Retry-After: {:?}", refused.headers));
    assert!(
        retry_after.parse::<u64>().is_ok_and(|s| s >= 1),
        "Retry-After in whole seconds: {retry_after}"
    );
    let body: Value = serde_json::from_str(&refused.body).unwrap();
    assert_eq!(error_code(&body), Some(-32005), "{body}");
}

#[test]
fn call_timeout_cancels_slow_handlers_on_every_transport() {
    let socket = socket_path("timeout");
    let mut served = Served::start(&[
        "--tcp",
        "127.0.0.1:0",
        "--unix",
        &socket,
        "--http",
        "127.0.0.1:0",
        "--call-timeout",
        "200ms",
    ]);
    let mut stdio = Served::start(&["--stdio", "--call-timeout", "200ms"]);
    let conns = [
        ("tcp", served.connect("tcp")),
        ("unix", served.connect("unix")),
        ("websocket", served.connect("websocket")),
        ("http", served.connect("http")),
        ("stdio", stdio.connect("stdio")),
    ];
    for (transport, mut conn) in conns {
        let started = Instant::now();
        let reply = conn.call(&request("sleep", json!([5000]), 1));
        let took = started.elapsed();
        assert_eq!(error_code(&reply), Some(-32006), "{transport}: {reply}");
        assert_eq!(reply["id"], 1, "{transport}: {reply}");
        assert!(
            took < Duration::from_secs(4),
            "{transport}: the 200ms deadline answered only after {took:?}"
        );
        let reply = conn.call(&request("sleep", json!([1]), 2));
        assert_eq!(reply["result"], 1, "{transport}: a quick call passes: {reply}");
    }
    drop(served);
    let _ = std::fs::remove_file(&socket);
}

#[test]
fn jrpc_call_timing_out_cancels_the_call_on_the_server() {
    let mut served = Served::start(&["--tcp", "127.0.0.1:0", "--cancel", "lsp", "--log-calls"]);
    let target = served.target("tcp://");
    let started = Instant::now();
    let out = run(
        &[
            "call",
            &target,
            "sleep",
            "20000",
            "--timeout",
            "300ms",
            "--cancel",
            "lsp",
        ],
        WAIT,
    );
    assert_eq!(
        out.status.code(),
        Some(4),
        "a timeout: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    served.wait_for("a cancelled sleep", Duration::from_secs(5), |line| {
        is_call_line(
            line,
            &[
                ("method", "sleep"),
                ("transport", "tcp"),
                ("outcome", "cancelled"),
            ],
        )
    });
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "cancelled after {took:?}, for a 20 s sleep"
    );
}

/// What the caller of `sleep` sees once the cancel notification is sent.
enum Then {
    /// An error reply with this code.
    Error(i64),
    /// No reply at all (the call is dropped).
    Nothing,
    /// The sleep's result: the notification meant nothing.
    Result(u64),
}

#[test]
fn cancel_notifications_stop_a_call_only_in_the_servers_protocol() {
    let lsp = json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}});
    let mcp = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 7, "reason": "test"}});
    // (--cancel, the notification sent, sleep ms, what the caller sees)
    let cases = [
        ("lsp", &lsp, 20_000, Then::Error(-32800)),
        ("mcp", &mcp, 20_000, Then::Nothing),
        ("none", &lsp, 1_000, Then::Result(1_000)),
        ("lsp", &mcp, 1_000, Then::Result(1_000)),
    ];
    for (protocol, notification, ms, then) in cases {
        let mut served = Served::start(&[
            "--tcp",
            "127.0.0.1:0",
            "--cancel",
            protocol,
            "--log-calls",
            "--metrics-addr",
            "127.0.0.1:0",
        ]);
        let metrics = served.metrics_url.clone().unwrap();
        let mut conn = served.connect("tcp");
        conn.send(&request("sleep", json!([ms]), 7));
        // Cancel only what the server is running.
        wait_for_sample(&metrics, "jrpc_calls_in_flight", &[], 1.0);
        conn.send(&notification.to_string());
        let what = format!("--cancel {protocol}, {}", notification["method"]);
        let sleep_line = |outcome: &'static str| {
            move |line: &str| is_call_line(line, &[("method", "sleep"), ("id", "7"), ("outcome", outcome)])
        };
        match then {
            Then::Error(code) => {
                let reply = conn.recv();
                assert_eq!(error_code(&reply), Some(code), "{what}: {reply}");
                assert_eq!(reply["id"], 7, "{what}: {reply}");
                served.wait_for(
                    "a cancelled sleep",
                    Duration::from_secs(5),
                    sleep_line("cancelled"),
                );
            }
            Then::Nothing => {
                served.wait_for(
                    "a cancelled sleep",
                    Duration::from_secs(5),
                    sleep_line("cancelled"),
                );
                let reply = conn.call(&request("add", json!([1, 2]), 8));
                assert_eq!(reply["id"], 8, "{what}: no reply for the cancelled call: {reply}");
                assert_eq!(reply["result"], 3, "{what}: {reply}");
            }
            Then::Result(result) => {
                let reply = conn.recv();
                assert_eq!(reply["result"], result, "{what}: not cancelled: {reply}");
                served.wait_for("a sleep that ended", WAIT, sleep_line("ok"));
            }
        }
        wait_for_sample(&metrics, "jrpc_calls_in_flight", &[], 0.0);
    }
}

#[test]
fn try_it_lines_point_at_the_rpc_listener_not_the_metrics_port() {
    for listen in ["--http", "--tcp"] {
        let mut served = Served::start(&[listen, "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"]);
        let listener = served.targets[0].clone();
        if listen == "--http" {
            // They follow the listening lines: not stopped before them.
            served.wait_for("the try-it lines", WAIT, |l| l.contains("jrpc call "));
        }
        let metrics_url = served.metrics_url.clone().unwrap();
        let metrics_base = metrics_url.strip_suffix("/metrics").unwrap().to_owned();
        let stderr = served.finish();
        let suggestions: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("curl ") || l.contains("jrpc call "))
            .collect();
        let points_at_metrics = suggestions.iter().any(|l| {
            l.split_whitespace()
                .any(|word| word.trim_end_matches('/') == metrics_base)
        });
        assert!(
            !points_at_metrics,
            "{listen}: the try-it lines send JSON-RPC calls to the metrics port \
             {metrics_base}, which serves only /metrics:\n{stderr}"
        );
        if listen == "--http" {
            assert!(
                suggestions
                    .iter()
                    .any(|l| l.contains(&format!("jrpc call {listener} "))),
                "the try-it lines name the HTTP listener {listener}:\n{stderr}"
            );
        }
    }
}

#[test]
fn middleware_flags_are_checked() {
    // (args, exit code or None for any failure, text the message must have)
    let cases: [(&[&str], Option<i32>, &str); 7] = [
        (&["--tcp", "127.0.0.1:0", "--metrics"], None, "--metrics-addr"),
        (&["--stdio", "--metrics"], None, "--metrics-addr"),
        (
            &["--tcp", "127.0.0.1:0", "--call-timeout", "0"],
            Some(2),
            "--call-timeout",
        ),
        (
            &["--tcp", "127.0.0.1:0", "--call-timeout", "soon"],
            Some(2),
            "--call-timeout",
        ),
        (&["--tcp", "127.0.0.1:0", "--log-calls=bogus"], Some(2), "bogus"),
        (&["--tcp", "127.0.0.1:0", "--cancel", "bogus"], Some(2), "bogus"),
        (
            &["--tcp", "127.0.0.1:0", "--rate-limit", "lots"],
            Some(2),
            "--rate-limit",
        ),
    ];
    for (args, code, says) in cases {
        let out = run(&[&["serve"], args].concat(), WAIT);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted: {stderr}");
        if let Some(code) = code {
            assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        }
        assert!(
            stderr.contains(says),
            "{args:?}: the message names {says}: {stderr}"
        );
    }
}

/// `--max-concurrent-calls 1`: two slow calls on two connections run one
/// after the other, so the second one's wait counts against its deadline.
/// Without the bound both finish well within it.
#[test]
fn max_concurrent_calls_makes_calls_wait_their_turn() {
    for (bounded, second_refused) in [(true, true), (false, false)] {
        let mut args = vec!["--tcp", "127.0.0.1:0", "--call-timeout", "1500ms"];
        if bounded {
            args.extend(["--max-concurrent-calls", "1"]);
        }
        let mut served = Served::start(&args);
        let mut first = served.connect("tcp");
        let mut second = served.connect("tcp");
        first.send(&request("sleep", json!([1000]), 1));
        // Let the first call take the only turn before the second asks.
        std::thread::sleep(Duration::from_millis(100));
        second.send(&request("sleep", json!([1000]), 2));
        let first_reply = first.recv();
        let second_reply = second.recv();
        assert_eq!(first_reply["result"], 1000, "bounded={bounded}: {first_reply}");
        let expected = second_refused.then_some(-32006);
        assert_eq!(
            error_code(&second_reply),
            expected,
            "bounded={bounded}: {second_reply}"
        );
    }
}
