//! `jrpc`: serve, call and bench JSON-RPC servers.

/// `eprintln!` that never panics: a long-running command (`serve`,
/// `bridge`) must keep serving when whoever read its stderr has gone
/// (`jrpc serve 2>&1 | head`, a supervisor that closed the pipe) —
/// `eprintln!` panics on a closed stderr.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod bench;
mod bench_report;
mod bridge;
mod call;
mod call_line;
mod call_log;
mod check;
mod connect;
mod describe;
mod invoked;
mod mcp;
mod params_check;
mod pretty;
mod serve;
mod target;
mod wire;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Layer as _, SubscriberExt as _};
use tracing_subscriber::util::SubscriberInitExt as _;

/// JSON-RPC 2.0 from the command line.
#[derive(Debug, Parser)]
#[command(name = "jrpc", version, about, long_about = None)]
struct Cli {
    /// Log level for messages on stderr: error, warn, info, debug or trace.
    #[arg(long, global = true, default_value = "warn", value_name = "LEVEL")]
    log_level: tracing::Level,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the demo methods (subtract, add, sum, get_data, echo, sleep, and
    /// the notifications update, notify_hello, notify_sum).
    Serve(Box<serve::ServeCommand>),
    /// Call a method and print its result (exit status: 0 ok, 1 error
    /// response, 2 usage, 3 transport failure, 4 timeout).
    Call(call::CallArgs),
    /// List a server's methods, with their params, results and
    /// descriptions, from its rpc.discover (OpenRPC) document.
    Describe(describe::DescribeArgs),
    /// Check any JSON-RPC 2.0 server against the specification, knowing
    /// nothing of its methods: one line per rule (PASS/FAIL/SKIP), exit
    /// status 0 only if every rule passes.
    Check(check::CheckArgs),
    /// An interactive session with a server: type `method params...`,
    /// see results and the server's own messages as they arrive (piped
    /// input runs as a script).
    Connect(connect::ConnectCmdArgs),
    /// Load a server with calls and report requests/s, latency percentiles
    /// and errors.
    Bench(bench::BenchArgs),
    /// Connect two transports: -- COMMAND serves a stdio server to many
    /// clients over HTTP, WebSocket and TCP; --stdio TARGET lets a
    /// stdio-only client (an editor, an MCP host) reach a network server.
    Bridge(Box<bridge::BridgeArgs>),
    /// MCP (Model Context Protocol): serve the demo MCP server (stdio or
    /// Streamable HTTP), or list, call, read and prompt an MCP server.
    Mcp(mcp::McpArgs),
}

fn main() -> ExitCode {
    quiet_broken_pipe();
    let cli = Cli::parse_from(std::env::args_os().map(shield_negative_numbers));
    // A server this process runs gives memory back after waves of closed
    // connections (the library leaves that process-wide step to programs).
    jrpc::server::trim_memory_after_closes(true);
    // Logs go to stderr only: stdout may be the JSON-RPC stream. Call log
    // lines are INFO events of their own target, shown whatever the level.
    let logs_calls = match &cli.command {
        Command::Serve(command) => command.args.logs_calls(),
        Command::Bridge(args) => args.logs_calls(),
        _ => false,
    };
    let filter = Targets::new().with_default(cli.log_level);
    // `jrpc call -v`, `jrpc mcp … -v`: the frames and HTTP heads, plainly,
    // on stderr.
    let verbose = match &cli.command {
        Command::Call(args) => args.verbose(),
        Command::Mcp(args) => args.verbose(),
        _ => false,
    };
    let wire = verbose.then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .without_time()
            .with_level(false)
            .with_target(false)
            .with_filter(Targets::new().with_target(jrpc::transport::WIRE_TARGET, tracing::Level::TRACE))
    });
    let filter = filter.with_target(
        jrpc::transport::WIRE_TARGET,
        tracing::level_filters::LevelFilter::OFF,
    );
    // Call log lines, many per second under load, are written in batches.
    let call_log = logs_calls.then(|| {
        call_log::CallLogWriter::start();
        call_line::CallLines.with_filter(Targets::new().with_target(
            jrpc::middleware::CALL_LOG_TARGET,
            tracing::Level::INFO.max(cli.log_level),
        ))
    });
    let filter = filter.with_target(
        jrpc::middleware::CALL_LOG_TARGET,
        tracing::level_filters::LevelFilter::OFF,
    );
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .with_filter(filter),
        )
        .with(wire)
        .with(call_log)
        .init();

    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("jrpc: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::run(*args).await.map(|()| ExitCode::SUCCESS),
            Command::Call(args) => Ok(call::run(args).await),
            Command::Describe(args) => Ok(describe::run(args).await),
            Command::Check(args) => Ok(check::run(args).await),
            Command::Connect(args) => Ok(connect::run(args).await),
            Command::Bench(args) => Ok(bench::run(args).await),
            Command::Bridge(args) => Ok(bridge::run(*args).await),
            Command::Mcp(args) => mcp::run(args).await,
        }
    });
    // Tasks dropped with the runtime may still log (calls cut short are
    // logged as cancelled): the last call log lines go out after it.
    drop(runtime);
    call_log::CallLogWriter::flush();
    match result {
        Ok(code) if code != ExitCode::SUCCESS => code,
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("jrpc: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `jrpc check … | head`: the reader went away. Rust ignores SIGPIPE (a
/// server must survive a client hanging up), so printing panics on EPIPE;
/// the process ends quietly instead, with the status a Unix tool killed by
/// SIGPIPE has (141), not with a panic message.
fn quiet_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info.to_string();
        if text.contains("failed printing to std") && text.contains("Broken pipe") {
            call_log::CallLogWriter::flush();
            std::process::exit(141);
        }
        default(info);
    }));
}

/// clap takes `-2.5e-3` for a flag (it only knows plain negative numbers),
/// so negative numbers with an exponent get a leading space, which JSON
/// ignores and clap does not mistake for a flag.
fn shield_negative_numbers(arg: std::ffi::OsString) -> std::ffi::OsString {
    match arg.to_str() {
        Some(s)
            if s.starts_with('-')
                && s[1..].starts_with(|c: char| c.is_ascii_digit())
                && s.contains(['e', 'E'])
                && s.parse::<f64>().is_ok() =>
        {
            format!(" {s}").into()
        }
        _ => arg,
    }
}
