//! `jrpc bridge`: connect two transports.
//!
//! - `--stdio TARGET` ([`stdio`]): a stdio-only client (an editor, an MCP
//!   host) reaches a network server, frames passing through untouched.
//! - `-- COMMAND` ([`child`]): a stdio server, started as a child, served to
//!   many clients at once over HTTP, WebSocket, TCP and the other transports
//!   of `jrpc serve`, with its limits and logs.

mod child;
mod stdio;

use std::process::ExitCode;

use anyhow::anyhow;
use clap::Args;

use crate::call::{report, ConnectArgs, DialArgs, Failure};
use crate::serve::ServeArgs;

#[derive(Debug, Args)]
pub struct BridgeArgs {
    /// Serve this process's stdin/stdout as a JSON-RPC connection to TARGET
    /// (tcp://, unix:, udp://, http(s)://, ws(s)://): for a stdio-only
    /// client. --timeout bounds the wait for replies at the end of stdin
    /// (with -- COMMAND: how long a client may take to answer the
    /// command's requests).
    #[arg(long, value_name = "TARGET", conflicts_with = "command")]
    stdio: Option<String>,

    #[command(flatten)]
    dial: DialArgs,

    #[command(flatten)]
    serve: ServeArgs,

    /// The stdio server to serve, after --: started as a child (and again,
    /// with backoff, if it exits), its methods served to many clients at
    /// once on the --http, --tcp (and other) listeners; with none given, on
    /// HTTP and WebSocket at 127.0.0.1:4000.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

impl BridgeArgs {
    /// Whether call log lines must reach stderr.
    pub fn logs_calls(&self) -> bool {
        self.serve.logs_calls()
    }
}

pub async fn run(args: BridgeArgs) -> ExitCode {
    let BridgeArgs {
        stdio,
        dial,
        serve,
        command,
    } = args;
    match (stdio, command.is_empty()) {
        (Some(target), true) => {
            if serve.names_a_transport() {
                return report(Failure::Usage(anyhow!(
                    "--stdio TARGET bridges stdin/stdout to TARGET; listeners (--http, --tcp, ...) serve a command given after --"
                )));
            }
            let connect = ConnectArgs::new(dial, serve.framing());
            match stdio::run(&target, connect).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(failure) => report(failure),
            }
        }
        (None, false) => match child::run(command, serve, dial.timeout).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                note!("jrpc: bridge: {e:#}");
                ExitCode::FAILURE
            }
        },
        _ => report(Failure::Usage(anyhow!(
            "give --stdio TARGET (a stdio client to a network server) or -- COMMAND (a stdio server to network clients)"
        ))),
    }
}
