//! Where a command connects and how it reports a failure: the TARGET word
//! (a URL, `HOST:PORT`, or a command after `--`), the connection flags
//! every calling command shares, and the exit codes.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use clap::Args;
use jrpc::client::{Client, Retry, RetryPolicy, Retrying, StderrMode};
use jrpc::codec::Framing;
use jrpc::peer::CancelProtocol;
use jrpc::CallError;

use crate::pretty::format_json;

/// Exit codes, as documented in `jrpc call --help`.
pub mod exit {
    /// The server answered with an error object.
    pub const RPC_ERROR: u8 = 1;
    /// The command line was wrong (clap's own code).
    pub const USAGE: u8 = 2;
    /// The server could not be reached, or the connection failed.
    pub const TRANSPORT: u8 = 3;
    /// No response within the timeout.
    pub const TIMEOUT: u8 = 4;
}

/// How to reach the server: shared by `jrpc call` and `jrpc bench`.
#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    #[command(flatten)]
    pub(crate) dial: DialArgs,

    /// The cancel notification sent when --timeout runs out: lsp
    /// ($/cancelRequest), mcp (notifications/cancelled) or none. Default: lsp
    /// with content-length framing, none otherwise.
    #[arg(long, value_name = "PROTOCOL")]
    pub(crate) cancel: Option<Cancel>,

    /// The framing for tcp:, unix: and spawned commands: ndjson or
    /// content-length.
    #[arg(long, default_value = "ndjson")]
    pub(crate) framing: Framing,

    /// Try again up to N times, with exponential backoff, when the call
    /// could not be sent (no connection could be made, or no server took
    /// it: a broker's "no responders") or was refused before it ran (HTTP
    /// 429/503 honouring Retry-After, errors -32005 and -32007), on every
    /// transport. With --idempotent, also after a lost connection or a
    /// timed-out attempt.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub(crate) retries: u32,

    /// Also try again after these JSON-RPC error codes (with --retries).
    /// The call may have run before such an error: use it for calls that
    /// are safe to repeat.
    #[arg(
        long,
        value_name = "CODE[,CODE...]",
        value_delimiter = ',',
        allow_hyphen_values = true
    )]
    pub(crate) retry_on: Vec<i64>,

    /// The call is safe to repeat: with --retries N, it is also sent again
    /// when its connection was lost before the reply (a broker node that
    /// went away) or when an attempt got no reply within --attempt-timeout
    /// (a server host that died with it). It may then run more than once.
    #[arg(long)]
    pub(crate) idempotent: bool,

    /// With --idempotent: how long one attempt waits for its reply before
    /// the call is sent again. Default: growing, each attempt twice the one
    /// before, the 1 + N of them together --timeout (with the default 30s
    /// and --retries 5: 0.48s, 0.95s, 1.9s, 3.8s, 7.6s, 15s), so that a
    /// call lost with its server goes out again soon while a slow one still
    /// gets through; at least 100ms. --timeout still bounds the call as a
    /// whole.
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout, requires = "idempotent")]
    pub(crate) attempt_timeout: Option<Duration>,

    /// Told of every retry (`jrpc bench` counts them); not a flag.
    #[arg(skip)]
    pub(crate) on_retry: Option<RetryHook>,
}

/// The first of `1 + retries` attempts that double each time and together
/// take `timeout`; at least 100 ms.
fn first_attempt(timeout: Duration, retries: u32) -> Duration {
    let shares = 2f64.powi(i32::try_from(retries.saturating_add(1)).unwrap_or(i32::MAX)) - 1.0;
    Duration::from_secs_f64(timeout.as_secs_f64() / shares).max(Duration::from_millis(100))
}

/// A function told of every retry, for [`ConnectArgs::on_retry`].
#[derive(Clone)]
pub(crate) struct RetryHook(pub(crate) std::sync::Arc<dyn Fn(&Retrying<'_>) + Send + Sync>);

impl std::fmt::Debug for RetryHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RetryHook")
    }
}

impl ConnectArgs {
    /// Reaching a server with `dial` and `framing`, and nothing tried again.
    pub(crate) fn new(dial: DialArgs, framing: Framing) -> Self {
        ConnectArgs {
            dial,
            cancel: None,
            framing,
            retries: 0,
            retry_on: Vec::new(),
            idempotent: false,
            attempt_timeout: None,
            on_retry: None,
        }
    }

