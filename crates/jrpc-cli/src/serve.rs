//! `jrpc serve`: the demo methods over one or more transports.

use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use jrpc::codec::Framing;
use jrpc::message::Limits;
use jrpc::transport::http::{HttpServer, RateLimit};
use jrpc::transport::Server;
use jrpc::Router;

/// Where `jrpc serve` listens when given no transport at all.
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:4000";

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve over stdin/stdout. Logs go to stderr; stdio serving ends when
    /// stdin ends.
    #[arg(long)]
    stdio: bool,

    /// Serve HTTP (POST /) and WebSocket (GET / with an upgrade) on one
    /// address, e.g. 127.0.0.1:4000. May be given several times. With no
    /// transport flag at all, jrpc serves HTTP on 127.0.0.1:4000.
    #[arg(long, value_name = "ADDR")]
    http: Vec<String>,

    /// TLS certificate chain (PEM) for --http; needs --tls-key.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,

    /// TLS private key (PEM) for --http; needs --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,

    /// Require this bearer token (Authorization: Bearer TOKEN, or
    /// X-Api-Key: TOKEN) on HTTP and WebSocket. May be given several times.
    #[arg(long, value_name = "TOKEN")]
    auth_token: Vec<String>,

    /// Limit each client (by IP) to N requests a second on HTTP and
    /// WebSocket, with bursts of 2N.
    #[arg(long, value_name = "N")]
    rate_limit: Option<u32>,

    /// Allow cross-origin requests from any origin (CORS).
    #[arg(long)]
    cors: bool,

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

fn http_server(args: &ServeArgs, router: Router) -> anyhow::Result<HttpServer> {
    let mut server = HttpServer::new(router).max_connections(args.max_connections);
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        server = server
            .tls_pem(cert, key)
            .context("loading the TLS certificate and key")?;
    }
    if !args.auth_token.is_empty() {
        server = server.auth_tokens(args.auth_token.clone());
    }
    if let Some(n) = args.rate_limit {
        server = server.rate_limit(RateLimit::per_second(n, n.saturating_mul(2)));
    }
    if args.cors {
        server = server.cors(tower_http::cors::CorsLayer::permissive());
    }
    Ok(server)
}

pub async fn run(mut args: ServeArgs) -> anyhow::Result<()> {
    let no_transport = !args.stdio && args.http.is_empty() && args.tcp.is_empty() && args.unix.is_empty();
    if no_transport {
        args.http.push(DEFAULT_HTTP_ADDR.to_owned());
    }
    let http_only = [
        (!args.auth_token.is_empty(), "--auth-token"),
        (args.tls_cert.is_some(), "--tls-cert/--tls-key"),
        (args.rate_limit.is_some(), "--rate-limit"),
        (args.cors, "--cors"),
    ];
    if args.http.is_empty() {
        if let Some((_, flag)) = http_only.iter().find(|(given, _)| *given) {
            anyhow::bail!("{flag} applies to --http listeners only, and none is given");
        }
    }
    let router = args.router();
    let server = Server::new(router.clone())
        .framing(args.framing)
        .max_connections(args.max_connections);
    let mut listeners = Vec::new();
    if !args.http.is_empty() {
        let http = http_server(&args, router)?;
        for addr in &args.http {
            let serving = http
                .bind(addr.as_str())
                .await
                .with_context(|| format!("listening on http {addr}"))?;
            listeners.push(serving);
        }
    }
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
        let addr = serving.local_addr();
        if addr.starts_with("http") {
            let ws = addr.replacen("http", "ws", 1);
            eprintln!("jrpc: listening on {addr} (HTTP POST) and {ws} (WebSocket)");
        } else {
            eprintln!("jrpc: listening on {addr} ({} framing)", args.framing);
        }
    }
    if let Some(http) = listeners.iter().find(|s| s.local_addr().starts_with("http")) {
        print_try_lines(http.local_addr(), &args);
    }
    let stdio = args.stdio;
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
    // All listeners stop accepting at once; then each drains.
    for serving in &listeners {
        serving.shutdown_token().cancel();
    }
    for serving in listeners {
        serving.wait().await;
    }
    Ok(())
}

/// Prints ready-to-paste commands that call the server just started.
fn print_try_lines(addr: &str, args: &ServeArgs) {
    // A self-signed certificate must be trusted explicitly.
    let (curl_tls, call_tls) = match (&args.tls_cert, addr.starts_with("https")) {
        (Some(cert), true) => (
            format!(" --cacert {}", cert.display()),
            format!(" --cacert {}", cert.display()),
        ),
        _ => (String::new(), String::new()),
    };
    let auth = args
        .auth_token
        .first()
        .map(|t| format!(" -H 'Authorization: Bearer {t}'"))
        .unwrap_or_default();
    eprintln!("jrpc: try it:");
    eprintln!(
        "  curl{curl_tls} -s {addr}/ -H 'Content-Type: application/json'{auth} -d '{{\"jsonrpc\":\"2.0\",\"method\":\"subtract\",\"params\":[42,23],\"id\":1}}'"
    );
    eprintln!("  jrpc call {addr}{call_tls}{auth} subtract 42 23");
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
