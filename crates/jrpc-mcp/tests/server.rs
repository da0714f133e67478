//! The MCP server end to end over in-memory pipes, driven by raw JSON-RPC
//! lines the way a client would write them, so that what is checked is the
//! wire, not this crate's own client.

mod common;

use std::time::Duration;

use common::{text, Wire};
use jrpc_mcp::server::{McpServer, NoArgs, ToolError};
use jrpc_mcp::types::{Resource, ResourceContents};
use serde_json::{json, Value};

#[tokio::test]
async fn nothing_but_ping_before_initialize() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    let ping = wire.request("ping", json!({})).await;
    assert_eq!(ping["result"], json!({}));
    for method in [
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/read",
        "prompts/list",
        "logging/setLevel",
    ] {
        let refused = wire.request(method, json!({})).await;
        assert_eq!(refused["error"]["code"], -32600, "{method}: {refused}");
    }
    // server/discover belongs to 2026-07-28: without its envelope it is
    // malformed; with it, it is served statelessly, initialize or not.
    let discover = wire.request("server/discover", json!({})).await;
    assert_eq!(discover["error"]["code"], -32602, "{discover}");
    let envelope = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                    "io.modelcontextprotocol/clientCapabilities": {}}});
    let discover = wire.request("server/discover", envelope).await;
    assert_eq!(
        discover["result"]["supportedVersions"][0], "2026-07-28",
        "{discover}"
    );

    let init = wire.initialize().await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(init["result"]["serverInfo"]["name"], "jrpc-demo");
    let capabilities = &init["result"]["capabilities"];
    for capability in ["tools", "resources", "prompts", "logging"] {
        assert!(
            capabilities[capability].is_object(),
            "{capability}: {capabilities}"
        );
    }
    let again = wire
        .request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}),
        )
        .await;
    assert_eq!(again["error"]["code"], -32600, "{again}");
}

#[tokio::test]
async fn versions_are_negotiated() {
    for (offered, answered) in [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("2026-07-28", "2025-11-25"),
        ("draft", "2025-11-25"),
    ] {
        let mut wire = Wire::start(&jrpc_mcp::demo::server());
        let init = wire
            .request(
                "initialize",
                json!({"protocolVersion": offered, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}),
            )
            .await;
        assert_eq!(init["result"]["protocolVersion"], answered, "offered {offered}");
    }
}

#[tokio::test]
async fn the_demo_tools_answer_as_the_contract_says() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    wire.initialize().await;
    let list = wire.request("tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
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
    for tool in tools {
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
    }
    let add = &tools[0];
    assert_eq!(add["inputSchema"]["properties"]["a"]["type"], "number");
    assert_eq!(add["outputSchema"]["type"], "object");
    assert_eq!(add["outputSchema"]["properties"]["result"]["type"], "number");

    let sum = wire.call_tool("add", json!({"a": 2, "b": 40})).await;
    assert_eq!(
        sum,
        json!({"content": [{"type": "text", "text": "42"}], "structuredContent": {"result": 42}})
    );
    let sum = wire.call_tool("add", json!({"a": 0.5, "b": -2})).await;
    assert_eq!(text(&sum), "-1.5");
    assert_eq!(sum["structuredContent"], json!({"result": -1.5}));
    let bad = wire.call_tool("add", json!({"a": "2", "b": 40})).await;
    assert_eq!(bad["isError"], true, "{bad}");
    let missing = wire.call_tool("add", json!({"a": 2})).await;
    assert_eq!(missing["isError"], true, "{missing}");

    assert_eq!(text(&wire.call_tool("echo", json!({"text": "hi"})).await), "hi");
    let fail = wire.call_tool("fail", json!({})).await;
    assert_eq!(fail["isError"], true);
    assert!(!text(&fail).is_empty());

    let unknown = wire
        .request("tools/call", json!({"name": "nope", "arguments": {}}))
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    // Arguments may be left out for a tool that takes none.
    let no_args = wire.request("tools/call", json!({"name": "fail"})).await;
    assert_eq!(no_args["result"]["isError"], true, "{no_args}");
}