    /// The retry policy the flags ask for, if any.
    fn retry_policy(&self) -> Result<Option<RetryPolicy>, Failure> {
        if self.retries == 0 {
            let asked = if !self.retry_on.is_empty() {
                "--retry-on says after which errors to try again"
            } else if self.idempotent {
                "--idempotent says the call may be sent again"
            } else {
                return Ok(None);
            };
            return Err(Failure::Usage(anyhow!(
                "{asked}; --retries N says how often: give both"
            )));
        }
        let mut policy = RetryPolicy::new(Retry::attempts(self.retries));
        if !self.retry_on.is_empty() || self.idempotent {
            // The user chose to repeat this call: it is idempotent to them.
            policy = policy.on_codes(self.retry_on.iter().copied()).all_idempotent();
        }
        if self.idempotent {
            policy = policy.on_connection_lost(true).on_timeout(true);
            policy = match self.attempt_timeout {
                Some(limit) => policy.attempt_timeout(limit),
                None => policy.doubling_attempt_timeout(first_attempt(self.dial.timeout, self.retries)),
            };
        }
        if let Some(RetryHook(hook)) = &self.on_retry {
            let hook = std::sync::Arc::clone(hook);
            policy = policy.on_retry(move |retrying| hook(retrying));
        }
        Ok(Some(policy))
    }
}

/// The timeout and what HTTP and TLS need to reach a server: the part of
/// [`ConnectArgs`] that `jrpc bridge` shares (it has its own framing).
#[derive(Debug, Clone, Args)]
pub struct DialArgs {
    /// How long to wait for a response: 500ms, 10s, 2m, 1h, or seconds. When it
    /// runs out, the call is cancelled on the server too (see --cancel).
    #[arg(long, default_value = "30s", value_parser = parse_timeout)]
    pub(crate) timeout: Duration,

    /// A header for HTTP and WebSocket targets, 'Name: value'. Repeatable.
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,

    /// Send 'Authorization: Bearer TOKEN' with HTTP and WebSocket targets.
    #[arg(long, value_name = "TOKEN")]
    bearer: Option<String>,

    /// Use HTTP/2 with http(s):// targets.
    #[arg(long)]
    pub(crate) http2: bool,

    /// Trust the certificates in this PEM file (for a self-signed server)
    /// instead of the system's.
    #[arg(long, value_name = "PEM")]
    pub(crate) cacert: Option<std::path::PathBuf>,
}

impl DialArgs {
    /// The headers to send, as (name, value): `-H` ones and `--bearer`.
    pub(crate) fn headers(&self) -> Result<Vec<(String, String)>, Failure> {
        let mut all = Vec::with_capacity(self.headers.len() + 1);
        for header in &self.headers {
            let (name, value) = header
                .split_once(':')
                .ok_or_else(|| Failure::Usage(anyhow!("-H {header:?}: expected 'Name: value'")))?;
            all.push((name.trim().to_owned(), value.trim().to_owned()));
        }
        if let Some(token) = &self.bearer {
            all.push(("Authorization".to_owned(), format!("Bearer {}", token.trim())));
        }
        Ok(all)
    }
}

/// A duration that bounds waiting: zero would never let anything through.
pub(crate) fn parse_timeout(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        d if d.is_zero() => Err(format!("{text:?}: a timeout must be more than zero")),
        d => Ok(d),
    }
}

/// Which cancellation protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Cancel {
    /// MCP: notifications/cancelled with {"requestId", "reason"}.
    Mcp,
    /// LSP: $/cancelRequest with {"id"}; cancelled requests get -32800.
    Lsp,
    /// No cancellation.
    None,
}

/// The protocol for `choice`, defaulting by framing: LSP's on
/// `Content-Length` framing (the LSP world), none otherwise.
pub(crate) fn cancel_protocol(choice: Option<Cancel>, framing: Framing) -> Option<CancelProtocol> {
    let default = match framing {
        Framing::ContentLength => Cancel::Lsp,
        _ => Cancel::None,
    };
    match choice.unwrap_or(default) {
        Cancel::Mcp => Some(CancelProtocol::mcp()),
        Cancel::Lsp => Some(CancelProtocol::lsp()),
        Cancel::None => None,
    }
}

pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = text.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("not a duration: {text:?}"))?;
    Duration::try_from_secs_f64(value * scale).map_err(|e| format!("bad duration {text:?}: {e}"))
}

