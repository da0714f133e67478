//! `jrpc mcp call`: call a tool, print its text.

use std::process::ExitCode;

use jrpc_mcp::client::{task_result, McpClient, McpClientError, Started};

use super::args::CallToolArgs;
use super::session::{connect, content_text, end_bar, failure, finish, key_values, target, unknown, usage};
use crate::call::{exit, Failure};

pub(super) async fn call(args: CallToolArgs) -> ExitCode {
    finish(call_inner(args).await)
}

async fn call_inner(mut args: CallToolArgs) -> Result<ExitCode, Failure> {
    args.client.tasks = args.task;
    let (url, words) = target(args.words, &args.client)?;
    let Some((tool, rest)) = words.split_first() else {
        return Err(usage("which tool? jrpc mcp call [TARGET] TOOL [K=V]..."));
    };
    let json = match args.json.as_deref().filter(|j| !j.is_empty()) {
        Some(json) => match serde_json::from_str(json) {
            Ok(serde_json::Value::Object(object)) => Some(object),
            _ => return Err(usage("--json takes a JSON object of arguments")),
        },
        None => None,
    };
    // Words that cannot be read are said before anything is reached.
    key_values(rest, true)?;
    let client = connect(url, &args.client).await?;
    let mut arguments = tool_arguments(&client, tool, rest).await?;
    // --json's arguments are JSON as given.
    arguments.extend(json.unwrap_or_default());
    let result = if args.task {
        match client.start_tool(tool, arguments).await {
            Ok(Started::Complete(result)) => {
                end_bar();
                if args.detach {
                    eprintln!("jrpc: {tool} answered at once (the server made no task)");
                }
                result
            }
            Ok(Started::Task(task)) => {
                end_bar();
                eprintln!(
                    "jrpc: task {} {}",
                    task.task_id,
                    super::task::status_word(task.status)
                );
                if args.detach {
                    println!("{}", task.task_id);
                    client.close().await;
                    return Ok(ExitCode::SUCCESS);
                }
                let ended = client.wait_task(&task.task_id).await.map_err(failure)?;
                task_result(ended).map_err(failure)?
            }
            Err(e) => {
                end_bar();
                return Err(unknown_tool(&client, tool, e).await);
            }
        }
    } else {
        let result = client.call_tool(tool, arguments).await;
        end_bar();
        match result {
            Ok(result) => result,
            Err(e) => return Err(unknown_tool(&client, tool, e).await),
        }
    };
    if args.json.is_some() {
        let shown = match &result.structured_content {
            Some(structured) => serde_json::Value::Object(structured.clone()),
            None => serde_json::to_value(&result).unwrap_or_default(),
        };
        println!("{}", serde_json::to_string_pretty(&shown).unwrap_or_default());
    } else {
        for block in &result.content {
            println!("{}", content_text(block));
        }
    }
    client.close().await;
    Ok(if result.failed() {
        ExitCode::from(exit::RPC_ERROR)
    } else {
        ExitCode::SUCCESS
    })
}

/// The arguments of a call of `tool` from its `k=v` words, read by the
/// tool's input schema: a value it says is a string stays as written
/// (`text=42` is "42"), as `jrpc call` reads words by an OpenRPC document.
/// The tool list is asked for once, and only when a word parsed as
/// something else.
pub(super) async fn tool_arguments(
    client: &McpClient,
    tool: &str,
    words: &[String],
) -> Result<jrpc_mcp::types::JsonObject, Failure> {
    let mut arguments = key_values(words, true)?;
    if arguments.values().any(|v| !v.is_string()) {
        if let Ok(tools) = client.list_tools().await {
            if let Some(schema) = tools.iter().find(|t| t.name == *tool).map(|t| &t.input_schema) {
                let written = key_values(words, false)?;
                for (key, value) in arguments.iter_mut() {
                    if wants_string(schema, key, value) {
                        if let Some(text) = written.get(key) {
                            *value = text.clone();
                        }
                    }
                }
            }
        }
    }
    Ok(arguments)
}

/// A call refused because the server has no such tool also says which
/// tools it has (on stderr, before the error).
async fn unknown_tool(client: &McpClient, tool: &str, e: McpClientError) -> Failure {
    let invalid = e.rpc().is_some_and(|rpc| rpc.code() == -32602);
    if !invalid {
        return failure(e);
    }
    let Ok(tools) = client.list_tools().await else {
        return failure(e);
    };
    if tools.iter().any(|t| t.name == tool) {
        return failure(e);
    }
    let known: Vec<String> = tools.into_iter().map(|t| t.name).collect();
    unknown("tool", tool, &known)
}

/// Whether `schema` (a tool's input schema) wants a string for `key` where
/// the word's value parsed as something else.
fn wants_string(schema: &jrpc_mcp::types::JsonObject, key: &str, value: &serde_json::Value) -> bool {
    use serde_json::Value;
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => return false,
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let accepts = |t: &str| t == kind || (t == "number" && kind == "integer");
    match schema
        .get("properties")
        .and_then(|p| p.get(key))
        .and_then(|p| p.get("type"))
    {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(types)) => {
            let types: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
            types.contains(&"string") && !types.iter().any(|t| accepts(t))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::wants_string;
    use serde_json::json;

    #[test]
    fn values_are_read_by_the_schema() {
        let schema = json!({"properties": {
            "text": {"type": "string"},
            "n": {"type": "number"},
            "either": {"type": ["string", "integer"]},
            "free": {}
        }});
        let schema = schema.as_object().unwrap();
        let cases = [
            ("text", json!(42), true),
            ("text", json!(true), true),
            ("text", json!("42"), false),
            ("n", json!(42), false),
            ("either", json!(42), false),
            ("either", json!(4.5), true),
            ("free", json!(42), false),
            ("missing", json!(42), false),
        ];
        for (key, value, expected) in cases {
            assert_eq!(wants_string(schema, key, &value), expected, "{key} {value}");
        }
    }
}