#[tokio::test]
async fn sleep_reports_increasing_progress_and_finishes() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    wire.initialize().await;
    let mut notes = Vec::new();
    let response = wire
        .request_collecting(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 300}, "_meta": {"progressToken": "tok-1"}}),
            &mut notes,
        )
        .await;
    assert_eq!(text(&response["result"]), "slept 300");
    assert!(notes.len() >= 2, "{notes:?}");
    let mut last = -1.0;
    for note in &notes {
        assert_eq!(note["method"], "notifications/progress");
        assert_eq!(note["params"]["progressToken"], "tok-1");
        assert_eq!(note["params"]["total"], 300);
        let progress = note["params"]["progress"].as_f64().unwrap();
        assert!(progress > last, "{notes:?}");
        last = progress;
    }
    // No token, no progress.
    let quiet = wire
        .request("tools/call", json!({"name": "sleep", "arguments": {"ms": 120}}))
        .await;
    assert_eq!(text(&quiet["result"]), "slept 120");
}

#[tokio::test]
async fn a_cancelled_sleep_stops_and_is_never_answered() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    wire.initialize().await;
    wire.send(json!({"jsonrpc": "2.0", "id": "long", "method": "tools/call",
                     "params": {"name": "sleep", "arguments": {"ms": 60000}, "_meta": {"progressToken": 7}}}))
        .await;
    let first = wire.next().await;
    assert_eq!(first["method"], "notifications/progress", "{first}");
    assert_eq!(first["params"]["progressToken"], 7);
    wire.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": "long", "reason": "test"}}))
        .await;
    // Progress already on its way may still arrive; then nothing: no more
    // progress and no response at all.
    let mut after = Vec::new();
    while let Some(message) = wire.next_within(Duration::from_millis(400)).await {
        after.push(message);
        assert!(
            after.len() < 4,
            "the sleep goes on after its cancellation: {after:?}"
        );
    }
    assert!(
        after.iter().all(|m| m["method"] == "notifications/progress"),
        "a cancelled request was answered: {after:?}"
    );
    assert!(wire.next_within(Duration::from_millis(300)).await.is_none());
    let ping = wire.request("ping", json!({})).await;
    assert_eq!(ping["result"], json!({}));
}

#[tokio::test]
async fn requests_to_the_client_need_its_capabilities() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    wire.initialize().await;
    for tool in ["sample", "elicit", "list_roots"] {
        let args = json!({"prompt": "p", "message": "m"});
        let mut other = Vec::new();
        let response = wire
            .request_collecting("tools/call", json!({"name": tool, "arguments": args}), &mut other)
            .await;
        assert_eq!(response["result"]["isError"], true, "{tool}: {response}");
        assert!(
            other.is_empty(),
            "{tool} asked a client that cannot answer: {other:?}"
        );
    }
}

/// Serves one request from the server: checks its method and answers it.
async fn answer(wire: &mut Wire, method: &str, result: Value) -> Value {
    let request = wire.next().await;
    assert_eq!(request["method"], method, "{request}");
    wire.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": result}))
        .await;
    request
}

#[tokio::test]
async fn sampling_elicitation_and_roots_go_to_the_client() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    wire.initialize_with(
        json!({"sampling": {}, "elicitation": {"form": {}}, "roots": {"listChanged": true}}),
    )
    .await;

    wire.send(json!({"jsonrpc": "2.0", "id": 100, "method": "tools/call",
                     "params": {"name": "sample", "arguments": {"prompt": "2+2?"}}}))
        .await;
    let request = answer(
        &mut wire,
        "sampling/createMessage",
        json!({"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}),
    )
    .await;
    assert_eq!(request["params"]["messages"][0]["content"]["text"], "2+2?");
    assert!(request["params"]["maxTokens"].as_u64().unwrap() > 0);
    assert_eq!(text(&wire.next().await["result"]), "4");

    for (action, expected) in [
        ("accept", "hello Ada"),
        ("decline", "declined"),
        ("cancel", "cancelled"),
    ] {
        wire.send(json!({"jsonrpc": "2.0", "id": 101, "method": "tools/call",
                         "params": {"name": "elicit", "arguments": {"message": "Who?"}}}))
            .await;
        let mut result = json!({"action": action});
        if action == "accept" {
            result["content"] = json!({"name": "Ada"});
        }
        let request = answer(&mut wire, "elicitation/create", result).await;
        let params = &request["params"];
        assert_eq!(params["mode"], "form");
        assert_eq!(params["message"], "Who?");
        assert_eq!(params["requestedSchema"]["type"], "object");
        let properties = params["requestedSchema"]["properties"].as_object().unwrap();
        assert_eq!(properties.len(), 1);
        assert_eq!(properties["name"]["type"], "string");
        assert_eq!(text(&wire.next().await["result"]), expected, "{action}");
    }

    wire.send(json!({"jsonrpc": "2.0", "id": 102, "method": "tools/call",
                     "params": {"name": "list_roots", "arguments": {}}}))
        .await;
    answer(
        &mut wire,
        "roots/list",
        json!({"roots": [{"uri": "file:///a", "name": "a"}, {"uri": "file:///b"}]}),
    )
    .await;
    assert_eq!(text(&wire.next().await["result"]), "file:///a\nfile:///b");

    // A client that answers with an error: the tool fails, the session goes on.
    wire.send(json!({"jsonrpc": "2.0", "id": 103, "method": "tools/call",
                     "params": {"name": "sample", "arguments": {"prompt": "x"}}}))
        .await;
    let request = wire.next().await;
    wire.send(
        json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -1, "message": "user rejected"}}),
    )
    .await;
    let failed = wire.next().await;
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    assert!(text(&failed["result"]).contains("user rejected"), "{failed}");
}

