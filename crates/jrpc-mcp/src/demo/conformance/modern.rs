//! The fixtures the conformance suite's 2026-07-28 server scenarios call
//! (stateless requests, multi round-trip input, subscriptions) and those of
//! the tasks extension's scenarios.

use std::time::Duration;

use jrpc::Error;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::server::{McpContext, McpServerBuilder, NoArgs, TaskSettings, TaskSupport, ToolError};
use crate::types::{
    CallToolResult, CreateMessageParams, ElicitAction, ElicitResult, JsonObject, LoggingLevel, Prompt,
    PromptMessage, Role, Tool,
};

/// A form of one `kind` property, required.
fn form(property: &str, kind: &str) -> JsonObject {
    object(serde_json::json!({
        "type": "object",
        "properties": { property: { "type": kind } },
        "required": [property],
    }))
}

/// The text an accepted form gave for `field`.
fn field(answer: &ElicitResult, field: &str) -> String {
    match answer.action {
        ElicitAction::Accept => answer
            .content
            .as_ref()
            .and_then(|c| c.get(field))
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .unwrap_or_default(),
        _ => format!("({:?})", answer.action).to_lowercase(),
    }
}

#[derive(Deserialize, JsonSchema)]
struct GreetArgs {
    /// Who to greet.
    name: String,
}

#[derive(Deserialize, JsonSchema)]
struct ComputeArgs {
    /// How long the work takes, in seconds.
    seconds: u64,
    /// A label for the result.
    #[serde(default)]
    label: String,
}

#[derive(Deserialize, JsonSchema)]
struct DeleteArgs {
    /// The file to delete.
    filename: String,
}

/// Adds the 2026-07-28 fixtures and the tasks extension's to `builder`.
pub(super) fn fixtures(builder: McpServerBuilder) -> McpServerBuilder {
    tasks(mrtr(builder))
}

