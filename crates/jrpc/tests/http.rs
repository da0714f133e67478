#![cfg(feature = "http")]
//! HTTP and WebSocket end to end over real sockets: statuses, compression,
//! TLS with a generated certificate, auth, rate limits, timeouts,
//! WebSocket callbacks, keepalive and backpressure, many clients, retries.

use std::convert::Infallible;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use jrpc::client::HttpError;
use jrpc::client::{Client, Retry, WsOptions};
use jrpc::server::http::{HttpServer, RateLimit};
use jrpc::server::Serving;
use jrpc::{CallError, Error, RequestContext, Router};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish"))
}

async fn serve(server: HttpServer) -> (Serving, String) {
    let serving = server.bind("127.0.0.1:0").await.unwrap();
    let url = serving.local_addr().to_owned();
    (serving, url)
}

/// A raw HTTP/1.1 exchange: (status, headers in lower case, body).
struct Raw {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
}

async fn raw(url: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Raw {
    let addr = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        request += &format!("Host: {addr}\r\n");
    }
    for (name, value) in headers {
        request += &format!("{name}: {value}\r\n");
    }
    if !headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding"))
    {
        request += &format!("Content-Length: {}\r\n", body.len());
    }
    request += "\r\n";
    stream.write_all(request.as_bytes()).await.unwrap();
    let _ = stream.write_all(body).await;
    let mut response = Vec::new();
    bounded("response", stream.read_to_end(&mut response))
        .await
        .unwrap();
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header section");
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = response[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Raw {
        status,
        headers,
        body,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&data[..line_end]).unwrap().trim(), 16).unwrap();
        data = &data[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

const JSON: (&str, &str) = ("Content-Type", "application/json");

#[tokio::test]
async fn http_statuses_follow_the_protocol() {
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router().max_frame_len(1000))).await;
    let call = br#"{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}"#;

    let ok = raw(&url, "POST", "/", &[JSON], call).await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.header("content-type"), Some("application/json"));
    assert_eq!(ok.json(), json!({"jsonrpc":"2.0","result":19,"id":1}));

    let batch = raw(
        &url,
        "POST",
        "/",
        &[("Content-Type", "application/json; charset=utf-8")],
        br#"[{"jsonrpc":"2.0","method":"sum","params":[1,2],"id":1},{"jsonrpc":"2.0","method":"update"}]"#,
    )
    .await;
    assert_eq!(batch.json(), json!([{"jsonrpc":"2.0","result":3,"id":1}]));

    let notification = raw(
        &url,
        "POST",
        "/",
        &[JSON],
        br#"{"jsonrpc":"2.0","method":"update","params":[1]}"#,
    )
    .await;
    assert_eq!(notification.status, 204, "notifications only: no content");
    assert!(notification.body.is_empty(), "never `null`");
    let notifications = raw(
        &url,
        "POST",
        "/",
        &[JSON],
        br#"[{"jsonrpc":"2.0","method":"update"},{"jsonrpc":"2.0","method":"notify_hello","params":[7]}]"#,
    )
    .await;
    assert_eq!((notifications.status, notifications.body.len()), (204, 0));

    let parse_error = raw(&url, "POST", "/", &[JSON], b"{not json").await;
    assert_eq!(parse_error.status, 200);
    assert_eq!(parse_error.json()["error"]["code"], -32700);

    for method in ["GET", "PUT", "DELETE"] {
        let refused = raw(&url, method, "/", &[JSON], b"").await;
        assert_eq!(refused.status, 405, "{method}");
        assert_eq!(refused.header("allow"), Some("POST, GET"));
        assert_eq!(refused.json()["error"]["code"], -32600);
    }

    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let headers: Vec<(&str, &str)> = content_type.map(|t| ("Content-Type", t)).into_iter().collect();
        let refused = raw(&url, "POST", "/", &headers, call).await;
        assert_eq!(refused.status, 415, "{content_type:?}");
        assert!(String::from_utf8_lossy(&refused.body).contains("application/json"));
    }

    let big = format!(
        r#"{{"jsonrpc":"2.0","method":"echo","params":["{}"],"id":1}}"#,
        "x".repeat(2000)
    );
    let too_large = raw(&url, "POST", "/", &[JSON], big.as_bytes()).await;
    assert_eq!(too_large.status, 413);
    assert_eq!(too_large.json()["error"]["code"], -32001);
    // Without a Content-Length, the limit is enforced while reading.
    let chunked_body = format!("{:x}\r\n{big}\r\n0\r\n\r\n", big.len());
    let chunked = raw(
        &url,
        "POST",
        "/",
        &[JSON, ("Transfer-Encoding", "chunked")],
        chunked_body.as_bytes(),
    )
    .await;
    assert_eq!(chunked.status, 413);

    let health = raw(&url, "GET", "/health", &[], b"").await;
    assert_eq!((health.status, health.json()), (200, json!({"status":"ok"})));
    let missing = raw(&url, "POST", "/elsewhere", &[JSON], call).await;
    assert_eq!(missing.status, 404);
    serving.shutdown().await;
}

