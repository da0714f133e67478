//! `jrpc mcp`: MCP (Model Context Protocol) servers.

use anyhow::Context as _;
use clap::{Args, Subcommand};
use jrpc::codec::Framing;

/// `jrpc mcp ...`.
#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(subcommand)]
    command: McpCommand,
}

#[derive(Debug, Subcommand)]
enum McpCommand {
    /// Serve the demo MCP server (revisions 2026-07-28 and 2025-11-25 on one
    /// endpoint): tools add, echo, sleep, sample, elicit, list_roots, fail
    /// and bump; resources demo://greeting, demo://counter and
    /// demo://echo/{text}; prompt greet; logging.
    Serve(ServeArgs),
    /// List a server's tools, resources (and templates) and prompts.
    List(ListArgs),
    /// Call a tool and print its text (exit 1 when it fails).
    Call(CallToolArgs),
    /// Read a resource and print its contents.
    Read(ReadArgs),
    /// Get a prompt and print its messages.
    Prompt(PromptArgs),
    /// Print the server's change notifications as they come (tool, prompt
    /// or resource lists; updates of resources by URI) until Ctrl-C or the
    /// server ends the stream.
    Watch(WatchArgs),
    /// Log in to an MCP server over HTTP that asks for OAuth: prints the
    /// URL to open (runs $BROWSER with it when set), waits for the
    /// authorization server to send you back, and keeps the tokens under
    /// $XDG_STATE_HOME/jrpc/oauth/ (else ~/.local/state/jrpc/oauth/).
    Login(LoginArgs),
    /// Forget the tokens kept for an MCP server.
    Logout(LogoutArgs),
}

/// `jrpc mcp login URL`.
#[derive(Debug, Args)]
struct LoginArgs {
    /// The MCP endpoint, http(s)://…/mcp.
    #[arg(value_name = "URL")]
    url: String,

    #[command(flatten)]
    oauth: OAuthArgs,
}

/// `jrpc mcp logout URL`.
#[derive(Debug, Args)]
struct LogoutArgs {
    /// The MCP endpoint, http(s)://…/mcp.
    #[arg(value_name = "URL")]
    url: String,
}

/// Who jrpc is at the authorization server, when it was registered there
/// beforehand (else it uses dynamic registration).
#[derive(Debug, Clone, Default, Args)]
struct OAuthArgs {
    /// A client id registered with the server's authorization server.
    #[arg(long, value_name = "ID")]
    oauth_client_id: Option<String>,

    /// The secret of that client (a confidential client); from the
    /// environment, it stays out of `ps` and the shell's history.
    #[arg(
        long,
        value_name = "SECRET",
        requires = "oauth_client_id",
        env = "JRPC_OAUTH_CLIENT_SECRET",
        hide_env_values = true
    )]
    oauth_client_secret: Option<String>,
}

/// Which server: an `http(s)://…/mcp` URL (or `tcp://`, `unix:`, `ws://`)
/// first, or a command after `--`.
#[derive(Debug, Args)]
struct Client {
    /// How long each request may take: 500ms, 10s, 2m, 1h.
    #[arg(long, default_value = "60s", value_parser = crate::call::parse_duration)]
    timeout: std::time::Duration,

    /// A header for an http(s):// server, 'Name: value'. Repeatable.
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,

    /// Send 'Authorization: Bearer TOKEN' to an http(s):// server.
    #[arg(long, value_name = "TOKEN")]
    bearer: Option<String>,

    /// Show the wire on stderr: every frame sent and received (and HTTP
    /// heads), as `jrpc call -v` does, and the protocol revision spoken.
    #[arg(short = 'v', long)]
    verbose: bool,

    /// The protocol revision to speak: 2026-07-28, 2025-11-25, ..., or
    /// `legacy` (the initialize handshake). Found out from the server by
    /// default.
    #[arg(long, value_name = "VERSION|legacy", value_parser = parse_protocol)]
    protocol_version: Option<jrpc_mcp::client::ProtocolChoice>,

    /// When the server asks for input (an elicitation), decline instead of
    /// asking on the terminal; when it asks for a login (OAuth), fail
    /// (exit 3) instead of starting one: run `jrpc mcp login URL` first.
    #[arg(long)]
    no_input: bool,

    #[command(flatten)]
    oauth: OAuthArgs,

