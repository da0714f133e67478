//! `server/discover` (2026-07-28): what a server speaks and offers, asked
//! for without a handshake.

use serde::{Deserialize, Serialize};

use super::{CacheScope, Meta, ResultType, ServerCapabilities};

/// The result of `server/discover`. Who the server is goes in
/// `_meta["io.modelcontextprotocol/serverInfo"]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    /// [`ResultType::Complete`].
    #[serde(default)]
    pub result_type: ResultType,
    /// The revisions the server speaks, newest first.
    pub supported_versions: Vec<String>,
    /// What the server offers.
    pub capabilities: ServerCapabilities,
    /// How to use the server, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// How long the result stays fresh, in milliseconds.
    #[serde(default)]
    pub ttl_ms: u64,
    /// Who may keep it.
    #[serde(default)]
    pub cache_scope: CacheScope,
    /// Metadata: the server's identity.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}
