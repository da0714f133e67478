//! Streamable HTTP: one endpoint that speaks both eras.
//!
//! * **2026-07-28 (modern)**: every POST is one request served
//!   on its own, no session; its headers (`MCP-Protocol-Version`,
//!   `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`) must match its body; the reply
//!   is JSON, or an SSE stream of that request's notifications then its
//!   response; closing the stream cancels the request. GET and DELETE are
//!   not part of it (`405`).
//! * **2025-11-25 and before (legacy)**: `initialize` opens a
//!   session (`Mcp-Session-Id`), served by a peer over an in-memory
//!   connection whose incoming frames are the POSTed messages and whose
//!   outgoing frames go out on the session's streams (each request's, and
//!   the standalone GET stream); DELETE ends it.
//!
//! A POST is routed as the specification and the official SDKs do: a
//! session id or a legacy `MCP-Protocol-Version` means legacy; another
//! version header, or (without one) a body carrying the modern `_meta`
//! envelope, means modern.
//!
//! Built on jrpc's HTTP server as a [route].
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! let serving = jrpc_mcp::demo::server().serve_http("127.0.0.1:8000", Default::default()).await?;
//! println!("MCP at {}/mcp", serving.local_addr());
//! # Ok(()) }
//! ```

mod legacy;
mod mcp_headers;
mod modern;
#[cfg(feature = "oauth")]
mod oauth;
mod service;
mod session;
mod streams;
mod usual_call;

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::{ready, BoxFuture, Either};
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use jrpc::server::http::route::{self, refused_before_body, RouteBody, RouteContext};
use jrpc::server::http::{HttpBody, HttpServer};
use jrpc::server::Serving;
use jrpc::Error;
use serde::Deserialize;

use crate::server::McpServer;
use crate::types::LEGACY_PROTOCOL_VERSIONS;
use mcp_headers::McpHeaders;
use session::HttpSession;

#[cfg(feature = "oauth")]
pub use oauth::OAuth;

/// The session header (legacy).
pub const SESSION_HEADER: &str = mcp_headers::SESSION;
/// The protocol version header.
pub const VERSION_HEADER: &str = crate::headers::PROTOCOL_VERSION;