fn mrtr(builder: McpServerBuilder) -> McpServerBuilder {
    builder
        .tool(
            "test_missing_capability",
            "Needs the client's sampling capability",
            |_: NoArgs, cx: McpContext| async move {
                let sampled = cx.sample(CreateMessageParams::new("Say hello", 50)).await?;
                Ok::<_, ToolError>(sampled.joined_text())
            },
        )
        .tool(
            "test_input_required_result_elicitation",
            "Asks the user's name (input_required)",
            |_: NoArgs, cx: McpContext| async move {
                let answer = cx
                    .input("user_name")
                    .elicit("What is your name?", form("name", "string"))
                    .await?;
                Ok::<_, ToolError>(format!("Hello, {}!", field(&answer, "name")))
            },
        )
        .tool(
            "test_input_required_result_sampling",
            "Asks the client's model (input_required)",
            |_: NoArgs, cx: McpContext| async move {
                let answer = cx
                    .input("capital_question")
                    .sample(CreateMessageParams::new("What is the capital of France?", 100))
                    .await?;
                Ok::<_, ToolError>(format!("Sampling result: {}", answer.joined_text()))
            },
        )
        .tool(
            "test_input_required_result_list_roots",
            "Asks for the client's roots (input_required)",
            |_: NoArgs, cx: McpContext| async move {
                let roots = cx.input("client_roots").list_roots().await?;
                Ok::<_, ToolError>(format!("Found {} root(s)", roots.roots.len()))
            },
        )
        .tool(
            "test_input_required_result_request_state",
            "Asks for a confirmation, with request state",
            |_: NoArgs, cx: McpContext| async move {
                let answer = cx
                    .input("confirm")
                    .elicit("Please confirm", form("ok", "boolean"))
                    .await?;
                Ok::<_, ToolError>(format!(
                    "state-ok: requestState validated ({})",
                    field(&answer, "ok")
                ))
            },
        )
        .tool(
            "test_input_required_result_multiple_inputs",
            "Asks for three inputs in one round",
            |_: NoArgs, cx: McpContext| async move {
                let (name, greeting, roots) = tokio::join!(
                    cx.input("user_name")
                        .elicit("What is your name?", form("name", "string")),
                    cx.input("greeting")
                        .sample(CreateMessageParams::new("Generate a greeting", 50)),
                    cx.input("client_roots").list_roots(),
                );
                let (name, greeting, roots) = (name?, greeting?, roots?);
                Ok::<_, ToolError>(format!(
                    "Name: {}; Greeting: {}; Roots: {}",
                    field(&name, "name"),
                    greeting.joined_text(),
                    roots.roots.len()
                ))
            },
        )
        .tool(
            "test_input_required_result_multi_round",
            "Asks two questions, one round each",
            |_: NoArgs, cx: McpContext| async move {
                let name = cx
                    .input("step1")
                    .elicit("Step 1: What is your name?", form("name", "string"))
                    .await?;
                let color = cx
                    .input("step2")
                    .elicit("Step 2: What is your favorite color?", form("color", "string"))
                    .await?;
                Ok::<_, ToolError>(format!(
                    "Multi-round complete for {} who likes {}",
                    field(&name, "name"),
                    field(&color, "color")
                ))
            },
        )
        .tool(
            "test_input_required_result_tampered_state",
            "Asks for a confirmation; refuses tampered state",
            |_: NoArgs, cx: McpContext| async move {
                cx.input("confirm")
                    .elicit("Please confirm", form("ok", "boolean"))
                    .await?;
                Ok::<_, ToolError>("integrity-ok: state verified")
            },
        )
        .tool(
            "test_input_required_result_capabilities",
            "Asks only for what the client can answer",
            |_: NoArgs, cx: McpContext| async move {
                let capabilities = cx.client_capabilities();
                let elicit = async {
                    match capabilities.elicitation.is_some() {
                        true => cx
                            .input("elicit_input")
                            .elicit("Elicitation input", form("value", "string"))
                            .await
                            .map(|_| "elicitation"),
                        false => Ok(""),
                    }
                };
                let sample = async {
                    match capabilities.sampling.is_some() {
                        true => cx
                            .input("sample_input")
                            .sample(CreateMessageParams::new("Sample request", 50))
                            .await
                            .map(|_| "sampling"),
                        false => Ok(""),
                    }
                };
                let (elicited, sampled) = tokio::join!(elicit, sample);
                let got: Vec<&str> = [elicited?, sampled?]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect();
                if got.is_empty() {
                    return Ok::<_, ToolError>("No supported capabilities declared".to_owned());
                }
                Ok(format!("capabilities-ok: received {}", got.join(",")))
            },
        )
        .tool(
            "test_streaming_elicitation",
            "Logs, then asks the user (input_required)",
            |_: NoArgs, cx: McpContext| async move {
                cx.log(LoggingLevel::Info, "asking for a name").await;
                let answer = cx
                    .input("user_name")
                    .elicit("What is your name?", form("name", "string"))
                    .await?;
                Ok::<_, ToolError>(format!("Streaming complete for {}", field(&answer, "name")))
            },
        )
        .tool(
            "test_logging_tool",
            "Logs at info: only to clients that asked for logs",
            |_: NoArgs, cx: McpContext| async move {
                cx.log(LoggingLevel::Info, "Diagnostic trace logging activated")
                    .await;
                Ok::<_, ToolError>("Logging evaluated")
            },
        )
        .raw_tool(
            Tool::new("test_custom_header")
                .description("Echoes its region, which travels in the Mcp-Param-Region header too")
                .input_schema(object(serde_json::json!({
                    "type": "object",
                    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                    "required": ["region"],
                }))),
            |args, _cx| async move {
                let region = args
                    .get("region")
                    .and_then(|r| r.as_str())
                    .unwrap_or_default()
                    .to_owned();
                Ok(CallToolResult::text(format!("region: {region}")))
            },
        )
        .tool(
            "test_trigger_tool_change",
            "Announces that the tool list changed",
            |_: NoArgs, cx: McpContext| async move {
                cx.changes().tools_changed();
                Ok::<_, ToolError>("Mutation triggered")
            },
        )
        .tool(
            "test_trigger_prompt_change",
            "Announces that the prompt list changed",
            |_: NoArgs, cx: McpContext| async move {
                cx.changes().prompts_changed();
                Ok::<_, ToolError>("Mutation triggered")
            },
        )
        .prompt(
            Prompt::new("test_input_required_result_prompt")
                .description("A prompt that asks for its context"),
            |_args, cx: McpContext| async move {
                let answer = cx
                    .input("user_context")
                    .elicit("What context should the prompt use?", form("context", "string"))
                    .await
                    .map_err(|e| Error::internal_error().with_data(&e.to_string()))?;
                Ok::<_, Error>(vec![PromptMessage::text(
                    Role::User,
                    format!("Prompt with context: {}", field(&answer, "context")),
                )])
            },
        )
}

