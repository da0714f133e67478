//! What a `jrpc bench` run measured, as JSON (`--json`) and as one
//! self-contained HTML page (`--report FILE.html`): requests per second
//! over time, the latency percentiles on a log scale, the errors by kind,
//! with the command line, the target and the totals. The page needs no
//! script and fetches nothing; it carries its data as JSON too, so that
//! `jrpc bench --compare A.html B.html` can draw several runs side by side.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// One run. The field names of `--json` output (kept as they were, with
/// more beside them).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Report {
    #[serde(default)]
    pub(crate) command_line: String,
    #[serde(default)]
    pub(crate) target: String,
    pub(crate) method: String,
    pub(crate) connections: usize,
    pub(crate) in_flight: usize,
    pub(crate) batch: Option<usize>,
    pub(crate) auto_batch: Option<serde_json::Value>,
    pub(crate) rate: Option<f64>,
    pub(crate) seconds: f64,
    pub(crate) requests: u64,
    pub(crate) ok: u64,
    pub(crate) requests_per_second: f64,
    pub(crate) items_per_second: f64,
    pub(crate) latency_us: Latency,
    pub(crate) errors: Errors,
    /// Requests that took more than one attempt (`--retries`); each also
    /// counts once in `ok` or in `errors`, by how it ended.
    #[serde(default)]
    pub(crate) retried: u64,
    /// Attempts after the first, in all.
    #[serde(default)]
    pub(crate) retries: u64,
    /// The run split at `--mark`s, in order (none without them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) phases: Vec<Phase>,
    /// Requests finished (and errors) in each second of the run.
    #[serde(default)]
    pub(crate) timeline: Vec<Second>,
}

/// A part of a run, between two `--mark`s (or the start or the end):
/// what finished in it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Phase {
    /// Seconds since the start.
    pub(crate) from: f64,
    pub(crate) to: f64,
    pub(crate) requests: u64,
    pub(crate) ok: u64,
    pub(crate) latency_us: Latency,
    pub(crate) errors: Errors,
}

/// Latency percentiles, in microseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Latency {
    pub(crate) p50: u64,
    #[serde(default)]
    pub(crate) p75: u64,
    pub(crate) p90: u64,
    #[serde(default)]
    pub(crate) p95: u64,
    pub(crate) p99: u64,
    pub(crate) p999: u64,
    #[serde(default)]
    pub(crate) p9999: u64,
    pub(crate) max: u64,
}

impl Latency {
    /// Every percentile, in the order of [`PERCENTILES`] (0 for one an
    /// older `--json` report did not have).
    fn all(&self) -> [u64; 8] {
        [
            self.p50, self.p75, self.p90, self.p95, self.p99, self.p999, self.p9999, self.max,
        ]
    }
}

/// The labels of [`Latency::all`].
const PERCENTILES: [&str; 8] = ["p50", "p75", "p90", "p95", "p99", "p99.9", "p99.99", "max"];

/// Errors by kind, and the HTTP refusals by status.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Errors {
    pub(crate) rpc: u64,
    pub(crate) timeout: u64,
    pub(crate) transport: u64,
    pub(crate) http: u64,
    pub(crate) other: u64,
    /// The `http` errors by status (`429`: rate limited, `503`: busy...).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(crate) http_status: std::collections::BTreeMap<u16, u64>,
}

impl Errors {
    /// Counts `error` under its kind.
    pub(crate) fn count(&mut self, error: &jrpc::CallError) {
        use jrpc::CallError;
        match error {
            CallError::Rpc(_) => self.rpc += 1,
            CallError::Timeout(_) => self.timeout += 1,
            CallError::Closed(_) | CallError::Io(_) => self.transport += 1,
            e if e.transport_error::<jrpc::client::HttpError>().is_some() => {
                self.http += 1;
                if let Some(refusal) = e.transport_error::<jrpc::client::HttpError>() {
                    *self.http_status.entry(refusal.status).or_default() += 1;
                }
            }
            _ => self.other += 1,
        }
    }

