//! `jrpc mcp bench`: load an MCP server with calls of one tool, measured as
//! `jrpc bench` measures JSON-RPC (its load loop, report and page).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::anyhow;
use jrpc::CallError;
use jrpc_mcp::client::{McpClient, McpClientError};

use super::args::McpBenchArgs;
use super::call::tool_arguments;
use super::session::{connect, failure, finish, target, usage};
use crate::bench::{drive, print_run, Caller, Load, RetryTally, Shown};
use crate::bench_report;
use crate::call::Failure;

pub(super) async fn bench(args: McpBenchArgs) -> ExitCode {
    finish(bench_inner(args).await)
}

async fn bench_inner(args: McpBenchArgs) -> Result<ExitCode, Failure> {
    if args.connections == 0 {
        return Err(usage("--connections must be at least 1"));
    }
    if args.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err(usage("--rate must be a positive number of calls per second"));
    }
    let (url, words) = target(args.words.clone(), &args.client)?;
    let Some((tool, rest)) = words.split_first() else {
        return Err(usage("which tool? jrpc mcp bench [TARGET] TOOL [K=V]..."));
    };
    let shown_target = url.clone().unwrap_or_else(|| args.client.command.join(" "));
    // Every client first, and one call to see that the tool works at all.
    let mut clients = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        clients.push(Arc::new(connect(url.clone(), &args.client).await?));
    }
    let arguments = Arc::new(tool_arguments(&clients[0], tool, rest).await?);
    let checked = clients[0].call_tool(tool, &*arguments).await.map_err(failure)?;
    if checked.failed() {
        let text: Vec<String> = checked.content.iter().map(super::session::content_text).collect();
        return Err(Failure::Usage(anyhow!(
            "{tool} fails before the run: {}",
            text.join(" ")
        )));
    }
    let retries = Arc::new(RetryTally::default());
    let tool: Arc<str> = tool.as_str().into();
    let callers = clients
        .iter()
        .map(|client| {
            caller(
                Arc::clone(client),
                Arc::clone(&tool),
                Arc::clone(&arguments),
                Arc::clone(&retries),
            )
        })
        .collect();
    let load = Load {
        duration: args.duration,
        requests: args.requests,
        rate: args.rate,
        marks: args.mark.clone(),
    };
    let measured = drive(&load, callers, retries).await;
    let mut report = measured.report(shown_target, &format!("tools/call {tool}"), args.connections, 1);
    report.rate = args.rate;
    print_run(
        &report,
        &Shown {
            json: args.json,
            batch: None,
            auto_batch: None,
            retried: true,
            report: args.report.as_deref(),
            noun: "calls",
        },
    );
    if let Some(path) = &args.report {
        std::fs::write(path, bench_report::html(std::slice::from_ref(&report)))
            .map_err(|e| usage(format!("--report {}: {e}", path.display())))?;
    }
    for client in clients {
        if let Ok(client) = Arc::try_unwrap(client) {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), client.close()).await;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One client's calls of `tool`: each counted once by how it ended, its
/// repeats (a safe call sent again after a loss) counted apart.
fn caller(
    client: Arc<McpClient>,
    tool: Arc<str>,
    arguments: Arc<jrpc_mcp::types::JsonObject>,
    retries: Arc<RetryTally>,
) -> Caller {
    Arc::new(move || {
        let (client, tool, arguments, retries) = (
            Arc::clone(&client),
            Arc::clone(&tool),
            Arc::clone(&arguments),
            Arc::clone(&retries),
        );
        Box::pin(async move {
            // One call at a time per client: the count it moved is this call's.
            let before = client.repeats();
            let outcome = client.call_tool(&tool, &*arguments).await;
            retries.count_call(client.repeats() - before);
            match outcome {
                Ok(result) if result.failed() => Err(CallError::Rpc(
                    jrpc::Error::internal_error().with_data("the tool's result is an error (isError)"),
                )),
                Ok(_) => Ok(()),
                Err(McpClientError::Call(e)) => Err(e),
                Err(other) => Err(CallError::Protocol(other.to_string().into())),
            }
        })
    })
}
