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