#[tokio::test]
async fn older_clients_get_no_elicitation_mode() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    let init = wire
        .request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
                   "clientInfo": {"name": "old", "version": "1"}}),
        )
        .await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    wire.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    wire.send(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                     "params": {"name": "elicit", "arguments": {"message": "Who?"}}}))
        .await;
    let request = answer(&mut wire, "elicitation/create", json!({"action": "decline"})).await;
    assert!(request["params"].get("mode").is_none(), "{request}");
    assert_eq!(text(&wire.next().await["result"]), "declined");
}

#[tokio::test]
async fn log_messages_follow_the_level_the_client_sets() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    wire.initialize().await;
    // Info by default: echo's debug message is not sent.
    let mut notes = Vec::new();
    wire.request_collecting(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "a"}}),
        &mut notes,
    )
    .await;
    assert!(notes.is_empty(), "{notes:?}");
    let set = wire.request("logging/setLevel", json!({"level": "debug"})).await;
    assert_eq!(set["result"], json!({}));
    wire.request_collecting(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "b"}}),
        &mut notes,
    )
    .await;
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0]["method"], "notifications/message");
    assert_eq!(notes[0]["params"]["level"], "debug");
    assert_eq!(notes[0]["params"]["data"]["text"], "b");
    let bad = wire.request("logging/setLevel", json!({"level": "loud"})).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}

#[tokio::test]
async fn resources_templates_and_prompts() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    wire.initialize().await;
    let resources = wire.request("resources/list", json!({})).await;
    assert_eq!(
        resources["result"]["resources"],
        json!([{"uri": "demo://greeting", "name": "greeting", "description": "A greeting", "mimeType": "text/plain"},
               {"uri": "demo://counter", "name": "counter", "description": "How many times bump was called",
                "mimeType": "text/plain"}])
    );
    let templates = wire.request("resources/templates/list", json!({})).await;
    assert_eq!(
        templates["result"]["resourceTemplates"][0]["uriTemplate"],
        "demo://echo/{text}"
    );
    let greeting = wire
        .request("resources/read", json!({"uri": "demo://greeting"}))
        .await;
    assert_eq!(
        greeting["result"]["contents"],
        json!([{"uri": "demo://greeting", "mimeType": "text/plain", "text": "hello"}])
    );
    let echo = wire
        .request("resources/read", json!({"uri": "demo://echo/abc"}))
        .await;
    assert_eq!(echo["result"]["contents"][0]["text"], "abc");
    assert_eq!(echo["result"]["contents"][0]["uri"], "demo://echo/abc");
    let unknown = wire
        .request("resources/read", json!({"uri": "demo://nope"}))
        .await;
    assert_eq!(unknown["error"]["code"], -32002, "{unknown}");
    assert_eq!(unknown["error"]["data"]["uri"], "demo://nope");

    let prompts = wire.request("prompts/list", json!({})).await;
    let greet = &prompts["result"]["prompts"][0];
    assert_eq!(greet["name"], "greet");
    assert_eq!(greet["arguments"][0]["name"], "name");
    assert_eq!(greet["arguments"][0]["required"], true);
    let got = wire
        .request(
            "prompts/get",
            json!({"name": "greet", "arguments": {"name": "Grace"}}),
        )
        .await;
    let message = &got["result"]["messages"][0];
    assert_eq!(message["role"], "user");
    assert!(
        message["content"]["text"].as_str().unwrap().contains("Grace"),
        "{got}"
    );
    let missing = wire.request("prompts/get", json!({"name": "greet"})).await;
    assert_eq!(missing["error"]["code"], -32602);
    let unknown = wire.request("prompts/get", json!({"name": "nope"})).await;
    assert_eq!(unknown["error"]["code"], -32602);
}

