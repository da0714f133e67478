//! The calling side over HTTP: one POST per call (or batch), pooled
//! keep-alive connections, optional HTTP/2, TLS, gzip, custom headers and
//! retries with exponential backoff and jitter.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::oneshot;
use tokio_rustls::TlsConnector;

use super::http_error::HttpError;
use super::idle::Idle;
use super::response_body::{Lease, ResponseBody};
use super::retry::Retry;
use crate::caller::{
    build_stack, null, BoxOutgoingService, CallError, Caller, Delivery, Outgoing, OutgoingLayerFn,
};
use crate::message::{encode_call, parse_frame, Frame, Id, Incoming, Limits};

/// The HTTP client: one POST per call (or batch) to one URL, over pooled
/// keep-alive connections, through its outgoing middleware. Cheap to clone.
/// Made by [`ClientBuilder::http`](super::ClientBuilder::http); a
/// [`Client`](super::Client) for an `http(s)://` URL wraps one.
#[derive(Clone)]
pub struct HttpClient {
    transport: Arc<HttpTransport>,
    outgoing: Option<BoxOutgoingService>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("url", &self.transport.uri)
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    pub(crate) fn new(transport: Arc<HttpTransport>, layers: &[OutgoingLayerFn]) -> Self {
        let outgoing = (!layers.is_empty()).then(|| {
            let http = Arc::clone(&transport);
            let innermost = tower::service_fn(move |call: Outgoing| {
                let http = Arc::clone(&http);
                async move { http.send(call).await }
            });
            build_stack(BoxOutgoingService::new(innermost), layers)
        });
        HttpClient { transport, outgoing }
    }
}

impl HttpClient {
    /// Sends an HTTP request of your own to this client's URL, over its
    /// connections (TLS, HTTP/2, its headers and `Host`), and returns the
    /// response with its body still streaming: the hook for protocols whose
    /// replies stream (Server-Sent Events). `headers` are added to the
    /// client's own; no retries, and no `Accept-Encoding` unless yours,
    /// though a body that comes gzip-encoded anyway is decoded as it
    /// streams (another encoding is an error of the body). Over HTTP/1.1
    /// the connection goes back to the pool once the response has been read
    /// to its end.
    pub async fn send_streaming(
        &self,
        method: http::Method,
        headers: http::HeaderMap,
        body: Bytes,
    ) -> Result<http::Response<ResponseBody>, CallError> {
        HttpTransport::send_streaming(&self.transport, method, headers, body).await
    }

    /// A call as an owned future: encoded now, straight into its request
    /// frame when no middleware needs the params on their own.
    pub(crate) fn start_call(
        &self,
        method: &str,
        params: impl Serialize,
        timeout: Duration,
    ) -> crate::caller::BoxFuture<'static, Result<Box<RawValue>, CallError>> {
        let this = self.clone();
        match &self.outgoing {
            None => {
                let encoded = self.transport.encode(method, &params);
                Box::pin(async move {
                    let (id, frame) = encoded?;
                    this.transport.exchange(id, frame, timeout).await
                })
            }
            Some(_) => {
                let call = crate::caller::encode_params(params).map(|p| Outgoing::call(method, p, timeout));
                Box::pin(async move { this.send(call?).await })
            }
        }
    }
}

impl Caller for HttpClient {
    fn call_raw(
        &self,
        method: &str,
        params: impl Serialize,
        timeout: Duration,
    ) -> impl std::future::Future<Output = Result<Box<RawValue>, CallError>> + Send {
        self.start_call(method, params, timeout)
    }

    fn send(
        &self,
        call: Outgoing,
    ) -> impl std::future::Future<Output = Result<Box<RawValue>, CallError>> + Send {
        let stack = self.outgoing.clone();
        async move {
            match stack {
                Some(stack) => tower::ServiceExt::oneshot(stack, call).await,
                None => self.transport.send(call).await,
            }
        }
    }

