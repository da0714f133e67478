//! `jrpc bench`: a load generator for any target `jrpc call` reaches.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use clap::Args;
use hdrhistogram::Histogram;
use jrpc::client::{AutoBatch, Client};
use jrpc::message::RawValue;
use jrpc::CallError;

use crate::call::{parse_duration, ConnectArgs, Failure, ParamArgs, Target};

#[derive(Debug, Args)]
#[command(after_long_help = "\
Every run is bounded: by --duration (default 10s) or --requests, whichever
comes first. Latency is measured per request (a batch counts as one request
of --batch items). With --rate, requests are sent on a fixed schedule and
latency is measured from when each was due, so a stalled server shows up in
the percentiles instead of slowing the load down (no coordinated omission).

EXAMPLES:
  jrpc bench http://127.0.0.1:4000 add 1 2 --connections 16 --duration 10s
  jrpc bench ws://127.0.0.1:4000 echo hello --connections 16 --in-flight 64
  jrpc bench tcp://127.0.0.1:4001 add 1 2 --batch 100 --json
  jrpc bench http://127.0.0.1:4000 add 1 2 -c 1 -m 64 --auto-batch 32/1ms
  jrpc bench sum 1 2 3 --requests 10000 -- jrpc serve --stdio")]
pub struct BenchArgs {
    /// TARGET, METHOD and PARAMS (no TARGET when a command follows `--`).
    #[arg(value_name = "[TARGET] METHOD [PARAMS]", allow_negative_numbers = true)]
    words: Vec<String>,

    /// A command to spawn and load over its stdin/stdout.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,

    #[command(flatten)]
    params: ParamArgs,

    /// Connections (clients) to open.
    #[arg(long, short = 'c', default_value_t = 1, value_name = "N")]
    connections: usize,

    /// Requests in flight per connection.
    #[arg(long, short = 'm', default_value_t = 1, value_name = "M")]
    in_flight: usize,

    /// How long to run (the run also stops at --requests).
    #[arg(long, short = 'd', default_value = "10s", value_parser = parse_duration)]
    duration: Duration,

    /// Stop after this many requests.
    #[arg(long, short = 'n', value_name = "N")]
    requests: Option<u64>,

    /// Calls per request, sent as one batch.
    #[arg(long, value_name = "K")]
    batch: Option<usize>,

    /// Let the client gather concurrent calls into batch frames of up to N
    /// calls, each waiting at most LINGER (default 1ms) for others to join:
    /// the client library's automatic batching. Counts and rates are then
    /// of calls, not frames.
    #[arg(long, value_name = "N[/LINGER]", value_parser = parse_auto_batch, conflicts_with = "batch")]
    auto_batch: Option<AutoBatch>,

    /// Open loop: send this many requests per second in all, on a schedule.
    #[arg(long, value_name = "R")]
    rate: Option<f64>,

    /// Print the results as JSON.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    connect: ConnectArgs,
}

/// `N` or `N/LINGER` (`32`, `32/2ms`, `64/0`).
fn parse_auto_batch(text: &str) -> Result<AutoBatch, String> {
    let (count, linger) = match text.split_once('/') {
        Some((count, linger)) => (count, Some(linger)),
        None => (text, None),
    };
    let count: usize = count
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{text:?}: expected N[/LINGER] with N at least 1, e.g. 32 or 32/2ms"))?;
    let mut settings = AutoBatch::new(count);
    if let Some(linger) = linger {
        let linger = if linger == "0" {
            Duration::ZERO
        } else {
            parse_duration(linger).map_err(|e| format!("{text:?}: the linger window: {e}"))?
        };
        settings = settings.linger(linger);
    }
    Ok(settings)
}

/// What the workers share.
struct Shared {
    stop: AtomicBool,
    started: Instant,
    /// Requests taken (closed loop) or scheduled (open loop) so far.
    issued: AtomicU64,
    done: AtomicU64,
    limit: u64,
    /// Open loop: the interval between scheduled requests.
    interval: Option<Duration>,
}

impl Shared {
    /// The next request to make, and when it was due; `None` once the run
    /// is over.
    async fn next(&self) -> Option<Instant> {
        let n = self.issued.fetch_add(1, Ordering::Relaxed);
        if n >= self.limit || self.stop.load(Ordering::Relaxed) {
            return None;
        }
        match self.interval {
            None => Some(Instant::now()),
            Some(interval) => {
                let due = self.started + interval.mul_f64(n as f64);
                tokio::time::sleep_until(due.into()).await;
                (!self.stop.load(Ordering::Relaxed)).then_some(due)
            }
        }
    }
}