    /// Adds another tally's counts to these.
    pub(crate) fn add(&mut self, other: &Errors) {
        self.rpc += other.rpc;
        self.timeout += other.timeout;
        self.transport += other.transport;
        self.http += other.http;
        self.other += other.other;
        for (status, n) in &other.http_status {
            *self.http_status.entry(*status).or_default() += n;
        }
    }

    /// The HTTP refusals by status, as a line: `http 429: 12 034, http 503: 5`.
    pub(crate) fn by_status(&self) -> String {
        let shown: Vec<String> = self
            .http_status
            .iter()
            .map(|(status, n)| format!("http {status}: {}", grouped(*n)))
            .collect();
        shown.join(", ")
    }

    pub(crate) fn total(&self) -> u64 {
        self.rpc + self.timeout + self.transport + self.http + self.other
    }

    fn kinds(&self) -> [(&'static str, u64); 5] {
        [
            ("rpc", self.rpc),
            ("timeout", self.timeout),
            ("transport", self.transport),
            ("http", self.http),
            ("other", self.other),
        ]
    }
}

/// `12034` as `12 034`: digits in groups of three.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// One second of a run.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Second {
    /// Seconds since the start, at the end of this one (the last may be
    /// shorter).
    pub(crate) second: f64,
    pub(crate) requests: u64,
    pub(crate) errors: u64,
    /// Requests that were tried again in this second.
    #[serde(default)]
    pub(crate) retried: u64,
}

/// Where the page keeps its data, for `--compare`.
const DATA_OPEN: &str = r#"<script type="application/json" id="jrpc-bench-data">"#;
const DATA_CLOSE: &str = "</script>";

/// The runs in a report file: a page written by `--report`, or JSON
/// (`--json` output: one run, or an array of them).
pub(crate) fn read(text: &str) -> anyhow::Result<Vec<Report>> {
    let json = match text.find(DATA_OPEN) {
        Some(start) => {
            let rest = &text[start + DATA_OPEN.len()..];
            let end = rest
                .find(DATA_CLOSE)
                .ok_or_else(|| anyhow::anyhow!("the page's data block is not closed"))?;
            rest[..end].replace("<\\/", "</")
        }
        None => text.to_owned(),
    };
    let value: serde_json::Value = serde_json::from_str(json.trim())
        .map_err(|e| anyhow::anyhow!("neither a jrpc bench page nor its JSON: {e}"))?;
    match value {
        serde_json::Value::Array(runs) => runs
            .into_iter()
            .map(|run| serde_json::from_value(run).map_err(Into::into))
            .collect(),
        run => Ok(vec![serde_json::from_value(run)?]),
    }
}

/// Colours of the runs, in order.
const COLOURS: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"];

fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A number for people: 1.2 M, 35.4 k, 812.
fn human(n: f64) -> String {
    if n >= 1e6 {
        format!("{:.2} M", n / 1e6)
    } else if n >= 1e4 {
        format!("{:.1} k", n / 1e3)
    } else {
        format!("{n:.0}")
    }
}

fn latency_text(us: u64) -> String {
    if us >= 1000 {
        format!("{:.2} ms", us as f64 / 1000.0)
    } else {
        format!("{us} µs")
    }
}

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 20.0;
const BOTTOM: f64 = 40.0;

/// A plot's frame: the `<svg>` element with its axes, and the writers of
/// its tick labels, its axis label and its lines.
struct Plot {
    svg: String,
}

