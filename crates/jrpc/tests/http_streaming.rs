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
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use jrpc::client::{Client, HttpClient};

/// A reply body of any kind.
type AnyBody = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

/// An HTTP/1.1 server counting the connections it accepts, answering each
/// request (its body read first) with `reply` of its path.
async fn counting(reply: fn(&str) -> Response<AnyBody>) -> (String, Arc<AtomicUsize>) {
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
                    hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| async move {
                        let path = request.uri().path().to_owned();
                        let _ = request.into_body().collect().await;
                        Ok::<_, Infallible>(reply(&path))
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (url, accepted)
}

/// `/json` answers a JSON body, `/sse` an SSE stream whose end comes a
/// little after its one event (chunked, as a stream's is).
async fn counting_server() -> (String, Arc<AtomicUsize>) {
    counting(|path| {
        let sse = path == "/sse";
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
            StreamBody::new(frames).boxed_unsync()
        } else {
            Full::new(Bytes::from(reply)).boxed_unsync()
        };
        let content_type = if sse {
            "text/event-stream"
        } else {
            "application/json"
        };
        Response::builder()
            .header("content-type", content_type)
            .body(body)
            .unwrap()
    })
    .await
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

/// A server whose every reply is encoded as its path says:
/// - `/gzip`: two SSE events gzip-encoded, sent in three pieces a little
///   apart, with a `Content-Length` of the encoded bytes;
/// - `/flushed`: the first event flushed out of the compressor at once, the
///   second and the stream's end two seconds later;
/// - `/members`: the two events as two gzip members, one after the other;
/// - `/fields`: the gzip of `/gzip` named by `Content-Encoding: identity`
///   and a second field, `gzip`;
/// - `/trailers`: as `/gzip`, chunked, and then trailers;
/// - `/empty`: no bytes (chunked: the client cannot know before its end),
///   said to be gzip;
/// - `/br`: bytes said to be brotli; `/broken`: bytes said to be gzip that
///   are not.
async fn encoding_server() -> (String, Arc<AtomicUsize>) {
    counting(|path| {
        let soon = Duration::from_millis(5);
        let mut codings = vec!["gzip"];
        let pieces: Vec<(Duration, Vec<u8>)> = match path {
            "/gzip" | "/fields" | "/trailers" => {
                if path == "/fields" {
                    codings = vec!["identity", "gzip"];
                }
                let bytes = gzip(EVENTS.as_bytes());
                let third = bytes.len() / 3 + 1;
                bytes.chunks(third).map(|piece| (soon, piece.to_vec())).collect()
            }
            "/flushed" => {
                use std::io::Write;
                let (first, second) = EVENTS.split_at(EVENTS.len() / 2);
                let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                encoder.write_all(first.as_bytes()).unwrap();
                encoder.flush().unwrap();
                let flushed = std::mem::take(encoder.get_mut());
                encoder.write_all(second.as_bytes()).unwrap();
                vec![
                    (soon, flushed),
                    (Duration::from_secs(2), encoder.finish().unwrap()),
                ]
            }
            "/members" => {
                let (first, second) = EVENTS.split_at(EVENTS.len() / 2);
                vec![(soon, [gzip(first.as_bytes()), gzip(second.as_bytes())].concat())]
            }
            "/empty" => vec![],
            "/br" => {
                codings = vec!["br"];
                vec![(soon, b"not for this client".to_vec())]
            }
            _ => vec![(soon, b"not gzip at all".to_vec())],
        };
        let length: usize = pieces.iter().map(|(_, piece)| piece.len()).sum();
        let trailers = path == "/trailers";
        let chunked = pieces.is_empty() || trailers;
        let frames = futures_util::stream::iter(pieces)
            .then(|(pause, piece)| async move {
                tokio::time::sleep(pause).await;
                Ok::<_, Infallible>(Frame::data(Bytes::from(piece)))
            })
            .chain(futures_util::stream::iter(trailers.then(|| {
                let mut fields = HeaderMap::new();
                fields.insert("x-events", http::HeaderValue::from_static("2"));
                Ok(Frame::trailers(fields))
            })));
        let mut response = Response::builder().header("content-type", "text/event-stream");
        if !chunked {
            response = response.header("content-length", length);
        }
        if trailers {
            // hyper sends only the trailer fields a response announces.
            response = response.header("trailer", "x-events");
        }
        for coding in codings {
            response = response.header("content-encoding", coding);
        }
        response.body(StreamBody::new(frames).boxed_unsync()).unwrap()
    })
    .await
}

const EVENTS: &str = "data: {\"n\":1}\n\ndata: {\"n\":2}\n\n";

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// A body that comes gzip-encoded is decoded as it streams (what has come
/// is read before the rest comes), its response's headers describe the
/// decoded content, and its connection is kept; concatenated members and
/// an empty body decode too. One in an encoding the client does not
/// decode, or that does not decode, is an error of the body, not bytes
/// taken for its content.
#[tokio::test]
async fn an_encoded_body_is_decoded_as_it_streams() {
    let (url, accepted) = encoding_server().await;
    let gzipped = client(&format!("{url}/gzip"));
    for _ in 0..3 {
        let response = post(&gzipped).await;
        assert_eq!(response.headers().get("content-encoding"), None);
        assert_eq!(response.headers().get("content-length"), None);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(std::str::from_utf8(&body).unwrap(), EVENTS);
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one connection for the three");

    let mut flushed = post(&client(&format!("{url}/flushed"))).await.into_body();
    let (first, _) = EVENTS.split_at(EVENTS.len() / 2);
    let mut heard = Vec::new();
    while heard.len() < first.len() {
        let frame = tokio::time::timeout(Duration::from_millis(1500), flushed.frame())
            .await
            .expect("the first event before the rest of the stream")
            .unwrap()
            .unwrap();
        heard.extend_from_slice(&frame.into_data().unwrap());
    }
    assert_eq!(std::str::from_utf8(&heard).unwrap(), first);
    let rest = flushed.collect().await.unwrap().to_bytes();
    assert_eq!([&heard[..], &rest[..]].concat(), EVENTS.as_bytes());

    // Trailers come after the decoded data, and end the body: its
    // connection goes back to the pool.
    let (url, accepted) = encoding_server().await;
    let with_trailers = client(&format!("{url}/trailers"));
    for _ in 0..3 {
        let mut te = HeaderMap::new();
        te.insert("te", http::HeaderValue::from_static("trailers"));
        let body = Bytes::from_static(b"{}");
        let response = with_trailers
            .send_streaming(Method::POST, te, body)
            .await
            .unwrap();
        let collected = response.into_body().collect().await.unwrap();
        assert_eq!(collected.trailers().and_then(|t| t.get("x-events")).unwrap(), "2");
        assert_eq!(collected.to_bytes(), EVENTS.as_bytes());
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one connection for the three");

    for (path, decoded) in [("/members", EVENTS), ("/fields", EVENTS), ("/empty", "")] {
        let body = post(&client(&format!("{url}{path}"))).await.into_body();
        let body = body.collect().await.unwrap().to_bytes();
        assert_eq!(std::str::from_utf8(&body).unwrap(), decoded, "{path}");
    }

    for (path, says) in [("/br", "\"br\""), ("/broken", "does not decode")] {
        let response = post(&client(&format!("{url}{path}"))).await;
        let error = response
            .into_body()
            .collect()
            .await
            .expect_err("an error, not the bytes");
        assert!(error.to_string().contains(says), "{path}: {error}");
    }
}