/// Settings of the Streamable HTTP endpoint.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// The endpoint's path (default `/mcp`).
    pub path: String,
    /// Host names (without port) the `Host` header may name; others get
    /// `421` (DNS rebinding protection). Default: `localhost`, `127.0.0.1`
    /// and `[::1]`; [`serve_http`](McpServer::serve_http) adds the host it
    /// binds.
    pub allowed_hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`) allowed besides those on an allowed
    /// host; any other `Origin` gets `403`.
    pub allowed_origins: Vec<String>,
    /// A comment on idle SSE streams this often (default 15 s); a modern
    /// request whose handler has sent nothing for this long gets its reply
    /// as an SSE stream, so that the connection stays alive.
    pub keep_alive: Duration,
    /// A legacy session that no request has touched for this long, with no
    /// stream open, ends (default 30 minutes); its next request gets `404`.
    pub session_idle_timeout: Duration,
    /// The most legacy sessions at once (default 1024); past it an
    /// `initialize` gets `503` with `-32007`.
    pub max_sessions: usize,
    /// Legacy sessions: prefer a JSON body for every reply (default
    /// `false`). A `tools/call`, `resources/read` or `prompts/get` otherwise
    /// always answers with an SSE stream, opened at once; with this set it
    /// waits for the handler's first message and answers with JSON when that
    /// is the reply, falling back to a stream when the handler sends
    /// progress, a log line or a request first, so no message is lost.
    /// (Modern requests always answer that way.)
    pub json_response: bool,
    /// Legacy sessions: how many of its messages a session keeps for
    /// clients whose stream broke (default 1024; at most 8 MiB of them). A
    /// client that comes back with `GET` and `Last-Event-ID` gets what it
    /// missed on that stream, then the rest. Zero turns resumability off:
    /// no event ids, nothing kept.
    pub event_store: usize,
    /// Legacy sessions: the reconnection delay SSE streams suggest
    /// (`retry:`, default 1 s).
    pub retry: Duration,
    /// OAuth 2.1: tokens every request needs, and the protected resource
    /// metadata that says where to get them (default none: no auth).
    #[cfg(feature = "oauth")]
    pub oauth: Option<OAuth>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            path: "/mcp".to_owned(),
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()],
            allowed_origins: Vec::new(),
            keep_alive: Duration::from_secs(15),
            session_idle_timeout: Duration::from_secs(30 * 60),
            max_sessions: 1024,
            json_response: false,
            event_store: 1024,
            retry: Duration::from_secs(1),
            #[cfg(feature = "oauth")]
            oauth: None,
        }
    }
}

impl HttpOptions {
    /// Lets the `Host` header name `host` too.
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.allowed_hosts.push(host.into());
        self
    }

    /// Lets pages from `origin` call too.
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.allowed_origins.push(origin.into());
        self
    }

    /// Prefers JSON bodies over SSE streams for legacy replies (see
    /// [`json_response`](Self::json_response)).
    pub fn json_response(mut self, json: bool) -> Self {
        self.json_response = json;
        self
    }

    /// Requires OAuth bearer tokens (see [`OAuth`]).
    #[cfg(feature = "oauth")]
    pub fn oauth(mut self, oauth: OAuth) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// Keeps `events` messages per legacy session for resumption (see
    /// [`event_store`](Self::event_store)).
    pub fn event_store(mut self, events: usize) -> Self {
        self.event_store = events;
        self
    }

    fn store_limits(&self) -> streams::StoreLimits {
        streams::StoreLimits {
            events: self.event_store,
            bytes: EVENT_STORE_BYTES,
        }
    }
}

/// The most bytes of messages a legacy session keeps for resumption.
const EVENT_STORE_BYTES: usize = 8 * 1024 * 1024;

/// An SSE response of `events`, with keep-alive comments and the header
/// that tells proxies not to buffer it.
fn event_stream(
    events: impl futures_util::Stream<Item = jrpc::server::http::sse::Event> + Send + 'static,
    keep_alive: Duration,
) -> Response<RouteBody> {
    unbuffered(jrpc::server::http::sse::response(events, Some(keep_alive)))
}

/// An SSE response whose events are all known: one body.
fn complete_event_stream(
    events: impl IntoIterator<Item = jrpc::server::http::sse::Event>,
) -> Response<RouteBody> {
    unbuffered(jrpc::server::http::sse::complete(events))
}

/// Tells a proxy in front (nginx) to pass events on as they come.
fn unbuffered(mut response: Response<RouteBody>) -> Response<RouteBody> {
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

impl McpServer {
    /// Serves this server over Streamable HTTP at `http://ADDR/mcp` until
    /// shut down.
    pub async fn serve_http(
        &self,
        addr: impl tokio::net::ToSocketAddrs,
        options: HttpOptions,
    ) -> io::Result<Serving> {
        let listener = jrpc::transport::tcp::listen(addr).await?;
        let mut options = options;
        if let Ok(local) = listener.local_addr() {
            let host = match local.ip() {
                std::net::IpAddr::V6(ip) => format!("[{ip}]"),
                ip => ip.to_string(),
            };
            if !local.ip().is_unspecified() && !options.allowed_hosts.contains(&host) {
                options.allowed_hosts.push(host);
            }
        }
        // Tokens must be for this endpoint: its URL, known once bound,
        // unless a public one is set.
        #[cfg(feature = "oauth")]
        if let (Some(oauth), Ok(local)) = (&mut options.oauth, listener.local_addr()) {
            if oauth.resource_url().is_none() {
                *oauth = oauth.clone().resource(format!("http://{local}{}", options.path));
            }
        }
        Ok(self.http_server(options).serve_tcp(listener))
    }

    /// Serves this server over Streamable HTTP at `options`' path on any
    /// listener of byte streams (TCP, a Unix socket, one of your own) until
    /// shut down. The `Host` names accepted and the OAuth resource URL are
    /// the ones `options` gives ([`serve_http`](Self::serve_http) adds the
    /// address it bound).
    pub fn serve_http_on(
        &self,
        listener: impl jrpc::transport::StreamListener,
        options: HttpOptions,
    ) -> Serving {
        self.http_server(options).serve(listener)
    }

    /// The HTTP server of this endpoint, ready to serve a listener.
    fn http_server(&self, options: HttpOptions) -> HttpServer {
        let path = options.path.clone();
        let endpoint = StreamableHttp::new(self.clone(), options);
        #[cfg_attr(not(feature = "oauth"), allow(unused_mut))]
        // `GET /health` answers 200 for load balancers, as `jrpc serve`
        // does (the MCP route wins if it is given that path).
        let mut http = HttpServer::new(jrpc::Router::new())
            .health_path(Some("/health".to_owned()))
            .websocket(None);
        // The metadata document, where clients look for it (only when
        // tokens are required).
        #[cfg(feature = "oauth")]
        let metadata_paths = match endpoint.guard.is_some() {
            true => oauth::metadata_paths(&path),
            false => Vec::new(),
        };
        #[cfg(feature = "oauth")]
        for metadata_path in metadata_paths {
            let endpoint = endpoint.clone();
            http = http.route(metadata_path, move |_, _| {
                let response = endpoint.metadata_response();
                async move { response }
            });
        }
        http.route(path, move |request, cx| endpoint.handle(request, cx))
    }
}

