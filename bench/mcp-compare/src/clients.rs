//! The two clients under test, behind one `add` call.

use std::sync::Arc;

use jrpc_mcp::client::ProtocolChoice;

use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{Peer, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};

use crate::servers::Mode;

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

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
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
    /// jrpc's plain JSON-RPC client making plain `add` calls (the baseline
    /// an MCP request is compared with).
    Raw(jrpc::client::Client, Call),
    Rmcp(Peer<RoleClient>, Arc<RunningService<RoleClient, ()>>),
}

/// What the raw client calls.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// A plain JSON-RPC `add`.
    Plain,
}

impl Client {
    /// Connects and initializes (revision 2025-11-25 on both sides: rmcp is
    /// told to use the `initialize` handshake, which jrpc-mcp speaks).
    pub async fn connect(kind: Kind, target: Target, mode: Mode) -> Result<Client, BoxError> {
        if mode == Mode::HttpJsonRpc {
            let Target::Url(url) = target else {
                return Err("the plain JSON-RPC baseline runs over HTTP".into());
            };
            return Ok(Client::Raw(
                jrpc::client::Client::builder().connect_http(&url)?,
                Call::Plain,
            ));
        }
        if mode.modern() {
            return Self::connect_modern(kind, target).await;
        }
        Ok(match (kind, target) {
            (Kind::Jrpc, Target::Spawn(command)) => Client::Jrpc(Arc::new(
                jrpc_mcp::McpClient::builder("bench", "1")
                    .protocol(ProtocolChoice::Legacy)
                    .spawn(command)
                    .await?,
            )),
            (Kind::Jrpc, Target::Url(url)) => Client::Jrpc(Arc::new(
                jrpc_mcp::McpClient::builder("bench", "1")
                    .protocol(ProtocolChoice::Legacy)
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

    /// A client speaking 2026-07-28: jrpc-mcp's `McpClient` pinned to it
    /// (the envelope, and over HTTP a POST per call with its headers), or
    /// rmcp told to discover (no `initialize`).
    async fn connect_modern(kind: Kind, target: Target) -> Result<Client, BoxError> {
        let modern = || {
            jrpc_mcp::McpClient::builder("bench", "1").protocol(ProtocolChoice::Version("2026-07-28".into()))
        };
        Ok(match (kind, target) {
            (Kind::Jrpc, Target::Spawn(command)) => Client::Jrpc(Arc::new(modern().spawn(command).await?)),
            (Kind::Jrpc, Target::Url(url)) => Client::Jrpc(Arc::new(modern().connect_http(&url).await?)),
            (Kind::Rmcp, target) => {
                let lifecycle = ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                };
                let running = match target {
                    Target::Spawn(command) => {
                        ().serve_with_lifecycle(TokioChildProcess::new(command)?, lifecycle)
                            .await?
                    }
                    Target::Url(url) => {
                        ().serve_with_lifecycle(StreamableHttpClientTransport::from_uri(url), lifecycle)
                            .await?
                    }
                };
                Client::Rmcp(running.peer().clone(), Arc::new(running))
            }
        })
    }

    /// `tools/call add {a, b}`; the text of the result.
    pub async fn add(&self, a: u64, b: u64) -> Result<String, BoxError> {
        match self {
            Client::Raw(client, Call::Plain) => {
                let sum: u64 = client.call("add", (a, b)).await?;
                Ok(sum.to_string())
            }
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
            Client::Raw(client, _) => {
                client.close().await;
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
