//! `jrpc serve`: the demo methods over one or more transports.

use std::sync::Arc;

use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::Args;
use jrpc::codec::{BufferBudget, Framing};
use jrpc::message::Limits;
use jrpc::middleware::{
    Authorize, CallLog, CallTimeout, ConcurrencyLimit, LogDetail, Metrics, RateLimit, Redaction,
};
use jrpc::peer::ConnectionConfig;
use jrpc::server::http::{AuthLayer, HttpServer};
use jrpc::server::{Server, Serving};
use jrpc::Router;

use crate::call::{cancel_protocol, parse_timeout, Cancel};

/// Where `jrpc serve` listens when given no transport at all.
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:4000";

#[derive(Debug, Args)]
pub struct ServeCommand {
    /// Serve over stdin/stdout. Logs go to stderr; stdio serving ends when
    /// stdin ends.
    #[arg(long)]
    stdio: bool,

    #[command(flatten)]
    pub(crate) args: ServeArgs,
}

/// Where and how to serve, with which limits, middleware and logs: shared
/// by `jrpc serve` and `jrpc bridge`, which serves a command's methods.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve HTTP (POST /) and WebSocket (GET / with an upgrade) on one
    /// address, e.g. 127.0.0.1:4000, or on a Unix socket: unix:PATH
    /// (clients: http+unix://%2FPATH). May be given several times. With no
    /// transport flag at all, jrpc serves HTTP on 127.0.0.1:4000.
    #[arg(long, value_name = "ADDR", value_parser = parse_http_listen)]
    http: Vec<String>,

    /// The permission bits of the socket files of --http unix:PATH and
    /// --unix, in octal: 600 (the default) lets only this user connect.
    #[arg(long, value_name = "MODE", value_parser = parse_mode, default_value = "600")]
    socket_mode: u32,

    /// Do not serve the playground, the browser page at GET /playground on
    /// the --http listeners for trying the methods (it is off anyway with
    /// --auth-token or --auth-user: a browser cannot send a token on a
    /// WebSocket).
    #[arg(long)]
    no_playground: bool,

    /// TLS certificate chain (PEM) for --http; needs --tls-key.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,

    /// TLS private key (PEM) for --http; needs --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,

    /// Require this bearer token (Authorization: Bearer TOKEN, or
    /// X-Api-Key: TOKEN) on HTTP and WebSocket. May be given several times;
    /// the first token's identity is token1, the second's token2, ...
    #[arg(long, value_name = "TOKEN")]
    auth_token: Vec<String>,

    /// A bearer token on HTTP and WebSocket that identifies its caller as
    /// NAME (for --allow), NAME=TOKEN. May be given several times.
    #[arg(long, value_name = "NAME=TOKEN")]
    auth_user: Vec<String>,

    /// Require an OAuth access token (a JWT) issued by the authorization
    /// server at URL on HTTP and WebSocket: its metadata (RFC 8414, else
    /// OpenID discovery) names the keys tokens are checked with. A token
    /// must name this listener's URL (http://ADDR/) as its audience.
    #[arg(long, value_name = "URL")]
    oauth_issuer: Option<String>,

    /// The audience tokens must name, instead of the listener's URL (for a
    /// server behind a proxy, say). Needs --oauth-issuer.
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    oauth_audience: Option<String>,

    /// A scope every token must grant (else 403 insufficient_scope). May
    /// be given several times. Needs --oauth-issuer.
    #[arg(long, value_name = "SCOPE", requires = "oauth_issuer")]
    oauth_scope: Vec<String>,

    /// DPoP-bound tokens (RFC 9449): allow (beside bearer tokens) or
    /// require. A bound token comes as Authorization: DPoP TOKEN with a
    /// DPoP proof of its key (method, URL, time, token hash, a one-time
    /// id); sent as a bearer token it is refused. Needs --oauth-issuer.
    #[arg(long, value_name = "MODE", value_parser = crate::serve::parse_dpop_mode, requires = "oauth_issuer")]
    oauth_dpop: Option<jrpc::auth::DpopMode>,

    /// With --oauth-dpop: require the server's nonce in every proof
    /// (answered 401 use_dpop_nonce with a DPoP-Nonce first).
    #[arg(long, requires = "oauth_dpop")]
    oauth_dpop_nonce: bool,

    /// Only these identities (from --auth-user or --auth-token) may call
    /// METHOD (a name, or a prefix ending in *): METHOD=NAME[,NAME...].
    /// Others get error -32004. May be given several times.
    #[arg(long, value_name = "METHOD=NAMES")]
    allow: Vec<String>,

    /// Limit each client (by IP) to N calls a second, with bursts of 2N, on
    /// every transport. Each call counts, batch entries each; a call over
    /// the limit gets error -32005 at once (over HTTP, a request whose every
    /// call is refused gets 429 with Retry-After).
    #[arg(long, value_name = "N")]
    rate_limit: Option<u32>,

    /// At most N calls running at once across the server (every transport
    /// and connection); more wait for a turn.
    #[arg(long, value_name = "N")]
    max_concurrent_calls: Option<usize>,

    /// Cancel a handler still running after DURATION (e.g. 300ms, 10s); its
    /// caller gets error -32006. On every transport.
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    call_timeout: Option<Duration>,

    /// Log one line per call on stderr (method, id, transport, duration,
    /// outcome), on every transport. --log-calls=full also logs params and
    /// results, with secrets redacted (see --redact). Lines are written in
    /// batches, at most 20 ms after the call.
    #[arg(long, value_name = "full", num_args = 0..=1, require_equals = true, default_missing_value = "brief")]
    log_calls: Option<LogCalls>,

    /// Also redact members named NAME (case-insensitive) in logged params
    /// and results and in error replies that echo params, beside password,
    /// passwd, secret, token, api_key, apikey, authorization, cookie and
    /// private_key. May be given several times.
    #[arg(long, value_name = "NAME")]
    redact: Vec<String>,

    /// Serve Prometheus metrics (calls by method and outcome, latency,
    /// calls in flight, open connections) at GET /metrics on the HTTP
    /// listeners.
    #[arg(long)]
    metrics: bool,

    /// Serve the Prometheus metrics at http://ADDR/metrics, a port of their
    /// own (for servers without an HTTP listener).
    #[arg(long, value_name = "ADDR", value_parser = parse_listen_addr)]
    metrics_addr: Option<String>,

    /// Cancellation of requests in flight: lsp ($/cancelRequest, answered
    /// -32800), mcp (notifications/cancelled, no answer) or none. Default:
    /// lsp with --framing content-length, none otherwise.
    #[arg(long, value_name = "PROTOCOL")]
    cancel: Option<Cancel>,

    /// Most bytes held for requests not yet whole (HTTP bodies, WebSocket
    /// messages, unfinished TCP and Unix socket frames), across all
    /// connections; past it an HTTP request gets 503 with error -32007, a
    /// WebSocket or stream connection the -32007 error and a close.
    #[arg(long, alias = "buffer-budget", default_value_t = BufferBudget::DEFAULT, value_name = "BYTES")]
    body_budget: usize,

    /// Allow cross-origin requests from any origin (CORS).
    #[arg(long)]
    cors: bool,

    /// Listen on a TCP address, e.g. 127.0.0.1:4000 (port 0 picks a free
    /// port). May be given several times.
    #[arg(long, value_name = "ADDR", value_parser = parse_listen_addr)]
    tcp: Vec<String>,

    /// Listen on a UDP address, e.g. 127.0.0.1:4002: each datagram one
    /// frame, the reply one datagram to its sender; a datagram over 65 507
    /// bytes (or --max-frame-len) gets error -32001. May be given several
    /// times.
    #[arg(long, value_name = "ADDR", value_parser = parse_listen_addr)]
    udp: Vec<String>,

    /// Serve calls published to a NATS subject (with --subject), as one of
    /// a queue group (--group): e.g. --nats nats://127.0.0.1:4222 --subject
    /// demo. Replies go to each message's reply subject. A cluster: several
    /// seed nodes, comma-separated or --nats repeated
    /// (nats://A:4222,nats://B:4222); the server connects to any that
    /// answers, learns the others from it, and moves to another when its
    /// node goes.
    #[arg(long, value_name = "URL", requires = "subject")]
    nats: Vec<String>,

    /// The NATS subject to serve (with --nats).
    #[arg(long, value_name = "SUBJECT", requires = "nats")]
    subject: Option<String>,

    /// Serve calls published to an MQTT 5 topic (with --topic), as one of a
    /// shared subscription $share/GROUP/TOPIC (--group): e.g. --mqtt
    /// mqtt://127.0.0.1:1883 --topic demo/rpc. Replies go to each request's
    /// Response Topic, with its Correlation Data.
    #[arg(long, value_name = "URL", requires = "topic")]
    mqtt: Option<String>,

    /// The MQTT topic to serve (with --mqtt).
    #[arg(long, value_name = "TOPIC", requires = "mqtt")]
    topic: Option<String>,

    /// The group servers of one --nats subject or --mqtt topic share calls
    /// in (each group gets every call; an --amqp queue's consumers always
    /// share its calls).
    #[arg(long, value_name = "NAME", default_value = "jrpc")]
    group: String,

    /// Serve calls from an AMQP 0.9.1 queue (RabbitMQ; with --queue), as
    /// one of its competing consumers: e.g. --amqp
    /// amqp://127.0.0.1:5672/%2f --queue demo. The queue is declared if
    /// absent; a message is acknowledged once its reply is published, and
    /// at most 128 unacknowledged ones are taken at a time (the rest stay
    /// for other servers). A RabbitMQ cluster's nodes: comma-separated
    /// (amqp://A:5672/%2f,B:5672/%2f), tried in turn on each
    /// (re)connection, a node that failed last.
    #[arg(long, value_name = "URL[,URL...]", requires = "queue")]
    amqp: Option<String>,

    /// The AMQP queue to serve (with --amqp).
    #[arg(long, value_name = "NAME", requires = "amqp")]
    queue: Option<String>,

    /// Listen on a Unix domain socket at PATH. May be given several times.
    #[arg(long, value_name = "PATH")]
    unix: Vec<String>,

    /// How frames are delimited on every transport: ndjson (one JSON text per
    /// line) or content-length (LSP-style headers).
    #[arg(long, default_value = "ndjson", value_name = "FRAMING")]
    framing: Framing,

    /// Close a connection idle this long: on TCP and Unix sockets nothing
    /// read and no call in flight either way, counted from the connect; over
    /// HTTP/1.1 and HTTP/2 no request begun or being answered. "off" never
    /// closes them. Not stdio; WebSocket has its own pings.
    #[arg(long, value_name = "DURATION|off", default_value = "60s", value_parser = parse_limit)]
    idle_timeout: Limit,

    /// Close an HTTP, WebSocket or TLS connection whose first request has
    /// not begun within DURATION ("off": wait forever).
    #[arg(long, value_name = "DURATION|off", default_value = "10s", value_parser = parse_limit)]
    first_request_timeout: Limit,

    /// Most connections open at once per listener; past it a client is
    /// refused at once (-32007 on TCP and Unix sockets, 503 over HTTP).
    #[arg(long, default_value_t = Server::DEFAULT_MAX_CONNECTIONS, value_name = "N")]
    max_connections: usize,

    /// Largest frame accepted, in bytes; larger frames are answered with
    /// error -32001 and skipped.
    #[arg(long, default_value_t = Limits::DEFAULT_MAX_FRAME_LEN, value_name = "BYTES")]
    max_frame_len: usize,

    /// Most entries in one batch; longer batches are answered with error -32002.
    #[arg(long, default_value_t = Limits::DEFAULT_MAX_BATCH_LEN, value_name = "N")]
    max_batch_len: usize,

    /// Deepest nesting of arrays and objects; deeper frames are answered with
    /// error -32003.
    #[arg(long, default_value_t = Limits::DEFAULT_MAX_DEPTH, value_name = "N")]
    max_depth: usize,

    /// Entries of one batch handled at the same time, on every transport
    /// (replies still come in request order).
    #[arg(long, default_value_t = Router::DEFAULT_BATCH_CONCURRENCY, value_name = "N")]
    batch_concurrency: usize,

    /// Also accept JSON-RPC 1.0 requests (no "jsonrpc" member), answered in
    /// 1.0 form.
    #[arg(long)]
    accept_v1: bool,

    /// Put a panicking handler's message in the error's data.
    #[arg(long)]
    expose_internal_errors: bool,
}

