//! `jrpc mcp serve`: the demo MCP server over stdio, HTTP, TCP, a Unix
//! socket or WebSocket.

use anyhow::Context as _;
use jrpc::codec::Framing;

use super::args::ServeArgs;

/// The demo with state shared through NATS JetStream at `url`, as the fleet
/// `jrpc-demo` (every replica of the demo shares it).
#[cfg(feature = "nats")]
async fn shared_state(
    url: &str,
    builder: jrpc_mcp::server::McpServerBuilder,
) -> anyhow::Result<jrpc_mcp::McpServer> {
    let url = url.trim();
    if !url.starts_with("nats://") {
        anyhow::bail!("expected nats://HOST:PORT[,HOST:PORT...]");
    }
    let state = jrpc_mcp::server::NatsState::connect(url, "jrpc-demo").await?;
    tracing::info!(%url, "sharing state through NATS JetStream");
    Ok(builder.shared_state(state).build())
}

#[cfg(not(feature = "nats"))]
async fn shared_state(
    _url: &str,
    _builder: jrpc_mcp::server::McpServerBuilder,
) -> anyhow::Result<jrpc_mcp::McpServer> {
    anyhow::bail!("this jrpc was built without the nats feature")
}

/// Serves until stdin ends (`--stdio`) or until SIGTERM or Ctrl-C.
pub(super) async fn serve(serve: ServeArgs) -> anyhow::Result<std::process::ExitCode> {
    if serve.oauth_issuer.is_some() && serve.transport.http.is_none() {
        // Said, not ignored: a server believed to be protected would not be.
        eprintln!("jrpc: --oauth-issuer (and every --oauth-* flag) needs --http: the other transports carry no tokens");
        return Ok(std::process::ExitCode::from(2));
    }
    let mut builder = if serve.conformance {
        jrpc_mcp::demo::conformance_builder()
    } else {
        jrpc_mcp::demo::builder()
    };
    if let Some(dir) = &serve.skills {
        if !dir.is_dir() {
            eprintln!("jrpc: --skills {}: not a folder", dir.display());
            return Ok(std::process::ExitCode::from(2));
        }
        // A skill that breaks the rules is named in a warning, the others
        // served.
        builder = builder.skills_dir(dir);
    }
    if let Some(lease) = serve.task_lease {
        let mut settings = jrpc_mcp::server::TaskSettings::default();
        settings.lease = lease.max(std::time::Duration::from_millis(300));
        builder = builder.tasks(settings);
    }
    let server = match &serve.shared_state {
        None => builder.build(),
        Some(url) => match shared_state(url, builder).await {
            Ok(server) => server,
            Err(e) => {
                eprintln!("jrpc: --shared-state {url}: {e:#}");
                return Ok(std::process::ExitCode::from(3));
            }
        },
    };
    let conformance = serve.conformance;
    let listening = |serving: &jrpc::server::Serving| {
        note!("jrpc: MCP at {}", serving.local_addr());
        suggest(serving.local_addr(), conformance, None);
    };
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
                .with_context(|| format!("listening on --unix {path}"))?
                .mode(serve.socket_mode)
                .with_context(|| format!("--socket-mode {:o} on {path}", serve.socket_mode))?;
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
                if addr.starts_with("unix:") && serve.oauth_resource.is_none() {
                    anyhow::bail!(
                        "--oauth-issuer over a Unix socket needs --oauth-resource URL: the endpoint's URL as clients name it, which tokens must name as their audience"
                    );
                }
                options = options.oauth(oauth_settings(issuer, &serve, server.shared_state())?);
            }
            let serving = match addr.strip_prefix("unix:") {
                #[cfg(unix)]
                Some(path) => server.serve_http_on(
                    crate::serve::bind_http_socket(path, serve.socket_mode).await?,
                    options,
                ),
                #[cfg(not(unix))]
                Some(_) => anyhow::bail!("--http {addr}: Unix sockets are not available on this platform"),
                None => server
                    .serve_http(addr.as_str(), options)
                    .await
                    .with_context(|| format!("listening on --http {addr}"))?,
            };
            let issuer = serve.oauth_issuer.clone();
            serve_until_stopped(serving, |serving| {
                let url = format!("{}/mcp", serving.local_addr());
                note!("jrpc: MCP (Streamable HTTP) at {url}");
                suggest(&url, conformance, issuer.as_deref());
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

/// The OAuth settings of `jrpc mcp serve --http … --oauth-issuer URL`.
fn oauth_settings(
    issuer: &str,
    serve: &ServeArgs,
    shared: &std::sync::Arc<dyn jrpc_mcp::server::SharedState>,
) -> anyhow::Result<jrpc_mcp::http::OAuth> {
    crate::serve::check_issuer_url(issuer)?;
    let mut oauth = jrpc_mcp::http::OAuth::issuer(issuer).require_scopes(serve.oauth_scope.iter().cloned());
    if let Some(resource) = &serve.oauth_resource {
        oauth = oauth.resource(resource);
    }
    if let Some(audience) = &serve.oauth_audience {
        oauth = oauth.audience(audience);
    }
    if let Some(mode) = serve.oauth_dpop {
        // Replicas sharing state agree on the nonce key (derived from the
        // requestState one) and on the proofs used; a lone server keeps its
        // own.
        let secret = shared
            .request_state_secret()
            .unwrap_or_else(crate::serve::random_key);
        let mut dpop = crate::serve::dpop_settings(mode, serve.oauth_dpop_nonce, secret);
        if shared.is_shared() {
            dpop = dpop.replay_cache(jrpc_mcp::server::shared::SharedReplayCache::new(
                std::sync::Arc::clone(shared),
            ));
        }
        oauth = oauth.dpop(dpop);
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

/// Ready-to-paste commands for the server at `target`, as `jrpc serve`
/// prints them; and, when tokens are required, where they come from.
fn suggest(target: &str, conformance: bool, oauth_issuer: Option<&str>) {
    let program = crate::invoked::program();
    if let Some(issuer) = oauth_issuer {
        note!("jrpc: OAuth required: access tokens from {issuer}; log in with:");
        note!("  {program} mcp login {target}");
    }
    note!("jrpc: try it:");
    note!("  {program} mcp list {target}");
    if !conformance {
        note!("  {program} mcp call {target} add a=2 b=40");
    }
}