    /// A server to spawn and talk to over its stdin/stdout.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

fn parse_protocol(text: &str) -> Result<jrpc_mcp::client::ProtocolChoice, String> {
    text.parse()
}

#[derive(Debug, Args)]
struct ListArgs {
    /// [TARGET] and what to list: tools, resources or prompts (all three
    /// when omitted).
    #[arg(value_name = "[TARGET] [tools|resources|prompts]")]
    words: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: Client,
}

#[derive(Debug, Args)]
struct CallToolArgs {
    /// [TARGET] TOOL and its arguments as k=v (v is JSON when it parses,
    /// else a string).
    #[arg(value_name = "[TARGET] TOOL [K=V]", allow_negative_numbers = true)]
    words: Vec<String>,
    /// The whole arguments object as JSON; with it, print the structured
    /// result (or the whole result) as JSON.
    #[arg(long, value_name = "ARGS", num_args = 0..=1, default_missing_value = "")]
    json: Option<String>,
    #[command(flatten)]
    client: Client,
}

#[derive(Debug, Args)]
struct WatchArgs {
    /// [TARGET] and what to watch: tools, prompts, resources (their lists)
    /// and resource URIs (their updates); all three lists when omitted.
    #[arg(value_name = "[TARGET] [tools|prompts|resources|URI...]")]
    words: Vec<String>,
    /// Print each notification as a line of JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    client: Client,
}

#[derive(Debug, Args)]
struct ReadArgs {
    /// [TARGET] URI.
    #[arg(value_name = "[TARGET] URI")]
    words: Vec<String>,
    #[command(flatten)]
    client: Client,
}

#[derive(Debug, Args)]
struct PromptArgs {
    /// [TARGET] NAME and its arguments as k=v (values are strings).
    #[arg(value_name = "[TARGET] NAME [K=V]")]
    words: Vec<String>,
    #[command(flatten)]
    client: Client,
}

#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
struct Transport {
    /// Serve one session over stdin/stdout (newline-delimited JSON-RPC;
    /// logs go to stderr). Ends when stdin closes.
    #[arg(long)]
    stdio: bool,

    /// Serve Streamable HTTP at http://ADDR/mcp (e.g. 127.0.0.1:8000; port
    /// 0 picks a free port), until SIGTERM or Ctrl-C.
    #[arg(long, value_name = "ADDR", value_parser = crate::serve::parse_listen_addr)]
    http: Option<String>,

    /// Serve sessions over TCP at ADDR, one per connection, newline-delimited
    /// JSON-RPC (clients: `jrpc mcp list tcp://ADDR`), until SIGTERM or Ctrl-C.
    #[arg(long, value_name = "ADDR", value_parser = crate::serve::parse_listen_addr)]
    tcp: Option<String>,

    /// Serve sessions over a Unix socket at PATH, one per connection.
    #[arg(long, value_name = "PATH")]
    unix: Option<String>,

    /// Serve sessions over WebSocket at ws://ADDR (any path), one per
    /// connection, one JSON-RPC message per WebSocket message.
    #[arg(long, value_name = "ADDR", value_parser = crate::serve::parse_listen_addr)]
    ws: Option<String>,
}

#[derive(Debug, Args)]
struct ServeArgs {
    #[command(flatten)]
    transport: Transport,

    /// Also serve the fixture tools, resources and prompts the official MCP
    /// conformance suite (npm @modelcontextprotocol/conformance) calls in its
    /// server scenarios.
    #[arg(long)]
    conformance: bool,

    /// With --http: a host name the Host header may name besides localhost,
    /// 127.0.0.1, [::1] and the address served (DNS-rebinding protection
    /// refuses others with 421). Repeatable.
    #[arg(long, value_name = "HOST")]
    allow_host: Vec<String>,

    /// With --http: an origin (scheme://host[:port]) whose pages may call
    /// besides those on an allowed host (others get 403). Repeatable.
    #[arg(long, value_name = "ORIGIN")]
    allow_origin: Vec<String>,

    /// With --http: answer tools/call, resources/read and prompts/get with
    /// a JSON body instead of an SSE stream, unless the handler sends
    /// progress, a log line or a request before its reply.
    #[arg(long)]
    json_response: bool,

    /// With --http: require OAuth access tokens (JWTs) issued by the
    /// authorization server at URL. The protected resource metadata at
    /// /.well-known/oauth-protected-resource/mcp names it; a token must
    /// name the endpoint (http://ADDR/mcp, or --oauth-resource) as its
    /// audience.
    #[arg(long, value_name = "URL")]
    oauth_issuer: Option<String>,

    /// The endpoint's canonical URL as clients reach it (behind a proxy):
    /// the metadata's resource and the audience tokens must name.
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    oauth_resource: Option<String>,

    /// The audience tokens must name, when it is not the resource.
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    oauth_audience: Option<String>,

    /// A scope every request's token must grant. Repeatable.
    #[arg(long, value_name = "SCOPE", requires = "oauth_issuer")]
    oauth_scope: Vec<String>,