/// A listen address, `HOST:PORT` (an IPv6 host in brackets): a malformed
/// one is a usage error, found before anything starts.
pub(crate) fn parse_listen_addr(text: &str) -> Result<String, String> {
    let hint = "expected HOST:PORT, e.g. 127.0.0.1:4000, localhost:0 or [::1]:4000";
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(format!("{text:?}: {hint}"));
    };
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(format!("{text:?}: no host ({hint})"));
    }
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err(format!("{text:?}: put an IPv6 address in brackets ({hint})"));
    }
    port.parse::<u16>()
        .map_err(|_| format!("{text:?}: {port:?} is not a port (0 to 65535)"))?;
    Ok(text.to_owned())
}

/// `--oauth-dpop allow|require`.
pub(crate) fn parse_dpop_mode(text: &str) -> Result<jrpc::auth::DpopMode, String> {
    match text {
        "allow" => Ok(jrpc::auth::DpopMode::Allow),
        "require" => Ok(jrpc::auth::DpopMode::Require),
        _ => Err(format!("{text:?}: expected allow or require")),
    }
}

/// The DPoP settings of `--oauth-dpop MODE [--oauth-dpop-nonce]`: nonces
/// keyed by `secret` (replicas given the same one accept each other's).
pub(crate) fn dpop_settings(mode: jrpc::auth::DpopMode, nonces: bool, secret: [u8; 32]) -> jrpc::auth::Dpop {
    let dpop = jrpc::auth::Dpop::new(mode);
    if nonces {
        dpop.nonces(secret)
    } else {
        dpop
    }
}

