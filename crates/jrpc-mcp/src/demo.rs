//! The demo server: the contract other tools test against (`jrpc mcp serve
//! --stdio`). Keep its names and behaviour exact.
//!
//! | tool | arguments | result |
//! |---|---|---|
//! | `add` | `{a: number, b: number}` | text `"<sum>"`, `structuredContent {"result": <sum>}`, with an output schema |
//! | `echo` | `{text: string}` | the text (and a debug log message) |
//! | `sleep` | `{ms: integer}` | waits, reporting progress at least every 100 ms when asked; `"slept <ms>"` |
//! | `sample` | `{prompt: string}` | asks the client to sample; its text |
//! | `elicit` | `{message: string}` | asks the user for a `name`: `"hello <name>"`, `"declined"` or `"cancelled"` |
//! | `list_roots` | `{}` | the client's root URIs, one per line |
//! | `fail` | `{}` | a result with `isError: true` |
//!
//! Resources: `demo://greeting` (`"hello"`) and the template
//! `demo://echo/{text}`. Prompt: `greet` with a required `name`.

use std::time::Duration;

use jrpc::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Number;

use crate::server::{McpContext, McpServer, McpServerBuilder, NoArgs, Structured, ToolError};
use crate::types::{
    CallToolResult, Completion, ContentBlock, CreateMessageParams, ElicitAction, EmbeddedResource,
    JsonObject, LoggingLevel, Prompt, PromptMessage, Resource, ResourceContents, ResourceTemplate, Role,
    Tool,
};

/// The longest `sleep` accepted: 10 minutes.
const MAX_SLEEP_MS: u64 = 600_000;
/// How often `sleep` reports progress.
const PROGRESS_EVERY: Duration = Duration::from_millis(50);

#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    /// The first number.
    a: Number,
    /// The second number.
    b: Number,
}

#[derive(Serialize, JsonSchema)]
struct Sum {
    /// `a + b`.
    result: Number,
}

#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    /// The text to send back.
    text: String,
}

#[derive(Deserialize, JsonSchema)]
struct SleepArgs {
    /// How long to sleep, in milliseconds.
    ms: u64,
}

#[derive(Deserialize, JsonSchema)]
struct SampleArgs {
    /// What to ask the client's model.
    prompt: String,
}

#[derive(Deserialize, JsonSchema)]
struct ElicitArgs {
    /// What to ask the user.
    message: String,
}

/// `a + b`, exact for integers (as JSON integers), else as floating point.
fn add(a: &Number, b: &Number) -> Result<Number, ToolError> {
    if let (Some(a), Some(b)) = (a.as_i64(), b.as_i64()) {
        if let Some(sum) = a.checked_add(b) {
            return Ok(sum.into());
        }
    }
    let (Some(a), Some(b)) = (a.as_f64(), b.as_f64()) else {
        return Err(ToolError::new("a and b must be numbers"));
    };
    Number::from_f64(a + b).ok_or_else(|| ToolError::new("the sum is not a finite number"))
}

async fn sleep(args: SleepArgs, cx: McpContext) -> Result<String, ToolError> {
    if args.ms > MAX_SLEEP_MS {
        return Err(ToolError::new(format!("ms may be at most {MAX_SLEEP_MS}")));
    }
    let total = Duration::from_millis(args.ms);
    let start = tokio::time::Instant::now();
    let deadline = start + total;
    let mut ticks = tokio::time::interval(PROGRESS_EVERY);
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => break,
            _ = ticks.tick() => {
                let elapsed = start.elapsed().min(total).as_millis() as f64;
                cx.progress(elapsed, Some(args.ms as f64), None).await;
            }
        }
    }
    cx.progress(args.ms as f64, Some(args.ms as f64), Some("done"))
        .await;
    Ok(format!("slept {}", args.ms))
}

fn name_form() -> JsonObject {
    let schema = serde_json::json!({
        "type": "object",
        "properties": { "name": { "type": "string", "description": "Your name" } },
        "required": ["name"],
    });
    match schema {
        serde_json::Value::Object(map) => map,
        _ => unreachable!("an object literal"),
    }
}

/// The demo server.
pub fn server() -> McpServer {
    builder().build()
}

