//! Keeping secrets out of logs and error replies: members with sensitive
//! names are replaced, at any depth.

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::Value;

use crate::message::Error;

/// Which object members are secret: their values are replaced by
/// `"[REDACTED]"` wherever they appear, at any depth, before params or
/// results are logged, and in the `data` (and message) of error replies
/// that echo them.
///
/// Names match case-insensitively, with `-` and `_` taken as the same.
///
/// ```
/// use jrpc::middleware::Redaction;
///
/// let redaction = Redaction::default().with("pin");
/// let logged = redaction.redact_json(r#"{"user":"ann","auth":{"Password":"hunter2","PIN":1234}}"#);
/// assert_eq!(logged, r#"{"auth":{"PIN":"[REDACTED]","Password":"[REDACTED]"},"user":"ann"}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction {
    names: Arc<Vec<Box<str>>>,
}

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Secrets shorter than this are not searched for inside error text: they
/// would match everywhere and say nothing.
const MIN_ECHOED_SECRET: usize = 3;

impl Default for Redaction {
    /// The names in [`DEFAULT_NAMES`](Self::DEFAULT_NAMES).
    fn default() -> Self {
        Redaction::none().with_all(Self::DEFAULT_NAMES.iter().copied())
    }
}

impl Redaction {
    /// The member names redacted by default.
    pub const DEFAULT_NAMES: &'static [&'static str] = &[
        "password",
        "passwd",
        "secret",
        "token",
        "api_key",
        "apikey",
        "authorization",
        "cookie",
        "private_key",
    ];

    /// Redacts nothing.
    pub fn none() -> Self {
        Redaction {
            names: Arc::new(Vec::new()),
        }
    }

    /// Also redacts members named `name`.
    pub fn with(mut self, name: &str) -> Self {
        let name = normalize(name);
        if !name.is_empty() && !self.names.contains(&name) {
            Arc::make_mut(&mut self.names).push(name);
        }
        self
    }

    /// Also redacts members with each of `names`.
    pub fn with_all<'a>(self, names: impl IntoIterator<Item = &'a str>) -> Self {
        names.into_iter().fold(self, Redaction::with)
    }

    /// Whether nothing is redacted.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Whether a member of this name is secret.
    pub fn is_sensitive(&self, name: &str) -> bool {
        !self.names.is_empty() && {
            let name = normalize(name);
            self.names.contains(&name)
        }
    }

    /// Replaces every secret member's value in `value`.
    pub fn redact_value(&self, value: &mut Value) {
        match value {
            Value::Object(members) => {
                for (name, member) in members.iter_mut() {
                    if self.is_sensitive(name) {
                        *member = Value::String(REDACTED.to_owned());
                    } else {
                        self.redact_value(member);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.redact_value(item)),
            _ => {}
        }
    }

    /// A copy of the JSON text `json` with every secret member's value
    /// replaced. Text that is not JSON is returned as it is.
    pub fn redact_json(&self, json: &str) -> String {
        if self.is_empty() {
            return json.to_owned();
        }
        match serde_json::from_str::<Value>(json) {
            Ok(mut value) => {
                self.redact_value(&mut value);
                value.to_string()
            }
            Err(_) => json.to_owned(),
        }
    }

    /// The error to send for a call with `params`: secret members of its
    /// `data` are replaced, and any secret found in the params is cut out
    /// of its text (a decoding error quoting a bad password, say).
    pub fn scrub_error(&self, error: Error, params: Option<&RawValue>) -> Error {
        if self.is_empty() {
            return error;
        }
        let secrets = params.map(|p| self.secrets_in(p.get())).unwrap_or_default();
        let cut = |text: &str| {
            secrets.iter().fold(text.to_owned(), |text, secret| {
                text.replace(secret.as_str(), REDACTED)
            })
        };
        // The protocol's own messages ("Method not found") cannot have come
        // from the params, whatever a short secret happens to match.
        let message_leaks = !is_standard_message(error.message())
            && secrets.iter().any(|s| error.message().contains(s.as_str()));
        let original = error
            .data()
            .map(|raw| serde_json::from_str::<Value>(raw.get()).unwrap_or(Value::Null));
        let data = original.clone().map(|mut value| {
            self.redact_value(&mut value);
            cut_strings(&mut value, &cut);
            value
        });
        let changed_data = data != original;
        if !message_leaks && !changed_data {
            return error;
        }
        let message = if message_leaks {
            cut(error.message())
        } else {
            error.message().to_owned()
        };
        let scrubbed = Error::new(error.code(), message);
        match data {
            Some(data) => scrubbed.with_data(&data),
            None => scrubbed,
        }
    }

    /// The text of every scalar under a secret member of `json`.
    fn secrets_in(&self, json: &str) -> Vec<String> {
        fn collect(redaction: &Redaction, value: &Value, secret: bool, out: &mut Vec<String>) {
            match value {
                Value::Object(members) => {
                    for (name, member) in members {
                        collect(redaction, member, secret || redaction.is_sensitive(name), out);
                    }
                }
                Value::Array(items) => items
                    .iter()
                    .for_each(|item| collect(redaction, item, secret, out)),
                Value::String(s) if secret => out.push(s.clone()),
                Value::Number(n) if secret => out.push(n.to_string()),
                _ => {}
            }
        }
        let Ok(value) = serde_json::from_str::<Value>(json) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        collect(self, &value, false, &mut out);
        out.retain(|s| s.len() >= MIN_ECHOED_SECRET);
        // Longest first, so that a secret containing another is cut whole.
        out.sort_by_key(|s| std::cmp::Reverse(s.len()));
        out.dedup();
        out
    }
}

fn cut_strings(value: &mut Value, cut: &impl Fn(&str) -> String) {
    match value {
        Value::String(s) => *s = cut(s),
        Value::Array(items) => items.iter_mut().for_each(|item| cut_strings(item, cut)),
        Value::Object(members) => members.values_mut().for_each(|member| cut_strings(member, cut)),
        _ => {}
    }
}

fn normalize(name: &str) -> Box<str> {
    name.trim().to_ascii_lowercase().replace('-', "_").into()
}

/// Whether `message` is one of the fixed messages of JSON-RPC and jrpc.
fn is_standard_message(message: &str) -> bool {
    matches!(
        message,
        "Parse error"
            | "Invalid Request"
            | "Method not found"
            | "Invalid params"
            | "Internal error"
            | "Frame too large"
            | "Batch too large"
            | "Nesting too deep"
            | "Unauthorized"
            | "Rate limited"
            | "Request timed out"
            | "Server busy"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_default_names_at_any_depth_and_case() {
        let r = Redaction::default();
        let cases = [
            (r#"{"password":"x"}"#, r#"{"password":"[REDACTED]"}"#),
            (r#"{"PassWord":"x"}"#, r#"{"PassWord":"[REDACTED]"}"#),
            (
                r#"[{"a":[{"api-key":"k"}]}]"#,
                r#"[{"a":[{"api-key":"[REDACTED]"}]}]"#,
            ),
            (r#"{"token":{"nested":"obj"}}"#, r#"{"token":"[REDACTED]"}"#),
            (
                r#"{"Authorization":"Bearer x","cookie":"c"}"#,
                r#"{"Authorization":"[REDACTED]","cookie":"[REDACTED]"}"#,
            ),
            (
                r#"{"private_key":1,"passwd":2,"secret":3,"apikey":4}"#,
                r#"{"apikey":"[REDACTED]","passwd":"[REDACTED]","private_key":"[REDACTED]","secret":"[REDACTED]"}"#,
            ),
            (r#"{"user":"ann"}"#, r#"{"user":"ann"}"#),
            (r#"["password","hunter2"]"#, r#"["password","hunter2"]"#),
            ("not json", "not json"),
        ];
        for (input, expected) in cases {
            assert_eq!(r.redact_json(input), expected, "{input}");
        }
    }

    #[test]
    fn added_names_and_none() {
        let r = Redaction::none().with("PIN");
        assert_eq!(
            r.redact_json(r#"{"pin":1,"password":"x"}"#),
            r#"{"password":"x","pin":"[REDACTED]"}"#
        );
        assert!(Redaction::none().is_empty());
    }

    #[test]
    fn scrubs_secrets_echoed_in_error_text() {
        let r = Redaction::default();
        let params = RawValue::from_string(r#"{"user":"ann","password":"hunter2"}"#.to_owned()).unwrap();
        let error = Error::invalid_params().with_data(&serde_json::json!({
            "param": "password",
            "reason": "invalid type: string \"hunter2\", expected u32",
        }));
        let scrubbed = r.scrub_error(error, Some(&params));
        let data = scrubbed.data().unwrap().get();
        assert!(!data.contains("hunter2"), "{data}");
        assert!(data.contains("[REDACTED]"), "{data}");
        assert_eq!(scrubbed.code(), -32602);

        let echoed =
            Error::new(-32000, "bad login for hunter2").with_data(&serde_json::json!({"token": "t0ken"}));
        let scrubbed = r.scrub_error(echoed, Some(&params));
        assert_eq!(scrubbed.message(), "bad login for [REDACTED]");
        assert_eq!(scrubbed.data().unwrap().get(), r#"{"token":"[REDACTED]"}"#);

        let clean = Error::new(-32000, "nothing secret").with_data(&[1, 2]);
        assert_eq!(r.scrub_error(clean.clone(), Some(&params)), clean);

        // Found by the router_handle fuzz target: a short secret matched the
        // protocol's own text ("Method not [REDACTED]").
        let params = RawValue::from_string(r#"{"token":"found"}"#.to_owned()).unwrap();
        let standard = Error::method_not_found();
        assert_eq!(r.scrub_error(standard.clone(), Some(&params)), standard);
    }
}