/// Errors by kind.
#[derive(Default, Debug, Clone, Copy)]
struct Errors {
    rpc: u64,
    timeout: u64,
    transport: u64,
    http: u64,
    other: u64,
}

impl Errors {
    fn count(&mut self, error: &CallError) {
        match error {
            CallError::Rpc(_) => self.rpc += 1,
            CallError::Timeout(_) => self.timeout += 1,
            CallError::Closed(_) | CallError::Io(_) => self.transport += 1,
            e if e.transport_error::<jrpc::client::HttpError>().is_some() => self.http += 1,
            _ => self.other += 1,
        }
    }

    fn add(&mut self, other: &Errors) {
        self.rpc += other.rpc;
        self.timeout += other.timeout;
        self.transport += other.transport;
        self.http += other.http;
        self.other += other.other;
    }

    fn total(&self) -> u64 {
        self.rpc + self.timeout + self.transport + self.http + self.other
    }
}

struct Worker {
    latencies: Histogram<u64>,
    errors: Errors,
    ok: u64,
}

async fn work(
    client: Client,
    shared: Arc<Shared>,
    method: Arc<str>,
    params: Arc<Option<Box<RawValue>>>,
    batch: Option<usize>,
    timeout: Duration,
) -> Worker {
    let mut worker = Worker {
        latencies: Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds"),
        errors: Errors::default(),
        ok: 0,
    };
    while let Some(due) = shared.next().await {
        let outcome = match batch {
            None => client.call_raw(&method, &*params, timeout).await.map(drop),
            Some(k) => {
                let mut b = client.batch();
                let calls: Vec<_> = (0..k)
                    .map(|_| b.call::<Box<RawValue>>(&method, &*params))
                    .collect();
                match b.send().await {
                    Err(e) => Err(e),
                    Ok(()) => {
                        let mut first_error = Ok(());
                        for call in calls {
                            if let Err(e) = call.await {
                                if first_error.is_ok() {
                                    first_error = Err(e);
                                }
                            }
                        }
                        first_error
                    }
                }
            }
        };
        let micros = u64::try_from(due.elapsed().as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        let _ = worker.latencies.record(micros.min(3_600_000_000));
        match outcome {
            Ok(()) => worker.ok += 1,
            Err(e) => worker.errors.count(&e),
        }
        shared.done.fetch_add(1, Ordering::Relaxed);
    }
    worker
}

pub async fn run(args: BenchArgs) -> ExitCode {
    match bench(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => crate::call::report(failure),
    }
}

async fn bench(args: BenchArgs) -> Result<(), Failure> {
    if args.connections == 0 || args.in_flight == 0 || args.batch == Some(0) {
        return Err(Failure::Usage(anyhow!(
            "--connections, --in-flight and --batch must be at least 1"
        )));
    }
    if args.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err(Failure::Usage(anyhow!(
            "--rate must be a positive number of requests per second"
        )));
    }
    let (target, mut words) = Target::from_words(args.words.clone(), &args.command)?;
    let method: Arc<str> = words
        .next()
        .ok_or_else(|| Failure::Usage(anyhow!("missing METHOD")))?
        .into();
    let positional: Vec<String> = words.collect();
    let params = Arc::new(crate::call::params(&args.params, &positional).map_err(Failure::Usage)?);

    // Connect everything first, and check once that the call works at all.
    let mut clients = Vec::with_capacity(args.connections);
    let auto_batch = args.auto_batch;
    for _ in 0..args.connections {
        let client = target
            .clone()
            .connect_with(&args.connect, |builder| match auto_batch {
                Some(settings) => builder.auto_batch(settings),
                None => builder,
            })
            .await?;
        clients.push(client);
    }
    clients[0]
        .call_raw(&method, &*params, args.connect.dial.timeout)
        .await?;

    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        started: Instant::now(),
        issued: AtomicU64::new(0),
        done: AtomicU64::new(0),
        limit: args.requests.unwrap_or(u64::MAX),
        interval: args.rate.map(|r| Duration::from_secs_f64(1.0 / r)),
    });
    let mut tasks = Vec::new();
    for client in &clients {
        for _ in 0..args.in_flight {
            tasks.push(tokio::spawn(work(
                client.clone(),
                Arc::clone(&shared),
                Arc::clone(&method),
                Arc::clone(&params),
                args.batch,
                args.connect.dial.timeout,
            )));
        }
    }
    let progress = std::io::stderr()
        .is_terminal()
        .then(|| tokio::spawn(progress(Arc::clone(&shared))));
    let deadline = tokio::time::sleep(args.duration);
    tokio::pin!(deadline);
    let mut all = futures_join(tasks);
    let workers = tokio::select! {
        workers = &mut all => workers,
        () = &mut deadline => {
            shared.stop.store(true, Ordering::Relaxed);
            all.await
        }
    };
    let elapsed = shared.started.elapsed();
    shared.stop.store(true, Ordering::Relaxed);
    if let Some(progress) = progress {
        progress.abort();
        eprint!("\r\x1b[2K");
    }
    let mut latencies = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds");
    let (mut errors, mut ok) = (Errors::default(), 0);
    for worker in workers {
        let _ = latencies.add(&worker.latencies);
        errors.add(&worker.errors);
        ok += worker.ok;
    }
    print_report(&args, &method, elapsed, ok, &errors, &latencies);
    // Closed before the runtime ends, so transports with threads of their
    // own (the AMQP client's) stop cleanly; bounded, the report is out.
    let mut closing = tokio::task::JoinSet::new();
    for client in clients {
        closing.spawn(client.close());
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), closing.join_all()).await;
    Ok(())
}