impl Plot {
    fn new(id: &str, description: &str) -> Plot {
        let mut svg = format!(
            r#"<svg id="{id}" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{description}">"#
        );
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{b}" stroke="#333"/><line x1="{LEFT}" y1="{b}" x2="{r}" y2="{b}" stroke="#333"/>"##,
            b = HEIGHT - BOTTOM,
            r = WIDTH - RIGHT
        );
        Plot { svg }
    }

    /// A label under the x axis at `x`.
    fn x_tick(&mut self, x: f64, text: &str) {
        let _ = write!(
            self.svg,
            r#"<text x="{x:.1}" y="{}" text-anchor="middle" class="tick">{text}</text>"#,
            HEIGHT - BOTTOM + 16.0
        );
    }

    /// A label left of the y axis at `y`, with a grid line when `grid`.
    fn y_tick(&mut self, y: f64, text: &str, grid: bool) {
        if grid {
            let _ = write!(
                self.svg,
                r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/>"##,
                WIDTH - RIGHT
            );
        }
        let _ = write!(
            self.svg,
            r#"<text x="{}" y="{:.1}" text-anchor="end" class="tick">{text}</text>"#,
            LEFT - 6.0,
            y + 4.0
        );
    }

    /// What the x axis measures.
    fn x_label(&mut self, text: &str) {
        let _ = write!(
            self.svg,
            r#"<text x="{}" y="{}" text-anchor="middle" class="label">{text}</text>"#,
            (LEFT + WIDTH - RIGHT) / 2.0,
            HEIGHT - 4.0
        );
    }

    /// Run `run`'s line through `points`, with a dot on each when `dots`.
    fn line(&mut self, run: usize, points: &[(f64, f64)], dots: bool) {
        self.polyline(run, points, "run", "");
        for (x, y) in points.iter().filter(|_| dots) {
            let _ = write!(
                self.svg,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{}"/>"#,
                colour(run)
            );
        }
    }

    /// Run `run`'s second line (its errors), dashed, through `points`.
    fn dashed_line(&mut self, run: usize, points: &[(f64, f64)]) {
        self.polyline(run, points, "errors", r#" stroke-dasharray="6 4""#);
    }

    fn polyline(&mut self, run: usize, points: &[(f64, f64)], class: &str, style: &str) {
        let joined: Vec<String> = points.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = write!(
            self.svg,
            r#"<polyline class="{class}" fill="none" stroke="{}" stroke-width="2"{style} points="{}"/>"#,
            colour(run),
            joined.join(" ")
        );
    }

    fn end(mut self) -> String {
        self.svg.push_str("</svg>");
        self.svg
    }
}

/// A run's requests (or, `errors`, its errors) per second in each second,
/// at the middle of it.
fn rates(run: &Report, errors: bool) -> Vec<(f64, f64)> {
    let mut previous = 0.0;
    run.timeline
        .iter()
        .map(|s| {
            let count = if errors { s.errors } else { s.requests };
            let point = (
                (previous + s.second) / 2.0,
                count as f64 / (s.second - previous).max(1e-3),
            );
            previous = s.second;
            point
        })
        .collect()
}

/// Requests per second over time, one line per run, and each run's errors
/// per second dashed beside it (a run whose requests were mostly refused
/// does not look healthy).
fn throughput_svg(runs: &[Report]) -> String {
    let longest = runs
        .iter()
        .flat_map(|r| r.timeline.last().map(|s| s.second))
        .fold(1.0_f64, f64::max);
    let requests: Vec<Vec<(f64, f64)>> = runs.iter().map(|r| rates(r, false)).collect();
    let errors: Vec<Vec<(f64, f64)>> = runs.iter().map(|r| rates(r, true)).collect();
    let highest = requests
        .iter()
        .chain(&errors)
        .flatten()
        .map(|(_, v)| *v)
        .fold(1.0_f64, f64::max)
        * 1.1;
    let x = |t: f64| LEFT + t / longest * (WIDTH - LEFT - RIGHT);
    let y = |v: f64| HEIGHT - BOTTOM - v / highest * (HEIGHT - TOP - BOTTOM);
    let mut plot = Plot::new("throughput", "requests per second over time");
    for i in 0..=4 {
        let v = highest * f64::from(i) / 4.0;
        plot.y_tick(y(v), &human(v), false);
        let t = longest * f64::from(i) / 4.0;
        let shown = if longest < 10.0 {
            format!("{t:.1} s")
        } else {
            format!("{t:.0} s")
        };
        plot.x_tick(x(t), &shown);
    }
    plot.x_label("seconds into the run");
    for (i, run) in requests.iter().enumerate() {
        let points: Vec<(f64, f64)> = run.iter().map(|(t, v)| (x(*t), y(*v))).collect();
        plot.line(i, &points, false);
    }
    for (i, run) in errors.iter().enumerate() {
        if run.iter().any(|(_, v)| *v > 0.0) {
            let points: Vec<(f64, f64)> = run.iter().map(|(t, v)| (x(*t), y(*v))).collect();
            plot.dashed_line(i, &points);
        }
    }
    plot.end()
}

