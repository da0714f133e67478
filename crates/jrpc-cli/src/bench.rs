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

use crate::bench_report::{self, Errors};
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
  jrpc bench sum 1 2 3 --requests 10000 -- jrpc serve --stdio
  jrpc bench http://127.0.0.1:4000 add 1 2 -d 30s --report run.html
  jrpc bench --compare before.html after.html --report compared.html
  jrpc bench nats://A:4222,B:4222/demo add 1 2 -d 20s --idempotent --retries 5 --mark 5s,10s

With --retries, a call tried again counts once, by how it ended at last;
\"retried\" says how many calls needed more than one attempt. --mark splits
the figures at moments of the run (when a fault was injected, say): each
part's requests, errors and latency percentiles are shown apart.

A run of more than two seconds shows its progress (elapsed, requests/s,
errors) on one line of stderr when stderr is a terminal.")]
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

    /// Split the results at these times since the start (when a fault is
    /// injected, say): each part's requests, errors and latency
    /// percentiles are reported apart (`phases` in --json).
    #[arg(long, value_name = "T[,T...]", value_delimiter = ',', value_parser = parse_duration)]
    mark: Vec<Duration>,

    /// Print the results as JSON.
    #[arg(long)]
    json: bool,

    /// Also write the results as one self-contained HTML page: requests/s
    /// each second, latency percentiles (log scale), errors by kind. With
    /// --compare: where the comparison goes (stdout without it).
    #[arg(long, value_name = "FILE.html")]
    report: Option<std::path::PathBuf>,

    /// Draw two or more earlier runs side by side, from their --report
    /// pages or --json output, instead of running: jrpc bench --compare
    /// A.html B.html --report both.html
    #[arg(long, value_name = "REPORT", num_args = 2.., conflicts_with_all = ["json", "command"])]
    compare: Vec<std::path::PathBuf>,

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
    /// Requests that failed so far.
    failed: AtomicU64,
    limit: u64,
    /// Open loop: the interval between scheduled requests.
    interval: Option<Duration>,
    /// Where `--mark` splits the run, in order.
    marks: Vec<Duration>,
    retries: Arc<RetryTally>,
}

/// Calls tried again, counted by the retry policy's hook (or, for MCP, by
/// each call's own count of repeats).
#[derive(Default)]
pub(crate) struct RetryTally {
    /// Calls that needed more than one attempt.
    retried: AtomicU64,
    /// Attempts after the first, in all.
    retries: AtomicU64,
}

impl RetryTally {
    fn count(&self, retry: u32) {
        if retry == 1 {
            self.retried.fetch_add(1, Ordering::Relaxed);
        }
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    /// A call that was sent `again` more times than once.
    pub(crate) fn count_call(&self, again: u64) {
        if again > 0 {
            self.retried.fetch_add(1, Ordering::Relaxed);
            self.retries.fetch_add(again, Ordering::Relaxed);
        }
    }

    fn reset(&self) {
        self.retried.store(0, Ordering::Relaxed);
        self.retries.store(0, Ordering::Relaxed);
    }
}

/// One request of a load run, as a worker makes it: its outcome.
pub(crate) type Caller = Arc<
    dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), CallError>> + Send>>
        + Send
        + Sync,
>;

/// How a load run goes: its bounds, its pace and where it is split.
pub(crate) struct Load {
    pub(crate) duration: Duration,
    pub(crate) requests: Option<u64>,
    pub(crate) rate: Option<f64>,
    pub(crate) marks: Vec<Duration>,
}

/// What a load run measured.
pub(crate) struct Measured {
    elapsed: Duration,
    whole: Tally,
    parts: Vec<Tally>,
    seconds: Vec<bench_report::Second>,
    retried: u64,
    retries: u64,
    marks: Vec<Duration>,
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

/// What requests came to: the whole run's, or one part's (`--mark`).
struct Tally {
    latencies: Histogram<u64>,
    errors: Errors,
    ok: u64,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            latencies: Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds"),
            errors: Errors::default(),
            ok: 0,
        }
    }

    fn record(&mut self, micros: u64, outcome: &Result<(), CallError>) {
        let _ = self.latencies.record(micros.min(3_600_000_000));
        match outcome {
            Ok(()) => self.ok += 1,
            Err(e) => self.errors.count(e),
        }
    }

    fn add(&mut self, other: &Tally) {
        let _ = self.latencies.add(&other.latencies);
        self.errors.add(&other.errors);
        self.ok += other.ok;
    }
}

