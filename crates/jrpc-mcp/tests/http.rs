//! Streamable HTTP end to end, with raw HTTP/1.1 requests: sessions, the
//! statuses the transport answers with, and the streams of a request.

mod common;

use std::time::Duration;

use common::{bounded, post, send, Reply};
use jrpc_mcp::http::HttpOptions;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Endpoint {
    serving: jrpc::server::Serving,
    addr: String,
}

impl Endpoint {
    async fn start() -> Self {
        Self::start_with(HttpOptions::default()).await
    }

    async fn start_with(options: HttpOptions) -> Self {
        let serving = jrpc_mcp::demo::server()
            .serve_http("127.0.0.1:0", options)
            .await
            .unwrap();
        let addr = serving.local_addr().trim_start_matches("http://").to_owned();
        Endpoint { serving, addr }
    }

    async fn send(&self, method: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        send(&self.addr, method, headers, body).await
    }

    async fn post(&self, session: Option<&str>, message: Value) -> Reply {
        post(&self.addr, session, message).await
    }

    /// A new session, initialized; its id.
    async fn initialize(&self) -> String {
        let reply = self
            .post(
                None,
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                  "clientInfo": {"name": "raw", "version": "1"}}}),
            )
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(reply.json()["result"]["serverInfo"]["name"], "jrpc-demo");
        let session = reply.header("mcp-session-id").expect("a session id").to_owned();
        assert!(session.len() >= 32, "an unguessable id: {session}");
        let ready = self
            .post(
                Some(&session),
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            )
            .await;
        assert_eq!(ready.status, 202);
        session
    }
}

#[tokio::test]
async fn a_session_from_initialize_to_delete() {
    let endpoint = Endpoint::start().await;
    let session = endpoint.initialize().await;
    let list = endpoint
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        )
        .await;
    assert_eq!(list.status, 200);
    assert_eq!(list.header("content-type"), Some("application/json"));
    assert_eq!(list.json()["result"]["tools"][0]["name"], "add");

    let call = endpoint
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": "c", "method": "tools/call",
                   "params": {"name": "add", "arguments": {"a": 2, "b": 40}}}),
        )
        .await;
    assert_eq!(call.status, 200);
    assert_eq!(call.header("content-type"), Some("text/event-stream"));
    let events = call.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["id"], "c");
    assert_eq!(events[0]["result"]["structuredContent"], json!({"result": 42}));

    let deleted = endpoint.send("DELETE", &[("Mcp-Session-Id", &session)], "").await;
    assert!(
        deleted.status == 200 || deleted.status == 204,
        "{}",
        deleted.status
    );
    let gone = endpoint
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
        )
        .await;
    assert_eq!(gone.status, 404);
    assert!(gone.json()["error"]["code"].is_i64());
    endpoint.serving.shutdown().await;
}

#[tokio::test]
async fn progress_and_logs_travel_on_the_request_stream_before_its_result() {
    let endpoint = Endpoint::start().await;
    let session = endpoint.initialize().await;
    endpoint
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "debug"}}),
        )
        .await;
    let echo = endpoint
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}),
        )
        .await;
    let events = echo.events();
    assert_eq!(events[0]["method"], "notifications/message", "{events:?}");
    assert_eq!(events.last().unwrap()["result"]["content"][0]["text"], "hi");

    let sleep = endpoint
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                   "params": {"name": "sleep", "arguments": {"ms": 250}, "_meta": {"progressToken": "p"}}}),
        )
        .await;
    let events = sleep.events();
    let (result, progress) = events.split_last().unwrap();
    assert_eq!(result["result"]["content"][0]["text"], "slept 250");
    assert!(progress.len() >= 2, "{events:?}");
    assert!(progress
        .iter()
        .all(|p| p["method"] == "notifications/progress" && p["params"]["progressToken"] == "p"));
    endpoint.serving.shutdown().await;
}

