//! jrpc beside jsonrpsee, in one run.
//!
//! ```text
//! cargo run --release --manifest-path bench/compare/Cargo.toml -- [--runs 3] [--duration 5] [--only ws] [--idle-connections N]
//! ```
//!
//! Each server runs as its own process pinned to core 0 (`serve KIND`);
//! this process, pinned to core 1, is the load generator. Every case runs
//! each of its servers in turn, `--runs` times, with a fresh server process
//! per run, and the table shows medians. See `BENCHMARKS.md` for results.

mod inprocess;
mod load;
mod servers;

use std::io::{self, BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use load::{Load, Outcome, Payload, Proto};
use servers::Kind;

const SERVER_CPU: usize = 0;
const LOAD_CPU: usize = 1;

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("serve") {
        let kind = args.get(1).and_then(|k| Kind::parse(k)).ok_or_else(|| {
            io::Error::other("usage: jrpc-compare serve jrpc|jsonrpsee|jrpc-tcp|raw-http|raw-ws|raw-line")
        })?;
        pin(SERVER_CPU);
        // What `#[tokio::main]` gives a process pinned to one core: the
        // multi-thread scheduler with one worker.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        return runtime.block_on(servers::serve(kind));
    }
    if args.first().map(String::as_str) == Some("load") {
        // For profiling one server by hand: `load http|ws|line PORT CONNECTIONS IN_FLIGHT SECONDS`.
        let usage =
            || io::Error::other("usage: jrpc-compare load http|ws|line PORT CONNECTIONS IN_FLIGHT SECONDS");
        let proto = match args.get(1).map(String::as_str) {
            Some("http") => Proto::Http,
            Some("ws") => Proto::Ws,
            Some("line") => Proto::Line,
            _ => return Err(usage()),
        };
        let number = |i: usize| args.get(i).and_then(|v| v.parse::<u64>().ok()).ok_or_else(usage);
        let load = Load {
            proto,
            addr: SocketAddr::from(([127, 0, 0, 1], number(2)? as u16)),
            connections: number(3)? as usize,
            in_flight: number(4)? as usize,
            warmup: Duration::ZERO,
            duration: Duration::from_secs(number(5)?),
            payload: Payload::single("add", "[1,2]"),
            server_pid: 0,
            cores: None,
        };
        pin(LOAD_CPU);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let outcome = runtime.block_on(load::run(load))?;
        println!(
            "{:.0} replies/s, {} errors",
            outcome.replies as f64 / outcome.seconds,
            outcome.errors
        );
        return Ok(());
    }
    let mut options = Options::parse(&args)?;
    let pinned = pin(LOAD_CPU);
    options.pinned = pinned;
    raise_fd_limit();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(compare(options, pinned))
}

struct Options {
    runs: usize,
    duration: Duration,
    warmup: Duration,
    only: Vec<String>,
    idle_connections: usize,
    /// Servers and the load generator run on cores of their own.
    pinned: bool,
}

impl Options {
    fn parse(args: &[String]) -> io::Result<Options> {
        let mut options = Options {
            runs: 3,
            duration: Duration::from_secs(5),
            warmup: Duration::from_secs(1),
            only: Vec::new(),
            idle_connections: 10_000,
            pinned: false,
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut value = || {
                args.next()
                    .ok_or_else(|| io::Error::other(format!("{arg} needs a value")))
            };
            let number = |v: &String| {
                v.parse::<f64>()
                    .map_err(|_| io::Error::other(format!("{arg}: not a number: {v}")))
            };
            match arg.as_str() {
                "--runs" => options.runs = number(value()?)?.max(1.0) as usize,
                "--duration" => options.duration = Duration::from_secs_f64(number(value()?)?),
                "--warmup" => options.warmup = Duration::from_secs_f64(number(value()?)?),
                "--only" => options.only.push(value()?.clone()),
                "--idle-connections" => options.idle_connections = number(value()?)? as usize,
                "-h" | "--help" => {
                    println!(
                        "jrpc-compare [--runs N (3)] [--duration SECS (5)] [--warmup SECS (1)] \
                         [--only SUBSTRING]...  [--idle-connections N (10000, 0 skips)]"
                    );
                    std::process::exit(0);
                }
                other => return Err(io::Error::other(format!("unknown argument {other}; try --help"))),
            }
        }
        Ok(options)
    }

    fn wants(&self, case: &str) -> bool {
        self.only.is_empty()
            || self
                .only
                .iter()
                .any(|o| case.to_lowercase().contains(&o.to_lowercase()))
    }
}