fn builder() -> McpServerBuilder {
    McpServer::builder("jrpc-demo", env!("CARGO_PKG_VERSION"))
        .title("jrpc demo MCP server")
        .instructions(
            "A demo server: add and echo compute, sleep reports progress and can be cancelled, \
             sample/elicit/list_roots ask the client, fail always fails.",
        )
        .tool("add", "Adds two numbers", |args: AddArgs, _cx| async move {
            let sum = add(&args.a, &args.b)?;
            Ok(Structured::new(Sum { result: sum.clone() }).text(sum.to_string()))
        })
        .tool("echo", "Returns the text it is given", |args: EchoArgs, cx: McpContext| async move {
            cx.log(LoggingLevel::Debug, serde_json::json!({ "tool": "echo", "text": args.text }))
                .await;
            Ok(args.text)
        })
        .tool(
            "sleep",
            "Sleeps for ms milliseconds, reporting progress; can be cancelled",
            sleep,
        )
        .tool(
            "sample",
            "Asks the client's model to answer a prompt",
            |args: SampleArgs, cx: McpContext| async move {
                let result = cx.sample(CreateMessageParams::new(args.prompt, 256)).await?;
                Ok(result.joined_text())
            },
        )
        .tool("elicit", "Asks the user for their name", |args: ElicitArgs, cx: McpContext| async move {
            let answer = cx.elicit(args.message, name_form()).await?;
            Ok(match answer.action {
                ElicitAction::Accept => {
                    let name = answer
                        .content
                        .as_ref()
                        .and_then(|c| c.get("name"))
                        .and_then(|n| n.as_str())
                        .ok_or_else(|| ToolError::new("the accepted form has no name"))?;
                    format!("hello {name}")
                }
                ElicitAction::Decline => "declined".to_owned(),
                ElicitAction::Cancel => "cancelled".to_owned(),
            })
        })
        .tool("list_roots", "Lists the client's roots, one URI per line", |_: NoArgs, cx: McpContext| async move {
            let roots = cx.list_roots().await?;
            let uris: Vec<String> = roots.roots.into_iter().map(|root| root.uri).collect();
            Ok(uris.join("\n"))
        })
        .tool("fail", "Always fails (a result with isError)", |_: NoArgs, _cx| async move {
            Err::<String, _>(ToolError::new("this tool always fails"))
        })
        .resource(
            Resource::new("demo://greeting", "greeting")
                .description("A greeting")
                .mime_type("text/plain"),
            |uri, _cx| async move { Ok::<_, Error>(ResourceContents::text(uri, Some("text/plain"), "hello")) },
        )
        .resource_template(
            ResourceTemplate::new("demo://echo/{text}", "echo")
                .description("Echoes the text in its URI")
                .mime_type("text/plain"),
            |uri, vars, _cx| async move {
                let text = vars.get("text").cloned().unwrap_or_default();
                Ok::<_, Error>(ResourceContents::text(uri, Some("text/plain"), text))
            },
        )
        .prompt(
            Prompt::new("greet")
                .description("Greets someone by name")
                .argument("name", "Who to greet", true),
            |args, _cx| async move {
                let name = args.get("name").cloned().unwrap_or_default();
                Ok::<_, Error>(vec![PromptMessage::text(
                    Role::User,
                    format!("Please greet {name} warmly."),
                )])
            },
        )
}

/// A 1×1 PNG.
const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A tiny WAV file.
const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

