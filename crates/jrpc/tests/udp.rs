//! UDP end to end: one frame per datagram, answered to its sender, as the
//! specification's examples demand; the datagram limit; the client over
//! `udp://` with calls, notifications, batches and timeouts.

use std::time::Duration;

use futures_util::future::join_all;
use jrpc::client::Client;
use jrpc::server::{Server, Serving};
use jrpc::{CallError, RequestContext, Router};
use serde_json::{json, Value};
use tokio::net::UdpSocket;

/// Fails the test instead of hanging when something never finishes.
async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish"))
}

async fn demo_over_udp(server: Server) -> (Serving, UdpSocket) {
    let serving = server.bind_udp("127.0.0.1:0").await.unwrap();
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket
        .connect(serving.local_addr().trim_start_matches("udp://"))
        .await
        .unwrap();
    (serving, socket)
}

/// Sends one datagram and reads the next reply.
async fn exchange(socket: &UdpSocket, datagram: &str) -> Value {
    socket.send(datagram.as_bytes()).await.unwrap();
    next_reply(socket).await
}

async fn next_reply(socket: &UdpSocket) -> Value {
    let mut buffer = vec![0u8; 65_536];
    let n = bounded("a reply", socket.recv(&mut buffer)).await.unwrap();
    serde_json::from_slice(&buffer[..n]).unwrap()
}