    /// A scope a tool's calls need besides those of --oauth-scope
    /// (TOOL=SCOPE); a token without it gets 403 insufficient_scope.
    /// Repeatable.
    #[arg(long, value_name = "TOOL=SCOPE", requires = "oauth_issuer")]
    oauth_tool_scope: Vec<String>,
}

impl McpArgs {
    /// Whether to show the wire (`-v` on a client command).
    pub fn verbose(&self) -> bool {
        let client = match &self.command {
            McpCommand::Serve(_) | McpCommand::Login(_) | McpCommand::Logout(_) => return false,
            McpCommand::List(a) => &a.client,
            McpCommand::Call(a) => &a.client,
            McpCommand::Read(a) => &a.client,
            McpCommand::Prompt(a) => &a.client,
            McpCommand::Watch(a) => &a.client,
        };
        client.verbose
    }
}

/// The OAuth settings of `jrpc mcp serve --http … --oauth-issuer URL`.
fn oauth_settings(issuer: &str, serve: &ServeArgs) -> anyhow::Result<jrpc_mcp::http::OAuth> {
    crate::serve::check_issuer_url(issuer)?;
    let mut oauth = jrpc_mcp::http::OAuth::issuer(issuer).require_scopes(serve.oauth_scope.iter().cloned());
    if let Some(resource) = &serve.oauth_resource {
        oauth = oauth.resource(resource);
    }
    if let Some(audience) = &serve.oauth_audience {
        oauth = oauth.audience(audience);
    }
    for rule in &serve.oauth_tool_scope {
        let Some((tool, scope)) = rule
            .split_once('=')
            .filter(|(t, s)| !t.is_empty() && !s.is_empty())
        else {
            anyhow::bail!("--oauth-tool-scope {rule:?}: expected TOOL=SCOPE");
        };
        oauth = oauth.tool_scope(tool, scope);
    }
    Ok(oauth)
}

pub async fn run(args: McpArgs) -> anyhow::Result<std::process::ExitCode> {
    let serve = match args.command {
        McpCommand::Serve(serve) => serve,
        McpCommand::List(list) => return Ok(client::list(list).await),
        McpCommand::Call(call) => return Ok(client::call(call).await),
        McpCommand::Read(read) => return Ok(client::read(read).await),
        McpCommand::Prompt(prompt) => return Ok(client::prompt(prompt).await),
        McpCommand::Watch(watch) => return Ok(client::watch(watch).await),
        McpCommand::Login(login) => return Ok(client::login(login).await),
        McpCommand::Logout(logout) => return Ok(client::logout(logout).await),
    };
    let server = if serve.conformance {
        jrpc_mcp::demo::conformance_server()
    } else {
        jrpc_mcp::demo::server()
    };
    let listening = |serving: &jrpc::server::Serving| note!("jrpc: MCP at {}", serving.local_addr());
    let transport = &serve.transport;
    let max_frame_len = jrpc::message::Limits::DEFAULT_MAX_FRAME_LEN;
    if let Some(addr) = &transport.tcp {
        let listener = jrpc::transport::tcp::TcpListener::bind(addr.as_str(), Framing::Ndjson, max_frame_len)
            .await
            .with_context(|| format!("listening on --tcp {addr}"))?;
        return serve_until_stopped(server.serve(listener), listening).await;
    }
    if let Some(path) = &transport.unix {
        #[cfg(unix)]
        {
            let listener = jrpc::transport::unix::UnixListener::bind(path, Framing::Ndjson, max_frame_len)
                .await
                .with_context(|| format!("listening on --unix {path}"))?;
            return serve_until_stopped(server.serve(listener), listening).await;
        }
        #[cfg(not(unix))]
        anyhow::bail!("--unix {path}: Unix sockets are not available on this platform");
    }
    if let Some(addr) = &transport.ws {
        let listener = jrpc::transport::ws::WsListener::bind(addr.as_str(), Default::default())
            .await
            .with_context(|| format!("listening on --ws {addr}"))?;
        return serve_until_stopped(server.serve(listener), listening).await;
    }
    match &transport.http {
        Some(addr) => {
            let mut options = jrpc_mcp::http::HttpOptions::default().json_response(serve.json_response);
            for host in &serve.allow_host {
                options = options.allow_host(host);
            }
            for origin in &serve.allow_origin {
                options = options.allow_origin(origin);
            }
            if let Some(issuer) = &serve.oauth_issuer {
                options = options.oauth(oauth_settings(issuer, &serve)?);
            }
            let serving = server
                .serve_http(addr.as_str(), options)
                .await
                .with_context(|| format!("listening on --http {addr}"))?;
            serve_until_stopped(serving, |serving| {
                note!("jrpc: MCP (Streamable HTTP) at {}/mcp", serving.local_addr())
            })
            .await
        }
        None => {
            let reason = server.serve_stdio().await;
            tracing::info!(%reason, "MCP session ended");
            Ok(std::process::ExitCode::SUCCESS)
        }
    }
}

/// Serves until SIGTERM or Ctrl-C (or until shut down from elsewhere), then
/// lets the sessions finish within the grace period.
async fn serve_until_stopped(
    serving: jrpc::server::Serving,
    announce: impl FnOnce(&jrpc::server::Serving),
) -> anyhow::Result<std::process::ExitCode> {
    announce(&serving);
    let stop = serving.shutdown_token();
    tokio::select! {
        () = crate::serve::shutdown_signal() => stop.cancel(),
        () = stop.cancelled() => {}
    }
    serving.shutdown().await;
    Ok(std::process::ExitCode::SUCCESS)
}

/// The client commands: connect, do one thing, print it, exit as `jrpc
/// call` does.
mod client {
    use std::collections::BTreeMap;
    use std::io::{IsTerminal, Write};
    use std::process::ExitCode;