/// The latency percentiles on a log scale, one line per run.
fn latency_svg(runs: &[Report]) -> String {
    let all: Vec<u64> = runs
        .iter()
        .flat_map(|r| r.latency_us.all())
        .filter(|us| *us > 0)
        .collect();
    let low = all.iter().copied().min().unwrap_or(1).max(1) as f64;
    let high = all.iter().copied().max().unwrap_or(10).max(2) as f64;
    let low_decade = low.log10().floor();
    let high_decade = high.log10().ceil().max(low_decade + 1.0);
    let x = |i: usize| LEFT + i as f64 / (PERCENTILES.len() - 1) as f64 * (WIDTH - LEFT - RIGHT);
    let y = |us: f64| {
        let f = (us.log10() - low_decade) / (high_decade - low_decade);
        HEIGHT - BOTTOM - f * (HEIGHT - TOP - BOTTOM)
    };
    let mut plot = Plot::new("latency", "latency percentiles, log scale");
    let mut decade = low_decade;
    while decade <= high_decade {
        let us = 10f64.powf(decade);
        plot.y_tick(y(us), &latency_text(us as u64), true);
        decade += 1.0;
    }
    for (i, label) in PERCENTILES.iter().enumerate() {
        plot.x_tick(x(i), label);
    }
    plot.x_label("percentile (log scale of latency)");
    for (i, run) in runs.iter().enumerate() {
        // A percentile an older report lacks is left out of its line.
        let points: Vec<(f64, f64)> = run
            .latency_us
            .all()
            .into_iter()
            .enumerate()
            .filter(|(_, us)| *us > 0)
            .map(|(at, us)| (x(at), y(us as f64)))
            .collect();
        plot.line(i, &points, true);
    }
    plot.end()
}

/// How `value` differs from `base`, the first run's: `+3.2 %`, `-10.0 %`.
fn change(base: f64, value: f64) -> String {
    if base == 0.0 {
        return if value == 0.0 {
            "±0 %".to_owned()
        } else {
            "new".to_owned()
        };
    }
    let percent = (value - base) / base * 100.0;
    if percent.abs() < 0.05 {
        "±0 %".to_owned()
    } else {
        format!("{percent:+.1} %")
    }
}

