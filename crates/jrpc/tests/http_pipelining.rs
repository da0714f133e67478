#![cfg(feature = "http")]
//! HTTP/1.1 pipelining against `HttpServer`: requests sent back to back on
//! one keep-alive connection, among them refusals answered before their
//! body arrived (an odd content type, a wrong path or method, a body over
//! the limit), malformed JSON, chunked and gzip bodies, writes split at
//! any byte. A server may end a keep-alive connection, but never silently:
//! every request it read is answered, and the last response before it
//! closes says `Connection: close` (RFC 9112 §9.6).

use std::time::Duration;

use jrpc::server::http::HttpServer;
use jrpc::Router;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// One response read off a pipelined connection.
#[derive(Debug)]
struct Response {
    status: u16,
    close: bool,
    body: Vec<u8>,
}

/// The next response, `None` when the connection ended first.
async fn read_response(reader: &mut BufReader<tokio::net::tcp::OwnedReadHalf>) -> Option<Response> {
    let mut line = String::new();
    if reader.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    let status: u16 = line.split_whitespace().nth(1)?.parse().ok()?;
    let (mut length, mut chunked, mut close) = (0usize, false, false);
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).await.ok()? == 0 {
            return None;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        let (name, value) = (
            name.trim().to_ascii_lowercase(),
            value.trim().to_ascii_lowercase(),
        );
        match name.as_str() {
            "content-length" => length = value.parse().ok()?,
            "transfer-encoding" => chunked = value.contains("chunked"),
            "connection" => close = value.split(',').any(|v| v.trim() == "close"),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).await.ok()?;
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).await.ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        body.resize(length, 0);
        reader.read_exact(&mut body).await.ok()?;
    }
    Some(Response { status, close, body })
}

async fn server() -> (jrpc::server::Serving, String) {
    let router = Router::new()
        .method("add", |(a, b): (i64, i64)| async move { Ok(a + b) })
        .max_frame_len(4096);
    let serving = HttpServer::new(router).bind("127.0.0.1:0").await.unwrap();
    let addr = serving.local_addr().trim_start_matches("http://").to_owned();
    (serving, addr)
}

