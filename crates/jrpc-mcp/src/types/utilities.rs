//! Progress, cancellation, pagination and request metadata.

use std::fmt;

use jrpc::Id;
use serde::{Deserialize, Serialize};

use super::Meta;

/// A token a request carries in `_meta.progressToken` to ask for progress
/// notifications: a string or an integer, echoed exactly.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ProgressToken {
    /// An integer token.
    Number(i64),
    /// A string token.
    String(String),
}

impl fmt::Display for ProgressToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProgressToken::Number(n) => write!(f, "{n}"),
            ProgressToken::String(s) => f.write_str(s),
        }
    }
}

/// The `_meta` of a request: an optional progress token, and whatever else
/// it holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestMeta {
    /// Where to send `notifications/progress` for this request. A token
    /// that is neither a string nor an integer is ignored (no progress is
    /// sent), not an error.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_token"
    )]
    pub progress_token: Option<ProgressToken>,
    /// Everything else.
    #[serde(flatten)]
    pub rest: Meta,
}

/// The params of `notifications/progress`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressParams {
    /// The token of the request this is about.
    pub progress_token: ProgressToken,
    /// How far along: increases with every notification.
    #[serde(serialize_with = "whole_if_integral")]
    pub progress: f64,
    /// The total, when known.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "whole_if_integral_opt"
    )]
    pub total: Option<f64>,
    /// What is happening, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The params of `notifications/cancelled`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelledParams {
    /// The id of the request to cancel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<Id>,
    /// Why, for logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The params of a list request (`tools/list`, ...): where the page starts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PaginatedParams {
    /// The `nextCursor` of the previous page; none for the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<RequestMeta>,
}

/// Writes `3.0` as `3`: progress counts are usually whole, and peers that
/// compare JSON numbers by type should see what they would have sent.
fn whole_if_integral<S: serde::Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    // Below 2^53 every integral f64 is an exact i64.
    if value.fract() == 0.0 && value.abs() < 9_007_199_254_740_992.0 {
        serializer.serialize_i64(*value as i64)
    } else {
        serializer.serialize_f64(*value)
    }
}

fn whole_if_integral_opt<S: serde::Serializer>(
    value: &Option<f64>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => whole_if_integral(value, serializer),
        None => serializer.serialize_none(),
    }
}

pub(crate) fn lenient_token<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<ProgressToken>, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).ok())
}