#[tokio::test]
async fn lists_are_paged_with_cursors() {
    let mut builder = McpServer::builder("paged", "1").page_size(2);
    for i in 0..5 {
        builder = builder.tool(format!("t{i}"), "a tool", |_: NoArgs, _cx| async {
            Ok::<_, ToolError>("ok")
        });
    }
    let mut wire = Wire::start(&builder.build());
    wire.initialize().await;
    let mut names = Vec::new();
    let mut cursor = None;
    loop {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = wire.request("tools/list", params).await;
        let tools = page["result"]["tools"].as_array().unwrap();
        assert!(tools.len() <= 2);
        names.extend(tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()));
        match page["result"].get("nextCursor") {
            Some(next) => cursor = Some(next.as_str().unwrap().to_owned()),
            None => break,
        }
    }
    assert_eq!(names, ["t0", "t1", "t2", "t3", "t4"]);
    let bad = wire
        .request("tools/list", json!({"cursor": "not-a-cursor"}))
        .await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    // A server without resources or prompts does not offer them.
    let absent = wire.request("resources/list", json!({})).await;
    assert_eq!(absent["error"]["code"], -32601, "{absent}");
}

#[tokio::test]
async fn no_requests_to_the_client_before_it_is_initialized() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    wire.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
               "clientInfo": {"name": "slow", "version": "1"}}),
    )
    .await;
    // No notifications/initialized yet: the tool waits before sampling.
    wire.send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                     "params": {"name": "sample", "arguments": {"prompt": "p"}}}))
        .await;
    assert!(wire.next_within(Duration::from_millis(300)).await.is_none());
    wire.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    answer(
        &mut wire,
        "sampling/createMessage",
        json!({"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}),
    )
    .await;
    assert_eq!(text(&wire.next().await["result"]), "ok");
}

#[tokio::test]
async fn ids_mcp_forbids_and_notifications_sent_as_requests_are_refused() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    wire.initialize().await;
    for (id, code) in [(json!(null), -32600), (json!(1.5), -32600)] {
        wire.send(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}))
            .await;
        let refused = wire.next().await;
        assert_eq!(refused["error"]["code"], code, "{refused}");
    }
    let refused = wire.request("notifications/initialized", json!({})).await;
    assert_eq!(refused["error"]["code"], -32601, "{refused}");
    let ok = wire.request("ping", json!({})).await;
    assert_eq!(ok["result"], json!({}));
}

#[tokio::test]
async fn pipelined_requests_after_initialized_run_in_order() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    // Everything in one burst, as a pipelining client writes it.
    wire.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                     "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                "clientInfo": {"name": "fast", "version": "1"}}}))
        .await;
    assert_eq!(wire.next().await["id"], 1);
    wire.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    wire.send(json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "debug"}}))
        .await;
    wire.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                     "params": {"name": "echo", "arguments": {"text": "x"}}}))
        .await;
    let mut seen = Vec::new();
    while seen.iter().filter(|m: &&Value| m.get("id").is_some()).count() < 2 {
        seen.push(wire.next().await);
    }
    assert!(
        seen.iter().any(|m| m["method"] == "notifications/message"),
        "echo ran before setLevel: {seen:?}"
    );
}

#[tokio::test]
async fn schemas_are_plain_and_odd_progress_tokens_are_ignored() {
    let mut wire = Wire::start(&jrpc_mcp::demo::server());
    wire.initialize().await;
    let list = wire.request("tools/list", json!({})).await;
    let text = list["result"].to_string();
    for odd in ["$schema", "\"title\"", "uint64", "$ref", "$defs"] {
        assert!(!text.contains(odd), "{odd} in {text}");
    }
    let sleep = &list["result"]["tools"][2];
    assert_eq!(sleep["inputSchema"]["properties"]["ms"]["type"], "integer");
    let call = wire
        .request(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 10}, "_meta": {"progressToken": 1.5}}),
        )
        .await;
    assert_eq!(call["result"]["content"][0]["text"], "slept 10", "{call}");
}

