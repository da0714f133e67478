//! What the client commands share: connecting (a URL, a command, a login
//! when the server asks for one), failures as exit codes, and how values
//! print.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use jrpc_mcp::client::oauth::{
    EnterpriseIdp, FileStore, LoopbackAuthorizer, MemoryStore, OAuthClient, OAuthError, TokenSource,
};
use jrpc_mcp::client::{McpClient, McpClientError};
use jrpc_mcp::types::{ContentBlock, ResourceContents};

use super::args::{Client, OAuthArgs};
use crate::call::{report, Failure};

pub(super) fn finish(outcome: Result<ExitCode, Failure>) -> ExitCode {
    outcome.unwrap_or_else(report)
}

pub(super) fn failure(e: McpClientError) -> Failure {
    if let Some(oauth) = e.authorization() {
        return login_failure(oauth);
    }
    match e {
        McpClientError::Call(e) => Failure::from(e),
        McpClientError::ResourceNotFound { error, .. } => Failure::Rpc(error),
        // The task's own end (cancelled), as a failed call is: exit 1.
        ended @ McpClientError::TaskEnded { .. } => {
            eprintln!("jrpc: {ended}");
            Failure::ErrorShown
        }
        // Content that is not what the skill's entry promised: refused.
        refused @ McpClientError::Skill(_) => {
            eprintln!("jrpc: {refused}");
            Failure::ErrorShown
        }
        other => Failure::Transport(other.into()),
    }
}

/// A login that could not happen here says what to do instead.
pub(super) fn login_failure(e: &OAuthError) -> Failure {
    match e {
        OAuthError::LoginNeeded(url) => Failure::Transport(anyhow::anyhow!(
            "{url} asks you to log in (OAuth), and there is no one to ask here (--no-input, or stdin is not a terminal): run `jrpc mcp login {url}` first"
        )),
        OAuthError::ScopeNeeded { server, scope } => Failure::Transport(anyhow::anyhow!(
            "{server} needs scope {scope:?}, which your token lacks, and there is no one to ask here (--no-input, or stdin is not a terminal): run `jrpc mcp login {server} --scope '{scope}'` first"
        )),
        other => Failure::Transport(anyhow::anyhow!("authorization failed: {other}")),
    }
}

/// How jrpc logs in to servers that ask (OAuth): tokens kept in the
/// user's state folder; the browser step only when someone is there
/// to take it (`interactive`).
pub(super) fn oauth_client(args: &OAuthArgs, interactive: bool) -> OAuthClient {
    oauth_client_with(args, interactive, None)
}

/// [`oauth_client`] asking for `scope` (`jrpc mcp login --scope`).
pub(super) fn oauth_client_with(args: &OAuthArgs, interactive: bool, scope: Option<&str>) -> OAuthClient {
    let mut oauth = OAuthClient::builder().client_name("jrpc");
    if let Some(scope) = scope {
        oauth = oauth.scope(scope);
    }
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
    if let Some(source) = &args.oauth_workload_token {
        oauth = oauth.jwt_bearer(TokenSource::parse(source));
    }
    if let (Some(endpoint), Some(id_token)) = (&args.oauth_idp, &args.oauth_id_token) {
        let mut idp = EnterpriseIdp::new(endpoint, TokenSource::parse(id_token));
        if let Some(id) = &args.oauth_idp_client_id {
            idp = idp.client_id(id);
        }
        oauth = oauth.enterprise(idp);
    }
    if interactive {
        oauth = oauth.authorizer(LoopbackAuthorizer::new().on_url(show_login_url));
    }
    oauth.build()
}

