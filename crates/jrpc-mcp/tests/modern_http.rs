//! Revision 2026-07-28 over Streamable HTTP, with raw HTTP/1.1: headers
//! checked against the body, statuses by error code, JSON or a stream per
//! request, closing the stream cancels, subscriptions on a stream of their
//! own — on the same endpoint as legacy sessions.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{bounded, exchange, send, Reply};
use jrpc_mcp::http::HttpOptions;
use jrpc_mcp::server::{McpContext, McpServer, NoArgs, ToolError};
use jrpc_mcp::types::{CallToolResult, Tool};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn envelope(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

/// A modern request's body.
fn body(id: Value, method: &str, mut params: Value) -> String {
    if params.get("_meta").is_none() {
        params["_meta"] = envelope(json!({"elicitation": {}}));
    }
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// The headers a conforming client sends for `method` (and `name`).
fn headers<'a>(method: &'a str, name: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
    ];
    if let Some(name) = name {
        headers.push(("Mcp-Name", name));
    }
    headers
}

struct Server {
    serving: jrpc::server::Serving,
    addr: String,
}

impl Server {
    async fn start(server: McpServer) -> Self {
        let serving = server
            .serve_http("127.0.0.1:0", HttpOptions::default())
            .await
            .unwrap();
        let addr = serving.local_addr().trim_start_matches("http://").to_owned();
        Server { serving, addr }
    }

    async fn post(&self, headers: &[(&str, &str)], body: &str) -> Reply {
        send(&self.addr, "POST", headers, body).await
    }

    async fn call(&self, method: &str, name: Option<&str>, params: Value) -> Reply {
        self.post(&headers(method, name), &body(json!(7), method, params))
            .await
    }
}

/// A server whose `region` tool mirrors its argument in `Mcp-Param-Region`
/// (and `count` in `Mcp-Param-Count`), and whose `wait` tool notes when it
/// is dropped.
fn server(dropped: Arc<AtomicBool>) -> McpServer {
    let schema = json!({
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
        },
    });
    McpServer::builder("headers", "1")
        .raw_tool(
            Tool::new("region").input_schema(schema.as_object().cloned().unwrap_or_default()),
            |args, _cx| async move {
                Ok(CallToolResult::text(format!(
                    "{}",
                    serde_json::Value::Object(args)
                )))
            },
        )
        .tool("wait", "Waits until dropped", move |_: NoArgs, cx: McpContext| {
            let dropped = Arc::clone(&dropped);
            async move {
                struct Noted(Arc<AtomicBool>);
                impl Drop for Noted {
                    fn drop(&mut self) {
                        self.0.store(true, Ordering::SeqCst);
                    }
                }
                let _noted = Noted(dropped);
                cx.progress(1.0, None, None).await;
                std::future::pending::<()>().await;
                Ok::<_, ToolError>("never")
            }
        })
        .build()
}

#[tokio::test]
async fn headers_must_match_the_body() {
    let server = Server::start(server(Arc::default())).await;
    let args = json!({"name": "region", "arguments": {"region": "us-west1", "count": 42}});
    let ok = |extra: &[(&'static str, &'static str)]| {
        let mut h = headers("tools/call", Some("region"));
        h.extend_from_slice(extra);
        h
    };
    let good = server
        .post(
            &ok(&[("Mcp-Param-Region", "us-west1"), ("Mcp-Param-Count", "42")]),
            &body(json!(1), "tools/call", args.clone()),
        )
        .await;
    assert_eq!(good.status, 200, "{}", good.body);
    assert_eq!(good.header("content-type"), Some("application/json"));
    assert_eq!(good.json()["result"]["resultType"], "complete");
    // Base64 sentinels are decoded; integers compare as numbers.
    let encoded = server
        .post(
            &ok(&[
                ("Mcp-Param-Region", "=?base64?dXMtd2VzdDE=?="),
                ("Mcp-Param-Count", "42.0"),
            ]),
            &body(json!(2), "tools/call", args.clone()),
        )
        .await;
    assert_eq!(encoded.status, 200, "{}", encoded.body);

    let mismatches: Vec<Vec<(&str, &str)>> = vec![
        // The parameter headers: missing, different, not canonical base64.
        ok(&[("Mcp-Param-Count", "42")]),
        ok(&[("Mcp-Param-Region", "eu-west1"), ("Mcp-Param-Count", "42")]),
        ok(&[
            ("Mcp-Param-Region", "=?base64?dXMtd2VzdDE?="),
            ("Mcp-Param-Count", "42"),
        ]),
        ok(&[("Mcp-Param-Region", "us-west1"), ("Mcp-Param-Count", "43")]),
        // The standard ones: missing, different, twice.
        headers("tools/call", None),
        headers("tools/list", Some("region")),
        vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "region"),
        ],
        {
            let mut h = ok(&[("Mcp-Param-Region", "us-west1"), ("Mcp-Param-Count", "42")]);
            h.push(("Mcp-Method", "tools/call"));
            h
        },
    ];
    for headers in mismatches {
        let reply = server
            .post(&headers, &body(json!("m"), "tools/call", args.clone()))
            .await;
        assert_eq!(
            (reply.status, reply.json()["error"]["code"].as_i64()),
            (400, Some(-32020)),
            "{headers:?}: {}",
            reply.body
        );
        assert_eq!(reply.json()["id"], "m", "the error carries the request's id");
    }
    // Present for an argument the body does not have.
    let reply = server
        .post(
            &ok(&[("Mcp-Param-Region", "us-west1")]),
            &body(json!(3), "tools/call", json!({"name": "region", "arguments": {}})),
        )
        .await;
    assert_eq!(reply.json()["error"]["code"], -32020, "{}", reply.body);
    server.serving.shutdown().await;
}

