//! Replicas of `jrpc mcp serve --http --shared-state nats://...` sharing
//! state through a real `nats-server -js` (Debian's): a task made through
//! one replica is read, answered and cancelled through the others, a
//! change made through one reaches listeners on another, `requestState`
//! sealed by one is accepted by the next, and a task whose replica is
//! killed is reported failed by the others once its lease lapses.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{mcp_serve, Stopped};
use futures_util::StreamExt;
use jrpc_mcp::client::{McpClient, Started};
use jrpc_mcp::types::{SubscriptionFilter, TaskStatus};
use serde_json::{json, Value};

/// A `nats-server -js` of the test's own, with a store directory of its
/// own; stopped and removed on drop.
struct Nats {
    child: Child,
    dir: PathBuf,
    url: String,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Nats {
    fn start() -> Nats {
        Nats::start_with(&["-js"])
    }

    /// A server started with `flags` besides its address and store.
    fn start_with(flags: &[&str]) -> Nats {
        let program = ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
            .into_iter()
            .find(|p| std::path::Path::new(p).is_file())
            .unwrap_or("nats-server");
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("jrpc-fleet-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new(program)
            .args(flags)
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server is installed (apt-get install nats-server)");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Nats {
            child,
            dir,
            url: format!("nats://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn replica(nats: &Nats, extra: &[&str]) -> (Stopped, String) {
    let mut args = vec!["--shared-state", nats.url.as_str()];
    args.extend_from_slice(extra);
    mcp_serve(&args)
}

async fn client(url: &str) -> McpClient {
    McpClient::builder("fleet-test", "1")
        .tasks(true)
        // Declared, so that a task may ask; the test answers by hand.
        .elicitation(|_params| async move {
            Ok(serde_json::from_value(json!({"action": "decline"})).expect("an ElicitResult"))
        })
        .connect_http(url)
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"))
}

/// Polls `check` every 50 ms until it holds, for at most `limit`.
async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_made_on_one_replica_is_read_answered_and_cancelled_on_others() {
    let nats = Nats::start();
    let (_a, url_a) = replica(&nats, &["--conformance"]);
    let (_b, url_b) = replica(&nats, &["--conformance"]);
    let (_c, url_c) = replica(&nats, &["--conformance"]);
    let (a, b, c) = (client(&url_a).await, client(&url_b).await, client(&url_c).await);
    assert!(a.is_modern());

    // Made on A, cancelled through B: A stops it, C reads it cancelled.
    let Started::Task(task) = a.start_tool("sleep", json!({"ms": 60_000})).await.unwrap() else {
        panic!("sleep is a task for a client that declares the extension");
    };
    assert_eq!(task.status, TaskStatus::Working);
    let seen = b.get_task(&task.task_id).await.unwrap();
    assert_eq!(seen.status, TaskStatus::Working);
    b.cancel_task(&task.task_id).await.unwrap();
    let seen = c.get_task(&task.task_id).await.unwrap();
    assert_eq!(seen.status, TaskStatus::Cancelled);

    // Made on A, asking a question: answered through B, its end read on C.
    let Started::Task(task) = a
        .start_tool("confirm_delete", json!({"filename": "notes.txt"}))
        .await
        .unwrap()
    else {
        panic!("confirm_delete is a task");
    };
    let id = task.task_id.clone();
    assert!(
        eventually(Duration::from_secs(10), || async {
            b.get_task(&id).await.unwrap().status == TaskStatus::InputRequired
        })
        .await,
        "the question shows through another replica"
    );
    let asked = b.get_task(&id).await.unwrap().input_requests.unwrap();
    let key = asked.keys().next().unwrap().clone();
    let mut answers = jrpc_mcp::types::JsonObject::new();
    answers.insert(key, json!({"action": "accept", "content": {"confirm": true}}));
    b.update_task(&id, answers).await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(20), c.wait_task(&id))
        .await
        .expect("the task ends")
        .unwrap();
    assert_eq!(ended.status, TaskStatus::Completed, "{ended:?}");
    let text = ended.result.unwrap()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(text, "notes.txt: true");

    // The tool call of a client that declares tasks waits for the end.
    let result = c.call_tool("sleep", json!({"ms": 100})).await.unwrap();
    assert_eq!(result.joined_text(), "slept 100");

    // A task of another caller is nobody else's: unknown id is -32602.
    let error = b.get_task("0123456789abcdef0123456789abcdef").await.unwrap_err();
    assert_eq!(error.rpc().map(|e| e.code()), Some(-32602));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_through_one_replica_reaches_listeners_on_the_others() {
    let nats = Nats::start();
    let (_a, url_a) = replica(&nats, &[]);
    let (_b, url_b) = replica(&nats, &[]);
    let (_c, url_c) = replica(&nats, &[]);
    let (a, b, c) = (client(&url_a).await, client(&url_b).await, client(&url_c).await);
    let filter = SubscriptionFilter {
        resource_subscriptions: Some(vec!["demo://counter".into()]),
        ..Default::default()
    };
    let mut on_a = a.listen(filter.clone()).await.unwrap();
    let mut on_b = b.listen(filter.clone()).await.unwrap();
    // A 2025-11-25 session on B, subscribed with resources/subscribe.
    let legacy = McpClient::builder("fleet-test", "1")
        .protocol(jrpc_mcp::client::ProtocolChoice::Legacy)
        .connect_http(&url_b)
        .await
        .unwrap();
    assert!(!legacy.is_modern());
    let mut on_legacy = legacy.listen(filter).await.unwrap();
    let before: u64 = read_counter(&a).await;
    let bumped = c.call_tool("bump", json!({})).await.unwrap();
    assert_eq!(bumped.joined_text(), (before + 1).to_string());
    for (name, listening) in [
        ("A", &mut on_a),
        ("B", &mut on_b),
        ("a legacy session on B", &mut on_legacy),
    ] {
        let change = tokio::time::timeout(Duration::from_secs(5), listening.next())
            .await
            .unwrap_or_else(|_| panic!("{name} heard of the bump through C"))
            .expect("the stream goes on")
            .expect("a change");
        assert_eq!(change.uri(), Some("demo://counter"));
    }
    // The counter is the fleet's: every replica reads the same.
    assert_eq!(read_counter(&a).await, before + 1);
    assert_eq!(read_counter(&b).await, before + 1);
}

async fn read_counter(client: &McpClient) -> u64 {
    let read = client.read_resource("demo://counter").await.unwrap();
    let text = serde_json::to_value(&read.contents[0]).unwrap()["text"]
        .as_str()
        .unwrap()
        .to_owned();
    text.parse().unwrap()
}

/// One modern request by raw HTTP/1.1 to `url`: the JSON-RPC response.
fn post(url: &str, method: &str, name: &str, params: Value) -> Value {
    let rest = url.trim_start_matches("http://");
    let (addr, path) = rest.split_at(rest.find('/').unwrap());
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: {method}\r\nMcp-Name: {name}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    let body = reply.split("\r\n\r\n").nth(1).unwrap_or_default();
    // A JSON body, or one SSE event whose data is the response.
    let json = body
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap_or(body);
    serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("{e}: {reply}"))
}

#[test]
fn request_state_sealed_by_one_replica_is_accepted_by_another() {
    let nats = Nats::start();
    let (_a, url_a) = replica(&nats, &[]);
    let (_b, url_b) = replica(&nats, &[]);
    let args = json!({"name": "elicit", "arguments": {"message": "Who are you?"}});
    let first = post(&url_a, "tools/call", "elicit", args.clone());
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let (key, _) = result["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    let mut retry = args;
    retry["inputResponses"] = json!({ key.clone(): {"action": "accept", "content": {"name": "ada"}} });
    retry["requestState"] = result["requestState"].clone();
    let second = post(&url_b, "tools/call", "elicit", retry);
    assert_eq!(second["result"]["content"][0]["text"], "hello ada", "{second}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_replica_dies_is_reported_failed_by_another() {
    let nats = Nats::start();
    let (mut a, url_a) = replica(&nats, &[]);
    let (_b, url_b) = replica(&nats, &[]);
    let on_a = client(&url_a).await;
    let b = client(&url_b).await;
    let Started::Task(task) = on_a.start_tool("sleep", json!({"ms": 120_000})).await.unwrap() else {
        panic!("sleep is a task");
    };
    let _ = a.0.kill();
    let _ = a.0.wait();
    let killed = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(30);
    let last = loop {
        let seen = b.get_task(&task.task_id).await.unwrap();
        if seen.status == TaskStatus::Failed || Instant::now() > deadline {
            break seen;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        last.status,
        TaskStatus::Failed,
        "30 s after its replica died: {last:?}"
    );
    assert!(
        killed.elapsed() >= Duration::from_secs(5),
        "not before the lease could lapse"
    );
    assert!(
        last.status_message
            .as_deref()
            .unwrap_or_default()
            .contains("went away"),
        "{last:?}"
    );
}

#[test]
fn a_nats_server_without_jetstream_is_named_at_once() {
    let nats = Nats::start_with(&[]);
    let out = Command::new(common::JRPC)
        .args([
            "mcp",
            "serve",
            "--http",
            "127.0.0.1:0",
            "--shared-state",
            &nats.url,
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", common::text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("JetStream is not enabled") && stderr.contains("-js"),
        "{stderr}"
    );
}

#[test]
fn no_nats_at_start_is_a_transport_failure() {
    let port = free_port();
    let out = Command::new(common::JRPC)
        .args(["mcp", "serve", "--http", "127.0.0.1:0", "--shared-state"])
        .arg(format!("nats://127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", common::text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--shared-state"), "{stderr}");
}

fn jrpc(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(common::JRPC)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_cli_starts_a_task_on_one_replica_and_finds_it_on_another() {
    let nats = Nats::start();
    let (_a, url_a) = replica(&nats, &[]);
    let (_b, url_b) = replica(&nats, &[]);
    // Waited for: the result, as a plain call prints it.
    let (code, out, err) = jrpc(&["mcp", "call", "--task", &url_a, "sleep", "ms=100"]);
    assert_eq!((code, out.trim()), (Some(0), "slept 100"), "{err}");
    assert!(err.contains("jrpc: task ") && err.contains(" working"), "{err}");
    // Detached: the id on stdout, found through B.
    let (code, out, err) = jrpc(&["mcp", "call", "--task", "--detach", &url_a, "sleep", "ms=60000"]);
    assert_eq!(code, Some(0), "{err}");
    let id = out.trim().to_owned();
    assert_eq!(id.len(), 32, "{out}");
    let (code, out, err) = jrpc(&["mcp", "task", "get", &url_b, &id]);
    assert_eq!(code, Some(0), "{err}");
    let task: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(task["status"], "working");
    let (code, _, err) = jrpc(&["mcp", "task", "cancel", &url_b, &id]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("cancelled"), "{err}");
    let (code, _, err) = jrpc(&["mcp", "task", "wait", &url_a, &id]);
    assert_eq!(code, Some(1), "a cancelled task is not a success: {err}");
    assert!(err.contains("cancelled"), "{err}");
    let (code, _, err) = jrpc(&["mcp", "task", "get", &url_b, "0123"]);
    assert_eq!(code, Some(1), "an unknown task is the server's error: {err}");
    let (code, _, err) = jrpc(&["mcp", "task", "get", &url_b]);
    assert_eq!(code, Some(2), "no id is a usage error: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_status_reaches_listeners_on_another_replica() {
    let nats = Nats::start();
    let (_a, url_a) = replica(&nats, &[]);
    let (_c, url_c) = replica(&nats, &[]);
    let (a, c) = (client(&url_a).await, client(&url_c).await);
    let Started::Task(task) = c.start_tool("sleep", json!({"ms": 700})).await.unwrap() else {
        panic!("sleep is a task");
    };
    let filter = SubscriptionFilter {
        task_ids: Some(vec![task.task_id.clone()]),
        ..Default::default()
    };
    let mut on_a = a.listen(filter).await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let change = on_a.next().await.expect("the stream goes on").expect("a change");
            assert_eq!(change.method, "notifications/tasks");
            let params = change.params.unwrap_or_default();
            assert_eq!(params["taskId"], task.task_id.as_str());
            if params["status"] != "working" {
                return params["status"].as_str().unwrap_or_default().to_owned();
            }
        }
    })
    .await
    .expect("A heard the task made on C end");
    assert_eq!(status, "completed");
}
