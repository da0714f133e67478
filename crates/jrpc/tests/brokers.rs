//! JSON-RPC through real message brokers: NATS (`nats-server`), MQTT 5
//! (`mosquitto`) and AMQP 0.9.1 (`rabbitmq-server`), each started by the
//! test on free ports. The same cases run over each: calls, notifications,
//! batches and errors; three servers sharing 3 000 calls, each answered
//! exactly once; a server stopped under load; duplicate replies; a broker
//! restart; what a caller sees when no server listens.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::brokers::{Broker, Kind};
use futures_util::stream::{self, StreamExt};
use jrpc::client::{Client, Reconnect, Retry};
use jrpc::message::codes;
use jrpc::server::{Server, Serving};
use jrpc::transport::amqp::{AmqpDialer, AmqpListener};
use jrpc::transport::mqtt::MqttListener;
use jrpc::transport::nats::NatsListener;
use jrpc::transport::{Dialer as _, Undelivered};
use jrpc::{CallError, Router};
use serde_json::{json, Value};

/// Fails the test instead of hanging when something never finishes.
async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(120), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish"))
}

/// Serves `router` on `address` (a subject, topic or queue) of `broker`,
/// in share group `group` (NATS, MQTT; AMQP queues have no groups).
async fn serve(broker: &Broker, kind: Kind, address: &str, group: &str, server: Server) -> Serving {
    let url = broker.url();
    match kind {
        Kind::Nats => server.serve_messages(
            NatsListener::connect_in_group(&url, address, group)
                .await
                .unwrap(),
        ),
        Kind::Mosquitto => server.serve_messages(
            MqttListener::connect_in_group(&url, address, group)
                .await
                .unwrap(),
        ),
        Kind::RabbitMq => server.serve_messages(AmqpListener::connect(&url, address).await.unwrap()),
    }
}

/// The target a client calls `address` of `broker` by.
fn target(broker: &Broker, kind: Kind, address: &str) -> String {
    match kind {
        Kind::Nats | Kind::Mosquitto => format!("{}/{address}", broker.url()),
        Kind::RabbitMq => format!("{}?queue={address}", broker.url()),
    }
}

async fn client(broker: &Broker, kind: Kind, address: &str, timeout: Duration) -> Client {
    Client::builder()
        .call_timeout(timeout)
        .connect(&target(broker, kind, address))
        .await
        .unwrap()
}

/// The demo methods, plus `ticks` counting the `tick` notifications seen
/// and `who` saying which server answered (and counting its calls).
fn counting_router(name: usize, calls: Arc<AtomicUsize>, ticks: Arc<AtomicUsize>) -> Router {
    jrpc::demo::router()
        .sync_notification("tick", move |_: Value| {
            ticks.fetch_add(1, Ordering::SeqCst);
        })
        .sync_method("who", move |_: Value| {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok(name)
        })
        .method("slow_who", move |_: Value| async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(name)
        })
}

