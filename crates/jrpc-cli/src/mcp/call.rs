//! `jrpc mcp call`: call a tool, print its text.

use std::process::ExitCode;

use jrpc_mcp::client::{McpClient, McpClientError};

use super::args::CallToolArgs;
use super::session::{connect, content_text, end_bar, failure, finish, key_values, target, unknown, usage};
use crate::call::{exit, Failure};

pub(super) async fn call(args: CallToolArgs) -> ExitCode {
    finish(call_inner(args).await)
}

async fn call_inner(args: CallToolArgs) -> Result<ExitCode, Failure> {
    let (url, words) = target(args.words, &args.client)?;
    let Some((tool, rest)) = words.split_first() else {
        return Err(usage("which tool? jrpc mcp call [TARGET] TOOL [K=V]..."));
    };
    let mut arguments = key_values(rest, true)?;
    if let Some(json) = args.json.as_deref().filter(|j| !j.is_empty()) {
        match serde_json::from_str(json) {
            Ok(serde_json::Value::Object(object)) => arguments.extend(object),
            _ => return Err(usage("--json takes a JSON object of arguments")),
        }
    }
    let client = connect(url, &args.client).await?;
    let result = client.call_tool(tool, arguments).await;
    end_bar();
    let result = match result {
        Ok(result) => result,
        Err(e) => return Err(unknown_tool(&client, tool, e).await),
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
