//! The router's behaviour beyond the demo methods: handler shapes, errors,
//! panics, registration rules, batch concurrency and JSON-RPC 1.0 mode.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{json, reply};
use jrpc::message::codes;
use jrpc::router::{Extensions, RegisterError};
use jrpc::{Error, RequestContext, Router};
use serde::Deserialize;
use serde_json::Value;

fn req(method: &str, params: &str, id: u64) -> String {
    format!(r#"{{"jsonrpc":"2.0","method":"{method}","params":{params},"id":{id}}}"#)
}

#[derive(Deserialize)]
struct Greet {
    name: String,
    punctuation: Option<char>,
}

fn greeting(p: Greet) -> String {
    format!("Hello, {}{}", p.name, p.punctuation.unwrap_or('!'))
}

#[tokio::test]
async fn every_handler_shape_is_served() {
    let router = Router::new()
        .method("a0", || async { Ok(0) })
        .method("a1", |p: Greet| async move { Ok(greeting(p)) })
        .method("a2", |p: Greet, ctx: RequestContext| async move {
            Ok(format!("{} #{}", greeting(p), ctx.id().unwrap()))
        })
        .sync_method("s0", || Ok(0))
        .sync_method("s1", |p: Greet| Ok(greeting(p)))
        .sync_method("s2", |p: Greet, ctx: &RequestContext| {
            Ok(format!("{} #{}", greeting(p), ctx.id().unwrap()))
        });
    for prefix in ["a", "s"] {
        let m = |n| format!("{prefix}{n}");
        assert_eq!(reply(&router, &req(&m(0), "[]", 1)).await.unwrap()["result"], 0);
        assert_eq!(
            reply(&router, &req(&m(1), r#"{"name":"Ann"}"#, 1)).await.unwrap()["result"],
            "Hello, Ann!"
        );
        assert_eq!(
            reply(&router, &req(&m(1), r#"["Bo","?"]"#, 1)).await.unwrap()["result"],
            "Hello, Bo?"
        );
        assert_eq!(
            reply(&router, &req(&m(2), r#"["Cy"]"#, 42)).await.unwrap()["result"],
            "Hello, Cy! #42"
        );
        let bad = reply(&router, &req(&m(1), r#"{"name":5}"#, 3)).await.unwrap();
        assert_eq!(bad["error"]["code"], codes::INVALID_PARAMS);
        assert_eq!(bad["error"]["data"]["param"], "name");
    }
}

#[tokio::test]
async fn handler_errors_keep_code_message_and_data() {
    let router = Router::new()
        .method("a", || async {
            Err::<(), _>(
                Error::new(-32050, "Insufficient funds").with_data(&serde_json::json!({"balance": 3})),
            )
        })
        .sync_method("s", || Err::<(), _>(Error::new(7, "custom")));
    assert_eq!(
        reply(&router, &req("a", "[]", 1)).await.unwrap(),
        json(
            r#"{"jsonrpc":"2.0","error":{"code":-32050,"message":"Insufficient funds","data":{"balance":3}},"id":1}"#
        )
    );
    assert_eq!(
        reply(&router, &req("s", "[]", 2)).await.unwrap(),
        json(r#"{"jsonrpc":"2.0","error":{"code":7,"message":"custom"},"id":2}"#)
    );
}

#[tokio::test]
async fn panicking_handlers_yield_internal_error_and_the_router_keeps_serving() {
    let router = Router::new()
        .method("boom", || async {
            if true {
                panic!("secret path /etc/app.toml");
            }
            Ok(())
        })
        .sync_method("sboom", || -> Result<(), Error> {
            panic!("secret path /etc/app.toml")
        })
        .sync_method("ok", || Ok("fine"));
    for method in ["boom", "sboom"] {
        let got = reply(&router, &req(method, "[]", 1)).await.unwrap();
        assert_eq!(
            got,
            json(r#"{"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error"},"id":1}"#),
            "internals must not leak by default"
        );
    }
    let batch = format!("[{},{}]", req("sboom", "[]", 1), req("ok", "[]", 2));
    let got = reply(&router, &batch).await.unwrap();
    assert_eq!(got[0]["error"]["code"], codes::INTERNAL_ERROR);
    assert_eq!(got[1]["result"], "fine");
    // A panicking notification is swallowed too.
    assert!(router
        .handle(br#"{"jsonrpc":"2.0","method":"boom"}"#)
        .await
        .is_none());

    let exposed = router.expose_internal_errors(true);
    let got = reply(&exposed, &req("sboom", "[]", 1)).await.unwrap();
    assert!(
        got["error"]["data"].as_str().unwrap().contains("secret path"),
        "{got}"
    );
}

#[tokio::test]
async fn unserializable_results_are_internal_errors() {
    let router = Router::new().sync_method("bad", || {
        let mut map = std::collections::HashMap::new();
        map.insert(vec![1u8], 1);
        Ok(map)
    });
    let got = reply(&router, &req("bad", "[]", 1)).await.unwrap();
    assert_eq!(got["error"]["code"], codes::INTERNAL_ERROR);
    assert!(
        got.get("result").is_none(),
        "a partial result must not leak: {got}"
    );
}

#[test]
fn reserved_and_duplicate_names_cannot_be_registered() {
    assert_eq!(
        Router::new()
            .try_method("rpc.discover", || async { Ok(()) })
            .unwrap_err(),
        RegisterError::Reserved("rpc.discover".into())
    );
    assert!(matches!(
        Router::new().try_sync_notification("rpc.x", || {}),
        Err(RegisterError::Reserved(_))
    ));
    let router = Router::new().sync_method("a", || Ok(1));
    assert_eq!(
        router.clone().try_sync_method("a", || Ok(2)).unwrap_err(),
        RegisterError::Duplicate("a".into())
    );
    assert!(matches!(
        router.try_notification("a", || async {}),
        Err(RegisterError::Duplicate(_))
    ));
    // "rpc" itself and names merely containing "rpc." are fine.
    Router::new()
        .sync_method("rpc", || Ok(1))
        .sync_method("my.rpc.x", || Ok(1));
}

#[test]
#[should_panic(expected = "reserved")]
fn registering_a_reserved_name_panics_in_the_builder() {
    let _ = Router::new().sync_method("rpc.ping", || Ok(()));
}

#[tokio::test]
async fn notifications_run_their_handler_and_get_no_reply() {
    let hits = Arc::new(AtomicUsize::new(0));
    let (h1, h2) = (Arc::clone(&hits), Arc::clone(&hits));
    let router = Router::new()
        .sync_notification("tick", move |(n,): (usize,)| {
            h1.fetch_add(n, Ordering::SeqCst);
        })
        .method("count", move |(n,): (usize,)| {
            let h2 = Arc::clone(&h2);
            async move { Ok(h2.fetch_add(n, Ordering::SeqCst)) }
        });
    assert!(router
        .handle(br#"{"jsonrpc":"2.0","method":"tick","params":[1]}"#)
        .await
        .is_none());
    assert!(router
        .handle(br#"{"jsonrpc":"2.0","method":"count","params":[10]}"#)
        .await
        .is_none());
    let batch = br#"[{"jsonrpc":"2.0","method":"tick","params":[100]},{"jsonrpc":"2.0","method":"tick","params":["bad"]}]"#;
    assert!(router.handle(batch).await.is_none());
    assert_eq!(hits.load(Ordering::SeqCst), 111);
}

#[tokio::test]
async fn batch_entries_run_concurrently_within_the_bound() {
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (r, p) = (Arc::clone(&running), Arc::clone(&peak));
    let router = Router::new()
        .method("work", move |(i,): (u64,)| {
            let (running, peak) = (Arc::clone(&r), Arc::clone(&p));
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                // Later entries finish first, so order must be restored.
                tokio::time::sleep(Duration::from_millis(20 - i)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(i)
            }
        })
        .batch_concurrency(4);
    let batch = format!(
        "[{}]",
        (0..10)
            .map(|i| req("work", &format!("[{i}]"), i))
            .collect::<Vec<_>>()
            .join(",")
    );
    let got = reply(&router, &batch).await.unwrap();
    let results: Vec<u64> = got
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["result"].as_u64().unwrap())
        .collect();
    assert_eq!(results, (0..10).collect::<Vec<_>>(), "replies in request order");
    assert_eq!(
        peak.load(Ordering::SeqCst),
        4,
        "exactly the bound in flight at the peak"
    );
}

#[tokio::test]
async fn context_carries_connection_extensions() {
    #[derive(Debug, Clone, PartialEq)]
    struct Peer(&'static str);
    let router = Router::new().sync_method("who", |(): (), ctx: &RequestContext| {
        Ok(ctx.get::<Peer>().map(|p| p.0).unwrap_or("unknown"))
    });
    let mut ext = Extensions::new();
    ext.insert(Peer("127.0.0.1:9"));
    let got = router
        .handle_with(req("who", "[]", 1).as_bytes(), &Arc::new(ext))
        .await
        .unwrap();
    assert_eq!(got, r#"{"jsonrpc":"2.0","result":"127.0.0.1:9","id":1}"#);
    let got = router.handle(req("who", "[]", 1).as_bytes()).await.unwrap();
    assert_eq!(got, r#"{"jsonrpc":"2.0","result":"unknown","id":1}"#);
}

#[tokio::test]
async fn json_rpc_1_0_mode() {
    let off = jrpc::demo::router();
    let v1 = r#"{"method":"subtract","params":[42,23],"id":1}"#;
    assert_eq!(
        reply(&off, v1).await.unwrap(),
        json(r#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":1}"#),
        "1.0 is refused by default"
    );

    let on = jrpc::demo::router().accept_v1(true);
    let cases: &[(&str, Option<&str>)] = &[
        (v1, Some(r#"{"result":19,"error":null,"id":1}"#)),
        (
            r#"{"method":"nope","params":[],"id":"a"}"#,
            Some(r#"{"result":null,"error":{"code":-32601,"message":"Method not found"},"id":"a"}"#),
        ),
        (
            r#"{"method":"get_data","params":null,"id":2}"#,
            Some(r#"{"result":["hello",5],"error":null,"id":2}"#),
        ),
        (
            r#"{"method":"get_data","id":3}"#,
            Some(r#"{"result":["hello",5],"error":null,"id":3}"#),
        ),
        (
            r#"{"method":"subtract","params":{"minuend":2,"subtrahend":1},"id":4}"#,
            Some(r#"{"result":1,"error":null,"id":4}"#),
        ),
        (r#"{"method":"update","params":[1],"id":null}"#, None),
        (r#"{"method":"update","params":[1]}"#, None),
        (
            r#"{"method":1,"id":5}"#,
            Some(r#"{"result":null,"error":{"code":-32600,"message":"Invalid Request"},"id":5}"#),
        ),
        (
            r#"{"jsonrpc":"2.0","method":"subtract","params":[2,1],"id":6}"#,
            Some(r#"{"jsonrpc":"2.0","result":1,"id":6}"#),
        ),
        (
            r#"{"jsonrpc":"1.0","method":"subtract","params":[2,1],"id":7}"#,
            Some(r#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":7}"#),
        ),
    ];
    for (input, want) in cases {
        let got = reply(&on, input).await;
        assert_eq!(got, want.map(json), "{input}");
    }
    // The exact text: 1.0 replies carry no "jsonrpc" member.
    assert_eq!(
        on.handle(v1.as_bytes()).await.unwrap(),
        r#"{"result":19,"error":null,"id":1}"#
    );
    let mixed = format!(r#"[{v1},{}]"#, req("subtract", "[5,1]", 2));
    let got = reply(&on, &mixed).await.unwrap();
    assert_eq!(
        got,
        json(r#"[{"result":19,"error":null,"id":1},{"jsonrpc":"2.0","result":4,"id":2}]"#)
    );
}

#[tokio::test]
async fn merge_combines_method_tables() {
    let a = Router::new().sync_method("a", || Ok("a"));
    let b = Router::new()
        .sync_method("b", || Ok("b"))
        .sync_notification("n", || {});
    let both = a.merge(b);
    assert_eq!(both.method_names(), ["a", "b"]);
    assert_eq!(reply(&both, &req("b", "[]", 1)).await.unwrap()["result"], "b");
}

#[tokio::test]
async fn routers_are_shared_across_tasks() {
    let router = jrpc::demo::router();
    let mut tasks = Vec::new();
    for i in 0..50u64 {
        let router = router.clone();
        tasks.push(tokio::spawn(async move {
            let got = router
                .handle(req("add", &format!("[{i},1]"), i).as_bytes())
                .await
                .unwrap();
            serde_json::from_slice::<Value>(&got).unwrap()["result"]
                .as_u64()
                .unwrap()
        }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        assert_eq!(task.await.unwrap(), i as u64 + 1);
    }
}

#[tokio::test]
async fn batches_mixing_async_and_plain_handlers_keep_order_and_commas() {
    let router = Router::new()
        .method("slow", |(ms, tag): (u64, String)| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(tag)
        })
        .sync_method("fast", |(tag,): (String,)| Ok(tag))
        .notification("anote", |_: Value| async {})
        .sync_notification("snote", |_: Value| {})
        .batch_concurrency(2);
    let entries = [
        r#"{"jsonrpc":"2.0","method":"anote","params":[1]}"#.to_owned(),
        req("slow", r#"[30,"a"]"#, 1),
        r#"{"jsonrpc":"2.0","method":"snote","params":[1]}"#.to_owned(),
        req("fast", r#"["b"]"#, 2),
        req("slow", r#"[1,"c"]"#, 3),
        "5".to_owned(),
        r#"{"jsonrpc":"2.0","method":"anote","params":[1]}"#.to_owned(),
        req("slow", r#"[10,"d"]"#, 4),
        req("nope", "[]", 5),
        req("slow", r#"[0,"e"]"#, 6),
        r#"{"jsonrpc":"2.0","method":"snote","params":[1]}"#.to_owned(),
    ];
    let batch = format!("[{}]", entries.join(","));
    let got = router.handle(batch.as_bytes()).await.unwrap();
    let got: Value = serde_json::from_slice(&got).expect("well-formed batch reply");
    let summary: Vec<String> = got
        .as_array()
        .unwrap()
        .iter()
        .map(|r| match r.get("result") {
            Some(result) => format!("{}={}", r["id"], result.as_str().unwrap()),
            None => format!("{}:{}", r["id"], r["error"]["code"]),
        })
        .collect();
    assert_eq!(
        summary,
        ["1=a", "2=b", "3=c", "null:-32600", "4=d", "5:-32601", "6=e"]
    );

    // Only notifications, async and plain: no reply at all.
    let notes = format!("[{},{}]", entries[0], entries[2]);
    assert!(router.handle(notes.as_bytes()).await.is_none());
    // A lone async request, and async requests only.
    let one = format!("[{}]", entries[1]);
    assert_eq!(reply(&router, &one).await.unwrap()[0]["result"], "a");
    let asyncs = format!("[{},{},{}]", entries[0], entries[4], entries[9]);
    let got = reply(&router, &asyncs).await.unwrap();
    assert_eq!(
        got,
        json(r#"[{"jsonrpc":"2.0","result":"c","id":3},{"jsonrpc":"2.0","result":"e","id":6}]"#)
    );
}