#[tokio::test]
async fn gzip_both_ways() {
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router())).await;
    let text = "compressible ".repeat(500);
    let call = format!(r#"{{"jsonrpc":"2.0","method":"echo","params":["{text}"],"id":1}}"#);
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(call.as_bytes()).unwrap();
    let gz = encoder.finish().unwrap();
    let response = raw(
        &url,
        "POST",
        "/",
        &[JSON, ("Content-Encoding", "gzip"), ("Accept-Encoding", "gzip")],
        &gz,
    )
    .await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-encoding"), Some("gzip"));
    assert!(response.body.len() < text.len() / 4, "the reply is compressed");
    let mut plain = String::new();
    flate2::read::GzDecoder::new(&response.body[..])
        .read_to_string(&mut plain)
        .unwrap();
    let reply: Value = serde_json::from_str(&plain).unwrap();
    assert_eq!(reply["result"], text);

    let bad = raw(
        &url,
        "POST",
        "/",
        &[JSON, ("Content-Encoding", "compress")],
        call.as_bytes(),
    )
    .await;
    assert_eq!(bad.status, 415, "unknown encodings are refused");

    // A plain request that accepts gzip gets a large reply compressed, and
    // a small one as it is (compressing it would cost more than it saves).
    let large = raw(
        &url,
        "POST",
        "/",
        &[JSON, ("Accept-Encoding", "gzip")],
        call.as_bytes(),
    )
    .await;
    assert_eq!(large.status, 200);
    assert_eq!(large.header("content-encoding"), Some("gzip"));
    assert_eq!(large.header("vary"), Some("accept-encoding"));
    let mut unzipped = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&large.body[..]), &mut unzipped).unwrap();
    assert!(
        unzipped.starts_with(r#"{"jsonrpc":"2.0","result":""#),
        "{unzipped:.80}"
    );
    // br too, and an encoding the server does not have is answered as is.
    let br = raw(
        &url,
        "POST",
        "/",
        &[JSON, ("Accept-Encoding", "br")],
        call.as_bytes(),
    )
    .await;
    assert_eq!(br.header("content-encoding"), Some("br"));
    // Every field is read: the second one names gzip.
    let two = raw(
        &url,
        "POST",
        "/",
        &[JSON, ("Accept-Encoding", "identity"), ("Accept-Encoding", "gzip")],
        call.as_bytes(),
    )
    .await;
    assert_eq!(two.header("content-encoding"), Some("gzip"));
    let other = raw(
        &url,
        "POST",
        "/",
        &[JSON, ("Accept-Encoding", "zstd")],
        call.as_bytes(),
    )
    .await;
    assert_eq!(other.status, 200);
    assert_eq!(other.header("content-encoding"), None);
    assert!(other.body.starts_with(br#"{"jsonrpc":"2.0","result":""#));
    let small_call = br#"{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}"#;
    let small = raw(
        &url,
        "POST",
        "/",
        &[JSON, ("Accept-Encoding", "gzip")],
        small_call,
    )
    .await;
    assert_eq!(small.status, 200);
    assert_eq!(small.header("content-encoding"), None);
    assert_eq!(small.header("vary"), None);
    assert_eq!(small.body, br#"{"jsonrpc":"2.0","result":19,"id":1}"#);

    // With compression off, a compressed body is refused, not parsed.
    let (plain_serving, plain_url) = serve(HttpServer::new(jrpc::demo::router()).compression(false)).await;
    let refused = raw(
        &plain_url,
        "POST",
        "/",
        &[JSON, ("Content-Encoding", "gzip")],
        &gz,
    )
    .await;
    assert_eq!(
        refused.status, 415,
        "a server without compression cannot read gzip"
    );
    plain_serving.shutdown().await;

    // The client compresses large requests and decodes gzip replies.
    let client = Client::builder()
        .compress_requests(true)
        .connect(&url)
        .await
        .unwrap();
    let echoed: String = client.call("echo", [&text]).await.unwrap();
    assert_eq!(echoed, text);
    serving.shutdown().await;
}

fn self_signed() -> (tempdir::Dir, std::path::PathBuf, std::path::PathBuf) {
    let key =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    let dir = tempdir::Dir::new();
    let cert_path = dir.path.join("cert.pem");
    let key_path = dir.path.join("key.pem");
    std::fs::write(&cert_path, key.cert.pem()).unwrap();
    std::fs::write(&key_path, key.signing_key.serialize_pem()).unwrap();
    (dir, cert_path, key_path)
}

mod tempdir {
    pub struct Dir {
        pub path: std::path::PathBuf,
    }
    impl Dir {
        pub fn new() -> Dir {
            static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let path = std::env::temp_dir().join(format!("jrpc-http-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&path).unwrap();
            Dir { path }
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

#[tokio::test]
async fn tls_with_a_generated_certificate() {
    let (_dir, cert, key) = self_signed();
    let (serving, url) = serve(
        HttpServer::new(jrpc::demo::router())
            .tls_pem(&cert, &key)
            .unwrap(),
    )
    .await;
    assert!(url.starts_with("https://"), "{url}");
    for http2 in [false, true] {
        let client = Client::builder()
            .http2(http2)
            .ca_pem(&cert)
            .unwrap()
            .connect(&url)
            .await
            .unwrap();
        let sum: i64 = client.call("sum", [1, 2, 3]).await.unwrap();
        assert_eq!(sum, 6, "http2 = {http2}");
    }
    let wss = url.replacen("https", "wss", 1);
    let client = Client::builder()
        .ca_pem(&cert)
        .unwrap()
        .connect(&wss)
        .await
        .unwrap();
    assert_eq!(client.call::<i64>("add", [2, 3]).await.unwrap(), 5);
    // A client that does not trust the certificate fails to connect.
    let untrusted = Client::builder().connect(&url).await;
    if let Ok(client) = untrusted {
        let err = client.call::<Value>("get_data", ()).await.unwrap_err();
        assert!(err.is_closed() || matches!(err, CallError::Io(_)), "{err:?}");
    }
    serving.shutdown().await;
}

#[tokio::test]
async fn bearer_auth() {
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router()).auth_tokens(["s3cret"])).await;
    let call = br#"{"jsonrpc":"2.0","method":"get_data","id":1}"#;
    let refused = raw(&url, "POST", "/", &[JSON], call).await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.header("www-authenticate"), Some("Bearer"));
    assert_eq!(refused.json()["error"]["code"], -32004);
    let wrong = raw(&url, "POST", "/", &[JSON, ("Authorization", "Bearer nope")], call).await;
    assert_eq!(wrong.status, 401);
    let bearer = raw(
        &url,
        "POST",
        "/",
        &[JSON, ("Authorization", "Bearer s3cret")],
        call,
    )
    .await;
    assert_eq!(bearer.status, 200);
    let api_key = raw(&url, "POST", "/", &[JSON, ("X-Api-Key", "s3cret")], call).await;
    assert_eq!(api_key.status, 200);
    let health = raw(&url, "GET", "/health", &[], b"").await;
    assert_eq!(health.status, 200, "the health check needs no token");

    let client = Client::builder().connect(&url).await.unwrap();
    let err = client.call::<Value>("get_data", ()).await.unwrap_err();
    assert!(
        matches!(err.transport_error::<HttpError>(), Some(HttpError { status: 401, error: Some(e), .. }) if e.code() == -32004),
        "{err:?}"
    );
    let ws = url.replacen("http", "ws", 1);
    assert!(
        Client::connect(&ws).await.is_err(),
        "the WebSocket upgrade needs the token too"
    );
    let authed = Client::builder()
        .header("Authorization", "Bearer s3cret")
        .connect(&ws)
        .await
        .unwrap();
    assert_eq!(authed.call::<i64>("sum", [1]).await.unwrap(), 1);
    serving.shutdown().await;
}

#[tokio::test]
async fn rate_limits_over_http_and_websocket() {
    let (serving, url) =
        serve(HttpServer::new(jrpc::demo::router()).rate_limit(RateLimit::per_second(1, 2))).await;
    let call = br#"{"jsonrpc":"2.0","method":"get_data","id":1}"#;
    let statuses = [
        raw(&url, "POST", "/", &[JSON], call).await,
        raw(&url, "POST", "/", &[JSON], call).await,
        raw(&url, "POST", "/", &[JSON], call).await,
    ];
    assert_eq!(
        statuses.iter().map(|r| r.status).collect::<Vec<_>>(),
        [200, 200, 429]
    );
    let limited = &statuses[2];
    assert!(limited.header("retry-after").unwrap().parse::<u64>().unwrap() >= 1);
    assert_eq!(limited.json()["error"]["code"], -32005);
    serving.shutdown().await;

    // Over WebSocket, each refused request gets an error in the server range.
    let (serving, url) =
        serve(HttpServer::new(jrpc::demo::router()).rate_limit(RateLimit::per_second(1, 3))).await;
    let client = Client::connect(&url.replacen("http", "ws", 1)).await.unwrap();
    let mut outcomes = Vec::new();
    for _ in 0..4 {
        outcomes.push(client.call::<Value>("get_data", ()).await);
    }
    // The upgrade request itself took one token.
    let refused = outcomes
        .iter()
        .filter(|o| matches!(o, Err(CallError::Rpc(e)) if e.code() == -32005))
        .count();
    assert!(refused >= 1, "{outcomes:?}");
    assert!(outcomes[0].is_ok());
    serving.shutdown().await;
}

#[tokio::test]
async fn request_timeout_answers_504() {
    let (serving, url) =
        serve(HttpServer::new(jrpc::demo::router()).request_timeout(Duration::from_millis(100))).await;
    let slow = raw(
        &url,
        "POST",
        "/",
        &[JSON],
        br#"{"jsonrpc":"2.0","method":"sleep","params":[2000],"id":1}"#,
    )
    .await;
    assert_eq!(
        slow.status, 504,
        "not 503: a timed-out request is not safe to retry"
    );
    assert_eq!(slow.json()["error"]["code"], -32006);
    serving.shutdown().await;
}

#[tokio::test]
async fn websocket_server_calls_the_client() {
    let router = Router::new().method("greet", |(): (), ctx: RequestContext| async move {
        assert_eq!(ctx.connection_info().unwrap().transport, "websocket");
        let name: String = ctx
            .peer()
            .unwrap()
            .call("whoami", ())
            .await
            .map_err(|e| Error::new(-32000, "callback failed").with_data(&e.to_string()))?;
        ctx.peer().unwrap().notify("greeted", [&name]).await.ok();
        Ok(format!("hello, {name}"))
    });
    let (serving, url) = serve(HttpServer::new(router)).await;
    let greeted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&greeted);
    let client = Client::builder()
        .router(
            Router::new()
                .sync_method("whoami", || Ok("ann"))
                .sync_notification("greeted", move |(_,): (String,)| {
                    counter.fetch_add(1, Ordering::SeqCst);
                }),
        )
        .connect(&url.replacen("http", "ws", 1))
        .await
        .unwrap();
    let greeting: String = bounded("greet", client.call("greet", ())).await.unwrap();
    assert_eq!(greeting, "hello, ann");
    bounded("notification", async {
        while greeted.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    serving.shutdown().await;
}

/// Performs a WebSocket handshake by hand and returns the raw socket.
async fn raw_websocket(url: &str) -> TcpStream {
    let addr = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        stream.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(
        head.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
        "the accept key per RFC 6455: {head}"
    );
    stream
}

/// A masked client text frame.
fn text_frame(payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![0x81];
    match payload.len() {
        n if n < 126 => frame.push(0x80 | n as u8),
        n if n <= u16::MAX as usize => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    let mask = [1u8, 2, 3, 4];
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    frame
}

/// A demo server whose WebSocket pings every `ping_ms` and gives up after
/// `idle_ms` of silence, and a raw WebSocket to it.
async fn pinging_websocket(ping_ms: u64, idle_ms: u64) -> (Serving, TcpStream) {
    let options = WsOptions {
        ping_interval: Duration::from_millis(ping_ms),
        idle_timeout: Duration::from_millis(idle_ms),
        ..WsOptions::default()
    };
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router()).websocket(Some(options))).await;
    (serving, raw_websocket(&url).await)
}

#[tokio::test]
async fn silent_websocket_clients_are_closed_after_the_idle_limit() {
    let (serving, mut socket) = pinging_websocket(100, 300).await;
    // Never answer the pings: the server must hang up.
    let mut seen = Vec::new();
    let closed = bounded("idle close", async {
        let mut buf = [0u8; 1024];
        loop {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return true,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(closed);
    assert!(seen.first() == Some(&0x89), "the server pinged first: {seen:?}");
    assert!(
        seen.windows(1).any(|w| w[0] == 0x88),
        "and sent a close frame: {seen:?}"
    );
    serving.shutdown().await;
}

/// A masked client control frame (Pong is 0xA) carrying `payload`.
fn control_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = text_frame(payload);
    frame[0] = 0x80 | opcode;
    frame
}

/// An unused connection is kept by a small waiter (no WebSocket state yet)
/// that pings and takes pongs itself: a client that only answers pings must
/// stay connected past the idle limit, and its first call, even when it
/// comes in the same write as a pong, must then be served as usual.
#[tokio::test]
async fn an_unused_websocket_that_answers_pings_stays_open_and_is_served() {
    let (serving, mut socket) = pinging_websocket(50, 200).await;
    bounded("pings answered past the idle limit", async {
        let started = std::time::Instant::now();
        let mut pings = 0;
        while started.elapsed() < Duration::from_millis(600) {
            let (opcode, payload) = read_ws_frame(&mut socket).await;
            assert_eq!(opcode, 0x9, "only pings before the client says anything");
            pings += 1;
            // Pongs of every shape a client may send: empty, echoing the
            // ping, and one with the longest payload a control frame may
            // carry, written a byte at a time.
            match pings % 3 {
                0 => socket.write_all(&control_frame(0xA, &payload)).await.unwrap(),
                1 => socket.write_all(&control_frame(0xA, b"")).await.unwrap(),
                _ => {
                    for byte in control_frame(0xA, &[7u8; 125]) {
                        socket.write_all(&[byte]).await.unwrap();
                    }
                }
            }
        }
        assert!(pings >= 8, "pinged every 50 ms: {pings} pings");
    })
    .await;
    // A pong and the first call in one write.
    let mut both = control_frame(0xA, b"late");
    both.extend(text_frame(
        br#"{"jsonrpc":"2.0","method":"add","params":[2,3],"id":7}"#,
    ));
    socket.write_all(&both).await.unwrap();
    let reply = bounded("the first call's reply", async {
        loop {
            match read_ws_frame(&mut socket).await {
                (0x9, _) => {
                    socket.write_all(&control_frame(0xA, b"")).await.unwrap();
                }
                (opcode, payload) => {
                    assert_eq!(opcode, 0x1, "a text frame");
                    return serde_json::from_slice::<Value>(&payload).unwrap();
                }
            }
        }
    })
    .await;
    assert_eq!(reply, json!({"jsonrpc": "2.0", "result": 5, "id": 7}));
    serving.shutdown().await;
}

/// Shutting the server down closes an unused WebSocket with a Close frame,
/// as it does a used one.
#[tokio::test]
async fn shutdown_closes_an_unused_websocket_with_a_close_frame() {
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router())).await;
    let mut socket = raw_websocket(&url).await;
    let shutdown = tokio::spawn(serving.shutdown());
    let (opcode, _) = bounded("the close frame", read_ws_frame(&mut socket)).await;
    assert_eq!(opcode, 0x8, "a Close frame");
    // Answer it, as a client does, so the server's handshake completes.
    socket.write_all(&control_frame(0x8, b"")).await.unwrap();
    bounded("the shutdown", shutdown).await.unwrap();
}

#[tokio::test]
async fn a_websocket_client_that_stops_reading_cannot_grow_server_memory() {
    let handled = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&handled);
    let router = Router::new().sync_method("blob", move |(): ()| {
        count.fetch_add(1, Ordering::SeqCst);
        Ok("y".repeat(64 * 1024))
    });
    let options = WsOptions {
        idle_timeout: Duration::from_secs(1),
        ..WsOptions::default()
    };
    let (serving, url) = serve(HttpServer::new(router).websocket(Some(options))).await;
    let socket = raw_websocket(&url).await;
    let (_read, mut write) = socket.into_split();
    // Far more than fit anywhere: the kernel alone may hold hundreds of the
    // 64 KiB replies (loopback receive buffers grow to tcp_rmem's maximum,
    // 32 MiB on some machines), and 1 100-1 800 were served here.
    let sent = 6000usize;
    let writer = tokio::spawn(async move {
        let frame = text_frame(br#"{"jsonrpc":"2.0","method":"blob","id":1}"#);
        for _ in 0..sent {
            if write.write_all(&frame).await.is_err() {
                break;
            }
        }
        write
    });
    // Nothing is read. The server answers until its bounded buffers and the
    // socket fill up, then stops reading, then gives up on the stalled write.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let served = handled.load(Ordering::SeqCst);
    eprintln!("served {served} of {sent} while the client read nothing");
    assert!(
        served < sent / 2,
        "the server stopped taking requests: {served} of {sent} served"
    );
    assert!(served > 0);
    drop(writer);
    serving.shutdown().await;
}

#[tokio::test]
async fn a_thousand_concurrent_http_clients() {
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router())).await;
    let calls = (0..1000i64).map(|i| {
        let url = url.clone();
        tokio::spawn(async move {
            let client = Client::connect(&url).await.unwrap();
            client.call::<i64>("add", [i, 1]).await
        })
    });
    let results = bounded("1000 clients", futures_util::future::join_all(calls)).await;
    for (i, result) in results.into_iter().enumerate() {
        assert_eq!(result.unwrap().unwrap(), i as i64 + 1);
    }
    serving.shutdown().await;
}

/// Answers 503 to the first `fail` requests, then passes them on.
#[derive(Clone)]
struct FailFirst {
    left: Arc<AtomicUsize>,
}

impl<S: Clone> tower::Layer<S> for FailFirst {
    type Service = FailFirstService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        FailFirstService {
            left: Arc::clone(&self.left),
            inner,
        }
    }
}

#[derive(Clone)]
struct FailFirstService<S> {
    left: Arc<AtomicUsize>,
    inner: S,
}

impl<S, B> tower::Service<http::Request<B>> for FailFirstService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<Full<Bytes>>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Full<Bytes>>;
    type Error = Infallible;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let fail = self
            .left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if fail {
            let mut response = http::Response::new(Full::new(Bytes::from_static(b"busy")));
            *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
            return Box::pin(async move { Ok(response) });
        }
        Box::pin(self.inner.call(request))
    }
}