    use jrpc_mcp::client::oauth::{FileStore, LoopbackAuthorizer, MemoryStore, OAuthClient, OAuthError};
    use jrpc_mcp::client::{McpClient, McpClientError};
    use jrpc_mcp::types::{ContentBlock, ResourceContents};

    use super::{
        CallToolArgs, Client, ListArgs, LoginArgs, LogoutArgs, OAuthArgs, PromptArgs, ReadArgs, WatchArgs,
    };
    use crate::call::{exit, report, Failure};

    fn finish(outcome: Result<ExitCode, Failure>) -> ExitCode {
        outcome.unwrap_or_else(report)
    }

    fn failure(e: McpClientError) -> Failure {
        if let Some(oauth) = e.authorization() {
            return login_failure(oauth);
        }
        match e {
            McpClientError::Call(e) => Failure::from(e),
            McpClientError::ResourceNotFound { error, .. } => Failure::Rpc(error),
            other => Failure::Transport(other.into()),
        }
    }

    /// A login that could not happen here says what to do instead.
    fn login_failure(e: &OAuthError) -> Failure {
        match e {
            OAuthError::LoginNeeded(url) => Failure::Transport(anyhow::anyhow!(
                "{url} asks you to log in (OAuth), and there is no one to ask here (--no-input, or stdin is not a terminal): run `jrpc mcp login {url}` first"
            )),
            other => Failure::Transport(anyhow::anyhow!("authorization failed: {other}")),
        }
    }

    /// How jrpc logs in to servers that ask (OAuth): tokens kept in the
    /// user's state folder; the browser step only when someone is there
    /// to take it (`interactive`).
    fn oauth_client(args: &OAuthArgs, interactive: bool) -> OAuthClient {
        let mut oauth = OAuthClient::builder().client_name("jrpc");
        oauth = match FileStore::default_dir() {
            Some(dir) => oauth.store(FileStore::new(dir)),
            None => oauth.store(MemoryStore::new()),
        };
        if let Some(id) = &args.oauth_client_id {
            oauth = oauth.client_id(id);
        }
        if let Some(secret) = &args.oauth_client_secret {
            oauth = oauth.client_secret(secret);
        }
        if interactive {
            oauth = oauth.authorizer(LoopbackAuthorizer::new().on_url(show_login_url));
        }
        oauth.build()
    }

    /// Shows the URL to open, and opens it with `$BROWSER` when set.
    fn show_login_url(url: &str) {
        eprintln!("jrpc: this server asks you to log in. Open this URL in your browser:\n\n  {url}\n");
        if let Some(browser) = std::env::var_os("BROWSER").filter(|b| !b.is_empty()) {
            let browser = browser.to_string_lossy().into_owned();
            let mut words = browser.split_whitespace();
            if let Some(program) = words.next() {
                let spawned = std::process::Command::new(program)
                    .args(words)
                    .arg(url)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .spawn();
                if let Err(e) = spawned {
                    eprintln!("jrpc: could not run $BROWSER ({browser}): {e}");
                }
            }
        }
        eprintln!("jrpc: waiting for the authorization server to send you back (Ctrl-C to give up)…");
    }

    pub(super) async fn login(args: LoginArgs) -> ExitCode {
        let oauth = oauth_client(&args.oauth, true);
        match oauth.login(&args.url).await {
            Ok(credentials) => {
                let kept = FileStore::default_dir()
                    .map(|dir| format!(" (kept in {})", dir.display()))
                    .unwrap_or_else(|| " (not kept: neither $XDG_STATE_HOME nor $HOME is set)".into());
                eprintln!("jrpc: logged in to {} at {}{kept}", args.url, credentials.issuer);
                ExitCode::SUCCESS
            }
            Err(e) => report(Failure::Transport(anyhow::anyhow!(
                "logging in to {}: {e}",
                args.url
            ))),
        }
    }

