//! The params of the methods served in rounds (`tools/call`,
//! `resources/read`, `prompts/get`) as the server reads them, and reading
//! them together with a modern request's envelope in one pass.

use std::collections::BTreeMap;

use jrpc::message::RawValue;
use serde::Deserialize;

use crate::types::{InputResponses, ProgressToken};

/// The `_meta` of a request as a handler call needs it: its progress token
/// (a modern request's envelope was read already).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Progress {
    #[serde(
        rename = "progressToken",
        default,
        deserialize_with = "crate::types::utilities::lenient_token"
    )]
    pub(crate) progress_token: Option<ProgressToken>,
}

/// Declares the params of a method served in rounds, as the server reads
/// them: the method's own fields, then what every such request may carry —
/// the answers to an earlier round, its state, and its `_meta`, read as `M`:
/// the progress token of a legacy request ([`Progress`]), or the envelope
/// of a modern request as it came, read in one pass with the rest.
macro_rules! round_params {
    ($(#[$doc:meta])* $name:ident { $($(#[$attr:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Deserialize)]
        pub(crate) struct $name<M = Progress> {
            $($(#[$attr])* pub(crate) $field: $ty,)*
            #[serde(
                rename = "inputResponses",
                default,
                deserialize_with = "crate::types::mrtr::input_responses"
            )]
            pub(crate) input_responses: Option<InputResponses>,
            #[serde(
                rename = "requestState",
                default,
                deserialize_with = "crate::types::mrtr::request_state"
            )]
            pub(crate) request_state: Option<String>,
            #[serde(rename = "_meta", default = "none")]
            pub(crate) meta: Option<M>,
        }

        impl<M> $name<M> {
            /// The params without their `_meta`, and the `_meta`.
            pub(crate) fn split_meta(self) -> ($name, Option<M>) {
                let $name { $($field,)* input_responses, request_state, meta } = self;
                let params = $name { $($field,)* input_responses, request_state, meta: None };
                (params, meta)
            }
        }
    };
}

round_params! {
    /// The params of `tools/call`: the arguments kept as they came, for the
    /// tool to decode into its own type.
    ToolCall {
        name: String,
        #[serde(default, deserialize_with = "object_or_absent")]
        arguments: Option<Box<RawValue>>,
    }
}

round_params! {
    /// The params of `prompts/get`.
    PromptCall {
        name: String,
        #[serde(default)]
        arguments: Option<BTreeMap<String, String>>,
    }
}

round_params! {
    /// The params of `resources/read`.
    ReadCall {
        uri: String,
    }
}

fn none<M>() -> Option<M> {
    None
}

/// `arguments`: a JSON object when present.
fn object_or_absent<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Box<RawValue>>, D::Error> {
    let raw = Box::<RawValue>::deserialize(deserializer)?;
    if raw.get().starts_with('{') {
        Ok(Some(raw))
    } else {
        Err(serde::de::Error::custom("arguments must be a JSON object"))
    }
}

/// Params read already, with the envelope (by Streamable HTTP, to check a
/// modern request's headers, or by the era layer, to learn its era): the
/// handler takes them from the request's [`Modern`](super::era::Modern)
/// facts instead of reading the params again.
#[derive(Debug)]
pub(crate) enum ReadAlready {
    Tool(ToolCall),
    Resource(ReadCall),
    Prompt(PromptCall),
}

/// The params of a request for `method` whose handler reads them in one
/// known shape (`tools/call`, `resources/read`, `prompts/get`), read in that
/// shape in one pass, with their `_meta` as it came (a modern request's
/// envelope, for the caller to read); `None` for another method, params
/// that do not parse so, or params without `_meta` (the usual path then
/// says why).
pub(crate) fn read_with_meta<'a>(method: &str, params: &'a RawValue) -> Option<(ReadAlready, &'a RawValue)> {
    fn read<'a, P: WithMeta<'a>>(text: &'a str) -> Option<(ReadAlready, &'a RawValue)> {
        let (read, meta) = serde_json::from_str::<P>(text).ok()?.read();
        Some((read, meta?))
    }
    let text = params.get();
    match method {
        "tools/call" => read::<ToolCall<&RawValue>>(text),
        "resources/read" => read::<ReadCall<&RawValue>>(text),
        "prompts/get" => read::<PromptCall<&RawValue>>(text),
        _ => None,
    }
}

/// Params read in their shape with their `_meta` as it came: what they are
/// read as for their handler, and that `_meta`.
pub(crate) trait WithMeta<'a>: Deserialize<'a> {
    fn read(self) -> (ReadAlready, Option<&'a RawValue>);
}

impl<'a> WithMeta<'a> for ToolCall<&'a RawValue> {
    fn read(self) -> (ReadAlready, Option<&'a RawValue>) {
        let (call, meta) = self.split_meta();
        (ReadAlready::Tool(call), meta)
    }
}

impl<'a> WithMeta<'a> for ReadCall<&'a RawValue> {
    fn read(self) -> (ReadAlready, Option<&'a RawValue>) {
        let (read, meta) = self.split_meta();
        (ReadAlready::Resource(read), meta)
    }
}

impl<'a> WithMeta<'a> for PromptCall<&'a RawValue> {
    fn read(self) -> (ReadAlready, Option<&'a RawValue>) {
        let (prompt, meta) = self.split_meta();
        (ReadAlready::Prompt(prompt), meta)
    }
}
