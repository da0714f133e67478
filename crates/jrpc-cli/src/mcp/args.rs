//! The command line of `jrpc mcp`: its commands and their flags.

use clap::{Args, Subcommand};

/// `jrpc mcp ...`.
#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(subcommand)]
    pub(super) command: McpCommand,
}

#[derive(Debug, Subcommand)]
pub(super) enum McpCommand {
    /// Serve the demo MCP server (revisions 2026-07-28 and 2025-11-25 on one
    /// endpoint): tools add, echo, sleep, sample, elicit, list_roots, fail
    /// and bump; resources demo://greeting, demo://counter and
    /// demo://echo/{text}; prompt greet; logging.
    Serve(ServeArgs),
    /// List a server's tools, resources (and templates) and prompts.
    List(ListArgs),
    /// Call a tool and print its text (exit 1 when it fails).
    Call(CallToolArgs),
    /// Send any request by its method (ping, completion/complete,
    /// logging/setLevel, an extension's) and print its result as JSON.
    Request(RequestArgs),
    /// Read a resource and print its contents.
    Read(ReadArgs),
    /// List a server's skills (the Skills extension), or get one:
    /// `jrpc mcp skills [TARGET]`, `jrpc mcp skills [TARGET] get NAME|URI`
    /// (prints its SKILL.md) `[--save DIR]` (writes every file to
    /// DIR/NAME/). Every file is checked against the skill's manifest
    /// (size, SHA-256) and the SKILL.md frontmatter against the listing;
    /// nothing is fetched before it is asked for.
    Skills(SkillsArgs),
    /// Get a prompt and print its messages.
    Prompt(PromptArgs),
    /// Load a server with calls of one tool and measure it, as `jrpc bench`
    /// does a JSON-RPC method: calls/s, latency percentiles, errors, and
    /// how many calls were sent again after a lost connection (calls safe
    /// to repeat only). Each of -c clients makes one call at a time.
    Bench(McpBenchArgs),
    /// Read, wait for or cancel a task (the tasks extension of 2026-07-28)
    /// by its id: `jrpc mcp task get|wait|cancel [TARGET] ID`.
    Task(TaskArgs),
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
pub(super) struct LoginArgs {
    /// The MCP endpoint, http(s)://…/mcp.
    #[arg(value_name = "URL")]
    pub(super) url: String,

    /// The scopes to ask for (space-separated, or the flag repeated),
    /// besides those asked before of this server; by default what the
    /// server advertises. A server that refuses a call for a missing scope
    /// (with --no-input) names the one to log in for.
    #[arg(long, value_name = "SCOPE")]
    pub(super) scope: Vec<String>,

    #[command(flatten)]
    pub(super) oauth: OAuthArgs,
}

/// `jrpc mcp logout URL`.
#[derive(Debug, Args)]
pub(super) struct LogoutArgs {
    /// The MCP endpoint, http(s)://…/mcp.
    #[arg(value_name = "URL")]
    pub(super) url: String,
}

/// Who jrpc is at the authorization server, when it was registered there
/// beforehand (else it uses dynamic registration).
#[derive(Debug, Clone, Default, Args)]
pub(super) struct OAuthArgs {
    /// A client id registered with the server's authorization server.
    #[arg(long, value_name = "ID")]
    pub(super) oauth_client_id: Option<String>,

    /// The secret of that client (a confidential client); from the
    /// environment, it stays out of `ps` and the shell's history.
    #[arg(
        long,
        value_name = "SECRET",
        requires = "oauth_client_id",
        env = "JRPC_OAUTH_CLIENT_SECRET",
        hide_env_values = true
    )]
    pub(super) oauth_client_secret: Option<String>,

    /// Workload identity: for a program with no user (a service, a CI job)
    /// whose platform hands it a signed identity token, at SOURCE (a file,
    /// read at each use since platforms rotate them, or env:NAME). The token
    /// is traded by the JWT-bearer grant (RFC 7523) as --oauth-client-id;
    /// no browser, no secret. For a user instead, log in (jrpc mcp login),
    /// or use --oauth-idp when the enterprise's identity provider signs
    /// users in.
    #[arg(
        long,
        value_name = "SOURCE",
        requires = "oauth_client_id",
        conflicts_with = "oauth_idp"
    )]
    pub(super) oauth_workload_token: Option<String>,

    /// Enterprise-managed authorization: the user signed in to the
    /// enterprise's identity provider, whose token endpoint is URL; their
    /// ID token (--oauth-id-token) is traded there for an identity
    /// assertion grant for the MCP server's authorization server, then that
    /// for an access token as --oauth-client-id (with its secret). No
    /// browser: the enterprise's policy decides.
    #[arg(long, value_name = "URL", requires_all = ["oauth_client_id", "oauth_id_token"])]
    pub(super) oauth_idp: Option<String>,

    /// With --oauth-idp: where the user's ID token is (a file, or env:NAME).
    #[arg(long, value_name = "SOURCE", requires = "oauth_idp")]
    pub(super) oauth_id_token: Option<String>,

    /// With --oauth-idp: the client id this client has at the identity
    /// provider.
    #[arg(long, value_name = "ID", requires = "oauth_idp")]
    pub(super) oauth_idp_client_id: Option<String>,
}