#[tokio::test]
async fn the_client_retries_a_server_that_fails_twice() {
    let left = Arc::new(AtomicUsize::new(2));
    let server = HttpServer::new(jrpc::demo::router()).layer(FailFirst {
        left: Arc::clone(&left),
    });
    let (serving, url) = serve(server).await;
    let without = Client::connect(&url).await.unwrap();
    let err = without.call::<i64>("sum", [1]).await.unwrap_err();
    assert!(
        matches!(
            err.transport_error::<HttpError>(),
            Some(HttpError { status: 503, .. })
        ),
        "{err:?}"
    );

    left.store(2, Ordering::SeqCst);
    let client = Client::builder()
        .retry(Retry {
            attempts: 3,
            base: Duration::from_millis(10),
            max: Duration::from_millis(100),
        })
        .connect(&url)
        .await
        .unwrap();
    assert_eq!(client.call::<i64>("sum", [1, 2]).await.unwrap(), 3);
    assert_eq!(left.load(Ordering::SeqCst), 0, "two failures were retried");
    serving.shutdown().await;
}

#[tokio::test]
async fn h2c_batches_and_notifications_through_the_client() {
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router())).await;
    let client = Client::builder().http2(true).connect(&url).await.unwrap();
    let mut batch = client.batch();
    let sum = batch.call::<i64>("sum", [1, 2, 3]);
    let missing = batch.call::<Value>("nope", ());
    batch.notify("update", [1]);
    batch.send().await.unwrap();
    assert_eq!(sum.await.unwrap(), 6);
    assert_eq!(missing.await.unwrap_err().rpc().unwrap().code(), -32601);
    client.notify("update", [1]).await.unwrap();
    let many = (0..50).map(|i| {
        let client = client.clone();
        async move { client.call::<i64>("add", [i, i]).await.unwrap() }
    });
    let results = futures_util::future::join_all(many).await;
    assert_eq!(results, (0..50).map(|i| i * 2).collect::<Vec<_>>());
    serving.shutdown().await;
}

