//! Issue 33: a client that sends requests and never reads the replies
//! makes `jrpc serve` hold a bounded amount for it (the connection's
//! outgoing bytes, 4 MiB by default), over TCP and over WebSocket: the
//! server stops reading that connection instead. Measured as the server
//! process's resident memory, which before the bound grew by 78–242 MiB.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

mod common;

use common::Served;

/// What the server may grow by for one such client.
const BOUND_KIB: u64 = 16 * 1024;
/// Requests of 16 KiB each, at most 2 000 (31 MiB), for at most 20 s.
const REQUEST_TEXT: usize = 16 * 1024;
const MAX_REQUESTS: usize = 2_000;
const MAX_TIME: Duration = Duration::from_secs(20);

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn echo_request(id: usize) -> Vec<u8> {
    let text = "x".repeat(REQUEST_TEXT);
    format!(r#"{{"jsonrpc":"2.0","method":"echo","params":["{text}"],"id":{id}}}"#).into_bytes()
}

/// Writes requests framed by `frame` until the server stops taking them
/// (a write blocks past its timeout), the count runs out, or the time does.
/// Returns how many were written whole.
fn flood(stream: &mut TcpStream, frame: impl Fn(Vec<u8>) -> Vec<u8>) -> usize {
    stream
        .set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let start = Instant::now();
    let mut written = 0;
    while written < MAX_REQUESTS && start.elapsed() < MAX_TIME {
        match stream.write_all(&frame(echo_request(written))) {
            Ok(()) => written += 1,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => panic!("write failed: {e}"),
        }
    }
    written
}

/// Lets the server take in what it still can, then says how much it grew.
fn growth_kib(pid: u32, before: u64) -> u64 {
    std::thread::sleep(Duration::from_millis(500));
    rss_kib(pid).saturating_sub(before)
}

#[test]
fn a_tcp_client_that_never_reads_holds_a_bounded_amount() {
    let served = Served::start(&["--tcp", "127.0.0.1:0"]);
    let addr = served.targets[0].trim_start_matches("tcp://").to_owned();
    let before = rss_kib(served.pid());
    let mut stream = TcpStream::connect(&addr).unwrap();
    let written = flood(&mut stream, |mut request| {
        request.push(b'\n');
        request
    });
    let grew = growth_kib(served.pid(), before);
    eprintln!("TCP: {written} requests written, the server grew by {grew} KiB");
    assert!(
        grew < BOUND_KIB,
        "the server grew by {grew} KiB for a client that wrote {written} requests and read nothing"
    );
    // The server stopped reading long before the client ran out.
    assert!(written < MAX_REQUESTS, "all {written} requests were taken in");
    // Other clients are still served.
    let out = std::process::Command::new(common::JRPC)
        .args(["call", &served.targets[0], "add", "1", "2"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "3",
        "{}",
        common::text(&out)
    );
}

/// A client WebSocket text frame: FIN, opcode 1, masked with a zero key
/// (so the payload goes as it is).
fn ws_frame(payload: Vec<u8>) -> Vec<u8> {
    let mut frame = vec![0x81];
    match payload.len() {
        n if n < 126 => frame.push(0x80 | n as u8),
        n if n <= 0xFFFF => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(&[0, 0, 0, 0]);
    frame.extend_from_slice(&payload);
    frame
}

#[test]
fn a_websocket_client_that_never_reads_holds_a_bounded_amount() {
    let served = Served::start(&["--http", "127.0.0.1:0"]);
    let ws = served.targets.iter().find(|t| t.starts_with("ws://")).unwrap();
    let rest = ws.trim_start_matches("ws://");
    let (host, path) = rest.split_once('/').map_or((rest, ""), |(h, p)| (h, p));
    let before = rss_kib(served.pid());
    let mut stream = TcpStream::connect(host).unwrap();
    let upgrade = format!(
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    stream.write_all(upgrade.as_bytes()).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let written = flood(&mut stream, ws_frame);
    let grew = growth_kib(served.pid(), before);
    eprintln!("WebSocket: {written} requests written, the server grew by {grew} KiB");
    assert!(
        grew < BOUND_KIB,
        "the server grew by {grew} KiB for a WebSocket client that wrote {written} requests and read nothing"
    );
    assert!(written < MAX_REQUESTS, "all {written} requests were taken in");
}