    fn batch(&self) -> crate::caller::Batch {
        crate::caller::Batch::new(Arc::clone(&self.transport) as Arc<dyn crate::caller::BatchTarget>)
    }

    fn call_timeout(&self) -> Duration {
        self.transport.options.timeout
    }
}

/// Settings for an HTTP client.
#[derive(Debug, Clone)]
pub(crate) struct HttpOptions {
    pub(crate) headers: HeaderMap,
    pub(crate) http2: bool,
    pub(crate) gzip: bool,
    pub(crate) compress_requests: bool,
    pub(crate) timeout: Duration,
    pub(crate) retry: Retry,
    pub(crate) tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
    /// The most requests (so connections) at once; more wait their turn.
    pub(crate) max_connections: Option<usize>,
}

/// Replies larger than this are refused (as a protocol error).
const MAX_REPLY: usize = 256 * 1024 * 1024;
/// Requests at least this large are gzip-compressed when gzip is on.
const COMPRESS_FROM: usize = 1024;

pub(crate) struct HttpTransport {
    uri: Uri,
    host: String,
    port: u16,
    authority: HeaderValue,
    tls: Option<TlsConnector>,
    /// The Unix socket to connect to, for an `http+unix://` URL.
    socket: Option<std::path::PathBuf>,
    options: HttpOptions,
    next_id: AtomicU64,
    idle: Arc<Idle>,
    /// Turns for requests, when their number is bounded.
    turns: Option<tokio::sync::Semaphore>,
    h2: tokio::sync::Mutex<Option<http2::SendRequest<Full<Bytes>>>>,
}

/// Why one attempt failed, and whether another may be made.
enum Failure {
    /// Nothing reached the server.
    Connect(std::io::Error),
    /// The server refused for now.
    Busy(StatusCode, Option<Duration>, Bytes),
    Final(CallError),
}

fn protocol(text: impl Into<String>) -> CallError {
    CallError::Protocol(text.into().into())
}