/// Awaits every task; a task that panicked counts as nothing done.
fn futures_join(
    tasks: Vec<tokio::task::JoinHandle<Worker>>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Vec<Worker>> + Send>> {
    Box::pin(async move {
        let mut workers = Vec::with_capacity(tasks.len());
        for task in tasks {
            if let Ok(worker) = task.await {
                workers.push(worker);
            }
        }
        workers
    })
}

async fn progress(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    tick.tick().await;
    loop {
        tick.tick().await;
        let done = shared.done.load(Ordering::Relaxed);
        let secs = shared.started.elapsed().as_secs_f64();
        eprint!(
            "\r\x1b[2K{secs:6.1}s  {done} requests  {:.0} req/s",
            done as f64 / secs
        );
    }
}

fn print_report(
    args: &BenchArgs,
    method: &str,
    elapsed: Duration,
    ok: u64,
    errors: &Errors,
    latencies: &Histogram<u64>,
) {
    let requests = ok + errors.total();
    let secs = elapsed.as_secs_f64();
    let items_per_request = args.batch.unwrap_or(1) as f64;
    let micros = |q: f64| latencies.value_at_quantile(q);
    if args.json {
        let report = serde_json::json!({
            "method": method,
            "connections": args.connections,
            "in_flight": args.in_flight,
            "batch": args.batch,
            "auto_batch": args.auto_batch.map(|a| serde_json::json!({
                "max_entries": a.max_entries(),
                "linger_ms": a.linger_window().as_secs_f64() * 1000.0,
            })),
            "rate": args.rate,
            "seconds": secs,
            "requests": requests,
            "ok": ok,
            "requests_per_second": requests as f64 / secs,
            "items_per_second": requests as f64 * items_per_request / secs,
            "latency_us": {
                "p50": micros(0.5), "p90": micros(0.9), "p99": micros(0.99),
                "p999": micros(0.999), "max": latencies.max(),
            },
            "errors": {
                "rpc": errors.rpc, "timeout": errors.timeout, "transport": errors.transport,
                "http": errors.http, "other": errors.other,
            },
        });
        println!("{report}");
        return;
    }
    let ms = |us: u64| us as f64 / 1000.0;
    let shape = match (args.batch, args.auto_batch) {
        (Some(k), _) => format!(", batches of {k}"),
        (None, Some(a)) => format!(
            ", automatic batches of up to {} calls ({:?} linger)",
            a.max_entries(),
            a.linger_window()
        ),
        (None, None) => String::new(),
    };
    // With automatic batching each request counted is a call.
    let noun = if args.auto_batch.is_some() {
        "calls"
    } else {
        "requests"
    };
    println!(
        "{requests} {noun} in {secs:.2}s over {} connection(s) x {} in flight{shape}",
        args.connections, args.in_flight,
    );
    println!("  requests/s  {:>12.0}", requests as f64 / secs);
    if args.batch.is_some() || args.auto_batch.is_some() {
        println!(
            "  items/s     {:>12.0}",
            requests as f64 * items_per_request / secs
        );
    }
    println!(
        "  latency ms  p50 {:.3}  p90 {:.3}  p99 {:.3}  p999 {:.3}  max {:.3}",
        ms(micros(0.5)),
        ms(micros(0.9)),
        ms(micros(0.99)),
        ms(micros(0.999)),
        ms(latencies.max())
    );
    println!(
        "  errors      {} (rpc {}, timeout {}, transport {}, http {}, other {})",
        errors.total(),
        errors.rpc,
        errors.timeout,
        errors.transport,
        errors.http,
        errors.other
    );
}