#[tokio::test]
async fn json_response_answers_with_json_unless_the_handler_speaks_first() {
    let endpoint = Endpoint::start_with(HttpOptions::default().json_response(true)).await;
    let session = endpoint.initialize().await;
    let add = endpoint
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                   "params": {"name": "add", "arguments": {"a": 2, "b": 40}}}),
        )
        .await;
    assert_eq!(add.status, 200);
    assert_eq!(add.header("content-type"), Some("application/json"));
    assert_eq!(add.json()["result"]["structuredContent"], json!({"result": 42}));

    // Progress before the reply: the reply falls back to a stream, and
    // nothing is lost.
    let sleep = endpoint
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                   "params": {"name": "sleep", "arguments": {"ms": 120}, "_meta": {"progressToken": "p"}}}),
        )
        .await;
    assert_eq!(sleep.header("content-type"), Some("text/event-stream"));
    let events = sleep.events();
    let (result, progress) = events.split_last().unwrap();
    assert_eq!(result["id"], 3);
    assert_eq!(result["result"]["content"][0]["text"], "slept 120");
    assert!(!progress.is_empty(), "{events:?}");
    assert!(progress.iter().all(|p| p["method"] == "notifications/progress"));

    // A failing tool's reply is still JSON.
    let read = endpoint
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": "nope://x"}}),
        )
        .await;
    assert_eq!(read.header("content-type"), Some("application/json"));
    assert_eq!(read.json()["id"], 4);
    assert!(read.json()["error"]["code"].is_i64(), "{}", read.body);
    endpoint.serving.shutdown().await;
}

#[tokio::test]
async fn a_cancelled_request_s_stream_ends_without_a_result() {
    let endpoint = Endpoint::start().await;
    let session = endpoint.initialize().await;
    let long = {
        let (addr, session) = (endpoint.addr.clone(), session.clone());
        tokio::spawn(async move {
            post(
                &addr,
                Some(&session),
                json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                       "params": {"name": "sleep", "arguments": {"ms": 60000}, "_meta": {"progressToken": 1}}}),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cancel = endpoint
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}),
        )
        .await;
    assert_eq!(cancel.status, 202);
    let reply = bounded("the cancelled stream ends", long).await.unwrap();
    assert_eq!(reply.status, 200);
    let events = reply.events();
    assert!(!events.is_empty(), "progress came first");
    assert!(
        events.iter().all(|e| e["method"] == "notifications/progress"),
        "a result for a cancelled request: {events:?}"
    );
    endpoint.serving.shutdown().await;
}

#[tokio::test]
async fn a_second_request_with_an_id_in_flight_is_refused_at_once() {
    let endpoint = Endpoint::start_with(HttpOptions::default().json_response(true)).await;
    let session = endpoint.initialize().await;
    let slow = {
        let (addr, session) = (endpoint.addr.clone(), session.clone());
        tokio::spawn(async move {
            post(
                &addr,
                Some(&session),
                json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                       "params": {"name": "sleep", "arguments": {"ms": 500}}}),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The same id while the first is in flight: refused, not left waiting
    // for a reply that would go to the other.
    let twin = endpoint
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                   "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}),
        )
        .await;
    assert_eq!(twin.status, 400, "{}", twin.body);
    assert_eq!(twin.json()["error"]["code"], -32600);
    let first = bounded("the first request's reply", slow).await.unwrap();
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.json()["id"], 7);
    assert!(first.json()["result"]["content"].is_array(), "{}", first.body);
    // Once it is answered, the id may come again.
    let again = endpoint
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                   "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}),
        )
        .await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.json()["result"]["structuredContent"]["result"], 3);
    endpoint.serving.shutdown().await;
}

/// An HTTP method, headers, body, and the status expected.
type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, String, u16);