/// 32 random bytes: a key of this process alone.
pub(crate) fn random_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    if let Err(e) = getrandom::fill(&mut key) {
        // No randomness: nonces would be guessable; say it loudly.
        tracing::error!(error = %e, "no randomness for the DPoP nonce key");
    }
    key
}

/// An `--http` listen address: HOST:PORT, or `unix:PATH` for HTTP over a
/// Unix socket.
pub(crate) fn parse_http_listen(text: &str) -> Result<String, String> {
    match text.strip_prefix("unix:") {
        Some("") => Err(format!("{text:?}: no socket path (unix:/run/app.sock)")),
        Some(_) => Ok(text.to_owned()),
        None => parse_listen_addr(text).map_err(|e| format!("{e}, or unix:PATH")),
    }
}

/// The socket path of an `http+unix://%2FPATH` URL, for display.
pub(crate) fn socket_of_url(url: &str) -> Option<String> {
    #[cfg(unix)]
    if let Some(Ok((path, _))) = jrpc::transport::unix::parse_url("http", url) {
        return Some(path.display().to_string());
    }
    let _ = url;
    None
}

/// Permission bits in octal (600, 0660).
pub(crate) fn parse_mode(text: &str) -> Result<u32, String> {
    u32::from_str_radix(text.trim_start_matches("0o"), 8)
        .ok()
        .filter(|mode| *mode <= 0o777)
        .ok_or_else(|| format!("{text:?}: expected permission bits in octal, e.g. 600 or 660"))
}

