//! The MCP headers of a request, found in one pass over its header map.
//!
//! Each lookup by name hashes the name (none of these is a standard
//! header), and deciding a POST's era, reading its call and checking the
//! headers that mirror its body asked for them seven times; one walk over
//! the few headers a request carries compares names instead.

use http::{HeaderMap, HeaderValue};

use crate::headers;
use crate::types::codes;
use jrpc::Error;

/// The session header of 2025-11-25 and before.
pub(super) const SESSION: &str = "mcp-session-id";

/// `-32020`: a header that mirrors the body is missing or does not match.
pub(super) fn mismatch(why: impl Into<String>) -> Error {
    Error::new(codes::HEADER_MISMATCH, "Header mismatch").with_data(&why.into())
}

/// `-32020` for header `name` given more than once.
pub(super) fn repeated(name: &str) -> Error {
    mismatch(format!("the {name} header appears more than once"))
}

/// `-32020` for header `name` whose value is not visible ASCII.
pub(super) fn not_text(name: &str) -> Error {
    mismatch(format!("the {name} header is not visible ASCII"))
}

/// What a request says in `Mcp-Session-Id`, `MCP-Protocol-Version`,
/// `Mcp-Method` and `Mcp-Name`.
#[derive(Debug, Default)]
pub(super) struct McpHeaders {
    /// Whether it names a (legacy) session.
    pub(super) session: bool,
    pub(super) version: Field,
    pub(super) method: Field,
    pub(super) name: Field,
}

/// One header's values.
#[derive(Debug, Default)]
pub(super) enum Field {
    #[default]
    Absent,
    One(HeaderValue),
    /// Given more than once: the first value.
    Repeated(HeaderValue),
}

impl McpHeaders {
    pub(super) fn of(map: &HeaderMap) -> Self {
        let mut found = McpHeaders::default();
        for (name, value) in map {
            let field = match name.as_str() {
                SESSION => {
                    found.session = true;
                    continue;
                }
                headers::PROTOCOL_VERSION => &mut found.version,
                headers::METHOD => &mut found.method,
                headers::NAME => &mut found.name,
                _ => continue,
            };
            *field = match std::mem::take(field) {
                Field::Absent => Field::One(value.clone()),
                Field::One(first) | Field::Repeated(first) => Field::Repeated(first),
            };
        }
        found
    }
}

impl Field {
    /// The first value, as `HeaderMap::get` gives it.
    pub(super) fn first(&self) -> Option<&HeaderValue> {
        match self {
            Field::Absent => None,
            Field::One(value) | Field::Repeated(value) => Some(value),
        }
    }

    /// The one value of header `name`: `None` when absent, an error
    /// (`-32020`) when it comes more than once or is not text.
    pub(super) fn single(&self, name: &str) -> Result<Option<&str>, Error> {
        match self {
            Field::Absent => Ok(None),
            Field::Repeated(_) => Err(repeated(name)),
            Field::One(value) => value.to_str().map(Some).map_err(|_| not_text(name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &[u8])]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_bytes(value).unwrap(),
            );
        }
        map
    }

    /// What one pass finds is what lookups by name find.
    #[test]
    fn one_pass_finds_what_lookups_find() {
        let cases: &[&[(&str, &[u8])]] = &[
            &[],
            &[("host", b"x"), ("accept", b"application/json")],
            &[
                ("MCP-Protocol-Version", b"2026-07-28"),
                ("Mcp-Method", b"tools/call"),
                ("Mcp-Name", b"add"),
                ("content-type", b"application/json"),
            ],
            &[("mcp-method", b"tools/call"), ("mcp-method", b"tools/list")],
            &[
                ("mcp-session-id", b"abc"),
                ("mcp-protocol-version", b"2025-11-25"),
            ],
            &[
                ("mcp-name", b"caf\xc3\xa9"),
                ("x-mcp-name", b"other"),
                ("mcp-names", b"other"),
            ],
        ];
        for pairs in cases {
            let map = map(pairs);
            let found = McpHeaders::of(&map);
            assert_eq!(found.session, map.contains_key(SESSION));
            for (field, name) in [
                (&found.version, headers::PROTOCOL_VERSION),
                (&found.method, headers::METHOD),
                (&found.name, headers::NAME),
            ] {
                assert_eq!(field.first(), map.get(name), "{name} in {pairs:?}");
                let values: Vec<_> = map.get_all(name).iter().collect();
                match field.single(name) {
                    Ok(None) => assert!(values.is_empty()),
                    Ok(Some(text)) => assert_eq!(values, [text]),
                    Err(error) => {
                        assert_eq!(error.code(), codes::HEADER_MISMATCH);
                        assert!(values.len() > 1 || values[0].to_str().is_err(), "{pairs:?}");
                    }
                }
            }
        }
    }
}