/// `subtract 42 23`, called until it is answered (each failure on the way
/// logged, the whole bounded): the path back after a broker went away.
async fn answered_again(client: &Client, when: &str) -> i64 {
    bounded(&format!("a call {when}"), async {
        loop {
            match client
                .call_with_timeout::<i64>("subtract", [42, 23], Duration::from_secs(5))
                .await
            {
                Ok(difference) => break difference,
                Err(e) => {
                    eprintln!("{when}: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    })
    .await
}

fn counters() -> (Arc<AtomicUsize>, Arc<AtomicUsize>) {
    (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)))
}

async fn calls_notifications_batches_and_errors(kind: Kind) {
    let broker = Broker::start(kind);
    let (calls, ticks) = counters();
    let router = counting_router(0, calls, Arc::clone(&ticks));
    let serving = serve(&broker, kind, "demo", "jrpc", Server::new(router)).await;
    let client = client(&broker, kind, "demo", Duration::from_secs(20)).await;

    let difference: i64 = client.call("subtract", [42, 23]).await.unwrap();
    assert_eq!(difference, 19);
    let by_name: i64 = client
        .call("subtract", json!({"minuend": 42, "subtrahend": 23}))
        .await
        .unwrap();
    assert_eq!(by_name, 19);
    let error = client
        .call::<Value>("no_such_method", json!([]))
        .await
        .unwrap_err();
    assert_eq!(
        error.rpc().map(|e| e.code()),
        Some(codes::METHOD_NOT_FOUND),
        "{error}"
    );
    let error = client.call::<Value>("subtract", json!(["x"])).await.unwrap_err();
    assert_eq!(
        error.rpc().map(|e| e.code()),
        Some(codes::INVALID_PARAMS),
        "{error}"
    );

    for _ in 0..3 {
        client.notify("tick", json!([])).await.unwrap();
    }
    bounded("three notifications", async {
        while ticks.load(Ordering::SeqCst) < 3 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;

    let mut batch = client.batch();
    let sum = batch.call::<i64>("sum", [1, 2, 3]);
    batch.notify("tick", json!([]));
    let missing = batch.call::<Value>("no_such_method", json!({}));
    let echo = batch.call::<Value>("echo", json!({"value": "hi"}));
    batch.send().await.unwrap();
    assert_eq!(sum.await.unwrap(), 6);
    assert_eq!(
        missing.await.unwrap_err().rpc().map(|e| e.code()),
        Some(codes::METHOD_NOT_FOUND)
    );
    assert_eq!(echo.await.unwrap(), json!("hi"));

    // Handlers see where the call came from.
    let many: Vec<i64> = stream::iter(0..200)
        .map(|i| {
            let client = &client;
            async move { client.call::<i64>("subtract", [i, 1]).await.unwrap() }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    assert_eq!(many.iter().sum::<i64>(), (0..200).map(|i| i - 1).sum::<i64>());
    client.close().await;
    serving.shutdown().await;
}

async fn three_servers_share_3000_calls(kind: Kind) {
    let broker = Broker::start(kind);
    let mut servings = Vec::new();
    let mut served = Vec::new();
    for name in 0..3 {
        let (calls, ticks) = counters();
        served.push(Arc::clone(&calls));
        let router = counting_router(name, calls, ticks);
        servings.push(serve(&broker, kind, "shared", "jrpc", Server::new(router)).await);
    }
    let client = client(&broker, kind, "shared", Duration::from_secs(60)).await;
    let answers: Vec<usize> = bounded(
        "3 000 calls",
        stream::iter(0..3000)
            .map(|_| {
                let client = &client;
                async move { client.call::<usize>("who", json!([])).await.unwrap() }
            })
            .buffer_unordered(64)
            .collect(),
    )
    .await;
    let mut by_server = HashMap::new();
    for name in answers {
        *by_server.entry(name).or_insert(0usize) += 1;
    }
    let runs: Vec<usize> = served.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    // Every call answered, and run exactly once: the servers' own counts
    // add up to the calls made, and match the answers each gave.
    assert_eq!(runs.iter().sum::<usize>(), 3000, "runs per server: {runs:?}");
    for (name, runs) in runs.iter().enumerate() {
        assert!(*runs > 0, "server {name} took no call: {by_server:?}");
        assert_eq!(by_server.get(&name), Some(runs));
    }
    client.close().await;
    for serving in servings {
        serving.shutdown().await;
    }
}

/// A server stopped mid-load without finishing its calls (its in-flight
/// work dropped, its broker connection closed).
async fn a_server_stopped_under_load(kind: Kind) {
    let broker = Broker::start(kind);
    let mut servings = Vec::new();
    for name in 0..3 {
        let (calls, ticks) = counters();
        let server = Server::new(counting_router(name, calls, ticks)).shutdown_grace(Duration::ZERO);
        servings.push(serve(&broker, kind, "killed", "jrpc", server).await);
    }
    let client = client(&broker, kind, "killed", Duration::from_secs(5)).await;
    let answered = Arc::new(AtomicUsize::new(0));
    let load = {
        let (client, answered) = (&client, Arc::clone(&answered));
        stream::iter(0..600)
            .map(move |_| {
                let answered = Arc::clone(&answered);
                async move {
                    let outcome = client.call::<usize>("slow_who", json!([])).await;
                    if outcome.is_ok() {
                        answered.fetch_add(1, Ordering::SeqCst);
                    }
                    outcome
                }
            })
            .buffer_unordered(64)
            .collect::<Vec<_>>()
    };
    let stop = async {
        while answered.load(Ordering::SeqCst) < 100 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        servings.remove(0).shutdown().await;
    };
    let (outcomes, ()) = bounded("the load", async { tokio::join!(load, stop) }).await;
    let ok: Vec<usize> = outcomes.iter().filter_map(|o| o.as_ref().ok().copied()).collect();
    let failed: Vec<&CallError> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert!(ok.contains(&1) && ok.contains(&2), "the others served");
    match kind {
        // Unacknowledged calls go to another server: none is lost.
        Kind::RabbitMq => assert!(failed.is_empty(), "{} lost: {:?}", failed.len(), failed.first()),
        // At most once: the stopped server's calls in flight time out.
        Kind::Nats | Kind::Mosquitto => {
            for error in &failed {
                assert!(matches!(error, CallError::Timeout(_)), "{error}");
            }
            assert!(ok.len() >= 300, "only {} answered", ok.len());
        }
    }
    for serving in servings {
        serving.shutdown().await;
    }
}

/// One of two servers shut down gracefully (a rolling restart) answers
/// what it took before it goes, and the broker gives the rest to the
/// other: no call in flight is lost. (AMQP with one server: what it did
/// not take stays queued for the next.)
async fn a_graceful_shutdown_answers_calls_in_flight(kind: Kind) {
    let broker = Broker::start(kind);
    let mut servings = Vec::new();
    for name in 0..2 {
        let (calls, ticks) = counters();
        let server = Server::new(counting_router(name, calls, ticks)).shutdown_grace(Duration::from_secs(20));
        servings.push(serve(&broker, kind, "graceful", "jrpc", server).await);
    }
    let stopped = servings.remove(0);
    let client = client(&broker, kind, "graceful", Duration::from_secs(30)).await;
    let started = Arc::new(AtomicUsize::new(0));
    let calls = {
        let (client, started) = (&client, Arc::clone(&started));
        stream::iter(0..200)
            .map(move |_| {
                started.fetch_add(1, Ordering::SeqCst);
                client.call::<usize>("slow_who", json!([]))
            })
            .buffer_unordered(64)
            .collect::<Vec<_>>()
    };
    let stop = async {
        while started.load(Ordering::SeqCst) < 64 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Let the calls reach the servers, then stop one mid-way.
        tokio::time::sleep(Duration::from_millis(30)).await;
        stopped.shutdown().await;
    };
    let (outcomes, ()) = bounded("calls over a shutdown", async { tokio::join!(calls, stop) }).await;
    let failed: Vec<String> = outcomes
        .iter()
        .filter_map(|o| o.as_ref().err().map(|e| e.to_string()))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of 200 failed: {:?}",
        failed.len(),
        failed.first()
    );
    let by_stopped = outcomes.iter().filter(|o| matches!(o, Ok(0))).count();
    assert!(by_stopped > 0, "the stopped server answered none");
    for serving in servings {
        serving.shutdown().await;
    }
}

/// Two groups on one subject or topic each get every call: the caller
/// takes the first reply and ignores the second.
async fn duplicate_replies_are_ignored(kind: Kind) {
    let broker = Broker::start(kind);
    let (calls_a, ticks_a) = counters();
    let (calls_b, ticks_b) = counters();
    let a = serve(
        &broker,
        kind,
        "twice",
        "a",
        Server::new(counting_router(1, Arc::clone(&calls_a), ticks_a)),
    )
    .await;
    let b = serve(
        &broker,
        kind,
        "twice",
        "b",
        Server::new(counting_router(2, Arc::clone(&calls_b), ticks_b)),
    )
    .await;
    let client = client(&broker, kind, "twice", Duration::from_secs(20)).await;
    for _ in 0..50 {
        let name: usize = client.call("who", json!([])).await.unwrap();
        assert!(name == 1 || name == 2);
    }
    // Both ran every call, and the client is still fine.
    bounded("both groups", async {
        while calls_a.load(Ordering::SeqCst) < 50 || calls_b.load(Ordering::SeqCst) < 50 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let difference: i64 = client.call("subtract", [42, 23]).await.unwrap();
    assert_eq!(difference, 19);
    a.shutdown().await;
    b.shutdown().await;
}

/// The broker restarts: servers and clients reconnect, calls go on.
async fn a_broker_restart(kind: Kind) {
    let mut broker = Broker::start(kind);
    let serving = serve(
        &broker,
        kind,
        "restart",
        "jrpc",
        Server::new(jrpc::demo::router()),
    )
    .await;
    let client = Client::builder()
        .call_timeout(Duration::from_secs(30))
        .reconnect(Reconnect::new(Retry::exponential(
            u32::MAX,
            Duration::from_millis(100),
            Duration::from_secs(1),
        )))
        .connect(&target(&broker, kind, "restart"))
        .await
        .unwrap();
    let before: i64 = client.call("subtract", [42, 23]).await.unwrap();
    assert_eq!(before, 19);
    broker.restart();
    // The first call after the restart may be lost with the old connection
    // (at most once); within a few attempts the path is back.
    assert_eq!(answered_again(&client, "after the restart").await, 19);
    serving.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_calls_notifications_batches_and_errors() {
    calls_notifications_batches_and_errors(Kind::Nats).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_three_servers_share_3000_calls() {
    three_servers_share_3000_calls(Kind::Nats).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_a_server_stopped_under_load() {
    a_server_stopped_under_load(Kind::Nats).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_duplicate_replies_are_ignored() {
    duplicate_replies_are_ignored(Kind::Nats).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_a_graceful_shutdown_answers_calls_in_flight() {
    a_graceful_shutdown_answers_calls_in_flight(Kind::Nats).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_a_broker_restart() {
    a_broker_restart(Kind::Nats).await;
}

/// A cluster's seeds, the first of them dead: server and client connect
/// to the one that answers, whichever way the seeds are written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_seeds_any_live_one_serves() {
    let broker = Broker::start(Kind::Nats);
    let dead = {
        let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        unused.local_addr().unwrap().port()
    };
    let live = broker.url();
    let seeds = format!("nats://127.0.0.1:{dead},{live}");
    let serving = Server::new(jrpc::demo::router()).serve_messages(
        bounded("a listener on two seeds", NatsListener::connect(&seeds, "seeded"))
            .await
            .unwrap(),
    );
    let bare = live.trim_start_matches("nats://");
    for target in [
        format!("nats://127.0.0.1:{dead},{bare}/seeded"),
        format!("{seeds}/seeded"),
    ] {
        let client = bounded("a client on two seeds", Client::builder().connect(&target))
            .await
            .unwrap();
        let answer: Value = bounded("a call", client.call("subtract", [42, 23]))
            .await
            .unwrap();
        assert_eq!(answer, json!(19), "{target}");
    }
    serving.shutdown().await;
}

/// A call out when the client's connection to its node drops cannot get
/// its reply any more: it fails at once as a lost connection (the call may
/// have run), not after its timeout; with the node back, calls go through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_calls_out_when_the_node_goes_fail_at_once() {
    let mut broker = Broker::start(Kind::Nats);
    let serving = serve(
        &broker,
        Kind::Nats,
        "lost",
        "jrpc",
        Server::new(jrpc::demo::router()),
    )
    .await;
    let client = client(&broker, Kind::Nats, "lost", Duration::from_secs(300)).await;
    let out = {
        let client = client.clone();
        tokio::spawn(async move { client.call::<Value>("sleep", json!({"ms": 60_000})).await })
    };
    // The call is on the server before the node goes.
    let answer: i64 = bounded("a call", client.call("subtract", [42, 23]))
        .await
        .unwrap();
    assert_eq!(answer, 19);
    broker.kill();
    let error = bounded("the call out when the node went", out)
        .await
        .unwrap()
        .unwrap_err();
    assert!(matches!(error, CallError::Closed(_)), "{error:?}");
    assert!(error.to_string().contains("the call may have run"), "{error}");
    broker.restart();
    assert_eq!(answered_again(&client, "after the node came back").await, 19);
    serving.shutdown().await;
}

/// NATS says "no responders" at once when nothing subscribes to a subject:
/// the call fails as not delivered (a transport error the peer gives each
/// waiting call), well before its timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_no_responders_fail_at_once() {
    let broker = Broker::start(Kind::Nats);
    let client = client(&broker, Kind::Nats, "nobody", Duration::from_secs(60)).await;
    let started = std::time::Instant::now();
    let error = bounded("a call nobody serves", client.call::<Value>("subtract", [1, 2]))
        .await
        .unwrap_err();
    let undelivered = error.transport_error::<Undelivered>();
    assert!(
        undelivered.is_some_and(|u| u.reason.contains("no responders")),
        "{error}"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    // A batch: every call in it.
    let mut batch = client.batch();
    let a = batch.call::<Value>("sum", [1]);
    let b = batch.call::<Value>("sum", [2]);
    batch.send().await.unwrap();
    for call in [a, b] {
        let error = call.await.unwrap_err();
        assert!(error.transport_error::<Undelivered>().is_some(), "{error}");
    }
}

/// Frames over the NATS server's payload limit (1 MiB by default) fail
/// their own call with `-32001`, both ways, and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_frames_over_the_payload_limit_fail_their_call() {
    let broker = Broker::start(Kind::Nats);
    let router = jrpc::demo::router().sync_method("big", |_: Value| Ok("x".repeat(2 << 20)));
    let serving = serve(&broker, Kind::Nats, "big", "jrpc", Server::new(router)).await;
    let client = client(&broker, Kind::Nats, "big", Duration::from_secs(20)).await;
    let error = client
        .call::<Value>("echo", json!({"value": "y".repeat(2 << 20)}))
        .await
        .unwrap_err();
    assert_eq!(
        error.rpc().map(|e| e.code()),
        Some(codes::FRAME_TOO_LARGE),
        "{error}"
    );
    let error = client.call::<Value>("big", json!([])).await.unwrap_err();
    assert_eq!(
        error.rpc().map(|e| e.code()),
        Some(codes::FRAME_TOO_LARGE),
        "{error}"
    );
    let difference: i64 = client.call("subtract", [42, 23]).await.unwrap();
    assert_eq!(difference, 19);
    serving.shutdown().await;
}

/// A malformed message with a reply subject gets its error reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_malformed_messages_get_their_error() {
    let broker = Broker::start(Kind::Nats);
    let serving = serve(
        &broker,
        Kind::Nats,
        "raw",
        "jrpc",
        Server::new(jrpc::demo::router()),
    )
    .await;
    let raw = async_nats::connect(broker.url()).await.unwrap();
    let cases = [
        (
            &b"{not json"[..],
            json!({"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}),
        ),
        (
            b"[]",
            json!({"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null}),
        ),
        (
            br#"{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":"x"}"#,
            json!({"jsonrpc":"2.0","result":19,"id":"x"}),
        ),
    ];
    for (frame, expected) in cases {
        let reply = raw.request("raw", frame.to_vec().into()).await.unwrap();
        let mut reply: Value = serde_json::from_slice(&reply.payload).unwrap();
        if let Some(error) = reply.get_mut("error").and_then(Value::as_object_mut) {
            error.remove("data");
        }
        assert_eq!(reply, expected);
    }
    serving.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mqtt_calls_notifications_batches_and_errors() {
    calls_notifications_batches_and_errors(Kind::Mosquitto).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mqtt_three_servers_share_3000_calls() {
    three_servers_share_3000_calls(Kind::Mosquitto).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mqtt_a_server_stopped_under_load() {
    a_server_stopped_under_load(Kind::Mosquitto).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mqtt_duplicate_replies_are_ignored() {
    duplicate_replies_are_ignored(Kind::Mosquitto).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mqtt_a_graceful_shutdown_answers_calls_in_flight() {
    a_graceful_shutdown_answers_calls_in_flight(Kind::Mosquitto).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mqtt_a_broker_restart() {
    a_broker_restart(Kind::Mosquitto).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_calls_notifications_batches_and_errors() {
    calls_notifications_batches_and_errors(Kind::RabbitMq).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_three_servers_share_3000_calls() {
    three_servers_share_3000_calls(Kind::RabbitMq).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_a_server_stopped_under_load() {
    a_server_stopped_under_load(Kind::RabbitMq).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_a_graceful_shutdown_answers_calls_in_flight() {
    a_graceful_shutdown_answers_calls_in_flight(Kind::RabbitMq).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_a_broker_restart() {
    a_broker_restart(Kind::RabbitMq).await;
}

/// Dialing a queue nobody declared fails with a clear error instead of
/// letting every call vanish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_a_missing_queue_is_an_error() {
    let broker = Broker::start(Kind::RabbitMq);
    let error = Client::connect(&target(&broker, Kind::RabbitMq, "nobody"))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("does not exist"), "{error}");
}

/// Several brokers, the first of them dead: the listener and the client
/// each take the one that answers, and a list of dead ones says what each
/// said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_brokers_are_tried_in_turn() {
    let broker = Broker::start(Kind::RabbitMq);
    let dead = format!("amqp://127.0.0.1:{}/%2f", common::brokers::free_port());
    let live = broker.url();
    let both = format!("{dead},{}", live.trim_start_matches("amqp://"));
    let serving = Server::new(jrpc::demo::router()).serve_messages(
        bounded(
            "a listener on two brokers",
            AmqpListener::connect(&both, "listed"),
        )
        .await
        .unwrap(),
    );
    let client = bounded(
        "a client on two brokers",
        Client::connect(&format!("{both}?queue=listed")),
    )
    .await
    .unwrap();
    let answer: i64 = bounded("a call", client.call("subtract", [42, 23]))
        .await
        .unwrap();
    assert_eq!(answer, 19);
    let other_dead = format!("amqp://127.0.0.1:{}/%2f", common::brokers::free_port());
    let error = Client::connect(&format!("{dead},{other_dead}?queue=listed"))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("no broker answered"), "{error}");

    // A broker that failed is tried last from then on: of a dialer's
    // connections only the first knocks at the broken one (here one that
    // hangs up at once, counting who knocked).
    let broken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let broken_addr = broken.local_addr().unwrap();
    let knocks = Arc::new(AtomicUsize::new(0));
    let counted = knocks.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = broken.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            drop(socket);
        }
    });
    let listed = format!("amqp://{broken_addr}/%2f,{}", live.trim_start_matches("amqp://"));
    let dialer = AmqpDialer::new(listed, "listed");
    for _ in 0..3 {
        let connection = bounded("a dial past a broken broker", dialer.dial()).await;
        drop(connection.unwrap());
    }
    assert_eq!(
        knocks.load(Ordering::SeqCst),
        1,
        "the broken broker is tried once"
    );
    serving.shutdown().await;
}
