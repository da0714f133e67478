//! # jrpc-mcp
//!
//! MCP (the Model Context Protocol) on jrpc: the protocol's types
//! ([`types`], revision 2025-11-25, also negotiating 2025-06-18, 2025-03-26
//! and 2024-11-05) and a server ([`server::McpServer`]) with tools,
//! resources, resource templates, prompts, progress, logging, cancellation,
//! and requests back to the client (sampling, elicitation, roots).
//!
//! The server is transport-neutral: it serves any jrpc
//! [`Connection`](jrpc::transport::Connection), stdio included. The JSON-RPC
//! core stays protocol-neutral; MCP's rules live here.

#![warn(missing_docs)]

pub mod client;
#[cfg(feature = "demo")]
pub mod demo;
pub mod headers;
#[cfg(feature = "http")]
pub mod http;
pub mod server;
pub mod types;

pub use client::{McpClient, McpClientError};
pub use server::{McpContext, McpServer, Structured, ToolError};

/// The `schemars` (1.x) that tools' argument and output types derive
/// `JsonSchema` with. Depend on `schemars = "1"` yourself to use the derive
/// plainly, or point it here: `#[schemars(crate = "jrpc_mcp::schemars")]`.
pub use schemars;
