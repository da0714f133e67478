//! Connection pools and reconnecting: calls spread over the least loaded
//! connections, a dropped connection replaced in the background, a hook
//! run on every new connection, calls waiting for a reconnection or
//! failing fast, a restarted server and one that closes idle connections
//! reached again, and HTTP's bound on connections at once. No test asserts
//! a timing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use jrpc::client::{Client, Reconnect, Retry, RetryPolicy};
use jrpc::server::http::HttpServer;
use jrpc::server::Server;
use jrpc::{CallError, RequestContext, Router};
use tokio::sync::{mpsc, Semaphore};

/// Fails the test instead of hanging when something never finishes.
async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish"))
}

/// Waits (boundedly) until `done` holds.
async fn until(what: &str, done: impl Fn() -> bool) {
    bounded(what, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

fn quick(attempts: u32) -> Retry {
    Retry::fixed(attempts, Duration::from_millis(10))
}

#[tokio::test]
async fn calls_spread_over_the_least_loaded_connections() {
    // `held` reports each start with its connection, then waits for a permit.
    let (started, mut starts) = mpsc::unbounded_channel::<String>();
    let gate = Arc::new(Semaphore::new(0));
    let permits = Arc::clone(&gate);
    let router = Router::new().method("held", move |(): (), cx: RequestContext| {
        let from = cx
            .connection_info()
            .and_then(|c| c.peer_addr.clone())
            .unwrap_or_default();
        let (started, permits) = (started.clone(), Arc::clone(&permits));
        async move {
            let _ = started.send(from);
            permits.acquire().await.unwrap().forget();
            Ok(())
        }
    });
    let serving = Server::new(router).bind_tcp("127.0.0.1:0").await.unwrap();
    let client = Client::builder()
        .pool(4)
        .connect(serving.local_addr())
        .await
        .unwrap();
    let calls = tokio::spawn({
        let client = client.clone();
        async move { join_all((0..8).map(|_| client.call::<()>("held", ()))).await }
    });
    let mut per_connection: HashMap<String, usize> = HashMap::new();
    for _ in 0..8 {
        let from = bounded("a start", starts.recv()).await.unwrap();
        *per_connection.entry(from).or_default() += 1;
    }
    gate.add_permits(8);
    assert!(bounded("the calls", calls)
        .await
        .unwrap()
        .iter()
        .all(Result::is_ok));
    assert_eq!(per_connection.len(), 4, "{per_connection:?}");
    assert!(
        per_connection.values().all(|n| *n == 2),
        "two each: {per_connection:?}"
    );
    serving.shutdown().await;
}

#[tokio::test]
async fn a_dropped_connection_is_replaced_while_the_others_carry_the_calls() {
    // `bye` closes the connection it came on (after answering).
    let accepted = Arc::new(AtomicUsize::new(0));
    let router = Router::new()
        .method("bye", |(): (), cx: RequestContext| async move {
            if let Some(peer) = cx.peer() {
                peer.close();
            }
            Ok(())
        })
        .sync_method("add", |(a, b): (i64, i64)| Ok(a + b));
    let counted = Arc::clone(&accepted);
    let router = router.method("hello", move |(): (), _cx: RequestContext| {
        counted.fetch_add(1, Ordering::SeqCst);
        async { Ok(()) }
    });
    let serving = Server::new(router).bind_tcp("127.0.0.1:0").await.unwrap();
    let hello =
        Reconnect::new(quick(100)).on_connect(|peer| async move { peer.call::<()>("hello", ()).await });
    // A call racing the close may go on the closing connection: it is lost,
    // and (add being idempotent) tried again on another.
    let client = Client::builder()
        .pool(3)
        .reconnect(hello)
        .retry(
            RetryPolicy::new(quick(3))
                .idempotent(["add"])
                .on_connection_lost(true),
        )
        .connect(serving.local_addr())
        .await
        .unwrap();
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        3,
        "the hook ran on each connection"
    );
    client.call::<()>("bye", ()).await.unwrap();
    // The other two carry the calls at once.
    for n in 0..20 {
        assert_eq!(client.call::<i64>("add", (n, 1)).await.unwrap(), n + 1);
    }
    until("the replacement", || accepted.load(Ordering::SeqCst) == 4).await;
    // Closed, the pool stays closed: no call goes, nothing is replaced.
    client.clone().close().await;
    let refused = client.call::<i64>("add", (1, 1)).await.unwrap_err();
    assert!(refused.is_closed(), "{refused:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        4,
        "no connection made after close"
    );
    serving.shutdown().await;
}

#[tokio::test]
async fn a_reconnected_connection_runs_the_hook_again() {
    let subscribed = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&subscribed);
    let router = Router::new()
        .notification("subscribe", move |(): ()| {
            counted.fetch_add(1, Ordering::SeqCst);
            async {}
        })
        .method("bye", |(): (), cx: RequestContext| async move {
            if let Some(peer) = cx.peer() {
                peer.close();
            }
            Ok(())
        })
        .sync_method("add", |(a, b): (i64, i64)| Ok(a + b));
    let serving = Server::new(router).bind_tcp("127.0.0.1:0").await.unwrap();
    let settings =
        Reconnect::new(quick(50)).on_connect(|peer| async move { peer.notify("subscribe", ()).await });
    let client = Client::builder()
        .reconnect(settings)
        .connect(serving.local_addr())
        .await
        .unwrap();
    until("the first subscription", || {
        subscribed.load(Ordering::SeqCst) == 1
    })
    .await;
    client.call::<()>("bye", ()).await.unwrap();
    // No call needed: the client reconnects by itself and subscribes again,
    // so what the server sends on its own keeps coming.
    until("the second subscription", || {
        subscribed.load(Ordering::SeqCst) == 2
    })
    .await;
    assert_eq!(
        bounded("a call", client.call::<i64>("add", (2, 3)))
            .await
            .unwrap(),
        5
    );
    serving.shutdown().await;
}

