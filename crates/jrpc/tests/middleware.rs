//! Call middleware: every call passes through the stack exactly once, on
//! every path (single, batch entry, notification; router, peer, HTTP), and
//! the built-in layers do what they say.

mod common;

use std::future::IntoFuture;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jrpc::client::Client;
#[cfg(feature = "metrics")]
use jrpc::middleware::Metrics;
use jrpc::middleware::{
    layer_fn, service_fn, Authorize, BoxCallService, Call, CallTimeout, ConcurrencyLimit, RateLimit,
    ServiceExt,
};
use jrpc::peer::{CancelProtocol, Peer};
#[cfg(feature = "metrics")]
use jrpc::server::Server;
use jrpc::{Error, RequestContext, Router};
use serde_json::{json, Value};

/// Fails the test instead of hanging when something never finishes.
async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish"))
}

/// What a recording layer saw: method and id (`None` for notifications).
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A layer that records each call and passes it on untouched.
#[derive(Clone)]
struct Recording(Seen);

impl tower::Layer<BoxCallService> for Recording {
    type Service = BoxCallService;

    fn layer(&self, inner: BoxCallService) -> BoxCallService {
        let seen = Arc::clone(&self.0);
        BoxCallService::new(service_fn(move |call: Call| {
            seen.lock()
                .unwrap()
                .push((call.method().to_owned(), call.id().map(|id| id.to_string())));
            inner.clone().oneshot(call)
        }))
    }
}

fn recording(seen: Seen) -> Recording {
    Recording(seen)
}

fn handlers() -> Router {
    jrpc::demo::router()
        .method("async_add", |(a, b): (i64, i64)| async move { Ok(a + b) })
        .notification("async_note", |_: Value| async {})
        .sync_method("boom", || -> Result<(), Error> { panic!("boom") })
        .method("async_boom", |(): ()| async {
            panic!("async boom") as Result<(), Error>
        })
}

/// The calls a layer must see for a frame: method, and id as JSON text.
type Expected = Vec<(&'static str, Option<&'static str>)>;

