//! Helpers shared by the load benches.
#![allow(dead_code)]

use std::time::Duration;

/// A single-threaded runtime: one core's worth of server or load.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `server` forever on its own thread ("server") and runtime; returns
/// what it sends once ready (its address).
pub fn spawn_server<F, Fut>(server: F) -> String
where
    F: FnOnce(tokio::sync::oneshot::Sender<String>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("server".into())
        .spawn(move || runtime().block_on(server(tx)))
        .unwrap();
    rx.blocking_recv().unwrap()
}

/// The `p` quantile (0..=1) of `latencies`, sorting them in place.
pub fn percentile(latencies: &mut [Duration], p: f64) -> Duration {
    if latencies.is_empty() {
        return Duration::ZERO;
    }
    latencies.sort_unstable();
    latencies[((latencies.len() as f64 - 1.0) * p).round() as usize]
}

/// The run length: the first numeric argument, in seconds (default 3).
pub fn seconds_from_args() -> Duration {
    let seconds: f64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(3.0);
    Duration::from_secs_f64(seconds)
}

/// The call middleware `jrpc serve --log-calls --metrics` installs (brief
/// call log lines and Prometheus metrics), around `router`. Log lines are
/// formatted as on a terminal and written to a sink, so that their whole
/// cost is counted.
#[cfg(feature = "metrics")]
pub fn with_log_and_metrics(router: jrpc::Router) -> jrpc::Router {
    use tracing_subscriber::layer::SubscriberExt as _;
    static SUBSCRIBER: std::sync::Once = std::sync::Once::new();
    SUBSCRIBER.call_once(|| {
        let filter = tracing_subscriber::filter::Targets::new()
            .with_default(tracing::Level::WARN)
            .with_target(jrpc::middleware::CALL_LOG_TARGET, tracing::Level::INFO);
        let subscriber = tracing_subscriber::fmt()
            .with_writer(std::io::sink)
            .with_ansi(false)
            .finish()
            .with(filter);
        tracing::subscriber::set_global_default(subscriber).unwrap();
    });
    let metrics = jrpc::middleware::Metrics::new();
    router
        .layer(metrics.layer())
        .layer(jrpc::middleware::CallLog::new())
}
