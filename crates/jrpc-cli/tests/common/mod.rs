//! What the CLI tests share: the binary, a `jrpc serve` with listeners,
//! and a command's output for assertion messages.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};

pub const JRPC: &str = env!("CARGO_BIN_EXE_jrpc");

/// A `jrpc serve` with listeners, stopped on drop.
pub struct Served {
    child: Child,
    /// The listeners' addresses, in the order of their flags (an HTTP
    /// listener's WebSocket address after its own).
    pub targets: Vec<String>,
    /// The server's stderr lines after the listening ones (its log).
    pub log: std::sync::mpsc::Receiver<String>,
}

impl Served {
    pub fn start(args: &[&str]) -> Served {
        let mut child = Command::new(JRPC)
            .arg("serve")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let listeners = args
            .iter()
            .filter(|a| matches!(**a, "--http" | "--tcp" | "--udp" | "--unix"))
            .count();
        let mut targets = Vec::new();
        let mut seen = 0;
        while seen < listeners {
            let mut line = String::new();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "jrpc serve exited early"
            );
            if let Some(rest) = line.strip_prefix("jrpc: listening on ") {
                seen += 1;
                let mut words = rest.split_whitespace();
                targets.push(words.next().unwrap().to_owned());
                // HTTP lines name the WebSocket address too.
                if let Some(ws) = words.find(|w| w.starts_with("ws://")) {
                    targets.push(ws.to_owned());
                }
            }
        }
        let (tx, log) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                // Nobody may be reading: the lines are dropped then.
                let _ = tx.send(line);
            }
        });
        Served { child, targets, log }
    }

    /// The server's process id.
    #[allow(dead_code)] // not every test binary reads it
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `jrpc ARGS` (no stdin) to its end.
pub fn jrpc(args: &[&str]) -> Output {
    Command::new(JRPC).args(args).output().unwrap()
}

/// A command's status, stdout and stderr, for assertion messages.
pub fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A server process, stopped on drop (a failed test included).
pub struct Stopped(pub Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `jrpc mcp serve --http 127.0.0.1:0` with `args`; the process and the
/// endpoint's URL.
pub fn mcp_serve(args: &[&str]) -> (Stopped, String) {
    let (server, url) = mcp_serve_on("--http", "127.0.0.1:0", args);
    assert!(url.ends_with("/mcp"), "{url}");
    (server, url)
}

/// `jrpc mcp serve FLAG ADDR` (`--http`, `--tcp`, `--unix`, `--ws`) with
/// `args`; the process and where it serves (the last word of its first
/// line on stderr).
pub fn mcp_serve_on(flag: &str, addr: &str, args: &[&str]) -> (Stopped, String) {
    let mut child = Command::new(JRPC)
        .args(["mcp", "serve", flag, addr])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    // The first `jrpc:` line (a log line may come first).
    while line.is_empty() || !line.starts_with("jrpc: ") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "jrpc mcp serve exited early"
        );
    }
    let target = line.trim().rsplit(' ').next().unwrap_or_default().to_owned();
    assert!(!target.is_empty(), "{flag}: no target in {line:?}");
    (Stopped(child), target)
}