#[tokio::test]
async fn refusals_have_their_statuses() {
    let endpoint = Endpoint::start().await;
    let session = endpoint.initialize().await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let json_accept = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut headers: Vec<(&str, &str)> = json_accept.to_vec();
        headers.extend_from_slice(extra);
        headers
    };
    let session_header: &'static str = Box::leak(session.clone().into_boxed_str());
    let cases: Vec<Case> = vec![
        // No session: only initialize may come without one.
        ("POST", with(&[]), list.clone(), 400),
        (
            "POST",
            with(&[("Mcp-Session-Id", "not-a-session")]),
            list.clone(),
            404,
        ),
        (
            "POST",
            with(&[
                ("Mcp-Session-Id", session_header),
                ("MCP-Protocol-Version", "1999-01-01"),
            ]),
            list.clone(),
            400,
        ),
        (
            "POST",
            with(&[("Mcp-Session-Id", session_header)]),
            format!("[{list}]"),
            400,
        ),
        (
            "POST",
            with(&[("Mcp-Session-Id", session_header)]),
            "{not json".to_owned(),
            400,
        ),
        (
            "POST",
            vec![
                ("Content-Type", "application/json"),
                ("Accept", "application/json"),
                ("Mcp-Session-Id", session_header),
            ],
            list.clone(),
            406,
        ),
        (
            "POST",
            vec![
                ("Content-Type", "text/plain"),
                ("Accept", "application/json, text/event-stream"),
                ("Mcp-Session-Id", session_header),
            ],
            list.clone(),
            415,
        ),
        (
            "GET",
            vec![("Accept", "application/json"), ("Mcp-Session-Id", session_header)],
            String::new(),
            406,
        ),
        (
            "PUT",
            with(&[("Mcp-Session-Id", session_header)]),
            list.clone(),
            405,
        ),
        (
            "POST",
            with(&[
                ("Mcp-Session-Id", session_header),
                ("Origin", "https://evil.example"),
            ]),
            list.clone(),
            403,
        ),
        (
            "POST",
            with(&[("Mcp-Session-Id", session_header), ("Origin", "null")]),
            list.clone(),
            403,
        ),
        (
            "POST",
            with(&[("Mcp-Session-Id", session_header), ("Host", "evil.example:80")]),
            list.clone(),
            421,
        ),
        (
            "DELETE",
            vec![("Mcp-Session-Id", "not-a-session")],
            String::new(),
            404,
        ),
    ];
    for (method, headers, body, status) in cases {
        let reply = endpoint.send(method, &headers, &body).await;
        assert_eq!(
            reply.status, status,
            "{method} {headers:?} {body}: {}",
            reply.body
        );
        if status != 405 || !reply.body.is_empty() {
            assert!(
                reply.json()["error"]["code"].is_i64(),
                "a JSON-RPC error body: {}",
                reply.body
            );
        }
    }
    // GET and DELETE belong to legacy sessions: without one only POST is
    // served (2026-07-28 has no other method).
    let put = endpoint.send("PUT", &with(&[]), "").await;
    assert_eq!(put.header("allow"), Some("POST"));
    for method in ["GET", "DELETE"] {
        let refused = endpoint.send(method, &with(&[]), "").await;
        assert_eq!(
            (refused.status, refused.header("allow")),
            (405, Some("POST")),
            "{method}"
        );
    }
    let put = endpoint
        .send("PUT", &with(&[("Mcp-Session-Id", session_header)]), "")
        .await;
    assert_eq!(put.header("allow"), Some("GET, POST, DELETE"));
    // A page from this machine may call; a notification gets 202.
    let origin: &'static str =
        Box::leak(format!("http://localhost:{}", endpoint.addr.rsplit(':').next().unwrap()).into_boxed_str());
    let local = endpoint
        .send(
            "POST",
            &with(&[("Mcp-Session-Id", session_header), ("Origin", origin)]),
            &list,
        )
        .await;
    assert_eq!(local.status, 200, "{}", local.body);
    endpoint.serving.shutdown().await;
}