/// Listens for HTTP at the Unix socket `path` (`--http unix:PATH`): a stale
/// socket file replaced, a live one refused, the file removed on exit,
/// made with permission bits `mode`.
#[cfg(unix)]
pub(crate) async fn bind_http_socket(
    path: &str,
    mode: u32,
) -> anyhow::Result<jrpc::transport::unix::UnixListener> {
    let listener = jrpc::transport::unix::UnixListener::bind(
        path,
        Framing::Ndjson,
        jrpc::message::Limits::DEFAULT_MAX_FRAME_LEN,
    )
    .await
    .with_context(|| format!("listening on --http unix:{path}"))?;
    listener
        .mode(mode)
        .with_context(|| format!("--socket-mode {mode:o} on {path}"))
}

/// A duration, or no limit at all.
#[derive(Debug, Clone, Copy)]
pub struct Limit(Option<Duration>);

fn parse_limit(text: &str) -> Result<Limit, String> {
    match text {
        "off" | "none" => Ok(Limit(None)),
        _ => parse_timeout(text).map(|d| Limit(Some(d))),
    }
}

/// How much `--log-calls` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogCalls {
    /// Method, id, transport, duration and outcome.
    Brief,
    /// Also params and results, redacted.
    Full,
}

impl ServeArgs {
    /// Whether the HTTP listeners serve the playground: on unless turned
    /// off, or unless a token is required (the page could not send it).
    fn playground(&self) -> bool {
        !self.no_playground
            && self.auth_token.is_empty()
            && self.auth_user.is_empty()
            && self.oauth_issuer.is_none()
    }

    /// OAuth bearer tokens for the listener at `url`, when asked for: the
    /// audience is that URL unless --oauth-audience names another.
    fn bearer(
        &self,
        url: &str,
        rate: Option<&RateLimit>,
    ) -> anyhow::Result<Option<jrpc::server::http::BearerAuth>> {
        let Some(issuer) = &self.oauth_issuer else {
            return Ok(None);
        };
        check_issuer_url(issuer)?;
        let audience = self.oauth_audience.clone().unwrap_or_else(|| format!("{url}/"));
        let verifier = jrpc::auth::JwtVerifier::builder(issuer.as_str())
            .audience(audience)
            .build();
        // Learn at start, not on the first token, whether the issuer answers.
        verifier.warm_up();
        let mut bearer =
            jrpc::server::http::BearerAuth::new(verifier).require_scopes(self.oauth_scope.iter().cloned());
        if let Some(mode) = self.oauth_dpop {
            bearer = bearer.dpop(dpop_settings(mode, self.oauth_dpop_nonce, random_key()));
        }
        Ok(Some(match rate {
            // Refused requests spend the same budget as calls.
            Some(rate) => bearer.charge_refusals(rate.clone()),
            None => bearer,
        }))
    }