/// Runs side by side as a text table, each figure with its change from the
/// first run: what `--compare` prints without `--report`.
pub(crate) fn text_table(runs: &[Report]) -> String {
    let mut rows = vec![[
        "run".to_owned(),
        "requests/s".to_owned(),
        "change".to_owned(),
        "p50".to_owned(),
        "change".to_owned(),
        "p99".to_owned(),
        "change".to_owned(),
        "errors".to_owned(),
        "change".to_owned(),
    ]];
    let first = runs.first();
    for (i, run) in runs.iter().enumerate() {
        let versus = |pick: fn(&Report) -> f64| match (i, first) {
            (0, _) | (_, None) => String::new(),
            (_, Some(first)) => change(pick(first), pick(run)),
        };
        rows.push([
            format!("{} {}", i + 1, run.target),
            human(run.requests_per_second),
            versus(|r| r.requests_per_second),
            latency_text(run.latency_us.p50),
            versus(|r| r.latency_us.p50 as f64),
            latency_text(run.latency_us.p99),
            versus(|r| r.latency_us.p99 as f64),
            run.errors.total().to_string(),
            versus(|r| r.errors.total() as f64),
        ]);
    }
    let widths: Vec<usize> = (0..9)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| match c {
                0 => format!("{cell:<w$}", w = widths[c]),
                _ => format!("{cell:>w$}", w = widths[c]),
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    for (i, run) in runs.iter().enumerate() {
        if !run.errors.http_status.is_empty() {
            let _ = writeln!(out, "run {}: {}", i + 1, run.errors.by_status());
        }
    }
    out
}

/// A figure of run `i`, and after the first run its change from the first.
fn with_change(runs: &[Report], i: usize, shown: String, pick: fn(&Report) -> f64) -> String {
    match (i, runs.first()) {
        (0, _) | (_, None) => shown,
        (_, Some(first)) => format!("{shown} ({})", change(pick(first), pick(&runs[i]))),
    }
}

/// The page for one run, or several side by side.
pub(crate) fn html(runs: &[Report]) -> String {
    let title = match runs {
        [one] => format!("jrpc bench: {} {}", one.target, one.method),
        _ => format!("jrpc bench: {} runs compared", runs.len()),
    };
    let mut page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>\
         body{{font-family:sans-serif;margin:24px;color:#222}} table{{border-collapse:collapse;margin:8px 0 20px}}\
         td,th{{border:1px solid #ccc;padding:4px 10px;text-align:right}} th{{background:#f3f3f3}}\
         td.l,th.l{{text-align:left}} code{{font-size:90%}} .tick{{font-size:11px;fill:#444}}\
         .label{{font-size:12px;fill:#222}} .swatch{{display:inline-block;width:12px;height:12px;margin-right:6px}}\
         </style></head><body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    page.push_str("<h2>Runs</h2>\n<table id=\"runs\"><tr><th class=\"l\">run</th><th class=\"l\">command line</th><th class=\"l\">target</th><th>connections × in flight</th><th>seconds</th><th>requests</th><th>requests/s</th><th>p50</th><th>p99</th><th>errors</th><th>retried</th></tr>\n");
    for (i, run) in runs.iter().enumerate() {
        let _ = writeln!(
            page,
            "<tr><td class=\"l\"><span class=\"swatch\" style=\"background:{}\"></span>{}</td><td class=\"l\"><code>{}</code></td><td class=\"l\">{}</td><td>{} × {}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            colour(i),
            i + 1,
            escape(&run.command_line),
            escape(&run.target),
            run.connections,
            run.in_flight,
            run.seconds,
            run.requests,
            with_change(runs, i, human(run.requests_per_second), |r| r.requests_per_second),
            with_change(runs, i, latency_text(run.latency_us.p50), |r| r.latency_us.p50 as f64),
            with_change(runs, i, latency_text(run.latency_us.p99), |r| r.latency_us.p99 as f64),
            with_change(runs, i, run.errors.total().to_string(), |r| r.errors.total() as f64),
            run.retried,
        );
    }
    page.push_str("</table>\n<h2>Requests per second, each second</h2>\n<p>Solid: requests per second; dashed: errors per second.</p>\n");
    page.push_str(&throughput_svg(runs));
    page.push_str("\n<h2>Latency percentiles</h2>\n");
    page.push_str(&latency_svg(runs));
    page.push_str("\n<table id=\"percentiles\"><tr><th class=\"l\">run</th>");
    for label in PERCENTILES {
        let _ = write!(page, "<th>{label}</th>");
    }
    page.push_str("</tr>\n");
    for (i, run) in runs.iter().enumerate() {
        let _ = write!(page, "<tr><td class=\"l\">{}</td>", i + 1);
        for us in run.latency_us.all() {
            let shown = if us == 0 {
                "–".to_owned()
            } else {
                latency_text(us)
            };
            let _ = write!(page, "<td>{shown}</td>");
        }
        page.push_str("</tr>\n");
    }
    page.push_str("</table>\n<h2>Errors by kind</h2>\n<table id=\"errors\"><tr><th class=\"l\">run</th>");
    for (kind, _) in Errors::default().kinds() {
        let _ = write!(page, "<th>{kind}</th>");
    }
    page.push_str("<th>total</th></tr>\n");
    for (i, run) in runs.iter().enumerate() {
        let _ = write!(page, "<tr><td class=\"l\">{}</td>", i + 1);
        for (_, n) in run.errors.kinds() {
            let _ = write!(page, "<td>{n}</td>");
        }
        let _ = writeln!(page, "<td>{}</td></tr>", run.errors.total());
    }
    page.push_str("</table>\n");
    if runs.iter().any(|r| !r.errors.http_status.is_empty()) {
        page.push_str("<h2>HTTP refusals by status</h2>\n<table id=\"http-status\"><tr><th class=\"l\">run</th><th class=\"l\">statuses</th></tr>\n");
        for (i, run) in runs.iter().enumerate() {
            let _ = writeln!(
                page,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
                i + 1,
                escape(&run.errors.by_status())
            );
        }
        page.push_str("</table>\n");
    }
    // The data, for `jrpc bench --compare`; never run by the browser.
    let data = serde_json::to_string(runs).unwrap_or_else(|_| "[]".to_owned());
    let _ = writeln!(page, "{DATA_OPEN}{}{DATA_CLOSE}", data.replace("</", "<\\/"));
    page.push_str("</body></html>\n");
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rps: u64) -> Report {
        Report {
            command_line: "jrpc bench http://127.0.0.1:4000 add 1 2 -d 3s".to_owned(),
            target: "http://127.0.0.1:4000".to_owned(),
            method: "add".to_owned(),
            connections: 4,
            in_flight: 8,
            batch: None,
            auto_batch: None,
            rate: None,
            seconds: 2.5,
            requests: rps * 2 + rps / 2,
            ok: rps * 2 + rps / 2 - 3,
            requests_per_second: rps as f64,
            items_per_second: rps as f64,
            latency_us: Latency {
                p50: 120,
                p75: 150,
                p90: 200,
                p95: 260,
                p99: 900,
                p999: 4_000,
                p9999: 12_000,
                max: 30_000,
            },
            errors: Errors {
                rpc: 1,
                timeout: 2,
                ..Errors::default()
            },
            retried: 4,
            retries: 5,
            phases: vec![Phase {
                from: 0.0,
                to: 1.0,
                requests: rps,
                ok: rps - 1,
                latency_us: Latency::default(),
                errors: Errors {
                    rpc: 1,
                    ..Errors::default()
                },
            }],
            timeline: vec![
                Second {
                    second: 1.0,
                    requests: rps,
                    errors: 1,
                    retried: 1,
                },
                Second {
                    second: 2.0,
                    requests: rps,
                    errors: 2,
                    retried: 3,
                },
                Second {
                    second: 2.5,
                    requests: rps / 2,
                    errors: 0,
                    retried: 0,
                },
            ],
        }
    }

    #[test]
    fn errors_are_drawn_beside_requests_and_refusals_counted_by_status() {
        let mut refused = run(1000);
        refused.errors.http = 12_039;
        refused.errors.http_status.insert(429, 12_034);
        refused.errors.http_status.insert(503, 5);
        let page = html(std::slice::from_ref(&refused));
        // The errors' dashed line, beside the requests' solid one.
        assert!(page.contains(r#"<polyline class="errors""#), "no errors line");
        assert!(page.contains("http 429: 12 034, http 503: 5"), "no statuses");
        // A run without errors draws no errors line.
        let mut clean = run(1000);
        clean.timeline.iter_mut().for_each(|s| s.errors = 0);
        assert!(!html(&[clean]).contains(r#"class="errors""#));
        // Statuses add up across tallies.
        let mut total = Errors::default();
        total.add(&refused.errors);
        total.add(&refused.errors);
        assert_eq!(total.by_status(), "http 429: 24 068, http 503: 10");
    }

    #[test]
    fn a_comparison_says_each_figures_change() {
        let (a, mut b) = (run(1000), run(1100));
        b.latency_us.p99 = 450;
        let table = text_table(&[a.clone(), b.clone()]);
        let lines: Vec<&str> = table.lines().collect();
        assert!(
            lines[0].starts_with("run") && lines[0].contains("change"),
            "{table}"
        );
        assert!(!lines[1].contains('%'), "the first run is the base: {table}");
        assert!(lines[2].contains("+10.0 %"), "requests/s up 10 %: {table}");
        assert!(lines[2].contains("-50.0 %"), "p99 halved: {table}");
        assert!(!table.contains("<html"), "text, not a page");
        // The page says it too.
        assert!(html(&[a, b]).contains("(+10.0 %)"));
        assert_eq!(change(0.0, 0.0), "±0 %");
        assert_eq!(change(0.0, 3.0), "new");
    }

    #[test]
    fn a_page_has_its_plots_and_fetches_nothing() {
        let page = html(&[run(1000)]);
        for part in [
            r#"<svg id="throughput""#,
            r#"<svg id="latency""#,
            "<polyline",
            r#"id="errors""#,
            "p99.99",
        ] {
            assert!(page.contains(part), "{part} missing");
        }
        assert!(!page.contains("src="), "the page loads nothing");
        assert!(!page.contains("<link"), "the page loads nothing");
        // Script only as a data block.
        assert_eq!(page.matches("<script").count(), 1);
        assert!(page.contains(r#"<script type="application/json""#));
    }

    #[test]
    fn a_page_reads_back_for_comparing() {
        let (a, b) = (run(1000), run(2000));
        let page = html(std::slice::from_ref(&a));
        let back = read(&page).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].requests, a.requests);
        assert_eq!(back[0].timeline.len(), 3);
        assert_eq!((back[0].retried, back[0].retries), (4, 5));
        assert_eq!(back[0].phases.len(), 1);
        assert_eq!(back[0].timeline[1].retried, 3);
        // JSON output of one run, and an array.
        let json = serde_json::to_string(&b).unwrap();
        assert_eq!(read(&json).unwrap()[0].requests, b.requests);
        let compared = html(&[a, b]);
        assert_eq!(
            compared.matches(r#"<polyline class="run""#).count(),
            4,
            "two lines in each plot"
        );
        assert!(compared.contains("2 runs compared"));
    }

    #[test]
    fn text_that_looks_like_markup_stays_text() {
        let mut odd = run(10);
        odd.command_line = "jrpc bench </script><b>x</b>".to_owned();
        let page = html(&[odd]);
        assert!(!page.contains("<b>x</b>"));
        assert_eq!(
            read(&page).unwrap()[0].command_line,
            "jrpc bench </script><b>x</b>"
        );
    }

    #[test]
    fn older_json_reports_still_read() {
        let old = r#"{"auto_batch":null,"batch":null,"connections":16,"errors":{"http":0,"other":0,"rpc":0,"timeout":0,"transport":0},"in_flight":64,"items_per_second":465693.6,"latency_us":{"max":161919,"p50":634,"p90":939,"p99":56383,"p999":97023},"method":"add","ok":1865268,"rate":null,"requests":1865268,"requests_per_second":465693.6,"seconds":4.005}"#;
        let runs = read(old).unwrap();
        assert_eq!(runs[0].requests, 1_865_268);
        assert!(html(&runs).contains(r#"<svg id="latency""#));
    }
}