#[tokio::test]
async fn server_requests_travel_on_the_tool_s_stream() {
    let endpoint = Endpoint::start().await;
    // A client that can sample, answering through POSTs.
    let reply = endpoint
        .post(
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
                              "clientInfo": {"name": "raw", "version": "1"}}}),
        )
        .await;
    let session = reply.header("mcp-session-id").unwrap().to_owned();
    endpoint
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
    // The tool's stream carries the sampling request; the answer is POSTed.
    let addr = endpoint.addr.clone();
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                      "params": {"name": "sample", "arguments": {"prompt": "2+2?"}}})
    .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut seen = String::new();
    let sampling: Value = bounded("the sampling request", async {
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed: {seen}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
            if let Some(line) = seen
                .lines()
                .find(|l| l.starts_with("data: ") && l.contains("sampling/createMessage"))
            {
                return serde_json::from_str(&line["data: ".len()..]).unwrap();
            }
        }
    })
    .await;
    let answered = endpoint
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": sampling["id"],
                   "result": {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}}),
        )
        .await;
    assert_eq!(answered.status, 202);
    let mut rest = String::new();
    bounded("the tool's result", async {
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            rest.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    })
    .await;
    assert!(rest.contains(r#""text":"4""#), "{rest}");
    endpoint.serving.shutdown().await;
}

#[tokio::test]
async fn sessions_are_bounded_and_idle_ones_end() {
    let mut options = HttpOptions::default();
    options.max_sessions = 2;
    options.session_idle_timeout = Duration::from_millis(200);
    let endpoint = Endpoint::start_with(options).await;
    let first = endpoint.initialize().await;
    endpoint.initialize().await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "raw", "version": "1"}}});
    let full = endpoint.post(None, init.clone()).await;
    assert_eq!(full.status, 503, "{}", full.body);
    assert_eq!(full.json()["error"]["code"], -32007);
    assert!(full.header("retry-after").is_some());
    // Once the others have been idle long enough, they make room.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let third = endpoint.post(None, init).await;
    assert_eq!(third.status, 200, "{}", third.body);
    let gone = endpoint
        .post(Some(&first), json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        .await;
    assert_eq!(gone.status, 404);
    endpoint.serving.shutdown().await;
}

/// The jrpc-mcp client over Streamable HTTP against the demo server: the
/// session, lists, a call answered as SSE with progress and logs on the way,
/// requests to the client through the stream, and DELETE on close.
#[tokio::test]
async fn the_client_over_streamable_http() {
    for (era, version) in [
        (jrpc_mcp::client::ProtocolChoice::Legacy, "2025-11-25"),
        (jrpc_mcp::client::ProtocolChoice::Auto, "2026-07-28"),
    ] {
        the_client_over_streamable_http_in(era, version).await;
    }
}

/// In each era: modern, one POST per request (progress and logs on the
/// request's stream, sampling as input-required rounds); legacy, a
/// session (the server's own requests on the request's stream).
async fn the_client_over_streamable_http_in(era: jrpc_mcp::client::ProtocolChoice, version: &str) {
    use jrpc_mcp::types::{CreateMessageResult, LoggingLevel, OneOrMany, Role, SamplingContent};
    use std::sync::{Arc, Mutex};
    let endpoint = Endpoint::start().await;
    let url = format!("http://{}/mcp", endpoint.addr);
    let progress = Arc::new(Mutex::new(Vec::new()));
    let logs = Arc::new(Mutex::new(0));
    let (p, l) = (Arc::clone(&progress), Arc::clone(&logs));
    let client = jrpc_mcp::McpClient::builder("http-test", "1")
        .on_progress(move |params| p.lock().unwrap().push(params.progress))
        .on_log(move |_| *l.lock().unwrap() += 1)
        .sampling(|_| async {
            Ok(CreateMessageResult {
                role: Role::Assistant,
                content: OneOrMany::One(SamplingContent::text("sampled")),
                model: "m".into(),
                stop_reason: None,
                meta: None,
            })
        })
        .protocol(era)
        // Large replies (the tool list) then come gzip-encoded, and are
        // decoded as they stream.
        .header("Accept-Encoding", "gzip")
        .connect_http(&url)
        .await
        .expect("initialized over HTTP");
    assert_eq!(client.server_info().name, "jrpc-demo");
    assert_eq!(client.protocol_version(), version);
    assert_eq!(client.list_tools().await.unwrap().len(), 8);
    let sum = client.call_tool("add", json!({"a": 2, "b": 40})).await.unwrap();
    assert_eq!(sum.joined_text(), "42");
    client.call_tool("sleep", json!({"ms": 200})).await.unwrap();
    assert!(progress.lock().unwrap().len() >= 2);
    client.set_log_level(LoggingLevel::Debug).await.unwrap();
    client.call_tool("echo", json!({"text": "x"})).await.unwrap();
    assert_eq!(*logs.lock().unwrap(), 1);
    let sampled = client.call_tool("sample", json!({"prompt": "p"})).await.unwrap();
    assert_eq!(sampled.joined_text(), "sampled");
    let unknown = client.read_resource("demo://none").await.unwrap_err();
    assert!(
        matches!(unknown.rpc().map(|e| e.code()), Some(-32002 | -32602)),
        "{unknown}"
    );
    client.close().await;
    endpoint.serving.shutdown().await;
}

