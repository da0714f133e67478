//! The MCP client against the demo server (and servers of the tests' own)
//! over in-memory pipes: the handshake, lists, calls, callbacks both ways,
//! and cancellation by dropping a call.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jrpc::transport::Connection;
use jrpc_mcp::client::{McpClient, McpClientBuilder, ProtocolChoice};
use jrpc_mcp::server::{McpServer, NoArgs, ToolError};
use jrpc_mcp::types::{
    CreateMessageResult, ElicitAction, ElicitResult, LoggingLevel, OneOrMany, Role, Root, SamplingContent,
};
use serde_json::json;

mod common;
use common::pipe;

async fn connect(server: &McpServer, builder: McpClientBuilder) -> McpClient {
    let (ours, theirs) = pipe();
    std::mem::forget(server.connect(theirs));
    builder.connect(ours).await.expect("initialized")
}

/// Both eras of the protocol: the legacy handshake (pinned), and what the
/// client finds by itself (the demo server is dual-era, so modern), with
/// the revision each speaks.
const ERAS: [(ProtocolChoice, &str); 2] = [
    (ProtocolChoice::Legacy, "2025-11-25"),
    (ProtocolChoice::Auto, "2026-07-28"),
];

#[tokio::test]
async fn lists_calls_reads_and_prompts() {
    for (era, version) in ERAS {
        lists_calls_reads_and_prompts_in(era, version).await;
    }
}

async fn lists_calls_reads_and_prompts_in(era: ProtocolChoice, version: &str) {
    let client = connect(
        &jrpc_mcp::demo::server(),
        McpClient::builder("test", "1").protocol(era),
    )
    .await;
    assert_eq!(client.server_info().name, "jrpc-demo");
    assert_eq!(client.protocol_version(), version);
    assert_eq!(client.is_modern(), version == "2026-07-28");
    assert!(client.server_capabilities().tools.is_some());
    let tools: Vec<String> = client
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(
        tools,
        [
            "add",
            "echo",
            "sleep",
            "sample",
            "elicit",
            "list_roots",
            "fail",
            "bump"
        ]
    );
    let sum = client.call_tool("add", json!({"a": 2, "b": 40})).await.unwrap();
    assert_eq!(sum.joined_text(), "42");
    assert_eq!(sum.structured_content.unwrap()["result"], 42);
    assert!(client.call_tool("fail", json!({})).await.unwrap().failed());
    let unknown = client.call_tool("nope", json!({})).await.unwrap_err();
    assert_eq!(unknown.rpc().map(|e| e.code()), Some(-32602));

    let resources = client.list_resources().await.unwrap();
    assert_eq!(resources[0].uri, "demo://greeting");
    let templates = client.list_resource_templates().await.unwrap();
    assert_eq!(templates[0].uri_template, "demo://echo/{text}");
    let read = client.read_resource("demo://echo/abc").await.unwrap();
    assert_eq!(read.contents[0].uri(), "demo://echo/abc");
    // -32002 in 2025-11-25, -32602 in 2026-07-28: both read as not found.
    let missing = client.read_resource("demo://none").await.unwrap_err();
    assert!(
        matches!(missing.rpc().map(|e| e.code()), Some(-32002 | -32602)),
        "{missing}"
    );
    assert!(
        matches!(&missing, jrpc_mcp::client::McpClientError::ResourceNotFound { uri, .. } if uri == "demo://none"),
        "{missing}"
    );

    let prompts = client.list_prompts().await.unwrap();
    assert_eq!(prompts[0].name, "greet");
    let prompt = client
        .get_prompt("greet", BTreeMap::from([("name".to_owned(), "Ada".to_owned())]))
        .await
        .unwrap();
    assert!(prompt.messages[0].content.as_text().unwrap().contains("Ada"));
    client.ping().await.unwrap();
    client.close().await;
}

#[tokio::test]
async fn the_server_s_requests_and_notifications_reach_the_callbacks() {
    for (era, _) in ERAS {
        the_server_s_requests_and_notifications_reach_the_callbacks_in(era).await;
    }
}

/// Legacy: the server's own requests; modern: the input it requires
/// (`input_required` rounds), answered by the same callbacks.
async fn the_server_s_requests_and_notifications_reach_the_callbacks_in(era: ProtocolChoice) {
    let progress = Arc::new(Mutex::new(Vec::new()));
    let logs = Arc::new(Mutex::new(Vec::new()));
    let (p, l) = (Arc::clone(&progress), Arc::clone(&logs));
    let builder = McpClient::builder("test", "1")
        .sampling(|params| async move {
            let asked = match &params.messages[0].content {
                OneOrMany::One(content) => content.as_text().unwrap_or_default().to_owned(),
                OneOrMany::Many(_) => String::new(),
            };
            Ok(CreateMessageResult {
                role: Role::Assistant,
                content: OneOrMany::One(SamplingContent::text(format!("answer to {asked}"))),
                model: "test-model".into(),
                stop_reason: Some("endTurn".into()),
                meta: None,
            })
        })
        .elicitation(|params| async move {
            assert!(params.requested_schema["properties"]["name"].is_object());
            Ok(ElicitResult {
                action: ElicitAction::Accept,
                content: Some(serde_json::from_value(json!({"name": "Grace"})).unwrap()),
                meta: None,
            })
        })
        .roots([
            Root {
                uri: "file:///a".into(),
                name: None,
                meta: None,
            },
            Root {
                uri: "file:///b".into(),
                name: Some("b".into()),
                meta: None,
            },
        ])
        .on_progress(move |params| p.lock().unwrap().push(params.progress))
        .on_log(move |message| l.lock().unwrap().push(message.level))
        .protocol(era);
    let client = connect(&jrpc_mcp::demo::server(), builder).await;
    let sampled = client
        .call_tool("sample", json!({"prompt": "2+2?"}))
        .await
        .unwrap();
    assert_eq!(sampled.joined_text(), "answer to 2+2?");
    let elicited = client
        .call_tool("elicit", json!({"message": "Who?"}))
        .await
        .unwrap();
    assert_eq!(elicited.joined_text(), "hello Grace");
    let roots = client.call_tool("list_roots", json!({})).await.unwrap();
    assert_eq!(roots.joined_text(), "file:///a\nfile:///b");

    client.call_tool("sleep", json!({"ms": 250})).await.unwrap();
    let seen = progress.lock().unwrap().clone();
    assert!(
        seen.len() >= 2 && seen.windows(2).all(|w| w[0] < w[1]),
        "{seen:?}"
    );

    client.set_log_level(LoggingLevel::Debug).await.unwrap();
    client.call_tool("echo", json!({"text": "x"})).await.unwrap();
    assert_eq!(logs.lock().unwrap().as_slice(), [LoggingLevel::Debug]);
    client.close().await;
}