#[tokio::test]
async fn calls_wait_for_a_reconnection_or_fail_fast_by_setting() {
    let router = Router::new().sync_method("add", |(a, b): (i64, i64)| Ok(a + b));
    let serving = Server::new(router.clone()).bind_tcp("127.0.0.1:0").await.unwrap();
    let url = serving.local_addr().to_owned();
    let waiting = Client::builder()
        .reconnect(quick(10_000))
        .connect(&url)
        .await
        .unwrap();
    let failing = Client::builder()
        .reconnect(Reconnect::new(quick(10_000)).fail_fast(true))
        .connect(&url)
        .await
        .unwrap();
    serving.shutdown().await;
    for client in [&waiting, &failing] {
        let peer = client.peer().unwrap();
        bounded("the connection to close", peer.closed()).await;
    }
    // No server: a waiting call runs out of its own time; a failing-fast
    // one is refused at once, as never sent.
    let waited = bounded(
        "waiting",
        waiting.call_with_timeout::<i64>("add", (1, 2), Duration::from_millis(300)),
    )
    .await;
    assert!(matches!(waited, Err(CallError::Timeout(_))), "{waited:?}");
    let refused = bounded(
        "failing fast",
        failing.call_with_timeout::<i64>("add", (1, 2), Duration::from_secs(60)),
    )
    .await;
    assert!(
        matches!(&refused, Err(CallError::Closed(why)) if why.contains("reconnecting")),
        "{refused:?}"
    );
}

#[tokio::test]
async fn an_http_pool_bounds_the_requests_at_once() {
    let now = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(Mutex::new(0));
    let (now_in, most_in) = (Arc::clone(&now), Arc::clone(&most));
    let router = Router::new().method("hold", move |(): ()| {
        let (now, most) = (Arc::clone(&now_in), Arc::clone(&most_in));
        async move {
            let running = now.fetch_add(1, Ordering::SeqCst) + 1;
            {
                let mut most = most.lock().unwrap();
                *most = (*most).max(running);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            now.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        }
    });
    let serving = HttpServer::new(router).bind("127.0.0.1:0").await.unwrap();
    let client = Client::builder()
        .pool(2)
        .connect(serving.local_addr())
        .await
        .unwrap();
    let results = bounded(
        "the calls",
        join_all((0..6).map(|_| client.call::<()>("hold", ()))),
    )
    .await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let bounded_most = *most.lock().unwrap();
    assert!(
        (1..=2).contains(&bounded_most),
        "at most two at once: {bounded_most}"
    );

    // Unbounded, the same calls overlap: the check above can fail.
    *most.lock().unwrap() = 0;
    let client = Client::connect(serving.local_addr()).await.unwrap();
    bounded(
        "the calls",
        join_all((0..6).map(|_| client.call::<()>("hold", ()))),
    )
    .await;
    assert!(*most.lock().unwrap() > 2);
    serving.shutdown().await;
}

#[tokio::test]
async fn a_restarted_server_is_reached_again() {
    let router = Router::new().sync_method("add", |(a, b): (i64, i64)| Ok(a + b));
    let serving = Server::new(router.clone()).bind_tcp("127.0.0.1:0").await.unwrap();
    let addr = serving.local_addr().trim_start_matches("tcp://").to_owned();
    let client = Client::builder()
        .reconnect(quick(500))
        .connect(serving.local_addr())
        .await
        .unwrap();
    assert_eq!(client.call::<i64>("add", (1, 2)).await.unwrap(), 3);
    serving.shutdown().await;
    let peer = client.peer().unwrap();
    bounded("the connection to close", peer.closed()).await;
    // The same address, a new process as far as the client can tell.
    let again = Server::new(router).bind_tcp(&addr).await.unwrap();
    assert_eq!(
        bounded("a call", client.call::<i64>("add", (2, 3)))
            .await
            .unwrap(),
        5
    );
    again.shutdown().await;
}

#[tokio::test]
async fn a_connection_the_server_closed_for_idleness_is_made_again() {
    let router = Router::new().sync_method("add", |(a, b): (i64, i64)| Ok(a + b));
    let idle = jrpc::ConnectionConfig::default().idle_timeout(Some(Duration::from_millis(100)));
    let serving = Server::new(router)
        .connection(idle)
        .bind_tcp("127.0.0.1:0")
        .await
        .unwrap();
    let client = Client::builder()
        .reconnect(quick(50))
        .connect(serving.local_addr())
        .await
        .unwrap();
    assert_eq!(client.call::<i64>("add", (1, 2)).await.unwrap(), 3);
    let peer = client.peer().unwrap();
    bounded("the server to close the idle connection", peer.closed()).await;
    assert_eq!(
        bounded("a call", client.call::<i64>("add", (4, 5)))
            .await
            .unwrap(),
        9
    );
    serving.shutdown().await;
}
