//! MCP inside an axum app: jrpc-mcp's Streamable HTTP endpoint is a
//! `tower::Service`, so it mounts at a path of the app's choosing
//! (`/api/mcp` here) beside the app's own routes (`/hello`). Both protocol
//! eras are served there (2026-07-28 requests and 2025-11-25 sessions).
//!
//! ```sh
//! cargo run -p jrpc-examples --example mcp_in_axum [ADDR]   # default 127.0.0.1:0
//! jrpc mcp list http://ADDR/api/mcp
//! ```
//!
//! It prints `MCP at http://ADDR/api/mcp` on stderr, and serves until
//! Ctrl-C or SIGTERM.

use axum::routing::get;
use jrpc::server::http::route::RouteContext;
use jrpc_mcp::http::{HttpOptions, StreamableHttp};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let local = listener.local_addr()?;

    // The demo server (tools add, echo, sleep, ...); any McpServer fits.
    let server = jrpc_mcp::demo::server();
    // Long-lived streams (a legacy session's GET stream, subscriptions)
    // end when this is cancelled, so that shutting down does not wait on them.
    let shutdown = CancellationToken::new();
    let endpoint = StreamableHttp::new(server, HttpOptions::default())
        .context(RouteContext::new().with_shutdown(shutdown.clone()));

    let app = axum::Router::new()
        .route("/hello", get(|| async { "hello from the app's own route\n" }))
        .route_service("/api/mcp", endpoint);

    eprintln!("MCP at http://{local}/api/mcp");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            stop_signal().await;
            shutdown.cancel();
        })
        .await
}

/// Ctrl-C, or SIGTERM (how a service manager or a test stops it).
async fn stop_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