/// What a case's throughput counts.
#[derive(Clone, Copy)]
enum Unit {
    Requests,
    Items,
    Bytes,
}

/// What a correct reply looks like.
#[derive(Clone, Copy)]
enum Expect {
    Sum,
    Echo(usize),
    Batch(usize),
}

struct Case {
    name: String,
    proto: Proto,
    connections: usize,
    in_flight: usize,
    payload: Payload,
    servers: Vec<Kind>,
    unit: Unit,
    expect: Expect,
}

fn cases() -> Vec<Case> {
    let add = Payload::single("add", "[1,2]");
    let mut cases = Vec::new();
    // HTTP keeps one request in flight per connection (as wrk does);
    // WebSocket keeps 64.
    for (proto, label, in_flight, ceiling) in [
        (Proto::Http, "HTTP", 1, Kind::RawHttp),
        (Proto::Ws, "WS", 64, Kind::RawWs),
    ] {
        for connections in [1, 16, 256] {
            let pipelined = if in_flight > 1 {
                format!(" x {in_flight}")
            } else {
                String::new()
            };
            cases.push(Case {
                name: format!("{label} add, {connections} conn{pipelined}"),
                proto,
                connections,
                in_flight,
                payload: add.clone(),
                servers: vec![Kind::Jrpc, Kind::Jsonrpsee, ceiling],
                unit: Unit::Requests,
                expect: Expect::Sum,
            });
        }
    }
    cases.push(Case {
        name: "HTTP batch of 100, 16 conn".into(),
        proto: Proto::Http,
        connections: 16,
        in_flight: 1,
        payload: Payload::batch("add", "[1,2]", 100),
        servers: vec![Kind::Jrpc, Kind::Jsonrpsee],
        unit: Unit::Items,
        expect: Expect::Batch(100),
    });
    for (label, size) in [("1 KiB", 1024), ("64 KiB", 64 * 1024), ("1 MiB", 1024 * 1024)] {
        let text = "x".repeat(size);
        let mut payload = Payload::single("echo", &format!("[\"{text}\"]"));
        payload.bytes = size as u64;
        cases.push(Case {
            name: format!("HTTP echo {label}, 16 conn"),
            proto: Proto::Http,
            connections: 16,
            in_flight: 1,
            payload,
            servers: vec![Kind::Jrpc, Kind::Jsonrpsee],
            unit: Unit::Bytes,
            expect: Expect::Echo(size),
        });
    }
    cases.push(Case {
        name: "TCP add, 16 conn x 64".into(),
        proto: Proto::Line,
        connections: 16,
        in_flight: 64,
        payload: add.clone(),
        servers: vec![Kind::JrpcTcp, Kind::RawLine],
        unit: Unit::Requests,
        expect: Expect::Sum,
    });
    // The `jrpc` command with `--log-calls --metrics` against without, in
    // the same run (`add` is one of its demo methods).
    for (name, proto, in_flight, servers) in [
        (
            "HTTP add, 16 conn, log + metrics",
            Proto::Http,
            1,
            [Kind::CliHttp, Kind::CliHttpLogged],
        ),
        (
            "TCP add, 16 conn x 64, log + metrics",
            Proto::Line,
            64,
            [Kind::CliTcp, Kind::CliTcpLogged],
        ),
    ] {
        cases.push(Case {
            name: name.into(),
            proto,
            connections: 16,
            in_flight,
            payload: add.clone(),
            servers: servers.to_vec(),
            unit: Unit::Requests,
            expect: Expect::Sum,
        });
    }
    cases
}

/// One run's figures.
#[derive(Clone, Copy, Default)]
struct Sample {
    /// Requests, items or bytes per second.
    rate: f64,
    p50_us: f64,
    p99_us: f64,
    /// Server CPU per request (per item for batches).
    cpu_us: f64,
    peak_rss: f64,
    /// Least-served connection over the median connection.
    fairness: f64,
    errors: f64,
    /// The load generator's CPU over the window's length (1.0: its core
    /// was saturated, so the load generator may be the bottleneck).
    load_cpu: f64,
    /// The busy share of the server's core (softirq included): near 1.0
    /// the server's core is what bounds the case.
    server_core: f64,
    /// The busy share of the load generator's core: near 1.0 the load
    /// generator is what bounds the case.
    load_core: f64,
    /// The server's core time per request (per item for batches): its
    /// busy share of the window over the requests served. Counts the
    /// kernel's network work that the process's CPU time leaves out.
    core_us: f64,
}