fn object(value: serde_json::Value) -> JsonObject {
    match value {
        serde_json::Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

fn embedded(uri: &str, mime: &str, text: &str) -> ContentBlock {
    ContentBlock::Resource(EmbeddedResource {
        resource: ResourceContents::text(uri, Some(mime), text),
        annotations: None,
        meta: None,
    })
}

fn audio(data: &str, mime: &str) -> ContentBlock {
    ContentBlock::Audio(crate::types::AudioContent {
        data: data.to_owned(),
        mime_type: mime.to_owned(),
        annotations: None,
        meta: None,
    })
}

/// The demo server with the fixtures of the official MCP conformance suite
/// (`@modelcontextprotocol/conformance`) besides: the tools, resources and
/// prompts its server scenarios call (`jrpc mcp serve --conformance`).
pub fn conformance_server() -> McpServer {
    builder()
        .resource_subscriptions(true)
        .tool("test_simple_text", "Returns simple text", |_: NoArgs, _cx| async {
            Ok::<_, ToolError>("This is a simple text response for testing.")
        })
        .tool("test_image_content", "Returns an image", |_: NoArgs, _cx| async {
            Ok::<_, ToolError>(ContentBlock::image(PNG, "image/png"))
        })
        .tool("test_audio_content", "Returns audio", |_: NoArgs, _cx| async {
            Ok::<_, ToolError>(audio(WAV, "audio/wav"))
        })
        .tool("test_embedded_resource", "Returns an embedded resource", |_: NoArgs, _cx| async {
            Ok::<_, ToolError>(embedded("test://embedded-resource", "text/plain", "This is an embedded resource content."))
        })
        .tool("test_multiple_content_types", "Returns text, an image and a resource", |_: NoArgs, _cx| async {
            Ok::<_, ToolError>(vec![
                ContentBlock::text("Multiple content types test:"),
                ContentBlock::image(PNG, "image/png"),
                embedded("test://mixed-content-resource", "application/json", r#"{"test":"data","value":123}"#),
            ])
        })
        .tool("test_tool_with_logging", "Logs three messages while it runs", |_: NoArgs, cx: McpContext| async move {
            for (i, message) in ["Tool execution started", "Tool processing data", "Tool execution completed"].iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                cx.log(LoggingLevel::Info, message).await;
            }
            Ok::<_, ToolError>("Tool with logging executed successfully")
        })
        .tool("test_error_handling", "Always fails (isError)", |_: NoArgs, _cx| async {
            Err::<String, _>(ToolError::new("This tool intentionally returns an error for testing"))
        })
        .tool("test_tool_with_progress", "Reports progress in three steps", |_: NoArgs, cx: McpContext| async move {
            for (i, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                let message = format!("Completed step {step} of 100");
                cx.progress(step, Some(100.0), Some(&message)).await;
            }
            Ok::<_, ToolError>(format!("Progress test completed ({} progress token)", if cx.progress_token().is_some() { "with a" } else { "without a" }))
        })
        .tool("test_sampling", "Asks the client's model", |args: SampleArgs, cx: McpContext| async move {
            let result = cx.sample(CreateMessageParams::new(args.prompt, 100)).await?;
            Ok::<_, ToolError>(format!("LLM response: {}", result.joined_text()))
        })
        .tool("test_elicitation", "Asks the user for information", |args: ElicitArgs, cx: McpContext| async move {
            let schema = object(serde_json::json!({
                "type": "object",
                "properties": {
                    "username": {"type": "string", "description": "Your username"},
                    "email": {"type": "string", "description": "Your email address", "format": "email"},
                },
                "required": ["username", "email"],
            }));
            let answer = cx.elicit(args.message, schema).await?;
            Ok::<_, ToolError>(format!("User response: action={:?}, content={}", answer.action, serde_json::Value::Object(answer.content.unwrap_or_default())))
        })
        .tool("test_elicitation_sep1034_defaults", "Asks with defaults for every field", |_: NoArgs, cx: McpContext| async move {
            let schema = object(serde_json::json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "User name", "default": "John Doe"},
                    "age": {"type": "integer", "description": "User age", "default": 30},
                    "score": {"type": "number", "description": "User score", "default": 95.5},
                    "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                    "verified": {"type": "boolean", "description": "Verification status", "default": true},
                },
                "required": [],
            }));
            let answer = cx.elicit("Please review and update the form fields with defaults", schema).await?;
            Ok::<_, ToolError>(format!("Elicitation completed: action={:?}, content={}", answer.action, serde_json::Value::Object(answer.content.unwrap_or_default())))
        })
        .tool("test_elicitation_sep1330_enums", "Asks with every kind of enum", |_: NoArgs, cx: McpContext| async move {
            let schema = object(serde_json::json!({
                "type": "object",
                "properties": {
                    "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"},
                    ]},
                    "legacyEnum": {"type": "string", "description": "Select one option (legacy)", "enum": ["opt1", "opt2", "opt3"],
                                   "enumNames": ["Option One", "Option Two", "Option Three"]},
                    "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1, "maxItems": 3,
                                      "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                    "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1, "maxItems": 3,
                                    "items": {"anyOf": [
                                        {"const": "value1", "title": "First Choice"},
                                        {"const": "value2", "title": "Second Choice"},
                                        {"const": "value3", "title": "Third Choice"},
                                    ]}},
                },
                "required": [],
            }));
            let answer = cx.elicit("Please select options from the enum fields", schema).await?;
            Ok::<_, ToolError>(format!("Elicitation completed: action={:?}, content={}", answer.action, serde_json::Value::Object(answer.content.unwrap_or_default())))
        })
        .raw_tool(
            Tool::new("json_schema_2020_12_tool")
                .description("Tool with JSON Schema 2020-12 features")
                .input_schema(object(serde_json::json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
                    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
                    "additionalProperties": false,
                }))),
            |args, _cx| async move { Ok(CallToolResult::text(format!("JSON Schema 2020-12 tool called with: {}", serde_json::Value::Object(args)))) },
        )
        .tool("test_reconnection", "Completes (this server keeps the stream open)", |_: NoArgs, _cx| async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<_, ToolError>("Reconnection test completed successfully")
        })
        .resource(
            Resource::new("test://static-text", "static-text").description("A static text resource").mime_type("text/plain"),
            |uri, _cx| async move { Ok::<_, Error>(ResourceContents::text(uri, Some("text/plain"), "This is the content of the static text resource.")) },
        )
        .resource(
            Resource::new("test://static-binary", "static-binary").description("A static binary resource").mime_type("image/png"),
            |uri, _cx| async move { Ok::<_, Error>(ResourceContents::blob(uri, Some("image/png"), PNG)) },
        )
        .resource(
            Resource::new("test://watched-resource", "watched-resource").description("A resource to subscribe to").mime_type("text/plain"),
            |uri, _cx| async move { Ok::<_, Error>(ResourceContents::text(uri, Some("text/plain"), "Watched resource content")) },
        )
        .resource_template(
            ResourceTemplate::new("test://template/{id}/data", "template").description("Data by id").mime_type("application/json"),
            |uri, vars, _cx| async move {
                let id = vars.get("id").cloned().unwrap_or_default();
                let text = serde_json::json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")}).to_string();
                Ok::<_, Error>(ResourceContents::text(uri, Some("application/json"), text))
            },
        )
        .prompt(Prompt::new("test_simple_prompt").description("A prompt without arguments"), |_args, _cx| async {
            Ok::<_, Error>(vec![PromptMessage::text(Role::User, "This is a simple prompt for testing.")])
        })
        .prompt(
            Prompt::new("test_prompt_with_arguments")
                .description("A prompt with arguments")
                .argument("arg1", "First argument", true)
                .argument("arg2", "Second argument", true),
            |args, _cx| async move {
                let (a, b) = (args.get("arg1").cloned().unwrap_or_default(), args.get("arg2").cloned().unwrap_or_default());
                Ok::<_, Error>(vec![PromptMessage::text(Role::User, format!("Prompt with arguments: arg1='{a}', arg2='{b}'"))])
            },
        )
        .prompt(
            Prompt::new("test_prompt_with_embedded_resource")
                .description("A prompt with an embedded resource")
                .argument("resourceUri", "The resource to embed", true),
            |args, _cx| async move {
                let uri = args.get("resourceUri").cloned().unwrap_or_default();
                Ok::<_, Error>(vec![
                    PromptMessage { role: Role::User, content: embedded(&uri, "text/plain", "Embedded resource content for testing.") },
                    PromptMessage::text(Role::User, "Please process the embedded resource above."),
                ])
            },
        )
        .prompt(Prompt::new("test_prompt_with_image").description("A prompt with an image"), |_args, _cx| async {
            Ok::<_, Error>(vec![
                PromptMessage { role: Role::User, content: ContentBlock::image(PNG, "image/png") },
                PromptMessage::text(Role::User, "Please analyze the image above."),
            ])
        })
        .completion(|p, _cx| async move {
            let typed = p.argument.value;
            let known: &[&str] = match p.argument.name.as_str() {
                "arg1" | "arg2" => &["testValue1", "testValue2", "test"],
                "name" => &["Ada", "Grace", "Linus"],
                _ => &[],
            };
            Ok(Completion::of(known.iter().filter(|v| v.starts_with(&typed)).copied()))
        })
        .build()
}
