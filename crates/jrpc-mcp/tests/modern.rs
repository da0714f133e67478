//! Revision 2026-07-28 end to end over a pipe (as stdio carries it): each
//! request served on its own by its `_meta` envelope, beside the legacy
//! session on the same connection; multi round-trip input, subscriptions,
//! logging opt-in, progress, cancellation and tasks.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{text, Wire};
use jrpc_mcp::server::{McpContext, McpServer, NoArgs, ToolError};
use jrpc_mcp::types::JsonObject;
use serde_json::{json, Value};

/// The modern envelope with these client capabilities.
fn meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "pipe-test", "version": "1"},
    })
}

/// `params` with the envelope (declaring sampling, elicitation and roots).
fn modern(mut params: Value) -> Value {
    params["_meta"] = meta(json!({"sampling": {}, "elicitation": {}, "roots": {}}));
    params
}

fn form() -> Value {
    json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
}

#[tokio::test]
async fn discover_and_results_say_what_they_are() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    let discover = wire.request("server/discover", modern(json!({}))).await;
    let result = &discover["result"];
    assert_eq!(result["resultType"], "complete", "{discover}");
    assert_eq!(
        result["supportedVersions"],
        json!([
            "2026-07-28",
            "2025-11-25",
            "2025-06-18",
            "2025-03-26",
            "2024-11-05"
        ])
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "jrpc-demo"
    );
    assert_eq!(
        (result["ttlMs"].as_u64(), result["cacheScope"].as_str()),
        (Some(60000), Some("public"))
    );
    assert!(
        result["capabilities"]["tools"].is_object()
            && result["capabilities"]["resources"]["subscribe"] == true
    );
    assert!(result["instructions"].is_string());

    // Lists and reads carry their type, the server and cache hints.
    let tools = wire.request("tools/list", modern(json!({}))).await;
    let result = &tools["result"];
    assert_eq!(
        (result["resultType"].as_str(), result["ttlMs"].as_u64()),
        (Some("complete"), Some(60000))
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "jrpc-demo"
    );
    let read = wire
        .request("resources/read", modern(json!({"uri": "demo://greeting"})))
        .await;
    assert_eq!(read["result"]["contents"][0]["text"], "hello");
    assert_eq!(
        (
            read["result"]["ttlMs"].as_u64(),
            read["result"]["cacheScope"].as_str()
        ),
        (Some(0), Some("private"))
    );
    let called = wire
        .request(
            "tools/call",
            modern(json!({"name": "add", "arguments": {"a": 1, "b": 2}})),
        )
        .await;
    assert_eq!(called["result"]["resultType"], "complete");
    assert_eq!(text(&called["result"]), "3");
    let prompt = wire
        .request(
            "prompts/get",
            modern(json!({"name": "greet", "arguments": {"name": "Ada"}})),
        )
        .await;
    assert_eq!(prompt["result"]["resultType"], "complete");

    // The same connection opens a legacy session too; its results keep
    // their old shape.
    wire.initialize().await;
    let legacy = wire.request("tools/list", json!({})).await;
    for field in ["resultType", "ttlMs", "cacheScope", "_meta"] {
        assert!(legacy["result"].get(field).is_none(), "{field} in {legacy}");
    }
    let read = wire
        .request("resources/read", json!({"uri": "demo://greeting"}))
        .await;
    assert!(read["result"].get("resultType").is_none(), "{read}");
}