async fn compare(options: Options, pinned: bool) -> io::Result<()> {
    eprintln!(
        "jrpc-compare: {} runs x {:?} (+{:?} warmup) per case and server; {}",
        options.runs,
        options.duration,
        options.warmup,
        if pinned {
            "servers on core 0, load on core 1"
        } else {
            "not pinned (fewer than 2 cores)"
        }
    );
    let mut rows: Vec<(String, Kind, Unit, Sample)> = Vec::new();
    for case in cases().into_iter().filter(|c| options.wants(&c.name)) {
        let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); case.servers.len()];
        for run in 0..options.runs {
            for (i, &kind) in case.servers.iter().enumerate() {
                let sample = run_case(&case, kind, &options).await?;
                eprintln!(
                    "  {} | {} | run {}: {} p99 {:.0} µs, {:.2} µs CPU/op, load generator {:.0}% busy",
                    case.name,
                    kind.name(),
                    run + 1,
                    format_rate(sample.rate, case.unit),
                    sample.p99_us,
                    sample.cpu_us,
                    sample.load_cpu * 100.0
                );
                samples[i].push(sample);
            }
        }
        for (kind, runs) in case.servers.iter().zip(samples) {
            rows.push((case.name.clone(), *kind, case.unit, median_sample(&runs)));
        }
    }
    let inprocess = if options.wants("in-process") {
        let mut timings = Vec::new();
        for run in 0..options.runs {
            let (ours, theirs, floor) = inprocess::time_once().await;
            eprintln!(
                "  in-process | run {}: jrpc {ours:.0} ns, jsonrpsee {theirs:.0} ns, serde_json floor {floor:.0} ns",
                run + 1
            );
            timings.push((ours, theirs, floor));
        }
        Some(timings)
    } else {
        None
    };
    let idle = if options.idle_connections > 0 && options.wants("idle") {
        let mut results = vec![Vec::new(), Vec::new()];
        for _ in 0..options.runs {
            for (i, kind) in [Kind::Jrpc, Kind::Jsonrpsee].into_iter().enumerate() {
                let result = idle_case(kind, options.idle_connections).await?;
                eprintln!(
                    "  idle WS | {} | {:.1} KB per connection, {:.0}% returned after close",
                    kind.name(),
                    result.0 / 1024.0,
                    result.1 * 100.0
                );
                results[i].push(result);
            }
        }
        Some(results)
    } else {
        None
    };
    print_tables(&rows, inprocess.as_deref(), idle.as_deref(), &options);
    Ok(())
}

/// Starts a fresh server, loads it, checks a reply, stops it.
async fn run_case(case: &Case, kind: Kind, options: &Options) -> io::Result<Sample> {
    let (mut child, addr) = start_server(kind)?;
    let outcome = load::run(Load {
        proto: case.proto,
        addr,
        connections: case.connections,
        in_flight: case.in_flight,
        warmup: options.warmup,
        duration: options.duration,
        payload: case.payload.clone(),
        server_pid: child.id(),
        cores: options.pinned.then_some((SERVER_CPU, LOAD_CPU)),
    })
    .await;
    let peak_rss = load::memory(child.id(), "VmHWM") as f64;
    let _ = child.kill();
    let _ = child.wait();
    let outcome = outcome.map_err(|e| io::Error::other(format!("{} on {}: {e}", case.name, kind.name())))?;
    if !kind.is_ceiling() {
        check_reply(&outcome.sample, case.expect)
            .map_err(|e| io::Error::other(format!("{} on {}: wrong reply: {e}", case.name, kind.name())))?;
    }
    Ok(sample(&outcome, case, peak_rss))
}

