//! `jrpc mcp`: MCP (Model Context Protocol) servers.

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
struct ServeArgs {
    /// Serve one session over stdin/stdout (newline-delimited JSON-RPC;
    /// logs go to stderr). Ends when stdin closes.
    #[arg(long, required = true)]
    stdio: bool,
}

pub async fn run(args: McpArgs) -> anyhow::Result<()> {
    match args.command {
        McpCommand::Serve(serve) => {
            debug_assert!(serve.stdio, "clap requires --stdio");
            let reason = jrpc_mcp::demo::server().serve_stdio().await;
            tracing::info!(%reason, "MCP session ended");
            Ok(())
        }
    }
}