#[tokio::test]
async fn handlers_see_headers_and_the_peer_address() {
    let router = Router::new().sync_method("who", |(): (), ctx: &RequestContext| {
        let agent = ctx
            .headers()
            .and_then(|h| h.get("x-agent"))
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_owned();
        Ok((agent, ctx.connection_info().and_then(|i| i.peer_addr.clone())))
    });
    let (serving, url) = serve(HttpServer::new(router)).await;
    let client = Client::builder()
        .header("X-Agent", "tester/1")
        .connect(&url)
        .await
        .unwrap();
    let (agent, peer): (String, Option<String>) = client.call("who", ()).await.unwrap();
    assert_eq!(agent, "tester/1");
    assert!(peer.unwrap().starts_with("127.0.0.1:"));
    serving.shutdown().await;
}

#[tokio::test]
async fn cors_preflight() {
    let (serving, url) =
        serve(HttpServer::new(jrpc::demo::router()).cors(tower_http::cors::CorsLayer::permissive())).await;
    let preflight = raw(
        &url,
        "OPTIONS",
        "/",
        &[
            ("Origin", "https://example.com"),
            ("Access-Control-Request-Method", "POST"),
        ],
        b"",
    )
    .await;
    assert_eq!(preflight.status, 200);
    assert_eq!(preflight.header("access-control-allow-origin"), Some("*"));
    serving.shutdown().await;
}

#[tokio::test]
async fn a_websocket_client_reconnects_when_told_to() {
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router())).await;
    let addr = url.trim_start_matches("http://").to_owned();
    let ws = url.replacen("http", "ws", 1);
    let client = Client::builder()
        .reconnect(Retry {
            attempts: 20,
            base: Duration::from_millis(20),
            max: Duration::from_millis(200),
        })
        .connect(&ws)
        .await
        .unwrap();
    assert_eq!(client.call::<i64>("sum", [1]).await.unwrap(), 1);
    serving.shutdown().await;
    // The server is gone; a new one comes up on the same address while the
    // client keeps trying.
    let restart = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        HttpServer::new(jrpc::demo::router()).bind(addr).await.unwrap()
    });
    // A call made before the client notices the drop fails as closed (it
    // may have been in flight); the next one reconnects.
    let sum = match bounded("call", client.call::<i64>("sum", [2, 3])).await {
        Ok(sum) => sum,
        Err(e) => {
            assert!(e.is_closed(), "{e:?}");
            bounded("reconnecting call", client.call::<i64>("sum", [2, 3]))
                .await
                .unwrap()
        }
    };
    assert_eq!(sum, 5);
    restart.await.unwrap().shutdown().await;
}

#[tokio::test]
async fn browsers_from_other_origins_are_refused_unless_cors_allows_them() {
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router())).await;
    let call = br#"{"jsonrpc":"2.0","method":"get_data","id":1}"#;
    for (origin, allowed) in [
        ("http://localhost:3000", true),
        ("http://127.0.0.1:8080", true),
        // Any page can send it from a sandboxed iframe (issue 11).
        ("null", false),
        ("https://evil.example", false),
        ("http://localhost.evil.example", false),
    ] {
        let response = raw(&url, "POST", "/", &[JSON, ("Origin", origin)], call).await;
        assert_eq!(response.status == 200, allowed, "{origin}: {}", response.status);
        let upgrade = upgrade_status(&url, origin).await;
        assert_eq!(upgrade == 101, allowed, "ws {origin}: {upgrade}");
    }
    serving.shutdown().await;
    let (serving, url) =
        serve(HttpServer::new(jrpc::demo::router()).cors(tower_http::cors::CorsLayer::permissive())).await;
    let response = raw(
        &url,
        "POST",
        "/",
        &[JSON, ("Origin", "https://app.example")],
        call,
    )
    .await;
    assert_eq!(response.status, 200, "CORS configured: any origin");
    serving.shutdown().await;
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router()).allow_null_origin(true)).await;
    let response = raw(&url, "POST", "/", &[JSON, ("Origin", "null")], call).await;
    assert_eq!(response.status, 200, "null allowed when configured");
    assert_eq!(
        upgrade_status(&url, "null").await,
        101,
        "ws: null allowed when configured"
    );
    serving.shutdown().await;
    // A page served by this very server, reached by IP address, is
    // same-origin; a name is not (DNS rebinding can point any name here).
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router())).await;
    for (host, origin, allowed) in [
        ("10.1.2.3:4000", "http://10.1.2.3:4000", true),
        ("[fd00::1]:4000", "http://[fd00::1]:4000", true),
        ("10.1.2.3:4000", "http://10.1.2.3:4001", false),
        ("10.1.2.3", "http://10.1.2.3:80", true),
        // Another service on the same address: another scheme or port.
        ("10.1.2.3:4000", "https://10.1.2.3:4000", false),
        ("10.1.2.3:443", "http://10.1.2.3", false),
        ("10.1.2.3:4000", "http://10.9.9.9:4000", false),
        ("evil.example:4000", "http://evil.example:4000", false),
    ] {
        let response = raw(
            &url,
            "POST",
            "/",
            &[JSON, ("Host", host), ("Origin", origin)],
            call,
        )
        .await;
        assert_eq!(
            response.status == 200,
            allowed,
            "{host} from {origin}: {}",
            response.status
        );
    }
    serving.shutdown().await;
}

/// The status of a WebSocket upgrade request from a browser page at `origin`.
async fn upgrade_status(url: &str, origin: &str) -> u16 {
    let addr = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "GET / HTTP/1.1\r\nHost: {addr}\r\nOrigin: {origin}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        bounded("upgrade reply", stream.read_exact(&mut byte))
            .await
            .unwrap();
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head)
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn http_rate_limits_charge_each_call_and_429_only_when_all_are_refused() {
    let (serving, url) =
        serve(HttpServer::new(jrpc::demo::router()).rate_limit(RateLimit::per_second(1, 2))).await;
    let batch = br#"[{"jsonrpc":"2.0","method":"add","params":[1,1],"id":1},{"jsonrpc":"2.0","method":"add","params":[2,2],"id":2},{"jsonrpc":"2.0","method":"add","params":[3,3],"id":3}]"#;
    let partly = raw(&url, "POST", "/", &[JSON], batch).await;
    assert_eq!(partly.status, 200, "some calls went through");
    let entries = partly.json();
    assert_eq!(entries[0]["result"], 2);
    assert_eq!(entries[1]["result"], 4);
    assert_eq!(entries[2]["error"]["code"], -32005, "each batch entry is charged");
    let refused = raw(&url, "POST", "/", &[JSON], batch).await;
    assert_eq!(refused.status, 429, "every call refused");
    assert!(refused.header("retry-after").is_some());
    assert_eq!(refused.json()["error"]["code"], -32005);
    let notes = br#"{"jsonrpc":"2.0","method":"update","params":[1]}"#;
    assert_eq!(raw(&url, "POST", "/", &[JSON], notes).await.status, 429);
    serving.shutdown().await;
}

