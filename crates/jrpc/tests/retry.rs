//! Retry policies on every transport, against servers with injected
//! faults: refusals (`-32007`) before success, a server that drops the
//! connection mid-call, a server that is not up yet, one that never stops
//! refusing. A call that may have run is tried again only when its method
//! is idempotent. No test asserts a timing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use jrpc::client::{AutoBatch, Client, Retry, RetryPolicy};
use jrpc::server::http::HttpServer;
use jrpc::server::Server;
use jrpc::{Error, Router};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// Fails the test instead of hanging when something never finishes.
async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish"))
}

/// A router whose `flaky` method answers `-32007 Server busy` to its first
/// `refusals` calls, then its param doubled; `calls` counts every call.
fn flaky(refusals: usize) -> (Router, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let router = Router::new().sync_method("flaky", move |(n,): (i64,)| {
        if counted.fetch_add(1, Ordering::SeqCst) < refusals {
            Err(Error::server_busy())
        } else {
            Ok(n * 2)
        }
    });
    (router, calls)
}

fn quick(attempts: u32) -> Retry {
    Retry::fixed(attempts, Duration::from_millis(5))
}

#[tokio::test]
async fn refusals_are_tried_again_on_tcp_http_and_websocket() {
    for transport in ["tcp", "http", "ws"] {
        let (router, calls) = flaky(2);
        let (serving, url) = match transport {
            "tcp" => {
                let serving = Server::new(router).bind_tcp("127.0.0.1:0").await.unwrap();
                let url = serving.local_addr().to_owned();
                (serving, url)
            }
            scheme => {
                let serving = HttpServer::new(router).bind("127.0.0.1:0").await.unwrap();
                let url = serving.local_addr().replacen("http", scheme, 1);
                (serving, url)
            }
        };
        let without = Client::connect(&url).await.unwrap();
        let refused = without.call::<i64>("flaky", [1]).await.unwrap_err();
        assert_eq!(refused.rpc().map(|e| e.code()), Some(-32007), "{transport}");
        calls.store(0, Ordering::SeqCst);
        let client = Client::builder().retry(quick(3)).connect(&url).await.unwrap();
        assert_eq!(
            bounded(transport, client.call::<i64>("flaky", [21]))
                .await
                .unwrap(),
            42,
            "{transport}"
        );
        assert_eq!(
            calls.load(Ordering::SeqCst),
            3,
            "{transport}: two refusals, then the answer"
        );
        serving.shutdown().await;
    }
}

#[tokio::test]
async fn automatically_batched_calls_are_tried_again_one_by_one() {
    let (router, calls) = flaky(2);
    let serving = HttpServer::new(router).bind("127.0.0.1:0").await.unwrap();
    let client = Client::builder()
        .retry(quick(3))
        .auto_batch(AutoBatch::new(4).linger(Duration::from_secs(5)))
        .connect(serving.local_addr())
        .await
        .unwrap();
    let results = bounded(
        "the calls",
        join_all((1..=4).map(|n| client.call::<i64>("flaky", [n]))),
    )
    .await;
    let results: Vec<i64> = results.into_iter().map(Result::unwrap).collect();
    assert_eq!(results, [2, 4, 6, 8]);
    assert_eq!(calls.load(Ordering::SeqCst), 6, "two refused calls went again");
    serving.shutdown().await;
}

/// A line server that closes the connection, unanswered, on the first
/// `drops` requests it reads, and answers `get` with 7 after that;
/// `requests` counts what it read.
async fn dropping_server(drops: usize) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("tcp://{}", listener.local_addr().unwrap());
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&requests);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let counted = Arc::clone(&counted);
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut lines = BufReader::new(read).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if counted.fetch_add(1, Ordering::SeqCst) < drops {
                        return; // the connection drops with the call in flight
                    }
                    let request: serde_json::Value = serde_json::from_str(&line).unwrap();
                    let reply = serde_json::json!({"jsonrpc": "2.0", "result": 7, "id": request["id"]});
                    write.write_all(format!("{reply}\n").as_bytes()).await.unwrap();
                }
            });
        }
    });
    (url, requests)
}