/// Which server: an `http(s)://…/mcp` URL (or `tcp://`, `unix:`, `ws://`)
/// first, or a command after `--`.
#[derive(Debug, Args)]
pub(super) struct Client {
    /// How long each request may take: 500ms, 10s, 2m, 1h.
    #[arg(long, default_value = "60s", value_parser = crate::call::parse_duration)]
    pub(super) timeout: std::time::Duration,

    /// A header for an http(s):// server, 'Name: value'. Repeatable.
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    pub(super) headers: Vec<String>,

    /// Send 'Authorization: Bearer TOKEN' to an http(s):// server.
    #[arg(long, value_name = "TOKEN")]
    pub(super) bearer: Option<String>,

    /// Show the wire on stderr: every frame sent and received (and HTTP
    /// heads), as `jrpc call -v` does, and the protocol revision spoken.
    #[arg(short = 'v', long)]
    pub(super) verbose: bool,

    /// The protocol revision to speak: 2026-07-28, 2025-11-25, ...,
    /// `legacy` (the initialize handshake), or `auto` (the default: found
    /// out from the server).
    #[arg(long, value_name = "VERSION|legacy", value_parser = parse_protocol)]
    pub(super) protocol_version: Option<jrpc_mcp::client::ProtocolChoice>,

    /// When the server asks for input (an elicitation), decline instead of
    /// asking on the terminal; when it asks for a login (OAuth), fail
    /// (exit 3) instead of starting one: run `jrpc mcp login URL` first.
    #[arg(long)]
    pub(super) no_input: bool,

    #[command(flatten)]
    pub(super) oauth: OAuthArgs,

    /// Directories to offer the server as roots (its `roots/list`; the
    /// demo's `list_roots` tool prints them). Give them after the other
    /// words: --roots DIR DIR...
    #[arg(long = "roots", value_name = "DIR", num_args = 1..)]
    pub(super) roots: Vec<std::path::PathBuf>,

    /// When the server asks for a sampling (an LLM completion), run CMD (with
    /// `sh -c`): the request's params as JSON on its stdin; what it prints
    /// is the model's answer; a non-zero exit declines. Without it, a
    /// sampling request is declined.
    #[arg(long, value_name = "CMD")]
    pub(super) sampling_command: Option<String>,

    /// A server to spawn and talk to over its stdin/stdout.
    #[arg(last = true, value_name = "COMMAND")]
    pub(super) command: Vec<String>,

    /// Whether requests declare the tasks extension (`call --task`,
    /// `task`).
    #[arg(skip)]
    pub(super) tasks: bool,
}

fn parse_protocol(text: &str) -> Result<jrpc_mcp::client::ProtocolChoice, String> {
    text.parse()
}

#[derive(Debug, Args)]
pub(super) struct ListArgs {
    /// [TARGET] and what to list: tools, resources or prompts (all three
    /// when omitted).
    #[arg(value_name = "[TARGET] [tools|resources|prompts]")]
    pub(super) words: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    pub(super) json: bool,
    #[command(flatten)]
    pub(super) client: Client,
}

