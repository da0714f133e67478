//! `jrpc serve`: the demo methods over one or more transports.

use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use jrpc::codec::Framing;
use jrpc::message::Limits;
use jrpc::transport::Server;
use jrpc::Router;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve over stdin/stdout (the default when no listener is given).
    /// Logs go to stderr; stdio serving ends when stdin ends.
    #[arg(long)]
    stdio: bool,

    /// Listen on a TCP address, e.g. 127.0.0.1:4000 (port 0 picks a free
    /// port). May be given several times.
    #[arg(long, value_name = "ADDR")]
    tcp: Vec<String>,

    /// Listen on a Unix domain socket at PATH. May be given several times.
    #[arg(long, value_name = "PATH")]
    unix: Vec<String>,

    /// How frames are delimited on every transport: ndjson (one JSON text per
    /// line) or content-length (LSP-style headers).
    #[arg(long, default_value = "ndjson", value_name = "FRAMING")]
    framing: Framing,

    /// Most connections open at once per listener.
    #[arg(long, default_value_t = Server::DEFAULT_MAX_CONNECTIONS, value_name = "N")]
    max_connections: usize,

    /// Largest frame accepted, in bytes; larger frames are answered with
    /// error -32001 and skipped.
    #[arg(long, default_value_t = Limits::DEFAULT_MAX_FRAME_LEN, value_name = "BYTES")]
    max_frame_len: usize,

    /// Most entries in one batch; longer batches are answered with error -32002.
    #[arg(long, default_value_t = Limits::DEFAULT_MAX_BATCH_LEN, value_name = "N")]
    max_batch_len: usize,

    /// Deepest nesting of arrays and objects; deeper frames are answered with
    /// error -32003.
    #[arg(long, default_value_t = Limits::DEFAULT_MAX_DEPTH, value_name = "N")]
    max_depth: usize,

    /// Batch entries handled at the same time.
    #[arg(long, default_value_t = Router::DEFAULT_BATCH_CONCURRENCY, value_name = "N")]
    batch_concurrency: usize,

    /// Also accept JSON-RPC 1.0 requests (no "jsonrpc" member), answered in
    /// 1.0 form.
    #[arg(long)]
    accept_v1: bool,

    /// Put a panicking handler's message in the error's data.
    #[arg(long)]
    expose_internal_errors: bool,
}

impl ServeArgs {
    fn router(&self) -> Router {
        jrpc::demo::router()
            .max_frame_len(self.max_frame_len)
            .max_batch_len(self.max_batch_len)
            .max_depth(self.max_depth)
            .batch_concurrency(self.batch_concurrency)
            .accept_v1(self.accept_v1)
            .expose_internal_errors(self.expose_internal_errors)
    }
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let server = Server::new(args.router())
        .framing(args.framing)
        .max_connections(args.max_connections);
    let mut listeners = Vec::new();
    for addr in &args.tcp {
        let serving = server
            .bind_tcp(addr.as_str())
            .await
            .with_context(|| format!("listening on tcp {addr}"))?;
        listeners.push(serving);
    }
    for path in &args.unix {
        #[cfg(unix)]
        listeners.push(
            server
                .bind_unix(path)
                .await
                .with_context(|| format!("listening on unix {path}"))?,
        );
        #[cfg(not(unix))]
        anyhow::bail!("--unix {path}: Unix sockets are not available on this platform");
    }
    for serving in &listeners {
        // The addresses go to stderr (stdout may carry JSON-RPC) in the
        // form `jrpc call` takes as a target.
        eprintln!(
            "jrpc: listening on {} ({} framing)",
            serving.local_addr(),
            args.framing
        );
    }
    let stdio = args.stdio || listeners.is_empty();
    let stdio_done = async {
        if stdio {
            let reason: Arc<str> = server.serve_stdio().await;
            tracing::info!(%reason, "stdio closed");
        }
    };
    if listeners.is_empty() {
        stdio_done.await;
        return Ok(());
    }
    // With listeners, run until a signal; stdio ending does not stop them.
    tokio::join!(stdio_done, shutdown_signal());
    eprintln!("jrpc: shutting down: finishing requests in flight");
    for serving in listeners {
        serving.shutdown().await;
    }
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}