#[tokio::test]
async fn a_call_lost_with_its_connection_is_tried_again_only_when_idempotent() {
    let (url, requests) = dropping_server(1).await;
    let client = Client::builder()
        .reconnect(quick(5))
        .retry(RetryPolicy::new(quick(5)).on_connection_lost(true))
        .connect(&url)
        .await
        .unwrap();
    let lost = bounded("the call", client.call::<i64>("get", ()))
        .await
        .unwrap_err();
    assert!(
        lost.is_closed(),
        "it may have run, and get is not idempotent: {lost:?}"
    );
    assert_eq!(requests.load(Ordering::SeqCst), 1);

    let (url, requests) = dropping_server(1).await;
    let policy = RetryPolicy::new(quick(5))
        .idempotent(["get"])
        .on_connection_lost(true);
    let client = Client::builder()
        .reconnect(quick(5))
        .retry(policy)
        .connect(&url)
        .await
        .unwrap();
    assert_eq!(
        bounded("the call", client.call::<i64>("get", ())).await.unwrap(),
        7
    );
    assert_eq!(
        requests.load(Ordering::SeqCst),
        2,
        "sent again on a new connection"
    );
}

#[tokio::test]
async fn a_server_not_up_yet_is_dialed_again() {
    // A free port, for a server that starts after the client first tries.
    let port = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let connecting = tokio::spawn({
        let url = format!("tcp://{addr}");
        async move {
            Client::builder()
                .retry(Retry::fixed(400, Duration::from_millis(20)))
                .connect(&url)
                .await
        }
    });
    let (router, _) = flaky(0);
    let serving = Server::new(router).bind_tcp(&addr).await.unwrap();
    let client = bounded("connecting", connecting).await.unwrap().unwrap();
    assert_eq!(client.call::<i64>("flaky", [4]).await.unwrap(), 8);
    serving.shutdown().await;
}

#[tokio::test]
async fn tries_stop_at_the_attempt_and_time_bounds() {
    let (router, calls) = flaky(usize::MAX);
    let serving = Server::new(router).bind_tcp("127.0.0.1:0").await.unwrap();
    let client = Client::builder()
        .retry(quick(3))
        .connect(serving.local_addr())
        .await
        .unwrap();
    let error = bounded("the call", client.call::<i64>("flaky", [1]))
        .await
        .unwrap_err();
    assert_eq!(error.rpc().map(|e| e.code()), Some(-32007));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        4,
        "the first attempt and three more"
    );

    calls.store(0, Ordering::SeqCst);
    let policy = RetryPolicy::new(Retry::fixed(100_000, Duration::from_millis(10)))
        .max_elapsed(Duration::from_millis(200));
    let client = Client::builder()
        .retry(policy)
        .connect(serving.local_addr())
        .await
        .unwrap();
    let error = bounded("the call", client.call::<i64>("flaky", [1]))
        .await
        .unwrap_err();
    assert_eq!(error.rpc().map(|e| e.code()), Some(-32007), "{error:?}");
    let made = calls.load(Ordering::SeqCst);
    assert!(
        (2..100_000).contains(&made),
        "stopped by the time bound after {made}"
    );
    serving.shutdown().await;
}

#[tokio::test]
async fn batched_calls_reach_a_reconnected_server() {
    // `bye` closes the connection; afterwards gathered batches must go on a
    // new one, not keep failing on the closed one.
    let (router, _) = flaky(0);
    let router = router.method("bye", |(): (), cx: jrpc::RequestContext| async move {
        if let Some(peer) = cx.peer() {
            peer.close();
        }
        Ok(())
    });
    let serving = Server::new(router).bind_tcp("127.0.0.1:0").await.unwrap();
    let client = Client::builder()
        .reconnect(quick(50))
        .retry(
            RetryPolicy::new(quick(5))
                .idempotent(["flaky"])
                .on_connection_lost(true),
        )
        .auto_batch(AutoBatch::new(4).linger(Duration::from_millis(20)))
        .connect(serving.local_addr())
        .await
        .unwrap();
    client.call::<()>("bye", ()).await.unwrap();
    for round in 0..3 {
        let results = bounded(
            "a round",
            join_all((1..=4).map(|n| client.call::<i64>("flaky", [n]))),
        )
        .await;
        let results: Vec<i64> = results.into_iter().map(Result::unwrap).collect();
        assert_eq!(results, [2, 4, 6, 8], "round {round}");
    }
    serving.shutdown().await;
}