#[tokio::test]
async fn statuses_follow_the_error() {
    let server = Server::start(jrpc_mcp::demo::server()).await;
    let missing_meta = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).to_string();
    let reply = server.post(&headers("tools/list", None), &missing_meta).await;
    assert_eq!(
        (reply.status, reply.json()["error"]["code"].as_i64()),
        (400, Some(-32602)),
        "{}",
        reply.body
    );
    let mut old = headers("server/discover", None);
    old[2] = ("MCP-Protocol-Version", "1999-01-01");
    let params = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "1999-01-01",
                                  "io.modelcontextprotocol/clientCapabilities": {}}});
    let reply = server
        .post(&old, &body(json!(2), "server/discover", params))
        .await;
    assert_eq!(
        (reply.status, reply.json()["error"]["code"].as_i64()),
        (400, Some(-32022)),
        "{}",
        reply.body
    );
    assert_eq!(reply.json()["error"]["data"]["requested"], "1999-01-01");
    for method in ["initialize", "ping", "logging/setLevel", "no/such"] {
        let reply = server.call(method, None, json!({})).await;
        assert_eq!(
            (reply.status, reply.json()["error"]["code"].as_i64()),
            (404, Some(-32601)),
            "{method}"
        );
        assert_eq!(reply.json()["id"], 7);
    }
    let reply = server
        .call(
            "tools/call",
            Some("sample"),
            json!({"name": "sample", "arguments": {"prompt": "?"}}),
        )
        .await;
    assert_eq!(
        (reply.status, reply.json()["error"]["code"].as_i64()),
        (400, Some(-32021)),
        "{}",
        reply.body
    );
    let reply = server
        .call(
            "resources/read",
            Some("demo://none"),
            json!({"uri": "demo://none"}),
        )
        .await;
    assert_eq!(
        (reply.status, reply.json()["error"]["code"].as_i64()),
        (400, Some(-32602))
    );
    // A notification is accepted and dropped; batches and responses are
    // not requests.
    let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
        .to_string();
    assert_eq!(
        server
            .post(&headers("notifications/cancelled", None), &note)
            .await
            .status,
        202
    );
    let batch = format!("[{}]", body(json!(1), "tools/list", json!({})));
    assert_eq!(
        server.post(&headers("tools/list", None), &batch).await.status,
        400
    );
    let response = json!({"jsonrpc": "2.0", "id": 1, "result": {}}).to_string();
    assert_eq!(
        server.post(&headers("tools/list", None), &response).await.status,
        400
    );
    server.serving.shutdown().await;
}

#[tokio::test]
async fn a_request_streams_only_when_it_has_something_to_say() {
    let server = Server::start(jrpc_mcp::demo::server()).await;
    let mut params = json!({"name": "sleep", "arguments": {"ms": 150}});
    params["_meta"] = envelope(json!({}));
    params["_meta"]["progressToken"] = json!(9);
    let reply = server.call("tools/call", Some("sleep"), params).await;
    assert_eq!(
        reply.header("content-type"),
        Some("text/event-stream"),
        "{}",
        reply.body
    );
    let events = reply.events();
    let (last, progress) = events.split_last().unwrap();
    assert!(
        !progress.is_empty() && progress.iter().all(|e| e["method"] == "notifications/progress"),
        "{events:?}"
    );
    assert_eq!(last["result"]["content"][0]["text"], "slept 150");
    // An input_required result is JSON too.
    let reply = server
        .call(
            "tools/call",
            Some("elicit"),
            json!({"name": "elicit", "arguments": {"message": "?"}}),
        )
        .await;
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.json()["result"]["resultType"], "input_required");
    server.serving.shutdown().await;
}

