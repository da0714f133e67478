//! Calls safe to repeat, through a proxy that loses connections and
//! answers `502` on demand: the client sends lists, reads and read-only
//! tools again (counted in `repeats`), never a tool that changes things,
//! and gives up after its budget of attempts.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use jrpc_mcp::client::McpClient;
use jrpc_mcp::http::HttpOptions;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// Forwards connections to `upstream`; [`fail`](Proxy::fail) cuts every
/// connection open and answers the next `n` new ones with a `502`.
struct Proxy {
    addr: String,
    failing: Arc<AtomicUsize>,
    open: Arc<Mutex<Vec<AbortHandle>>>,
    refused: Arc<AtomicUsize>,
}

impl Proxy {
    async fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let failing = Arc::new(AtomicUsize::new(0));
        let open: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let refused = Arc::new(AtomicUsize::new(0));
        let (f, o, r) = (Arc::clone(&failing), Arc::clone(&open), Arc::clone(&refused));
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let fail = f
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
                if fail {
                    r.fetch_add(1, Ordering::SeqCst);
                    tokio::spawn(async move {
                        let mut buf = [0u8; 4096];
                        let _ = client.read(&mut buf).await;
                        let _ = client
                            .write_all(
                                b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                            )
                            .await;
                    });
                    continue;
                }
                let upstream = upstream.clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                o.lock().unwrap().push(task.abort_handle());
            }
        });
        Proxy {
            addr,
            failing,
            open,
            refused,
        }
    }

    /// Cuts the connections open (and waits a moment, so that the client
    /// sees its pooled ones closed: a connection cut while idle is not a
    /// lost request) and refuses the next `n` new ones.
    async fn fail(&self, n: usize) {
        for task in self.open.lock().unwrap().drain(..) {
            task.abort();
        }
        self.failing.store(n, Ordering::SeqCst);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn safe_calls_are_sent_again_and_others_are_not() {
    let serving = jrpc_mcp::demo::server()
        .serve_http("127.0.0.1:0", HttpOptions::default())
        .await
        .unwrap();
    let upstream = serving.local_addr().trim_start_matches("http://").to_owned();
    let proxy = Proxy::start(upstream).await;
    let client = McpClient::builder("repeat-test", "1")
        .connect_http(&format!("http://{}/mcp", proxy.addr))
        .await
        .unwrap();
    assert!(client.is_modern());
    assert_eq!(client.repeats(), 0);

    // A read-only tool: sent again (its safety read from the tool list,
    // asked for once).
    proxy.fail(1).await;
    let sum = client.call_tool("add", json!({"a": 2, "b": 40})).await.unwrap();
    assert_eq!(sum.joined_text(), "42");
    assert_eq!(client.repeats(), 1);

    // A tool that changes things: the loss is the caller's to judge.
    proxy.fail(1).await;
    let error = client.call_tool("bump", json!({})).await.unwrap_err();
    assert!(error.to_string().contains("502"), "{error}");
    assert_eq!(client.repeats(), 1, "bump is never sent twice");

    // Lists and reads.
    proxy.fail(2).await;
    let read = client.read_resource("demo://counter").await.unwrap();
    assert_eq!(read.contents.len(), 1);
    assert_eq!(client.repeats(), 3);

    // Past the budget: the last loss is the answer.
    proxy.fail(100).await;
    let before = proxy.refused.load(Ordering::SeqCst);
    let error = client.read_resource("demo://greeting").await.unwrap_err();
    assert!(error.to_string().contains("502"), "{error}");
    assert_eq!(
        proxy.refused.load(Ordering::SeqCst) - before,
        5,
        "five attempts in all"
    );
    assert_eq!(client.repeats(), 7);
    proxy.fail(0).await;
}