#[tokio::test]
async fn envelopes_methods_and_versions_are_checked() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    let cases = [
        // A half-built envelope is malformed.
        (
            "tools/list",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
            -32602,
        ),
        (
            "tools/list",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": "all"}}),
            -32602,
        ),
        ("server/discover", json!({}), -32602),
        // Methods 2026-07-28 removed, and unknown ones.
        ("ping", modern(json!({})), -32601),
        ("logging/setLevel", modern(json!({"level": "debug"})), -32601),
        (
            "resources/subscribe",
            modern(json!({"uri": "demo://greeting"})),
            -32601,
        ),
        ("no/such/method", modern(json!({})), -32601),
        // Resources that do not exist are invalid params now.
        ("resources/read", modern(json!({"uri": "demo://nothing"})), -32602),
    ];
    for (method, params, code) in cases {
        let reply = wire.request(method, params.clone()).await;
        assert_eq!(reply["error"]["code"], code, "{method} {params}: {reply}");
        assert!(
            reply["id"].is_i64(),
            "the error carries the request's id: {reply}"
        );
    }
    let old = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2025-11-25",
                               "io.modelcontextprotocol/clientCapabilities": {}}});
    let reply = wire.request("server/discover", old).await;
    assert_eq!(reply["error"]["code"], -32022, "{reply}");
    assert_eq!(
        reply["error"]["data"],
        json!({"supported": ["2026-07-28"], "requested": "2025-11-25"})
    );
    let missing = wire
        .request("resources/read", modern(json!({"uri": "demo://nothing"})))
        .await;
    assert_eq!(missing["error"]["data"]["uri"], "demo://nothing");
    // A legacy initialize naming 2026-07-28 is answered with 2025-11-25.
    let init = wire
        .request(
            "initialize",
            json!({"protocolVersion": "2026-07-28", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}),
        )
        .await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
}

#[tokio::test]
async fn log_messages_only_for_requests_that_ask_for_them() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    let mut heard = Vec::new();
    let params = modern(json!({"name": "echo", "arguments": {"text": "quiet"}}));
    wire.request_collecting("tools/call", params, &mut heard).await;
    assert!(heard.is_empty(), "no logLevel, no logs: {heard:?}");
    for (level, expected) in [("debug", 1), ("info", 0)] {
        let mut params = modern(json!({"name": "echo", "arguments": {"text": "loud"}}));
        params["_meta"]["io.modelcontextprotocol/logLevel"] = json!(level);
        let mut heard = Vec::new();
        wire.request_collecting("tools/call", params, &mut heard).await;
        assert_eq!(heard.len(), expected, "at {level}: {heard:?}");
        if expected == 1 {
            assert_eq!(heard[0]["method"], "notifications/message");
            assert_eq!(heard[0]["params"]["level"], "debug");
        }
    }
}

#[tokio::test]
async fn progress_goes_to_the_requests_token() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    let mut params = modern(json!({"name": "sleep", "arguments": {"ms": 200}}));
    params["_meta"]["progressToken"] = json!("p-1");
    let mut heard = Vec::new();
    let reply = wire.request_collecting("tools/call", params, &mut heard).await;
    assert_eq!(text(&reply["result"]), "slept 200");
    assert!(heard.len() >= 2, "{heard:?}");
    assert!(heard
        .iter()
        .all(|n| n["method"] == "notifications/progress" && n["params"]["progressToken"] == "p-1"));
}

#[tokio::test]
async fn a_cancelled_modern_request_is_never_answered() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    wire.send(json!({"jsonrpc": "2.0", "id": "long", "method": "tools/call",
                     "params": modern(json!({"name": "sleep", "arguments": {"ms": 5000}}))}))
        .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    wire.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "long"}}),
    )
    .await;
    let next = wire
        .request(
            "tools/call",
            modern(json!({"name": "echo", "arguments": {"text": "after"}})),
        )
        .await;
    assert_eq!(text(&next["result"]), "after");
    assert!(
        wire.next_within(Duration::from_millis(300)).await.is_none(),
        "nothing for the cancelled request"
    );
}

/// The answers to a round: `inputResponses` by key.
fn answers(pairs: &[(&str, Value)]) -> Value {
    Value::Object(pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect())
}

