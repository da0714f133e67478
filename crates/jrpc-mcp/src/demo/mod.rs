//! The demo server: the contract other tools test against (`jrpc mcp serve
//! --stdio`). Keep its names and behaviour exact. It speaks both eras: every
//! tool, resource and prompt works in a 2025-11-25 session and on
//! 2026-07-28's stateless requests (where `sample`, `elicit` and
//! `list_roots` ask through `input_required` results).
//!
//! | tool | arguments | result |
//! |---|---|---|
//! | `add` | `{a: number, b: number}` | text `"<sum>"`, `structuredContent {"result": <sum>}`, with an output schema; read-only |
//! | `echo` | `{text: string}` | the text (and a debug log message); read-only |
//! | `sleep` | `{ms: integer}` | waits, reporting progress at least every 100 ms when asked; `"slept <ms>"`; a task (`io.modelcontextprotocol/tasks`) when the client declares the extension |
//! | `sample` | `{prompt: string}` | asks the client to sample; its text |
//! | `elicit` | `{message: string}` | asks the user for a `name`: `"hello <name>"`, `"declined"` or `"cancelled"` |
//! | `list_roots` | `{}` | the client's root URIs, one per line |
//! | `fail` | `{}` | a result with `isError: true` |
//! | `bump` | `{}` | adds 1 to `demo://counter`; the new value as text; announces the update |
//!
//! Resources: `demo://greeting` (`"hello"`), `demo://counter` (the count,
//! from `0`; subscribe to it, legacy, or listen for it, modern) and the
//! template `demo://echo/{text}`. Prompt: `greet` with a required `name`.
//!
//! The counter lives in the server's [shared state](crate::server::shared)
//! (record `demo.counter`, changed by compare-and-set): with state shared
//! by replicas, every replica counts the same — the example of how an
//! application keeps its own state in a fleet.

use std::time::Duration;

use jrpc::Error;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Number;

use crate::server::shared::{self, SharedState, Space};
use crate::server::{
    McpContext, McpServer, McpServerBuilder, NoArgs, Structured, TaskSettings, TaskSupport, ToolError,
};
use crate::types::{
    CreateMessageParams, ElicitAction, JsonObject, LoggingLevel, Prompt, PromptMessage, Resource,
    ResourceContents, ResourceTemplate, Role, Tool, ToolAnnotations,
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
pub(super) struct SampleArgs {
    /// What to ask the client's model.
    pub(super) prompt: String,
}

#[derive(Deserialize, JsonSchema)]
pub(super) struct ElicitArgs {
    /// What to ask the user.
    pub(super) message: String,
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
    // A task for a client that declares the extension; the request's own
    // answer otherwise.
    cx.run_as_task().await;
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

mod conformance;

pub use conformance::{conformance_builder, conformance_server};

/// The URI of the demo's counter.
const COUNTER: &str = "demo://counter";

/// The counter's record in the shared state.
const COUNTER_KEY: &str = "demo.counter";

/// The demo server.
pub fn server() -> McpServer {
    builder().build()
}

/// Changes nothing: a call lost with its connection may be sent again.
fn read_only() -> ToolAnnotations {
    ToolAnnotations {
        read_only_hint: Some(true),
        ..Default::default()
    }
}

/// The counter's value.
async fn count(state: &dyn SharedState) -> Result<u64, Error> {
    let entry = state
        .get(Space::Server, COUNTER_KEY)
        .await
        .map_err(|e| Error::internal_error().with_data(&e.to_string()))?;
    Ok(entry.map_or(0, |e| parse_count(&e.value)))
}

fn parse_count(bytes: &[u8]) -> u64 {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Adds 1 to the counter, by compare-and-set: its new value.
async fn bump(state: &dyn SharedState) -> Result<u64, ToolError> {
    let mut value = 0;
    shared::modify(state, Space::Server, COUNTER_KEY, |current| {
        value = current.map_or(0, |bytes| parse_count(bytes)) + 1;
        Some(bytes::Bytes::from(value.to_string()))
    })
    .await
    .map_err(|e| ToolError::new(format!("the counter cannot be changed now: {e}")))?;
    Ok(value)
}

/// The demo server's builder: to add to it, or to give it state shared by
/// replicas ([`McpServerBuilder::shared_state`]) before building it.
pub fn builder() -> McpServerBuilder {
    McpServer::builder("jrpc-demo", env!("CARGO_PKG_VERSION"))
        .title("jrpc demo MCP server")
        .instructions(
            "A demo server: add and echo compute, sleep reports progress and can be cancelled, \
             sample/elicit/list_roots ask the client, fail always fails, bump counts demo://counter up.",
        )
        .resource_subscriptions(true)
        .tool_with(
            Tool::new("add").description("Adds two numbers").annotations(read_only()),
            |args: AddArgs, _cx| async move {
                let sum = add(&args.a, &args.b)?;
                Ok(Structured::new(Sum { result: sum.clone() }).text(sum.to_string()))
            },
        )
        .tool_with(
            Tool::new("echo").description("Returns the text it is given").annotations(read_only()),
            |args: EchoArgs, cx: McpContext| async move {
                cx.log(LoggingLevel::Debug, serde_json::json!({ "tool": "echo", "text": args.text }))
                    .await;
                Ok(args.text)
            },
        )
        .tool(
            "sleep",
            "Sleeps for ms milliseconds, reporting progress; can be cancelled; a task when the client supports them",
            sleep,
        )
        .tasks(TaskSettings::default())
        .task_support("sleep", TaskSupport::Optional)
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
        .tool("bump", "Adds 1 to the counter at demo://counter; its new value", |_: NoArgs, cx: McpContext| async move {
            let value = bump(&**cx.shared_state()).await?;
            // Answered once every replica can hear of it: a replica lost
            // right after answering loses no notification.
            if let Err(e) = cx.changes().resource_updated(COUNTER).await {
                tracing::warn!(error = %e, "bump: the other replicas will not hear of the change");
            }
            Ok::<_, ToolError>(value.to_string())
        })
        .resource(
            Resource::new("demo://greeting", "greeting")
                .description("A greeting")
                .mime_type("text/plain"),
            |uri, _cx| async move { Ok::<_, Error>(ResourceContents::text(uri, Some("text/plain"), "hello")) },
        )
        .resource(
            Resource::new(COUNTER, "counter")
                .description("How many times bump was called")
                .mime_type("text/plain"),
            |uri, cx: McpContext| async move {
                let value = count(&**cx.shared_state()).await?;
                Ok::<_, Error>(ResourceContents::text(uri, Some("text/plain"), value.to_string()))
            },
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