    /// Whether call log lines must reach stderr.
    pub fn logs_calls(&self) -> bool {
        self.log_calls.is_some()
    }

    fn redaction(&self) -> Redaction {
        Redaction::default().with_all(self.redact.iter().map(String::as_str))
    }

    fn authorize(&self) -> anyhow::Result<Option<Authorize>> {
        let mut rules = Authorize::new();
        for rule in &self.allow {
            let Some((method, names)) = rule.split_once('=').filter(|(m, _)| !m.is_empty()) else {
                bail!("--allow {rule:?}: expected METHOD=NAME[,NAME...]");
            };
            rules = rules.allow(method, names.split(',').map(str::trim).filter(|n| !n.is_empty()));
        }
        Ok((!rules.is_empty()).then_some(rules))
    }

    /// Whether any transport is named (without one, HTTP on the default
    /// address).
    pub(crate) fn names_a_transport(&self) -> bool {
        !self.http.is_empty()
            || !self.tcp.is_empty()
            || !self.unix.is_empty()
            || !self.udp.is_empty()
            || !self.nats.is_empty()
            || self.mqtt.is_some()
            || self.amqp.is_some()
    }

    /// The framing on every stream transport.
    pub(crate) fn framing(&self) -> Framing {
        self.framing
    }

    /// The cancellation protocol asked for (or the framing's default).
    pub(crate) fn cancel_protocol(&self) -> Option<jrpc::peer::CancelProtocol> {
        cancel_protocol(self.cancel, self.framing)
    }

    /// The deadline of each call, if one is set.
    pub(crate) fn call_timeout(&self) -> Option<Duration> {
        self.call_timeout
    }

    /// The router's limits.
    pub(crate) fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    /// `methods` with the limits and the call middleware asked for. The
    /// layer added last runs first: the log sees every call, refused ones
    /// included, then metrics, authorization, the rate limit and the
    /// deadline.
    fn router(
        &self,
        methods: Router,
        rate: Option<&RateLimit>,
        metrics: Option<&Metrics>,
    ) -> anyhow::Result<Router> {
        let mut router = methods
            .max_frame_len(self.max_frame_len)
            .max_batch_len(self.max_batch_len)
            .max_depth(self.max_depth)
            .batch_concurrency(self.batch_concurrency)
            .accept_v1(self.accept_v1)
            .expose_internal_errors(self.expose_internal_errors)
            .redaction(self.redaction());
        // Inside the deadline, so that waiting for a turn counts against it.
        if let Some(calls) = self.max_concurrent_calls {
            router = router.layer(ConcurrencyLimit::new(calls));
        }
        if let Some(limit) = self.call_timeout {
            router = router.layer(CallTimeout::new(limit));
        }
        if let Some(rate) = rate {
            router = router.layer(rate.layer());
        }
        if let Some(rules) = self.authorize()? {
            router = router.layer(rules);
        }
        if let Some(metrics) = metrics {
            router = router.layer(metrics.layer());
        }
        if let Some(detail) = self.log_calls {
            let detail = match detail {
                LogCalls::Brief => LogDetail::Brief,
                LogCalls::Full => LogDetail::Full,
            };
            router = router.layer(CallLog::new().detail(detail).redaction(self.redaction()));
        }
        Ok(router)
    }

    fn auth(&self, rate: Option<&RateLimit>) -> anyhow::Result<Option<AuthLayer>> {
        if self.auth_token.is_empty() && self.auth_user.is_empty() {
            return Ok(None);
        }
        let mut named: Vec<(String, String)> = self
            .auth_token
            .iter()
            .enumerate()
            .map(|(i, token)| (format!("token{}", i + 1), token.clone()))
            .collect();
        for user in &self.auth_user {
            let Some((name, token)) = user
                .split_once('=')
                .filter(|(n, t)| !n.is_empty() && !t.is_empty())
            else {
                bail!("--auth-user {user:?}: expected NAME=TOKEN");
            };
            named.push((name.to_owned(), token.to_owned()));
        }
        let auth = AuthLayer::named(named);
        Ok(Some(match rate {
            // Refused requests spend the same budget as calls.
            Some(rate) => auth.charge_refusals(rate.clone()),
            None => auth,
        }))
    }
}

