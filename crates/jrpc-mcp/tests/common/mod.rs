//! What the end-to-end tests share: a client speaking raw lines over a pipe
//! ([`Wire`]) and raw HTTP/1.1 requests ([`send`]), so that what the tests
//! check is the wire, not this crate's own client.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use jrpc::codec::Framing;
use jrpc::transport::Connection;
use jrpc_mcp::server::{McpContext, McpServer, NoArgs, ToolError};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};
use tokio::net::TcpStream;

/// A client speaking raw lines to a server on the other end of a pipe.
pub struct Wire {
    writer: WriteHalf<DuplexStream>,
    lines: tokio::io::Lines<BufReader<ReadHalf<DuplexStream>>>,
    next_id: i64,
}

impl Wire {
    pub fn start(server: &McpServer) -> Self {
        let (ours, theirs) = tokio::io::duplex(1 << 20);
        let (read, write) = tokio::io::split(theirs);
        let info = jrpc::router::ConnectionInfo {
            transport: "pipe",
            peer_addr: None,
            local_addr: None,
        };
        let peer = server.connect(Connection::over_io(read, write, Framing::Ndjson, 1 << 20, info));
        // The session lives as long as the pipe.
        std::mem::forget(peer);
        let (read, writer) = tokio::io::split(ours);
        Wire {
            writer,
            lines: BufReader::new(read).lines(),
            next_id: 1,
        }
    }

    pub async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.writer.write_all(line.as_bytes()).await.unwrap();
    }

    /// The next message from the server, or `None` when none comes within
    /// `wait`.
    pub async fn next_within(&mut self, wait: Duration) -> Option<Value> {
        match tokio::time::timeout(wait, self.lines.next_line()).await {
            Ok(Ok(Some(line))) => Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))),
            Ok(other) => panic!("the server closed the pipe: {other:?}"),
            Err(_) => None,
        }
    }

    pub async fn next(&mut self) -> Value {
        self.next_within(Duration::from_secs(10))
            .await
            .expect("a message within 10 s")
    }

    /// Sends a request and returns its response; messages before it
    /// (notifications, requests from the server) go to `other`.
    pub async fn request_collecting(&mut self, method: &str, params: Value, other: &mut Vec<Value>) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let message = self.next().await;
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return message;
            }
            other.push(message);
        }
    }

    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let mut other = Vec::new();
        let response = self.request_collecting(method, params, &mut other).await;
        assert!(
            other.is_empty(),
            "unexpected messages before the response: {other:?}"
        );
        response
    }

    pub async fn initialize_with(&mut self, capabilities: Value) -> Value {
        let response = self
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
                       "clientInfo": {"name": "wire-test", "version": "1.0"}}),
            )
            .await;
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        response
    }

    pub async fn initialize(&mut self) -> Value {
        self.initialize_with(json!({})).await
    }

    pub async fn call_tool(&mut self, name: &str, arguments: Value) -> Value {
        let response = self
            .request("tools/call", json!({"name": name, "arguments": arguments}))
            .await;
        response["result"].clone()
    }
}

pub fn text(result: &Value) -> &str {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {result}"))
}

/// Fails the test instead of hanging.
pub async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish"))
}

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// The JSON messages of an SSE body, in order.
    pub fn events(&self) -> Vec<Value> {
        self.body
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            // An event with only an id (to resume from) carries no message.
            .filter(|data| !data.is_empty())
            .map(|data| serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}")))
            .collect()
    }
}

/// Undoes chunked transfer encoding.
pub fn dechunk(body: &str) -> String {
    String::from_utf8(dechunk_bytes(body.as_bytes())).expect("a text body")
}

/// Undoes chunked transfer encoding, of any bytes.
pub fn dechunk_bytes(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line) = body.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&body[..line])
            .ok()
            .and_then(|size| usize::from_str_radix(size.trim(), 16).ok());
        let rest = &body[line + 2..];
        let Some(size) = size.filter(|&size| size > 0 && rest.len() >= size) else {
            break;
        };
        out.extend_from_slice(&rest[..size]);
        body = rest[size..].strip_prefix(b"\r\n").unwrap_or(&rest[size..]);
    }
    out
}

/// One request on its own connection, the reply read to its end: its head
/// (status line and headers) and its body's bytes, de-chunked.
pub async fn exchange(addr: &str, method: &str, headers: &[(&str, &str)], body: &str) -> (String, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut request = format!("{method} /mcp HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        request += &format!("Host: {addr}\r\n");
    }
    for (name, value) in headers {
        request += &format!("{name}: {value}\r\n");
    }
    request += &format!("Content-Length: {}\r\n\r\n{body}", body.len());
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    bounded("the reply", stream.read_to_end(&mut raw)).await.unwrap();
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header section");
    let head = String::from_utf8(raw[..end].to_vec()).expect("a text head");
    let chunked = head
        .to_ascii_lowercase()
        .contains("\r\ntransfer-encoding: chunked");
    let body = &raw[end + 4..];
    let body = if chunked {
        dechunk_bytes(body)
    } else {
        body.to_vec()
    };
    (head, body)
}

/// One request on its own connection; the reply read to its end.
pub async fn send(addr: &str, method: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let (head, body) = exchange(addr, method, headers, body).await;
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: String::from_utf8(body).expect("a text body"),
    }
}

pub async fn post(addr: &str, session: Option<&str>, message: Value) -> Reply {
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    if let Some(session) = session {
        headers.push(("Mcp-Session-Id", session));
    }
    send(addr, "POST", &headers, &message.to_string()).await
}

/// Two ends of an in-memory connection (newline-delimited).
pub fn pipe() -> (Connection, Connection) {
    let (a, b) = tokio::io::duplex(1 << 20);
    let info = |name| jrpc::router::ConnectionInfo {
        transport: name,
        peer_addr: None,
        local_addr: None,
    };
    let (ar, aw) = tokio::io::split(a);
    let (br, bw) = tokio::io::split(b);
    (
        Connection::over_io(ar, aw, Framing::Ndjson, 1 << 20, info("pipe")),
        Connection::over_io(br, bw, Framing::Ndjson, 1 << 20, info("pipe")),
    )
}

/// A server whose tool `wait` sleeps for a minute, counting in `cancelled`
/// the calls whose cancellation it saw.
pub fn waiting_server(cancelled: &Arc<AtomicUsize>) -> McpServer {
    let seen = Arc::clone(cancelled);
    McpServer::builder("cancel", "1")
        .tool(
            "wait",
            "Waits until cancelled",
            move |_: NoArgs, cx: McpContext| {
                let seen = Arc::clone(&seen);
                async move {
                    let token = cx.cancellation();
                    tokio::spawn(async move {
                        token.cancelled().await;
                        seen.fetch_add(1, Ordering::SeqCst);
                    });
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    Ok::<_, ToolError>("never")
                }
            },
        )
        .build()
}

/// Once `cancelled` has counted to `count` (the test fails if it never
/// does).
pub async fn cancelled_at_least(cancelled: &AtomicUsize, count: usize) {
    bounded("the server sees the cancellation", async {
        while cancelled.load(Ordering::SeqCst) < count {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}
