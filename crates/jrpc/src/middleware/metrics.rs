//! Prometheus metrics for calls and connections.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};
use tower::{Layer, Service};

use super::{Call, CallFuture, RawResult};
use crate::message::{codes, Error};

/// Call and connection metrics in the Prometheus text format:
///
/// | metric | type | labels |
/// |---|---|---|
/// | `jrpc_calls_total` | counter | `method`, `outcome` (`ok` or `error`), `code` (the error code; empty when ok) |
/// | `jrpc_call_duration_seconds` | histogram | `method` |
/// | `jrpc_calls_in_flight` | gauge | |
/// | `jrpc_connections_open` | gauge | `transport` |
///
/// Calls to unknown methods are counted under `method="(unknown)"`, so that
/// a client cannot grow the metrics with made-up names.
///
/// ```
/// use jrpc::middleware::Metrics;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let metrics = Metrics::new();
/// let router = jrpc::Router::new()
///     .sync_method("add", |(a, b): (i64, i64)| Ok(a + b))
///     .layer(metrics.layer());
/// router.handle(br#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":1}"#).await;
/// assert!(metrics.render().contains(r#"jrpc_calls_total{code="",method="add",outcome="ok"} 1"#));
/// # });
/// ```
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    calls: IntCounterVec,
    duration: HistogramVec,
    in_flight: IntGauge,
    connections: IntGaugeVec,
    /// Each method's successful-call counter and latency histogram, looked
    /// up once: cheaper per call than labelling them each time.
    by_method: std::sync::RwLock<
        std::collections::HashMap<Arc<str>, (prometheus::IntCounter, prometheus::Histogram)>,
    >,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// The method label of calls to methods that do not exist.
const UNKNOWN_METHOD: &str = "(unknown)";

/// Latency buckets, in seconds: from 50 µs (an in-process call) to 10 s.
const BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

impl Metrics {
    /// A fresh set of metrics in a registry of their own.
    pub fn new() -> Self {
        let registry = Registry::new();
        let calls = IntCounterVec::new(
            Opts::new("jrpc_calls_total", "JSON-RPC calls served, by method and outcome"),
            &["method", "outcome", "code"],
        )
        .expect("valid metric");
        let duration = HistogramVec::new(
            HistogramOpts::new("jrpc_call_duration_seconds", "Time to serve a call, by method")
                .buckets(BUCKETS.to_vec()),
            &["method"],
        )
        .expect("valid metric");
        let in_flight =
            IntGauge::new("jrpc_calls_in_flight", "JSON-RPC calls being served now").expect("valid metric");
        let connections = IntGaugeVec::new(
            Opts::new("jrpc_connections_open", "Connections open now, by transport"),
            &["transport"],
        )
        .expect("valid metric");
        for metric in [
            Box::new(calls.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(duration.clone()),
            Box::new(in_flight.clone()),
            Box::new(connections.clone()),
        ] {
            registry.register(metric).expect("metric names are distinct");
        }
        Metrics {
            inner: Arc::new(Inner {
                registry,
                calls,
                duration,
                in_flight,
                connections,
                by_method: Default::default(),
            }),
        }
    }

    /// The layer that counts and times every call.
    pub fn layer(&self) -> MetricsLayer {
        MetricsLayer {
            metrics: self.clone(),
        }
    }

    /// Counts a connection as open until the returned guard is dropped.
    pub fn connection(&self, transport: &str) -> ConnectionGauge {
        let gauge = self.inner.connections.with_label_values(&[transport]);
        gauge.inc();
        ConnectionGauge(gauge)
    }

    /// The registry, to add metrics of your own to the same page.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// Every metric in the Prometheus text format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let families = self.inner.registry.gather();
        if let Err(e) = prometheus::TextEncoder::new().encode(&families, &mut out) {
            tracing::error!(error = %e, "metrics do not encode");
        }
        String::from_utf8(out).unwrap_or_default()
    }

    /// The content type of [`render`](Self::render)'s output.
    pub const CONTENT_TYPE: &'static str = "text/plain; version=0.0.4; charset=utf-8";

    fn record(&self, method: &Arc<str>, outcome: &Result<RawResult, Error>, seconds: f64) {
        if outcome.is_ok() {
            let cached = self
                .inner
                .by_method
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .get(method)
                .cloned();
            let (ok, latency) = cached.unwrap_or_else(|| {
                let handles = (
                    self.inner.calls.with_label_values(&[method, "ok", ""]),
                    self.inner.duration.with_label_values(&[method]),
                );
                let mut table = self.inner.by_method.write().unwrap_or_else(|e| e.into_inner());
                table.entry(Arc::clone(method)).or_insert(handles).clone()
            });
            ok.inc();
            latency.observe(seconds);
            return;
        }
        let (method, outcome, code) = match outcome {
            Ok(_) => (&**method, "ok", None),
            Err(e) if e.code() == codes::METHOD_NOT_FOUND => (UNKNOWN_METHOD, "error", Some(e.code())),
            Err(e) => (&**method, "error", Some(e.code())),
        };
        let code = code.map(|c| c.to_string()).unwrap_or_default();
        self.inner
            .calls
            .with_label_values(&[method, outcome, code.as_str()])
            .inc();
        self.inner.duration.with_label_values(&[method]).observe(seconds);
    }
}

/// Keeps a connection counted in `jrpc_connections_open` while it lives.
#[derive(Debug)]
pub struct ConnectionGauge(IntGauge);

impl Drop for ConnectionGauge {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The layer made by [`Metrics::layer`].
#[derive(Debug, Clone)]
pub struct MetricsLayer {
    metrics: Metrics,
}

impl<S> Layer<S> for MetricsLayer {
    type Service = MetricsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        MetricsService {
            metrics: self.metrics.clone(),
            inner,
        }
    }
}

/// The service made by [`MetricsLayer`].
#[derive(Debug, Clone)]
pub struct MetricsService<S> {
    metrics: Metrics,
    inner: S,
}

/// Counts a call in flight until dropped, also when its future is dropped
/// unfinished (a cancelled call).
struct InFlight(IntGauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl<S> Service<Call> for MetricsService<S>
where
    S: Service<Call, Response = RawResult, Error = Error>,
    S::Future: Send + 'static,
{
    type Response = RawResult;
    type Error = Error;
    type Future = CallFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: Call) -> CallFuture {
        let started = Instant::now();
        let gauge = self.metrics.inner.in_flight.clone();
        gauge.inc();
        let in_flight = InFlight(gauge);
        let method = call.method_shared();
        let metrics = self.metrics.clone();
        let future = self.inner.call(call);
        Box::pin(async move {
            let outcome = future.await;
            drop(in_flight);
            metrics.record(&method, &outcome, started.elapsed().as_secs_f64());
            outcome
        })
    }
}
