//! `jrpc mcp`: MCP (Model Context Protocol) servers.

use anyhow::Context as _;
use clap::{Args, Subcommand};

/// `jrpc mcp ...`.
#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(subcommand)]
    command: McpCommand,
}

#[derive(Debug, Subcommand)]
enum McpCommand {
    /// Serve the demo MCP server: tools add, echo, sleep, sample, elicit,
    /// list_roots and fail; resources demo://greeting and
    /// demo://echo/{text}; prompt greet; logging.
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
struct Transport {
    /// Serve one session over stdin/stdout (newline-delimited JSON-RPC;
    /// logs go to stderr). Ends when stdin closes.
    #[arg(long)]
    stdio: bool,

    /// Serve Streamable HTTP at http://ADDR/mcp (e.g. 127.0.0.1:8000; port
    /// 0 picks a free port), until SIGTERM or Ctrl-C.
    #[arg(long, value_name = "ADDR", value_parser = crate::serve::parse_listen_addr)]
    http: Option<String>,
}

#[derive(Debug, Args)]
struct ServeArgs {
    #[command(flatten)]
    transport: Transport,

    /// Also serve the fixture tools, resources and prompts the official MCP
    /// conformance suite (npm @modelcontextprotocol/conformance) calls in its
    /// server scenarios.
    #[arg(long)]
    conformance: bool,
}

pub async fn run(args: McpArgs) -> anyhow::Result<()> {
    let McpCommand::Serve(serve) = args.command;
    let server = if serve.conformance {
        jrpc_mcp::demo::conformance_server()
    } else {
        jrpc_mcp::demo::server()
    };
    match serve.transport.http {
        Some(addr) => {
            let serving = server
                .serve_http(addr.as_str(), Default::default())
                .await
                .with_context(|| format!("listening on --http {addr}"))?;
            eprintln!("jrpc: MCP (Streamable HTTP) at {}/mcp", serving.local_addr());
            let stop = serving.shutdown_token();
            tokio::select! {
                () = crate::serve::shutdown_signal() => stop.cancel(),
                () = stop.cancelled() => {}
            }
            serving.shutdown().await;
            Ok(())
        }
        None => {
            let reason = server.serve_stdio().await;
            tracing::info!(%reason, "MCP session ended");
            Ok(())
        }
    }
}