/// A whole reply over 1 KiB (the demo's `tools/list`) is compressed for a
/// client that takes gzip; a small one, and a stream, are not.
#[tokio::test]
async fn large_replies_are_compressed_for_clients_that_take_gzip() {
    let server = Server::start(jrpc_mcp::demo::server()).await;
    let list = body(json!(1), "tools/list", json!({}));
    let mut taking_gzip = headers("tools/list", None);
    taking_gzip.push(("Accept-Encoding", "gzip"));
    let (head, zipped) = exchange(&server.addr, "POST", &taking_gzip, &list).await;
    let head = head.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("content-encoding: gzip"), "{head}");
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&zipped[..]), &mut text).unwrap();
    let plain = server.post(&headers("tools/list", None), &list).await;
    assert_eq!(plain.header("content-encoding"), None);
    assert!(plain.body.len() > 1024, "the demo's tool list is large");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), plain.json());

    let mut call = headers("tools/call", Some("add"));
    call.push(("Accept-Encoding", "gzip"));
    let add = body(
        json!(2),
        "tools/call",
        json!({"name": "add", "arguments": {"a": 1, "b": 2}}),
    );
    let (head, _) = exchange(&server.addr, "POST", &call, &add).await;
    let head = head.to_ascii_lowercase();
    assert!(
        !head.contains("content-encoding"),
        "a small reply as it is: {head}"
    );
    let mut params = json!({"name": "sleep", "arguments": {"ms": 50}});
    params["_meta"] = envelope(json!({}));
    params["_meta"]["progressToken"] = json!(1);
    let mut sleep = headers("tools/call", Some("sleep"));
    sleep.push(("Accept-Encoding", "gzip"));
    let (head, _) = exchange(
        &server.addr,
        "POST",
        &sleep,
        &body(json!(3), "tools/call", params),
    )
    .await;
    let head = head.to_ascii_lowercase();
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    assert!(!head.contains("content-encoding"), "events as they come: {head}");
    server.serving.shutdown().await;
}

/// Posts a request and hangs up once `seen` bytes of the reply arrived (0:
/// at once).
async fn post_and_hang_up(addr: &str, headers: &[(&str, &str)], body: &str, seen: usize) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut request = format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\n");
    for (name, value) in headers {
        request += &format!("{name}: {value}\r\n");
    }
    request += &format!("Content-Length: {}\r\n\r\n{body}", body.len());
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.len() < seen {
        let n = bounded("a reply", stream.read(&mut buf)).await.unwrap();
        assert!(n > 0, "the server closed first");
        got.extend_from_slice(&buf[..n]);
    }
}