fn http_server(
    args: &ServeArgs,
    budget: &BufferBudget,
    config: &ConnectionConfig,
    router: Router,
    rate: Option<&RateLimit>,
    metrics: Option<&Metrics>,
) -> anyhow::Result<HttpServer> {
    let mut http = HttpServer::new(router)
        .buffer_budget(budget.clone())
        .max_connections(args.max_connections)
        .connection(config.clone())
        .playground(args.playground());
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        http = http
            .tls_pem(cert, key)
            .context("loading the TLS certificate and key")?;
    }
    if let Some(auth) = args.auth(rate)? {
        http = http.auth(auth);
    }
    if args.cors {
        http = http.cors(tower_http::cors::CorsLayer::permissive());
    }
    if let Some(metrics) = metrics.filter(|_| args.metrics) {
        http = http.metrics(metrics.clone());
    }
    Ok(http)
}

/// Refuses an `--oauth-issuer` that is not an authorization server's
/// http(s):// URL (`jrpc serve` and `jrpc mcp serve` alike).
pub(crate) fn check_issuer_url(issuer: &str) -> anyhow::Result<()> {
    let parsed: http::Uri = issuer
        .parse()
        .map_err(|e| anyhow::anyhow!("--oauth-issuer {issuer:?}: {e}"))?;
    if !matches!(parsed.scheme_str(), Some("http" | "https")) || parsed.authority().is_none() {
        bail!("--oauth-issuer {issuer:?}: expected the authorization server's http(s):// URL");
    }
    Ok(())
}

/// `jrpc serve`: the demo methods.
pub async fn run(command: ServeCommand) -> anyhow::Result<()> {
    let demo = jrpc::demo::router().discover(
        jrpc::openrpc::Info::new("jrpc demo", env!("CARGO_PKG_VERSION")).description(
            "The demo methods of `jrpc serve`: the examples of the JSON-RPC 2.0 specification and a few more",
        ),
    );
    let methods = Methods {
        router: demo,
        example: Some(DEMO_CALL),
        proxied: false,
    };
    serve(command.args, command.stdio, methods).await
}

/// What [`serve`] serves.
pub(crate) struct Methods {
    pub(crate) router: Router,
    /// A call worth showing in the ready-to-paste lines (else
    /// `rpc.discover` is shown).
    pub(crate) example: Option<DemoCall>,
    /// Another server's methods (`jrpc bridge`): its error objects pass
    /// through unredacted (the call log still redacts), and each
    /// connection's notifications reach it before the requests after them.
    pub(crate) proxied: bool,
}

/// A call worth showing in the ready-to-paste lines.
pub(crate) struct DemoCall {
    method: &'static str,
    /// As JSON, for curl.
    params: &'static str,
    /// As `jrpc call` words.
    words: &'static str,
}

const DEMO_CALL: DemoCall = DemoCall {
    method: "subtract",
    params: "[42,23]",
    words: "42 23",
};

