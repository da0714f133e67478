//! The HTTP headers that mirror a modern (2026-07-28) request's body so
//! that intermediaries can route on them: `MCP-Protocol-Version`,
//! `Mcp-Method`, `Mcp-Name` and the `Mcp-Param-{Name}` headers of tool
//! parameters annotated `x-mcp-header`. Pure functions, shared by the
//! server (which checks them against the body) and the client (which sends
//! them).

use std::borrow::Cow;

use base64::Engine as _;
use serde_json::Value;

use crate::types::JsonObject;

/// The protocol version header.
pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// The method header.
pub const METHOD: &str = "mcp-method";
/// The name header: a tool's or prompt's name, a resource's URI, a task's id.
pub const NAME: &str = "mcp-name";
/// The prefix of the headers of annotated tool parameters.
pub const PARAM_PREFIX: &str = "mcp-param-";
/// The schema annotation that names a parameter's header.
pub const X_MCP_HEADER: &str = "x-mcp-header";

/// The headers above as names of the `http` crate, made once for the
/// client (a name that is not a standard header costs an allocation when
/// made from text; the server finds them in one pass instead).
#[cfg(feature = "http-client")]
pub(crate) mod names {
    use http::HeaderName;

    pub(crate) const PROTOCOL_VERSION: HeaderName = HeaderName::from_static(super::PROTOCOL_VERSION);
    pub(crate) const METHOD: HeaderName = HeaderName::from_static(super::METHOD);
    pub(crate) const NAME: HeaderName = HeaderName::from_static(super::NAME);
}

const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";

/// The params member whose value `Mcp-Name` carries for `method`, if the
/// method has one.
pub fn name_param(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}

fn is_sentinel(value: &str) -> bool {
    value.len() >= SENTINEL_START.len() + SENTINEL_END.len()
        && value.starts_with(SENTINEL_START)
        && value.ends_with(SENTINEL_END)
}

/// `value` as a header value: as it is when it is printable ASCII without
/// leading or trailing white space, else `=?base64?…?=` of its UTF-8 (as is
/// a value that looks like that form already, so it cannot be misread).
///
/// ```
/// use jrpc_mcp::headers::{decode_value, encode_value};
///
/// assert_eq!(encode_value("us-west1"), "us-west1");
/// assert_eq!(encode_value("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
/// assert_eq!(decode_value("=?base64?SGVsbG8sIOS4lueVjA==?="), Some("Hello, 世界".into()));
/// ```
pub fn encode_value(value: &str) -> Cow<'_, str> {
    let plain = value.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && value.trim_matches(' ') == value
        && !is_sentinel(value);
    if plain {
        Cow::Borrowed(value)
    } else {
        let encoded = base64::engine::general_purpose::STANDARD.encode(value.as_bytes());
        Cow::Owned(format!("{SENTINEL_START}{encoded}{SENTINEL_END}"))
    }
}

/// The value a header carries: itself, or the UTF-8 text inside
/// `=?base64?…?=`. `None` when the sentinel's content is not canonical
/// base64 of UTF-8, so that a corrupt header never matches a body value.
pub fn decode_value(header: &str) -> Option<Cow<'_, str>> {
    if !is_sentinel(header) {
        return Some(Cow::Borrowed(header));
    }
    let payload = &header[SENTINEL_START.len()..header.len() - SENTINEL_END.len()];
    let engine = &base64::engine::general_purpose::STANDARD;
    let bytes = engine.decode(payload).ok()?;
    // Only the form the encoder writes: no other spelling of the same bytes.
    if engine.encode(&bytes) != payload {
        return None;
    }
    String::from_utf8(bytes).ok().map(Cow::Owned)
}

/// Whether `value` may stand in a header as it is (visible ASCII, space and
/// tab).
pub fn is_header_safe(value: &str) -> bool {
    value.bytes().all(|b| b == b'\t' || (0x20..=0x7e).contains(&b))
}

/// One parameter annotated `x-mcp-header`: the path of `properties` keys
/// that leads to it, its header's name part, and its schema type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    /// The chain of `properties` keys from the schema's root.
    pub path: Vec<String>,
    /// The header is `Mcp-Param-{token}`.
    pub token: String,
    /// `string`, `integer` or `boolean`.
    pub kind: String,
}