impl HttpTransport {
    pub(crate) fn new(url: &str, mut options: HttpOptions) -> std::io::Result<Self> {
        let invalid = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, why);
        #[cfg(unix)]
        if let Some(socket) = crate::transport::unix::parse_url("http", url) {
            // `http+unix://%2FPATH/rest`: HTTP/1.1 over the socket at PATH,
            // for `localhost` (which servers guarding against DNS rebinding
            // accept).
            let (socket, rest) = socket?;
            let rest = if rest.is_empty() { "/" } else { rest };
            let uri: Uri = format!("http://localhost{rest}")
                .parse()
                .map_err(|e| invalid(format!("{url}: {e}")))?;
            return Ok(Self::over(
                uri,
                "localhost".into(),
                80,
                HeaderValue::from_static("localhost"),
                None,
                Some(socket),
                options,
            ));
        }
        if url.starts_with("https+unix://") {
            return Err(invalid(format!(
                "{url}: HTTPS over a Unix socket is not supported; use http+unix://"
            )));
        }
        let uri: Uri = url.parse().map_err(|e| invalid(format!("{url}: {e}")))?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(invalid(format!("{url}: expected http:// or https://"))),
        };
        let host = uri
            .host()
            .ok_or_else(|| invalid(format!("{url}: no host")))?
            // An IPv6 literal comes in brackets, which a socket address has not.
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = crate::transport::tls::port_of(&uri, url, if https { 443 } else { 80 })?;
        // `Host` carries host and port only, never `user:password@`.
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or(&host);
        let authority = authority
            .rsplit_once('@')
            .map_or(authority, |(_, hostport)| hostport);
        let authority = HeaderValue::from_str(authority).map_err(|e| invalid(e.to_string()))?;
        let tls = if https {
            let config = match options.tls.take() {
                Some(config) => config,
                None => crate::transport::tls::client_config_native(if options.http2 {
                    &[b"h2", b"http/1.1"]
                } else {
                    &[b"http/1.1"]
                })?,
            };
            Some(TlsConnector::from(config))
        } else {
            None
        };
        Ok(Self::over(uri, host, port, authority, tls, None, options))
    }

    fn over(
        uri: Uri,
        host: String,
        port: u16,
        authority: HeaderValue,
        tls: Option<TlsConnector>,
        socket: Option<std::path::PathBuf>,
        options: HttpOptions,
    ) -> Self {
        let turns = options.max_connections.map(tokio::sync::Semaphore::new);
        HttpTransport {
            uri,
            host,
            port,
            authority,
            tls,
            socket,
            options,
            next_id: AtomicU64::new(1),
            idle: Arc::default(),
            turns,
            h2: tokio::sync::Mutex::new(None),
        }
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends one call or notification, past any middleware.
    async fn send(&self, call: Outgoing) -> Result<Box<RawValue>, CallError> {
        let delivery = Delivery::of(&call);
        // A retry layer above decides about this call: no retries here.
        let retry = match call.extensions().get::<super::retry::RetriedAbove>() {
            Some(_) => Retry::NEVER,
            None => self.options.retry,
        };
        let (method, params, notification, timeout) = call.into_parts();
        if notification {
            self.notify(&method, &params, retry).await.map(|()| null())
        } else {
            let (id, frame) = self.encode(&method, &params)?;
            let sending = Sending {
                retry,
                delivery: delivery.as_ref(),
            };
            self.exchange_with(id, frame, timeout, sending).await
        }
    }

    /// A call's id and request frame.
    fn encode(&self, method: &str, params: &impl Serialize) -> Result<(u64, Bytes), CallError> {
        let id = self.next_id();
        let frame =
            encode_call(method, params, Some(&Id::from(id))).map_err(|e| CallError::Encode(e.into()))?;
        Ok((id, frame.into()))
    }

    /// POSTs a call's request and reads its response.
    async fn exchange(&self, id: u64, frame: Bytes, timeout: Duration) -> Result<Box<RawValue>, CallError> {
        let sending = Sending {
            retry: self.options.retry,
            delivery: None,
        };
        self.exchange_with(id, frame, timeout, sending).await
    }

    async fn exchange_with(
        &self,
        id: u64,
        frame: Bytes,
        timeout: Duration,
        sending: Sending<'_>,
    ) -> Result<Box<RawValue>, CallError> {
        let delivery = sending.delivery;
        let reply = tokio::time::timeout(timeout, self.post(frame, sending))
            .await
            .map_err(|_| {
                // Time ran out while connecting or sending: it may have
                // gone out.
                if let Some(delivery) = delivery {
                    delivery.mark_sent();
                }
                CallError::Timeout(timeout)
            })??;
        let Some(reply) = reply else {
            return Err(protocol("the server sent no response to a call"));
        };
        match parse_frame(&reply, &reply_limits()) {
            Ok(Frame::Single(Incoming::Response(response)))
                if response.id == Id::from(id) || response.id.is_null() =>
            {
                crate::caller::answered(response)
            }
            Ok(Frame::Single(Incoming::Invalid(invalid))) => Err(CallError::Rpc(invalid.error)),
            _ => Err(protocol(format!(
                "not a response to this call: {}",
                String::from_utf8_lossy(&reply[..reply.len().min(200)])
            ))),
        }
    }

    async fn notify(&self, method: &str, params: impl Serialize, retry: Retry) -> Result<(), CallError> {
        let frame = encode_call(method, &params, None).map_err(|e| CallError::Encode(e.into()))?;
        let timeout = self.options.timeout;
        let sending = Sending {
            retry,
            delivery: None,
        };
        tokio::time::timeout(timeout, self.post(frame.into(), sending))
            .await
            .map_err(|_| CallError::Timeout(timeout))??;
        Ok(())
    }

    /// Sends a batch and hands each response to the call it answers.
    pub(crate) async fn send_batch(
        &self,
        frame: Bytes,
        waiters: Vec<(u64, oneshot::Sender<crate::caller::Outcome>)>,
        delivery: Option<&Delivery>,
    ) -> Result<(), CallError> {
        let timeout = self.options.timeout;
        // Batches gathered for a retry layer are retried by it, call by call.
        let sending = Sending {
            retry: if delivery.is_some() {
                Retry::NEVER
            } else {
                self.options.retry
            },
            delivery,
        };
        let reply = match tokio::time::timeout(timeout, self.post(frame, sending)).await {
            Ok(Ok(reply)) => reply,
            failed => {
                let error = match failed {
                    Ok(Err(e)) => e,
                    _ => CallError::Timeout(timeout),
                };
                for (_, tx) in waiters {
                    let _ = tx.send(Err(error.clone()));
                }
                return Err(error);
            }
        };
        let mut waiters: Vec<(u64, Option<oneshot::Sender<_>>)> =
            waiters.into_iter().map(|(id, tx)| (id, Some(tx))).collect();
        let mut whole_batch_error = None;
        match reply.as_deref().map(|r| parse_frame(r, &reply_limits())) {
            Some(Ok(Frame::Batch(items))) => {
                for item in items {
                    let Incoming::Response(response) = item else {
                        continue;
                    };
                    let Some(id) = response.id.as_number_text().and_then(|n| n.parse::<u64>().ok()) else {
                        continue;
                    };
                    if let Some((_, slot)) = waiters.iter_mut().find(|(w, _)| *w == id) {
                        if let Some(tx) = slot.take() {
                            let _ = tx.send(crate::caller::answered(response));
                        }
                    }
                }
            }
            // One error for the whole batch (too large, say).
            Some(Ok(Frame::Single(Incoming::Response(response)))) => {
                whole_batch_error = response.outcome.err()
            }
            Some(Ok(Frame::Single(Incoming::Invalid(invalid)))) => whole_batch_error = Some(invalid.error),
            _ => {}
        }
        for (_, slot) in waiters {
            if let Some(tx) = slot {
                let error = match &whole_batch_error {
                    Some(e) => CallError::Rpc(e.clone()),
                    None => protocol("the batch reply has no response to this call"),
                };
                let _ = tx.send(Err(error));
            }
        }
        Ok(())
    }

    /// POSTs a frame, with `sending`'s retries; the reply body, or `None`
    /// for `202`/`204`.
    async fn post(&self, body: Bytes, sending: Sending<'_>) -> Result<Option<Bytes>, CallError> {
        let Sending { retry, delivery } = sending;
        let mut attempt = 0;
        loop {
            // Waits for a turn (within the caller's timeout) when bounded.
            let turn = match &self.turns {
                Some(turns) => Some(
                    turns
                        .acquire()
                        .await
                        .map_err(|_| protocol("the client is closed"))?,
                ),
                None => None,
            };
            let outcome = self.post_once(body.clone()).await;
            drop(turn);
            if let Some(delivery) = delivery {
                // Only a connection never made leaves the request unsent.
                match &outcome {
                    Err(Failure::Connect(_)) => delivery.mark_unsent(),
                    _ => delivery.mark_sent(),
                }
            }
            let failure = match outcome {
                Ok(reply) => return Ok(reply),
                Err(failure) => failure,
            };
            let (retryable, retry_after, error) = match failure {
                Failure::Final(e) => return Err(e),
                Failure::Connect(e) => (true, None, CallError::Io(Arc::new(e))),
                Failure::Busy(status, after, body) => (true, after, http_error(status, &body, after)),
            };
            if !retryable || attempt >= retry.attempts {
                return Err(error);
            }
            let wait = retry.wait(attempt, retry_after);
            tracing::debug!(attempt, ?wait, error = %error, "retrying");
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    fn request(&self, body: Bytes) -> Result<Request<Full<Bytes>>, CallError> {
        let path = self.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let mut builder = Request::post(path)
            .header(header::HOST, self.authority.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json");
        // Bytes: a reference count, for the wire trace.
        let frame = body.clone();
        let mut body = body;
        if self.options.gzip {
            builder = builder.header(header::ACCEPT_ENCODING, "gzip");
            if self.options.compress_requests && body.len() >= COMPRESS_FROM {
                let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                std::io::Write::write_all(&mut encoder, &body).map_err(|e| CallError::Io(Arc::new(e)))?;
                body = encoder.finish().map_err(|e| CallError::Io(Arc::new(e)))?.into();
                builder = builder.header(header::CONTENT_ENCODING, "gzip");
            }
        }
        let mut request = builder
            .body(Full::new(body))
            .map_err(|e| CallError::Encode(e.to_string().into()))?;
        for (name, value) in &self.options.headers {
            request.headers_mut().insert(name, value.clone());
        }
        if tracing::enabled!(target: "jrpc::wire", tracing::Level::TRACE) {
            let mut head = format!("> {} {}", request.method(), self.uri);
            for (name, value) in request.headers() {
                head.push_str(&format!(
                    "\n> {name}: {}",
                    String::from_utf8_lossy(value.as_bytes())
                ));
            }
            tracing::trace!(target: "jrpc::wire", "{head}");
            crate::transport::trace_frame(">", &frame);
        }
        Ok(request)
    }

    async fn send_streaming(
        self: &Arc<Self>,
        method: http::Method,
        headers: http::HeaderMap,
        body: Bytes,
    ) -> Result<http::Response<ResponseBody>, CallError> {
        let path = self.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .body(Full::new(body))
            .map_err(|e| CallError::Encode(e.to_string().into()))?;
        // The caller's headers are the request's (not copied into another
        // map); the client's own and `Host` go where the caller set none.
        *request.headers_mut() = headers;
        for name in self.options.headers.keys() {
            if !request.headers().contains_key(name) {
                // The last value, as when each was inserted in turn.
                if let Some(value) = self.options.headers.get_all(name).iter().next_back() {
                    request.headers_mut().insert(name, value.clone());
                }
            }
        }
        if let http::header::Entry::Vacant(entry) = request.headers_mut().entry(header::HOST) {
            entry.insert(self.authority.clone());
        }
        let io = |e: hyper::Error| CallError::Io(Arc::new(std::io::Error::other(e)));
        let failed = |failure: Failure| match failure {
            Failure::Connect(e) => CallError::Io(Arc::new(e)),
            Failure::Final(e) => e,
            Failure::Busy(status, after, body) => http_error(status, &body, after),
        };
        loop {
            if self.options.http2 && self.tls.is_none() || self.h2.lock().await.is_some() {
                let mut sender = Box::pin(self.h2_sender()).await.map_err(failed)?;
                let response = sender.send_request(request).await.map_err(io)?;
                return Ok(ResponseBody::of(response, None));
            }
            let (mut sender, fresh) = match self.idle.take() {
                Some(sender) => (sender, false),
                None => match self.connect().await.map_err(failed)? {
                    Sender::H1(sender) => (sender, true),
                    Sender::H2(sender) => {
                        *self.h2.lock().await = Some(sender);
                        continue;
                    }
                },
            };
            match sender.try_send_request(request).await {
                Ok(response) => {
                    // The connection is free again once this response has
                    // been read to its end (an SSE stream may take long).
                    let lease = Lease {
                        sender,
                        idle: Arc::clone(&self.idle),
                    };
                    return Ok(ResponseBody::of(response, Some(lease)));
                }
                Err(mut unsent) => match unsent.take_message() {
                    Some(again) if !fresh => request = again,
                    _ => return Err(io(unsent.into_error())),
                },
            }
        }
    }

    async fn post_once(&self, body: Bytes) -> Result<Option<Bytes>, Failure> {
        let mut request = self.request(body).map_err(Failure::Final)?;
        loop {
            if self.options.http2 && self.tls.is_none() || self.h2.lock().await.is_some() {
                let mut sender = Box::pin(self.h2_sender()).await?;
                let response = sender.send_request(request).await;
                return self.read(response).await;
            }
            let (mut sender, fresh) = match self.idle.take() {
                Some(sender) => (sender, false),
                None => match self.connect().await? {
                    Sender::H1(sender) => (sender, true),
                    Sender::H2(sender) => {
                        // TLS negotiated HTTP/2: use it from now on.
                        *self.h2.lock().await = Some(sender);
                        continue;
                    }
                },
            };
            match sender.try_send_request(request).await {
                Ok(response) => {
                    let reply = self.read(Ok(response)).await?;
                    // Only now is the connection free for the next request.
                    if !sender.is_closed() {
                        self.idle.put(sender);
                    }
                    return Ok(reply);
                }
                Err(mut unsent) => match unsent.take_message() {
                    // A pooled connection the server had just closed: the
                    // request never left, so another connection may take it.
                    Some(again) if !fresh => request = again,
                    _ => return self.read(Err(unsent.into_error())).await,
                },
            }
        }
    }

    async fn read(
        &self,
        response: Result<http::Response<hyper::body::Incoming>, hyper::Error>,
    ) -> Result<Option<Bytes>, Failure> {
        let response =
            response.map_err(|e| Failure::Final(CallError::Io(Arc::new(std::io::Error::other(e)))))?;
        let status = response.status();
        let version = response.version();
        let response_headers = if tracing::enabled!(target: "jrpc::wire", tracing::Level::TRACE) {
            response.headers().clone()
        } else {
            http::HeaderMap::new()
        };
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let encoding = super::gunzip::Encoding::of(response.headers());
        let body = http_body_util::Limited::new(response.into_body(), MAX_REPLY)
            .collect()
            .await
            .map_err(|e| Failure::Final(protocol(format!("reading the reply: {e}"))))?
            .to_bytes();
        let body = match encoding {
            super::gunzip::Encoding::Identity => body,
            super::gunzip::Encoding::Gzip => super::gunzip::whole(body, MAX_REPLY)
                .map_err(|e| Failure::Final(protocol(format!("bad gzip reply: {e}"))))?,
            super::gunzip::Encoding::Other(named) => {
                return Err(Failure::Final(protocol(super::gunzip::Encoding::unreadable(
                    &named,
                ))))
            }
        };
        if tracing::enabled!(target: "jrpc::wire", tracing::Level::TRACE) {
            let mut head = format!("< {version:?} {status}");
            for (name, value) in &response_headers {
                head.push_str(&format!(
                    "\n< {name}: {}",
                    String::from_utf8_lossy(value.as_bytes())
                ));
            }
            tracing::trace!(target: "jrpc::wire", "{head}");
            crate::transport::trace_frame("<", &body);
        }
        match status {
            StatusCode::OK => Ok(Some(body)),
            StatusCode::ACCEPTED | StatusCode::NO_CONTENT => Ok(None),
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
                Err(Failure::Busy(status, retry_after, body))
            }
            other => Err(Failure::Final(http_error(other, &body, None))),
        }
    }

    async fn h2_sender(&self) -> Result<http2::SendRequest<Full<Bytes>>, Failure> {
        let mut slot = self.h2.lock().await;
        if let Some(sender) = slot.as_ref().filter(|s| !s.is_closed()) {
            return Ok(sender.clone());
        }
        let sender = match self.connect().await? {
            Sender::H2(sender) => sender,
            Sender::H1(sender) if self.tls.is_some() => {
                // The server stopped offering HTTP/2: back to HTTP/1.1.
                *slot = None;
                self.idle.put(sender);
                return Err(Failure::Connect(std::io::Error::other(
                    "the server now speaks HTTP/1.1; retry",
                )));
            }
            Sender::H1(_) => return Err(Failure::Final(protocol("the server did not agree to HTTP/2"))),
        };
        *slot = Some(sender.clone());
        Ok(sender)
    }

    /// A new connection, boxed: its future (TCP, TLS, the HTTP handshake)
    /// is many kilobytes, and every request's future would otherwise
    /// carry that much for the rare request that connects (moved and
    /// allocated that large on each call).
    fn connect(&self) -> futures_util::future::BoxFuture<'_, Result<Sender, Failure>> {
        Box::pin(self.connect_now())
    }

    async fn connect_now(&self) -> Result<Sender, Failure> {
        #[cfg(unix)]
        if let Some(socket) = &self.socket {
            let stream = tokio::net::UnixStream::connect(socket).await.map_err(|e| {
                Failure::Connect(std::io::Error::new(
                    e.kind(),
                    format!("{}: {e}", socket.display()),
                ))
            })?;
            return handshake(stream, self.options.http2).await;
        }
        let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(Failure::Connect)?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => handshake(tcp, self.options.http2).await,
            Some(connector) => {
                let name = crate::transport::tls::server_name(&self.host).map_err(Failure::Connect)?;
                let tls = connector
                    .connect(name, tcp)
                    .await
                    .map_err(|e| Failure::Connect(crate::transport::tls::explain(e, &self.host)))?;
                let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                handshake(tls, h2).await
            }
        }
    }
}

