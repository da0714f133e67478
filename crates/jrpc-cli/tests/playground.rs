//! `jrpc serve` offers the playground on its HTTP listeners: on by default,
//! off with `--no-playground`, and off when a token is required (a browser
//! cannot send one on a WebSocket). The page itself is tested in a real
//! browser by `tests/playground/run.sh`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

const JRPC: &str = env!("CARGO_BIN_EXE_jrpc");

/// A `jrpc serve` on a free port; stopped on drop.
struct Served {
    child: Child,
    addr: String,
    stderr: Vec<String>,
}

impl Served {
    fn start(args: &[&str]) -> Served {
        let mut child = Command::new(JRPC)
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn jrpc serve");
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut seen = Vec::new();
        let mut addr = None;
        // The try-it lines follow the listening line, the playground's
        // last when it is on: after `jrpc call`, take what comes at once.
        let mut wait = Duration::from_secs(10);
        while let Ok(line) = rx.recv_timeout(wait) {
            if let Some(rest) = line.strip_prefix("jrpc: listening on http://") {
                addr = rest.split_whitespace().next().map(str::to_owned);
            }
            if line.contains("jrpc call http://") {
                wait = Duration::from_millis(500);
            }
            seen.push(line);
        }
        let addr = addr.unwrap_or_else(|| panic!("jrpc serve did not start: {seen:?}"));
        Served {
            child,
            addr,
            stderr: seen,
        }
    }

    /// `GET path`: (status, whole response).
    fn get(&self, path: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, response)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn jrpc_serve_offers_the_playground_and_says_where() {
    let served = Served::start(&[]);
    let (status, page) = served.get("/playground");
    assert_eq!(status, 200, "{page}");
    assert!(
        page.to_ascii_lowercase().contains("content-type: text/html"),
        "{page}"
    );
    assert!(
        page.contains(r#"<meta name="jrpc-rpc-path" content="/">"#),
        "{page}"
    );
    let (status, script) = served.get("/playground/playground.js");
    assert_eq!(status, 200);
    assert!(script.contains("rpc.discover"));
    let hint = format!("open http://{}/playground in a browser", served.addr);
    assert!(
        served.stderr.iter().any(|l| l.contains(&hint)),
        "{:?}",
        served.stderr
    );
}

#[test]
fn the_playground_is_off_with_no_playground_or_a_token() {
    // Without a token, the page is one more unknown path.
    for (args, refusal) in [
        (&["--no-playground"][..], 404),
        (&["--auth-token", "s3cret"], 401),
    ] {
        let served = Served::start(args);
        let (status, _) = served.get("/playground");
        assert_eq!(status, refusal, "{args:?}");
        assert!(
            !served.stderr.iter().any(|l| l.contains("/playground")),
            "{args:?}: {:?}",
            served.stderr
        );
    }
}