struct Worker {
    whole: Tally,
    /// One per part of the run split by `--mark` (none without).
    parts: Vec<Tally>,
}

async fn work(caller: Caller, shared: Arc<Shared>) -> Worker {
    let parts = if shared.marks.is_empty() {
        0
    } else {
        shared.marks.len() + 1
    };
    let mut worker = Worker {
        whole: Tally::new(),
        parts: (0..parts).map(|_| Tally::new()).collect(),
    };
    while let Some(due) = shared.next().await {
        let outcome = caller().await;
        let micros = u64::try_from(due.elapsed().as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        worker.whole.record(micros, &outcome);
        if !worker.parts.is_empty() {
            // By when it finished.
            let now = shared.started.elapsed();
            let part = shared.marks.partition_point(|mark| *mark <= now);
            worker.parts[part].record(micros, &outcome);
        }
        if outcome.is_err() {
            shared.failed.fetch_add(1, Ordering::Relaxed);
        }
        shared.done.fetch_add(1, Ordering::Relaxed);
    }
    worker
}

/// A JSON-RPC request of `jrpc bench`: one call, or a batch of `batch`.
fn json_rpc_caller(
    client: Client,
    method: Arc<str>,
    params: Arc<Option<Box<RawValue>>>,
    batch: Option<usize>,
    timeout: Duration,
) -> Caller {
    Arc::new(move || {
        let (client, method, params) = (client.clone(), Arc::clone(&method), Arc::clone(&params));
        Box::pin(async move {
            match batch {
                None => client.call_raw(&method, &*params, timeout).await.map(drop),
                Some(k) => {
                    let mut b = client.batch();
                    let calls: Vec<_> = (0..k)
                        .map(|_| b.call::<Box<RawValue>>(&method, &*params))
                        .collect();
                    b.send().await?;
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
        })
    })
}

pub async fn run(args: BenchArgs) -> ExitCode {
    match bench(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => crate::call::report(failure),
    }
}

async fn bench(args: BenchArgs) -> Result<(), Failure> {
    if !args.compare.is_empty() {
        return compare(&args);
    }
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
    let mut marks = args.mark.clone();
    marks.sort();
    marks.dedup();
    let retries = Arc::new(RetryTally::default());
    let mut connect = args.connect.clone();
    connect.on_retry = Some(crate::target::RetryHook({
        let retries = Arc::clone(&retries);
        Arc::new(move |retrying| retries.count(retrying.retry))
    }));
    let params = Arc::new(crate::call::params(&args.params, &positional).map_err(Failure::Usage)?);

    // Connect everything first, and check once that the call works at all.
    let mut clients = Vec::with_capacity(args.connections);
    let auto_batch = args.auto_batch;
    for _ in 0..args.connections {
        let client = target
            .clone()
            .connect_with(&connect, |builder| match auto_batch {
                Some(settings) => builder.auto_batch(settings),
                None => builder,
            })
            .await?;
        clients.push(client);
    }
    clients[0]
        .call_raw(&method, &*params, args.connect.dial.timeout)
        .await?;
    // The check's retries are not the run's.
    retries.reset();

    let mut callers = Vec::new();
    for client in &clients {
        for _ in 0..args.in_flight {
            callers.push(json_rpc_caller(
                client.clone(),
                Arc::clone(&method),
                Arc::clone(&params),
                args.batch,
                args.connect.dial.timeout,
            ));
        }
    }
    let load = Load {
        duration: args.duration,
        requests: args.requests,
        rate: args.rate,
        marks,
    };
    let measured = drive(&load, callers, retries).await;
    let report = make_report(&args, &target, &method, &measured);
    print_report(&args, &report);
    if let Some(path) = &args.report {
        std::fs::write(path, bench_report::html(std::slice::from_ref(&report)))
            .map_err(|e| Failure::Usage(anyhow!("--report {}: {e}", path.display())))?;
    }
    // Closed before the runtime ends, so transports with threads of their
    // own (the AMQP client's) stop cleanly; bounded, the report is out.
    let mut closing = tokio::task::JoinSet::new();
    for client in clients {
        closing.spawn(client.close());
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), closing.join_all()).await;
    Ok(())
}

/// Runs a load: each caller in a worker of its own, closed loop (or on
/// the `--rate` schedule), until the duration passes or the requests are
/// made; what it measured, by second and by part.
pub(crate) async fn drive(load: &Load, callers: Vec<Caller>, retries: Arc<RetryTally>) -> Measured {
    let mut marks = load.marks.clone();
    marks.sort();
    marks.dedup();
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        started: Instant::now(),
        issued: AtomicU64::new(0),
        done: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        limit: load.requests.unwrap_or(u64::MAX),
        interval: load.rate.map(|r| Duration::from_secs_f64(1.0 / r)),
        marks,
        retries,
    });
    let tasks = callers
        .into_iter()
        .map(|caller| tokio::spawn(work(caller, Arc::clone(&shared))))
        .collect();
    let progress = std::io::stderr()
        .is_terminal()
        .then(|| tokio::spawn(progress(Arc::clone(&shared))));
    let sampled = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sampling = tokio::spawn(timeline(Arc::clone(&shared), Arc::clone(&sampled)));
    let deadline = tokio::time::sleep(load.duration);
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
    sampling.abort();
    let mut seconds = std::mem::take(&mut *sampled.lock().unwrap_or_else(|p| p.into_inner()));
    // The last, shorter second.
    let (done, failed) = (
        shared.done.load(Ordering::Relaxed),
        shared.failed.load(Ordering::Relaxed),
    );
    let retried = shared.retries.retried.load(Ordering::Relaxed);
    let (counted, counted_errors, counted_retried) = seconds
        .iter()
        .fold((0, 0, 0), |(r, e, t), s: &bench_report::Second| {
            (r + s.requests, e + s.errors, t + s.retried)
        });
    let rest = bench_report::Second {
        second: elapsed.as_secs_f64(),
        requests: done.saturating_sub(counted),
        errors: failed.saturating_sub(counted_errors),
        retried: retried.saturating_sub(counted_retried),
    };
    match seconds.last_mut() {
        // A sliver after the last whole second joins it: a rate over a few
        // milliseconds says nothing.
        Some(last) if rest.second - last.second < 0.25 => {
            last.second = rest.second;
            last.requests += rest.requests;
            last.errors += rest.errors;
            last.retried += rest.retried;
        }
        _ => seconds.push(rest),
    }
    let mut whole = Tally::new();
    let mut parts: Vec<Tally> = (0..workers.first().map_or(0, |w| w.parts.len()))
        .map(|_| Tally::new())
        .collect();
    for worker in workers {
        whole.add(&worker.whole);
        for (sum, part) in parts.iter_mut().zip(&worker.parts) {
            sum.add(part);
        }
    }
    Measured {
        elapsed,
        whole,
        parts,
        seconds,
        retried,
        retries: shared.retries.retries.load(Ordering::Relaxed),
        marks: shared.marks.clone(),
    }
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

/// The run's progress on one line of stderr, once it has gone on for two
/// seconds: elapsed, requests/s, errors.
async fn progress(shared: Arc<Shared>) {
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tick.tick().await;
        let done = shared.done.load(Ordering::Relaxed);
        let failed = shared.failed.load(Ordering::Relaxed);
        let secs = shared.started.elapsed().as_secs_f64();
        eprint!(
            "\r\x1b[2K{secs:6.1}s  {done} requests  {:.0} req/s  {failed} errors",
            done as f64 / secs
        );
    }
}