fn sample(outcome: &Outcome, case: &Case, peak_rss: f64) -> Sample {
    let replies = outcome.replies as f64;
    let items = replies * case.payload.items as f64;
    let rate = match case.unit {
        Unit::Requests => replies,
        Unit::Items => items,
        Unit::Bytes => replies * case.payload.bytes as f64,
    } / outcome.seconds;
    let mut per_connection = outcome.per_connection.clone();
    per_connection.sort_unstable();
    let median = per_connection.get(per_connection.len() / 2).copied().unwrap_or(0) as f64;
    let least = per_connection.first().copied().unwrap_or(0) as f64;
    Sample {
        rate,
        p50_us: outcome.latency.value_at_quantile(0.5) as f64 / 1e3,
        p99_us: outcome.latency.value_at_quantile(0.99) as f64 / 1e3,
        cpu_us: if items > 0.0 {
            outcome.server_cpu * 1e6 / items
        } else {
            0.0
        },
        peak_rss,
        fairness: if median > 0.0 { least / median } else { 0.0 },
        errors: outcome.errors as f64,
        load_cpu: outcome.load_cpu / outcome.seconds,
        server_core: outcome.cores_busy.map_or(0.0, |(server, _)| server),
        load_core: outcome.cores_busy.map_or(0.0, |(_, load)| load),
        core_us: match outcome.cores_busy {
            Some((server, _)) if items > 0.0 => server * outcome.seconds * 1e6 / items,
            _ => 0.0,
        },
    }
}

fn check_reply(reply: &[u8], expect: Expect) -> Result<(), String> {
    let value: serde_json::Value = serde_json::from_slice(reply).map_err(|e| format!("{e}"))?;
    let fine = match expect {
        Expect::Sum => value["result"] == 3,
        Expect::Echo(size) => value["result"]
            .as_str()
            .is_some_and(|s| s.len() == size && s.bytes().all(|b| b == b'x')),
        Expect::Batch(n) => value
            .as_array()
            .is_some_and(|items| items.len() == n && items.iter().all(|item| item["result"] == 3)),
    };
    if fine {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&reply[..reply.len().min(200)]).into_owned())
    }
}