#[tokio::test]
async fn each_datagram_is_a_frame_answered_to_its_sender() {
    let (serving, socket) = demo_over_udp(Server::new(jrpc::demo::router())).await;
    let cases = [
        (
            r#"{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}"#,
            json!({"jsonrpc":"2.0","result":19,"id":1}),
        ),
        (
            r#"{"jsonrpc":"2.0","method":"subtract","params":{"subtrahend":23,"minuend":42},"id":"a"}"#,
            json!({"jsonrpc":"2.0","result":19,"id":"a"}),
        ),
        (
            r#"{"jsonrpc":"2.0","method":"foobar","id":"1"}"#,
            json!({"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":"1"}),
        ),
        (
            r#"{"jsonrpc":"2.0","method":"foobar,"params":"bar","baz]"#,
            json!({"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}),
        ),
        (
            r#"[]"#,
            json!({"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"},"id":null}),
        ),
    ];
    for (request, expected) in cases {
        let mut reply = exchange(&socket, request).await;
        if let Some(error) = reply.get_mut("error") {
            error.as_object_mut().unwrap().remove("data");
        }
        assert_eq!(reply, expected, "{request}");
    }
    // A notification is not answered: the next datagram is the call's.
    socket
        .send(br#"{"jsonrpc":"2.0","method":"update","params":[1,2]}"#)
        .await
        .unwrap();
    let reply = exchange(&socket, r#"{"jsonrpc":"2.0","method":"get_data","id":9}"#).await;
    assert_eq!(reply["id"], 9);
    let batch = exchange(
        &socket,
        r#"[{"jsonrpc":"2.0","method":"sum","params":[1,2,4],"id":"1"},{"jsonrpc":"2.0","method":"notify_hello","params":[7]},{"foo":"boo"}]"#,
    )
    .await;
    assert_eq!(batch[0]["result"], 7);
    assert_eq!(batch[1]["error"]["code"], -32600);
    assert_eq!(batch.as_array().unwrap().len(), 2);
    serving.shutdown().await;
}

#[tokio::test]
async fn a_datagram_over_the_limit_gets_frame_too_large() {
    let router = jrpc::demo::router().sync_method("big", |(n,): (usize,)| Ok("x".repeat(n)));
    let (serving, socket) = demo_over_udp(Server::new(router).datagram_limit(200)).await;
    let padding = "x".repeat(300);
    let reply = exchange(
        &socket,
        &format!(r#"{{"jsonrpc":"2.0","method":"echo","params":["{padding}"],"id":1}}"#),
    )
    .await;
    assert_eq!(reply["error"]["code"], -32001);
    assert_eq!(reply["id"], Value::Null);
    // A reply over the limit is replaced by the same error.
    let reply = exchange(
        &socket,
        r#"{"jsonrpc":"2.0","method":"big","params":[500],"id":2}"#,
    )
    .await;
    assert_eq!(reply["error"]["code"], -32001, "{reply}");
    // Smaller ones are served as ever.
    assert_eq!(
        exchange(
            &socket,
            r#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":3}"#
        )
        .await["result"],
        3
    );
    serving.shutdown().await;
}

#[tokio::test]
async fn the_client_calls_notifies_and_batches_over_udp() {
    let router = jrpc::demo::router().method("whence", |(): (), cx: RequestContext| async move {
        let info = cx.connection_info().cloned().unwrap();
        Ok(json!([info.transport, info.peer_addr.is_some()]))
    });
    let serving = Server::new(router).bind_udp("127.0.0.1:0").await.unwrap();
    let client = Client::connect(serving.local_addr()).await.unwrap();
    assert_eq!(client.call::<i64>("subtract", (42, 23)).await.unwrap(), 19);
    assert_eq!(
        client.call::<Value>("whence", ()).await.unwrap(),
        json!(["udp", true])
    );
    client.notify("update", [1]).await.unwrap();
    let sums = bounded(
        "the calls",
        join_all((0..100).map(|n| client.call::<i64>("add", (n, 1)))),
    )
    .await;
    for (n, sum) in sums.into_iter().enumerate() {
        assert_eq!(sum.unwrap(), n as i64 + 1);
    }
    let mut batch = client.batch();
    let sum = batch.call::<i64>("sum", [1, 2, 3]);
    batch.notify("update", [2]);
    batch.send().await.unwrap();
    assert_eq!(sum.await.unwrap(), 6);
    serving.shutdown().await;
}

#[tokio::test]
async fn with_no_server_a_call_times_out() {
    // A port nobody serves: nothing is retransmitted, so the call times out.
    let port = UdpSocket::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = Client::connect(&format!("udp://127.0.0.1:{port}")).await.unwrap();
    let outcome = bounded(
        "the call",
        client.call_with_timeout::<i64>("add", (1, 2), Duration::from_millis(300)),
    )
    .await;
    assert!(matches!(outcome, Err(CallError::Timeout(_))), "{outcome:?}");
    // And the client still works once a server is there.
    let serving = Server::new(Router::new().sync_method("add", |(a, b): (i64, i64)| Ok(a + b)))
        .bind_udp(format!("127.0.0.1:{port}"))
        .await
        .unwrap();
    assert_eq!(
        bounded("a call", client.call::<i64>("add", (1, 2)))
            .await
            .unwrap(),
        3
    );
    serving.shutdown().await;
}

#[tokio::test]
async fn responses_are_never_answered() {
    // Else two servers told of each other by a forged sender would answer
    // each other's errors forever.
    let (serving, socket) = demo_over_udp(Server::new(jrpc::demo::router())).await;
    for response in [
        r#"{"jsonrpc":"2.0","result":1,"id":1}"#,
        r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}"#,
        r#"[{"jsonrpc":"2.0","result":1,"id":1},{"jsonrpc":"2.0","result":2,"id":2}]"#,
    ] {
        socket.send(response.as_bytes()).await.unwrap();
    }
    let reply = exchange(
        &socket,
        r#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":"after"}"#,
    )
    .await;
    assert_eq!(
        reply["id"], "after",
        "nothing came before the call's reply: {reply}"
    );
    serving.shutdown().await;
}

#[tokio::test]
async fn a_reply_may_be_only_a_few_times_its_request() {
    let router = Router::new().sync_method("big", |(n,): (usize,)| Ok("x".repeat(n)));
    let (serving, socket) = demo_over_udp(Server::new(router.clone())).await;
    // Up to 1 200 bytes is always allowed.
    let reply = exchange(
        &socket,
        r#"{"jsonrpc":"2.0","method":"big","params":[1000],"id":1}"#,
    )
    .await;
    assert_eq!(reply["result"].as_str().unwrap().len(), 1000);
    // 5 000 bytes for a request of 60 is refused, with the request's id.
    let reply = exchange(
        &socket,
        r#"{"jsonrpc":"2.0","method":"big","params":[5000],"id":2}"#,
    )
    .await;
    assert_eq!(
        (reply["error"]["code"].clone(), reply["id"].clone()),
        (json!(-32001), json!(2)),
        "{reply}"
    );
    serving.shutdown().await;
    let (serving, socket) = demo_over_udp(Server::new(router).udp_reply_factor(0)).await;
    let reply = exchange(
        &socket,
        r#"{"jsonrpc":"2.0","method":"big","params":[5000],"id":3}"#,
    )
    .await;
    assert_eq!(
        reply["result"].as_str().unwrap().len(),
        5000,
        "no bound but the datagram's"
    );
    serving.shutdown().await;
}
