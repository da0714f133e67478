//! jrpc-mcp beside rmcp, as servers and as clients, in one run: `tools/call
//! add` per second over stdio and Streamable HTTP (SSE and JSON replies), in
//! 2025-11-25 sessions and as 2026-07-28 stateless requests; and a plain
//! JSON-RPC `add` over HTTP, the baseline of an MCP request's cost.
//!
//! ```text
//! cargo run --release --manifest-path bench/mcp-compare/Cargo.toml -- [--runs 3] [--calls 20000] [--in-flight 16] [--only MODE] [--server jrpc-mcp|rmcp] [--client jrpc-mcp|rmcp]
//! ```
//!
//! Every server runs as its own process (`serve SERVER MODE`, this same
//! binary) pinned to core 0; this process, pinned to core 1, is the client.
//! Each case pairs each server with each client, `--runs` times with a
//! fresh server process per run, and the table shows medians. See
//! `BENCHMARKS.md` for results.

mod clients;
mod servers;

use std::io;
use std::process::Stdio;
use std::time::{Duration, Instant};

use clients::{BoxError, Client, Kind, Target};
use servers::{Mode, Server};
use tokio::io::AsyncBufReadExt;

const SERVER_CPU: usize = 0;
const CLIENT_CPU: usize = 1;
const WARMUP_CALLS: u64 = 500;

struct Options {
    runs: usize,
    calls: u64,
    in_flight: u64,
    only: Option<Mode>,
    /// Only this server, only this client.
    server: Option<Server>,
    client: Option<Kind>,
}

fn usage() -> io::Error {
    io::Error::other(
        "usage: jrpc-mcp-compare [--runs N] [--calls N] [--in-flight N] [--only MODE] [--server S] [--client C]\n       \
         jrpc-mcp-compare serve jrpc-mcp|rmcp MODE\n       \
         jrpc-mcp-compare load jrpc-mcp|rmcp MODE CALLS URL|-- COMMAND...  (drives a server started elsewhere, under callgrind say)\n\
         MODE: stdio, http-sse, http-json (2025-11-25 sessions), stdio-2026, http-2026, http-jsonrpc (plain JSON-RPC)",
    )
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("serve") {
        let server = args.get(1).and_then(|s| Server::parse(s)).ok_or_else(usage)?;
        let mode = args.get(2).and_then(|m| Mode::parse(m)).ok_or_else(usage)?;
        pin(SERVER_CPU);
        return Ok(runtime()?.block_on(servers::serve(server, mode))?);
    }
    if args.first().map(String::as_str) == Some("load") {
        let kind = args.get(1).and_then(|k| Kind::parse(k)).ok_or_else(usage)?;
        let mode = args.get(2).and_then(|m| Mode::parse(m)).ok_or_else(usage)?;
        let calls = args.get(3).map_or(Ok(4_000), |n| n.parse())?;
        // A URL, or (stdio) the server's command after `--`.
        let rest = args.get(4..).unwrap_or_default();
        let target = match rest {
            [dash, program, command_args @ ..] if dash == "--" && mode.stdio() => {
                let mut command = tokio::process::Command::new(program);
                command.args(command_args).stderr(Stdio::inherit()).kill_on_drop(true);
                Target::Spawn(command)
            }
            [url] if !mode.stdio() => Target::Url(url.clone()),
            _ => return Err(usage().into()),
        };
        return runtime()?.block_on(async move {
            let client = Client::connect(kind, target, mode).await?;
            load(&client, calls, 16).await?;
            client.close().await;
            Ok(())
        });
    }
    let mut options = Options {
        runs: 3,
        calls: 20_000,
        in_flight: 16,
        only: None,
        server: None,
        client: None,
    };
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(usage);
        match flag.as_str() {
            "--runs" => options.runs = value()?.parse()?,
            "--calls" => options.calls = value()?.parse()?,
            "--in-flight" => options.in_flight = value()?.parse::<u64>()?.max(1),
            "--only" => options.only = Some(Mode::parse(&value()?).ok_or_else(usage)?),
            "--server" => options.server = Some(Server::parse(&value()?).ok_or_else(usage)?),
            "--client" => options.client = Some(Kind::parse(&value()?).ok_or_else(usage)?),
            _ => return Err(usage().into()),
        }
    }
    let pinned = pin(CLIENT_CPU);
    if !pinned {
        eprintln!("note: fewer than 2 cores (or affinity refused): server and client share the CPU");
    }
    runtime()?.block_on(compare(options))
}