/// Shows the URL to open, and opens it with `$BROWSER` when set.
pub(super) fn show_login_url(url: &str) {
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

pub(super) fn usage(text: impl Into<String>) -> Failure {
    Failure::Usage(anyhow::anyhow!(text.into()))
}

/// Splits off the TARGET: there is none when a command follows `--`.
pub(super) fn target(words: Vec<String>, client: &Client) -> Result<(Option<String>, Vec<String>), Failure> {
    if !client.command.is_empty() {
        return Ok((None, words));
    }
    let mut words = words.into_iter();
    match words.next() {
        Some(url) if jrpc::transport::dial::Scheme::of(&url).is_some() => Ok((Some(url), words.collect())),
        // As for `jrpc call`, a bare HOST:PORT is an HTTP server: its MCP
        // endpoint is at /mcp unless a path is given.
        Some(authority) if crate::target::is_host_port(&authority) => {
            let url = match authority.contains('/') {
                true => format!("http://{authority}"),
                false => format!("http://{authority}/mcp"),
            };
            Ok((Some(url), words.collect()))
        }
        Some(other) => Err(usage(format!(
            "{other:?} is not a server: give an http(s)://…/mcp URL (or tcp://, unix:, ws://) first, or a command after --"
        ))),
        None => Err(usage(
            "no server: give an http(s)://…/mcp URL (or tcp://, unix:, ws://), or a command after --",
        )),
    }
}

/// Connects, showing the server's progress and logs on stderr.
pub(super) async fn connect(url: Option<String>, client: &Client) -> Result<McpClient, Failure> {
    connect_as(url, client, false).await
}

/// As [`connect`]; with `own_group`, a server started with `-- COMMAND`
/// runs in a process group of its own, so that Ctrl-C at a terminal
/// reaches only jrpc, which then stops the server itself (for `watch`,
/// where Ctrl-C is how one ends and must not look like the server
/// failing).
pub(super) async fn connect_as(
    url: Option<String>,
    client: &Client,
    own_group: bool,
) -> Result<McpClient, Failure> {
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
        .tasks(client.tasks)
        .elicitation(move |params| async move {
            if no_input {
                eprintln!(
                    "jrpc: the server asks for input ({}); declined (--no-input)",
                    params.message
                );
                return Ok(super::input::declined());
            }
            Ok(tokio::task::spawn_blocking(move || super::input::ask(&params))
                .await
                .unwrap_or_else(|_| super::input::declined()))
        })
        .sampling({
            let command = client.sampling_command.clone();
            move |params| sample(command.clone(), params)
        });
    if !client.roots.is_empty() {
        builder = builder.roots(roots(&client.roots)?);
    }
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
pub(super) fn not_mcp_here(e: McpClientError, url: &str) -> Failure {
    let http_status = match &e {
        McpClientError::Call(call) => call
            .transport_error::<jrpc::client::HttpError>()
            .map(|http| http.status),
        _ => None,
    };
    let not_found = e.rpc().is_some_and(|rpc| rpc.code() == -32601) || matches!(http_status, Some(404 | 405));
    if !not_found {
        return failure(e);
    }
    let trimmed = url.trim_end_matches('/');
    // Only HTTP serves MCP at a path of its own; a WebSocket (or TCP)
    // server is the same server on every path.
    let http = jrpc::transport::dial::Scheme::of(trimmed) == Some(jrpc::transport::dial::Scheme::Http);
    let hint = if !http || trimmed.ends_with("/mcp") {
        String::new()
    } else {
        format!(
            "; MCP servers serve Streamable HTTP at a path of their own, most often /mcp: try {trimmed}/mcp"
        )
    };
    let answer = match (e.rpc(), http_status) {
        (Some(rpc), _) => format!("it does not know MCP's initialize ({rpc})"),
        (None, Some(status)) => format!("it answered HTTP {status}"),
        (None, None) => e.to_string(),
    };
    Failure::Transport(anyhow::anyhow!("not an MCP endpoint: {answer}{hint}"))
}

pub(super) fn end_bar() {
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[K");
    }
}

pub(super) fn content_text(block: &ContentBlock) -> String {
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
pub(super) fn key_values(
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

/// A name the server does not have (a tool, a prompt, a resource): one
/// sentence of the same shape for each, listing what it has; exit 1, as
/// for the error it answered.
pub(super) fn unknown(kind: &str, name: &str, known: &[String]) -> Failure {
    let known = if known.is_empty() {
        "none".to_owned()
    } else {
        known.join(", ")
    };
    eprintln!("jrpc: the server has no {kind} {name:?}; it has: {known}");
    Failure::ErrorShown
}

/// The roots `--roots` names: each directory as a `file://` URI (absolute,
/// its bytes percent-encoded where a URI needs it), named by its last part.
fn roots(dirs: &[std::path::PathBuf]) -> Result<Vec<jrpc_mcp::types::Root>, Failure> {
    use std::os::unix::ffi::OsStrExt as _;
    dirs.iter()
        .map(|dir| {
            let path =
                std::fs::canonicalize(dir).map_err(|e| usage(format!("--roots {}: {e}", dir.display())))?;
            let mut uri = String::from("file://");
            for &byte in path.as_os_str().as_bytes() {
                match byte {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                        uri.push(byte as char)
                    }
                    _ => uri.push_str(&format!("%{byte:02X}")),
                }
            }
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            Ok(jrpc_mcp::types::Root {
                uri,
                name,
                meta: None,
            })
        })
        .collect()
}

/// Answers the server's sampling request: through `--sampling-command`
/// when given (the params as JSON on its stdin, its output the answer, a
/// non-zero exit a refusal), else declined with a sentence that says how.
async fn sample(
    command: Option<String>,
    params: jrpc_mcp::types::CreateMessageParams,
) -> Result<jrpc_mcp::types::CreateMessageResult, jrpc::Error> {
    use jrpc_mcp::types::{CreateMessageResult, OneOrMany, Role, SamplingContent};
    use tokio::io::AsyncWriteExt as _;
    let declined = |why: String| {
        eprintln!("jrpc: the server asks for a sampling (an LLM completion); declined: {why}");
        jrpc::Error::new(-1, "Sampling declined").with_data(why.as_str())
    };
    let Some(command) = command else {
        return Err(declined(
            "jrpc mcp has no model (--sampling-command CMD hands the request to a program)".into(),
        ));
    };
    let request = serde_json::to_vec(&params).map_err(|e| declined(e.to_string()))?;
    let mut child = tokio::process::Command::new("sh")
        .args(["-c", &command])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| declined(format!("--sampling-command {command:?}: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A program that does not read its input is its own business.
        let _ = stdin.write_all(&request).await;
    }
    let output = child
        .wait_with_output()
        .await
        .map_err(|e| declined(format!("--sampling-command {command:?}: {e}")))?;
    if !output.status.success() {
        return Err(declined(format!(
            "--sampling-command {command:?} exited with {}",
            output.status
        )));
    }
    let text = String::from_utf8_lossy(&output.stdout).trim_end().to_owned();
    Ok(CreateMessageResult {
        role: Role::Assistant,
        content: OneOrMany::One(SamplingContent::text(text)),
        // Not the command line: it may hold a secret (KEY=... llm).
        model: "jrpc-sampling-command".to_owned(),
        stop_reason: Some("endTurn".to_owned()),
        meta: None,
    })
}