#[derive(Debug, Args)]
pub(super) struct CallToolArgs {
    /// [TARGET] TOOL and its arguments as k=v (v is JSON when it parses,
    /// else a string).
    #[arg(value_name = "[TARGET] TOOL [K=V]", allow_negative_numbers = true)]
    pub(super) words: Vec<String>,
    /// The whole arguments object as JSON; with it, print the structured
    /// result (or the whole result) as JSON.
    #[arg(long, value_name = "ARGS", num_args = 0..=1, default_missing_value = "")]
    pub(super) json: Option<String>,
    /// Let the tool run as a task (a 2026-07-28 server with the tasks
    /// extension): its id goes to stderr as soon as it starts, then jrpc
    /// waits for its end (polling; answering its questions as a call
    /// does) and prints its result. Ctrl-C leaves the task running: `jrpc
    /// mcp task get|wait|cancel TARGET ID` finds it again.
    #[arg(long)]
    pub(super) task: bool,
    /// With --task: print the task's id on stdout and return at once.
    #[arg(long, requires = "task")]
    pub(super) detach: bool,
    #[command(flatten)]
    pub(super) client: Client,
}

/// `jrpc mcp bench [TARGET] TOOL [K=V...]`.
#[derive(Debug, Args)]
#[command(after_long_help = "\
EXAMPLES:
  jrpc mcp bench http://127.0.0.1:8000/mcp add a=2 b=40 -c 16 -d 10s
  jrpc mcp bench http://lb:8000/mcp add a=1 b=2 -c 32 -d 20s --mark 5s,10s --report fleet.html
  jrpc mcp bench echo text=hi -n 1000 -- jrpc mcp serve --stdio

Calls safe to repeat (tools annotated readOnlyHint or idempotentHint) lost
with their connection, or refused by a proxy (502, 503, 504), are sent again
within --timeout; \"retried\" counts them. A call that is not safe to
repeat is never sent twice: it counts as an error.")]
pub(super) struct McpBenchArgs {
    /// [TARGET] TOOL and its arguments as k=v (read by the tool's input
    /// schema, as `jrpc mcp call` reads them).
    #[arg(value_name = "[TARGET] TOOL [K=V]", allow_negative_numbers = true)]
    pub(super) words: Vec<String>,
    /// Clients, each making one call at a time.
    #[arg(long, short = 'c', default_value_t = 1, value_name = "N")]
    pub(super) connections: usize,
    /// How long to run (the run also stops at --requests).
    #[arg(long, short = 'd', default_value = "10s", value_parser = crate::call::parse_duration)]
    pub(super) duration: std::time::Duration,
    /// Stop after this many calls.
    #[arg(long, short = 'n', value_name = "N")]
    pub(super) requests: Option<u64>,
    /// Open loop: this many calls per second in all, on a schedule.
    #[arg(long, value_name = "R")]
    pub(super) rate: Option<f64>,
    /// Split the results at these times since the start (when a fault is
    /// injected, say).
    #[arg(long, value_name = "T[,T...]", value_delimiter = ',', value_parser = crate::call::parse_duration)]
    pub(super) mark: Vec<std::time::Duration>,
    /// Print the results as JSON (as `jrpc bench --json`).
    #[arg(long)]
    pub(super) json: bool,
    /// Also write the results as one HTML page (as `jrpc bench --report`;
    /// `jrpc bench --compare` reads it).
    #[arg(long, value_name = "FILE.html")]
    pub(super) report: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub(super) client: Client,
}

/// `jrpc mcp task ...`.
#[derive(Debug, Args)]
pub(super) struct TaskArgs {
    #[command(subcommand)]
    pub(super) action: TaskAction,
}

#[derive(Debug, Subcommand)]
pub(super) enum TaskAction {
    /// Print the task as the server shows it now (JSON): status, the
    /// questions it waits for, its result or error.
    Get(TaskIdArgs),
    /// Wait for the task's end, answering its questions, and print its
    /// result (exit 1 when it failed or was cancelled).
    Wait(TaskIdArgs),
    /// Cancel the task, on whichever replica runs it.
    Cancel(TaskIdArgs),
}

#[derive(Debug, Args)]
pub(super) struct TaskIdArgs {
    /// [TARGET] and the task's id.
    #[arg(value_name = "[TARGET] ID")]
    pub(super) words: Vec<String>,
    #[command(flatten)]
    pub(super) client: Client,
}

#[derive(Debug, Args)]
pub(super) struct RequestArgs {
    /// [TARGET] METHOD and its params: one JSON object, or k=v words (v is
    /// JSON when it parses, else a string).
    #[arg(value_name = "[TARGET] METHOD [PARAMS|K=V...]", allow_negative_numbers = true)]
    pub(super) words: Vec<String>,
    #[command(flatten)]
    pub(super) client: Client,
}

