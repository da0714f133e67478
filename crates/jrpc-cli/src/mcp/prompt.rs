//! `jrpc mcp prompt`: get a prompt, print its messages.

use std::collections::BTreeMap;
use std::process::ExitCode;

use super::args::PromptArgs;
use super::session::{connect, content_text, failure, finish, key_values, target, unknown, usage};
use crate::call::Failure;

pub(super) async fn prompt(args: PromptArgs) -> ExitCode {
    finish(prompt_inner(args).await)
}

async fn prompt_inner(args: PromptArgs) -> Result<ExitCode, Failure> {
    let (url, words) = target(args.words, &args.client)?;
    let Some((name, rest)) = words.split_first() else {
        return Err(usage("which prompt? jrpc mcp prompt [TARGET] NAME [K=V]..."));
    };
    let arguments: BTreeMap<String, String> = key_values(rest, false)?
        .into_iter()
        .map(|(k, v)| (k, v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string())))
        .collect();
    let client = connect(url, &args.client).await?;
    let prompt = match client.get_prompt(name, arguments).await {
        Ok(prompt) => prompt,
        Err(e) => return Err(unknown_prompt(&client, name, e).await),
    };
    for message in &prompt.messages {
        let role = serde_json::to_value(message.role)
            .ok()
            .and_then(|r| r.as_str().map(str::to_owned))
            .unwrap_or_default();
        println!("{role}: {}", content_text(&message.content));
    }
    client.close().await;
    Ok(ExitCode::SUCCESS)
}

/// A prompt the server does not have: which ones it has.
async fn unknown_prompt(
    client: &jrpc_mcp::client::McpClient,
    name: &str,
    e: jrpc_mcp::client::McpClientError,
) -> Failure {
    if !e.rpc().is_some_and(|rpc| rpc.code() == -32602) {
        return failure(e);
    }
    match client.list_prompts().await {
        Ok(prompts) if !prompts.iter().any(|p| p.name == name) => {
            let known: Vec<String> = prompts.into_iter().map(|p| p.name).collect();
            unknown("prompt", name, &known)
        }
        _ => failure(e),
    }
}