/// Serves `methods` as `args` say (and over stdin/stdout with `stdio`)
/// until a signal, or until stdin ends when it is the only transport.
pub(crate) async fn serve(mut args: ServeArgs, stdio: bool, methods: Methods) -> anyhow::Result<()> {
    let Methods {
        router: methods,
        example,
        proxied,
    } = methods;
    if !stdio && !args.names_a_transport() {
        args.http.push(DEFAULT_HTTP_ADDR.to_owned());
    }
    let http_only = [
        (!args.auth_token.is_empty(), "--auth-token"),
        (!args.auth_user.is_empty(), "--auth-user"),
        (args.oauth_issuer.is_some(), "--oauth-issuer"),
        (args.tls_cert.is_some(), "--tls-cert/--tls-key"),
        (args.cors, "--cors"),
    ];
    if args.http.is_empty() {
        if let Some((_, flag)) = http_only.iter().find(|(given, _)| *given) {
            bail!("{flag} applies to --http listeners only, and none is given");
        }
        if args.metrics {
            bail!("--metrics serves /metrics on the --http listeners, and none is given: use --metrics-addr ADDR");
        }
    }
    let rate = args
        .rate_limit
        .map(|n| RateLimit::per_second(n, n.saturating_mul(2)));
    let metrics = (args.metrics || args.metrics_addr.is_some()).then(Metrics::new);
    let mut router = args.router(methods, rate.as_ref(), metrics.as_ref())?;
    if proxied {
        router = router.redaction(Redaction::none());
    }
    let mut config = ConnectionConfig::default()
        .ordered(proxied)
        .framing(args.framing)
        .idle_timeout(args.idle_timeout.0)
        .first_request_timeout(args.first_request_timeout.0);
    if let Some(protocol) = cancel_protocol(args.cancel, args.framing) {
        config = config.cancellation(protocol);
    }
    // One budget for every listener: the bound is on the whole process.
    let budget = BufferBudget::new(args.body_budget);
    let mut server = Server::new(router.clone())
        .buffer_budget(budget.clone())
        .connection(config.clone())
        .max_connections(args.max_connections);
    if let Some(metrics) = &metrics {
        server = server.metrics(metrics.clone());
    }
    let mut listeners = Vec::new();
    // The metrics page has a listener of its own, apart from the RPC ones.
    let mut metrics_page = None;
    if let (Some(addr), Some(metrics)) = (&args.metrics_addr, &metrics) {
        let serving = jrpc::server::http::serve_metrics(addr.as_str(), metrics.clone())
            .await
            .with_context(|| format!("listening on --metrics-addr {addr}"))?;
        note!("jrpc: metrics at {}/metrics", serving.local_addr());
        metrics_page = Some(serving);
    }
    if !args.http.is_empty() {
        let http = http_server(&args, &budget, &config, router, rate.as_ref(), metrics.as_ref())?;
        for addr in &args.http {
            if let Some(path) = addr.strip_prefix("unix:") {
                #[cfg(unix)]
                {
                    use jrpc::transport::StreamListener as _;
                    let listener = bind_http_socket(path, args.socket_mode).await?;
                    let url = listener.url("http");
                    let serving = match args.bearer(&url, rate.as_ref())? {
                        Some(bearer) => http.clone().bearer(bearer).serve(listener),
                        None => http.serve(listener),
                    };
                    listeners.push(serving);
                    continue;
                }
                #[cfg(not(unix))]
                anyhow::bail!("--http {addr}: Unix sockets are not available on this platform");
            }
            let listener = jrpc::transport::tcp::listen(addr.as_str())
                .await
                .with_context(|| format!("listening on http {addr}"))?;
            // A token must name the listener it is for: its URL, known
            // once bound (port 0).
            let scheme = if args.tls_cert.is_some() { "https" } else { "http" };
            let url = format!("{scheme}://{}", listener.local_addr()?);
            let serving = match args.bearer(&url, rate.as_ref())? {
                Some(bearer) => http.clone().bearer(bearer).serve_tcp(listener),
                None => http.serve_tcp(listener),
            };
            listeners.push(serving);
        }
    }
    for addr in &args.tcp {
        let serving = server
            .bind_tcp(addr.as_str())
            .await
            .with_context(|| format!("listening on tcp {addr}"))?;
        listeners.push(serving);
    }
    for addr in &args.udp {
        let serving = server
            .clone()
            .datagram_limit(args.max_frame_len)
            .bind_udp(addr.as_str())
            .await
            .with_context(|| format!("listening on udp {addr}"))?;
        listeners.push(serving);
    }
    listeners.extend(serve_brokers(&args, &server).await?);
    for path in &args.unix {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let serving = server
                .bind_unix(path)
                .await
                .with_context(|| format!("listening on unix {path}"))?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(args.socket_mode))
                .with_context(|| format!("--socket-mode {:o} on {path}", args.socket_mode))?;
            listeners.push(serving);
        }
        #[cfg(not(unix))]
        anyhow::bail!("--unix {path}: Unix sockets are not available on this platform");
    }
    for serving in &listeners {
        // The addresses go to stderr (stdout may carry JSON-RPC) in the
        // form `jrpc call` takes as a target.
        let addr = serving.local_addr();
        if addr.starts_with("http+unix") {
            note!("jrpc: listening on {addr} (HTTP POST; WebSocket upgrades too)");
        } else if addr.starts_with("http") {
            let ws = addr.replacen("http", "ws", 1);
            note!("jrpc: listening on {addr} (HTTP POST) and {ws} (WebSocket)");
        } else if addr.starts_with("udp") {
            note!("jrpc: listening on {addr} (one frame per datagram)");
        } else if addr.starts_with("nats") || addr.starts_with("mqtt") {
            note!(
                "jrpc: listening on {addr} (one frame per message, group {})",
                args.group
            );
        } else if addr.starts_with("amqp") {
            note!("jrpc: listening on {addr} (one frame per message, competing consumers)");
        } else {
            note!("jrpc: listening on {addr} ({} framing)", args.framing);
        }
    }
    if let Some(http) = listeners.iter().find(|s| s.local_addr().starts_with("http")) {
        print_try_lines(http.local_addr(), &args, example);
    }
    let stdio_done = async {
        if stdio {
            let reason: Arc<str> = server.serve_stdio().await;
            tracing::info!(%reason, "stdio closed");
        }
    };
    if listeners.is_empty() {
        stdio_done.await;
        if let Some(page) = metrics_page {
            page.shutdown().await;
        }
        return Ok(());
    }
    // With listeners, run until a signal; stdio ending does not stop them.
    tokio::join!(stdio_done, shutdown_signal());
    note!("jrpc: shutting down: finishing requests in flight");
    // All listeners stop accepting at once; then each drains.
    listeners.extend(metrics_page);
    for serving in &listeners {
        serving.shutdown_token().cancel();
    }
    for serving in listeners {
        serving.wait().await;
    }
    Ok(())
}

