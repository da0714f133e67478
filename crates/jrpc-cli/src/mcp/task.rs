//! `jrpc mcp task get|wait|cancel [TARGET] ID`: a task (the tasks
//! extension of 2026-07-28) found again by its id — on any replica of a
//! server that shares its state.

use std::process::ExitCode;

use jrpc_mcp::client::task_result;
use jrpc_mcp::types::TaskStatus;

use super::args::{TaskAction, TaskArgs};
use super::session::{connect, content_text, failure, finish, target, usage};
use crate::call::{exit, Failure};
use crate::pretty::format_json;

pub(super) async fn task(args: TaskArgs) -> ExitCode {
    finish(task_inner(args).await)
}

async fn task_inner(args: TaskArgs) -> Result<ExitCode, Failure> {
    let (action, mut ids) = match args.action {
        TaskAction::Get(ids) => ("get", ids),
        TaskAction::Wait(ids) => ("wait", ids),
        TaskAction::Cancel(ids) => ("cancel", ids),
    };
    ids.client.tasks = true;
    let (url, words) = target(ids.words, &ids.client)?;
    let [id] = words.as_slice() else {
        return Err(usage(format!("which task? jrpc mcp task {action} [TARGET] ID")));
    };
    let client = connect(url, &ids.client).await?;
    if !client.is_modern() {
        return Err(usage(
            "tasks are a 2026-07-28 extension; this server speaks 2025-11-25 or earlier",
        ));
    }
    let code = match action {
        "get" => {
            let task = client.get_task(id).await.map_err(failure)?;
            let json = serde_json::to_string(&task).unwrap_or_default();
            println!("{}", format_json(&json, true));
            ExitCode::SUCCESS
        }
        "cancel" => {
            client.cancel_task(id).await.map_err(failure)?;
            let task = client.get_task(id).await.map_err(failure)?;
            eprintln!("jrpc: task {id} {}", status_word(task.status));
            ExitCode::SUCCESS
        }
        _ => {
            let ended = client.wait_task(id).await.map_err(failure)?;
            let result = task_result(ended).map_err(failure)?;
            for block in &result.content {
                println!("{}", content_text(block));
            }
            if result.failed() {
                ExitCode::from(exit::RPC_ERROR)
            } else {
                ExitCode::SUCCESS
            }
        }
    };
    client.close().await;
    Ok(code)
}

/// A status as the protocol writes it.
pub(super) fn status_word(status: TaskStatus) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{status:?}"))
}