/// The Streamable HTTP endpoint of an [`McpServer`]: its sessions, and the
/// handler for a [route](HttpServer::route).
#[derive(Clone)]
pub struct StreamableHttp {
    server: McpServer,
    /// The server's methods, for modern requests, without the era layer:
    /// the endpoint decides and checks their era itself (legacy sessions
    /// have a peer, with a router, each).
    table: jrpc::Router,
    options: Arc<HttpOptions>,
    sessions: Arc<Mutex<HashMap<String, Arc<HttpSession>>>>,
    /// What requests served as a tower service (not through a route of
    /// jrpc's HTTP server, which gives its own) see of the server.
    context: RouteContext,
    /// The server's envelopes read last (shared with its other
    /// connections and endpoints).
    envelopes: Arc<crate::server::envelopes::Envelopes>,
    /// The OAuth checks, when tokens are required (`Err`: they are asked
    /// for but cannot be made, and every request is refused).
    #[cfg(feature = "oauth")]
    guard: Option<Arc<Result<oauth::Guard, String>>>,
}

impl std::fmt::Debug for StreamableHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamableHttp")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn refuse(status: StatusCode, error: Error) -> Response<RouteBody> {
    jrpc::server::http::error_response(status, error)
}

/// A refusal on its way to becoming a response.
struct Refusal(StatusCode, Error);

impl Refusal {
    fn bad_request(why: &str) -> Self {
        Refusal(StatusCode::BAD_REQUEST, Error::invalid_request().with_data(why))
    }

    fn into_response(self) -> Response<RouteBody> {
        refuse(self.0, self.1)
    }
}

/// Whether the `Accept` headers take every one of `mimes` (by name or by a
/// wildcard), read in one pass.
fn accepts(headers: &HeaderMap, mimes: &[&str]) -> bool {
    let all = (1u32 << mimes.len()) - 1;
    let mut taken = 0u32;
    let ranges = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','));
    for range in ranges {
        let range = range.split(';').next().unwrap_or("").trim();
        for (i, mime) in mimes.iter().enumerate() {
            let wildcard =
                range == "*/*" || (range.ends_with("/*") && mime.starts_with(&range[..range.len() - 1]));
            if range == *mime || wildcard {
                taken |= 1 << i;
            }
        }
        if taken == all {
            return true;
        }
    }
    false
}

/// The host part of a `Host` header or an origin's authority.
fn host_of(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority.find(']').map_or(authority, |end| &authority[..=end]);
    }
    authority.rsplit_once(':').map_or(authority, |(host, _)| host)
}

fn accepted() -> Response<RouteBody> {
    let mut response = Response::new(route::empty_body());
    *response.status_mut() = StatusCode::ACCEPTED;
    response
}

/// Which era a POST belongs to.
#[derive(Debug, PartialEq, Eq)]
enum Era {
    Legacy,
    Modern,
}

/// What routing needs of a body: its method, and whether its `_meta`
/// claims a modern revision.
#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<ClaimsParams>,
}

#[derive(Deserialize)]
struct ClaimsParams {
    #[serde(rename = "_meta", default)]
    meta: Option<ClaimsMeta>,
}