#[derive(Debug, Args)]
pub(super) struct WatchArgs {
    /// [TARGET] and what to watch: tools, prompts, resources (their lists)
    /// and resource URIs (their updates); all three lists when omitted.
    #[arg(value_name = "[TARGET] [tools|prompts|resources|URI...]")]
    pub(super) words: Vec<String>,
    /// Print each notification as a line of JSON.
    #[arg(long)]
    pub(super) json: bool,
    #[command(flatten)]
    pub(super) client: Client,
}

#[derive(Debug, Args)]
pub(super) struct ReadArgs {
    /// [TARGET] URI.
    #[arg(value_name = "[TARGET] URI")]
    pub(super) words: Vec<String>,
    #[command(flatten)]
    pub(super) client: Client,
}

#[derive(Debug, Args)]
pub(super) struct SkillsArgs {
    /// [TARGET] [get NAME|URI].
    #[arg(value_name = "[TARGET] [get NAME|URI]")]
    pub(super) words: Vec<String>,
    /// With get: write the skill's files to DIR/NAME/ (made if missing)
    /// instead of printing its SKILL.md.
    #[arg(long, value_name = "DIR")]
    pub(super) save: Option<std::path::PathBuf>,
    /// The listing (or the entry) as JSON.
    #[arg(long)]
    pub(super) json: bool,
    #[command(flatten)]
    pub(super) client: Client,
}

#[derive(Debug, Args)]
pub(super) struct PromptArgs {
    /// [TARGET] NAME and its arguments as k=v (values are strings).
    #[arg(value_name = "[TARGET] NAME [K=V]")]
    pub(super) words: Vec<String>,
    #[command(flatten)]
    pub(super) client: Client,
}

#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub(super) struct Transport {
    /// Serve one session over stdin/stdout (newline-delimited JSON-RPC;
    /// logs go to stderr). Ends when stdin closes.
    #[arg(long)]
    pub(super) stdio: bool,

    /// Serve Streamable HTTP at http://ADDR/mcp (e.g. 127.0.0.1:8000; port
    /// 0 picks a free port), or on a Unix socket with unix:PATH (clients:
    /// http+unix://%2FPATH/mcp), until SIGTERM or Ctrl-C.
    #[arg(long, value_name = "ADDR", value_parser = crate::serve::parse_http_listen)]
    pub(super) http: Option<String>,

    /// Serve sessions over TCP at ADDR, one per connection, newline-delimited
    /// JSON-RPC (clients: `jrpc mcp list tcp://ADDR`), until SIGTERM or Ctrl-C.
    #[arg(long, value_name = "ADDR", value_parser = crate::serve::parse_listen_addr)]
    pub(super) tcp: Option<String>,

    /// Serve sessions over a Unix socket at PATH, one per connection.
    #[arg(long, value_name = "PATH")]
    pub(super) unix: Option<String>,

    /// Serve sessions over WebSocket at ws://ADDR (any path), one per
    /// connection, one JSON-RPC message per WebSocket message.
    #[arg(long, value_name = "ADDR", value_parser = crate::serve::parse_listen_addr)]
    pub(super) ws: Option<String>,
}

#[derive(Debug, Args)]
pub(super) struct ServeArgs {
    #[command(flatten)]
    pub(super) transport: Transport,

    /// The permission bits of the socket file of --http unix:PATH and
    /// --unix, in octal: 600 (the default) lets only this user connect.
    #[arg(long, value_name = "MODE", value_parser = crate::serve::parse_mode, default_value = "600")]
    pub(super) socket_mode: u32,

    /// Serve the skills in DIR (the Skills extension): every folder below it
    /// with a SKILL.md is a skill, at skill://PATH/SKILL.md (the folder's
    /// name is the skill's name); DIR is looked at every second, and a
    /// skill changed on disk is served changed.
    #[arg(long, value_name = "DIR")]
    pub(super) skills: Option<std::path::PathBuf>,

    /// Also serve the fixture tools, resources and prompts the official MCP
    /// conformance suite (npm @modelcontextprotocol/conformance) calls in its
    /// server scenarios.
    #[arg(long)]
    pub(super) conformance: bool,

    /// With --http: a host name the Host header may name besides localhost,
    /// 127.0.0.1, [::1] and the address served (DNS-rebinding protection
    /// refuses others with 421). Repeatable.
    #[arg(long, value_name = "HOST")]
    pub(super) allow_host: Vec<String>,