/// What `#[tokio::main]` gives a process pinned to one core: the
/// multi-thread scheduler with one worker.
fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
}

struct Row {
    mode: Mode,
    server: Server,
    client: Kind,
    runs: Vec<Sample>,
}

/// One run's figures.
#[derive(Debug, Clone, Copy)]
struct Sample {
    calls_per_second: f64,
    /// CPU time (user + system) per call of the server process, and of
    /// this one (the client), in microseconds.
    server_cpu_us: f64,
    client_cpu_us: f64,
}

async fn compare(options: Options) -> Result<(), BoxError> {
    let mut rows = Vec::new();
    for mode in Mode::ALL {
        if options.only.is_some_and(|only| only != mode) {
            continue;
        }
        for server in Server::ALL {
            if !mode.served_by(server) || options.server.is_some_and(|only| only != server) {
                continue;
            }
            for client in Kind::ALL {
                if mode == Mode::HttpJsonRpc && client != Kind::Jrpc
                    || options.client.is_some_and(|only| only != client)
                {
                    continue;
                }
                let mut runs = Vec::new();
                for _ in 0..options.runs {
                    let sample = one_run(mode, server, client, &options).await?;
                    eprintln!(
                        "{:<9} server {:<8} client {:<8} {:>9.0} calls/s  server {:>5.1} µs/call  client {:>5.1} µs/call",
                        mode.name(),
                        server.name(),
                        client.name(),
                        sample.calls_per_second,
                        sample.server_cpu_us,
                        sample.client_cpu_us,
                    );
                    runs.push(sample);
                }
                rows.push(Row {
                    mode,
                    server,
                    client,
                    runs,
                });
            }
        }
    }
    print_tables(&rows, &options);
    Ok(())
}

/// One fresh server, one client: calls per second over `options.calls`
/// calls after a warm-up.
async fn one_run(mode: Mode, server: Server, kind: Kind, options: &Options) -> Result<Sample, BoxError> {
    let exe = std::env::current_exe()?;
    let mut command = tokio::process::Command::new(&exe);
    command.args(["serve", server.name(), mode.name()]);
    command.stderr(Stdio::inherit()).kill_on_drop(true);
    let mut http_server = None;
    let target = if mode.stdio() {
        Target::Spawn(command)
    } else {
        command.stdout(Stdio::piped()).stdin(Stdio::null());
        let mut child = command.spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut line = String::new();
        tokio::time::timeout(
            Duration::from_secs(20),
            tokio::io::BufReader::new(stdout).read_line(&mut line),
        )
        .await??;
        http_server = Some(child);
        Target::Url(line.trim().to_owned())
    };
    let client = Client::connect(kind, target, mode).await?;
    load(&client, WARMUP_CALLS, options.in_flight).await?;
    let (server_before, client_before) = (children_cpu(), own_cpu());
    let start = Instant::now();
    load(&client, options.calls, options.in_flight).await?;
    let elapsed = start.elapsed();
    let (server_after, client_after) = (children_cpu(), own_cpu());
    client.close().await;
    if let Some(mut child) = http_server {
        let _ = child.kill().await;
    }
    let per_call = |cpu: Duration| cpu.as_secs_f64() * 1e6 / options.calls as f64;
    Ok(Sample {
        calls_per_second: options.calls as f64 / elapsed.as_secs_f64(),
        server_cpu_us: per_call(server_after.saturating_sub(server_before)),
        client_cpu_us: per_call(client_after.saturating_sub(client_before)),
    })
}

/// User + system CPU time of process `pid` so far, from `/proc` (clock
/// ticks, 10 ms each: runs of a second or more keep the error to ~1%).
fn process_cpu(pid: &str) -> Option<(u32, Duration)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ppid = fields.get(1)?.parse().ok()?;
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some((ppid, Duration::from_micros(ticks * 1_000_000 / per_second)))
}