/// A valid call: its bytes, with a `Content-Length` body.
fn probe(id: u64) -> Vec<u8> {
    let body = format!(r#"{{"jsonrpc":"2.0","method":"add","params":[{id},1],"id":{id}}}"#);
    format!(
        "POST / HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Requests the server refuses before reading their body: their head, and
/// the body that follows (sent after a pause, so that it is not there yet
/// when the refusal is written).
fn refusals() -> Vec<(&'static str, String, Vec<u8>)> {
    let body = br#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":9}"#.to_vec();
    let head = |line: &str, kind: &str, length: usize| {
        format!("{line}\r\nHost: t\r\nContent-Type: {kind}\r\nContent-Length: {length}\r\n\r\n")
    };
    vec![
        (
            "an odd content type",
            head("POST / HTTP/1.1", "text/plain", body.len()),
            body.clone(),
        ),
        (
            "a wrong path",
            head("POST /nope HTTP/1.1", "application/json", body.len()),
            body.clone(),
        ),
        (
            "a wrong method",
            head("PUT / HTTP/1.1", "application/json", body.len()),
            body.clone(),
        ),
        (
            "a body over the limit",
            head("POST / HTTP/1.1", "application/json", 10_000),
            vec![b' '; 10_000],
        ),
        (
            "an odd content type, chunked",
            "POST / HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
                .into(),
            {
                let mut chunked = format!("{:x}\r\n", body.len()).into_bytes();
                chunked.extend_from_slice(&body);
                chunked.extend_from_slice(b"\r\n0\r\n\r\n");
                chunked
            },
        ),
    ]
}

/// A refusal answered before its body came in, then a valid call on the
/// same connection: the call is answered, or the refusal said the
/// connection closes.
#[tokio::test]
async fn a_refusal_before_its_body_never_closes_the_connection_silently() {
    let (_serving, addr) = server().await;
    for (what, head, body) in refusals() {
        let stream = TcpStream::connect(&addr).await.unwrap();
        let (read, mut write) = stream.into_split();
        let mut reader = BufReader::new(read);
        write.write_all(head.as_bytes()).await.unwrap();
        write.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut rest = body.clone();
        rest.extend_from_slice(&probe(7));
        // The server may have closed already (after a refusal that said
        // so): then the writes fail, which is its right.
        let _ = write.write_all(&rest).await;
        let refused = tokio::time::timeout(Duration::from_secs(10), read_response(&mut reader))
            .await
            .unwrap_or_else(|_| panic!("{what}: no answer"))
            .unwrap_or_else(|| panic!("{what}: closed without an answer"));
        assert!(refused.status >= 400, "{what}: {refused:?}");
        let next = tokio::time::timeout(Duration::from_secs(10), read_response(&mut reader))
            .await
            .unwrap_or_else(|_| panic!("{what}: the probe got no answer"));
        match next {
            Some(answer) => {
                assert!(!refused.close, "{what}: said close, then answered: {answer:?}");
                assert_eq!(answer.status, 200, "{what}: {answer:?}");
                let reply: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
                assert_eq!(reply["result"], 8, "{what}: {reply}");
            }
            None => assert!(
                refused.close,
                "{what}: the connection closed after {refused:?} without Connection: close"
            ),
        }
    }
}

/// A small deterministic generator (the sequence is the same every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One mutated request of the soak: valid, malformed JSON, an odd content
/// type, chunked, gzip (valid or not), a wrong path, over the limit.
fn mutated(rng: &mut Lcg, id: u64) -> Vec<u8> {
    let valid = format!(r#"{{"jsonrpc":"2.0","method":"add","params":[{id},1],"id":{id}}}"#);
    // Mostly requests a connection goes on after; now and then one that
    // ends it (a body over the limit, a gzip body that is not gzip).
    let pick = if rng.below(100) == 0 {
        98 + rng.below(2)
    } else {
        rng.below(98)
    };
    let (kind, mut extra, body): (&str, String, Vec<u8>) = match pick {
        0..=44 => ("application/json", String::new(), valid.into_bytes()),
        45..=59 => (
            "application/json",
            String::new(),
            b"{\"jsonrpc\":\"2.0\",\"method\":".to_vec(),
        ),
        60..=72 => ("text/plain", String::new(), valid.into_bytes()),
        73..=79 => ("application/json; charset=utf-8", String::new(), b"[]".to_vec()),
        80..=87 => (
            "application/x-www-form-urlencoded",
            String::new(),
            b"a=1&b=2".to_vec(),
        ),
        88..=97 => ("application/json", String::new(), b"[1,2,3]".to_vec()),
        98 => ("application/json", String::new(), vec![b' '; 5000]),
        _ => (
            "application/json",
            "Content-Encoding: gzip\r\n".into(),
            b"\x1f\x8b not gzip".to_vec(),
        ),
    };
    let path = if rng.below(10) == 0 { "/elsewhere" } else { "/" };
    let chunked = rng.below(3) == 0;
    let mut out = Vec::new();
    if chunked {
        extra.push_str("Transfer-Encoding: chunked\r\n");
        out.extend_from_slice(
            format!("POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: {kind}\r\n{extra}\r\n").as_bytes(),
        );
        let mut rest = &body[..];
        while !rest.is_empty() {
            let take = (rng.below(64) as usize + 1).min(rest.len());
            out.extend_from_slice(format!("{take:x}\r\n").as_bytes());
            out.extend_from_slice(&rest[..take]);
            out.extend_from_slice(b"\r\n");
            rest = &rest[take..];
        }
        out.extend_from_slice(b"0\r\n\r\n");
    } else {
        out.extend_from_slice(
            format!(
                "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: {kind}\r\n{extra}Content-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        );
        out.extend_from_slice(&body);
    }
    out
}

/// Windows of 50 mutated requests and a probe, written back to back in
/// pieces cut at random bytes (some after a pause), on keep-alive
/// connections: every request before a close is answered, and a close is
/// always announced. `JRPC_PIPELINING_WINDOWS` sets how many windows
/// (default 120: a few seconds; the fault it guards against showed up
/// within 10^5 requests).
#[tokio::test]
async fn pipelined_windows_of_mutated_requests_are_all_answered_or_the_close_announced() {
    let (_serving, addr) = server().await;
    let windows: u64 = std::env::var("JRPC_PIPELINING_WINDOWS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(120);
    let mut rng = Lcg(0x5eed);
    let (mut answered, mut closes) = (0u64, 0u64);
    let mut connection: Option<(
        BufReader<tokio::net::tcp::OwnedReadHalf>,
        tokio::net::tcp::OwnedWriteHalf,
    )> = None;
    for window in 0..windows {
        let (reader, writer) = match connection.as_mut() {
            Some(pair) => pair,
            None => {
                let (read, write) = TcpStream::connect(&addr).await.unwrap().into_split();
                connection.insert((BufReader::new(read), write))
            }
        };
        let mut bytes = Vec::new();
        let mut requests = Vec::new();
        for n in 0..50 {
            let request = mutated(&mut rng, window * 100 + n);
            bytes.extend_from_slice(&request);
            requests.push(request);
        }
        let probe_id = window * 100 + 99;
        bytes.extend_from_slice(&probe(probe_id));
        // Written in pieces cut anywhere, some after a pause, while the
        // responses are read.
        let mut pieces = Vec::new();
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let take = (rng.below(700) as usize + 1).min(rest.len());
            pieces.push((rest[..take].to_vec(), rng.below(8) == 0));
            rest = &rest[take..];
        }
        let writing = async {
            for (piece, pause) in pieces {
                if writer.write_all(&piece).await.is_err() {
                    return;
                }
                if pause {
                    let _ = writer.flush().await;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
        };
        let reading = async {
            let mut seen = Vec::new();
            for _ in 0..51 {
                match read_response(reader).await {
                    Some(response) => {
                        let close = response.close;
                        seen.push(response);
                        if close {
                            break;
                        }
                    }
                    None => break,
                }
            }
            seen
        };
        let (_, seen) =
            tokio::time::timeout(Duration::from_secs(20), async { tokio::join!(writing, reading) })
                .await
                .unwrap_or_else(|_| panic!("window {window}: stalled"));
        answered += seen.len() as u64;
        let announced = seen.last().is_some_and(|r| r.close);
        if seen.len() < 51 {
            assert!(
                announced,
                "window {window}: the connection closed after {} of 51 responses, the last without Connection: close: {:?}; the next request: {:?}",
                seen.len(),
                seen.last().map(|r| (r.status, String::from_utf8_lossy(&r.body).into_owned())),
                requests[seen.len().saturating_sub(1)..(seen.len() + 1).min(requests.len())].iter().map(|r| String::from_utf8_lossy(r).into_owned()).collect::<Vec<_>>()
            );
            closes += 1;
            connection = None;
            continue;
        }
        let last = seen.last().unwrap_or_else(|| unreachable!("51 responses"));
        let reply: serde_json::Value = serde_json::from_slice(&last.body).unwrap();
        assert_eq!(
            reply["id"], probe_id,
            "window {window}: the probe's answer comes last, in order"
        );
        assert_eq!(reply["result"], probe_id + 1, "window {window}");
        if announced {
            closes += 1;
            connection = None;
        }
    }
    // Most windows are answered whole (about two in five meet a request
    // that ends its connection).
    assert!(
        answered > windows * 35,
        "{answered} answered in {windows} windows ({closes} announced closes)"
    );
}