    pub(super) async fn logout(args: LogoutArgs) -> ExitCode {
        let oauth = oauth_client(&OAuthArgs::default(), false);
        match oauth.logout(&args.url) {
            Ok(true) => {
                eprintln!("jrpc: logged out of {}", args.url);
                ExitCode::SUCCESS
            }
            Ok(false) => {
                eprintln!("jrpc: not logged in to {}", args.url);
                ExitCode::SUCCESS
            }
            Err(e) => report(Failure::Usage(anyhow::anyhow!("{e}"))),
        }
    }

    fn usage(text: impl Into<String>) -> Failure {
        Failure::Usage(anyhow::anyhow!(text.into()))
    }

    /// Splits off the TARGET: there is none when a command follows `--`.
    fn target(words: Vec<String>, client: &Client) -> Result<(Option<String>, Vec<String>), Failure> {
        if !client.command.is_empty() {
            return Ok((None, words));
        }
        let mut words = words.into_iter();
        match words.next() {
            Some(url) if jrpc::transport::dial::Scheme::of(&url).is_some() => Ok((Some(url), words.collect())),
            Some(other) => Err(usage(format!(
                "{other:?} is not a server: give an http(s)://…/mcp URL (or tcp://, unix:, ws://) first, or a command after --"
            ))),
            None => Err(usage(
                "no server: give an http(s)://…/mcp URL (or tcp://, unix:, ws://), or a command after --",
            )),
        }
    }

    /// Connects, showing the server's progress and logs on stderr.
    async fn connect(url: Option<String>, client: &Client) -> Result<McpClient, Failure> {
        connect_as(url, client, false).await
    }

    /// As [`connect`]; with `own_group`, a server started with `-- COMMAND`
    /// runs in a process group of its own, so that Ctrl-C at a terminal
    /// reaches only jrpc, which then stops the server itself (for `watch`,
    /// where Ctrl-C is how one ends and must not look like the server
    /// failing).
    async fn connect_as(url: Option<String>, client: &Client, own_group: bool) -> Result<McpClient, Failure> {
        let bar = std::io::stderr().is_terminal();
        let builder = McpClient::builder("jrpc", env!("CARGO_PKG_VERSION"))
            .call_timeout(client.timeout)
            .on_progress(move |p| {
                let total = p.total.map(|t| format!("/{t}")).unwrap_or_default();
                let message = p.message.clone().unwrap_or_default();
                if bar {
                    let filled = p
                        .total
                        .filter(|t| *t > 0.0)
                        .map_or(0, |t| ((p.progress / t).clamp(0.0, 1.0) * 30.0) as usize);
                    eprint!(
                        "\r[{}{}] {}{total} {message}\x1b[K",
                        "#".repeat(filled),
                        " ".repeat(30 - filled),
                        p.progress
                    );
                    let _ = std::io::stderr().flush();
                } else {
                    eprintln!("progress {}{total} {message}", p.progress);
                }
            })
            .on_log(move |m| {
                if bar {
                    eprint!("\r\x1b[K");
                }
                let logger = m.logger.map(|l| format!(" {l}")).unwrap_or_default();
                eprintln!("log [{}]{logger}: {}", m.level, m.data);
            });
        let no_input = client.no_input;
        let mut builder = builder
            .protocol(client.protocol_version.clone().unwrap_or_default())
            .elicitation(move |params| async move {
                if no_input {
                    eprintln!("jrpc: the server asks for input ({}); declined (--no-input)", params.message);
                    return Ok(crate::mcp_input::declined());
                }
                Ok(tokio::task::spawn_blocking(move || crate::mcp_input::ask(&params))
                    .await
                    .unwrap_or_else(|_| crate::mcp_input::declined()))
            })
            .sampling(|_| async {
                eprintln!("jrpc: the server asks for a sampling (an LLM completion); declined: jrpc mcp has no model");
                Err(jrpc::Error::new(-1, "Sampling declined").with_data("jrpc mcp has no model to sample with"))
            });
        // An Authorization header of the user's own turns OAuth off.
        let mut own_authorization = false;
        for header in &client.headers {
            let (name, value) = header
                .split_once(':')
                .ok_or_else(|| usage(format!("-H {header:?}: expected 'Name: value'")))?;
            own_authorization |= name.trim().eq_ignore_ascii_case("authorization");
            builder = builder.header(name.trim(), value.trim());
        }
        if let Some(token) = &client.bearer {
            builder = builder.header("Authorization", format!("Bearer {}", token.trim()));
        } else if !own_authorization {
            // A server that asks for a login gets one: from the tokens kept
            // by `jrpc mcp login`, else the browser flow when someone is at
            // the terminal.
            let interactive = !client.no_input && std::io::stdin().is_terminal();
            builder = builder.oauth(oauth_client(&client.oauth, interactive));
        }
        let name = url.clone().unwrap_or_else(|| client.command.join(" "));
        let connected = match url.as_deref() {
            Some(url) => {
                return builder
                    .connect_url(url)
                    .await
                    .map_err(|e| not_mcp_here(e, url).naming(&name))
            }
            None => {
                let mut command = tokio::process::Command::new(&client.command[0]);
                command.args(&client.command[1..]);
                #[cfg(unix)]
                if own_group {
                    command.process_group(0);
                }
                #[cfg(not(unix))]
                let _ = own_group;
                builder.spawn(command).await
            }
        };
        // Failing to start or to initialize: say which server.
        connected.map_err(|e| failure(e).naming(&name))
    }

