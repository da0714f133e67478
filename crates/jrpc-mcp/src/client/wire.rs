//! How requests reach the server: a jrpc connection (stdio, TCP,
//! WebSocket, a legacy HTTP session), or modern Streamable HTTP (a POST per
//! request, with its headers).

use std::sync::Arc;

use jrpc::client::Client;
use jrpc::CallError;

use super::sent::Sent;

/// The headers of one modern HTTP request beyond its version and method.
#[derive(Debug, Default)]
#[cfg_attr(not(feature = "http-client"), allow(dead_code))]
pub(super) struct Headers {
    /// `Mcp-Name`'s value (a tool's or prompt's name, a resource's URI),
    /// not yet encoded.
    pub(super) name: Option<String>,
    /// `Mcp-Param-*` headers: (name, value), values encoded already.
    pub(super) params: Vec<(String, String)>,
}

/// How requests reach the server.
pub(super) enum Wire {
    /// A jrpc connection: stdio, TCP, WebSocket, ..., and a legacy HTTP
    /// session.
    Peer(Client),
    /// Modern Streamable HTTP: a POST per request.
    #[cfg(feature = "http-client")]
    Http(Arc<super::modern_http::ModernHttp>),
    /// A legacy HTTP session: each request POSTed from its caller's task
    /// (its answer read there); the session's peer for the rest (the
    /// handshake, notifications, the server's requests and their answers).
    #[cfg(feature = "http-client")]
    Session(Client, Arc<super::http::HttpSession>),
}

impl Wire {
    /// One request in `version` (its `_meta` already in `params`).
    pub(super) async fn call(
        &self,
        version: &str,
        method: &str,
        params: &Sent<'_>,
        headers: &Headers,
    ) -> Result<Box<serde_json::value::RawValue>, CallError> {
        self.call_within(version, method, params, headers, None).await
    }

    /// [`call`](Self::call), over HTTP within `timeout` (what is left of
    /// the call's time) instead of the client's call timeout.
    pub(super) async fn call_within(
        &self,
        version: &str,
        method: &str,
        params: &Sent<'_>,
        headers: &Headers,
        timeout: Option<std::time::Duration>,
    ) -> Result<Box<serde_json::value::RawValue>, CallError> {
        match self {
            Wire::Peer(client) => {
                let _ = (version, headers, timeout);
                client.call(method, params).await
            }
            #[cfg(feature = "http-client")]
            Wire::Session(client, session) => {
                let _ = (version, headers);
                session.call(client, method, params, timeout).await
            }
            #[cfg(feature = "http-client")]
            Wire::Http(http) => {
                http.call(
                    version,
                    method,
                    params,
                    headers.name.as_deref(),
                    &headers.params,
                    timeout,
                )
                .await
            }
        }
    }

    /// Whether a lost request may be sent again on this wire: over HTTP
    /// (each request its own; a load balancer sends the next to a live
    /// replica), not over a connection that is gone for good.
    pub(super) fn can_repeat(&self) -> bool {
        match self {
            Wire::Peer(_) => false,
            #[cfg(feature = "http-client")]
            Wire::Session(..) => false,
            #[cfg(feature = "http-client")]
            Wire::Http(_) => true,
        }
    }

    pub(super) async fn close(self) -> Arc<str> {
        match self {
            Wire::Peer(client) => client.close().await,
            #[cfg(feature = "http-client")]
            Wire::Session(client, _) => client.close().await,
            #[cfg(feature = "http-client")]
            Wire::Http(_) => "closed".into(),
        }
    }

    /// The connection to the other side, when the wire has one.
    pub(super) fn client(&self) -> Option<&Client> {
        match self {
            Wire::Peer(client) => Some(client),
            #[cfg(feature = "http-client")]
            Wire::Session(client, _) => Some(client),
            #[cfg(feature = "http-client")]
            Wire::Http(_) => None,
        }
    }
}
