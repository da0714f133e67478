//! Matching URIs against RFC 6570 URI templates, the way resource templates
//! name their resources: `demo://echo/{text}` matches `demo://echo/abc` with
//! `text = "abc"`.
//!
//! Supported expressions: `{var}` (simple: any characters but `/`, `?`, `#`
//! and `,`, percent-decoded), `{+var}` and `{#var}` (reserved: anything,
//! taken as it is), and several names in one simple expression are not
//! supported (the template is then treated as a literal).

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    /// A variable; `reserved` ones may hold `/` and are not decoded.
    Var {
        name: String,
        reserved: bool,
    },
}

/// A parsed URI template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriTemplate {
    parts: Vec<Part>,
}

impl UriTemplate {
    /// Parses `template`. Unclosed braces and expressions with operators
    /// other than `+` and `#` are kept as literal text.
    pub fn parse(template: &str) -> Self {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}').map(|c| open + c) else {
                break;
            };
            let expression = &rest[open + 1..close];
            let (reserved, name) = match expression.as_bytes().first() {
                Some(b'+' | b'#') => (true, &expression[1..]),
                _ => (false, expression),
            };
            let valid = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
            literal.push_str(&rest[..open]);
            if valid {
                if !literal.is_empty() {
                    parts.push(Part::Literal(std::mem::take(&mut literal)));
                }
                if expression.starts_with('#') {
                    parts.push(Part::Literal("#".into()));
                }
                parts.push(Part::Var {
                    name: name.to_owned(),
                    reserved,
                });
            } else {
                literal.push_str(&rest[open..=close]);
            }
            rest = &rest[close + 1..];
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        UriTemplate { parts }
    }

    /// The variables' values when `uri` matches, else `None`.
    pub fn matches(&self, uri: &str) -> Option<BTreeMap<String, String>> {
        let mut values = BTreeMap::new();
        if match_parts(&self.parts, uri, &mut values) {
            Some(values)
        } else {
            None
        }
    }
}

fn match_parts(parts: &[Part], uri: &str, values: &mut BTreeMap<String, String>) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return uri.is_empty();
    };
    match first {
        Part::Literal(text) => uri
            .strip_prefix(text.as_str())
            .is_some_and(|remaining| match_parts(rest, remaining, values)),
        Part::Var { name, reserved } => {
            // Longest first, backtracking: the next literal decides where
            // the value ends.
            let limit = if *reserved {
                uri.len()
            } else {
                uri.find(['/', '?', '#', ',']).unwrap_or(uri.len())
            };
            for end in (1..=limit).rev().filter(|end| uri.is_char_boundary(*end)) {
                let raw = &uri[..end];
                let value = if *reserved {
                    Some(raw.to_owned())
                } else {
                    percent_decode(raw)
                };
                let Some(value) = value else { continue };
                values.insert(name.clone(), value);
                if match_parts(rest, &uri[end..], values) {
                    return true;
                }
                values.remove(name);
            }
            false
        }
    }
}

/// Decodes `%XX` escapes; `None` when they are malformed or not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    type Vars = Option<BTreeMap<String, String>>;

    fn vars(pairs: &[(&str, &str)]) -> Vars {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn templates_match_as_rfc_6570_expands() {
        let cases: &[(&str, &str, Vars)] = &[
            ("demo://echo/{text}", "demo://echo/abc", vars(&[("text", "abc")])),
            (
                "demo://echo/{text}",
                "demo://echo/hello%20world",
                vars(&[("text", "hello world")]),
            ),
            ("demo://echo/{text}", "demo://echo/a/b", None),
            ("demo://echo/{text}", "demo://echo/", None),
            ("demo://echo/{text}", "demo://other/abc", None),
            ("demo://echo/{text}", "demo://echo/%zz", None),
            (
                "file:///{+path}",
                "file:///a/b/c.txt",
                vars(&[("path", "a/b/c.txt")]),
            ),
            (
                "db://{table}/{id}.json",
                "db://users/42.json",
                vars(&[("table", "users"), ("id", "42")]),
            ),
            ("db://{table}/{id}.json", "db://users/42.txt", None),
            ("static://readme", "static://readme", vars(&[])),
            ("odd://{bad name}", "odd://{bad name}", vars(&[])),
            ("x://{a}", "x://é", vars(&[("a", "é")])),
        ];
        for (template, uri, expected) in cases {
            assert_eq!(
                &UriTemplate::parse(template).matches(uri),
                expected,
                "{template} vs {uri}"
            );
        }
    }
}
