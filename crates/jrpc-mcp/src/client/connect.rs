//! Connecting: spawning a server, dialing one, or a Streamable HTTP URL;
//! then finding the server's era (the `server/discover` probe) and, for a
//! legacy server, the `initialize` handshake.

#[cfg(feature = "http-client")]
use std::sync::Arc;

use jrpc::client::Client;
use jrpc::transport::Connection;
use jrpc::CallError;

use super::era::{self, ProbeError, ServerFacts};
use super::wire::{self, Wire};
use super::{callbacks, Closing, McpClient, McpClientBuilder, McpClientError};
#[cfg(feature = "http-client")]
use super::{http, modern_http};
use crate::types::{
    DiscoverResult, InitializeResult, LoggingLevel, RequestEnvelope, LEGACY_PROTOCOL_VERSIONS,
    MODERN_PROTOCOL_VERSIONS,
};

impl McpClientBuilder {
    /// Spawns `command` as an MCP server over stdio and starts speaking to
    /// it (probe, then handshake if it is a legacy server).
    pub async fn spawn(
        self,
        command: impl Into<tokio::process::Command>,
    ) -> Result<McpClient, McpClientError> {
        let client = self.jrpc_client().spawn(command)?;
        self.start(client).await
    }

    /// Connects to a Streamable HTTP endpoint (`http(s)://…/mcp`). A
    /// modern server is spoken to one POST per request; a legacy one
    /// through a session: every message is POSTed, replies come as JSON or
    /// as SSE streams, the server's own messages on the standalone GET
    /// stream, and closing the client ends the session (`DELETE`).
    #[cfg(feature = "http-client")]
    pub async fn connect_http(self, url: &str) -> Result<McpClient, McpClientError> {
        let mut builder = Client::builder().call_timeout(self.timeout);
        for (name, value) in &self.headers {
            builder = builder.header(name, value);
        }
        let http = super::endpoint::Endpoint::new(builder.http(url)?);
        #[cfg(feature = "oauth")]
        let http = match &self.oauth {
            Some(client) => http.with_oauth(
                client
                    .session(url)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?,
            ),
            None => http,
        };
        if let Some(version) = self.protocol.modern() {
            let modern = modern_http::ModernHttp::new(http.clone(), self.notify(), self.timeout);
            let wire = Wire::Http(Arc::new(modern));
            match self.probe(&wire, version).await {
                Ok(facts) => return Ok(self.assemble(wire, facts, None)),
                Err(Probed::Failed(e)) => return Err(e),
                Err(Probed::Legacy(why)) => {
                    tracing::debug!(%why, "not a modern MCP server; initializing a session");
                }
            }
        }
        let (connection, session) = http::HttpSession::connect(http, self.timeout);
        let client = self
            .jrpc_client()
            .connect_with(Once(std::sync::Mutex::new(Some(connection))))
            .await?;
        let initialized = self.handshake(&client).await;
        #[cfg(feature = "oauth")]
        if let (Err(_), Some(failure)) = (&initialized, session.auth_failure()) {
            return Err(McpClientError::Authorization(failure));
        }
        let result = initialized?;
        session.set_version(&result.protocol_version);
        // Said, and taken, before the client is handed out: its requests go
        // from their callers' tasks (the peer keeps the rest of the
        // session) and must not overtake it.
        let ready = br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}"#;
        session.post_message(bytes::Bytes::from_static(ready)).await;
        let wire = Wire::Session(client, Arc::clone(&session));
        let mut mcp = self.assemble(wire, ServerFacts::legacy(result), None);
        // Open before the client is handed out, so that nothing the server
        // sends the session (a subscribed resource's update) is missed.
        Arc::clone(&session).start_listening().await;
        mcp.closing = Some(Box::new(move || Box::pin(async move { session.delete().await })));
        Ok(mcp)
    }

    /// Connects to the server `target` names: a Streamable HTTP endpoint
    /// (`http(s)://…/mcp`, see [`connect_http`](Self::connect_http)) or a
    /// connection of any scheme jrpc dials (`tcp://HOST:PORT`, `unix:PATH`,
    /// `ws(s)://…`; see [`jrpc::transport::dial`]), newline-delimited.
    pub async fn connect_url(self, target: &str) -> Result<McpClient, McpClientError> {
        use jrpc::transport::dial::{dialer, DialOptions, Scheme};
        if Scheme::of(target) == Some(Scheme::Http) {
            #[cfg(feature = "http-client")]
            return self.connect_http(target).await;
            #[cfg(not(feature = "http-client"))]
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{target}: Streamable HTTP needs jrpc-mcp's feature `http-client`"),
            )
            .into());
        }
        let connection = jrpc::transport::Dialer::dial(&dialer(target, &DialOptions::default())?).await?;
        self.connect(connection).await
    }

    /// Starts over a connection of your own (an in-memory pipe, a socket).
    pub async fn connect(self, connection: Connection) -> Result<McpClient, McpClientError> {
        let client = self
            .jrpc_client()
            .connect_with(Once(std::sync::Mutex::new(Some(connection))))
            .await?;
        self.start(client).await
    }

    /// Over a connection: probes for a modern server, else initializes.
    async fn start(self, client: Client) -> Result<McpClient, McpClientError> {
        if let Some(version) = self.protocol.modern() {
            // A clone: the same connection, kept for the handshake.
            let wire = Wire::Peer(client.clone());
            match self.probe(&wire, version).await {
                Ok(facts) => return Ok(self.assemble(wire, facts, None)),
                Err(Probed::Failed(e)) => {
                    wire.close().await;
                    return Err(e);
                }
                Err(Probed::Legacy(why)) => {
                    tracing::debug!(%why, "not a modern MCP server; initializing");
                }
            }
        }
        self.initialize(client).await
    }

    /// `server/discover` in `version` (and in the version a modern server
    /// names instead): the server's facts when it is modern.
    async fn probe(&self, wire: &Wire, version: &str) -> Result<ServerFacts, Probed> {
        let mut version = version.to_owned();
        let mut retried = false;
        loop {
            let params = serde_json::json!({ "_meta": self.envelope(&version, None) });
            let no_headers = wire::Headers::default();
            let sent = super::sent::Sent::from(&params);
            let asked = wire.call(&version, "server/discover", &sent, &no_headers);
            // Over a connection a legacy server may never answer a request
            // before `initialize`: the probe is bounded.
            let answer = match wire {
                Wire::Peer(_) => tokio::time::timeout(self.probe_timeout, asked)
                    .await
                    .unwrap_or(Err(CallError::Timeout(self.probe_timeout))),
                #[cfg(feature = "http-client")]
                Wire::Http(_) | Wire::Session(..) => asked.await,
            };
            let error = match answer {
                Ok(raw) => {
                    return match serde_json::from_str::<DiscoverResult>(raw.get()) {
                        Ok(result) => Ok(ServerFacts::modern(pick_version(&version, &result), result)),
                        Err(e) => Err(Probed::Legacy(format!("server/discover answered {e}"))),
                    };
                }
                Err(error) => error,
            };
            // Not authorized: asking the legacy way would only ask again.
            #[cfg(feature = "oauth")]
            if let Some(failure) = error.transport_error::<super::oauth::OAuthError>() {
                return Err(Probed::Failed(McpClientError::Authorization(failure.clone())));
            }
            #[cfg(feature = "http-client")]
            if error
                .transport_error::<modern_http::HttpStatusError>()
                .is_some_and(|refusal| matches!(refusal.status, 401 | 403 | 429 | 503))
            {
                return Err(Probed::Failed(error.into()));
            }
            match era::read_probe_error(&error, &version) {
                ProbeError::Retry(next) if !retried => {
                    retried = true;
                    version = next;
                }
                ProbeError::Legacy if self.protocol.legacy().is_some() => {
                    return Err(Probed::Legacy(error.to_string()))
                }
                ProbeError::Retry(_) | ProbeError::Modern | ProbeError::Legacy => {
                    return Err(Probed::Failed(match error.rpc() {
                        Some(e) if e.code() == crate::types::codes::UNSUPPORTED_PROTOCOL_VERSION => {
                            McpClientError::UnsupportedVersion(format!("{version} ({e})"))
                        }
                        _ => error.into(),
                    }))
                }
            }
        }
    }

    /// The `_meta` of a modern request in `version`.
    fn envelope(&self, version: &str, log_level: Option<LoggingLevel>) -> serde_json::Value {
        let mut envelope = RequestEnvelope::new(version, self.capabilities());
        envelope.client_info = Some(self.info.clone());
        envelope.log_level = log_level;
        serde_json::to_value(envelope).unwrap_or_default()
    }

    /// Where the notifications of a modern HTTP request's stream go: the
    /// same listeners the router serves over a connection.
    #[cfg(feature = "http-client")]
    fn notify(&self) -> modern_http::Notify {
        let (progress, log, other, results) = (
            self.on_progress.clone(),
            self.on_log.clone(),
            self.on_notification.clone(),
            Arc::clone(&self.results),
        );
        Arc::new(
            move |method: &str, params: Option<serde_json::Value>| match method {
                "notifications/progress" => {
                    if let (Some(listener), Some(params)) = (&progress, params) {
                        if let Ok(params) = serde_json::from_value(params) {
                            listener(params);
                        }
                    }
                }
                "notifications/message" => {
                    if let (Some(listener), Some(params)) = (&log, params) {
                        if let Ok(params) = serde_json::from_value(params) {
                            listener(params);
                        }
                    }
                }
                _ => {
                    results.changed(method);
                    if let Some(listener) = &other {
                        listener((method.to_owned(), params));
                    }
                }
            },
        )
    }

    async fn initialize(self, client: Client) -> Result<McpClient, McpClientError> {
        let result = self.handshake(&client).await?;
        client
            .notify("notifications/initialized", serde_json::json!({}))
            .await?;
        Ok(self.assemble(Wire::Peer(client), ServerFacts::legacy(result), None))
    }

    /// `initialize`, answered in a revision this client speaks (else the
    /// connection is closed).
    async fn handshake(&self, client: &Client) -> Result<InitializeResult, McpClientError> {
        let Some(version) = self.protocol.legacy() else {
            client.clone().close().await;
            return Err(McpClientError::UnsupportedVersion(format!(
                "{} (the server did not answer as a modern one)",
                self.protocol
            )));
        };
        let params = serde_json::json!({
            "protocolVersion": version,
            "capabilities": self.capabilities(),
            "clientInfo": self.info,
        });
        let result: InitializeResult = client.call("initialize", params).await?;
        if !LEGACY_PROTOCOL_VERSIONS.contains(&result.protocol_version.as_str()) {
            client.clone().close().await;
            return Err(McpClientError::UnsupportedVersion(result.protocol_version));
        }
        Ok(result)
    }

    fn assemble(self, wire: Wire, server: ServerFacts, closing: Option<Closing>) -> McpClient {
        let envelope = server.modern.then(|| self.envelope(&server.version, None));
        let envelope_text = envelope
            .as_ref()
            .and_then(|envelope| serde_json::value::to_raw_value(envelope).ok());
        McpClient {
            wire,
            envelope,
            envelope_text,
            log_level: std::sync::Mutex::new(None),
            answers: callbacks::Answers {
                sampling: self.sampling,
                elicitation: self.elicitation,
                roots: self.roots,
            },
            tool_headers: std::sync::Mutex::default(),
            max_rounds: self.max_rounds,
            results: self.results,
            listeners: self.listeners,
            server,
            progress: self.on_progress.is_some(),
            next_token: std::sync::atomic::AtomicI64::new(1),
            tasks: self.tasks,
            repeatable_tools: std::sync::Mutex::default(),
            repeats: std::sync::atomic::AtomicU64::new(0),
            timeout: self.timeout,
            closing,
        }
    }
}

/// The revision to speak to a modern server: the one asked in, when the
/// server lists it (or lists nothing), else its first one this client
/// speaks.
fn pick_version(asked: &str, result: &DiscoverResult) -> String {
    if result.supported_versions.is_empty() || result.supported_versions.iter().any(|v| v == asked) {
        return asked.to_owned();
    }
    result
        .supported_versions
        .iter()
        .find(|v| MODERN_PROTOCOL_VERSIONS.contains(&v.as_str()))
        .cloned()
        .unwrap_or_else(|| asked.to_owned())
}

/// How a probe ended without a modern server to speak to.
enum Probed {
    /// Not a modern server: initialize.
    Legacy(String),
    /// Give up with this.
    Failed(McpClientError),
}

/// Dials one connection given up front.
struct Once(std::sync::Mutex<Option<Connection>>);

impl jrpc::transport::Dialer for Once {
    async fn dial(&self) -> std::io::Result<Connection> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the connection was used already",
                )
            })
    }
}