#[tokio::test]
async fn token_identities_reach_per_method_authorization_over_http_and_websocket() {
    use jrpc::middleware::Authorize;
    use jrpc::server::http::AuthLayer;
    let router = jrpc::demo::router()
        .method("whoami", |(): (), ctx: jrpc::RequestContext| async move {
            Ok(ctx.identity().map(|i| i.name().to_owned()))
        })
        .layer(Authorize::new().allow("sum", ["alice"]));
    let auth = AuthLayer::named([("alice", "a-token"), ("bob", "b-token")]);
    let (serving, url) = serve(HttpServer::new(router).auth(auth)).await;
    let ws = url.replacen("http", "ws", 1);
    for target in [url.as_str(), ws.as_str()] {
        for (token, who, may_sum) in [("a-token", "alice", true), ("b-token", "bob", false)] {
            let client = Client::builder()
                .header("Authorization", &format!("Bearer {token}"))
                .connect(target)
                .await
                .unwrap();
            let me: Option<String> = client.call("whoami", ()).await.unwrap();
            assert_eq!(me.as_deref(), Some(who), "{target}");
            let sum = client.call::<i64>("sum", [1, 2]).await;
            match sum {
                Ok(3) if may_sum => {}
                Err(CallError::Rpc(e)) if !may_sum && e.code() == -32004 => {}
                other => panic!("{who} calling sum over {target}: {other:?}"),
            }
        }
    }
    serving.shutdown().await;
}

#[tokio::test]
async fn refused_tokens_spend_the_rate_budget() {
    let (serving, url) = serve(
        HttpServer::new(jrpc::demo::router())
            .auth_tokens(["s3cret"])
            .rate_limit(RateLimit::per_second(1, 2)),
    )
    .await;
    let call = br#"{"jsonrpc":"2.0","method":"get_data","id":1}"#;
    let wrong = [JSON, ("Authorization", "Bearer guess")];
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(raw(&url, "POST", "/", &wrong, call).await.status);
    }
    assert_eq!(statuses, [401, 401, 429], "no token guessing at line rate");
    serving.shutdown().await;
}

/// A demo server whose WebSocket messages may be at most 1 KiB, and a
/// client connected to it.
async fn websocket_with_small_messages() -> (Serving, tokio_tungstenite::WebSocketStream<TcpStream>) {
    let options = WsOptions {
        max_message_len: 1024,
        ..WsOptions::default()
    };
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router()).websocket(Some(options))).await;
    let stream = TcpStream::connect(url.trim_start_matches("http://"))
        .await
        .unwrap();
    let (socket, _) = tokio_tungstenite::client_async(url.replacen("http", "ws", 1), stream)
        .await
        .unwrap();
    (serving, socket)
}

/// Issue 11: a WebSocket message over the limit is answered -32001 before
/// the connection is closed with 1009, so the client learns why.
#[tokio::test]
async fn an_oversized_websocket_message_gets_its_error_before_the_close() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let (serving, mut socket) = websocket_with_small_messages().await;
    let big = format!(
        r#"{{"jsonrpc":"2.0","method":"echo","params":["{}"],"id":1}}"#,
        "x".repeat(4096)
    );
    socket.send(Message::text(big)).await.unwrap();
    let mut seen = Vec::new();
    while let Some(message) = bounded("messages", socket.next()).await {
        match message {
            Ok(Message::Text(text)) => seen.push(serde_json::from_str::<Value>(&text).unwrap()),
            Ok(Message::Close(frame)) => {
                let code: u16 = frame.expect("a close code").code.into();
                assert_eq!(code, 1009);
                break;
            }
            Ok(_) => {}
            Err(e) => panic!("the connection failed before a close frame: {e}; saw {seen:?}"),
        }
    }
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["error"]["code"], -32001, "{seen:?}");
    serving.shutdown().await;
}

/// The same behind a window of pipelined calls: the -32001 reply comes a
/// batch or two after the first replies, and must still go out before the
/// close, with every earlier call answered.
#[tokio::test]
async fn an_oversized_websocket_message_behind_many_calls_still_gets_its_error() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let (serving, mut socket) = websocket_with_small_messages().await;
    const CALLS: usize = 200;
    for id in 0..CALLS {
        let call = format!(r#"{{"jsonrpc":"2.0","method":"subtract","params":[{id},1],"id":{id}}}"#);
        socket.feed(Message::text(call)).await.unwrap();
    }
    let big = format!(
        r#"{{"jsonrpc":"2.0","method":"echo","params":["{}"],"id":"big"}}"#,
        "x".repeat(4096)
    );
    socket.send(Message::text(big)).await.unwrap();
    let mut answered = std::collections::HashSet::new();
    let mut oversized = 0;
    while let Some(message) = bounded("messages", socket.next()).await {
        match message {
            Ok(Message::Text(text)) => {
                let reply: Value = serde_json::from_str(&text).unwrap();
                if reply["error"]["code"] == -32001 {
                    oversized += 1;
                } else {
                    assert_eq!(reply["result"], reply["id"].as_i64().unwrap() - 1, "{reply}");
                    answered.insert(reply["id"].as_i64().unwrap());
                }
            }
            Ok(Message::Close(frame)) => {
                let code: u16 = frame.expect("a close code").code.into();
                assert_eq!(code, 1009);
                break;
            }
            Ok(_) => {}
            Err(e) => panic!("the connection failed before a close frame: {e}"),
        }
    }
    assert_eq!(
        answered.len(),
        CALLS,
        "every call before the oversized message is answered"
    );
    assert_eq!(oversized, 1, "the oversized message gets its -32001");
    serving.shutdown().await;
}

/// Issue 11: the server answers a client's Close with its own (RFC 6455
/// §5.5.1), after the replies to requests that came before the Close, even
/// when the request and the Close arrive in one write.
#[tokio::test]
async fn the_websocket_closing_handshake_answers_requests_then_the_close() {
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router())).await;
    let addr = url.trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let handshake = format!(
        "GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    stream.write_all(handshake.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        bounded("handshake", stream.read_exact(&mut byte)).await.unwrap();
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    // A slow request, then a Close (code 1000), masked as a client must, in
    // one write.
    let masked = |opcode: u8, payload: &[u8]| {
        let key = [1u8, 2, 3, 4];
        let mut frame = vec![0x80 | opcode, 0x80 | payload.len() as u8];
        frame.extend_from_slice(&key);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
        frame
    };
    let mut burst = masked(
        0x1,
        br#"{"jsonrpc":"2.0","method":"sleep","params":[100],"id":7}"#,
    );
    burst.extend(masked(0x8, &1000u16.to_be_bytes()));
    stream.write_all(&burst).await.unwrap();
    // The server's frames, until it closes the connection.
    let mut got = Vec::new();
    bounded("the server's frames", stream.read_to_end(&mut got))
        .await
        .unwrap();
    let mut frames = Vec::new();
    let mut at = 0;
    while at + 2 <= got.len() {
        let opcode = got[at] & 0x0f;
        let (len, start) = match got[at + 1] & 0x7f {
            126 => (u16::from_be_bytes([got[at + 2], got[at + 3]]) as usize, at + 4),
            n => (n as usize, at + 2),
        };
        frames.push((opcode, got[start..start + len].to_vec()));
        at = start + len;
    }
    assert_eq!(frames.len(), 2, "a reply and a Close: {frames:?}");
    assert_eq!(frames[0].0, 0x1, "a text frame first");
    let reply: Value = serde_json::from_slice(&frames[0].1).unwrap();
    assert_eq!(reply, json!({"jsonrpc":"2.0","result":100,"id":7}));
    assert_eq!(frames[1].0, 0x8, "then the server's Close");
    serving.shutdown().await;
}

