//! The peer, client and stream transports end to end, over real TCP and Unix
//! sockets, in-memory pipes and child processes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jrpc::client::{Client, StderrMode};
use jrpc::codec::Framing;
use jrpc::peer::{CancelProtocol, Peer};
use jrpc::server::Server;
use jrpc::{CallError, Error, RequestContext, Router};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Fails the test instead of hanging when something never finishes.
async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish"))
}

async fn tcp_server(router: Router) -> (jrpc::server::Serving, String) {
    let serving = Server::new(router).bind_tcp("127.0.0.1:0").await.unwrap();
    let addr = serving.local_addr().trim_start_matches("tcp://").to_owned();
    (serving, addr)
}

#[tokio::test]
async fn handler_calls_back_the_client_and_uses_its_answer() {
    let router = Router::new().method("greet", |(): (), ctx: RequestContext| async move {
        let client = ctx.peer().expect("served on a peer");
        let name: String = client
            .call("whoami", ())
            .await
            .map_err(|e| Error::new(-32000, "callback failed").with_data(&e.to_string()))?;
        Ok(format!("hello, {name}"))
    });
    let (serving, addr) = tcp_server(router).await;
    let client = Client::builder()
        .router(Router::new().sync_method("whoami", || Ok("ann")))
        .connect_tcp(addr)
        .await
        .unwrap();
    let greeting: String = bounded("call", client.call("greet", ())).await.unwrap();
    assert_eq!(greeting, "hello, ann");
    drop(client);
    serving.shutdown().await;
}

#[tokio::test]
async fn pipelined_calls_are_answered_out_of_order_and_matched_by_id() {
    let (serving, addr) = tcp_server(jrpc::demo::router()).await;
    let client = Client::builder().connect_tcp(addr).await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let calls = (0..20u64).map(|i| {
        let (client, order) = (client.clone(), Arc::clone(&order));
        async move {
            // Earlier calls sleep longer, so replies come back reversed.
            let ms: u64 = client.call("sleep", [(20 - i) * 10]).await.unwrap();
            order.lock().unwrap().push(i);
            assert_eq!(ms, (20 - i) * 10);
        }
    });
    bounded("pipelined calls", futures_util::future::join_all(calls)).await;
    let order = order.lock().unwrap().clone();
    assert_ne!(
        order,
        (0..20).collect::<Vec<_>>(),
        "replies came back in another order"
    );
    assert_eq!(order.len(), 20);
    serving.shutdown().await;
}

