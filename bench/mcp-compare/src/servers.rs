//! The two servers under test, each with the one tool the load calls:
//! `add` (two integers in, their sum as text and as `{"result": sum}`
//! structured content out), over stdio or Streamable HTTP.

use std::io;
use std::sync::Arc;

use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::{
    session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use rmcp::{tool, tool_handler, tool_router, ServerHandler, ServiceExt};

/// Which implementation serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Jrpc,
    Rmcp,
}

/// How it is reached, and in which revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// stdio, a 2025-11-25 session.
    Stdio,
    /// Streamable HTTP, a 2025-11-25 session, `tools/call` answered with
    /// an SSE stream.
    HttpSse,
    /// Streamable HTTP, a 2025-11-25 session (rmcp: stateless), `tools/call`
    /// answered with a JSON body.
    HttpJson,
    /// stdio, 2026-07-28: each request carries its `_meta` envelope.
    Stdio2026,
    /// Streamable HTTP, 2026-07-28: each request a POST of its own, no
    /// session.
    Http2026,
    /// Not MCP: a plain JSON-RPC `add` over HTTP (jrpc's own server), the
    /// baseline an MCP request over HTTP is measured against.
    HttpJsonRpc,
}

impl Server {
    pub const ALL: [Server; 2] = [Server::Jrpc, Server::Rmcp];

    pub fn name(self) -> &'static str {
        match self {
            Server::Jrpc => "jrpc-mcp",
            Server::Rmcp => "rmcp",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl Mode {
    pub const ALL: [Mode; 6] = [
        Mode::Stdio,
        Mode::HttpSse,
        Mode::HttpJson,
        Mode::Stdio2026,
        Mode::Http2026,
        Mode::HttpJsonRpc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Stdio => "stdio",
            Mode::HttpSse => "http-sse",
            Mode::HttpJson => "http-json",
            Mode::Stdio2026 => "stdio-2026",
            Mode::Http2026 => "http-2026",
            Mode::HttpJsonRpc => "http-jsonrpc",
        }
    }

    /// Whether the server is reached over stdio.
    pub fn stdio(self) -> bool {
        matches!(self, Mode::Stdio | Mode::Stdio2026)
    }

    /// Whether the client speaks 2026-07-28.
    pub fn modern(self) -> bool {
        matches!(self, Mode::Stdio2026 | Mode::Http2026)
    }

    /// Whether `server` serves in this mode (the baseline is jrpc's only).
    pub fn served_by(self, server: Server) -> bool {
        self != Mode::HttpJsonRpc || server == Server::Jrpc
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// Serves until stdin closes (stdio) or the process is killed (HTTP, whose
/// URL is the first line on stdout).
pub async fn serve(server: Server, mode: Mode) -> io::Result<()> {
    match (server, mode) {
        (Server::Jrpc, Mode::Stdio | Mode::Stdio2026) => {
            jrpc_mcp::demo::server().serve_stdio().await;
            Ok(())
        }
        (Server::Jrpc, Mode::HttpJsonRpc) => {
            // The same sum, as a plain JSON-RPC method.
            let router = jrpc::Router::new().method("add", |(a, b): (i64, i64)| async move { Ok(a + b) });
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let serving = jrpc::server::http::HttpServer::new(router).serve_tcp(listener);
            println!("{}/", serving.local_addr());
            std::future::pending().await
        }
        (Server::Jrpc, http) => {
            let options = jrpc_mcp::http::HttpOptions::default().json_response(http == Mode::HttpJson);
            let serving = jrpc_mcp::demo::server()
                .serve_http("127.0.0.1:0", options)
                .await?;
            println!("{}/mcp", serving.local_addr());
            std::future::pending().await
        }
        (Server::Rmcp, Mode::Stdio | Mode::Stdio2026) => {
            let running = Calculator::new()
                .serve(rmcp::transport::stdio())
                .await
                .map_err(io::Error::other)?;
            running.waiting().await.map_err(io::Error::other)?;
            Ok(())
        }
        (Server::Rmcp, Mode::HttpJsonRpc) => Err(io::Error::other("rmcp serves no plain JSON-RPC")),
        // rmcp answers a 2026-07-28 request over SSE unless told to answer
        // with JSON, which the plain JSON-RPC load client reads.
        (Server::Rmcp, http) => serve_rmcp_http(matches!(http, Mode::HttpJson | Mode::Http2026)).await,
    }
}

/// rmcp's Streamable HTTP service on hyper. rmcp replies with JSON only
/// in its stateless mode, so the JSON case has no session (jrpc-mcp keeps
/// its session there); the SSE case is rmcp's default, with sessions.
async fn serve_rmcp_http(json: bool) -> io::Result<()> {
    let config = if json {
        StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
    } else {
        StreamableHttpServerConfig::default()
    };
    let service: StreamableHttpService<Calculator, LocalSessionManager> =
        StreamableHttpService::new(|| Ok(Calculator::new()), Arc::default(), config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("http://{}/mcp", listener.local_addr()?);
    let service = hyper_util::service::TowerToHyperService::new(service);
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    a: i64,
    b: i64,
}

/// The rmcp server, written as rmcp's own examples write one.
#[derive(Debug, Clone)]
struct Calculator {
    #[allow(dead_code, reason = "read by the code #[tool_handler] generates")]
    tool_router: ToolRouter<Self>,
}

impl Calculator {
    fn new() -> Self {
        Calculator {
            tool_router: Self::tool_router(),
        }
    }
}

#[tool_router]
impl Calculator {
    #[tool(description = "Adds two numbers")]
    fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> CallToolResult {
        let sum = a + b;
        let mut result = CallToolResult::success(vec![ContentBlock::text(sum.to_string())]);
        result.structured_content = Some(serde_json::json!({ "result": sum }));
        result
    }
}

#[tool_handler]
impl ServerHandler for Calculator {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}
