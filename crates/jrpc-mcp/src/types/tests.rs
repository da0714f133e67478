//! The types against the schema's own examples: field names, tags, optional
//! members left out, and values read back the same.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use super::*;

/// `value` reads from `wire` and writes back exactly `wire`.
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(wire: Value) -> T {
    let value: T = serde_json::from_value(wire.clone()).unwrap_or_else(|e| panic!("{e}: {wire}"));
    assert_eq!(serde_json::to_value(&value).unwrap(), wire);
    value
}

#[test]
fn initialize_params_and_result() {
    let params: InitializeParams = round_trip(json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"roots": {"listChanged": true}, "sampling": {}, "elicitation": {"form": {}, "url": {}}},
        "clientInfo": {"name": "ExampleClient", "title": "Example Client Display Name", "version": "1.0.0",
                       "description": "An example MCP client", "websiteUrl": "https://example.com"}
    }));
    assert!(params.capabilities.elicitation.unwrap().supports_form());
    round_trip::<InitializeResult>(json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"logging": {}, "prompts": {"listChanged": true},
                         "resources": {"subscribe": true, "listChanged": true}, "tools": {"listChanged": true}},
        "serverInfo": {"name": "ExampleServer", "version": "1.0.0",
                       "icons": [{"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"]}]},
        "instructions": "Optional instructions for the client"
    }));
}

#[test]
fn unknown_members_from_newer_peers_are_ignored() {
    let params: InitializeParams = serde_json::from_value(json!({
        "protocolVersion": "2099-01-01",
        "capabilities": {"tasks": {"list": {}}, "somethingNew": true},
        "clientInfo": {"name": "c", "version": "1", "future": 1}
    }))
    .unwrap();
    assert_eq!(params.protocol_version, "2099-01-01");
}

#[test]
fn elicitation_modes() {
    let form_only = |v: Value| {
        serde_json::from_value::<ElicitationCapability>(v)
            .unwrap()
            .supports_form()
    };
    assert!(form_only(json!({})));
    assert!(form_only(json!({"form": {}})));
    assert!(form_only(json!({"form": {}, "url": {}})));
    assert!(!form_only(json!({"url": {}})));
}

#[test]
fn content_blocks_are_tagged_by_type() {
    let blocks: Vec<ContentBlock> = round_trip(json!([
        {"type": "text", "text": "Tool result text"},
        {"type": "image", "data": "base64-encoded-data", "mimeType": "image/png",
         "annotations": {"audience": ["user"], "priority": 0.9}},
        {"type": "audio", "data": "base64-encoded-audio-data", "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "file:///project/src/main.rs", "name": "main.rs",
         "description": "Primary application entry point", "mimeType": "text/x-rust"},
        {"type": "resource", "resource": {"uri": "file:///project/src/main.rs", "mimeType": "text/x-rust",
                                           "text": "fn main() {}"}},
        {"type": "resource", "resource": {"uri": "file:///logo.png", "blob": "aGVsbG8="}}
    ]));
    assert_eq!(blocks[0].as_text(), Some("Tool result text"));
    assert!(serde_json::from_value::<ContentBlock>(json!({"type": "video", "data": ""})).is_err());
}

#[test]
fn tools_and_results() {
    let tool: Tool = round_trip(json!({
        "name": "get_weather", "title": "Weather Information Provider",
        "description": "Get current weather information for a location",
        "inputSchema": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
        "outputSchema": {"type": "object", "properties": {"temperature": {"type": "number"}}},
        "annotations": {"readOnlyHint": true, "openWorldHint": true}
    }));
    assert_eq!(tool.annotations.unwrap().read_only_hint, Some(true));
    let result: CallToolResult = round_trip(json!({
        "content": [{"type": "text", "text": "{\"temperature\": 22.5}"}],
        "structuredContent": {"temperature": 22.5},
        "isError": false
    }));
    assert!(!result.failed());
    assert_eq!(
        serde_json::to_value(CallToolResult::error("no")).unwrap(),
        json!({"content": [{"type": "text", "text": "no"}], "isError": true})
    );
    let call: CallToolParams =
        round_trip(json!({"name": "x", "arguments": {"a": 1}, "_meta": {"progressToken": 5}}));
    assert_eq!(call.meta.unwrap().progress_token, Some(ProgressToken::Number(5)));
}

#[test]
fn resources_prompts_and_lists() {
    round_trip::<ListResourcesResult>(json!({
        "resources": [{"uri": "file:///project/src/main.rs", "name": "main.rs", "title": "Rust Software Application Main File",
                       "mimeType": "text/x-rust", "size": 1024}],
        "nextCursor": "next-page-cursor"
    }));
    round_trip::<ListResourceTemplatesResult>(json!({
        "resourceTemplates": [{"uriTemplate": "file:///{path}", "name": "Project Files", "mimeType": "application/octet-stream"}]
    }));
    let read: ReadResourceResult = round_trip(json!({
        "contents": [{"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hi"}, {"uri": "file:///b", "blob": "AA=="}]
    }));
    assert!(matches!(read.contents[1], ResourceContents::Blob(_)));
    round_trip::<GetPromptResult>(json!({
        "description": "Code review prompt",
        "messages": [{"role": "user", "content": {"type": "text", "text": "Please review this Python code"}}]
    }));
    round_trip::<ListPromptsResult>(json!({
        "prompts": [{"name": "code_review", "arguments": [{"name": "code", "description": "The code", "required": true}]}]
    }));
}