#[derive(Deserialize)]
struct ClaimsMeta {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", default)]
    version: Option<serde::de::IgnoredAny>,
}

/// The era of a POST with headers `mcp` and `body`.
fn era_of(mcp: &McpHeaders, body: &[u8]) -> Era {
    if mcp.session {
        return Era::Legacy;
    }
    if let Some(version) = mcp.version.first() {
        let legacy = version
            .to_str()
            .is_ok_and(|v| LEGACY_PROTOCOL_VERSIONS.contains(&v));
        return if legacy { Era::Legacy } else { Era::Modern };
    }
    // No header: a client of 2025-03-26 or before, or a modern one that
    // forgot it (it is told so, -32020).
    match serde_json::from_slice::<Claims>(body) {
        Ok(claims) if claims.method.as_deref() != Some("initialize") => {
            let claims = claims
                .params
                .and_then(|p| p.meta)
                .is_some_and(|m| m.version.is_some());
            if claims {
                Era::Modern
            } else {
                Era::Legacy
            }
        }
        _ => Era::Legacy,
    }
}

impl StreamableHttp {
    /// The endpoint for `server`.
    pub fn new(server: McpServer, options: HttpOptions) -> Self {
        #[cfg(feature = "oauth")]
        let guard = options.oauth.as_ref().map(|oauth| {
            let guard = oauth.guard();
            if let Err(e) = &guard {
                tracing::error!("MCP endpoint: OAuth: {e}; every request is refused");
            }
            Arc::new(guard)
        });
        StreamableHttp {
            #[cfg(feature = "oauth")]
            guard,
            table: server.table(),
            envelopes: server.envelopes(),
            server,
            options: Arc::new(options),
            sessions: Arc::default(),
            context: RouteContext::new(),
        }
    }

    /// What requests see of the server when the endpoint is served as a
    /// `tower::Service` (mounted in an app of your own): its body limit,
    /// the budget bodies share, a shutdown token that ends the endpoint's
    /// streams. By default [`RouteContext::new`].
    pub fn context(mut self, context: RouteContext) -> Self {
        self.context = context;
        self
    }