    /// With --http: an origin (scheme://host[:port]) whose pages may call
    /// besides those on an allowed host (others get 403). Repeatable.
    #[arg(long, value_name = "ORIGIN")]
    pub(super) allow_origin: Vec<String>,

    /// With --http: answer tools/call, resources/read and prompts/get with
    /// a JSON body instead of an SSE stream, unless the handler sends
    /// progress, a log line or a request before its reply.
    #[arg(long)]
    pub(super) json_response: bool,

    /// Share state with the other replicas of this server through NATS
    /// JetStream at URL (nats://HOST:PORT, or a cluster's seeds
    /// comma-separated: nats://A:4222,B:4222): tasks (made through one
    /// replica, read, answered and cancelled through any), change
    /// notifications (a bump through one reaches listeners on all), the
    /// requestState key and the demo's counter. When no seed answers at
    /// start: exit 3; later losses are reconnected. Behind a load balancer,
    /// with --http.
    #[arg(long, value_name = "URL")]
    pub(super) shared_state: Option<String>,

    /// With --shared-state: how long a task outlives the last sign of life
    /// of the replica running it before another replica reports it failed
    /// (renewed every third of it): 15s by default.
    #[arg(long, value_name = "DURATION", value_parser = crate::call::parse_duration, requires = "shared_state")]
    pub(super) task_lease: Option<std::time::Duration>,

    /// With --http: require OAuth access tokens (JWTs) issued by the
    /// authorization server at URL. The protected resource metadata at
    /// /.well-known/oauth-protected-resource/mcp names it; a token must
    /// name the endpoint (http://ADDR/mcp, or --oauth-resource) as its
    /// audience. Only with --http (the other transports have no tokens).
    #[arg(long, value_name = "URL")]
    pub(super) oauth_issuer: Option<String>,

    /// The endpoint's canonical URL as clients reach it (behind a proxy):
    /// the metadata's resource and the audience tokens must name.
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    pub(super) oauth_resource: Option<String>,

    /// The audience tokens must name, when it is not the resource.
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    pub(super) oauth_audience: Option<String>,

    /// A scope every request's token must grant. Repeatable.
    #[arg(long, value_name = "SCOPE", requires = "oauth_issuer")]
    pub(super) oauth_scope: Vec<String>,

    /// DPoP-bound tokens (RFC 9449): allow (beside bearer tokens) or
    /// require. A bound token comes as Authorization: DPoP TOKEN with a
    /// DPoP proof of its key (method, URL, time, token hash, a one-time
    /// id); sent as a bearer token it is refused. Needs --oauth-issuer.
    #[arg(long, value_name = "MODE", value_parser = crate::serve::parse_dpop_mode, requires = "oauth_issuer")]
    pub(super) oauth_dpop: Option<jrpc::auth::DpopMode>,

    /// With --oauth-dpop: require the server's nonce in every proof
    /// (answered 401 use_dpop_nonce with a DPoP-Nonce first).
    #[arg(long, requires = "oauth_dpop")]
    pub(super) oauth_dpop_nonce: bool,

    /// A scope a tool's calls need besides those of --oauth-scope
    /// (TOOL=SCOPE); a token without it gets 403 insufficient_scope.
    /// Repeatable.
    #[arg(long, value_name = "TOOL=SCOPE", requires = "oauth_issuer")]
    pub(super) oauth_tool_scope: Vec<String>,
}

impl McpArgs {
    /// Whether to show the wire (`-v` on a client command).
    pub fn verbose(&self) -> bool {
        let client = match &self.command {
            McpCommand::Serve(_) | McpCommand::Login(_) | McpCommand::Logout(_) => return false,
            McpCommand::List(a) => &a.client,
            McpCommand::Call(a) => &a.client,
            McpCommand::Request(a) => &a.client,
            McpCommand::Read(a) => &a.client,
            McpCommand::Skills(a) => &a.client,
            McpCommand::Prompt(a) => &a.client,
            McpCommand::Watch(a) => &a.client,
            McpCommand::Bench(a) => &a.client,
            McpCommand::Task(a) => match &a.action {
                TaskAction::Get(a) | TaskAction::Wait(a) | TaskAction::Cancel(a) => &a.client,
            },
        };
        client.verbose
    }
}