/// Prints ready-to-paste commands that call the server just started: with
/// `example`, that call; without, `rpc.discover`.
fn print_try_lines(addr: &str, args: &ServeArgs, example: Option<DemoCall>) {
    // A self-signed certificate must be trusted explicitly.
    let (curl_tls, call_tls) = match (&args.tls_cert, addr.starts_with("https")) {
        (Some(cert), true) => (
            format!(" --cacert {}", cert.display()),
            format!(" --cacert {}", cert.display()),
        ),
        _ => (String::new(), String::new()),
    };
    let auth = args
        .auth_token
        .first()
        .map(|t| format!(" -H 'Authorization: Bearer {t}'"))
        .or_else(|| {
            args.oauth_issuer.as_ref().map(|issuer| {
                let audience = args.oauth_audience.clone().unwrap_or_else(|| format!("{addr}/"));
                note!("jrpc: OAuth tokens from {issuer} for audience {audience} are required");
                " -H \"Authorization: Bearer $TOKEN\"".to_owned()
            })
        })
        .unwrap_or_default();
    let (request, command) = match example {
        Some(DemoCall {
            method,
            params,
            words,
        }) => (
            format!(r#"{{"jsonrpc":"2.0","method":"{method}","params":{params},"id":1}}"#),
            format!("call {addr}{call_tls}{auth} {method} {words}"),
        ),
        None => (
            r#"{"jsonrpc":"2.0","method":"rpc.discover","id":1}"#.to_owned(),
            format!("describe {addr}{call_tls}{auth}"),
        ),
    };
    note!("jrpc: try it:");
    // curl reaches a Unix socket by its own flag, and `localhost` by name.
    let curl_target = match crate::serve::socket_of_url(addr) {
        Some(path) => format!("--unix-socket {path} http://localhost"),
        None => addr.to_owned(),
    };
    note!("  curl{curl_tls} -s {curl_target}/ -H 'Content-Type: application/json'{auth} -d '{request}'");
    note!("  {} {command}", crate::invoked::program());
    if args.playground() {
        note!("  open {addr}/playground in a browser");
    }
}

/// Resolves on Ctrl-C or SIGTERM.
pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// The broker listeners asked for: a NATS subject, an MQTT topic, an AMQP
/// queue.
async fn serve_brokers(args: &ServeArgs, server: &Server) -> anyhow::Result<Vec<Serving>> {
    #[cfg_attr(
        not(any(feature = "nats", feature = "mqtt", feature = "amqp")),
        allow(unused_mut)
    )]
    let mut listeners = Vec::new();
    let nats = (!args.nats.is_empty()).then(|| args.nats.join(","));
    if let (Some(url), Some(subject)) = (&nats, &args.subject) {
        #[cfg(feature = "nats")]
        {
            let listener = jrpc::transport::nats::NatsListener::connect_in_group(url, subject, &args.group)
                .await
                .with_context(|| format!("serving NATS subject {subject} at {url}"))?;
            listeners.push(server.serve_messages(listener));
        }
        #[cfg(not(feature = "nats"))]
        bail!("--nats {url} --subject {subject}: this jrpc was built without the nats feature");
    }
    if let (Some(url), Some(topic)) = (&args.mqtt, &args.topic) {
        #[cfg(feature = "mqtt")]
        {
            let listener = jrpc::transport::mqtt::MqttListener::connect_in_group(url, topic, &args.group)
                .await
                .with_context(|| format!("serving MQTT topic {topic} at {url}"))?;
            listeners.push(server.serve_messages(listener));
        }
        #[cfg(not(feature = "mqtt"))]
        bail!("--mqtt {url} --topic {topic}: this jrpc was built without the mqtt feature");
    }
    if let (Some(url), Some(queue)) = (&args.amqp, &args.queue) {
        #[cfg(feature = "amqp")]
        {
            let listener = jrpc::transport::amqp::AmqpListener::connect(url, queue)
                .await
                .with_context(|| format!("serving AMQP queue {queue} at {url}"))?;
            listeners.push(server.serve_messages(listener));
        }
        #[cfg(not(feature = "amqp"))]
        bail!("--amqp {url} --queue {queue}: this jrpc was built without the amqp feature");
    }
    let _ = server;
    Ok(listeners)
}