fn tasks(builder: McpServerBuilder) -> McpServerBuilder {
    builder
        .tasks(TaskSettings::default())
        .tool(
            "greet",
            "Greets someone (never a task)",
            |args: GreetArgs, _cx| async move { Ok::<_, ToolError>(format!("Hello, {}!", args.name)) },
        )
        .tool(
            "slow_compute",
            "Works for `seconds`; a task when the client supports them",
            |args: ComputeArgs, cx: McpContext| async move {
                cx.run_as_task().await;
                tokio::time::sleep(Duration::from_secs(args.seconds)).await;
                Ok::<_, ToolError>(format!("computed {:?} in {} s", args.label, args.seconds))
            },
        )
        .tool(
            "failing_job",
            "A task whose tool fails (isError)",
            |_: NoArgs, cx: McpContext| async move {
                cx.run_as_task().await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                Err::<String, _>(ToolError::new("the job failed"))
            },
        )
        .tool(
            "protocol_error_job",
            "A task that fails with a protocol error",
            |_: NoArgs, cx: McpContext| async move {
                cx.run_as_task().await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                Err::<String, _>(ToolError::protocol(
                    Error::internal_error().with_data("the job broke"),
                ))
            },
        )
        .tool(
            "confirm_delete",
            "A task that asks before it deletes",
            |args: DeleteArgs, cx: McpContext| async move {
                cx.run_as_task().await;
                let message = format!("Delete {}?", args.filename);
                let answer = cx
                    .input("confirm")
                    .elicit(message, form("confirm", "boolean"))
                    .await?;
                Ok::<_, ToolError>(format!("{}: {}", args.filename, field(&answer, "confirm")))
            },
        )
        .tool(
            "multi_input",
            "A task that asks two questions at once",
            |_: NoArgs, cx: McpContext| async move {
                cx.run_as_task().await;
                let (name, confirm) = tokio::join!(
                    cx.input("name").elicit("Your name?", form("name", "string")),
                    cx.input("confirm").elicit("Go on?", form("confirm", "boolean")),
                );
                Ok::<_, ToolError>(format!(
                    "{} {}",
                    field(&name?, "name"),
                    field(&confirm?, "confirm")
                ))
            },
        )
        .tool(
            "test_tool_with_task",
            "Asks a name in its request, then goes on as a task",
            |_: NoArgs, cx: McpContext| async move {
                let answer = cx
                    .input("user_name")
                    .elicit("What is your name?", form("name", "string"))
                    .await?;
                cx.run_as_task().await;
                Ok::<_, ToolError>(format!("Hello, {}!", field(&answer, "name")))
            },
        )
        .task_support("slow_compute", TaskSupport::Optional)
        .task_support("failing_job", TaskSupport::Required)
        .task_support("protocol_error_job", TaskSupport::Optional)
        .task_support("confirm_delete", TaskSupport::Optional)
        .task_support("multi_input", TaskSupport::Optional)
        .task_support("test_tool_with_task", TaskSupport::Required)
}

/// `value` as a JSON object (empty when it is not one).
pub(super) fn object(value: serde_json::Value) -> JsonObject {
    match value {
        serde_json::Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}