/// A client whose session the server no longer knows (it restarted: 404)
/// starts a new one and goes on, as a user would want.
#[tokio::test]
async fn the_client_initializes_again_after_a_404() {
    let endpoint = Endpoint::start().await;
    let url = format!("http://{}/mcp", endpoint.addr);
    let client = jrpc_mcp::McpClient::builder("retry-test", "1")
        .connect_http(&url)
        .await
        .unwrap();
    assert_eq!(
        client
            .call_tool("add", json!({"a": 1, "b": 2}))
            .await
            .unwrap()
            .joined_text(),
        "3"
    );
    // The server restarts on the same address, forgetting every session.
    let addr = endpoint.addr.clone();
    endpoint.serving.shutdown().await;
    let restarted = jrpc_mcp::demo::server()
        .serve_http(addr.as_str(), HttpOptions::default())
        .await
        .unwrap();
    let again = client.call_tool("add", json!({"a": 2, "b": 40})).await.unwrap();
    assert_eq!(again.joined_text(), "42");
    client.close().await;
    restarted.shutdown().await;
}

/// The SSE events of a raw (chunked) body so far: `(id, data)`.
fn raw_events(raw: &str) -> Vec<(Option<String>, String)> {
    let body = raw.split_once("\r\n\r\n").map_or(raw, |(_, body)| body);
    let body = common::dechunk(body);
    body.split("\n\n")
        .filter(|event| event.lines().any(|l| l.starts_with("data:")))
        .map(|event| {
            let id = event
                .lines()
                .find_map(|l| l.strip_prefix("id: "))
                .map(str::to_owned);
            let data = event
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap_or("")
                .to_owned();
            (id, data)
        })
        .collect()
}

#[tokio::test]
async fn a_broken_stream_is_resumed_with_last_event_id() {
    let endpoint = Endpoint::start().await;
    let session = endpoint.initialize().await;
    // A sleep that reports progress: read its stream's first messages, then
    // hang up.
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                      "params": {"name": "sleep", "arguments": {"ms": 400}, "_meta": {"progressToken": "p"}}})
    .to_string();
    let mut stream = TcpStream::connect(&endpoint.addr).await.unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        endpoint.addr,
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while raw_events(&String::from_utf8_lossy(&raw)).len() < 2 {
        let n = bounded("the first events", stream.read(&mut buf)).await.unwrap();
        assert!(n > 0);
        raw.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    assert!(text.contains("retry: 1000"), "{text}");
    let seen = raw_events(&text);
    // First an event with only an id (to resume from), then progress.
    assert!(
        seen[0].0.as_deref().is_some_and(|id| id.ends_with("-0")) && seen[0].1.is_empty(),
        "{seen:?}"
    );
    let (last_id, _) = seen.last().unwrap().clone();
    drop(stream);
    // The request goes on; coming back gets the rest, the result included.
    let resumed = endpoint
        .send(
            "GET",
            &[
                ("Accept", "text/event-stream"),
                ("Mcp-Session-Id", &session),
                ("Last-Event-ID", last_id.as_deref().unwrap()),
            ],
            "",
        )
        .await;
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    let events = resumed.events();
    let result = events.last().unwrap();
    assert_eq!(
        (
            result["id"].as_i64(),
            result["result"]["content"][0]["text"].as_str()
        ),
        (Some(5), Some("slept 400")),
        "{events:?}"
    );
    assert!(events[..events.len() - 1]
        .iter()
        .all(|e| e["method"] == "notifications/progress"));
    // No message twice: the resumed stream starts after the last one seen.
    let first_resumed = resumed.body.lines().find_map(|l| l.strip_prefix("id: ")).unwrap();
    let seq = |id: &str| id.split_once('-').unwrap().1.parse::<u64>().unwrap();
    assert_eq!(seq(first_resumed), seq(last_id.as_deref().unwrap()) + 1);
    // An event of no stream: nothing to resume.
    let gone = endpoint
        .send(
            "GET",
            &[
                ("Accept", "text/event-stream"),
                ("Mcp-Session-Id", &session),
                ("Last-Event-ID", "99-1"),
            ],
            "",
        )
        .await;
    assert_eq!(gone.status, 404);
    endpoint.serving.shutdown().await;
}

