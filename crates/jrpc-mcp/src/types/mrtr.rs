//! Multi round-trip requests (2026-07-28): instead of sending the client
//! requests of its own, a server answers `tools/call`, `prompts/get` or
//! `resources/read` with the input it needs, and the client asks again with
//! the answers.

use std::collections::BTreeMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{CreateMessageParams, ElicitParams, JsonObject, Meta, ResultType};

/// One thing the server needs from the client before it can answer: a
/// sampling, an elicitation or the client's roots (`{"method", "params"}`).
#[derive(Debug, Clone, PartialEq)]
pub enum InputRequest {
    /// `sampling/createMessage`.
    Sampling(CreateMessageParams),
    /// `elicitation/create`.
    Elicitation(ElicitParams),
    /// `roots/list`.
    ListRoots,
}

impl InputRequest {
    /// The method the client answers as if it had been called.
    pub fn method(&self) -> &'static str {
        match self {
            InputRequest::Sampling(_) => "sampling/createMessage",
            InputRequest::Elicitation(_) => "elicitation/create",
            InputRequest::ListRoots => "roots/list",
        }
    }
}

#[derive(Serialize)]
struct InputRequestOut<'a, P: Serialize> {
    method: &'static str,
    params: &'a P,
}

impl Serialize for InputRequest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let method = self.method();
        match self {
            InputRequest::Sampling(params) => InputRequestOut { method, params }.serialize(serializer),
            InputRequest::Elicitation(params) => InputRequestOut { method, params }.serialize(serializer),
            InputRequest::ListRoots => InputRequestOut {
                method,
                params: &JsonObject::new(),
            }
            .serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for InputRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            method: String,
            #[serde(default)]
            params: Option<serde_json::Value>,
        }
        let wire = Wire::deserialize(deserializer)?;
        let params = |what: &str| {
            wire.params
                .clone()
                .ok_or_else(|| D::Error::custom(format!("{what} needs params")))
        };
        match wire.method.as_str() {
            "sampling/createMessage" => serde_json::from_value(params("sampling/createMessage")?)
                .map(InputRequest::Sampling)
                .map_err(D::Error::custom),
            "elicitation/create" => serde_json::from_value(params("elicitation/create")?)
                .map(InputRequest::Elicitation)
                .map_err(D::Error::custom),
            "roots/list" => Ok(InputRequest::ListRoots),
            other => Err(D::Error::custom(format!(
                "{other:?} is not an input request (sampling/createMessage, elicitation/create or roots/list)"
            ))),
        }
    }
}

/// The input a server asks for, by keys it chose (`inputRequests`).
pub type InputRequests = BTreeMap<String, InputRequest>;

/// The client's answers, by the keys of the requests they answer
/// (`inputResponses`): each a [`CreateMessageResult`](super::CreateMessageResult),
/// an [`ElicitResult`](super::ElicitResult) or a
/// [`ListRootsResult`](super::ListRootsResult), kept as JSON until the
/// server reads the one it asked for.
pub type InputResponses = JsonObject;

/// A result that says the server needs input before it can answer
/// (`resultType: "input_required"`): the client answers `input_requests`
/// and asks again with a new id, the same params, `inputResponses` and
/// `request_state` echoed byte for byte.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputRequiredResult {
    /// Always [`ResultType::InputRequired`].
    pub result_type: ResultType,
    /// What the server needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<InputRequests>,
    /// State for the retry to carry back, opaque to the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl InputRequiredResult {
    /// A result asking for `requests`, with `state` to echo.
    pub fn new(requests: InputRequests, state: Option<String>) -> Self {
        InputRequiredResult {
            result_type: ResultType::InputRequired,
            input_requests: (!requests.is_empty()).then_some(requests),
            request_state: state,
            meta: None,
        }
    }
}

/// Reads `inputResponses`: an object when present; `null` is malformed,
/// not absent (a client that answers must say what).
pub(crate) fn input_responses<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<InputResponses>, D::Error> {
    InputResponses::deserialize(deserializer).map(Some)
}

/// Reads `requestState`: a string when present; `null` is malformed.
pub(crate) fn request_state<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    String::deserialize(deserializer).map(Some)
}
