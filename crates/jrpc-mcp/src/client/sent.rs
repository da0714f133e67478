//! A request's params as the client sends them: the caller's, with the
//! `_meta` the client adds (a modern server's envelope, the log level, a
//! progress token) written in as they are serialized, instead of a copy of
//! the params and of the envelope made for every request.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use crate::types::{meta_keys, LoggingLevel, ProgressToken};

/// Params with the client's `_meta` (which replaces any `_meta` they had).
pub(crate) struct Sent<'p> {
    pub(super) params: &'p serde_json::Value,
    /// `None` when nothing is added (or the params are not an object).
    pub(super) meta: Option<Meta<'p>>,
}

/// What the client puts in a request's `_meta`.
pub(crate) struct Meta<'c> {
    /// The 2026-07-28 envelope (version, capabilities, client).
    pub(super) envelope: Option<&'c serde_json::Map<String, serde_json::Value>>,
    /// The same envelope as JSON text, written once per client: `_meta`
    /// as it is sent when nothing else goes in it (most requests).
    pub(super) envelope_text: Option<&'c serde_json::value::RawValue>,
    pub(super) log_level: Option<LoggingLevel>,
    pub(super) token: Option<ProgressToken>,
}

impl Meta<'_> {
    pub(super) fn is_empty(&self) -> bool {
        self.envelope.map_or(true, |e| e.is_empty()) && self.log_level.is_none() && self.token.is_none()
    }
}

impl Sent<'_> {
    /// The params as sent, as a value of their own (for a request that
    /// outlives them).
    pub(super) fn to_value(&self) -> serde_json::Value {
        // A JSON value and the meta above always serialize: the fallback
        // is never taken.
        serde_json::to_value(self).unwrap_or_else(|_| self.params.clone())
    }

    /// The request `id` of `method` with these params, as it is POSTed:
    /// written into one buffer, the params straight from the caller's.
    #[cfg(feature = "http-client")]
    pub(super) fn request_frame(&self, id: u64, method: &str) -> Result<Vec<u8>, jrpc::CallError> {
        use std::io::Write as _;
        let encode = |e: serde_json::Error| jrpc::CallError::Encode(e.to_string().into());
        let mut body = Vec::with_capacity(256);
        // Writing to a Vec cannot fail.
        let _ = write!(body, r#"{{"jsonrpc":"2.0","id":{id},"method":"#);
        serde_json::to_writer(&mut body, method).map_err(encode)?;
        body.extend_from_slice(br#","params":"#);
        serde_json::to_writer(&mut body, self).map_err(encode)?;
        body.push(b'}');
        Ok(body)
    }
}

impl<'p> From<&'p serde_json::Value> for Sent<'p> {
    /// Params sent as they are.
    fn from(params: &'p serde_json::Value) -> Self {
        Sent { params, meta: None }
    }
}

impl Serialize for Sent<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (Some(meta), serde_json::Value::Object(params)) = (&self.meta, self.params) else {
            return self.params.serialize(serializer);
        };
        let own = params.contains_key("_meta");
        let mut map = serializer.serialize_map(Some(params.len() + usize::from(!own)))?;
        for (key, value) in params.iter().filter(|(key, _)| *key != "_meta") {
            map.serialize_entry(key, value)?;
        }
        map.serialize_entry("_meta", meta)?;
        map.end()
    }
}

impl Serialize for Meta<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if let (Some(text), None, None) = (self.envelope_text, &self.log_level, &self.token) {
            return text.serialize(serializer);
        }
        let added = |key: &str| {
            (key == meta_keys::LOG_LEVEL && self.log_level.is_some())
                || (key == meta_keys::PROGRESS_TOKEN && self.token.is_some())
        };
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.envelope.into_iter().flatten() {
            if !added(key) {
                map.serialize_entry(key, value)?;
            }
        }
        if let Some(level) = &self.log_level {
            map.serialize_entry(meta_keys::LOG_LEVEL, level)?;
        }
        if let Some(token) = &self.token {
            map.serialize_entry(meta_keys::PROGRESS_TOKEN, token)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sent(params: &serde_json::Value, meta: Option<Meta<'_>>) -> serde_json::Value {
        serde_json::to_value(Sent { params, meta }).unwrap()
    }

    #[test]
    fn the_envelope_level_and_token_go_in_meta() {
        let envelope = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "progressToken": 1});
        let params = json!({"name": "add", "arguments": {"a": 1}, "_meta": {"mine": true}});
        let text = serde_json::value::to_raw_value(&envelope).unwrap();
        let meta = Meta {
            envelope: envelope.as_object(),
            envelope_text: Some(&text),
            log_level: Some(LoggingLevel::Debug),
            token: Some(ProgressToken::Number(7)),
        };
        assert_eq!(
            sent(&params, Some(meta)),
            json!({
                "name": "add",
                "arguments": {"a": 1},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/logLevel": "debug",
                    "progressToken": 7
                }
            })
        );
    }

    #[test]
    fn nothing_added_sends_the_params_as_they_are() {
        let params = json!({"name": "add", "_meta": {"mine": true}});
        assert_eq!(sent(&params, None), params);
        let text = serde_json::to_string(&Sent::from(&params)).unwrap();
        assert_eq!(text, serde_json::to_string(&params).unwrap());
    }

    #[test]
    fn the_text_is_one_object_with_one_meta() {
        let params = json!({"b": 2, "a": 1});
        let envelope = json!({"k": "v"});
        let meta = Meta {
            envelope: envelope.as_object(),
            envelope_text: None,
            log_level: None,
            token: None,
        };
        let text = serde_json::to_string(&Sent {
            params: &params,
            meta: Some(meta),
        })
        .unwrap();
        assert_eq!(text.matches("_meta").count(), 1);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            json!({"a": 1, "b": 2, "_meta": {"k": "v"}})
        );
    }

    #[test]
    fn the_envelope_text_is_meta_when_nothing_else_goes_in() {
        let envelope = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                              "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"}});
        let text = serde_json::value::to_raw_value(&envelope).unwrap();
        let params = json!({"name": "add", "_meta": {"mine": true}});
        let meta = || Meta {
            envelope: envelope.as_object(),
            envelope_text: Some(&text),
            log_level: None,
            token: None,
        };
        let expected = json!({"name": "add", "_meta": envelope});
        assert_eq!(sent(&params, Some(meta())), expected);
        #[cfg(feature = "http-client")]
        {
            let written = Sent {
                params: &params,
                meta: Some(meta()),
            }
            .request_frame(4, "tools/call")
            .unwrap();
            let frame: serde_json::Value = serde_json::from_slice(&written).unwrap();
            assert_eq!(frame["params"], expected);
            assert_eq!(frame["id"], 4);
        }
        // A progress token goes in beside the envelope.
        let with_token = Meta {
            token: Some(ProgressToken::Number(1)),
            ..meta()
        };
        assert_eq!(sent(&params, Some(with_token))["_meta"]["progressToken"], 1);
    }
}