#[tokio::test]
async fn the_demo_asks_the_client_in_rounds() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    // Elicitation: a question, then the answer.
    let call = |extra: Value| {
        let mut params = modern(json!({"name": "elicit", "arguments": {"message": "Who are you?"}}));
        for (k, v) in extra.as_object().unwrap() {
            params[k] = v.clone();
        }
        params
    };
    let first = wire.request("tools/call", call(json!({}))).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let requests = result["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1);
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(
        request["params"]["requestedSchema"]["properties"]["name"]["type"],
        "string"
    );
    let state = result["requestState"].as_str().unwrap().to_owned();
    assert!(
        result.get("ttlMs").is_none(),
        "an input_required result is not cacheable"
    );
    for (answer, expected) in [
        (
            json!({"action": "accept", "content": {"name": "Ada"}}),
            "hello Ada",
        ),
        (json!({"action": "decline"}), "declined"),
        (json!({"action": "cancel"}), "cancelled"),
    ] {
        let retry = call(json!({"inputResponses": answers(&[(key, answer)]), "requestState": state}));
        let done = wire.request("tools/call", retry).await;
        assert_eq!(done["result"]["resultType"], "complete", "{done}");
        assert_eq!(text(&done["result"]), expected);
    }
    // Sampling and roots the same way.
    let first = wire
        .request(
            "tools/call",
            modern(json!({"name": "sample", "arguments": {"prompt": "2+2?"}})),
        )
        .await;
    let (key, request) = first["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert_eq!(request["params"]["messages"][0]["content"]["text"], "2+2?");
    let sampled = json!({"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"});
    let mut retry = modern(json!({"name": "sample", "arguments": {"prompt": "2+2?"}}));
    retry["inputResponses"] = answers(&[(key, sampled)]);
    retry["requestState"] = first["result"]["requestState"].clone();
    assert_eq!(text(&wire.request("tools/call", retry).await["result"]), "4");
    let first = wire
        .request(
            "tools/call",
            modern(json!({"name": "list_roots", "arguments": {}})),
        )
        .await;
    let (key, request) = first["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert_eq!(request["method"], "roots/list");
    let roots = json!({"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]});
    let mut retry = modern(json!({"name": "list_roots", "arguments": {}}));
    retry["inputResponses"] = answers(&[(key, roots)]);
    assert_eq!(
        text(&wire.request("tools/call", retry).await["result"]),
        "file:///a\nfile:///b"
    );
}

#[tokio::test]
async fn what_rounds_refuse() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    let first = wire
        .request(
            "tools/call",
            modern(json!({"name": "elicit", "arguments": {"message": "?"}})),
        )
        .await;
    let (key, _) = first["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    let state = first["result"]["requestState"].as_str().unwrap();
    let code = |reply: &Value| reply["error"]["code"].as_i64();
    let retry = |arguments: Value, responses: Value, state: &str| {
        let mut params = modern(json!({"name": "elicit", "arguments": arguments}));
        params["inputResponses"] = responses;
        params["requestState"] = json!(state);
        params
    };
    // Tampered state, state of other arguments, an answer that is not one.
    let accepted = answers(&[(key, json!({"action": "accept", "content": {"name": "Ada"}}))]);
    let tampered = format!("{state}x");
    let reply = wire
        .request(
            "tools/call",
            retry(json!({"message": "?"}), accepted.clone(), &tampered),
        )
        .await;
    assert_eq!(code(&reply), Some(-32602), "{reply}");
    let reply = wire
        .request(
            "tools/call",
            retry(json!({"message": "other"}), accepted.clone(), state),
        )
        .await;
    assert_eq!(code(&reply), Some(-32602), "{reply}");
    let reply = wire
        .request(
            "tools/call",
            retry(json!({"message": "?"}), answers(&[(key, json!(12345))]), state),
        )
        .await;
    assert_eq!(code(&reply), Some(-32602), "{reply}");
    // A missing answer is asked for again; extra ones are ignored.
    let reply = wire
        .request(
            "tools/call",
            retry(json!({"message": "?"}), answers(&[("nope", json!({}))]), state),
        )
        .await;
    assert_eq!(reply["result"]["resultType"], "input_required", "{reply}");
    let mut extra = accepted.clone();
    extra["other"] = json!({"whatever": true});
    let reply = wire
        .request("tools/call", retry(json!({"message": "?"}), extra, state))
        .await;
    assert_eq!(text(&reply["result"]), "hello Ada");
    // A client that cannot answer is told what it lacks.
    let mut params = json!({"name": "elicit", "arguments": {"message": "?"}});
    params["_meta"] = meta(json!({"sampling": {}}));
    let reply = wire.request("tools/call", params).await;
    assert_eq!(code(&reply), Some(-32021), "{reply}");
    assert_eq!(
        reply["error"]["data"],
        json!({"requiredCapabilities": {"elicitation": {}}})
    );
}

/// A tool that asks two questions together, then a third, with a side
/// effect it keeps to one round.
fn asking_server(effects: Arc<AtomicU32>) -> McpServer {
    McpServer::builder("asking", "1")
        .tool("book", "Books", move |_: NoArgs, cx: McpContext| {
            let effects = Arc::clone(&effects);
            async move {
                let schema = form().as_object().cloned().unwrap_or_default();
                let (who, why) = tokio::join!(
                    cx.input("who").elicit("Who?", schema.clone()),
                    cx.input("why").elicit("Why?", schema.clone()),
                );
                let booking: u32 = cx
                    .once("booking", async { effects.fetch_add(1, Ordering::SeqCst) + 1 })
                    .await;
                let when = cx.input("when").elicit("When?", JsonObject::from(schema)).await?;
                let name =
                    |r: &jrpc_mcp::types::ElicitResult| r.content.as_ref().unwrap()["name"].to_string();
                Ok::<_, ToolError>(format!(
                    "{} {} {} #{booking}",
                    name(&who?),
                    name(&why?),
                    name(&when)
                ))
            }
        })
        .build()
}

#[tokio::test]
async fn questions_asked_together_go_out_together_and_once_runs_once() {
    let effects = Arc::new(AtomicU32::new(0));
    let mut wire = Wire::start(&asking_server(Arc::clone(&effects)));
    let call = |responses: Value, state: Option<&Value>| {
        let mut params = modern(json!({"name": "book", "arguments": {}}));
        params["inputResponses"] = responses;
        if let Some(state) = state {
            params["requestState"] = state.clone();
        }
        params
    };
    let round1 = wire
        .request("tools/call", modern(json!({"name": "book", "arguments": {}})))
        .await;
    let keys: Vec<&String> = round1["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["who", "why"]);
    let accept = |name: &str| json!({"action": "accept", "content": {"name": name}});
    let round2 = wire
        .request(
            "tools/call",
            call(
                answers(&[("who", accept("Ada")), ("why", accept("fun"))]),
                Some(&round1["result"]["requestState"]),
            ),
        )
        .await;
    let keys: Vec<&String> = round2["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["when"], "{round2}");
    assert_ne!(round2["result"]["requestState"], round1["result"]["requestState"]);
    // The last round answers only the new question: the earlier answers
    // come back in the state.
    let done = wire
        .request(
            "tools/call",
            call(
                answers(&[("when", accept("noon"))]),
                Some(&round2["result"]["requestState"]),
            ),
        )
        .await;
    assert_eq!(text(&done["result"]), r#""Ada" "fun" "noon" #1"#, "{done}");
    assert_eq!(
        effects.load(Ordering::SeqCst),
        1,
        "the side effect ran in one round only"
    );
}

#[tokio::test]
async fn listen_streams_carry_what_was_asked_for_until_cancelled() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    let listen = json!({"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen",
                        "params": modern(json!({"notifications": {"resourceSubscriptions": ["demo://counter"],
                                                                   "toolsListChanged": true}}))});
    wire.send(listen).await;
    let ack = wire.next().await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    // The demo's lists do not change: only the resource is honoured.
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourceSubscriptions": ["demo://counter"]})
    );
    let mut heard = Vec::new();
    let bumped = wire
        .request_collecting(
            "tools/call",
            modern(json!({"name": "bump", "arguments": {}})),
            &mut heard,
        )
        .await;
    assert_eq!(text(&bumped["result"]), "1");
    while heard.is_empty() {
        heard.push(wire.next().await);
    }
    assert_eq!(heard[0]["method"], "notifications/resources/updated");
    assert_eq!(heard[0]["params"]["uri"], "demo://counter");
    assert_eq!(
        heard[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    let read = wire
        .request("resources/read", modern(json!({"uri": "demo://counter"})))
        .await;
    assert_eq!(read["result"]["contents"][0]["text"], "1");
    // Cancelled, it says nothing more (not even a result).
    wire.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "sub-1"}}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let bumped = wire
        .request("tools/call", modern(json!({"name": "bump", "arguments": {}})))
        .await;
    assert_eq!(text(&bumped["result"]), "2");
    assert!(wire.next_within(Duration::from_millis(200)).await.is_none());
}

#[tokio::test]
async fn legacy_sessions_hear_of_changes_too() {
    let server = McpServer::builder("changing", "1")
        .list_changed(true)
        .tool("noop", "Does nothing", |_: NoArgs, _cx| async {
            Ok::<_, ToolError>("ok")
        })
        .build();
    let mut wire = Wire::start(&server);
    let init = wire.initialize().await;
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);
    server.changes().tools_changed();
    let note = wire.next().await;
    assert_eq!(note["method"], "notifications/tools/list_changed", "{note}");
    // The demo's counter, to a session that subscribed to it.
    let mut demo = Wire::start(&jrpc_mcp::demo::server());
    demo.initialize().await;
    let ok = demo
        .request("resources/subscribe", json!({"uri": "demo://counter"}))
        .await;
    assert_eq!(ok["result"], json!({}));
    let mut heard = Vec::new();
    demo.request_collecting("tools/call", json!({"name": "bump", "arguments": {}}), &mut heard)
        .await;
    while heard.is_empty() {
        heard.push(demo.next().await);
    }
    assert_eq!(heard[0]["method"], "notifications/resources/updated");
    assert_eq!(heard[0]["params"], json!({"uri": "demo://counter"}));
}

#[tokio::test]
async fn a_tool_runs_as_a_task_for_a_client_that_supports_them() {
    let mut wire = Wire::start(&jrpc_mcp::demo::conformance_server());
    let tasks = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}});
    let with_tasks = |mut params: Value| {
        params["_meta"] = meta(tasks.clone());
        params
    };
    let discover = wire.request("server/discover", with_tasks(json!({}))).await;
    assert_eq!(
        discover["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"],
        json!({})
    );
    // Without the extension: in the request.
    let now = wire
        .request(
            "tools/call",
            modern(json!({"name": "slow_compute", "arguments": {"seconds": 0}})),
        )
        .await;
    assert_eq!(now["result"]["resultType"], "complete", "{now}");
    // With it: a task at once, that asks and finishes.
    let created = wire
        .request(
            "tools/call",
            with_tasks(json!({"name": "confirm_delete", "arguments": {"filename": "a.txt"}})),
        )
        .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let mut task = json!({});
    for _ in 0..100 {
        task = wire.request("tasks/get", with_tasks(json!({"taskId": id}))).await;
        if task["result"]["status"] == "input_required" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(task["result"]["resultType"], "complete");
    assert_eq!(
        task["result"]["inputRequests"]["confirm"]["method"], "elicitation/create",
        "{task}"
    );
    let ack = wire
        .request(
            "tasks/update",
            with_tasks(json!({"taskId": id, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}})),
        )
        .await;
    assert_eq!(ack["result"]["resultType"], "complete");
    for _ in 0..100 {
        task = wire.request("tasks/get", with_tasks(json!({"taskId": id}))).await;
        if task["result"]["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(text(&task["result"]["result"]), "a.txt: true", "{task}");
    // The tasks methods need the extension declared.
    let refused = wire.request("tasks/get", modern(json!({"taskId": id}))).await;
    assert_eq!(refused["error"]["code"], -32021);
    let unknown = wire
        .request("tasks/get", with_tasks(json!({"taskId": "nope"})))
        .await;
    assert_eq!(unknown["error"]["code"], -32602);
}