/// Issue 31: `McpClient::listen` over Streamable HTTP in both eras:
/// modern, its own `subscriptions/listen` stream (acknowledged first);
/// legacy, `resources/subscribe` and the session's standalone stream.
#[tokio::test]
async fn the_client_listens_for_changes_over_streamable_http() {
    use futures_util::StreamExt;
    use jrpc_mcp::types::SubscriptionFilter;
    for era in [
        jrpc_mcp::client::ProtocolChoice::Auto,
        jrpc_mcp::client::ProtocolChoice::Legacy,
    ] {
        let endpoint = Endpoint::start().await;
        let url = format!("http://{}/mcp", endpoint.addr);
        let client = jrpc_mcp::McpClient::builder("listen-test", "1")
            .protocol(era.clone())
            .connect_http(&url)
            .await
            .unwrap();
        let filter = SubscriptionFilter {
            resource_subscriptions: Some(vec!["demo://counter".into()]),
            ..SubscriptionFilter::default()
        };
        let mut changes = client.listen(filter).await.unwrap();
        assert_eq!(changes.acknowledged().is_some(), client.is_modern(), "{era:?}");
        // A legacy session's notifications come on its standalone stream,
        // opened in the background: bump until one gets through (bounded).
        let mut change = None;
        for _ in 0..20 {
            client.call_tool("bump", json!({})).await.unwrap();
            if let Ok(next) = tokio::time::timeout(Duration::from_millis(500), changes.next()).await {
                change = Some(next.expect("the stream goes on").expect("a change, not an error"));
                break;
            }
        }
        let change = change.expect("a change after 20 bumps");
        assert_eq!(change.uri(), Some("demo://counter"), "{era:?}");
        drop(changes);
        client.close().await;
        endpoint.serving.shutdown().await;
    }
}

/// Dropping an HTTP call cancels it on the server, and the client goes
/// on: a modern request's stream is closed (2026-07-28's cancellation); a
/// 2025-11-25 session's client, which sends each request from its
/// caller's task, sends `notifications/cancelled`, for a call past its
/// timeout too.
#[tokio::test]
async fn dropping_an_http_call_cancels_it_on_the_server() {
    use jrpc_mcp::client::ProtocolChoice;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    for era in [ProtocolChoice::Auto, ProtocolChoice::Legacy] {
        let modern = era == ProtocolChoice::Auto;
        let cancelled = Arc::new(AtomicUsize::new(0));
        let serving = common::waiting_server(&cancelled)
            .serve_http("127.0.0.1:0", HttpOptions::default())
            .await
            .unwrap();
        let url = format!("{}/mcp", serving.local_addr());
        let client = jrpc_mcp::McpClient::builder("test", "1")
            .protocol(era)
            .call_timeout(Duration::from_millis(500))
            .connect_http(&url)
            .await
            .unwrap();
        assert_eq!(client.is_modern(), modern);
        let call = client.call_tool("wait", json!({}));
        assert!(tokio::time::timeout(Duration::from_millis(200), call)
            .await
            .is_err());
        common::cancelled_at_least(&cancelled, 1).await;
        let timed_out = client.call_tool("wait", json!({})).await.unwrap_err();
        assert!(
            timed_out.to_string().contains("no response within"),
            "{timed_out}"
        );
        common::cancelled_at_least(&cancelled, 2).await;
        client.ping().await.unwrap();
        client.close().await;
        serving.shutdown().await;
    }
}