#[tokio::test]
async fn completions_suggest_argument_values() {
    use jrpc_mcp::types::{Completion, CompletionReference, Prompt};
    let server = McpServer::builder("complete", "1")
        .prompt(
            Prompt::new("pick").argument("language", "A language", true),
            |_, _cx| async { Ok::<_, jrpc::Error>(Vec::<jrpc_mcp::types::PromptMessage>::new()) },
        )
        .completion(|p, _cx| async move {
            let CompletionReference::Prompt { name } = &p.reference else {
                return Err(jrpc::Error::invalid_params());
            };
            assert_eq!(name, "pick");
            let all = (0..150).map(|n| format!("{}{n}", p.argument.value));
            Ok(Completion::of(all))
        })
        .build();
    let mut wire = Wire::start(&server);
    let init = wire.initialize().await;
    assert_eq!(init["result"]["capabilities"]["completions"], json!({}));
    let reply = wire
        .request(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "pick"}, "argument": {"name": "language", "value": "py"}}),
        )
        .await;
    let completion = &reply["result"]["completion"];
    assert_eq!(completion["values"].as_array().unwrap().len(), 100);
    assert_eq!(completion["values"][0], "py0");
    assert_eq!(completion["total"], 150);
    assert_eq!(completion["hasMore"], true);
    // The demo offers no completions: the method is not there.
    let mut demo = Wire::start(&jrpc_mcp::demo::server());
    demo.initialize().await;
    let absent = demo
        .request(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": ""}}),
        )
        .await;
    assert_eq!(absent["error"]["code"], -32601);
}

#[tokio::test]
async fn resource_subscriptions_when_offered() {
    let mut wire = Wire::start(&jrpc_mcp::demo::conformance_server());
    let init = wire.initialize().await;
    assert_eq!(init["result"]["capabilities"]["resources"]["subscribe"], true);
    for method in ["resources/subscribe", "resources/unsubscribe"] {
        let ok = wire
            .request(method, json!({"uri": "test://watched-resource"}))
            .await;
        assert_eq!(ok["result"], json!({}), "{method}: {ok}");
    }
    let unknown = wire
        .request("resources/subscribe", json!({"uri": "test://nothing"}))
        .await;
    assert_eq!(unknown["error"]["code"], -32002);
    // A server that does not offer subscriptions has no such method.
    let plain = McpServer::builder("plain", "1")
        .resource(Resource::new("demo://r", "r"), |uri, _cx| async move {
            Ok::<_, jrpc::Error>(ResourceContents::text(uri, None, "r"))
        })
        .build();
    let mut plain = Wire::start(&plain);
    let init = plain.initialize().await;
    assert_eq!(init["result"]["capabilities"]["resources"]["subscribe"], false);
    let absent = plain
        .request("resources/subscribe", json!({"uri": "demo://r"}))
        .await;
    assert_eq!(absent["error"]["code"], -32601);
}

/// A shared state whose broadcast takes a while (a NATS stream electing a
/// new leader), and says when a change has gone out.
#[derive(Debug, Default)]
struct SlowBroadcast {
    records: jrpc_mcp::server::shared::InMemory,
    published: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl jrpc_mcp::server::shared::SharedState for SlowBroadcast {
    fn get<'a>(
        &'a self,
        space: jrpc_mcp::server::shared::Space,
        key: &'a str,
    ) -> jrpc_mcp::server::shared::StateFuture<'a, Option<jrpc_mcp::server::shared::Entry>> {
        self.records.get(space, key)
    }
    fn create<'a>(
        &'a self,
        space: jrpc_mcp::server::shared::Space,
        key: &'a str,
        value: bytes::Bytes,
    ) -> jrpc_mcp::server::shared::StateFuture<'a, Option<u64>> {
        self.records.create(space, key, value)
    }
    fn update<'a>(
        &'a self,
        space: jrpc_mcp::server::shared::Space,
        key: &'a str,
        value: bytes::Bytes,
        revision: u64,
    ) -> jrpc_mcp::server::shared::StateFuture<'a, Option<u64>> {
        self.records.update(space, key, value, revision)
    }
    fn delete<'a>(
        &'a self,
        space: jrpc_mcp::server::shared::Space,
        key: &'a str,
    ) -> jrpc_mcp::server::shared::StateFuture<'a, ()> {
        self.records.delete(space, key)
    }
    fn publish(&self, _message: bytes::Bytes) -> jrpc_mcp::server::shared::StateFuture<'_, ()> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            self.published.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        })
    }
    fn events(&self) -> futures_util::stream::BoxStream<'static, jrpc_mcp::server::shared::Event> {
        self.records.events()
    }
    fn is_shared(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn bump_answers_once_the_other_replicas_can_hear_of_it() {
    let state = SlowBroadcast::default();
    let published = std::sync::Arc::clone(&state.published);
    let server = jrpc_mcp::demo::builder().shared_state(state).build();
    let mut wire = Wire::start(&server);
    wire.initialize().await;
    let bumped = wire.call_tool("bump", json!({})).await;
    assert_eq!(text(&bumped), "1", "{bumped}");
    // Answered after the broadcast, not before: a replica lost right after
    // answering would otherwise take the notification with it.
    assert_eq!(published.load(std::sync::atomic::Ordering::SeqCst), 1);
}