#[tokio::test]
async fn notifications_are_never_tried_again() {
    let (router, calls) = flaky(usize::MAX);
    let serving = Server::new(router).bind_tcp("127.0.0.1:0").await.unwrap();
    let client = Client::builder()
        .retry(
            RetryPolicy::new(quick(3))
                .all_idempotent()
                .on_connection_lost(true),
        )
        .connect(serving.local_addr())
        .await
        .unwrap();
    client.notify("flaky", [1]).await.unwrap();
    // The call after it is answered in order: the notification ran once.
    let _ = client.call::<i64>("flaky", [1]).await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1 + 4,
        "the notification once, the call four times"
    );
    serving.shutdown().await;
}

/// A router whose `stall` method answers its first `stalls` calls only
/// after two seconds (as good as never, to a caller that gave up sooner:
/// a server host that died with them), then its param at once.
fn stalling(stalls: usize) -> (Router, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let router = Router::new().method("stall", move |(n,): (i64,)| {
        let stalled = counted.fetch_add(1, Ordering::SeqCst) < stalls;
        async move {
            if stalled {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Ok::<_, Error>(n)
        }
    });
    (router, calls)
}

/// A TCP server of `stalling(stalls)`, and a client calling it with
/// `policy` and `call_timeout`; the server's count of calls.
async fn stalling_server(
    stalls: usize,
    policy: RetryPolicy,
    call_timeout: Duration,
) -> (jrpc::server::Serving, Client, Arc<AtomicUsize>) {
    let (router, calls) = stalling(stalls);
    let serving = Server::new(router).bind_tcp("127.0.0.1:0").await.unwrap();
    let client = Client::builder()
        .retry(policy)
        .call_timeout(call_timeout)
        .connect(serving.local_addr())
        .await
        .unwrap();
    (serving, client, calls)
}

#[tokio::test]
async fn a_timed_out_attempt_is_sent_again_within_the_calls_timeout() {
    let retried = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&retried);
    let policy = RetryPolicy::new(quick(3))
        .all_idempotent()
        .on_timeout(true)
        .attempt_timeout(Duration::from_millis(200))
        .on_retry(move |retrying| {
            seen.lock().unwrap().push((
                retrying.method.to_owned(),
                retrying.retry,
                retrying.error.to_string(),
            ));
        });
    let (serving, client, calls) = stalling_server(2, policy, Duration::from_secs(20)).await;
    let answer = bounded("the call", client.call::<i64>("stall", [7])).await;
    assert_eq!(answer.unwrap(), 7);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "two stalled attempts, then one answered"
    );
    let retried = retried.lock().unwrap().clone();
    assert_eq!(retried.len(), 2, "{retried:?}");
    for (n, (method, retry, error)) in retried.iter().enumerate() {
        assert_eq!((method.as_str(), *retry), ("stall", n as u32 + 1));
        assert!(error.contains("no response within"), "{error}");
    }
    serving.shutdown().await;

    // A method not marked idempotent is never cut short by the bound of an
    // attempt: its one attempt has the call's whole timeout.
    let policy = RetryPolicy::new(quick(3))
        .idempotent(["another"])
        .on_timeout(true)
        .attempt_timeout(Duration::from_millis(200));
    let (serving, client, calls) = stalling_server(1, policy, Duration::from_secs(20)).await;
    let answer = bounded("the call", client.call::<i64>("stall", [8])).await;
    assert_eq!(answer.unwrap(), 8);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    serving.shutdown().await;

    // Without a bound of each attempt's own, the call's timeout is spent by
    // the first one: nothing is sent again.
    let policy = RetryPolicy::new(quick(3)).all_idempotent().on_timeout(true);
    let (serving, client, calls) = stalling_server(1, policy, Duration::from_millis(300)).await;
    let error = bounded("the call", client.call::<i64>("stall", [7]))
        .await
        .unwrap_err();
    assert!(matches!(error, jrpc::CallError::Timeout(_)), "{error:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    serving.shutdown().await;
}