fn own_cpu() -> Duration {
    process_cpu("self").map_or(Duration::ZERO, |(_, cpu)| cpu)
}

/// CPU time of this process's children: the server under test.
fn children_cpu() -> Duration {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Duration::ZERO;
    };
    entries
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|pid| process_cpu(&pid))
        .filter(|(ppid, _)| *ppid == me)
        .map(|(_, cpu)| cpu)
        .sum()
}

/// `calls` calls of `add`, `in_flight` at a time, each result checked.
async fn load(client: &Client, calls: u64, in_flight: u64) -> Result<(), BoxError> {
    let mut workers = Vec::new();
    for worker in 0..in_flight {
        let client = client.clone();
        let share = calls / in_flight + u64::from(worker < calls % in_flight);
        workers.push(tokio::spawn(async move {
            for i in 0..share {
                let sum = client.add(i, worker).await?;
                if sum != (i + worker).to_string() {
                    return Err(format!("add({i}, {worker}) gave {sum:?}").into());
                }
            }
            Ok::<_, BoxError>(())
        }));
    }
    for worker in workers {
        worker.await??;
    }
    Ok(())
}

/// The run with the median rate.
fn median(runs: &[Sample]) -> Sample {
    let mut sorted = runs.to_vec();
    sorted.sort_by(|a, b| a.calls_per_second.total_cmp(&b.calls_per_second));
    sorted[sorted.len() / 2]
}

fn print_tables(rows: &[Row], options: &Options) {
    println!(
        "\n`tools/call add`, {} calls, {} in flight, medians of {} runs\n",
        options.calls, options.in_flight, options.runs
    );
    println!(
        "| transport | server | client | calls/s | server CPU/call | client CPU/call | runs (calls/s) |"
    );
    println!("|---|---|---|---:|---:|---:|---|");
    for row in rows {
        let runs: Vec<String> = row
            .runs
            .iter()
            .map(|r| format!("{:.0}", r.calls_per_second))
            .collect();
        let median = median(&row.runs);
        println!(
            "| {} | {} | {} | {:.0} | {:.1} µs | {:.1} µs | {} |",
            row.mode.name(),
            row.server.name(),
            row.client.name(),
            median.calls_per_second,
            median.server_cpu_us,
            median.client_cpu_us,
            runs.join(", ")
        );
    }
    let rate = |mode, server, client| {
        rows.iter()
            .find(|r| r.mode == mode && r.server == server && r.client == client)
            .map(|r| median(&r.runs))
    };
    println!("\njrpc-mcp / rmcp: calls/s, and CPU per call (lower is better) of the side compared\n");
    println!("| transport | both sides | server, jrpc-mcp client | server, rmcp client | server CPU/call, rmcp client | client, jrpc-mcp server | client, rmcp server | client CPU/call, rmcp server |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for mode in Mode::ALL {
        let (Some(jj), Some(jr), Some(rj), Some(rr)) = (
            rate(mode, Server::Jrpc, Kind::Jrpc),
            rate(mode, Server::Jrpc, Kind::Rmcp),
            rate(mode, Server::Rmcp, Kind::Jrpc),
            rate(mode, Server::Rmcp, Kind::Rmcp),
        ) else {
            continue;
        };
        let speed = |a: Sample, b: Sample| a.calls_per_second / b.calls_per_second;
        println!(
            "| {} | {:.2}× | {:.2}× | {:.2}× | {:.2}× | {:.2}× | {:.2}× | {:.2}× |",
            mode.name(),
            speed(jj, rr),
            speed(jj, rj),
            speed(jr, rr),
            jr.server_cpu_us / rr.server_cpu_us,
            speed(jj, jr),
            speed(rj, rr),
            rj.client_cpu_us / rr.client_cpu_us,
        );
    }
}

/// Pins this process (and the threads it starts later) to `cpu`; whether
/// it could.
fn pin(cpu: usize) -> bool {
    // SAFETY: cpu_set_t is plain data; the calls only read and write it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return false;
        }
        if libc::CPU_COUNT(&set) < 2 || !libc::CPU_ISSET(cpu, &set) {
            return false;
        }
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}