    /// An HTTP server that does not know `initialize` (or has nothing at
    /// that path) is not an MCP endpoint there: say so, and where one
    /// usually is.
    fn not_mcp_here(e: McpClientError, url: &str) -> Failure {
        let http_status = match &e {
            McpClientError::Call(call) => call
                .transport_error::<jrpc::client::HttpError>()
                .map(|http| http.status),
            _ => None,
        };
        let not_found =
            e.rpc().is_some_and(|rpc| rpc.code() == -32601) || matches!(http_status, Some(404 | 405));
        if !not_found {
            return failure(e);
        }
        let trimmed = url.trim_end_matches('/');
        let hint = if trimmed.ends_with("/mcp") {
            String::new()
        } else {
            format!(
                "; MCP servers serve Streamable HTTP at a path of their own, most often /mcp: try {trimmed}/mcp"
            )
        };
        Failure::Transport(anyhow::anyhow!(
            "not an MCP endpoint: it answered initialize with {e}{hint}"
        ))
    }

    /// A tool's arguments as a signature, from its input schema:
    /// `(a: number, b: number, note?: string)`.
    fn signature(tool: &jrpc_mcp::types::Tool) -> String {
        let schema = &tool.input_schema;
        let required: Vec<&str> = schema
            .get("required")
            .and_then(|r| r.as_array())
            .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let params: Vec<String> = schema
            .get("properties")
            .and_then(|p| p.as_object())
            .map(|properties| {
                properties
                    .iter()
                    .map(|(name, property)| {
                        let kind = match property.get("type") {
                            Some(serde_json::Value::String(t)) => t.clone(),
                            Some(serde_json::Value::Array(ts)) => {
                                ts.iter().filter_map(|t| t.as_str()).collect::<Vec<_>>().join("|")
                            }
                            _ => "any".to_owned(),
                        };
                        let optional = if required.contains(&name.as_str()) {
                            ""
                        } else {
                            "?"
                        };
                        format!("{name}{optional}: {kind}")
                    })
                    .collect()
            })
            .unwrap_or_default();
        format!("({})", params.join(", "))
    }

    fn end_bar() {
        if std::io::stderr().is_terminal() {
            eprint!("\r\x1b[K");
        }
    }

    fn content_text(block: &ContentBlock) -> String {
        match block {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::Image(i) => format!("[image, {}, {} bytes of base64]", i.mime_type, i.data.len()),
            ContentBlock::Audio(a) => format!("[audio, {}, {} bytes of base64]", a.mime_type, a.data.len()),
            ContentBlock::ResourceLink(l) => format!("[resource link {}]", l.uri),
            ContentBlock::Resource(r) => match &r.resource {
                ResourceContents::Text(t) => t.text.clone(),
                ResourceContents::Blob(b) => {
                    format!("[resource {}, {} bytes of base64]", b.uri, b.blob.len())
                }
            },
        }
    }

    /// `k=v` words as an object; values are JSON when they parse as JSON.
    fn key_values(
        words: &[String],
        json_values: bool,
    ) -> Result<serde_json::Map<String, serde_json::Value>, Failure> {
        let mut map = serde_json::Map::new();
        for word in words {
            // The rule of `jrpc call` and `jrpc connect`: only NAME=VALUE
            // words name an argument.
            let (Some((key, value)), true) = (word.split_once('='), crate::call::is_named(word)) else {
                return Err(usage(format!(
                    "{word:?} is not NAME=VALUE: arguments are named (a value with = in it goes after the name: k='\"a=b\"')"
                )));
            };
            let value = match serde_json::from_str(value) {
                Ok(json) if json_values => json,
                _ => serde_json::Value::String(value.to_owned()),
            };
            map.insert(key.to_owned(), value);
        }
        Ok(map)
    }

    pub(super) async fn list(args: ListArgs) -> ExitCode {
        finish(list_inner(args).await)
    }