/// Issue 11, item 1: with one connection allowed, a client that connects and
/// sends nothing, or only the first byte of a preface, no longer blocks the
/// next client: it is closed after the first-request timeout.
#[tokio::test]
async fn silent_http_connections_do_not_hold_the_only_slot() {
    let config = jrpc::ConnectionConfig::default().first_request_timeout(Some(Duration::from_millis(300)));
    for opening in [&b""[..], b"P"] {
        let (serving, url) = serve(
            HttpServer::new(jrpc::demo::router())
                .max_connections(1)
                .connection(config.clone()),
        )
        .await;
        let mut silent = TcpStream::connect(url.trim_start_matches("http://"))
            .await
            .unwrap();
        silent.write_all(opening).await.unwrap();
        // Until the silent one is closed, others are refused (503); a
        // client that retries gets through once it is.
        let client = Client::builder()
            .retry(Retry::attempts(20))
            .connect(&url)
            .await
            .unwrap();
        let sum: i64 = bounded("a call after the silent client", client.call("add", (1, 2)))
            .await
            .unwrap();
        assert_eq!(sum, 3, "after {opening:?}");
        drop(silent);
        serving.shutdown().await;
    }
}

/// Issue 11, item 2: past the connection bound, an HTTP client gets a 503
/// with a JSON-RPC error body at once, instead of hanging in the backlog.
#[tokio::test]
async fn past_the_connection_limit_http_answers_503() {
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router()).max_connections(1)).await;
    let _holding = TcpStream::connect(url.trim_start_matches("http://"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let call = br#"{"jsonrpc":"2.0","method":"get_data","id":1}"#;
    let refused = bounded("the refusal", raw(&url, "POST", "/", &[JSON], call)).await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.json()["error"]["code"], -32007);
    assert!(refused.header("retry-after").is_some());
    serving.shutdown().await;
}