    fn host_allowed(&self, host: &str) -> bool {
        let host = host_of(host);
        self.options
            .allowed_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host))
    }

    /// Refuses requests that could come from a rebound DNS name or a foreign
    /// web page.
    fn check_origin(&self, headers: &HeaderMap) -> Option<Response<RouteBody>> {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        if let Some(host) = host {
            if !self.host_allowed(host) {
                return Some(refuse(
                    StatusCode::MISDIRECTED_REQUEST,
                    Error::invalid_request().with_data(&format!("host {host:?} is not served here")),
                ));
            }
        }
        let origin = headers.get(header::ORIGIN)?.to_str().unwrap_or("null");
        let allowed = self.options.allowed_origins.iter().any(|o| o == origin)
            || origin
                .split_once("://")
                .filter(|(scheme, _)| *scheme == "http" || *scheme == "https")
                .is_some_and(|(_, authority)| self.host_allowed(authority));
        if allowed {
            return None;
        }
        Some(refuse(
            StatusCode::FORBIDDEN,
            Error::invalid_request().with_data(&format!("origin {origin:?} may not call this server")),
        ))
    }

    /// The protected resource metadata (RFC 9728), when OAuth is on; `404`
    /// otherwise. [`serve_http`](McpServer::serve_http) serves it at the
    /// well-known paths; mount it there yourself when you serve the
    /// endpoint as a service.
    #[cfg(feature = "oauth")]
    pub fn metadata_response(&self) -> Response<RouteBody> {
        match self.guard.as_deref() {
            Some(Ok(guard)) => guard.metadata_response(),
            _ => refuse(
                StatusCode::NOT_FOUND,
                Error::invalid_request().with_data("no OAuth here"),
            ),
        }
    }

    /// Handles one HTTP request to the endpoint.
    ///
    /// What can be decided before the first wait (the origin, the method,
    /// a POST's media types) is decided before the future is made, so that
    /// the future, allocated for every request, holds only what the waits
    /// need (a smaller one is a cheaper allocation).
    pub fn handle(
        &self,
        request: Request<HttpBody>,
        cx: RouteContext,
    ) -> impl Future<Output = Response<RouteBody>> + Send + 'static {
        if let Some(refusal) = self.check_origin(request.headers()) {
            return Either::Left(ready(refused_before_body(request.body(), refusal)));
        }
        #[cfg(feature = "oauth")]
        if let Some(guard) = self.guard.clone() {
            // Admission waits (a key set may be fetched): the rest of the
            // request is decided after it, in a future of its own.
            let this = self.clone();
            return Either::Right(Either::Left(Box::pin(async move {
                let grant = match &*guard {
                    Err(e) => {
                        let refusal = refuse(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            Error::internal_error().with_data(e.as_str()),
                        );
                        return refused_before_body(request.body(), refusal);
                    }
                    Ok(guard) => match guard
                        .admit(request.method(), request.uri(), request.headers())
                        .await
                    {
                        Ok(grant) => grant,
                        Err(refusal) => return refused_before_body(request.body(), refusal),
                    },
                };
                this.admitted(request, cx, Some(Box::new(grant))).await
            }) as Admitting));
        }
        Either::Right(Either::<Admitting, _>::Right(self.admitted(request, cx, None)))
    }

    /// A request admitted (by its token, when tokens are required), by its
    /// method.
    fn admitted(
        &self,
        request: Request<HttpBody>,
        cx: RouteContext,
        grant: Option<Box<Grant>>,
    ) -> impl Future<Output = Response<RouteBody>> + Send + 'static {
        let caller = grant.as_deref().map(Caller::of);
        if request.method() == Method::POST {
            return Either::Right(self.post(request, cx, grant, caller));
        }
        let has_session = request.headers().contains_key(SESSION_HEADER);
        let now = match *request.method() {
            Method::GET if has_session => self.get(request, cx, caller.as_ref()),
            Method::DELETE if has_session => self.delete(request.headers(), caller.as_ref()),
            // GET and DELETE exist only in legacy sessions.
            Method::GET | Method::DELETE => refused_before_body(request.body(), not_allowed("POST")),
            _ => refused_before_body(
                request.body(),
                not_allowed(if has_session { "GET, POST, DELETE" } else { "POST" }),
            ),
        };
        Either::Left(ready(now))
    }

    fn post(
        &self,
        mut request: Request<HttpBody>,
        cx: RouteContext,
        grant: Option<Box<Grant>>,
        caller: Option<Caller>,
    ) -> impl Future<Output = Response<RouteBody>> + Send + 'static {
        // The headers go on with the request; the rest of its head is done
        // with now.
        let headers = std::mem::take(request.headers_mut());
        let body = request.into_body();
        if let Some(refusal) = refuse_media_types(&headers) {
            return Either::Left(ready(refused_before_body(&body, refusal)));
        }
        let this = self.clone();
        Either::Right(async move {
            let body = match cx.read_body(body).await {
                Ok(body) => body,
                Err(unread) => return unread.into_response(),
            };
            #[cfg(feature = "oauth")]
            if let (Some(Ok(guard)), Some(grant)) = (this.guard.as_deref(), &grant) {
                if let Some(refusal) = guard.tools_allowed(grant, &body) {
                    return refusal;
                }
            }
            #[cfg(not(feature = "oauth"))]
            let _ = grant;
            // Found once, after the body: a future that held them across
            // its wait would be larger to move.
            let mcp = McpHeaders::of(&headers);
            match era_of(&mcp, &body) {
                // Boxed: a session's POST needs a larger future, which a
                // modern POST should not have to allocate.
                Era::Legacy => {
                    drop(mcp);
                    Box::pin(this.legacy_post(headers, body, cx, caller)).await
                }
                Era::Modern => this.modern_post(headers, mcp, body, cx, caller).await,
            }
        })
    }
}

/// The refusal of a POST whose `Accept` or `Content-Type` will not do.
fn refuse_media_types(headers: &HeaderMap) -> Option<Response<RouteBody>> {
    // What clients send, byte for byte, needs no parsing.
    let usual_accept = headers
        .get(header::ACCEPT)
        .is_some_and(|v| v.as_bytes() == b"application/json, text/event-stream");
    if !usual_accept && !accepts(headers, &["application/json", "text/event-stream"]) {
        return Some(refuse(
            StatusCode::NOT_ACCEPTABLE,
            Error::invalid_request().with_data("Accept must include application/json and text/event-stream"),
        ));
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/json")
        });
    if !json {
        return Some(refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Error::invalid_request().with_data("Content-Type must be application/json"),
        ));
    }
    None
}

