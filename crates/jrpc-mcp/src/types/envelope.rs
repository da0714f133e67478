//! What revision 2026-07-28 carries on every message instead of a session:
//! the per-request `_meta` envelope (protocol version, client capabilities,
//! client, log level), the `resultType` of every result, cache hints, and
//! the protocol's own error data.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{ClientCapabilities, Implementation, LoggingLevel, ProgressToken};

/// The `_meta` keys the protocol reserves for itself.
pub mod meta_keys {
    /// The revision a request is sent in (required on modern requests).
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// What the client can do, for this request (required on modern
    /// requests).
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// Who the client is (optional).
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// The least severe log level the client wants for this request; without
    /// it the server sends no log messages for the request.
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    /// Who the server is, on results.
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    /// The `subscriptions/listen` request a notification belongs to.
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
    /// Where progress notifications for a request go.
    pub const PROGRESS_TOKEN: &str = "progressToken";
}

/// The per-request `_meta` of a modern (2026-07-28) request: everything a
/// server needs to know about the client, on every request, so that no
/// state is kept between requests.
///
/// ```
/// use jrpc_mcp::types::RequestEnvelope;
///
/// let meta = serde_json::json!({
///     "io.modelcontextprotocol/protocolVersion": "2026-07-28",
///     "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
///     "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
/// });
/// let envelope: RequestEnvelope = serde_json::from_value(meta).unwrap();
/// assert_eq!(envelope.protocol_version, "2026-07-28");
/// assert!(envelope.client_capabilities.sampling.is_some());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestEnvelope {
    /// The revision the request is sent in.
    #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
    pub protocol_version: String,
    /// What the client can do for this request; a server must not ask for
    /// more.
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities")]
    pub client_capabilities: ClientCapabilities,
    /// Who the client is.
    #[serde(
        rename = "io.modelcontextprotocol/clientInfo",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_info: Option<Implementation>,
    /// The least severe log level to send for this request; `None` means no
    /// log messages at all.
    #[serde(
        rename = "io.modelcontextprotocol/logLevel",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub log_level: Option<LoggingLevel>,
    /// Where to send progress notifications for this request. A token that
    /// is neither a string nor an integer is ignored.
    #[serde(
        rename = "progressToken",
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::utilities::lenient_token"
    )]
    pub progress_token: Option<ProgressToken>,
}

impl RequestEnvelope {
    /// An envelope for `version`, declaring `capabilities`.
    pub fn new(version: impl Into<String>, capabilities: ClientCapabilities) -> Self {
        RequestEnvelope {
            protocol_version: version.into(),
            client_capabilities: capabilities,
            client_info: None,
            log_level: None,
            progress_token: None,
        }
    }
}

/// How to read a result (`resultType`): every modern result says; a
/// result without it (from a legacy server) is [`Complete`](Self::Complete).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum ResultType {
    /// The final result.
    #[default]
    Complete,
    /// The server needs input first: an [`InputRequiredResult`](super::InputRequiredResult).
    InputRequired,
    /// The request runs as a task (the tasks extension).
    Task,
    /// A kind an extension defines.
    Other(String),
}

impl ResultType {
    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            ResultType::Complete => "complete",
            ResultType::InputRequired => "input_required",
            ResultType::Task => "task",
            ResultType::Other(other) => other,
        }
    }
}

impl fmt::Display for ResultType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ResultType {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ResultType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<str>::deserialize(deserializer)?;
        Ok(match name.as_ref() {
            "complete" => ResultType::Complete,
            "input_required" => ResultType::InputRequired,
            "task" => ResultType::Task,
            other => ResultType::Other(other.to_owned()),
        })
    }
}

/// Who may keep a cached result (`cacheScope`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// Anyone: the result holds nothing particular to the caller.
    Public,
    /// Only the same caller (the same authorization).
    #[default]
    Private,
}

/// The caching hints a cacheable result carries: how long it stays fresh
/// and who may keep it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheHint {
    /// `ttlMs`: how long the result may be considered fresh; zero means
    /// stale at once.
    pub ttl: std::time::Duration,
    /// `cacheScope`.
    pub scope: CacheScope,
}

impl CacheHint {
    /// Fresh for `ttl`, for whom `scope` says.
    pub const fn new(ttl: std::time::Duration, scope: CacheScope) -> Self {
        CacheHint { ttl, scope }
    }

    /// `ttlMs`, in whole milliseconds.
    pub fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }
}

/// The `data` of an [`UNSUPPORTED_PROTOCOL_VERSION`](super::codes::UNSUPPORTED_PROTOCOL_VERSION)
/// error: what the server speaks, and what was asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnsupportedVersionData {
    /// The revisions the server speaks; the client picks one and retries.
    pub supported: Vec<String>,
    /// The revision the request named.
    pub requested: String,
}

/// The `data` of a [`MISSING_REQUIRED_CLIENT_CAPABILITY`](super::codes::MISSING_REQUIRED_CLIENT_CAPABILITY)
/// error: the capabilities the request needs that the client did not
/// declare, as a capabilities object (`{"sampling": {}}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MissingCapabilityData {
    /// What the client would have to declare.
    pub required_capabilities: ClientCapabilities,
}
