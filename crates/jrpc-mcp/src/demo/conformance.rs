//! The fixtures of the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`): the tools, resources and prompts
//! its server scenarios call, for `jrpc mcp serve --conformance`. Those of
//! 2026-07-28 and of the tasks extension are in [`modern`].

mod modern;

use modern::object;

use std::time::Duration;

use jrpc::Error;

use super::{builder, ElicitArgs, SampleArgs};
use crate::server::{McpContext, McpServer, McpServerBuilder, NoArgs, ToolError};
use crate::types::{
    CallToolResult, Completion, ContentBlock, CreateMessageParams, EmbeddedResource, LoggingLevel, Prompt,
    PromptMessage, Resource, ResourceContents, ResourceTemplate, Role, Tool,
};

/// A 1×1 PNG.
const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A tiny WAV file.
const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

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
    conformance_builder().build()
}

/// The builder of [`conformance_server`], to give it state shared by
/// replicas before building it.
pub fn conformance_builder() -> McpServerBuilder {
    let builder = builder()
        .resource_subscriptions(true)
        .list_changed(true)
        .skill(fixture_skill());
    modern::fixtures(builder)
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
                    "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                                          "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
                    "properties": {
                        "name": {"type": "string"},
                        "address": {"$ref": "#/$defs/address"},
                        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                        "phone": {"type": "string"},
                        "email": {"type": "string"},
                    },
                    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
                    "then": {"required": ["phone"]},
                    "else": {"required": ["email"]},
                    "additionalProperties": false,
                }))),
            |args, _cx| async move { Ok(CallToolResult::text(format!("JSON Schema 2020-12 tool called with: {}", serde_json::Value::Object(args)))) },
        )
        .tool("test_reconnection", "Closes its stream mid-call; the client resumes it", |_: NoArgs, cx: McpContext| async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            cx.close_stream();
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
}

/// The skill the suite's `sep-2640-*` scenarios read (the Skills
/// extension): a `SKILL.md` with a sub-folder of references and one of
/// scripts, so that every check, directories included, has something to
/// look at.
fn fixture_skill() -> crate::server::Skill {
    const SKILL_MD: &str = "---
name: pdf-processing
description: Extract, fill, and assemble PDF documents
license: Apache-2.0
metadata:
  version: \"2.1.0\"
---

# PDF processing

Read [the forms guide](references/FORMS.md) before filling a form; run
`scripts/extract.py` to pull the text out of a PDF.
";
    crate::server::Skill::new(SKILL_MD)
        .and_then(|s| s.file("references/FORMS.md", "# Forms\n\nFill every field; sign last.\n"))
        .and_then(|s| {
            s.file(
                "scripts/extract.py",
                "import sys\n\nprint(open(sys.argv[1], 'rb').read()[:100])\n",
            )
        })
        .expect("the fixture skill is valid")
}