#[tokio::test]
async fn dropping_a_call_cancels_it_on_the_server() {
    for (era, _) in ERAS {
        dropping_a_call_cancels_it_on_the_server_in(era).await;
    }
}

async fn dropping_a_call_cancels_it_on_the_server_in(era: ProtocolChoice) {
    let cancelled = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server = common::waiting_server(&cancelled);
    let client = connect(&server, McpClient::builder("test", "1").protocol(era)).await;
    let call = client.call_tool("wait", json!({}));
    assert!(tokio::time::timeout(Duration::from_millis(200), call)
        .await
        .is_err());
    common::cancelled_at_least(&cancelled, 1).await;
    client.ping().await.unwrap();
    client.close().await;
}

#[tokio::test]
async fn lists_follow_cursors_to_the_end() {
    let mut builder = McpServer::builder("paged", "1").page_size(2);
    for i in 0..5 {
        builder = builder.tool(format!("t{i}"), "a tool", |_: NoArgs, _cx| async {
            Ok::<_, ToolError>("ok")
        });
    }
    let client = connect(&builder.build(), McpClient::builder("test", "1")).await;
    let names: Vec<String> = client
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["t0", "t1", "t2", "t3", "t4"]);
    client.close().await;
}

/// The client's end of a pipe, counting the requests it sends (its sink is
/// told each frame's kind).
fn counting_pipe() -> (Connection, Connection, Arc<std::sync::atomic::AtomicUsize>) {
    use futures_util::SinkExt;
    let (ours, theirs) = pipe();
    let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&sent);
    let info = ours.info().clone();
    let (incoming, outgoing, _) = ours.into_kinded_parts();
    let outgoing = outgoing.with(move |frame: jrpc::transport::OutFrame| {
        if matches!(frame.kind, jrpc::transport::OutKind::Request(_)) {
            counter.fetch_add(1, Ordering::SeqCst);
        }
        std::future::ready(Ok::<_, std::io::Error>(frame))
    });
    (Connection::with_kinds(incoming, outgoing, info), theirs, sent)
}

/// Issue 31: a modern server's lists say how long they stay fresh (the
/// demo's: 60 s); a second `list_tools` within that sends nothing, unless
/// the cache is off. A tool call is never kept.
#[tokio::test]
async fn lists_are_kept_as_long_as_the_server_says() {
    for (cache, second_list_sent) in [(true, 0), (false, 1)] {
        let (ours, theirs, sent) = counting_pipe();
        std::mem::forget(jrpc_mcp::demo::server().connect(theirs));
        let client = McpClient::builder("test", "1")
            .cache(cache)
            .connect(ours)
            .await
            .unwrap();
        assert!(client.is_modern());
        let first = client.list_tools().await.unwrap();
        let before = sent.load(Ordering::SeqCst);
        let second = client.list_tools().await.unwrap();
        assert_eq!(first, second);
        assert_eq!(
            sent.load(Ordering::SeqCst) - before,
            second_list_sent,
            "cache {cache}"
        );
        let before = sent.load(Ordering::SeqCst);
        for _ in 0..2 {
            client.call_tool("add", json!({"a": 1, "b": 2})).await.unwrap();
        }
        assert_eq!(sent.load(Ordering::SeqCst) - before, 2);
        client.close().await;
    }
}

/// Issue 31: `listen` gives the change notifications asked for, in both
/// eras (modern: `subscriptions/listen`, acknowledged; legacy:
/// `resources/subscribe`); dropping the stream ends it.
#[tokio::test]
async fn listen_streams_the_changes_asked_for() {
    use futures_util::StreamExt;
    use jrpc_mcp::types::SubscriptionFilter;
    for (era, _) in ERAS {
        let client = connect(
            &jrpc_mcp::demo::server(),
            McpClient::builder("test", "1").protocol(era.clone()),
        )
        .await;
        let filter = SubscriptionFilter {
            resource_subscriptions: Some(vec!["demo://counter".into()]),
            ..SubscriptionFilter::default()
        };
        let mut changes = client.listen(filter.clone()).await.unwrap();
        if client.is_modern() {
            let acknowledged = changes.acknowledged().expect("acknowledged");
            assert_eq!(acknowledged.resource_subscriptions, filter.resource_subscriptions);
        }
        client.call_tool("bump", json!({})).await.unwrap();
        let change = tokio::time::timeout(Duration::from_secs(10), changes.next())
            .await
            .expect("a change within 10 s")
            .expect("the stream goes on")
            .expect("a change, not an error");
        assert_eq!(change.method, "notifications/resources/updated", "{era:?}");
        assert_eq!(change.uri(), Some("demo://counter"));
        drop(changes);
        client.ping().await.unwrap();
        client.close().await;
    }
}