#[test]
fn logging_levels_are_ordered_by_severity() {
    let levels: Vec<LoggingLevel> = serde_json::from_value(json!([
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency"
    ]))
    .unwrap();
    assert_eq!(levels, LoggingLevel::ALL);
    assert!(levels.windows(2).all(|w| w[0] < w[1]));
    assert_eq!("warning".parse::<LoggingLevel>(), Ok(LoggingLevel::Warning));
    assert!("warn".parse::<LoggingLevel>().is_err());
    round_trip::<LoggingMessageParams>(
        json!({"level": "error", "logger": "database", "data": {"error": "x"}}),
    );
}

#[test]
fn progress_and_cancellation() {
    let p: ProgressParams = round_trip(
        json!({"progressToken": "abc123", "progress": 50.5, "total": 100.25, "message": "Reticulating splines..."}),
    );
    assert_eq!(p.progress_token, ProgressToken::String("abc123".into()));
    let whole = ProgressParams {
        progress: 3.0,
        total: Some(10.0),
        ..p.clone()
    };
    let text = serde_json::to_value(&whole).unwrap();
    assert_eq!(text["progress"], json!(3));
    assert_eq!(text["total"], json!(10));
    let c: CancelledParams = round_trip(json!({"requestId": "123", "reason": "User requested cancellation"}));
    assert_eq!(c.request_id, Some(jrpc::Id::from("123")));
}

#[test]
fn sampling_elicitation_and_roots() {
    let params: CreateMessageParams = round_trip(json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}],
        "modelPreferences": {"hints": [{"name": "claude-3-sonnet"}], "intelligencePriority": 0.8, "speedPriority": 0.5},
        "systemPrompt": "You are a helpful assistant.",
        "maxTokens": 100
    }));
    assert_eq!(params.max_tokens, 100);
    let one: CreateMessageResult = round_trip(json!({
        "role": "assistant", "content": {"type": "text", "text": "Paris."}, "model": "claude-3-sonnet-20240307",
        "stopReason": "endTurn"
    }));
    assert_eq!(one.joined_text(), "Paris.");
    let many: CreateMessageResult = round_trip(json!({
        "role": "assistant", "model": "m", "stopReason": "toolUse",
        "content": [{"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}}]
    }));
    assert_eq!(many.joined_text(), "Let me check.");
    round_trip::<ElicitParams>(json!({
        "mode": "form", "message": "Please provide your GitHub username",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    }));
    let accepted: ElicitResult = round_trip(json!({"action": "accept", "content": {"name": "octocat"}}));
    assert_eq!(accepted.action, ElicitAction::Accept);
    round_trip::<ElicitResult>(json!({"action": "decline"}));
    round_trip::<ListRootsResult>(
        json!({"roots": [{"uri": "file:///home/user/projects/myproject", "name": "My Project"}]}),
    );
}

// Revision 2026-07-28, against the schema's examples.

#[test]
fn the_request_envelope() {
    let envelope: RequestEnvelope = round_trip(json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "ExampleClient", "version": "1.0.0"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}},
            "extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}},
        "io.modelcontextprotocol/logLevel": "warning",
        "progressToken": "p-1"
    }));
    assert_eq!(envelope.log_level, Some(LoggingLevel::Warning));
    assert!(envelope
        .client_capabilities
        .extensions
        .unwrap()
        .contains_key("io.modelcontextprotocol/ui"));
    // The version and the capabilities are required; the rest is not.
    for missing in [
        json!({"io.modelcontextprotocol/clientCapabilities": {}}),
        json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"}),
        json!({"io.modelcontextprotocol/protocolVersion": 2026, "io.modelcontextprotocol/clientCapabilities": {}}),
        json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": null}),
    ] {
        assert!(
            serde_json::from_value::<RequestEnvelope>(missing.clone()).is_err(),
            "{missing}"
        );
    }
}

#[test]
fn discover_and_cacheable_results() {
    let discover: DiscoverResult = round_trip(json!({
        "resultType": "complete",
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}, "resources": {}},
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "ExampleServer", "version": "1.0.0"}},
        "instructions": "This server provides weather and resource utilities.",
        "ttlMs": 3600000,
        "cacheScope": "public"
    }));
    assert_eq!(discover.cache_scope, CacheScope::Public);
    let list: ListToolsResult = round_trip(json!({
        "resultType": "complete",
        "tools": [{"name": "get_weather", "inputSchema": {"type": "object"}}],
        "nextCursor": "next-page-cursor",
        "ttlMs": 300000,
        "cacheScope": "public"
    }));
    assert_eq!(
        (list.ttl_ms, list.result_type),
        (Some(300000), Some(ResultType::Complete))
    );
    round_trip::<ReadResourceResult>(json!({
        "resultType": "complete",
        "contents": [{"uri": "file:///project/src/main.rs", "mimeType": "text/x-rust", "text": "fn main() {}"}],
        "ttlMs": 60000,
        "cacheScope": "private"
    }));
    round_trip::<GetPromptResult>(json!({
        "resultType": "complete",
        "description": "Code review prompt",
        "messages": [{"role": "user", "content": {"type": "text", "text": "Please review"}}]
    }));
    // A legacy result has no resultType; one of an unknown kind keeps its name.
    let legacy: CallToolResult = round_trip(json!({"content": []}));
    assert_eq!(legacy.result_type, None);
    let other: CallToolResult = round_trip(json!({"resultType": "vendor_kind", "content": []}));
    assert_eq!(other.result_type, Some(ResultType::Other("vendor_kind".into())));
}