/// Issue 11, item 4: bytes of unfinished request bodies are bounded across
/// connections; past the budget a request gets 503 with -32007 at once, and
/// the budget comes back when an unfinished body goes away.
#[tokio::test]
async fn unfinished_bodies_share_a_bounded_budget() {
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router()).buffer_budget(64 * 1024)).await;
    let addr = url.trim_start_matches("http://").to_owned();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    );
    let unfinished = |addr: String, head: String| async move {
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(&[b' '; 40 * 1024]).await.unwrap();
        stream
    };
    let first = unfinished(addr.clone(), head.clone()).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut second = unfinished(addr.clone(), head.clone()).await;
    let mut reply = vec![0u8; 512];
    let n = bounded("the refusal", second.read(&mut reply)).await.unwrap();
    let reply = String::from_utf8_lossy(&reply[..n]).into_owned();
    assert!(reply.starts_with("HTTP/1.1 503"), "{reply}");
    assert!(reply.contains("-32007"), "{reply}");
    drop((first, second));
    // The budget is back: a whole request is served.
    let call = br#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}"#;
    let served = bounded("a request after", async {
        loop {
            let response = raw(&url, "POST", "/", &[JSON], call).await;
            if response.status == 200 {
                return response;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(served.json()["result"], 3);
    serving.shutdown().await;
}

/// Reads until the server closes the connection (or the 20 s bound fails
/// the test).
async fn read_until_closed(stream: &mut TcpStream, what: &str) -> Vec<u8> {
    let mut all = Vec::new();
    bounded(what, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    all
}

/// Issue 11, item 1: an HTTP connection that goes without a request for the
/// idle limit is closed, over HTTP/1.1 keep-alive and over HTTP/2 (whose
/// keep-alive pings do not count as activity); a WebSocket is not.
#[tokio::test]
async fn idle_http_connections_are_closed_on_both_protocols() {
    let config = jrpc::ConnectionConfig::default().idle_timeout(Some(Duration::from_millis(300)));
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router()).connection(config)).await;
    let addr = url.trim_start_matches("http://").to_owned();

    // HTTP/1.1: one request, then silence.
    let mut h1 = TcpStream::connect(&addr).await.unwrap();
    let body = r#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}"#;
    let request = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    h1.write_all(request.as_bytes()).await.unwrap();
    let seen = read_until_closed(&mut h1, "the idle HTTP/1.1 connection closes").await;
    assert!(String::from_utf8_lossy(&seen).contains(r#""result":3"#));

    // HTTP/2 with prior knowledge: the preface and empty SETTINGS, then
    // silence. The server answers SETTINGS, then says GOAWAY and closes.
    let mut h2 = TcpStream::connect(&addr).await.unwrap();
    h2.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let seen = read_until_closed(&mut h2, "the idle HTTP/2 connection closes").await;
    let goaway = seen.windows(4).any(|w| w[3] == 0x07 && w[..3] == [0, 0, 8]);
    assert!(goaway, "no GOAWAY frame in {seen:?}");

    // A WebSocket outlives the HTTP idle limit: it has its own.
    let client = Client::connect(&url.replace("http://", "ws://")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let sum: i64 = client.call("add", (2, 3)).await.unwrap();
    assert_eq!(sum, 5);
    serving.shutdown().await;
}

/// The header of a masked (with a zero key) client text frame of `len` bytes.
fn text_frame_header(len: u64) -> Vec<u8> {
    let mut header = vec![0x81, 0x80 | 127];
    header.extend_from_slice(&len.to_be_bytes());
    header.extend_from_slice(&[0, 0, 0, 0]);
    header
}

/// Reads one server frame: (opcode, payload).
async fn read_ws_frame(stream: &mut TcpStream) -> (u8, Vec<u8>) {
    let mut head = [0u8; 2];
    stream.read_exact(&mut head).await.unwrap();
    let len = match head[1] & 0x7f {
        126 => {
            let mut n = [0u8; 2];
            stream.read_exact(&mut n).await.unwrap();
            u16::from_be_bytes(n) as usize
        }
        127 => {
            let mut n = [0u8; 8];
            stream.read_exact(&mut n).await.unwrap();
            u64::from_be_bytes(n) as usize
        }
        n => n as usize,
    };
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).await.unwrap();
    (head[0] & 0x0f, payload)
}

/// Issue 11, item 4, WebSocket part: messages still arriving share the
/// server's budget with request bodies. The one that does not fit is
/// answered -32007 and closed with 1013 ("try again later"); the other
/// finishes and is served, and the budget comes back.
#[tokio::test]
async fn unfinished_websocket_messages_share_the_budget() {
    let budget = jrpc::codec::BufferBudget::new(100 * 1024);
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router()).buffer_budget(budget.clone())).await;
    let fill = 140 * 1024;
    let message = format!(
        r#"{{"jsonrpc":"2.0","method":"echo","params":["{}"],"id":7}}"#,
        "x".repeat(fill)
    );
    let (start, rest) = message.as_bytes().split_at(120 * 1024);

    let mut first = raw_websocket(&url).await;
    first
        .write_all(&text_frame_header(message.len() as u64))
        .await
        .unwrap();
    first.write_all(start).await.unwrap();
    bounded("the first message is charged", async {
        while budget.in_use() < 40 * 1024 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;

    let mut second = raw_websocket(&url).await;
    second
        .write_all(&text_frame_header(message.len() as u64))
        .await
        .unwrap();
    // The server may stop reading while this is still being written.
    let _ = second.write_all(start).await;
    let (opcode, refusal) = bounded("the refusal", read_ws_frame(&mut second)).await;
    assert_eq!(opcode, 0x1, "a text frame");
    let refusal: Value = serde_json::from_slice(&refusal).unwrap();
    assert_eq!(refusal["error"]["code"], -32007, "{refusal}");
    let (opcode, close) = bounded("the close", read_ws_frame(&mut second)).await;
    assert_eq!(opcode, 0x8, "a close frame");
    assert_eq!(&close[..2], &1013u16.to_be_bytes(), "close code 1013");

    first.write_all(rest).await.unwrap();
    let (opcode, reply) = bounded("the first reply", read_ws_frame(&mut first)).await;
    assert_eq!(opcode, 0x1);
    let reply: Value = serde_json::from_slice(&reply).unwrap();
    assert_eq!(
        reply["id"],
        7,
        "{}",
        &reply.to_string()[..reply.to_string().len().min(300)]
    );
    assert_eq!(reply["result"].as_str().map(str::len), Some(fill));
    assert_eq!(budget.in_use(), 0, "the whole message gave its bytes back");
    serving.shutdown().await;
}

/// Issue 13, core hooks: a route of its own answers with its own status,
/// headers and body, reads bodies within the server's limits, and leaves
/// the RPC endpoint as it was; a whole reply over 1 KiB is compressed
/// for a client that takes gzip.
#[tokio::test]
async fn routes_answer_with_their_own_status_headers_and_bodies() {
    use jrpc::server::http::route;
    let router = jrpc::demo::router().max_frame_len(1024);
    let server = HttpServer::new(router).route("/custom", |request, cx: route::RouteContext| async move {
        let (parts, body) = request.into_parts();
        let body = match cx.read_body(body).await {
            Ok(body) => body,
            Err(refusal) => return refusal.into_response(),
        };
        let mut response =
            http::Response::new(route::full_body(format!("{} {} bytes", parts.method, body.len())));
        *response.status_mut() = http::StatusCode::IM_A_TEAPOT;
        response
            .headers_mut()
            .insert("x-route", http::HeaderValue::from_static("custom"));
        response
    });
    let large_text = r#"{"tool":"a tool with a long description"}"#.repeat(100);
    let large = large_text.clone();
    let server = server.route("/large", move |_request, _cx| {
        let large = large.clone();
        async move { route::json_response(large) }
    });
    // The same text with an entity tag, and streamed (no length).
    let large = large_text.clone();
    let server = server.route("/tagged", move |_request, _cx| {
        let large = large.clone();
        async move {
            let mut response = route::json_response(large);
            response
                .headers_mut()
                .insert("etag", http::HeaderValue::from_static("\"v1\""));
            response
        }
    });
    let large = large_text.clone();
    let server = server.route("/streamed", move |_request, _cx| {
        let chunks: Vec<Result<_, Infallible>> = large
            .as_bytes()
            .chunks(512)
            .map(|chunk| Ok(http_body::Frame::data(Bytes::copy_from_slice(chunk))))
            .collect();
        async move {
            let body = http_body_util::StreamBody::new(futures_util::stream::iter(chunks));
            let body = http_body_util::BodyExt::map_err(
                body,
                |never: Infallible| -> Box<dyn std::error::Error + Send + Sync> { match never {} },
            );
            let mut response = http::Response::new(http_body_util::BodyExt::boxed_unsync(body));
            response.headers_mut().insert(
                "content-type",
                http::HeaderValue::from_static("application/x-ndjson"),
            );
            response
        }
    });
    let (serving, url) = serve(server).await;
    // A whole reply over 1 KiB is compressed for a client that takes gzip,
    // as the RPC endpoint's replies are; not for one that does not.
    let zipped = raw(&url, "GET", "/large", &[("Accept-Encoding", "gzip")], b"").await;
    assert_eq!(zipped.status, 200);
    assert_eq!(zipped.header("content-encoding"), Some("gzip"));
    assert_eq!(zipped.header("vary"), Some("accept-encoding"));
    assert!(
        zipped.body.len() < large_text.len() / 4,
        "the reply is compressed"
    );
    let mut unzipped = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&zipped.body[..]), &mut unzipped)
        .unwrap();
    assert_eq!(unzipped, large_text);
    let plain = raw(&url, "GET", "/large", &[], b"").await;
    assert_eq!(plain.header("content-encoding"), None);
    assert_eq!(plain.body, large_text.as_bytes());
    // HEAD: no body, over HTTP/1.1 and HTTP/2, the length GET's body has
    // (the route set none); and so for the RPC endpoint and `/health`.
    let length = large_text.len().to_string();
    let head = raw(&url, "HEAD", "/large", &[], b"").await;
    assert_eq!(head.header("content-length"), Some(length.as_str()));
    assert!(head.body.is_empty());
    for (path, length) in [("/large", Some(length.as_str())), ("/health", None), ("/", None)] {
        let h2 = Client::builder()
            .http2(true)
            .http(&format!("{url}{path}"))
            .unwrap();
        let head = h2
            .send_streaming(http::Method::HEAD, http::HeaderMap::new(), Bytes::new())
            .await
            .unwrap();
        assert_eq!(head.version(), http::Version::HTTP_2);
        if let Some(length) = length {
            assert_eq!(head.headers().get("content-length").unwrap(), length);
        }
        let body = http_body_util::BodyExt::collect(head.into_body()).await;
        assert!(body.unwrap().to_bytes().is_empty(), "no content for HEAD {path}");
    }
    // A small one is sent as it is; so are one with an entity tag (which
    // names one representation) and one that streams.
    let small = raw(&url, "PUT", "/custom", &[("Accept-Encoding", "gzip")], b"1").await;
    assert_eq!(small.header("content-encoding"), None);
    assert_eq!(small.body, b"PUT 1 bytes");
    for path in ["/tagged", "/streamed"] {
        let reply = raw(&url, "GET", path, &[("Accept-Encoding", "gzip")], b"").await;
        assert_eq!(reply.status, 200, "{path}");
        assert_eq!(reply.header("content-encoding"), None, "{path}");
        assert_eq!(reply.body, large_text.as_bytes(), "{path}");
    }
    let custom = raw(&url, "PUT", "/custom", &[], b"12345").await;
    assert_eq!(custom.status, 418);
    assert_eq!(custom.header("x-route"), Some("custom"));
    assert_eq!(custom.body, b"PUT 5 bytes");
    let too_large = raw(&url, "POST", "/custom", &[], &[b' '; 2000]).await;
    assert_eq!(too_large.status, 413);
    assert_eq!(too_large.json()["error"]["code"], -32001);
    // The RPC endpoint is untouched.
    let call = raw(
        &url,
        "POST",
        "/",
        &[JSON],
        br#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}"#,
    )
    .await;
    assert_eq!(call.json()["result"], 3);
    serving.shutdown().await;

    // With compression off, no route's reply is compressed.
    let large = large_text.clone();
    let server =
        HttpServer::new(jrpc::demo::router())
            .compression(false)
            .route("/large", move |_request, _cx| {
                let large = large.clone();
                async move { route::json_response(large) }
            });
    let (serving, url) = serve(server).await;
    let reply = raw(&url, "GET", "/large", &[("Accept-Encoding", "gzip, br")], b"").await;
    assert_eq!(reply.header("content-encoding"), None);
    assert_eq!(reply.body, large_text.as_bytes());
    serving.shutdown().await;
}

/// A route streaming Server-Sent Events: each event arrives as it is sent,
/// the connection is not idle while the stream is open, and shutdown ends
/// a stream that watches for it.
#[tokio::test]
async fn routes_stream_server_sent_events() {
    use jrpc::server::http::{route, sse};
    let config = jrpc::ConnectionConfig::default().idle_timeout(Some(Duration::from_millis(150)));
    let server = HttpServer::new(jrpc::demo::router()).connection(config).route(
        "/events",
        |_request, cx: route::RouteContext| async move {
            let stop = cx.shutdown().clone();
            let events = futures_util::stream::unfold(0u32, move |n| {
                let stop = stop.clone();
                async move {
                    if n == 5 {
                        // Then wait for shutdown, holding the stream open.
                        stop.cancelled().await;
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Some((
                        sse::Event::data(format!("{{\"n\":{n}}}")).id(n.to_string()),
                        n + 1,
                    ))
                }
            });
            sse::response(events, Some(Duration::from_secs(15)))
        },
    );
    let (serving, url) = serve(server).await;
    let addr = url.trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    stream
        .write_all(
            b"GET /events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAccept-Encoding: gzip\r\n\r\n",
        )
        .await
        .unwrap();
    let mut seen = Vec::new();
    bounded("five events, past the idle limit", async {
        let mut buf = [0u8; 1024];
        while !String::from_utf8_lossy(&seen).contains("data: {\"n\":4}") {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        text.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{text}"
    );
    // Events go out as they come, never through the compressor.
    assert!(!text.to_ascii_lowercase().contains("content-encoding"), "{text}");
    let order: Vec<usize> = (0..5)
        .map(|n| text.find(&format!("id: {n}\ndata: {{\"n\":{n}}}")).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    // Shutdown ends the stream the route holds open.
    bounded("shutdown with a stream open", serving.shutdown()).await;
    let rest = read_until_closed(&mut stream, "the stream ends").await;
    assert!(
        !String::from_utf8_lossy(&rest).contains("data:"),
        "more events after shutdown"
    );
}

#[tokio::test]
async fn the_playground_is_served_only_when_turned_on() {
    let (serving, url) = serve(HttpServer::new(jrpc::demo::router())).await;
    assert_eq!(
        raw(&url, "GET", "/playground", &[], b"").await.status,
        404,
        "off by default"
    );
    serving.shutdown().await;

    let mine = |_request, _cx| async {
        jrpc::server::http::error_response(http::StatusCode::GONE, jrpc::Error::invalid_request())
    };
    let (serving, url) = serve(
        HttpServer::new(jrpc::demo::router())
            .path("/rpc?\"x\"")
            .playground(true)
            .route("/playground/playground.css", mine),
    )
    .await;
    for path in ["/playground", "/playground/"] {
        let page = raw(&url, "GET", path, &[], b"").await;
        assert_eq!(page.status, 200, "{path}");
        assert_eq!(page.header("content-type"), Some("text/html; charset=utf-8"));
        let policy = page
            .header("content-security-policy")
            .expect("a content security policy");
        assert!(
            policy.contains("default-src 'none'") && policy.contains("script-src 'self'"),
            "{policy}"
        );
        let body = String::from_utf8(page.body).unwrap();
        assert!(
            body.contains(r#"content="/rpc?&quot;x&quot;""#),
            "the RPC path, escaped"
        );
        assert!(body.contains(r#"<script src="/playground/playground.js" defer></script>"#));
    }
    let script = raw(&url, "GET", "/playground/playground.js", &[], b"").await;
    assert_eq!(script.status, 200);
    assert_eq!(
        script.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    let head = raw(&url, "HEAD", "/playground/playground.js", &[], b"").await;
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("content-length"),
        Some(script.body.len().to_string().as_str())
    );
    // HEAD's headers are GET's, compressed too.
    let gzip = [("Accept-Encoding", "gzip")];
    let zipped = raw(&url, "GET", "/playground/playground.js", &gzip, b"").await;
    let zipped_head = raw(&url, "HEAD", "/playground/playground.js", &gzip, b"").await;
    assert_eq!(zipped.header("content-encoding"), Some("gzip"));
    assert!(zipped.body.len() < script.body.len() / 2);
    for name in ["content-encoding", "vary", "content-length", "content-type"] {
        assert_eq!(zipped_head.header(name), zipped.header(name), "{name}");
    }
    assert!(zipped_head.body.is_empty());
    // Over HTTP/2 too, where hyper would send whatever body it is given.
    let h2 = Client::builder()
        .http2(true)
        .http(&format!("{url}/playground/playground.js"))
        .unwrap();
    for headers in [vec![], vec![("accept-encoding", "gzip")]] {
        let mut map = http::HeaderMap::new();
        for (name, value) in &headers {
            map.insert(*name, http::HeaderValue::from_static(value));
        }
        let head = h2
            .send_streaming(http::Method::HEAD, map, Bytes::new())
            .await
            .unwrap();
        assert_eq!(head.status(), 200);
        assert_eq!(head.version(), http::Version::HTTP_2);
        let body = http_body_util::BodyExt::collect(head.into_body()).await.unwrap();
        assert!(body.to_bytes().is_empty(), "no content for HEAD: {headers:?}");
    }
    let post = raw(&url, "POST", "/playground", &[JSON], b"{}").await;
    assert_eq!(post.status, 405);
    assert_eq!(post.header("allow"), Some("GET, HEAD"));
    let style = raw(&url, "GET", "/playground/playground.css", &[], b"").await;
    assert_eq!(style.status, 410, "a route of your own takes precedence");
    serving.shutdown().await;
}

/// `HttpServer::serve` takes any listener of byte streams (issue 42): over a
/// Unix socket, a POST is answered as over TCP, `GET /health` too, and the
/// socket file is gone once the server is.
#[cfg(unix)]
#[tokio::test]
async fn http_over_a_unix_socket() {
    use jrpc::transport::unix::UnixListener;

    let path = std::env::temp_dir().join(format!("jrpc-http-unix-{}.sock", std::process::id()));
    let listener = UnixListener::bind(&path, Default::default(), 1 << 20)
        .await
        .unwrap();
    let router = Router::new().sync_method("subtract", |(a, b): (i64, i64)| Ok(a - b));
    let serving = HttpServer::new(router).serve(listener);
    let encoded = path.display().to_string().replace('/', "%2F");
    assert_eq!(serving.local_addr(), format!("http+unix://{encoded}"));
    let exchange = |request: String| {
        let path = path.clone();
        async move {
            let mut stream = tokio::net::UnixStream::connect(&path).await.unwrap();
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut reply = String::new();
            stream.read_to_string(&mut reply).await.unwrap();
            reply
        }
    };
    let body = r#"{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}"#;
    let reply = bounded(
        "a POST over the socket",
        exchange(format!(
            "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(
        reply.ends_with(r#"{"jsonrpc":"2.0","result":19,"id":1}"#),
        "{reply}"
    );
    let reply = bounded(
        "a health check over the socket",
        exchange("GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".to_owned()),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    // jrpc's own client, by the URL the server names, and to a path.
    for url in [
        serving.local_addr().to_owned(),
        format!("{}/", serving.local_addr()),
    ] {
        let client = Client::connect(&url).await.unwrap();
        let got: i64 = bounded("a call over the socket", client.call("subtract", (5, 3)))
            .await
            .unwrap();
        assert_eq!(got, 2, "{url}");
    }
    let missing = format!(
        "http+unix://{}",
        path.with_extension("gone")
            .display()
            .to_string()
            .replace('/', "%2F")
    );
    let client = Client::connect(&missing).await.unwrap();
    let failed = bounded("a call to no socket", client.call::<i64>("subtract", (5, 3))).await;
    assert!(failed.unwrap_err().to_string().contains(".gone"));
    bounded("shutdown", serving.shutdown()).await;
    assert!(!path.exists(), "the socket file is left behind");
}

/// A client that said `Connection: close` and is refused before its body is
/// read (here by the decompression layer, which does not know the encoding)
/// still gets its refusal while it goes on sending the body: the server
/// keeps reading for a moment rather than closing at once, which would
/// answer the rest with a reset that takes the refusal from under the
/// client.
#[tokio::test]
async fn a_refusal_before_the_body_reaches_a_client_still_sending_it() {
    let router = Router::new().sync_method("add", |(a, b): (i64, i64)| Ok(a + b));
    let serving = HttpServer::new(router).bind("127.0.0.1:0").await.unwrap();
    let addr = serving.local_addr().trim_start_matches("http://").to_owned();
    let stream = TcpStream::connect(&addr).await.unwrap();
    let body = vec![b'x'; 64 << 10];
    let head = format!(
        "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Encoding: zstd\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.writable().await.unwrap();
    let (mut read, mut write) = stream.into_split();
    write.write_all(head.as_bytes()).await.unwrap();
    write.write_all(&body[..1024]).await.unwrap();
    // The refusal has come (not read yet), and the server has had time to
    // close: then the rest of the body goes out.
    bounded("the refusal", read.as_ref().readable()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A socket closed at once would answer the first piece with a reset,
    // and the next write would fail.
    for piece in body[1024..].chunks(16 << 10) {
        write
            .write_all(piece)
            .await
            .expect("the server still reads what the client sends");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    write.shutdown().await.unwrap();
    let mut response = Vec::new();
    bounded("the response", read.read_to_end(&mut response))
        .await
        .expect("the refusal is read whole, without a reset");
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 415"), "{text}");
}
