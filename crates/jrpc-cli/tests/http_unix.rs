//! HTTP over a Unix socket on both sides: `jrpc serve --http unix:PATH` and
//! `jrpc mcp serve --http unix:PATH`, reached as `http+unix://%2FPATH/…` by
//! `jrpc call`, `jrpc bench`, `jrpc mcp` and `McpClient` (the socket path
//! percent-encoded as the host, as Docker-style clients write it).
#![cfg(unix)]

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{jrpc, mcp_serve_on, text, Served};

/// A socket path of the test's own, in a folder removed when it ends.
struct SocketDir(PathBuf);

impl SocketDir {
    fn new(name: &str) -> SocketDir {
        let dir = std::env::temp_dir().join(format!("jrpc-http-unix-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        SocketDir(dir)
    }

    fn socket(&self) -> PathBuf {
        self.0.join("rpc.sock")
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `http+unix://` with `path` percent-encoded.
fn url_of(path: &Path) -> String {
    let mut url = String::from("http+unix://");
    for byte in path.to_str().unwrap().bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => url.push(byte as char),
            _ => url.push_str(&format!("%{byte:02X}")),
        }
    }
    url
}

/// Asks process `pid` to stop as Ctrl-C or a service manager would.
fn stop(pid: u32) {
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Whether `path` is gone within a few seconds.
fn gone(path: &Path) -> bool {
    for _ in 0..100 {
        if !path.exists() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn jrpc_serve_answers_http_on_a_unix_socket() {
    let dir = SocketDir::new("serve");
    let socket = dir.socket();
    let addr = format!("unix:{}", socket.display());
    let served = Served::start(&["--http", &addr]);
    let url = url_of(&socket);
    assert_eq!(
        served.targets[0], url,
        "the address it names is the one clients use"
    );
    assert_eq!(mode(&socket), 0o600, "only this user may connect, by default");

    let out = jrpc(&["call", &url, "add", "2", "3"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "5");
    // A path after the socket is the request's path: POST / is served.
    let out = jrpc(&["call", &format!("{url}/"), "add", "1", "1"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "2", "{}", text(&out));

    let out = jrpc(&["bench", &url, "add", "1", "2", "-n", "200", "-c", "4", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], 200, "{report}");

    stop(served.pid());
    assert!(gone(&socket), "the socket file is removed on exit");
}

#[test]
fn the_socket_mode_is_a_flag_and_a_live_socket_is_not_taken_over() {
    let dir = SocketDir::new("mode");
    let socket = dir.socket();
    let addr = format!("unix:{}", socket.display());
    let served = Served::start(&["--http", &addr, "--socket-mode", "660"]);
    assert_eq!(mode(&socket), 0o660);
    // A second server on the same live socket is refused, not given it.
    let out = jrpc(&["serve", "--http", &addr]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("in use by a live server"),
        "{}",
        text(&out)
    );
    // Killed, it leaves its socket file behind: a stale one (nobody
    // listening), which the next server replaces.
    drop(served);
    assert!(socket.exists());
    let served = Served::start(&["--http", &addr]);
    let out = jrpc(&["call", &url_of(&socket), "add", "2", "2"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "4", "{}", text(&out));
    drop(served);

    // Usage errors: no path, a mode that is not octal permission bits.
    for args in [
        vec!["--http", "unix:"],
        vec!["--http", addr.as_str(), "--socket-mode", "999"],
    ] {
        let out = jrpc(&[&["serve"][..], &args].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    }
}

#[test]
fn jrpc_mcp_serves_streamable_http_on_a_unix_socket() {
    let dir = SocketDir::new("mcp");
    let socket = dir.socket();
    let addr = format!("unix:{}", socket.display());
    let (server, target) = mcp_serve_on("--http", &addr, &[]);
    let url = format!("{}/mcp", url_of(&socket));
    assert_eq!(target, url);
    assert_eq!(mode(&socket), 0o600);

    let out = jrpc(&["mcp", "list", &url]);
    assert!(out.status.success(), "{}", text(&out));
    let listed = String::from_utf8_lossy(&out.stdout);
    for tool in ["add(", "echo(", "sleep("] {
        assert!(listed.contains(tool), "{tool}: {listed}");
    }
    // Both eras.
    for era in ["2026-07-28", "2025-11-25"] {
        let out = jrpc(&[
            "mcp",
            "call",
            &url,
            "add",
            "a=2",
            "b=40",
            "--protocol-version",
            era,
        ]);
        assert!(out.status.success(), "{era}: {}", text(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42", "{era}");
    }
    // The load balancer's health check is there too, for `Host: localhost`.
    let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    use std::io::{Read as _, Write as _};
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    stop(server.0.id());
    assert!(gone(&socket), "the socket file is removed on exit");
}

#[test]
fn oauth_over_a_socket_needs_the_resource_url() {
    let dir = SocketDir::new("oauth");
    let addr = format!("unix:{}", dir.socket().display());
    let out = jrpc(&[
        "mcp",
        "serve",
        "--http",
        &addr,
        "--oauth-issuer",
        "https://issuer.example",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--oauth-resource"),
        "{}",
        text(&out)
    );
}

#[tokio::test]
async fn mcp_client_connects_over_a_unix_socket() {
    let dir = SocketDir::new("client");
    let socket = dir.socket();
    let addr = format!("unix:{}", socket.display());
    let (_server, url) = mcp_serve_on("--http", &addr, &[]);
    let client = jrpc_mcp::McpClient::builder("unix-test", "1")
        .connect_http(&url)
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let result = client
        .call_tool("add", serde_json::json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert_eq!(result.joined_text(), "3");
    // A socket nobody listens on is a connection failure, named.
    let missing = url_of(&dir.0.join("missing.sock"));
    let err = jrpc_mcp::McpClient::builder("unix-test", "1")
        .connect_http(&format!("{missing}/mcp"))
        .await
        .map(drop)
        .unwrap_err();
    assert!(err.to_string().contains("missing.sock"), "{err}");
}
