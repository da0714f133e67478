//! The two clients under test, behind one `add` call.

use std::sync::Arc;

use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Which implementation calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Jrpc,
    Rmcp,
}

impl Kind {
    pub const ALL: [Kind; 2] = [Kind::Jrpc, Kind::Rmcp];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Jrpc => "jrpc-mcp",
            Kind::Rmcp => "rmcp",
        }
    }
}

/// Where the client connects: a command to spawn, or a URL.
pub enum Target {
    Spawn(tokio::process::Command),
    Url(String),
}

/// A connected, initialized client; cheap to clone for each worker.
#[derive(Clone)]
pub enum Client {
    Jrpc(Arc<jrpc_mcp::McpClient>),
    Rmcp(Peer<RoleClient>, Arc<RunningService<RoleClient, ()>>),
}

impl Client {
    /// Connects and initializes (revision 2025-11-25 on both sides: rmcp is
    /// told to use the `initialize` handshake, which jrpc-mcp speaks).
    pub async fn connect(kind: Kind, target: Target) -> Result<Client, BoxError> {
        Ok(match (kind, target) {
            (Kind::Jrpc, Target::Spawn(command)) => Client::Jrpc(Arc::new(
                jrpc_mcp::McpClient::builder("bench", "1").spawn(command).await?,
            )),
            (Kind::Jrpc, Target::Url(url)) => Client::Jrpc(Arc::new(
                jrpc_mcp::McpClient::builder("bench", "1")
                    .connect_http(&url)
                    .await?,
            )),
            (Kind::Rmcp, Target::Spawn(command)) => {
                let transport = TokioChildProcess::new(command)?;
                let running = ().serve_with_lifecycle(transport, ClientLifecycleMode::Initialize).await?;
                Client::Rmcp(running.peer().clone(), Arc::new(running))
            }
            (Kind::Rmcp, Target::Url(url)) => {
                let transport = StreamableHttpClientTransport::from_uri(url);
                let running = ().serve_with_lifecycle(transport, ClientLifecycleMode::Initialize).await?;
                Client::Rmcp(running.peer().clone(), Arc::new(running))
            }
        })
    }

    /// `tools/call add {a, b}`; the text of the result.
    pub async fn add(&self, a: u64, b: u64) -> Result<String, BoxError> {
        match self {
            Client::Jrpc(client) => {
                let result = client
                    .call_tool("add", serde_json::json!({ "a": a, "b": b }))
                    .await?;
                Ok(result.joined_text())
            }
            Client::Rmcp(peer, _) => {
                let arguments = serde_json::json!({ "a": a, "b": b });
                let serde_json::Value::Object(arguments) = arguments else {
                    unreachable!("an object literal")
                };
                let result = peer
                    .call_tool(CallToolRequestParams::new("add").with_arguments(arguments))
                    .await?;
                Ok(result
                    .content
                    .iter()
                    .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
                    .collect())
            }
        }
    }

    /// Ends the session (and a spawned server with it).
    pub async fn close(self) {
        match self {
            Client::Jrpc(client) => {
                if let Ok(client) = Arc::try_unwrap(client) {
                    client.close().await;
                }
            }
            Client::Rmcp(peer, running) => {
                drop(peer);
                if let Ok(running) = Arc::try_unwrap(running) {
                    let _ = running.cancel().await;
                }
            }
        }
    }
}