/// Frames covering every kind of item; for each, the calls a layer must see.
fn corpus() -> Vec<(&'static str, Expected)> {
    vec![
        (
            r#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}"#,
            vec![("add", Some("1"))],
        ),
        (
            r#"{"jsonrpc":"2.0","method":"async_add","params":[1,2],"id":"a"}"#,
            vec![("async_add", Some("\"a\""))],
        ),
        (
            r#"{"jsonrpc":"2.0","method":"update","params":[1]}"#,
            vec![("update", None)],
        ),
        (
            r#"{"jsonrpc":"2.0","method":"async_note","params":[1]}"#,
            vec![("async_note", None)],
        ),
        // A notification to a method, a request to a notification handler.
        (
            r#"{"jsonrpc":"2.0","method":"add","params":[1,2]}"#,
            vec![("add", None)],
        ),
        (
            r#"{"jsonrpc":"2.0","method":"update","params":[1],"id":null}"#,
            vec![("update", Some("null"))],
        ),
        (
            r#"{"jsonrpc":"2.0","method":"async_note","id":7}"#,
            vec![("async_note", Some("7"))],
        ),
        (
            r#"{"jsonrpc":"2.0","method":"nope","id":2}"#,
            vec![("nope", Some("2"))],
        ),
        (r#"{"jsonrpc":"2.0","method":"nope"}"#, vec![("nope", None)]),
        (
            r#"{"jsonrpc":"2.0","method":"add","params":["x"],"id":3}"#,
            vec![("add", Some("3"))],
        ),
        (
            r#"{"jsonrpc":"2.0","method":"boom","id":4}"#,
            vec![("boom", Some("4"))],
        ),
        (
            r#"{"jsonrpc":"2.0","method":"async_boom","id":5}"#,
            vec![("async_boom", Some("5"))],
        ),
        // Not calls: no layer sees them.
        (r#"{"jsonrpc":"2.0","method":1,"params":"bar"}"#, vec![]),
        (
            r#"{"jsonrpc":"2.0","method":"foobar,"params":"bar","baz]"#,
            vec![],
        ),
        ("[]", vec![]),
        ("[1,2,3]", vec![]),
        (r#"{"jsonrpc":"2.0","result":1,"id":9}"#, vec![]),
        (
            r#"[{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":"1"},{"jsonrpc":"2.0","method":"notify_hello","params":[7]},{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":"2"},{"foo":"boo"},{"jsonrpc":"2.0","method":"foo.get","params":{"name":"myself"},"id":"5"},{"jsonrpc":"2.0","method":"async_add","params":[2,2],"id":"9"},{"jsonrpc":"2.0","method":"async_note"}]"#,
            vec![
                ("sum", Some("\"1\"")),
                ("notify_hello", None),
                ("subtract", Some("\"2\"")),
                ("foo.get", Some("\"5\"")),
                ("async_add", Some("\"9\"")),
                ("async_note", None),
            ],
        ),
        (
            r#"[{"jsonrpc":"2.0","method":"update","params":[1]},{"jsonrpc":"2.0","method":"async_note"}]"#,
            vec![("update", None), ("async_note", None)],
        ),
    ]
}

fn sorted(mut calls: Vec<(String, Option<String>)>) -> Vec<(String, Option<String>)> {
    calls.sort();
    calls
}

#[tokio::test]
async fn every_call_passes_through_a_layer_exactly_once_and_replies_do_not_change() {
    let plain = handlers();
    let seen: Seen = Arc::default();
    let layered = handlers().layer(recording(Arc::clone(&seen)));
    for (frame, expected) in corpus() {
        seen.lock().unwrap().clear();
        let bare = common::reply(&plain, frame).await;
        let wrapped = common::reply(&layered, frame).await;
        assert_eq!(wrapped, bare, "a pass-through layer changed the reply to {frame}");
        let expected: Vec<_> = expected
            .into_iter()
            .map(|(m, id)| (m.to_owned(), id.map(str::to_owned)))
            .collect();
        let saw = std::mem::take(&mut *seen.lock().unwrap());
        assert_eq!(sorted(saw), sorted(expected), "calls seen for {frame}");
    }
}

#[tokio::test]
async fn layers_run_last_added_first_and_wrap_handlers_added_later() {
    let order = Arc::new(Mutex::new(Vec::new()));
    let tag = |name: &'static str| {
        let order = Arc::clone(&order);
        layer_fn(move |inner: BoxCallService| {
            let order = Arc::clone(&order);
            service_fn(move |call: Call| {
                order.lock().unwrap().push(name);
                inner.clone().oneshot(call)
            })
        })
    };
    let router = Router::new()
        .layer(tag("inner"))
        .layer(tag("outer"))
        .sync_method("ping", || Ok("pong"));
    let reply = common::reply(&router, r#"{"jsonrpc":"2.0","method":"ping","id":1}"#).await;
    assert_eq!(reply.unwrap()["result"], "pong");
    assert_eq!(*order.lock().unwrap(), ["outer", "inner"]);
}

#[tokio::test]
async fn layers_put_facts_in_the_call_for_handlers_and_may_answer_themselves() {
    #[derive(Debug, Clone, PartialEq)]
    struct Tenant(&'static str);
    let tenant = layer_fn(|inner: BoxCallService| {
        service_fn(move |mut call: Call| {
            let inner = inner.clone();
            async move {
                if call.method() == "forbidden" {
                    return Err(Error::new(-32099, "Not here"));
                }
                call.extensions_mut().insert(Tenant("acme"));
                inner.oneshot(call).await
            }
        })
    });
    let router = Router::new()
        .method("whose", |(): (), ctx: RequestContext| async move {
            Ok(ctx.get::<Tenant>().map(|t| t.0))
        })
        .sync_method("whose_sync", |(): (), ctx: &RequestContext| {
            Ok(ctx.get::<Tenant>().map(|t| t.0))
        })
        .sync_method("forbidden", || Ok(true))
        .layer(tenant);
    let cases = [
        (
            r#"{"jsonrpc":"2.0","method":"whose","id":1}"#,
            json!({"jsonrpc":"2.0","result":"acme","id":1}),
        ),
        (
            r#"{"jsonrpc":"2.0","method":"whose_sync","id":2}"#,
            json!({"jsonrpc":"2.0","result":"acme","id":2}),
        ),
        (
            r#"{"jsonrpc":"2.0","method":"forbidden","id":3}"#,
            json!({"jsonrpc":"2.0","error":{"code":-32099,"message":"Not here"},"id":3}),
        ),
    ];
    for (frame, expected) in cases {
        assert_eq!(common::reply(&router, frame).await.unwrap(), expected, "{frame}");
    }
}

#[tokio::test]
async fn a_layer_failing_with_another_error_type_is_an_internal_error() {
    let failing = layer_fn(|_inner: BoxCallService| {
        service_fn(|_call: Call| async {
            Err::<jrpc::middleware::RawResult, _>(std::io::Error::other("disk on fire"))
        })
    });
    let router = Router::new().sync_method("ping", || Ok("pong")).layer(failing);
    let reply = common::reply(&router, r#"{"jsonrpc":"2.0","method":"ping","id":1}"#)
        .await
        .unwrap();
    assert_eq!(
        reply,
        json!({"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error"},"id":1})
    );
}

#[tokio::test]
async fn call_timeout_cancels_the_handler_and_answers_32006() {
    let dropped = Arc::new(AtomicUsize::new(0));
    struct CountDrop(Arc<AtomicUsize>);
    impl Drop for CountDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let on_drop = Arc::clone(&dropped);
    let router = jrpc::demo::router()
        .method("hang", move |(): ()| {
            let guard = CountDrop(Arc::clone(&on_drop));
            async move {
                let _guard = guard;
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok(())
            }
        })
        .layer(CallTimeout::new(Duration::from_secs(10)).method("hang", Duration::from_millis(50)));
    let reply = bounded(
        "hang",
        common::reply(&router, r#"{"jsonrpc":"2.0","method":"hang","id":1}"#),
    )
    .await
    .unwrap();
    assert_eq!(reply["error"]["code"], -32006, "{reply}");
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "the handler was not cancelled");
    let fine = common::reply(
        &router,
        r#"{"jsonrpc":"2.0","method":"sleep","params":[1],"id":2}"#,
    )
    .await;
    assert_eq!(fine.unwrap()["result"], 1);
}

#[tokio::test]
async fn concurrency_limit_bounds_calls_running_at_once() {
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (r, m) = (Arc::clone(&running), Arc::clone(&most));
    let router = Router::new()
        .method("work", move |(): ()| {
            let (running, most) = (Arc::clone(&r), Arc::clone(&m));
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            }
        })
        .batch_concurrency(16)
        .layer(ConcurrencyLimit::per_method().method("work", 2));
    let batch: Vec<Value> = (0..12)
        .map(|i| json!({"jsonrpc":"2.0","method":"work","id":i}))
        .collect();
    let reply = bounded("batch", common::reply(&router, &Value::Array(batch).to_string()))
        .await
        .unwrap();
    assert_eq!(reply.as_array().unwrap().len(), 12);
    assert_eq!(
        most.load(Ordering::SeqCst),
        2,
        "at most two at once, and two did run together"
    );
}

#[tokio::test]
async fn rate_limit_refuses_calls_over_the_budget_with_32005() {
    let router = jrpc::demo::router().layer(RateLimit::per_second(1, 3).layer());
    let batch: Vec<Value> = (0..6)
        .map(|i| json!({"jsonrpc":"2.0","method":"add","params":[i,1],"id":i}))
        .collect();
    let reply = common::reply(&router, &Value::Array(batch).to_string())
        .await
        .unwrap();
    let codes: Vec<Value> = reply
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["error"]["code"].clone())
        .collect();
    // The burst of three passes; every entry beyond it is charged and refused.
    assert_eq!(codes[..3], [Value::Null, Value::Null, Value::Null]);
    assert_eq!(codes[3..], [json!(-32005), json!(-32005), json!(-32005)]);
    assert!(reply[3]["error"]["data"]["retry_after_ms"].as_u64().unwrap() >= 1);
}

#[tokio::test]
async fn authorization_by_identity() {
    let rules = Authorize::new().allow("admin.*", ["alice"]);
    let router = Router::new()
        .sync_method("admin.reset", || Ok(true))
        .sync_method("ping", || Ok("pong"))
        .layer(rules);
    let as_who = |who: Option<&str>| {
        let mut facts = jrpc::router::Extensions::new();
        if let Some(name) = who {
            facts.insert(jrpc::context::Identity::new(name));
        }
        Arc::new(facts)
    };
    let cases = [
        ("admin.reset", Some("alice"), None),
        ("admin.reset", Some("bob"), Some(-32004)),
        ("admin.reset", None, Some(-32004)),
        ("ping", None, None),
    ];
    for (method, who, refused) in cases {
        let frame = format!(r#"{{"jsonrpc":"2.0","method":"{method}","id":1}}"#);
        let reply = router.handle_with(frame.as_bytes(), &as_who(who)).await.unwrap();
        let reply: Value = serde_json::from_slice(&reply).unwrap();
        assert_eq!(
            reply["error"]["code"].as_i64(),
            refused,
            "{method} by {who:?}: {reply}"
        );
    }
}

#[cfg(feature = "metrics")]
#[tokio::test]
async fn metrics_count_calls_by_method_and_outcome() {
    let metrics = Metrics::new();
    let router = jrpc::demo::router().layer(metrics.layer());
    for frame in [
        r#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}"#,
        r#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":2}"#,
        r#"{"jsonrpc":"2.0","method":"add","params":["x"],"id":3}"#,
        r#"{"jsonrpc":"2.0","method":"made_up_1","id":4}"#,
        r#"{"jsonrpc":"2.0","method":"made_up_2","id":5}"#,
    ] {
        router.handle(frame.as_bytes()).await;
    }
    let page = metrics.render();
    for line in [
        r#"jrpc_calls_total{code="",method="add",outcome="ok"} 2"#,
        r#"jrpc_calls_total{code="-32602",method="add",outcome="error"} 1"#,
        r#"jrpc_calls_total{code="-32601",method="(unknown)",outcome="error"} 2"#,
        r#"jrpc_call_duration_seconds_count{method="add"} 3"#,
        "jrpc_calls_in_flight 0",
    ] {
        assert!(page.contains(line), "missing {line:?} in\n{page}");
    }
    assert!(
        !page.contains("made_up"),
        "unknown method names must not become labels"
    );
}

#[tokio::test]
async fn error_replies_do_not_echo_secret_params() {
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Login {
        user: String,
        password: u32,
    }
    let router = Router::new().sync_method("login", |_: Login| Ok(true));
    let reply = common::reply(
        &router,
        r#"{"jsonrpc":"2.0","method":"login","params":{"user":"ann","password":"hunter2"},"id":1}"#,
    )
    .await
    .unwrap();
    assert_eq!(reply["error"]["code"], -32602);
    let text = reply.to_string();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("[REDACTED]"), "{text}");
}

// ---- over a peer ----

/// A server peer over an in-memory pipe, and a raw client end to write
/// frames into and read replies from.
async fn raw_peer(router: Router, max_in_flight: usize, cancel: Option<CancelProtocol>) -> RawEnd {
    let (a, b) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(a);
    let mut builder = Peer::builder().router(router).max_in_flight(max_in_flight);
    if let Some(cancel) = cancel {
        builder = builder.cancellation(cancel);
    }
    let _peer = builder.start(read, write, jrpc::codec::Framing::Ndjson);
    let (read, write) = tokio::io::split(b);
    RawEnd {
        lines: tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(read)),
        write,
    }
}

struct RawEnd {
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
}

impl RawEnd {
    async fn send(&mut self, frame: &Value) {
        use tokio::io::AsyncWriteExt;
        let mut line = frame.to_string();
        line.push('\n');
        self.write.write_all(line.as_bytes()).await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = bounded("a reply", self.lines.next_line()).await.unwrap().unwrap();
        serde_json::from_str(&line).unwrap()
    }
}

#[tokio::test]
async fn batch_entries_pass_the_peer_middleware_each_once() {
    let seen: Seen = Arc::default();
    let router = handlers().layer(recording(Arc::clone(&seen)));
    let mut end = raw_peer(router, 16, None).await;
    end.send(&json!([
        {"jsonrpc":"2.0","method":"add","params":[1,2],"id":1},
        {"jsonrpc":"2.0","method":"update","params":[1]},
        {"jsonrpc":"2.0","method":"async_add","params":[3,4],"id":2},
        {"jsonrpc":"2.0","method":"nope","id":3},
        {"bad":true}
    ]))
    .await;
    let reply = end.next().await;
    assert_eq!(
        reply,
        json!([
            {"jsonrpc":"2.0","result":3,"id":1},
            {"jsonrpc":"2.0","result":7,"id":2},
            {"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":3},
            {"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null}
        ])
    );
    // The notification may still be on its way through the worker.
    bounded("the notification", async {
        while seen.lock().unwrap().len() < 4 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let saw = sorted(seen.lock().unwrap().clone());
    let expected = sorted(vec![
        ("add".into(), Some("1".into())),
        ("update".into(), None),
        ("async_add".into(), Some("2".into())),
        ("nope".into(), Some("3".into())),
    ]);
    assert_eq!(saw, expected);
}

#[tokio::test]
async fn batch_entries_count_toward_max_in_flight() {
    // Eight accepted (one running, the rest waiting): a batch of twenty
    // sleeps gets the other twelve refused with -32007, each in its place.
    let mut end = raw_peer(jrpc::demo::router(), 1, None).await;
    let batch: Vec<Value> = (0..20)
        .map(|i| json!({"jsonrpc":"2.0","method":"sleep","params":[1],"id":i}))
        .collect();
    end.send(&Value::Array(batch)).await;
    let reply = end.next().await;
    let entries = reply.as_array().unwrap();
    assert_eq!(entries.len(), 20, "{reply}");
    let ids: Vec<i64> = entries.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, (0..20).collect::<Vec<_>>(), "replies in entry order");
    let busy = entries.iter().filter(|e| e["error"]["code"] == -32007).count();
    assert_eq!(busy, 12, "{reply}");
}

#[tokio::test]
async fn a_batch_entry_can_be_cancelled_by_id() {
    let mut end = raw_peer(jrpc::demo::router(), 16, Some(CancelProtocol::lsp())).await;
    end.send(&json!([
        {"jsonrpc":"2.0","method":"sleep","params":[60000],"id":"slow"},
        {"jsonrpc":"2.0","method":"add","params":[1,1],"id":"fast"}
    ]))
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    end.send(&json!({"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"slow"}}))
        .await;
    let reply = end.next().await;
    assert_eq!(
        reply,
        json!([
            {"jsonrpc":"2.0","error":{"code":-32800,"message":"Request cancelled"},"id":"slow"},
            {"jsonrpc":"2.0","result":2,"id":"fast"}
        ])
    );
}

#[tokio::test]
async fn an_mcp_cancelled_batch_entry_is_left_out_of_the_reply() {
    let mut end = raw_peer(jrpc::demo::router(), 16, Some(CancelProtocol::mcp())).await;
    end.send(&json!([
        {"jsonrpc":"2.0","method":"sleep","params":[60000],"id":1},
        {"jsonrpc":"2.0","method":"add","params":[1,1],"id":2}
    ]))
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    end.send(&json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}))
        .await;
    assert_eq!(end.next().await, json!([{"jsonrpc":"2.0","result":2,"id":2}]));
}

#[tokio::test]
async fn ordered_batches_apply_earlier_notifications_first() {
    let state = Arc::new(Mutex::new(Vec::<i64>::new()));
    let (w, r) = (Arc::clone(&state), Arc::clone(&state));
    let router = Router::new()
        .notification("push", move |(n,): (i64,)| {
            let state = Arc::clone(&w);
            async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                state.lock().unwrap().push(n);
            }
        })
        .sync_method("read", move || Ok(r.lock().unwrap().clone()));
    let (a, b) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(a);
    let _server =
        Peer::builder()
            .router(router)
            .ordered(true)
            .start(read, write, jrpc::codec::Framing::Ndjson);
    let (read, write) = tokio::io::split(b);
    let client = Client::builder().over(read, write);
    let mut batch = client.batch();
    batch.notify("push", [1]).notify("push", [2]);
    let seen = batch.call::<Vec<i64>>("read", ());
    bounded("batch", batch.send()).await.unwrap();
    assert_eq!(bounded("read", seen.into_future()).await.unwrap(), [1, 2]);
}

#[cfg(feature = "metrics")]
#[tokio::test]
async fn tcp_and_http_calls_pass_the_same_layers() {
    let seen: Seen = Arc::default();
    let metrics = Metrics::new();
    let router = jrpc::demo::router()
        .layer(metrics.layer())
        .layer(recording(Arc::clone(&seen)));
    let tcp = Server::new(router.clone())
        .metrics(metrics.clone())
        .bind_tcp("127.0.0.1:0")
        .await
        .unwrap();
    let http = jrpc::server::http::HttpServer::new(router)
        .metrics(metrics.clone())
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let ws_url = http.local_addr().replacen("http", "ws", 1);
    for url in [tcp.local_addr(), http.local_addr(), ws_url.as_str()] {
        let client = Client::connect(url).await.unwrap();
        let sum: i64 = bounded("add", client.call("add", (2, 3))).await.unwrap();
        assert_eq!(sum, 5, "{url}");
        let mut batch = client.batch();
        let a = batch.call::<i64>("add", (1, 1));
        batch.notify("update", [1]);
        bounded("batch", batch.send()).await.unwrap();
        assert_eq!(a.await.unwrap(), 2);
    }
    bounded("notifications", async {
        while seen.lock().unwrap().len() < 9 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let page = metrics.render();
    assert!(
        page.contains(r#"jrpc_calls_total{code="",method="add",outcome="ok"} 6"#),
        "{page}"
    );
    assert!(
        page.contains(r#"jrpc_calls_total{code="",method="update",outcome="ok"} 3"#),
        "{page}"
    );
    assert!(
        page.contains(r#"jrpc_connections_open{transport="tcp"}"#),
        "{page}"
    );
    tcp.shutdown().await;
    http.shutdown().await;
}

// ---- the calling side ----

/// An outgoing layer that records each call (method, notification?) and
/// passes it on.
#[derive(Clone)]
struct RecordingOut(Arc<Mutex<Vec<(String, bool)>>>);

impl tower::Layer<jrpc::caller::BoxOutgoingService> for RecordingOut {
    type Service = jrpc::caller::BoxOutgoingService;

    fn layer(&self, inner: jrpc::caller::BoxOutgoingService) -> Self::Service {
        let seen = Arc::clone(&self.0);
        jrpc::caller::BoxOutgoingService::new(service_fn(move |call: jrpc::caller::Outgoing| {
            seen.lock()
                .unwrap()
                .push((call.method().to_owned(), call.is_notification()));
            inner.clone().oneshot(call)
        }))
    }
}

#[tokio::test]
async fn outgoing_layers_see_every_call_and_notification_on_every_transport() {
    let tcp = jrpc::server::Server::new(jrpc::demo::router())
        .bind_tcp("127.0.0.1:0")
        .await
        .unwrap();
    let http = jrpc::server::http::HttpServer::new(jrpc::demo::router())
        .bind("127.0.0.1:0")
        .await
        .unwrap();
    let ws_url = http.local_addr().replacen("http", "ws", 1);
    for url in [tcp.local_addr(), http.local_addr(), ws_url.as_str()] {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let client = Client::builder()
            .layer(RecordingOut(Arc::clone(&seen)))
            .connect(url)
            .await
            .unwrap();
        let sum: i64 = bounded("add", client.call("add", (2, 3))).await.unwrap();
        assert_eq!(sum, 5);
        let err = bounded("nope", client.call::<Value>("nope", ()))
            .await
            .unwrap_err();
        assert_eq!(err.rpc().map(Error::code), Some(-32601), "{url}: {err}");
        bounded("notify", client.notify("update", [1])).await.unwrap();
        let bad = client.call::<Value>("add", 5).await.unwrap_err();
        assert!(matches!(bad, jrpc::CallError::Encode(_)), "{bad}");
        assert_eq!(
            *seen.lock().unwrap(),
            [
                ("add".to_owned(), false),
                ("nope".to_owned(), false),
                ("update".to_owned(), true)
            ],
            "{url}"
        );
    }
    tcp.shutdown().await;
    http.shutdown().await;
}

#[tokio::test]
async fn an_outgoing_layer_can_retry_a_call() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&attempts);
    let router = Router::new().sync_method("flaky", move || {
        if counted.fetch_add(1, Ordering::SeqCst) < 2 {
            Err(Error::new(-32050, "try again"))
        } else {
            Ok("done")
        }
    });
    let serving = jrpc::server::Server::new(router)
        .bind_tcp("127.0.0.1:0")
        .await
        .unwrap();
    let retry = layer_fn(|inner: jrpc::caller::BoxOutgoingService| {
        service_fn(move |call: jrpc::caller::Outgoing| {
            let inner = inner.clone();
            async move {
                let mut last = None;
                for _ in 0..3 {
                    match inner.clone().oneshot(call.clone()).await {
                        Err(jrpc::CallError::Rpc(e)) if e.code() == -32050 => last = Some(e),
                        other => return other,
                    }
                }
                Err(jrpc::CallError::Rpc(last.expect("three attempts")))
            }
        })
    });
    let client = Client::builder()
        .layer(retry)
        .connect(serving.local_addr())
        .await
        .unwrap();
    let result: String = bounded("flaky", client.call("flaky", ())).await.unwrap();
    assert_eq!(result, "done");
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    drop(client);
    serving.shutdown().await;
}

/// A layer that is ready only with one of `slots` in hand, as tower's
/// `ConcurrencyLimit` is: `poll_ready` waits for a permit (holding a place
/// in the semaphore's queue meanwhile) and `call` moves it into the call.
struct Slots {
    semaphore: tokio_util::sync::PollSemaphore,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    inner: BoxCallService,
}

impl Clone for Slots {
    fn clone(&self) -> Self {
        Slots {
            semaphore: self.semaphore.clone(),
            permit: None,
            inner: self.inner.clone(),
        }
    }
}

impl tower::Service<Call> for Slots {
    type Response = jrpc::middleware::RawResult;
    type Error = Error;
    type Future = jrpc::middleware::CallFuture;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Error>> {
        if self.permit.is_none() {
            let permit = std::task::ready!(self.semaphore.poll_acquire(cx));
            self.permit = Some(permit.expect("never closed"));
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: Call) -> Self::Future {
        let permit = self.permit.take();
        let served = self.inner.call(call);
        Box::pin(async move {
            let outcome = served.await;
            drop(permit);
            outcome
        })
    }
}

/// Calls share one instance of the stack while it is ready at once. One
/// that finds it not ready must not leave it waiting in the semaphore's
/// queue: the permit would go to that instance, for nobody, when the call
/// holding it ended, and the call waiting on its own copy would wait for a
/// call that might never come.
#[tokio::test]
async fn a_stack_that_is_not_ready_at_once_serves_every_call() {
    let semaphore = Arc::new(tokio::sync::Semaphore::new(1));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let waiting = Arc::clone(&gate);
    let router = Router::new()
        .method("wait", move |(): ()| {
            let gate = Arc::clone(&waiting);
            async move {
                gate.acquire().await.expect("never closed").forget();
                Ok(())
            }
        })
        .layer(layer_fn(move |inner: BoxCallService| Slots {
            semaphore: tokio_util::sync::PollSemaphore::new(Arc::clone(&semaphore)),
            permit: None,
            inner,
        }));
    let call = |id: u32| {
        let router = router.clone();
        tokio::spawn(async move {
            let frame = format!(r#"{{"jsonrpc":"2.0","method":"wait","id":{id}}}"#);
            router.handle(frame.as_bytes()).await
        })
    };
    // The first takes the only slot; the second finds the stack not ready.
    let first = call(1);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = call(2);
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Only the first runs: let it end. The second must get the slot now.
    gate.add_permits(1);
    bounded("the first call", first).await.unwrap();
    gate.add_permits(1);
    bounded("the second call", second).await.unwrap();
    // And the shared instance still serves.
    gate.add_permits(1);
    bounded("a third call", call(3)).await.unwrap();
}
