#![cfg(feature = "http")]
//! `HttpClient::send_streaming` over real sockets: a response read to its
//! end, or released once what was awaited has come, leaves its connection
//! for the next request. Under load a connection not handed back in time
//! meant a new one for most requests (an accept and a handshake for the
//! server each time).

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, Method, Request, Response};
use http_body_util::{BodyExt, Either, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use jrpc::client::{Client, HttpClient};

/// An HTTP/1.1 server counting the connections it accepts: `/json`
/// answers a JSON body, `/sse` an SSE stream whose end comes a little
/// after its one event (chunked, as a stream's is).
async fn counting_server() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(|request: Request<hyper::body::Incoming>| async move {
                        let sse = request.uri().path() == "/sse";
                        let _ = request.into_body().collect().await;
                        let reply = r#"{"jsonrpc":"2.0","id":1,"result":3}"#;
                        let body = if sse {
                            let event = Frame::data(Bytes::from(format!("data: {reply}\n\n")));
                            let end = futures_util::stream::once(async {
                                tokio::time::sleep(Duration::from_millis(20)).await;
                                None
                            });
                            let frames = futures_util::stream::iter([Some(event)])
                                .chain(end)
                                .filter_map(|frame| async move { frame.map(Ok::<_, Infallible>) });
                            Either::Left(StreamBody::new(frames))
                        } else {
                            Either::Right(Full::new(Bytes::from(reply)))
                        };
                        let content_type = if sse {
                            "text/event-stream"
                        } else {
                            "application/json"
                        };
                        Ok::<_, Infallible>(
                            Response::builder()
                                .header("content-type", content_type)
                                .body(body)
                                .unwrap(),
                        )
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (url, accepted)
}

fn client(url: &str) -> HttpClient {
    Client::builder().http(url).unwrap()
}

async fn post(client: &HttpClient) -> http::Response<jrpc::client::ResponseBody> {
    let body = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"add","params":[1,2]}"#);
    tokio::time::timeout(
        Duration::from_secs(20),
        client.send_streaming(Method::POST, HeaderMap::new(), body),
    )
    .await
    .expect("an answer in time")
    .expect("an HTTP answer")
}

#[tokio::test]
async fn a_response_read_to_its_end_leaves_its_connection_for_the_next_request() {
    let (url, accepted) = counting_server().await;
    let client = client(&format!("{url}/json"));
    for _ in 0..20 {
        let response = post(&client).await;
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], br#"{"jsonrpc":"2.0","id":1,"result":3}"#);
        // The next request is sent at once, as a caller under load does.
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one connection for 20 requests in turn"
    );
}

#[tokio::test]
async fn a_released_stream_leaves_its_connection_once_it_ends() {
    let (url, accepted) = counting_server().await;
    let client = client(&format!("{url}/sse"));
    for _ in 0..10 {
        let mut body = post(&client).await.into_body();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert!(first.starts_with(b"data: "), "the event: {first:?}");
        // Done with the stream before its end: released, not dropped.
        body.release();
        // The end comes 20 ms later; then the connection is free again.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one connection for 10 streams in turn"
    );
}

#[tokio::test]
async fn a_stream_dropped_before_its_end_costs_its_connection() {
    let (url, accepted) = counting_server().await;
    let client = client(&format!("{url}/sse"));
    for _ in 0..3 {
        let mut body = post(&client).await.into_body();
        let _ = body.frame().await.unwrap().unwrap();
        drop(body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A connection whose response was not read to its end cannot carry
    // another request: each stream dropped early took its own.
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}