#[test]
fn input_required_results_and_retries() {
    let result: InputRequiredResult = round_trip(json!({
        "resultType": "input_required",
        "inputRequests": {
            "github_login": {"method": "elicitation/create", "params": {
                "message": "Please provide your GitHub username",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}},
            "capital_of_france": {"method": "sampling/createMessage", "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}],
                "maxTokens": 100}},
            "roots": {"method": "roots/list", "params": {}}
        },
        "requestState": "eyJsb2NhdGlvbiI6Ik5ldyBZb3JrIn0"
    }));
    let requests = result.input_requests.unwrap();
    assert_eq!(requests["roots"], InputRequest::ListRoots);
    assert_eq!(requests["github_login"].method(), "elicitation/create");
    round_trip::<InputRequiredResult>(json!({"resultType": "input_required", "requestState": "abc"}));
    let retry: CallToolParams = round_trip(json!({
        "name": "get_weather",
        "arguments": {},
        "inputResponses": {"github_login": {"action": "accept", "content": {"name": "octocat"}}},
        "requestState": "eyJsb2NhdGlvbiI6Ik5ldyBZb3JrIn0"
    }));
    assert!(retry.input_responses.unwrap().contains_key("github_login"));
    // Present but null is malformed, not absent.
    for bad in [
        json!({"name": "t", "inputResponses": null}),
        json!({"name": "t", "requestState": null}),
        json!({"name": "t", "inputResponses": [1]}),
    ] {
        assert!(
            serde_json::from_value::<CallToolParams>(bad.clone()).is_err(),
            "{bad}"
        );
    }
    assert!(serde_json::from_value::<InputRequest>(json!({"method": "tools/call", "params": {}})).is_err());
}

#[test]
fn subscriptions_and_errors() {
    let params: ListenParams = round_trip(json!({
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}},
        "notifications": {"toolsListChanged": true, "resourceSubscriptions": ["file:///project/config.json"]}
    }));
    assert!(!params.notifications.is_empty());
    assert!(SubscriptionFilter::default().is_empty());
    round_trip::<AcknowledgedParams>(json!({
        "_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"},
        "notifications": {"toolsListChanged": true}
    }));
    round_trip::<ResourceUpdatedParams>(
        json!({"_meta": {"io.modelcontextprotocol/subscriptionId": 1}, "uri": "file:///a"}),
    );
    round_trip::<UnsupportedVersionData>(
        json!({"supported": ["2026-07-28", "2025-11-25"], "requested": "1900-01-01"}),
    );
    round_trip::<MissingCapabilityData>(json!({"requiredCapabilities": {"elicitation": {}}}));
    assert_eq!(
        (
            codes::HEADER_MISMATCH,
            codes::MISSING_REQUIRED_CLIENT_CAPABILITY,
            codes::UNSUPPORTED_PROTOCOL_VERSION
        ),
        (-32020, -32021, -32022)
    );
}

#[test]
fn tasks() {
    let created: Task = round_trip(json!({
        "resultType": "task",
        "taskId": "786512e2-9e0d-44bd-8f29-789f320fe840",
        "status": "working",
        "statusMessage": "The operation is now in progress.",
        "createdAt": "2025-11-25T10:30:00Z",
        "lastUpdatedAt": "2025-11-25T10:40:00Z",
        "ttlMs": 60000,
        "pollIntervalMs": 5000
    }));
    assert!(!created.status.is_terminal());
    // ttlMs is required, and may be null.
    let unlimited: Task = round_trip(json!({
        "resultType": "complete", "taskId": "t", "status": "completed", "createdAt": "2025-11-25T10:30:00Z",
        "lastUpdatedAt": "2025-11-25T10:30:00Z", "ttlMs": null, "result": {"content": []}
    }));
    assert_eq!(unlimited.ttl_ms, None);
    round_trip::<TaskUpdateParams>(json!({"taskId": "t", "inputResponses": {"k": {"action": "cancel"}}}));
}

#[test]
fn versions() {
    assert_eq!(SUPPORTED_PROTOCOL_VERSIONS[0], LATEST_PROTOCOL_VERSION);
    assert!(is_modern("2026-07-28") && !is_modern("2025-11-25"));
    assert_eq!(negotiate_version("2026-07-28"), LATEST_LEGACY_VERSION);
}
