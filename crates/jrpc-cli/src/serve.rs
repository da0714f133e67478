//! `jrpc serve`: the demo methods over a transport.

use anyhow::Context as _;
use clap::Args;
use jrpc::message::Limits;
use jrpc::Router;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve over stdin/stdout, one JSON text per line (the default, and for
    /// now the only transport). Logs go to stderr; the server exits when
    /// stdin ends.
    #[arg(long)]
    stdio: bool,

    /// Largest frame (one line) accepted, in bytes; longer lines are answered
    /// with error -32001 and skipped.
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
    let router = args.router();
    // `--stdio` is the only transport so far, so it is also the default.
    let _ = args.stdio;
    tracing::info!("serving the demo methods on stdin/stdout");
    jrpc::transport::serve_stdio(router)
        .await
        .context("serving stdin/stdout")
}