#[tokio::test]
async fn closing_the_stream_cancels_the_request() {
    for progress in [true, false] {
        let dropped = Arc::new(AtomicBool::new(false));
        let server = Server::start(server(Arc::clone(&dropped))).await;
        let mut params = json!({"name": "wait", "arguments": {}});
        params["_meta"] = envelope(json!({}));
        if progress {
            // Progress first: the reply is a stream, already under way.
            params["_meta"]["progressToken"] = json!("p");
        }
        let body = body(json!(1), "tools/call", params);
        post_and_hang_up(
            &server.addr,
            &headers("tools/call", Some("wait")),
            &body,
            if progress { 1 } else { 0 },
        )
        .await;
        bounded("the handler's cancellation", async {
            while !dropped.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        server.serving.shutdown().await;
    }
}

/// Reads `stream` into `got` until it holds `wanted`.
async fn read_until(stream: &mut TcpStream, got: &mut Vec<u8>, wanted: &str) {
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(got).contains(wanted) {
        let n = bounded(wanted, stream.read(&mut buf)).await.unwrap();
        assert!(
            n > 0,
            "the stream ended before {wanted}: {}",
            String::from_utf8_lossy(got)
        );
        got.extend_from_slice(&buf[..n]);
    }
}

#[tokio::test]
async fn subscriptions_listen_on_a_stream_of_their_own() {
    let server = Server::start(jrpc_mcp::demo::server()).await;
    let params = json!({"notifications": {"resourceSubscriptions": ["demo://counter"]}});
    let body = body(json!("l-1"), "subscriptions/listen", params);
    let mut stream = TcpStream::connect(&server.addr).await.unwrap();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
        server.addr
    );
    for (name, value) in headers("subscriptions/listen", None) {
        request += &format!("{name}: {value}\r\n");
    }
    request += &format!("Content-Length: {}\r\n\r\n{body}", body.len());
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    read_until(&mut stream, &mut got, "acknowledged").await;
    let bumped = server
        .call(
            "tools/call",
            Some("bump"),
            json!({"name": "bump", "arguments": {}}),
        )
        .await;
    assert_eq!(bumped.json()["result"]["content"][0]["text"], "1");
    read_until(&mut stream, &mut got, "resources/updated").await;
    // Shutting down ends the subscription gracefully: with its result.
    server.serving.shutdown().await;
    bounded("the end of the stream", stream.read_to_end(&mut got))
        .await
        .unwrap();
    let raw = String::from_utf8(got).unwrap();
    let (head, rest) = raw.split_once("\r\n\r\n").unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{head}"
    );
    let reply = Reply {
        status: 200,
        headers: Vec::new(),
        body: common::dechunk(rest),
    };
    let events = reply.events();
    assert_eq!(
        events[0]["method"], "notifications/subscriptions/acknowledged",
        "{events:?}"
    );
    assert_eq!(events[1]["method"], "notifications/resources/updated");
    assert_eq!(events[1]["params"]["uri"], "demo://counter");
    for event in &events {
        let tagged = event["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].clone();
        let tagged = if tagged.is_null() {
            event["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"].clone()
        } else {
            tagged
        };
        assert_eq!(tagged, "l-1", "{event}");
    }
    assert_eq!(
        events.last().unwrap()["result"]["resultType"],
        "complete",
        "{events:?}"
    );
}

#[tokio::test]
async fn one_endpoint_serves_both_eras() {
    let server = Server::start(jrpc_mcp::demo::server()).await;
    // A legacy session...
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "old", "version": "1"}}});
    let legacy_headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let opened = server.post(&legacy_headers, &init.to_string()).await;
    let session = opened.header("mcp-session-id").expect("a session").to_owned();
    assert_eq!(opened.json()["result"]["protocolVersion"], "2025-11-25");
    // ...and a modern request without headers (its body decides) is told
    // what it lacks; with them it is served, with no session.
    let reply = server
        .post(&legacy_headers, &body(json!(2), "tools/list", json!({})))
        .await;
    assert_eq!(reply.json()["error"]["code"], -32020, "{}", reply.body);
    let modern = server.call("tools/list", None, json!({})).await;
    assert_eq!(modern.json()["result"]["resultType"], "complete");
    assert!(modern.header("mcp-session-id").is_none());
    let mut with_session = legacy_headers.to_vec();
    with_session.push(("Mcp-Session-Id", &session));
    with_session.push(("MCP-Protocol-Version", "2025-11-25"));
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}).to_string();
    let legacy = server.post(&with_session, &list).await;
    let result = legacy
        .events()
        .pop()
        .map(|e| e["result"].clone())
        .unwrap_or_else(|| legacy.json()["result"].clone());
    assert!(result.get("resultType").is_none(), "{}", legacy.body);
    server.serving.shutdown().await;
}

/// `McpServer::serve_http_on` serves any listener of byte streams (issue
/// 42): over a Unix socket, a 2026-07-28 `tools/call` sent with
/// `Host: localhost` is answered.
#[cfg(unix)]
#[tokio::test]
async fn streamable_http_over_a_unix_socket() {
    let path = std::env::temp_dir().join(format!("jrpc-mcp-unix-{}.sock", std::process::id()));
    let listener = jrpc::transport::unix::UnixListener::bind(&path, Default::default(), 1 << 20)
        .await
        .unwrap();
    let serving = jrpc_mcp::demo::server().serve_http_on(listener, HttpOptions::default());
    assert!(
        serving.local_addr().starts_with("http+unix://%2F"),
        "{}",
        serving.local_addr()
    );
    let request = body(
        json!(1),
        "tools/call",
        json!({"name": "add", "arguments": {"a": 2, "b": 40}}),
    );
    let mut head = String::from("POST /mcp HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (name, value) in headers("tools/call", Some("add")) {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", request.len()));
    let reply = bounded("a tools/call over the socket", async {
        let mut stream = tokio::net::UnixStream::connect(&path).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await.unwrap();
        reply
    })
    .await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains(r#""text":"42""#), "{reply}");
    bounded("shutdown", serving.shutdown()).await;
}