/// Adds the requests and errors finished in each second of the run to
/// `seconds`, until aborted.
async fn timeline(shared: Arc<Shared>, seconds: Arc<std::sync::Mutex<Vec<bench_report::Second>>>) {
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::from_std(shared.started) + Duration::from_secs(1),
        Duration::from_secs(1),
    );
    let (mut done, mut failed, mut retried) = (0, 0, 0);
    loop {
        tick.tick().await;
        let now_done = shared.done.load(Ordering::Relaxed);
        let now_failed = shared.failed.load(Ordering::Relaxed);
        let now_retried = shared.retries.retried.load(Ordering::Relaxed);
        seconds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(bench_report::Second {
                second: shared.started.elapsed().as_secs_f64(),
                requests: now_done - done,
                errors: now_failed - failed,
                retried: now_retried.saturating_sub(retried),
            });
        (done, failed, retried) = (now_done, now_failed, now_retried);
    }
}

/// The shell words that started this run, for the report.
fn command_line() -> String {
    std::env::args()
        .map(|word| {
            if !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,%+".contains(c))
            {
                word
            } else {
                format!("'{}'", word.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The percentiles of `latencies`.
fn latency_of(latencies: &Histogram<u64>) -> bench_report::Latency {
    let at = |q: f64| latencies.value_at_quantile(q);
    bench_report::Latency {
        p50: at(0.5),
        p75: at(0.75),
        p90: at(0.9),
        p95: at(0.95),
        p99: at(0.99),
        p999: at(0.999),
        p9999: at(0.9999),
        max: latencies.max(),
    }
}

fn make_report(args: &BenchArgs, target: &Target, method: &str, measured: &Measured) -> bench_report::Report {
    let mut report = measured.report(target.to_string(), method, args.connections, args.in_flight);
    report.batch = args.batch;
    report.auto_batch = args.auto_batch.map(|a| {
        serde_json::json!({
            "max_entries": a.max_entries(),
            "linger_ms": a.linger_window().as_secs_f64() * 1000.0,
        })
    });
    report.rate = args.rate;
    report.items_per_second = report.requests_per_second * args.batch.unwrap_or(1) as f64;
    report
}

impl Measured {
    /// The run's report: its totals, percentiles, errors, retries, timeline
    /// and parts, for `target` and `method` with `connections` x
    /// `in_flight` workers.
    pub(crate) fn report(
        &self,
        target: String,
        method: &str,
        connections: usize,
        in_flight: usize,
    ) -> bench_report::Report {
        let (ok, errors) = (self.whole.ok, &self.whole.errors);
        let requests = ok + errors.total();
        let secs = self.elapsed.as_secs_f64();
        let mut phases = Vec::new();
        let mut from = Duration::ZERO;
        for (i, part) in self.parts.iter().enumerate() {
            let to = self
                .marks
                .get(i)
                .copied()
                .unwrap_or(self.elapsed)
                .min(self.elapsed);
            phases.push(bench_report::Phase {
                from: from.as_secs_f64(),
                to: to.as_secs_f64(),
                requests: part.ok + part.errors.total(),
                ok: part.ok,
                latency_us: latency_of(&part.latencies),
                errors: part.errors.clone(),
            });
            from = to;
        }
        bench_report::Report {
            command_line: command_line(),
            target,
            method: method.to_owned(),
            connections,
            in_flight,
            batch: None,
            auto_batch: None,
            rate: None,
            seconds: secs,
            requests,
            ok,
            requests_per_second: requests as f64 / secs,
            items_per_second: requests as f64 / secs,
            latency_us: latency_of(&self.whole.latencies),
            errors: errors.clone(),
            retried: self.retried,
            retries: self.retries,
            phases,
            timeline: self.seconds.clone(),
        }
    }
}

/// `jrpc bench --compare`: earlier runs side by side.
fn compare(args: &BenchArgs) -> Result<(), Failure> {
    if !args.words.is_empty() {
        return Err(Failure::Usage(anyhow!(
            "--compare takes report files, not a TARGET or METHOD"
        )));
    }
    let mut runs = Vec::new();
    for path in &args.compare {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::Usage(anyhow!("--compare {}: {e}", path.display())))?;
        let read = bench_report::read(&text)
            .map_err(|e| Failure::Usage(e.context(format!("--compare {}", path.display()))))?;
        runs.extend(read);
    }
    // A page where asked for; else a table to read in the terminal.
    match &args.report {
        Some(path) => std::fs::write(path, bench_report::html(&runs))
            .map_err(|e| Failure::Usage(anyhow!("--report {}: {e}", path.display())))?,
        None => print!("{}", bench_report::text_table(&runs)),
    }
    Ok(())
}

fn print_report(args: &BenchArgs, report: &bench_report::Report) {
    print_run(
        report,
        &Shown {
            json: args.json,
            batch: args.batch,
            auto_batch: args.auto_batch,
            retried: args.connect.retries > 0,
            report: args.report.as_deref(),
            noun: if args.auto_batch.is_some() {
                "calls"
            } else {
                "requests"
            },
        },
    );
}

/// How a run's results are printed.
pub(crate) struct Shown<'a> {
    /// As JSON (one line), not as text.
    pub(crate) json: bool,
    pub(crate) batch: Option<usize>,
    pub(crate) auto_batch: Option<AutoBatch>,
    /// Whether calls may be tried again (then how many were is shown).
    pub(crate) retried: bool,
    /// Where the page went (`--report`).
    pub(crate) report: Option<&'a std::path::Path>,
    /// What is counted: requests, or calls.
    pub(crate) noun: &'a str,
}

/// Prints a run's results: JSON, or a few lines of text.
pub(crate) fn print_run(report: &bench_report::Report, shown: &Shown<'_>) {
    if shown.json {
        println!("{}", serde_json::to_string(report).unwrap_or_default());
        return;
    }
    let (requests, secs, errors) = (report.requests, report.seconds, &report.errors);
    let ms = |us: u64| us as f64 / 1000.0;
    let shape = match (shown.batch, shown.auto_batch) {
        (Some(k), _) => format!(", batches of {k}"),
        (None, Some(a)) => format!(
            ", automatic batches of up to {} calls ({:?} linger)",
            a.max_entries(),
            a.linger_window()
        ),
        (None, None) => String::new(),
    };
    let noun = shown.noun;
    println!(
        "{requests} {noun} in {secs:.2}s over {} connection(s) x {} in flight{shape}",
        report.connections, report.in_flight,
    );
    println!(
        "  {:<11} {:>12.0}",
        format!("{noun}/s"),
        report.requests_per_second
    );
    if shown.batch.is_some() || shown.auto_batch.is_some() {
        println!("  items/s     {:>12.0}", report.items_per_second);
    }
    let l = &report.latency_us;
    println!(
        "  latency ms  p50 {:.3}  p90 {:.3}  p99 {:.3}  p999 {:.3}  max {:.3}",
        ms(l.p50),
        ms(l.p90),
        ms(l.p99),
        ms(l.p999),
        ms(l.max)
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
    if !errors.http_status.is_empty() {
        println!("              {}", errors.by_status());
    }
    if shown.retried {
        println!(
            "  retried     {} {noun} took more than one attempt ({} retries in all)",
            report.retried, report.retries
        );
    }
    for phase in &report.phases {
        let l = &phase.latency_us;
        println!(
            "  {:>6.1}s-{:<6.1}s {:>9} {noun}  {:>9.0}/s  p50 {:.3}  p99 {:.3}  max {:.3}  errors {}",
            phase.from,
            phase.to,
            phase.requests,
            phase.requests as f64 / (phase.to - phase.from).max(1e-9),
            ms(l.p50),
            ms(l.p99),
            ms(l.max),
            phase.errors.total()
        );
    }
    if let Some(path) = shown.report {
        println!("  report      {}", path.display());
    }
}