    async fn list_inner(args: ListArgs) -> Result<ExitCode, Failure> {
        let (url, words) = target(args.words, &args.client)?;
        let what = match words.as_slice() {
            [] => vec!["tools", "resources", "prompts"],
            [one] if ["tools", "resources", "prompts"].contains(&one.as_str()) => vec![one.as_str()],
            _ => {
                return Err(usage(format!(
                    "list what? tools, resources or prompts, not {words:?}"
                )))
            }
        };
        let what: Vec<String> = what.into_iter().map(str::to_owned).collect();
        let client = connect(url, &args.client).await?;
        let caps = client.server_capabilities().clone();
        let mut out = serde_json::Map::new();
        let era = if client.is_modern() { "modern" } else { "legacy" };
        if args.client.verbose {
            eprintln!("jrpc: MCP {} ({era})", client.protocol_version());
        }
        if args.json {
            out.insert("protocolVersion".into(), client.protocol_version().into());
        }
        for kind in &what {
            match kind.as_str() {
                "tools" if caps.tools.is_some() => {
                    let tools = client.list_tools().await.map_err(failure)?;
                    if !args.json {
                        println!("tools ({}):", tools.len());
                        for tool in &tools {
                            let called = format!("{}{}", tool.name, signature(tool));
                            println!("  {called:<32} {}", tool.description.as_deref().unwrap_or(""));
                        }
                    }
                    out.insert("tools".into(), serde_json::to_value(tools).unwrap_or_default());
                }
                "resources" if caps.resources.is_some() => {
                    let resources = client.list_resources().await.map_err(failure)?;
                    let templates = client.list_resource_templates().await.map_err(failure)?;
                    if !args.json {
                        println!("resources ({}):", resources.len());
                        for r in &resources {
                            println!("  {:<30} {}", r.uri, r.description.as_deref().unwrap_or(&r.name));
                        }
                        println!("resource templates ({}):", templates.len());
                        for t in &templates {
                            println!(
                                "  {:<30} {}",
                                t.uri_template,
                                t.description.as_deref().unwrap_or(&t.name)
                            );
                        }
                    }
                    out.insert(
                        "resources".into(),
                        serde_json::to_value(resources).unwrap_or_default(),
                    );
                    out.insert(
                        "resourceTemplates".into(),
                        serde_json::to_value(templates).unwrap_or_default(),
                    );
                }
                "prompts" if caps.prompts.is_some() => {
                    let prompts = client.list_prompts().await.map_err(failure)?;
                    if !args.json {
                        println!("prompts ({}):", prompts.len());
                        for p in &prompts {
                            let arguments: Vec<String> = p
                                .arguments
                                .iter()
                                .flatten()
                                .map(|a| {
                                    format!("{}{}", a.name, if a.required == Some(true) { "*" } else { "" })
                                })
                                .collect();
                            println!(
                                "  {:<20} ({}) {}",
                                p.name,
                                arguments.join(", "),
                                p.description.as_deref().unwrap_or("")
                            );
                        }
                    }
                    out.insert(
                        "prompts".into(),
                        serde_json::to_value(prompts).unwrap_or_default(),
                    );
                }
                other => {
                    if !args.json {
                        println!("{other}: not offered by this server");
                    }
                }
            }
        }
        if args.json {
            println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        }
        client.close().await;
        Ok(ExitCode::SUCCESS)
    }

    pub(super) async fn call(args: CallToolArgs) -> ExitCode {
        finish(call_inner(args).await)
    }

    async fn call_inner(args: CallToolArgs) -> Result<ExitCode, Failure> {
        let (url, words) = target(args.words, &args.client)?;
        let Some((tool, rest)) = words.split_first() else {
            return Err(usage("which tool? jrpc mcp call [TARGET] TOOL [K=V]..."));
        };
        let mut arguments = key_values(rest, true)?;
        if let Some(json) = args.json.as_deref().filter(|j| !j.is_empty()) {
            match serde_json::from_str(json) {
                Ok(serde_json::Value::Object(object)) => arguments.extend(object),
                _ => return Err(usage("--json takes a JSON object of arguments")),
            }
        }
        let client = connect(url, &args.client).await?;
        let result = client.call_tool(tool, arguments).await;
        end_bar();
        let result = match result {
            Ok(result) => result,
            Err(e) => return Err(unknown_tool(&client, tool, e).await),
        };
        if args.json.is_some() {
            let shown = match &result.structured_content {
                Some(structured) => serde_json::Value::Object(structured.clone()),
                None => serde_json::to_value(&result).unwrap_or_default(),
            };
            println!("{}", serde_json::to_string_pretty(&shown).unwrap_or_default());
        } else {
            for block in &result.content {
                println!("{}", content_text(block));
            }
        }
        client.close().await;
        Ok(if result.failed() {
            ExitCode::from(exit::RPC_ERROR)
        } else {
            ExitCode::SUCCESS
        })
    }

    /// A call refused because the server has no such tool also says which
    /// tools it has (on stderr, before the error).
    async fn unknown_tool(client: &McpClient, tool: &str, e: McpClientError) -> Failure {
        let invalid = e.rpc().is_some_and(|rpc| rpc.code() == -32602);
        if !invalid {
            return failure(e);
        }
        let Ok(tools) = client.list_tools().await else {
            return failure(e);
        };
        if tools.iter().any(|t| t.name == tool) {
            return failure(e);
        }
        let known: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        eprintln!(
            "jrpc: the server has no tool {tool:?}; it has: {}",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        );
        failure(e)
    }

