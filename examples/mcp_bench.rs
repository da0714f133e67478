//! `tools/call add` per second through the jrpc-mcp client and server, over
//! stdio (a spawned `jrpc mcp serve --stdio`) and Streamable HTTP (a
//! `jrpc mcp serve --http`): JSON replies (`tools/list`, for contrast) and
//! SSE replies (`tools/call`). `bench/mcp-compare` runs the same calls
//! beside rmcp, pinned, with servers and clients paired both ways.
//!
//! ```sh
//! cargo build --release -p jrpc-cli
//! cargo run --release --example mcp_bench -- target/release/jrpc [CALLS] [IN_FLIGHT]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use jrpc_mcp::McpClient;
use serde_json::json;

type Outcome = Result<(), Box<dyn std::error::Error>>;

/// Runs `calls` calls, `in_flight` at a time; calls per second.
async fn run(
    client: Arc<McpClient>,
    calls: usize,
    in_flight: usize,
    tool: bool,
) -> Result<f64, Box<dyn std::error::Error>> {
    let start = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..in_flight {
        let client = Arc::clone(&client);
        let share = calls / in_flight + usize::from(worker < calls % in_flight);
        workers.push(tokio::spawn(async move {
            for i in 0..share {
                if tool {
                    let sum = client.call_tool("add", json!({"a": i, "b": 1})).await?;
                    assert_eq!(sum.joined_text(), (i + 1).to_string());
                } else {
                    client.list_tools().await?;
                }
            }
            Ok::<_, jrpc_mcp::McpClientError>(())
        }));
    }
    for worker in workers {
        worker.await??;
    }
    Ok(calls as f64 / start.elapsed().as_secs_f64())
}

#[tokio::main]
async fn main() -> Outcome {
    let mut args = std::env::args().skip(1);
    let jrpc = args.next().unwrap_or_else(|| "target/release/jrpc".to_owned());
    let calls: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(20_000);
    let in_flight: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(16).max(1);

    let mut command = tokio::process::Command::new(&jrpc);
    command.args(["mcp", "serve", "--stdio"]);
    let stdio = Arc::new(McpClient::builder("bench", "1").spawn(command).await?);
    let rate = run(Arc::clone(&stdio), calls, in_flight, true).await?;
    println!("stdio  tools/call add            {rate:>9.0} calls/s ({calls} calls, {in_flight} in flight)");

    let mut server = tokio::process::Command::new(&jrpc)
        .args(["mcp", "serve", "--http", "127.0.0.1:0"])
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut stderr = tokio::io::BufReader::new(server.stderr.take().ok_or("no stderr")?);
    let mut line = String::new();
    tokio::time::timeout(
        Duration::from_secs(20),
        tokio::io::AsyncBufReadExt::read_line(&mut stderr, &mut line),
    )
    .await??;
    let url = line.trim().rsplit(' ').next().ok_or("no URL")?.to_owned();
    let http = Arc::new(McpClient::builder("bench", "1").connect_http(&url).await?);
    let rate = run(Arc::clone(&http), calls, in_flight, true).await?;
    println!("http   tools/call add (SSE)      {rate:>9.0} calls/s");
    let rate = run(Arc::clone(&http), calls, in_flight, false).await?;
    println!("http   tools/list (JSON)         {rate:>9.0} calls/s");
    let _ = server.kill().await;
    Ok(())
}