#[derive(Clone)]
pub(crate) enum Target {
    /// tcp://, unix:, http(s)://, ws(s)://
    Url(String),
    Command(Vec<String>),
}

/// `HOST:PORT`, optionally followed by a path: `127.0.0.1:4000`,
/// `localhost:4000/rpc`, `[::1]:4000`.
pub(crate) fn is_host_port(text: &str) -> bool {
    let authority = text.split_once('/').map_or(text, |(authority, _)| authority);
    let Some((host, port)) = authority.rsplit_once(':') else {
        return false;
    };
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => !v6.is_empty() && v6.chars().all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.'),
        None => {
            !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        }
    };
    host_ok && !port.is_empty() && port.len() <= 5 && port.parse::<u16>().is_ok_and(|p| p > 0)
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Url(url) => f.write_str(url),
            Target::Command(words) => write!(f, "`{}`", words.join(" ")),
        }
    }
}

impl Target {
    /// The target from the command line: the first word, or the command
    /// after `--` (not both); and the words after it.
    pub(crate) fn from_words(
        words: Vec<String>,
        command: &[String],
    ) -> Result<(Target, std::vec::IntoIter<String>), Failure> {
        let mut words = words.into_iter();
        if command.is_empty() {
            let first_is_target = words.as_slice().first().is_some_and(|w| Target::parse(w).is_ok());
            // Without a TARGET, $JRPC_URL names it.
            if !first_is_target {
                if let Some(url) = std::env::var("JRPC_URL").ok().filter(|u| !u.trim().is_empty()) {
                    let target = Target::parse(url.trim())
                        .map_err(|e| Failure::Usage(e.context("JRPC_URL does not name a target")))?;
                    return Ok((target, words));
                }
            }
            let first = words
                .next()
                .ok_or_else(|| Failure::Usage(anyhow!("missing TARGET (or set JRPC_URL)")))?;
            return Ok((Target::parse(&first).map_err(Failure::Usage)?, words));
        }
        if let Some(first) = words.as_slice().first().filter(|w| Target::parse(w).is_ok()) {
            return Err(Failure::Usage(anyhow!(
                "give either a TARGET ({first}) or a command after --, not both"
            )));
        }
        Ok((Target::Command(command.to_vec()), words))
    }

    pub(crate) fn parse(text: &str) -> anyhow::Result<Target> {
        use jrpc::transport::dial::{Scheme, TARGET_FORMS};
        if Scheme::of(text).is_some() {
            Ok(Target::Url(text.to_owned()))
        } else if is_host_port(text) {
            // As curl does: a bare HOST:PORT is an HTTP server.
            Ok(Target::Url(format!("http://{text}")))
        } else {
            bail!("{text:?} is not a target: use {TARGET_FORMS}, or put a command after --")
        }
    }

    pub(crate) async fn connect(self, args: &ConnectArgs) -> Result<Client, Failure> {
        self.connect_with(args, |builder| builder).await
    }

    /// As [`connect`](Self::connect), with settings of the caller's own
    /// (`jrpc bench --auto-batch`, say) added to the builder.
    pub(crate) async fn connect_with(
        self,
        args: &ConnectArgs,
        customize: impl FnOnce(jrpc::client::ClientBuilder) -> jrpc::client::ClientBuilder,
    ) -> Result<Client, Failure> {
        let mut builder = Client::builder()
            .framing(args.framing)
            .call_timeout(args.dial.timeout)
            .stderr(StderrMode::Inherit)
            .http2(args.dial.http2);
        for (name, value) in args.dial.headers()? {
            builder = builder
                .try_header(&name, &value)
                .map_err(|e| Failure::Usage(anyhow!("header {name}: {e}")))?;
        }
        if let Some(path) = &args.dial.cacert {
            builder = builder
                .ca_pem(path)
                .map_err(|e| Failure::Usage(anyhow!("--cacert {}: {e}", path.display())))?;
        }
        if let Some(policy) = args.retry_policy()? {
            builder = builder.retry(policy);
        }
        if let Some(protocol) = cancel_protocol(args.cancel, args.framing) {
            builder = builder.cancellation(protocol);
        }
        let builder = customize(builder);
        let timeout = args.dial.timeout;
        let connecting = async {
            match self {
                Target::Url(url) => builder
                    .connect(&url)
                    .await
                    .with_context(|| format!("connecting to {url}")),
                Target::Command(words) => {
                    let mut command = tokio::process::Command::new(&words[0]);
                    command.args(&words[1..]);
                    builder
                        .spawn(command)
                        .with_context(|| format!("spawning {}", words.join(" ")))
                }
            }
        };
        match tokio::time::timeout(timeout, connecting).await {
            Ok(Ok(client)) => Ok(client),
            // A target that cannot even be tried (a port out of range, a
            // malformed URL) is a usage error.
            Ok(Err(e))
                if e.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::InvalidInput) =>
            {
                Err(Failure::Usage(e))
            }
            Ok(Err(e)) => Err(Failure::Transport(e)),
            Err(_) => Err(Failure::Timeout(anyhow!("no connection within {timeout:?}"))),
        }
    }
}

