//! Tools: functions the model may call.

use serde::{Deserialize, Serialize};

use super::{ContentBlock, JsonObject, Meta, RequestMeta, Tool};

/// The params of `tools/call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallToolParams {
    /// The tool.
    pub name: String,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<JsonObject>,
    /// The client's answers to an earlier
    /// [`InputRequiredResult`](super::InputRequiredResult), by key
    /// (2026-07-28).
    #[serde(
        rename = "inputResponses",
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::mrtr::input_responses"
    )]
    pub input_responses: Option<super::InputResponses>,
    /// The `requestState` of that result, echoed as it came.
    #[serde(
        rename = "requestState",
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::mrtr::request_state"
    )]
    pub request_state: Option<String>,
    /// Metadata: a progress token, say.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<RequestMeta>,
}

/// The result of `tools/call`. A tool that failed says so here
/// (`isError: true`, with the reason as content) so that the model can see
/// it; protocol errors (an unknown tool) are JSON-RPC errors instead.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    /// What the tool returned, as content blocks.
    pub content: Vec<ContentBlock>,
    /// The same result as a JSON object, matching the tool's output schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<JsonObject>,
    /// Whether the tool failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// `resultType`: set on modern (2026-07-28) results, left out of
    /// legacy ones.
    #[serde(rename = "resultType", default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<super::ResultType>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl CallToolResult {
    /// A successful result of one text block.
    pub fn text(text: impl Into<String>) -> Self {
        CallToolResult {
            content: vec![ContentBlock::text(text)],
            ..Default::default()
        }
    }

    /// A failed result whose text says why.
    pub fn error(text: impl Into<String>) -> Self {
        CallToolResult {
            content: vec![ContentBlock::text(text)],
            is_error: Some(true),
            ..Default::default()
        }
    }

    /// Whether the tool failed.
    pub fn failed(&self) -> bool {
        self.is_error == Some(true)
    }

    /// The text of every text block, joined by newlines.
    pub fn joined_text(&self) -> String {
        let texts: Vec<&str> = self.content.iter().filter_map(ContentBlock::as_text).collect();
        texts.join("\n")
    }
}

/// The result of `tools/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListToolsResult {
    /// One page of tools.
    pub tools: Vec<Tool>,
    /// Where the next page starts, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// `resultType`: set on modern (2026-07-28) results, left out of
    /// legacy ones.
    #[serde(rename = "resultType", default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<super::ResultType>,
    /// `ttlMs`: how long the result stays fresh (modern results).
    #[serde(rename = "ttlMs", default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// `cacheScope`: who may keep it (modern results).
    #[serde(rename = "cacheScope", default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<super::CacheScope>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}