/// A request whose token is being checked: boxed, as only endpoints that
/// require tokens have it.
type Admitting = BoxFuture<'static, Response<RouteBody>>;

/// Who a request's token says is calling, and what it may do: handed to
/// the tools (through `McpContext::identity` and `scopes`), and kept by a
/// legacy session as its owner — with tokens, no one else may use its id
/// (a leaked id is not a credential).
#[derive(Debug, Clone)]
pub(super) struct Caller {
    pub(super) identity: Option<jrpc::router::Identity>,
    pub(super) scopes: jrpc::context::Scopes,
}

impl Caller {
    #[cfg(feature = "oauth")]
    fn of(grant: &Grant) -> Self {
        Caller {
            identity: grant.identity(),
            scopes: jrpc::context::Scopes::new(grant.scopes.iter().cloned()),
        }
    }

    /// Without OAuth there is no grant to be made of.
    #[cfg(not(feature = "oauth"))]
    fn of(grant: &Grant) -> Self {
        match *grant {}
    }

    pub(super) fn name(&self) -> Option<&str> {
        self.identity.as_ref().map(|i| i.name())
    }

    /// Records the caller in a call's (or a connection's) facts.
    pub(super) fn record(&self, extensions: &mut jrpc::router::Extensions) {
        if let Some(identity) = &self.identity {
            extensions.insert(identity.clone());
        }
        extensions.insert(self.scopes.clone());
    }
}

/// What a request's token granted, when OAuth is on.
#[cfg(feature = "oauth")]
type Grant = jrpc::auth::AccessToken;
#[cfg(not(feature = "oauth"))]
type Grant = std::convert::Infallible;

fn not_allowed(allow: &'static str) -> Response<RouteBody> {
    let mut response = refuse(
        StatusCode::METHOD_NOT_ALLOWED,
        Error::invalid_request().with_data(&format!("use {allow}")),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_accept_headers() {
        assert_eq!(host_of("localhost:8000"), "localhost");
        assert_eq!(host_of("[::1]:8000"), "[::1]");
        assert_eq!(host_of("example.com"), "example.com");
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream;q=0.9"),
        );
        assert!(accepts(&headers, &["application/json", "text/event-stream"]));
        assert!(accepts(&headers, &["text/event-stream"]));
        assert!(!accepts(&headers, &["text/html"]));
        assert!(!accepts(&headers, &["application/json", "text/html"]));
        headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        assert!(accepts(&headers, &["text/event-stream", "application/json"]));
        headers.insert(header::ACCEPT, HeaderValue::from_static("text/*"));
        assert!(accepts(&headers, &["text/event-stream"]));
        assert!(!accepts(&headers, &["application/json", "text/event-stream"]));
    }

    #[test]
    fn posts_are_routed_by_session_version_header_then_body() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, HeaderValue::from_static(value));
            }
            McpHeaders::of(&map)
        };
        let modern_body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        let legacy_body =
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"progressToken":1}}}"#;
        let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert_eq!(
            era_of(&headers(&[("mcp-session-id", "abc")]), modern_body),
            Era::Legacy
        );
        assert_eq!(
            era_of(&headers(&[("mcp-protocol-version", "2025-06-18")]), modern_body),
            Era::Legacy
        );
        assert_eq!(
            era_of(&headers(&[("mcp-protocol-version", "2026-07-28")]), legacy_body),
            Era::Modern
        );
        assert_eq!(
            era_of(&headers(&[("mcp-protocol-version", "v999")]), legacy_body),
            Era::Modern
        );
        assert_eq!(era_of(&McpHeaders::default(), modern_body), Era::Modern);
        assert_eq!(era_of(&McpHeaders::default(), legacy_body), Era::Legacy);
        assert_eq!(era_of(&McpHeaders::default(), init), Era::Legacy);
        assert_eq!(era_of(&McpHeaders::default(), b"not json"), Era::Legacy);
    }
}