/// Opens `connections` WebSocket connections and leaves them idle: returns
/// the server's resident memory per connection and the share of it given
/// back two seconds after they all closed.
async fn idle_case(kind: Kind, connections: usize) -> io::Result<(f64, f64)> {
    let (mut child, addr) = start_server(kind)?;
    let pid = child.id();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = load::memory(pid, "VmRSS") as f64;
    let mut open = Vec::with_capacity(connections);
    let result = async {
        for chunk in (0..connections).collect::<Vec<_>>().chunks(100) {
            let handshakes = chunk.iter().map(|_| load::connect(addr, Proto::Ws));
            for stream in futures_join(handshakes).await {
                open.push(stream?);
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let loaded = load::memory(pid, "VmRSS") as f64;
        open.clear();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after = load::memory(pid, "VmRSS") as f64;
        let per_connection = (loaded - before) / connections as f64;
        let returned = if loaded > before {
            (loaded - after) / (loaded - before)
        } else {
            1.0
        };
        Ok::<_, io::Error>((per_connection, returned))
    }
    .await;
    let _ = child.kill();
    let _ = child.wait();
    result.map_err(|e| io::Error::other(format!("idle WS on {}: {e}", kind.name())))
}

/// Runs futures concurrently on this thread and collects their outputs.
async fn futures_join<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + 'static,
    F::Output: 'static,
{
    let local = tokio::task::LocalSet::new();
    let handles: Vec<_> = futures.map(|f| local.spawn_local(f)).collect();
    local
        .run_until(async move {
            let mut out = Vec::with_capacity(handles.len());
            for handle in handles {
                out.push(handle.await.expect("handshake task"));
            }
            out
        })
        .await
}

/// Spawns `jrpc-compare serve KIND` and waits for its port.
fn start_server(kind: Kind) -> io::Result<(Child, SocketAddr)> {
    if kind.is_cli() {
        return start_cli(kind);
    }
    let mut child = Command::new(std::env::current_exe()?)
        .args(["serve", kind.name()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
    let port: u16 = line
        .strip_prefix("PORT ")
        .and_then(|p| p.trim().parse().ok())
        .ok_or_else(|| io::Error::other(format!("{} did not report its port: {line:?}", kind.name())))?;
    Ok((child, SocketAddr::from(([127, 0, 0, 1], port))))
}

/// The `jrpc` command of the release build beside this crate.
fn jrpc_command() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/jrpc")
}

/// Starts `jrpc serve` for `kind`, pinned to the servers' core, on a free
/// port, and waits until it accepts connections. Its stderr (the call log
/// when on) is written, as a real server's would be, to /dev/null.
fn start_cli(kind: Kind) -> io::Result<(Child, SocketAddr)> {
    use std::os::unix::process::CommandExt;
    let command = jrpc_command();
    if !command.exists() {
        return Err(io::Error::other(format!(
            "{} not found: build it first (cargo build --release -p jrpc-cli)",
            command.display()
        )));
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let mut spawn = Command::new(&command);
    spawn
        .args(kind.cli_args(port))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the closure only calls sched_setaffinity, which is
    // async-signal-safe, between fork and exec.
    unsafe {
        spawn.pre_exec(|| {
            // Inherited: this process is pinned to the load generator's core.
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(SERVER_CPU, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            Ok(())
        });
    }
    let mut child = spawn.spawn()?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    for _ in 0..100 {
        if std::net::TcpStream::connect(addr).is_ok() {
            return Ok((child, addr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(io::Error::other(format!(
        "{} did not listen on {addr}",
        kind.name()
    )))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

fn median_sample(runs: &[Sample]) -> Sample {
    let of = |f: fn(&Sample) -> f64| median(runs.iter().map(f).collect());
    Sample {
        rate: of(|s| s.rate),
        p50_us: of(|s| s.p50_us),
        p99_us: of(|s| s.p99_us),
        cpu_us: of(|s| s.cpu_us),
        peak_rss: of(|s| s.peak_rss),
        fairness: of(|s| s.fairness),
        errors: of(|s| s.errors),
        load_cpu: of(|s| s.load_cpu),
        server_core: of(|s| s.server_core),
        load_core: of(|s| s.load_core),
        core_us: of(|s| s.core_us),
    }
}

fn format_rate(rate: f64, unit: Unit) -> String {
    match unit {
        Unit::Requests => format!("{} req/s", si(rate)),
        Unit::Items => format!("{} items/s", si(rate)),
        Unit::Bytes => format!("{:.0} MB/s", rate / 1e6),
    }
}

fn si(value: f64) -> String {
    if value >= 1e6 {
        format!("{:.2} M", value / 1e6)
    } else if value >= 1e3 {
        format!("{:.1} k", value / 1e3)
    } else {
        format!("{value:.0}")
    }
}

fn format_latency(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

fn print_tables(
    rows: &[(String, Kind, Unit, Sample)],
    inprocess: Option<&[(f64, f64, f64)]>,
    idle: Option<&[Vec<(f64, f64)>]>,
    options: &Options,
) {
    println!(
        "\nMedians of {} runs x {:.0} s; servers pinned to core {SERVER_CPU}, load generator to core {LOAD_CPU}.\n",
        options.runs,
        options.duration.as_secs_f64()
    );
    print_case_tables(rows);
    print_other_tables(inprocess, idle, options);
}

fn print_case_tables(rows: &[(String, Kind, Unit, Sample)]) {
    if rows.is_empty() {
        return;
    }
    println!("| case | jrpc | jsonrpsee | jrpc / jsonrpsee | ceiling | jrpc / ceiling | CPU/op jrpc | CPU/op jsonrpsee | CPU jrpc / jsonrpsee |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut names: Vec<&String> = Vec::new();
    let mut logged: Vec<&String> = Vec::new();
    for (name, kind, ..) in rows {
        let list = if kind.is_logged() { &mut logged } else { &mut names };
        if !list.contains(&name) {
            list.push(name);
        }
    }
    // Cases of the call log and metrics have a table of their own.
    names.retain(|name| !logged.contains(name));
    for name in &names {
        let find = |pred: fn(Kind) -> bool| rows.iter().find(|(n, k, ..)| n == *name && pred(*k));
        let ours = find(|k| matches!(k, Kind::Jrpc | Kind::JrpcTcp));
        let theirs = find(|k| k == Kind::Jsonrpsee);
        let ceiling = find(Kind::is_ceiling);
        let unit = ours.map_or(Unit::Requests, |r| r.2);
        let cell = |row: Option<&(String, Kind, Unit, Sample)>| {
            row.map_or("—".into(), |r| format_rate(r.3.rate, unit))
        };
        let ratio = |a: Option<&(String, Kind, Unit, Sample)>,
                     b: Option<&(String, Kind, Unit, Sample)>,
                     f: fn(&Sample) -> f64| match (a, b) {
            (Some(a), Some(b)) if f(&b.3) > 0.0 => format!("{:.2}×", f(&a.3) / f(&b.3)),
            _ => "—".into(),
        };
        let cpu = |row: Option<&(String, Kind, Unit, Sample)>| {
            row.map_or("—".into(), |r| format!("{:.2} µs", r.3.cpu_us))
        };
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(ours),
            cell(theirs),
            ratio(ours, theirs, |s| s.rate),
            cell(ceiling),
            ratio(ours, ceiling, |s| s.rate),
            cpu(ours),
            cpu(theirs),
            ratio(ours, theirs, |s| s.cpu_us),
        );
    }
    if !logged.is_empty() {
        println!("\n| case | jrpc | with call log + metrics | on / off | CPU/op off | CPU/op on |");
        println!("|---|---:|---:|---:|---:|---:|");
        for name in &logged {
            let find = |pred: fn(Kind) -> bool| rows.iter().find(|(n, k, ..)| n == *name && pred(*k));
            let (Some(off), Some(on)) = (find(|k| k.is_cli() && !k.is_logged()), find(Kind::is_logged))
            else {
                continue;
            };
            println!(
                "| {name} | {} | {} | {:.2}× | {:.2} µs | {:.2} µs |",
                format_rate(off.3.rate, off.2),
                format_rate(on.3.rate, on.2),
                if off.3.rate > 0.0 {
                    on.3.rate / off.3.rate
                } else {
                    0.0
                },
                off.3.cpu_us,
                on.3.cpu_us
            );
        }
    }
    println!("\n| case | server | throughput | p50 | p99 | server CPU/op | server core/op | peak RSS | least-served conn / median | errors | load generator busy | server core busy | load core busy |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, kind, unit, s) in rows {
        println!(
            "| {name} | {} | {} | {} | {} | {:.2} µs | {:.2} µs | {:.1} MB | {:.2} | {:.0} | {:.0}% | {:.0}% | {:.0}% |",
            kind.name(),
            format_rate(s.rate, *unit),
            format_latency(s.p50_us),
            format_latency(s.p99_us),
            s.cpu_us,
            s.core_us,
            s.peak_rss / 1e6,
            s.fairness,
            s.errors,
            s.load_cpu * 100.0,
            s.server_core * 100.0,
            s.load_core * 100.0
        );
    }
}

fn print_other_tables(
    inprocess: Option<&[(f64, f64, f64)]>,
    idle: Option<&[Vec<(f64, f64)>]>,
    options: &Options,
) {
    if let Some(timings) = inprocess {
        let ours = median(timings.iter().map(|t| t.0).collect());
        let theirs = median(timings.iter().map(|t| t.1).collect());
        let floor = median(timings.iter().map(|t| t.2).collect());
        println!("\n| in-process `add`, one core | jrpc | jsonrpsee | serde_json floor | jrpc / floor | jsonrpsee / jrpc |");
        println!("|---|---:|---:|---:|---:|---:|");
        println!(
            "| ns per request → response | {ours:.0} | {theirs:.0} | {floor:.0} | {:.2}× | {:.2}× |",
            ours / floor,
            theirs / ours
        );
    }
    if let Some(idle) = idle {
        println!(
            "\n| {} idle WebSocket connections | RSS per connection | returned 2 s after closing |",
            options.idle_connections
        );
        println!("|---|---:|---:|");
        for (kind, results) in [Kind::Jrpc, Kind::Jsonrpsee].iter().zip(idle) {
            let per = median(results.iter().map(|r| r.0).collect());
            let returned = median(results.iter().map(|r| r.1).collect());
            println!(
                "| {} | {:.1} KB | {:.0}% |",
                kind.name(),
                per / 1024.0,
                returned * 100.0
            );
        }
    }
}

/// Pins this process (and the threads it starts later) to one CPU, if the
/// machine has more than one online. Returns whether it did.
///
/// It asks the machine, not this process's current affinity: a server is
/// started by the runner, which is already pinned to the load generator's
/// core, and must still move to its own. (Until 2026-11-24 it checked the
/// inherited affinity, found one core, and left every `serve KIND` server
/// on the load generator's core.)
fn pin(cpu: usize) -> bool {
    // SAFETY: sysconf has no preconditions; cpu_set_t is plain data and the
    // affinity call only reads it.
    unsafe {
        let online = libc::sysconf(libc::_SC_NPROCESSORS_ONLN);
        if online < 2 || cpu >= online as usize {
            return false;
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Raises the open-file limit to its hard maximum (servers inherit it):
/// the idle case holds 10 000 connections on both ends.
fn raise_fd_limit() {
    // SAFETY: rlimit is plain data.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            let wanted = 65_536.max(limit.rlim_cur);
            limit.rlim_max = limit.rlim_max.max(wanted);
            limit.rlim_cur = wanted.min(limit.rlim_max);
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                // Not root: the soft limit can still rise to the hard one.
                libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
                limit.rlim_cur = limit.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            }
        }
    }
}