impl ParamHeader {
    /// The header's full name.
    pub fn header_name(&self) -> String {
        format!("Mcp-Param-{}", self.token)
    }

    /// The argument's value at the parameter's path, if any (`null` counts
    /// as none).
    pub fn value_in<'a>(&self, arguments: &'a JsonObject) -> Option<&'a Value> {
        let (first, rest) = self.path.split_first()?;
        let mut node = arguments.get(first)?;
        for key in rest {
            node = node.as_object()?.get(key)?;
        }
        (!node.is_null()).then_some(node)
    }
}

/// Keywords whose values are subschemas that leave the chain of
/// `properties`: an annotation below them is not statically reachable.
const SINGLE_SUBSCHEMA: &[&str] = &[
    "items",
    "contains",
    "unevaluatedItems",
    "additionalProperties",
    "propertyNames",
    "unevaluatedProperties",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
];
const LIST_SUBSCHEMAS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
const MAP_SUBSCHEMAS: &[&str] = &["patternProperties", "dependentSchemas", "$defs", "definitions"];

/// The most schema positions looked at, so that a huge schema costs little.
const MAX_POSITIONS: usize = 10_000;

/// The `x-mcp-header` annotations of a tool's input schema, or why the tool
/// definition is invalid (an annotation off the chain of `properties`, not
/// an HTTP token, on a type other than string, integer or boolean, or not
/// unique regardless of case). A client drops a tool whose definition is
/// invalid; a server checks the headers of the ones that are valid.
pub fn param_headers(input_schema: &JsonObject) -> Result<Vec<ParamHeader>, String> {
    let mut found: Vec<ParamHeader> = Vec::new();
    // (path while it is a chain of `properties`, the schema there)
    let mut stack: Vec<(Option<Vec<String>>, &JsonObject)> = vec![(Some(Vec::new()), input_schema)];
    let mut visited = 0;
    while let Some((path, schema)) = stack.pop() {
        visited += 1;
        if visited > MAX_POSITIONS {
            return Err("the input schema is too large to check its x-mcp-header annotations".into());
        }
        if let Some(annotation) = schema.get(X_MCP_HEADER) {
            let path = match path.as_ref() {
                Some(path) if !path.is_empty() => path,
                _ => {
                    return Err(
                        "x-mcp-header is only allowed on a property reached through `properties` alone"
                            .into(),
                    )
                }
            };
            let where_ = path.join(".");
            let token = annotation
                .as_str()
                .ok_or_else(|| format!("property {where_:?}: x-mcp-header must be a string"))?;
            if token.is_empty() || !token.bytes().all(is_token_byte) {
                return Err(format!(
                    "property {where_:?}: x-mcp-header {token:?} is not an HTTP token"
                ));
            }
            let kind = schema.get("type").and_then(Value::as_str).unwrap_or("");
            if !matches!(kind, "string" | "integer" | "boolean") {
                return Err(format!(
                    "property {where_:?}: x-mcp-header is only allowed on string, integer or boolean properties"
                ));
            }
            if let Some(other) = found.iter().find(|h| h.token.eq_ignore_ascii_case(token)) {
                return Err(format!(
                    "x-mcp-header {token:?} on {where_:?} repeats the one on {:?}",
                    other.path.join(".")
                ));
            }
            found.push(ParamHeader {
                path: path.clone(),
                token: token.to_owned(),
                kind: kind.to_owned(),
            });
        }
        for (keyword, value) in schema {
            if keyword == "properties" {
                if let Some(properties) = value.as_object() {
                    for (name, sub) in properties {
                        if let Some(sub) = sub.as_object() {
                            let path = path.as_ref().map(|p| {
                                let mut p = p.clone();
                                p.push(name.clone());
                                p
                            });
                            stack.push((path, sub));
                        }
                    }
                }
            } else if SINGLE_SUBSCHEMA.contains(&keyword.as_str()) {
                if let Some(sub) = value.as_object() {
                    stack.push((None, sub));
                }
            } else if LIST_SUBSCHEMAS.contains(&keyword.as_str()) {
                for sub in value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_object)
                {
                    stack.push((None, sub));
                }
            } else if MAP_SUBSCHEMAS.contains(&keyword.as_str()) {
                for sub in value
                    .as_object()
                    .into_iter()
                    .flat_map(|m| m.values())
                    .filter_map(Value::as_object)
                {
                    stack.push((None, sub));
                }
            }
        }
    }
    // In path order, so that headers come out the same every time.
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(found)
}