/// How a call ended badly, each with its exit code.
pub(crate) enum Failure {
    Usage(anyhow::Error),
    Rpc(jrpc::Error),
    Transport(anyhow::Error),
    Timeout(anyhow::Error),
    /// Some entries of a `--batch` failed; the replies are printed already.
    BatchErrors,
    /// The reply (an error) is printed already, as it came (`--envelope`).
    ErrorShown,
}

impl Failure {
    /// The same failure, saying which target it happened on.
    pub(crate) fn naming(self, target: &str) -> Failure {
        match self {
            // A tcp:// target that is an HTTP server: the command that works.
            Failure::Transport(e)
                if target.starts_with("tcp://") && format!("{e:#}").contains("is an HTTP server") =>
            {
                let authority = target.trim_start_matches("tcp://").trim_end_matches('/');
                Failure::Transport(anyhow!(
                    "calling {target}: it is an HTTP server: use http://{authority} instead (jrpc call http://{authority} METHOD [PARAM]...)"
                ))
            }
            Failure::Transport(e) => Failure::Transport(e.context(format!("calling {target}"))),
            Failure::Timeout(e) => Failure::Timeout(e.context(format!("calling {target}"))),
            other => other,
        }
    }
}

impl From<CallError> for Failure {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Rpc(error) => Failure::Rpc(error),
            CallError::Timeout(_) => Failure::Timeout(e.into()),
            other => Failure::Transport(other.into()),
        }
    }
}

/// Prints a failure on stderr and picks its exit status.
pub(crate) fn report(failure: Failure) -> ExitCode {
    match failure {
        Failure::Rpc(error) => {
            let text = serde_json::to_string(&error).unwrap_or_else(|_| error.to_string());
            eprintln!("{}", format_json(&text, true));
            ExitCode::from(exit::RPC_ERROR)
        }
        Failure::Usage(e) => {
            eprintln!("jrpc: {e:#}");
            ExitCode::from(exit::USAGE)
        }
        Failure::Transport(e) => {
            eprintln!("jrpc: {e:#}");
            ExitCode::from(exit::TRANSPORT)
        }
        Failure::BatchErrors => {
            eprintln!("jrpc: some batch entries failed");
            ExitCode::from(exit::RPC_ERROR)
        }
        Failure::ErrorShown => ExitCode::from(exit::RPC_ERROR),
        Failure::Timeout(e) => {
            eprintln!("jrpc: {e:#}");
            ExitCode::from(exit::TIMEOUT)
        }
    }
}

/// Closes the connection the way a well-behaved client does: queued frames
/// flushed, a WebSocket's closing handshake, a child given time to read its
/// stdin and exit; bounded, so that a server that never answers cannot keep
/// `jrpc call` from exiting.
pub(crate) async fn close(client: Client) {
    let _ = tokio::time::timeout(Duration::from_secs(5), client.close()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubling_attempts_fit_the_timeout() {
        let ms = |ms: u64| Duration::from_millis(ms);
        let cases = [
            // 1 + 2 + 4 + 8 + 16 + 32 = 63 shares of 30 s.
            (Duration::from_secs(30), 5, ms(476)),
            (Duration::from_secs(30), 0, Duration::from_secs(30)),
            (Duration::from_secs(3), 1, ms(1000)),
            // Never under 100 ms, however many retries.
            (Duration::from_secs(30), 20, ms(100)),
            (Duration::from_secs(1), u32::MAX, ms(100)),
        ];
        for (timeout, retries, expected) in cases {
            let first = first_attempt(timeout, retries);
            assert!(
                first.abs_diff(expected) < ms(1),
                "{timeout:?}, {retries}: {first:?}"
            );
        }
    }
}