#[tokio::test]
async fn calls_time_out_and_the_connection_stays_usable() {
    let (serving, addr) = tcp_server(jrpc::demo::router()).await;
    let client = Client::builder()
        .call_timeout(Duration::from_millis(100))
        .connect_tcp(addr)
        .await
        .unwrap();
    let err = bounded("call", client.call::<u64>("sleep", [5_000]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, CallError::Timeout(d) if d == Duration::from_millis(100)),
        "{err:?}"
    );
    let sum: i64 = client
        .call_with_timeout("sum", [1, 2], Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(sum, 3);
    // No graceful shutdown: it would wait for the abandoned 5 s sleep.
    drop(serving);
}

/// A router whose `wait` handler runs until cancelled, counting starts and
/// drops (a cancelled handler is dropped without finishing).
fn cancellable_router(started: Arc<AtomicUsize>, dropped: Arc<AtomicUsize>) -> Router {
    struct OnDrop(Arc<AtomicUsize>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    Router::new().method("wait", move |(): ()| {
        let (started, dropped) = (Arc::clone(&started), Arc::clone(&dropped));
        async move {
            started.fetch_add(1, Ordering::SeqCst);
            let _guard = OnDrop(dropped);
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(())
        }
    })
}

async fn wait_until(what: &str, condition: impl Fn() -> bool) {
    bounded(what, async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}

#[tokio::test]
async fn dropping_a_call_cancels_the_handler_on_the_other_side() {
    let (started, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let serving = Server::new(cancellable_router(Arc::clone(&started), Arc::clone(&dropped)))
        .cancellation(CancelProtocol::mcp())
        .bind_tcp("127.0.0.1:0")
        .await
        .unwrap();
    let addr = serving.local_addr().trim_start_matches("tcp://").to_owned();
    let client = Client::builder()
        .cancellation(CancelProtocol::mcp())
        .connect_tcp(addr)
        .await
        .unwrap();
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.call::<()>("wait", ()).await }
    });
    wait_until("handler start", || started.load(Ordering::SeqCst) == 1).await;
    call.abort();
    wait_until("handler abort", || dropped.load(Ordering::SeqCst) == 1).await;
    // The connection goes on.
    assert!(client
        .call::<Value>("wait_missing", ())
        .await
        .unwrap_err()
        .rpc()
        .is_some());
    serving.shutdown().await;
}

#[tokio::test]
async fn server_cancels_its_call_to_the_client() {
    // The server asks the client to `wait`, gives up after 50 ms, and the
    // client's handler is aborted by the cancel notification.
    let (started, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let router = Router::new().method("ask", |(): (), ctx: RequestContext| async move {
        let client = ctx.peer().unwrap();
        let outcome = client
            .call_with_timeout::<()>("wait", (), Duration::from_millis(50))
            .await;
        Ok(matches!(outcome, Err(CallError::Timeout(_))))
    });
    let serving = Server::new(router)
        .cancellation(CancelProtocol::mcp())
        .bind_tcp("127.0.0.1:0")
        .await
        .unwrap();
    let addr = serving.local_addr().trim_start_matches("tcp://").to_owned();
    let client = Client::builder()
        .cancellation(CancelProtocol::mcp())
        .router(cancellable_router(Arc::clone(&started), Arc::clone(&dropped)))
        .connect_tcp(addr)
        .await
        .unwrap();
    let timed_out: bool = bounded("ask", client.call("ask", ())).await.unwrap();
    assert!(timed_out);
    wait_until("client handler abort", || dropped.load(Ordering::SeqCst) == 1).await;
    assert_eq!(started.load(Ordering::SeqCst), 1);
    serving.shutdown().await;
}

#[tokio::test]
async fn lsp_cancellation_answers_the_cancelled_request() {
    let (started, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (a, b) = tokio::io::duplex(64 * 1024);
    let (read, write) = tokio::io::split(a);
    let _server = Peer::builder()
        .router(cancellable_router(Arc::clone(&started), Arc::clone(&dropped)))
        .cancellation(CancelProtocol::lsp())
        .start(read, write, Framing::ContentLength);
    let (read, mut write) = tokio::io::split(b);
    let mut read = BufReader::new(read);
    let send = |body: &str| format!("Content-Length: {}\r\n\r\n{body}", body.len());
    write
        .write_all(send(r#"{"jsonrpc":"2.0","method":"wait","id":7}"#).as_bytes())
        .await
        .unwrap();
    wait_until("handler start", || started.load(Ordering::SeqCst) == 1).await;
    write
        .write_all(send(r#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":7}}"#).as_bytes())
        .await
        .unwrap();
    let mut header = String::new();
    bounded("reply header", read.read_line(&mut header))
        .await
        .unwrap();
    let len: usize = header
        .trim()
        .strip_prefix("Content-Length: ")
        .unwrap()
        .parse()
        .unwrap();
    let mut blank = String::new();
    read.read_line(&mut blank).await.unwrap();
    let mut body = vec![0; len];
    read.read_exact(&mut body).await.unwrap();
    let reply: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(reply["id"], 7);
    assert_eq!(reply["error"]["code"], -32800);
    wait_until("handler abort", || dropped.load(Ordering::SeqCst) == 1).await;
}

/// A batch entry is cancelled like a request of its own: its handler is
/// dropped, its place in the batch reply gets the protocol's answer, and
/// the other entries are answered as usual.
#[tokio::test]
async fn a_cancelled_batch_entry_is_answered_in_its_place() {
    let (started, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let router =
        cancellable_router(Arc::clone(&started), Arc::clone(&dropped)).sync_method("ping", || Ok("pong"));
    let (a, b) = tokio::io::duplex(64 * 1024);
    let (read, write) = tokio::io::split(a);
    let _server = Peer::builder()
        .router(router)
        .cancellation(CancelProtocol::lsp())
        .start(read, write, Framing::Ndjson);
    let (read, mut write) = tokio::io::split(b);
    let mut read = BufReader::new(read);
    let batch = r#"[{"jsonrpc":"2.0","method":"ping","id":1},{"jsonrpc":"2.0","method":"wait","id":2},{"jsonrpc":"2.0","method":"ping","id":3}]"#;
    write.write_all(format!("{batch}\n").as_bytes()).await.unwrap();
    wait_until("handler start", || started.load(Ordering::SeqCst) == 1).await;
    let cancel = r#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":2}}"#;
    write.write_all(format!("{cancel}\n").as_bytes()).await.unwrap();
    let mut line = String::new();
    bounded("the batch reply", read.read_line(&mut line))
        .await
        .unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap();
    let summary: Vec<String> = reply
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{}:{}", r["id"], r.get("result").unwrap_or(&r["error"]["code"])))
        .collect();
    assert_eq!(summary, ["1:\"pong\"", "2:-32800", "3:\"pong\""]);
    wait_until("handler dropped", || dropped.load(Ordering::SeqCst) == 1).await;
}

#[tokio::test]
async fn a_killed_child_fails_pending_calls_at_once_with_its_exit_status() {
    // `sleep` never answers; kill it while a call waits.
    let mut command = tokio::process::Command::new("sleep");
    command.arg("30");
    let client = Client::builder()
        .call_timeout(Duration::from_secs(3600))
        .spawn(command)
        .unwrap();
    let pending = tokio::spawn({
        let client = client.clone();
        async move { client.call::<Value>("anything", ()).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let pid = client.child_id().expect("a spawned child has a pid");
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let err = bounded("the pending call", pending).await.unwrap().unwrap_err();
    match &err {
        CallError::Closed(reason) => assert!(reason.contains("exited") && reason.contains("9"), "{reason}"),
        other => panic!("expected Closed, got {other:?}"),
    }
    // New calls fail at once too.
    let again = bounded("a new call", client.call::<Value>("x", ()))
        .await
        .unwrap_err();
    assert!(again.is_closed(), "{again:?}");
}

#[tokio::test]
async fn a_child_that_exits_reports_its_stderr() {
    let mut command = tokio::process::Command::new("sh");
    command.args(["-c", "read line; echo 'fatal: no config' >&2; exit 3"]);
    let client = Client::builder()
        .stderr(StderrMode::Capture)
        .spawn(command)
        .unwrap();
    let err = bounded("call", client.call::<Value>("x", ())).await.unwrap_err();
    let CallError::Closed(reason) = &err else {
        panic!("{err:?}")
    };
    assert!(reason.contains("exit status: 3"), "{reason}");
    assert!(reason.contains("fatal: no config"), "{reason}");
    assert_eq!(client.captured_stderr().unwrap(), "fatal: no config\n");
}

#[tokio::test]
async fn the_server_going_away_fails_pending_calls_at_once() {
    // A server that reads one request and then drops the connection.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut lines = BufReader::new(stream).lines();
        lines.next_line().await.unwrap();
        lines.next_line().await.unwrap();
    });
    let client = Client::builder()
        .call_timeout(Duration::from_secs(3600))
        .connect_tcp(addr)
        .await
        .unwrap();
    let first = tokio::spawn({
        let client = client.clone();
        async move { client.call::<Value>("one", ()).await }
    });
    let second = tokio::spawn({
        let client = client.clone();
        async move { client.call::<Value>("two", ()).await }
    });
    server.await.unwrap();
    for pending in [first, second] {
        let err = bounded("pending call", pending).await.unwrap().unwrap_err();
        assert!(
            matches!(&err, CallError::Closed(reason) if reason.contains("end of stream")),
            "{err:?}"
        );
    }
    assert!(client.call::<Value>("three", ()).await.unwrap_err().is_closed());
}

#[tokio::test]
async fn graceful_shutdown_finishes_calls_in_flight() {
    let (serving, addr) = tcp_server(jrpc::demo::router()).await;
    let client = Client::builder().connect_tcp(addr.as_str()).await.unwrap();
    let in_flight = tokio::spawn({
        let client = client.clone();
        async move { client.call::<u64>("sleep", [300]).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    bounded("shutdown", serving.shutdown()).await;
    assert_eq!(
        in_flight.await.unwrap().unwrap(),
        300,
        "the in-flight call completed"
    );
    // The connection is closed now, and nothing listens any more.
    let err = bounded("call after shutdown", client.call::<Value>("get_data", ()))
        .await
        .unwrap_err();
    assert!(err.is_closed(), "{err:?}");
    assert!(TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn past_the_connection_limit_clients_are_refused_clearly() {
    let serving = Server::new(jrpc::demo::router())
        .max_connections(2)
        .bind_tcp("127.0.0.1:0")
        .await
        .unwrap();
    let addr = serving.local_addr().trim_start_matches("tcp://").to_owned();
    let connect = || Client::builder().connect_tcp(addr.clone());
    let (first, second) = (connect().await.unwrap(), connect().await.unwrap());
    for client in [&first, &second] {
        assert_eq!(client.call::<i64>("sum", [1]).await.unwrap(), 1);
    }
    // Issue 11: a third is told at once (-32007, as a WebSocket upgrade's
    // 503 says), then closed, instead of waiting unseen in the backlog.
    let third = TcpStream::connect(&addr).await.unwrap();
    let mut lines = BufReader::new(third);
    let mut refusal = String::new();
    bounded("the refusal", lines.read_line(&mut refusal))
        .await
        .unwrap();
    let refusal: Value = serde_json::from_str(&refusal).unwrap();
    assert_eq!(refusal["error"]["code"], -32007, "{refusal}");
    assert_eq!(refusal["id"], Value::Null);
    let mut rest = String::new();
    assert_eq!(
        bounded("the close", lines.read_line(&mut rest)).await.unwrap(),
        0,
        "then closed"
    );
    // Once a slot frees, the next client is served.
    bounded("close first", first.close()).await;
    let next = bounded("next", async {
        loop {
            let client = connect().await.unwrap();
            match client
                .call_with_timeout::<i64>("sum", [3], Duration::from_secs(2))
                .await
            {
                Ok(sum) => return sum,
                // The slot may take a moment to free.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
    .await;
    assert_eq!(next, 3);
    drop(second);
    serving.shutdown().await;
}

#[cfg(unix)]
#[tokio::test]
async fn unix_socket_round_trip() {
    let dir = std::env::temp_dir().join(format!("jrpc-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("peer.sock");
    let serving = Server::new(jrpc::demo::router()).bind_unix(&path).await.unwrap();
    assert_eq!(serving.local_addr(), format!("unix:{}", path.display()));
    let client = Client::builder().connect_unix(&path).await.unwrap();
    let data: (String, u32) = client.call("get_data", ()).await.unwrap();
    assert_eq!(data, ("hello".to_owned(), 5));
    drop(client);
    serving.shutdown().await;
    assert!(!path.exists(), "the socket file is removed on shutdown");
    let _ = std::fs::remove_dir(dir);
}

#[tokio::test]
async fn notifications_are_handled_in_arrival_order() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let read_log = Arc::clone(&seen);
    let router = Router::new()
        .notification("log", move |(i,): (u32,)| {
            let log = Arc::clone(&log);
            async move {
                // Uneven delays would reorder concurrent handlers.
                tokio::time::sleep(Duration::from_millis(u64::from(i % 3))).await;
                log.lock().unwrap().push(i);
            }
        })
        .sync_method("seen", move || Ok(read_log.lock().unwrap().len()));
    let (serving, addr) = tcp_server(router).await;
    let client = Client::builder().connect_tcp(addr).await.unwrap();
    for i in 0..100u32 {
        client.notify("log", [i]).await.unwrap();
    }
    wait_until("all notifications", || seen.lock().unwrap().len() == 100).await;
    assert_eq!(*seen.lock().unwrap(), (0..100).collect::<Vec<_>>());
    serving.shutdown().await;
}

#[tokio::test]
async fn batches_have_typed_results_per_entry() {
    let (serving, addr) = tcp_server(jrpc::demo::router()).await;
    let client = Client::builder().connect_tcp(addr).await.unwrap();
    let mut batch = client.batch();
    let sum = batch.call::<i64>("sum", [1, 2, 3]);
    let data = batch.call::<(String, u8)>("get_data", ());
    let missing = batch.call::<Value>("nope", ());
    let bad_params = batch.call::<Value>("echo", 5);
    batch.notify("update", [1]);
    batch.send().await.unwrap();
    assert_eq!(sum.await.unwrap(), 6);
    assert_eq!(data.await.unwrap(), ("hello".to_owned(), 5));
    assert_eq!(missing.await.unwrap_err().rpc().unwrap().code(), -32601);
    assert!(matches!(bad_params.await, Err(CallError::Encode(_))));
    serving.shutdown().await;
}

#[tokio::test]
async fn results_that_do_not_decode_are_typed_errors() {
    let (serving, addr) = tcp_server(jrpc::demo::router()).await;
    let client = Client::builder().connect_tcp(addr).await.unwrap();
    let err = client.call::<String>("sum", [1]).await.unwrap_err();
    assert!(matches!(err, CallError::Decode(_)), "{err:?}");
    serving.shutdown().await;
}

/// Talks to a server over a raw socket, line by line.
async fn raw_session(framing: Framing, input: Vec<u8>) -> Vec<Value> {
    let serving = Server::new(jrpc::demo::router().max_frame_len(1000))
        .framing(framing)
        .bind_tcp("127.0.0.1:0")
        .await
        .unwrap();
    let addr = serving.local_addr().trim_start_matches("tcp://").to_owned();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(&input).await.unwrap();
    stream.shutdown().await.unwrap();
    let mut output = Vec::new();
    bounded("read replies", stream.read_to_end(&mut output))
        .await
        .unwrap();
    serving.shutdown().await;
    let text = String::from_utf8(output).unwrap();
    match framing {
        Framing::Ndjson => text.lines().map(|l| serde_json::from_str(l).unwrap()).collect(),
        // Content-Length (Framing is open to new framings).
        _ => text
            .split("Content-Length: ")
            .skip(1)
            .map(|part| {
                let (_, body) = part.split_once("\r\n\r\n").unwrap();
                serde_json::from_str(body).unwrap()
            })
            .collect(),
    }
}

fn summarize(replies: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = replies
        .iter()
        .map(|r| match r.get("result") {
            Some(result) => format!("{}={result}", r["id"]),
            None => format!("{}:{}", r["id"], r["error"]["code"]),
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn ndjson_stream_survives_oversize_frames_and_garbage() {
    let big = format!(
        r#"{{"jsonrpc":"2.0","method":"echo","params":["{}"],"id":2}}"#,
        "x".repeat(5000)
    );
    let input = format!(
        "{}\n{big}\n\u{1}garbage\u{ff}\n{}\n",
        r#"{"jsonrpc":"2.0","method":"sum","params":[1],"id":1}"#,
        r#"{"jsonrpc":"2.0","method":"sum","params":[3],"id":3}"#
    );
    let replies = raw_session(Framing::Ndjson, input.into_bytes()).await;
    assert_eq!(summarize(&replies), ["1=1", "3=3", "null:-32001", "null:-32700"]);
}

#[tokio::test]
async fn content_length_stream_survives_oversize_frames_and_garbage() {
    let frame = |body: &str| format!("Content-Length: {}\r\n\r\n{body}", body.len());
    let big = format!(
        r#"{{"jsonrpc":"2.0","method":"echo","params":["{}"],"id":2}}"#,
        "x".repeat(5000)
    );
    let mut input = frame(r#"{"jsonrpc":"2.0","method":"sum","params":[1],"id":1}"#);
    input += &frame(&big);
    input += "Content-Lenght: 12\r\n\r\nnot a header\r\n";
    input += &frame("{not json}");
    input += &frame(r#"{"jsonrpc":"2.0","method":"sum","params":[3],"id":3}"#);
    let replies = raw_session(Framing::ContentLength, input.into_bytes()).await;
    assert_eq!(
        summarize(&replies),
        ["1=1", "3=3", "null:-32001", "null:-32700", "null:-32700"]
    );
}

#[tokio::test]
async fn stray_responses_are_refused_and_late_ones_dropped() {
    let input = [
        r#"{"jsonrpc":"2.0","result":1,"id":"never-issued"}"#,
        r#"{"jsonrpc":"2.0","error":{"code":1,"message":"m"},"id":"x"}"#,
        // An Invalid Request error is never answered: no ping-pong.
        r#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":"bounce"}"#,
        r#"[{"jsonrpc":"2.0","result":1,"id":"in-batch"},{"jsonrpc":"2.0","method":"sum","params":[4],"id":4}]"#,
        r#"[{"jsonrpc":"2.0","error":{"code":2,"message":"m"},"id":"only"}]"#,
        r#"{"jsonrpc":"2.0","method":"sum","params":[5],"id":5}"#,
    ]
    .join("\n")
        + "\n";
    let replies = raw_session(Framing::Ndjson, input.into_bytes()).await;
    let flat: Vec<Value> = replies
        .into_iter()
        .flat_map(|r| match r {
            Value::Array(items) => items,
            other => vec![other],
        })
        .collect();
    assert_eq!(
        summarize(&flat),
        [
            "\"in-batch\":-32600",
            "\"never-issued\":-32600",
            "\"only\":-32600",
            "\"x\":-32600",
            "4=4",
            "5=5"
        ]
    );
}

#[tokio::test]
async fn handlers_see_connection_info() {
    let router = Router::new().sync_method("who", |(): (), ctx: &RequestContext| {
        let info = ctx.connection_info().unwrap();
        Ok((info.transport, info.peer_addr.clone()))
    });
    let (serving, addr) = tcp_server(router).await;
    let client = Client::builder().connect_tcp(addr).await.unwrap();
    let (transport, peer): (String, Option<String>) = client.call("who", ()).await.unwrap();
    assert_eq!(transport, "tcp");
    assert!(peer.unwrap().starts_with("127.0.0.1:"));
    serving.shutdown().await;
}

#[tokio::test]
async fn ordered_peers_apply_notifications_before_later_requests() {
    // An editor-style exchange: `didChange` (slow to apply) then a request
    // that must see the change.
    let text = Arc::new(Mutex::new(String::from("old")));
    let (write, read) = (Arc::clone(&text), Arc::clone(&text));
    let router = Router::new()
        .notification("didChange", move |(new,): (String,)| {
            let text = Arc::clone(&write);
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                *text.lock().unwrap() = new;
            }
        })
        .sync_method("read", move || Ok(read.lock().unwrap().clone()));
    let serving = Server::new(router)
        .ordered(true)
        .bind_tcp("127.0.0.1:0")
        .await
        .unwrap();
    let addr = serving.local_addr().trim_start_matches("tcp://").to_owned();
    let client = Client::builder().connect_tcp(addr).await.unwrap();
    for round in 0..5 {
        let new = format!("v{round}");
        client.notify("didChange", [&new]).await.unwrap();
        let seen: String = bounded("read", client.call("read", ())).await.unwrap();
        assert_eq!(seen, new, "the request saw the notification sent before it");
    }
    serving.shutdown().await;
}

/// A server's progress notification, slow to handle, is handled before
/// the caller gets the result it preceded, with ordered responses.
#[tokio::test]
async fn ordered_clients_see_notifications_before_the_result_they_preceded() {
    let router = Router::new().method("work", |(): (), ctx: RequestContext| async move {
        let peer = ctx.peer().expect("a connection");
        peer.notify("progress", [50])
            .await
            .map_err(|_| Error::internal_error())?;
        Ok("done")
    });
    let (serving, addr) = tcp_server(router).await;
    {
        let heard = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&heard);
        let progress = Router::new().notification("progress", move |(_,): (u32,)| {
            let counter = Arc::clone(&counter);
            async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                counter.fetch_add(1, Ordering::SeqCst);
            }
        });
        let client = Client::builder()
            .connection(jrpc::ConnectionConfig::default().ordered_responses(true))
            .router(progress)
            .connect_tcp(&addr)
            .await
            .unwrap();
        for round in 1..=3 {
            let done: String = bounded("work", client.call("work", ())).await.unwrap();
            assert_eq!(done, "done");
            assert_eq!(heard.load(Ordering::SeqCst), round, "handled before the result");
        }
    }
    serving.shutdown().await;
}

/// A malformed reply to a pending call (both `result` and `error`, an
/// error without a message) fails that call at once, not at its timeout.
#[tokio::test]
async fn a_malformed_reply_fails_its_call_at_once() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let (read, mut write) = stream.into_split();
        let mut lines = BufReader::new(read).lines();
        let mut replies = [
            r#"{"jsonrpc":"2.0","result":1,"error":{"code":1,"message":"both"},"id":ID}"#,
            r#"{"jsonrpc":"2.0","error":{"code":1},"id":ID}"#,
        ]
        .into_iter();
        while let Ok(Some(line)) = lines.next_line().await {
            let request: Value = serde_json::from_str(&line).unwrap();
            if request.get("method").is_none() {
                // The client's -32600 about the malformed reply.
                continue;
            }
            let Some(reply) = replies.next() else { return };
            let reply = reply.replace("ID", &request["id"].to_string());
            write.write_all(format!("{reply}\n").as_bytes()).await.unwrap();
        }
    });
    let client = Client::builder()
        .call_timeout(Duration::from_secs(60))
        .connect_tcp(addr)
        .await
        .unwrap();
    for _ in 0..2 {
        let outcome = bounded("a malformed reply", client.call::<Value>("any", ())).await;
        assert!(matches!(outcome, Err(CallError::Protocol(_))), "{outcome:?}");
    }
}

/// Issue 11: a client that sends a slow request and resets its connection
/// frees its slot at once; its handler is cancelled.
#[tokio::test]
async fn a_reset_connection_frees_its_slot_at_once() {
    let dropped = Arc::new(AtomicUsize::new(0));
    struct CountDrop(Arc<AtomicUsize>);
    impl Drop for CountDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let on_drop = Arc::clone(&dropped);
    let router = jrpc::demo::router().method("hang", move |(): ()| {
        let guard = CountDrop(Arc::clone(&on_drop));
        async move {
            let _guard = guard;
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(())
        }
    });
    let serving = Server::new(router)
        .max_connections(1)
        .bind_tcp("127.0.0.1:0")
        .await
        .unwrap();
    let addr = serving.local_addr().trim_start_matches("tcp://").to_owned();
    let mut rude = TcpStream::connect(&addr).await.unwrap();
    rude.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"hang\",\"id\":1}\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // SO_LINGER 0: closing sends a reset, not a FIN.
    rude.set_zero_linger().unwrap();
    drop(rude);
    // The reset is noticed at once: the slot frees long before the 60 s
    // handler would have ended (until then a newcomer is refused, -32007).
    let (client, sum) = bounded("a call on the freed slot", async {
        loop {
            let client = Client::connect(serving.local_addr()).await.unwrap();
            match client.call::<i64>("add", (1, 2)).await {
                Ok(sum) => return (client, sum),
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    })
    .await;
    assert_eq!(sum, 3);
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the reset connection's handler was cancelled"
    );
    drop(client);
    serving.shutdown().await;
}

/// Issue 11, item 1: a TCP connection that says nothing is closed after the
/// idle limit, counted from the connect; one with a call in flight is not.
#[tokio::test]
async fn idle_tcp_connections_are_closed_but_busy_ones_are_not() {
    let config = jrpc::ConnectionConfig::default().idle_timeout(Some(Duration::from_millis(300)));
    let serving = Server::new(jrpc::demo::router())
        .connection(config)
        .bind_tcp("127.0.0.1:0")
        .await
        .unwrap();
    let addr = serving.local_addr().trim_start_matches("tcp://").to_owned();

    let mut silent = TcpStream::connect(&addr).await.unwrap();
    let mut byte = [0u8; 1];
    let read = bounded("the server closes a silent connection", silent.read(&mut byte)).await;
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");

    // A call longer than the idle limit keeps its connection open.
    let mut busy = TcpStream::connect(&addr).await.unwrap();
    busy.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"sleep\",\"params\":[900],\"id\":1}\n")
        .await
        .unwrap();
    let mut reply = String::new();
    let mut lines = BufReader::new(&mut busy);
    bounded("the reply", lines.read_line(&mut reply)).await.unwrap();
    let reply: Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(reply["result"], 900, "{reply}");
    serving.shutdown().await;
}

/// Issue 11, item 4: unfinished frames across TCP connections share one
/// budget. A client whose unfinished frame does not fit is answered -32007
/// and closed; the one within the budget is served when its frame ends, and
/// its bytes are given back.
#[tokio::test]
async fn unfinished_tcp_frames_share_a_budget() {
    let free = jrpc::codec::Budgeted::<jrpc::codec::FrameCodec>::FREE_BYTES;
    let budget = jrpc::codec::BufferBudget::new(100 * 1024);
    let serving = Server::new(jrpc::demo::router())
        .buffer_budget(budget.clone())
        .bind_tcp("127.0.0.1:0")
        .await
        .unwrap();
    let addr = serving.local_addr().trim_start_matches("tcp://").to_owned();
    // 64 KiB free per connection, then 86 KiB charged: one such frame fits,
    // two do not.
    let start = |fill: usize| {
        let mut head = br#"{"jsonrpc":"2.0","method":"echo","params":[""#.to_vec();
        head.resize(head.len() + fill, b'x');
        head
    };
    let fill = free + 86 * 1024;
    let mut first = TcpStream::connect(&addr).await.unwrap();
    first.write_all(&start(fill)).await.unwrap();
    bounded("the first frame is charged", async {
        while budget.in_use() < 80 * 1024 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;

    let mut second = TcpStream::connect(&addr).await.unwrap();
    // The server may close while this is still being written.
    let _ = second.write_all(&start(fill)).await;
    let mut reply = String::new();
    bounded("the refusal", BufReader::new(&mut second).read_line(&mut reply))
        .await
        .unwrap();
    let refusal: Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(refusal["error"]["code"], -32007, "{refusal}");
    assert_eq!(refusal["id"], Value::Null, "{refusal}");
    let mut rest = Vec::new();
    let end = bounded("the close after the refusal", second.read_to_end(&mut rest)).await;
    assert!(matches!(end, Ok(0) | Err(_)), "{end:?}");

    // The first connection was not harmed: its frame ends and is answered.
    first.write_all(b"\"],\"id\":7}\n").await.unwrap();
    let mut reply = String::new();
    bounded(
        "the first reply",
        BufReader::new(&mut first).read_line(&mut reply),
    )
    .await
    .unwrap();
    let reply: Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(reply["id"], 7);
    assert_eq!(reply["result"].as_str().map(str::len), Some(fill));
    assert_eq!(budget.in_use(), 0, "the finished frame gave its bytes back");
    serving.shutdown().await;
}

/// Requests that wait for a notification before them start in the order
/// they arrived (an MCP client pipelining `logging/setLevel` and a tool call
/// behind `notifications/initialized` relies on it).
#[tokio::test]
async fn requests_held_behind_a_notification_start_in_arrival_order() {
    let value = Arc::new(Mutex::new(Vec::new()));
    let (record, read) = (Arc::clone(&value), Arc::clone(&value));
    let router = Router::new()
        .notification("slow", |(): ()| async {
            tokio::time::sleep(Duration::from_millis(30)).await;
        })
        .method("push", move |(n,): (u32,)| {
            let record = Arc::clone(&record);
            async move {
                record.lock().unwrap().push(n);
                Ok(n)
            }
        })
        .method("seen", move |(): ()| {
            let read = Arc::clone(&read);
            async move { Ok(read.lock().unwrap().clone()) }
        });
    let serving = Server::new(router)
        .connection(jrpc::ConnectionConfig::default().ordered(true))
        .bind_tcp("127.0.0.1:0")
        .await
        .unwrap();
    let addr = serving.local_addr().trim_start_matches("tcp://").to_owned();
    for round in 0..10u32 {
        value.lock().unwrap().clear();
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        let mut burst = String::from("{\"jsonrpc\":\"2.0\",\"method\":\"slow\"}\n");
        for n in 0..8 {
            burst.push_str(&format!(
                "{{\"jsonrpc\":\"2.0\",\"method\":\"push\",\"params\":[{n}],\"id\":{n}}}\n"
            ));
        }
        burst.push_str("{\"jsonrpc\":\"2.0\",\"method\":\"seen\",\"id\":\"last\"}\n");
        stream.write_all(burst.as_bytes()).await.unwrap();
        let mut lines = BufReader::new(&mut stream).lines();
        let seen = bounded("every reply", async {
            loop {
                let line = lines.next_line().await.unwrap().expect("a reply");
                let reply: Value = serde_json::from_str(&line).unwrap();
                if reply["id"] == "last" {
                    return reply["result"].clone();
                }
            }
        })
        .await;
        assert_eq!(seen, serde_json::json!([0, 1, 2, 3, 4, 5, 6, 7]), "round {round}");
    }
    serving.shutdown().await;
}

/// Replies answered at once share one buffer per burst of reading (sliced
/// into frames at the end): in a burst that mixes them with error replies,
/// batch replies and notifications, every reply must still come whole and
/// in the order its request was read.
#[tokio::test]
async fn a_burst_of_mixed_frames_is_answered_whole_and_in_order() {
    let (serving, addr) = tcp_server(jrpc::demo::router()).await;
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let mut burst = String::new();
    let mut expected = Vec::new();
    for round in 0..40 {
        burst.push_str(&format!(
            r#"{{"jsonrpc":"2.0","method":"subtract","params":[{round},1],"id":{round}}}"#
        ));
        burst.push('\n');
        expected.push(format!(
            r#"{{"jsonrpc":"2.0","result":{},"id":{round}}}"#,
            round - 1
        ));
        match round % 4 {
            0 => {
                burst.push_str("{not json\n");
                expected.push(
                    r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}"#.into(),
                );
            }
            1 => {
                burst.push_str(r#"{"jsonrpc":"2.0","method":"update","params":[1]}"#);
                burst.push('\n');
            }
            2 => {
                burst.push_str(&format!(
                    r#"[{{"jsonrpc":"2.0","method":"update","params":[1]}},{{"jsonrpc":"2.0","method":"sum","params":[{round},2],"id":"b{round}"}}]"#
                ));
                burst.push('\n');
                expected.push(format!(
                    r#"[{{"jsonrpc":"2.0","result":{},"id":"b{round}"}}]"#,
                    round + 2
                ));
            }
            _ => {
                burst.push_str(&format!(r#"{{"jsonrpc":"2.0","method":"nope","id":"n{round}"}}"#));
                burst.push('\n');
                expected.push(format!(
                    r#"{{"jsonrpc":"2.0","error":{{"code":-32601,"message":"Method not found"}},"id":"n{round}"}}"#
                ));
            }
        }
    }
    // One write: the server reads it in as few bursts as it can.
    stream.write_all(burst.as_bytes()).await.unwrap();
    let mut lines = BufReader::new(stream).lines();
    let mut got = Vec::new();
    while got.len() < expected.len() {
        let line = bounded("the replies", lines.next_line())
            .await
            .unwrap()
            .expect("a reply line");
        got.push(line);
    }
    assert_eq!(got, expected);
    drop(serving);
}

/// A TCP "server" that answers the requests it reads with `reply` (its
/// `ID` replaced by the request's id) once it has read `together` of them
/// (then each at once), and records every line it reads.
async fn scripted_server(reply: &'static str, together: usize) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&heard);
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let (read, mut write) = stream.into_split();
        let mut lines = BufReader::new(read).lines();
        let mut held = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            let request: Value = serde_json::from_str(&line).unwrap();
            held.push(reply.replace("ID", &request["id"].to_string()));
            log.lock().unwrap().push(request);
            if log.lock().unwrap().len() >= together {
                for reply in held.drain(..) {
                    write.write_all(format!("{reply}\n").as_bytes()).await.unwrap();
                }
            }
        }
    });
    (addr, heard)
}

const NULL_ID_PARSE_ERROR: &str =
    r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}"#;

/// Issue 33: an error with `"id": null` (the server could not read the
/// request's id, say a number out of its range) answers the one call
/// waiting, at once, instead of leaving it to its timeout; and it is not
/// answered back as a stray response.
#[tokio::test]
async fn a_null_id_error_answers_the_only_call_waiting() {
    let (addr, heard) = scripted_server(NULL_ID_PARSE_ERROR, 1).await;
    let client = Client::builder()
        .call_timeout(Duration::from_secs(60))
        .connect_tcp(addr)
        .await
        .unwrap();
    for _ in 0..2 {
        let outcome = bounded(
            "a call answered with id null",
            client.call::<Value>("subtract", [1, 2]),
        )
        .await;
        match outcome {
            Err(CallError::Rpc(e)) => assert_eq!(e.code(), -32700),
            other => panic!("expected the parse error, got {other:?}"),
        }
    }
    // Only the two requests reached the server: no -32600 about the error.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let heard = heard.lock().unwrap();
    assert_eq!(heard.len(), 2, "{heard:?}");
    assert!(heard.iter().all(|m| m["method"] == "subtract"), "{heard:?}");
}

/// With several calls waiting, a null-id error cannot be told to answer
/// any of them: each waits for its own answer (here, its timeout).
#[tokio::test]
async fn a_null_id_error_with_several_calls_waiting_answers_none() {
    let (addr, _heard) = scripted_server(NULL_ID_PARSE_ERROR, 2).await;
    let timeout = Duration::from_millis(300);
    let client = Client::builder()
        .call_timeout(timeout)
        .connect_tcp(addr)
        .await
        .unwrap();
    let (a, b) = bounded("two calls", async {
        tokio::join!(client.call::<Value>("a", ()), client.call::<Value>("b", ()))
    })
    .await;
    for outcome in [a, b] {
        assert!(
            matches!(outcome, Err(CallError::Timeout(d)) if d == timeout),
            "{outcome:?}"
        );
    }
}

/// Issue 33: a client that sends requests and never reads stops being read
/// once the replies waiting for it pass `max_outgoing_bytes`, and a server
/// closes its connection once a write has waited `write_timeout` for it.
#[tokio::test]
async fn a_client_that_never_reads_is_closed_after_the_write_timeout() {
    let config = jrpc::ConnectionConfig::default()
        .max_outgoing_bytes(64 * 1024)
        .write_timeout(Some(Duration::from_millis(300)));
    let serving = Server::new(jrpc::demo::router())
        .connection(config)
        .bind_tcp("127.0.0.1:0")
        .await
        .unwrap();
    let addr = serving.local_addr().trim_start_matches("tcp://").to_owned();
    let stream = TcpStream::connect(&addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    // 1 KiB echo requests until the server stops taking them.
    let request = format!(
        r#"{{"jsonrpc":"2.0","method":"echo","params":["{}"],"id":1}}"#,
        "x".repeat(1024)
    );
    let mut taken = 0usize;
    while taken < 100_000 {
        let wrote = tokio::time::timeout(
            Duration::from_millis(500),
            write.write_all(format!("{request}\n").as_bytes()),
        )
        .await;
        match wrote {
            Ok(Ok(())) => taken += 1,
            _ => break,
        }
    }
    // Replies for 64 KiB and what the sockets buffer, not all of them.
    assert!(taken < 100_000, "all {taken} requests were taken in");
    // Once the write timeout has passed, the server has closed: what was
    // sent reads out, then the end of the stream.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let mut sink = Vec::new();
    let ended = bounded("the end of the stream", read.read_to_end(&mut sink)).await;
    // A reset after the replies is an end too.
    assert!(ended.is_ok() || !sink.is_empty(), "{ended:?}");
    drop(serving);
}

/// A peer serving a call given to it apart from its connection (as MCP's
/// Streamable HTTP gives it each POSTed message): the connection's facts,
/// its cancellation, and a refusal once it closes.
#[tokio::test]
async fn a_call_served_for_a_peer_meets_its_facts_and_its_cancellation() {
    use jrpc::dispatch::{response_frame, Said};
    use jrpc::middleware::Call;

    #[derive(Clone)]
    struct Tenant(&'static str);
    let router = Router::new()
        .method("tenant", |(): (), ctx: RequestContext| async move {
            Ok(ctx.get::<Tenant>().map(|t| t.0))
        })
        .method("wait", |(): ()| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<_, Error>("woke")
        });
    let start = |protocol: CancelProtocol| {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(ours);
        let peer = Peer::builder()
            .router(router.clone())
            .extension(Tenant("acme"))
            .cancellation(protocol)
            .start(read, write, Framing::Ndjson);
        (peer, theirs)
    };
    let text = |id: &jrpc::Id, said: Option<Said>| match said {
        Some(Said::Reply(outcome)) => String::from_utf8(response_frame(id, &outcome).to_vec()).unwrap(),
        other => panic!("expected a reply, got {other:?}"),
    };
    let (peer, mut theirs) = start(CancelProtocol::mcp());
    let mut served = peer.serve_call(Call::request(1, "tenant", None));
    let id = served.id().clone();
    assert_eq!(
        text(&id, bounded("tenant", served.next()).await),
        r#"{"jsonrpc":"2.0","result":"acme","id":1}"#
    );
    // MCP: a request that waits is stopped by the cancel notification,
    // given here or read from the connection, and says nothing.
    for from_the_connection in [false, true] {
        let mut waiting = peer.serve_call(Call::request("w", "wait", None));
        assert!(waiting.now().is_none(), "it waits");
        let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"w"}}"#;
        if from_the_connection {
            theirs.write_all(format!("{cancel}\n").as_bytes()).await.unwrap();
        } else {
            let params = serde_json::value::to_raw_value(&serde_json::json!({"requestId": "w"})).unwrap();
            let mut applied = peer.serve_call(Call::notification("notifications/cancelled", Some(params)));
            assert!(
                applied.next().await.is_none(),
                "a cancel notification is applied, not answered"
            );
        }
        assert!(bounded("cancelled", waiting.next()).await.is_none());
    }
    // Once the connection closes, requests are refused.
    peer.close();
    let mut refused = peer.serve_call(Call::request(2, "tenant", None));
    let reply = text(&jrpc::Id::from(2), refused.next().await);
    assert!(reply.contains("-32007"), "{reply}");

    // LSP: a cancelled request is answered -32800.
    let (peer, _theirs) = start(CancelProtocol::lsp());
    let mut waiting = peer.serve_call(Call::request(3, "wait", None));
    assert!(waiting.now().is_none(), "it waits");
    let params = serde_json::value::to_raw_value(&serde_json::json!({"id": 3})).unwrap();
    drop(peer.serve_call(Call::notification("$/cancelRequest", Some(params))));
    let reply = text(&jrpc::Id::from(3), bounded("cancelled", waiting.next()).await);
    assert!(reply.contains("-32800"), "{reply}");
}
