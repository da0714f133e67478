//! A listener that serves only `GET /metrics`, for servers whose calls
//! travel over streams (TCP, stdio) and have no HTTP listener to put the
//! page on.

use std::convert::Infallible;
use std::io;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper_util::rt::{TokioIo, TokioTimer};

use super::exchange::{error_response, respond};

/// Where an [`HttpServer`](super::HttpServer) with metrics serves them.
pub(crate) const METRICS_PATH: &str = "/metrics";
use crate::message::Error;
use crate::middleware::Metrics;
use crate::server::Serving;

/// Connections to the metrics page open at once, at most.
const MAX_CONNECTIONS: usize = 64;

/// Serves `metrics` at `http://ADDR/metrics` (Prometheus text format) until
/// shut down. Any other path is `404`, any other method `405`.
///
/// ```no_run
/// # async fn run() -> std::io::Result<()> {
/// let metrics = jrpc::middleware::Metrics::new();
/// let page = jrpc::server::http::serve_metrics("127.0.0.1:9100", metrics.clone()).await?;
/// println!("metrics at {}/metrics", page.local_addr());
/// # Ok(()) }
/// ```
pub async fn serve_metrics(addr: impl tokio::net::ToSocketAddrs, metrics: Metrics) -> io::Result<Serving> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local_addr = format!("http://{}", crate::transport::tcp::address(&listener));
    let listener = super::accept::HttpAccept {
        listener,
        refusal: None,
    };
    Ok(Serving::start(
        listener,
        local_addr,
        MAX_CONNECTIONS,
        move |(stream, _info): (tokio::net::TcpStream, crate::context::ConnectionInfo), stop| {
            let metrics = metrics.clone();
            async move {
                let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let page = page(&metrics, &request);
                    async move { Ok::<_, Infallible>(page) }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(Duration::from_secs(10))
                    .serve_connection(TokioIo::new(stream), service);
                tokio::pin!(connection);
                tokio::select! {
                    _ = connection.as_mut() => {}
                    () = stop.cancelled() => {
                        connection.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(Duration::from_secs(1), connection).await;
                    }
                }
            }
        },
    ))
}

/// The answer to a request for the metrics page.
pub(crate) fn page<B>(metrics: &Metrics, request: &Request<B>) -> Response<Full<Bytes>> {
    if request.uri().path() != METRICS_PATH {
        let why = format!("metrics are served at {METRICS_PATH}");
        return error_response(StatusCode::NOT_FOUND, Error::invalid_request().with_data(&why));
    }
    match *request.method() {
        Method::GET | Method::HEAD => respond(StatusCode::OK, Metrics::CONTENT_TYPE, metrics.render()),
        _ => {
            let mut response = error_response(
                StatusCode::METHOD_NOT_ALLOWED,
                Error::invalid_request().with_data("use GET"),
            );
            response
                .headers_mut()
                .insert(http::header::ALLOW, http::HeaderValue::from_static("GET, HEAD"));
            response
        }
    }
}