enum Sender {
    H1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

async fn handshake<I>(io: I, h2: bool) -> Result<Sender, Failure>
where
    I: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let io = TokioIo::new(io);
    let failed = |e: hyper::Error| Failure::Connect(std::io::Error::other(e));
    if h2 {
        let (sender, connection) = http2::handshake(TokioExecutor::new(), io).await.map_err(failed)?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "HTTP/2 connection ended");
            }
        });
        Ok(Sender::H2(sender))
    } else {
        let (sender, connection) = http1::handshake(io).await.map_err(failed)?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "HTTP/1.1 connection ended");
            }
        });
        Ok(Sender::H1(sender))
    }
}

fn http_error(status: StatusCode, body: &[u8], retry_after: Option<Duration>) -> CallError {
    // Servers such as jrpc put a JSON-RPC error in the body: show it.
    let error = match parse_frame(body, &reply_limits()) {
        Ok(Frame::Single(Incoming::Response(r))) => r.outcome.err(),
        _ => None,
    };
    CallError::Transport(Arc::new(HttpError {
        status: status.as_u16(),
        error,
        body: String::from_utf8_lossy(&body[..body.len().min(500)]).into(),
        retry_after,
    }))
}

/// How to send one frame: the transport's own retries, and where to say
/// whether it went out.
#[derive(Clone, Copy)]
struct Sending<'a> {
    retry: Retry,
    delivery: Option<&'a Delivery>,
}

fn reply_limits() -> Limits {
    Limits {
        max_frame_len: MAX_REPLY,
        max_batch_len: usize::MAX,
        ..Limits::default()
    }
}

impl crate::caller::BatchTarget for HttpTransport {
    fn register(&self) -> Result<crate::caller::Registered, CallError> {
        // The batch hands the outcomes out itself, from the reply frame.
        let (tx, rx) = oneshot::channel();
        Ok((self.next_id(), rx, Some(tx)))
    }

    fn forget(&self, _id: u64) {}

    fn call_timeout(&self) -> Duration {
        self.options.timeout
    }

    fn send<'a>(
        &'a self,
        frame: crate::transport::OutFrame,
        waiters: Vec<(u64, oneshot::Sender<crate::caller::Outcome>)>,
        delivery: Option<&'a Delivery>,
    ) -> crate::caller::BoxFuture<'a, Result<(), CallError>> {
        Box::pin(self.send_batch(frame.bytes, waiters, delivery))
    }

    // The request is out and cannot be called back.
    fn cancel(&self, _id: u64, _reason: &str) {}
}