    pub(super) async fn watch(args: WatchArgs) -> ExitCode {
        finish(watch_inner(args).await)
    }

    /// What `jrpc mcp watch` listens for, from its words.
    fn watch_filter(words: &[String]) -> jrpc_mcp::types::SubscriptionFilter {
        let mut filter = jrpc_mcp::types::SubscriptionFilter::default();
        let all = words.is_empty();
        let has = |what: &str| all || words.iter().any(|w| w == what);
        filter.tools_list_changed = has("tools").then_some(true);
        filter.prompts_list_changed = has("prompts").then_some(true);
        filter.resources_list_changed = has("resources").then_some(true);
        let uris: Vec<String> = words
            .iter()
            .filter(|w| !["tools", "prompts", "resources"].contains(&w.as_str()))
            .cloned()
            .collect();
        filter.resource_subscriptions = (!uris.is_empty()).then_some(uris);
        filter
    }

    async fn watch_inner(args: WatchArgs) -> Result<ExitCode, Failure> {
        use futures_util::StreamExt;
        let (url, words) = target(args.words, &args.client)?;
        if let Some(bad) = words
            .iter()
            .find(|w| !["tools", "prompts", "resources"].contains(&w.as_str()) && !w.contains(':'))
        {
            return Err(usage(format!(
                "watch what? tools, prompts, resources or a resource URI, not {bad:?}"
            )));
        }
        let client = connect_as(url, &args.client, true).await?;
        let mut changes = client.listen(watch_filter(&words)).await.map_err(failure)?;
        // Listening from now on, so that a Ctrl-C between two changes is seen.
        let interrupted = tokio::signal::ctrl_c();
        tokio::pin!(interrupted);
        eprintln!(
            "jrpc: watching {} (MCP {}); Ctrl-C to stop",
            if words.is_empty() {
                "tools, prompts, resources".to_owned()
            } else {
                words.join(", ")
            },
            client.protocol_version()
        );
        let ended = loop {
            tokio::select! {
                change = changes.next() => match change {
                    Some(Ok(change)) => {
                        if args.json {
                            let line = serde_json::json!({"method": change.method, "params": change.params});
                            println!("{line}");
                        } else {
                            let what = change.method.strip_prefix("notifications/").unwrap_or(&change.method);
                            match change.uri() {
                                Some(uri) => println!("{what} {uri}"),
                                None => println!("{what}"),
                            }
                        }
                        let _ = std::io::stdout().flush();
                    }
                    Some(Err(e)) => break Err(failure(e)),
                    None => break Ok(()),
                },
                _ = &mut interrupted => break Ok(()),
            }
        };
        drop(changes);
        client.close().await;
        ended.map(|()| ExitCode::SUCCESS)
    }

    pub(super) async fn read(args: ReadArgs) -> ExitCode {
        finish(read_inner(args).await)
    }

    async fn read_inner(args: ReadArgs) -> Result<ExitCode, Failure> {
        let (url, words) = target(args.words, &args.client)?;
        let [uri] = words.as_slice() else {
            return Err(usage("read what? jrpc mcp read [TARGET] URI"));
        };
        let client = connect(url, &args.client).await?;
        let read = client.read_resource(uri).await.map_err(failure)?;
        for contents in &read.contents {
            match contents {
                ResourceContents::Text(t) => println!("{}", t.text),
                ResourceContents::Blob(b) => println!("{}", b.blob),
            }
        }
        client.close().await;
        Ok(ExitCode::SUCCESS)
    }

    pub(super) async fn prompt(args: PromptArgs) -> ExitCode {
        finish(prompt_inner(args).await)
    }

    async fn prompt_inner(args: PromptArgs) -> Result<ExitCode, Failure> {
        let (url, words) = target(args.words, &args.client)?;
        let Some((name, rest)) = words.split_first() else {
            return Err(usage("which prompt? jrpc mcp prompt [TARGET] NAME [K=V]..."));
        };
        let arguments: BTreeMap<String, String> = key_values(rest, false)?
            .into_iter()
            .map(|(k, v)| (k, v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string())))
            .collect();
        let client = connect(url, &args.client).await?;
        let prompt = client.get_prompt(name, arguments).await.map_err(failure)?;
        for message in &prompt.messages {
            let role = serde_json::to_value(message.role)
                .ok()
                .and_then(|r| r.as_str().map(str::to_owned))
                .unwrap_or_default();
            println!("{role}: {}", content_text(&message.content));
        }
        client.close().await;
        Ok(ExitCode::SUCCESS)
    }
}