/// RFC 9110 `tchar`.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// An argument as a header carries it (before encoding): strings as they
/// are, integers in decimal, booleans as `true`/`false`; `None` for other
/// values (which get no header).
pub fn render_argument(value: &Value) -> Option<Cow<'_, str>> {
    match value {
        Value::String(s) => Some(Cow::Borrowed(s)),
        Value::Bool(b) => Some(Cow::Borrowed(if *b { "true" } else { "false" })),
        Value::Number(n) => Some(Cow::Owned(n.to_string())),
        _ => None,
    }
}

/// Whether a decoded header value stands for `value`: integers compare as
/// numbers (`42.0` is `42`), everything else as text.
pub fn argument_matches(kind: &str, value: &Value, decoded: &str) -> bool {
    if kind == "integer" {
        if let Some(n) = value
            .as_i64()
            .or_else(|| value.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
        {
            let (whole, fraction) = decoded.split_once('.').unwrap_or((decoded, ""));
            let canonical = !whole.is_empty()
                && whole.trim_start_matches('-').bytes().all(|b| b.is_ascii_digit())
                && fraction.bytes().all(|b| b == b'0');
            return canonical && whole.parse::<i64>().is_ok_and(|h| h == n);
        }
    }
    render_argument(value).is_some_and(|rendered| rendered == decoded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> JsonObject {
        match value {
            Value::Object(map) => map,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn values_encode_as_the_specification_shows() {
        let cases = [
            ("us-west1", "us-west1"),
            ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            (" padded ", "=?base64?IHBhZGRlZCA=?="),
            ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
            ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        ];
        for (value, header) in cases {
            assert_eq!(encode_value(value), header, "{value:?}");
            assert_eq!(decode_value(header).as_deref(), Some(value), "{header:?}");
        }
        // Not canonical base64, or not UTF-8: matches nothing.
        assert_eq!(decode_value("=?base64?SGVsbG8===?="), None);
        assert_eq!(decode_value("=?base64?/w==?="), None);
        assert_eq!(decode_value("=?base64??="), Some("".into()));
    }

    #[test]
    fn annotations_are_found_on_the_properties_chain_only() {
        let schema = object(json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "nested": {"type": "object", "properties": {"count": {"type": "integer", "x-mcp-header": "Count"}}},
                "query": {"type": "string"}
            }
        }));
        let found = param_headers(&schema).unwrap();
        let paths: Vec<_> = found
            .iter()
            .map(|h| (h.path.join("."), h.token.as_str()))
            .collect();
        assert!(paths.contains(&("region".into(), "Region")));
        assert!(paths.contains(&("nested.count".into(), "Count")));
        let invalid = [
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A B"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A"}, "b": {"type": "string", "x-mcp-header": "a"}}}),
            json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}),
            json!({"anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}),
            json!({"type": "string", "x-mcp-header": "Root"}),
        ];
        for schema in invalid {
            assert!(param_headers(&object(schema.clone())).is_err(), "{schema}");
        }
    }

    #[test]
    fn arguments_compare_like_the_client_renders_them() {
        assert!(argument_matches("integer", &json!(42), "42"));
        assert!(argument_matches("integer", &json!(42), "42.0"));
        assert!(argument_matches("integer", &json!(42.0), "42"));
        assert!(!argument_matches("integer", &json!(42), "42.5"));
        assert!(!argument_matches("integer", &json!(42), "4.2e1"));
        assert!(argument_matches("boolean", &json!(true), "true"));
        assert!(!argument_matches("boolean", &json!(true), "True"));
        assert!(argument_matches("string", &json!("x y"), "x y"));
    }
}
