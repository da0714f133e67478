//! Request ids, echoed back exactly as they were sent.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// A request id: a string, a number or `null`.
///
/// A number keeps the exact text it arrived with (`-1`, `1.50`, `1e3`, or an
/// integer far beyond 64 bits), so a reply echoes the id byte for byte and no
/// precision is lost to a round trip through `f64`. A string is kept decoded.
///
/// ```
/// use jrpc::Id;
///
/// assert_eq!(Id::from(7).to_string(), "7");
/// assert_eq!(Id::from("a").to_string(), r#""a""#);
/// let big = Id::from_number_text("123456789012345678901234567890").unwrap();
/// assert_eq!(big.as_number_text(), Some("123456789012345678901234567890"));
/// assert!(Id::from_number_text("12abc").is_none());
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(Repr);

#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Repr {
    Null,
    Number(Text),
    String(Text),
}

/// An id's text, kept inline up to [`INLINE`] bytes: numbers and short
/// strings (nearly every id) cost no allocation, neither when read nor
/// when cloned, and a request's id is cloned several times on its way (the
/// reply, the call log's line, a cancellation entry). Compared, hashed and
/// ordered as the `str` it holds.
#[derive(Clone)]
enum Text {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<str>),
}

/// The longest text kept inline (a `Text` is then 24 bytes, as big as its
/// boxed form with its tag; an `Id` is 32).
const INLINE: usize = 22;

impl Text {
    fn as_str(&self) -> &str {
        match self {
            // Always whole UTF-8: only a `&str` is ever copied in.
            Text::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            Text::Heap(text) => text,
        }
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        if text.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..text.len()].copy_from_slice(text.as_bytes());
            Text::Inline {
                len: text.len() as u8,
                bytes,
            }
        } else {
            Text::Heap(text.into())
        }
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        if text.len() <= INLINE {
            Text::from(text.as_str())
        } else {
            Text::Heap(text.into_boxed_str())
        }
    }
}

impl std::ops::Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

impl std::hash::Hash for Text {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Text {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Id {
    /// The `null` id. A request with `"id": null` is still a request and gets
    /// a response; only a missing id makes a notification.
    pub const NULL: Id = Id(Repr::Null);

    /// A numeric id from JSON number text, if `text` is a valid JSON number.
    pub fn from_number_text(text: &str) -> Option<Id> {
        is_json_number(text.as_bytes()).then(|| Id(Repr::Number(text.into())))
    }

    /// A string id from the text between its quotes, when that text holds
    /// no escapes.
    pub(crate) fn plain_string(text: &str) -> Id {
        Id(Repr::String(text.into()))
    }

    /// Classifies a raw JSON value as an id. Returns `None` for anything the
    /// specification does not allow as an id (booleans, arrays, objects).
    pub fn from_raw(raw: &RawValue) -> Option<Id> {
        let text = raw.get();
        match text.as_bytes().first()? {
            b'"' => Some(Id(Repr::String(decode_json_str(text)?))),
            b'-' | b'0'..=b'9' => Some(Id(Repr::Number(text.into()))),
            b'n' => Some(Id::NULL),
            _ => None,
        }
    }

    /// Whether this is the `null` id.
    pub fn is_null(&self) -> bool {
        matches!(self.0, Repr::Null)
    }

    /// The string, for a string id.
    pub fn as_str(&self) -> Option<&str> {
        match &self.0 {
            Repr::String(s) => Some(s),
            _ => None,
        }
    }

    /// The exact number text, for a numeric id.
    pub fn as_number_text(&self) -> Option<&str> {
        match &self.0 {
            Repr::Number(n) => Some(n),
            _ => None,
        }
    }

    /// The value, for a numeric id written as an integer that fits in `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_number_text()?.parse().ok()
    }

    /// Writes the id as JSON text.
    pub(crate) fn write_json(&self, out: &mut Vec<u8>) {
        match &self.0 {
            Repr::Null => out.extend_from_slice(b"null"),
            Repr::Number(n) => out.extend_from_slice(n.as_bytes()),
            Repr::String(s) => super::escape::write_json_str(out, s),
        }
    }
}

impl Default for Id {
    fn default() -> Self {
        Id::NULL
    }
}

impl From<i64> for Id {
    fn from(n: i64) -> Self {
        Id(Repr::Number(itoa::Buffer::new().format(n).into()))
    }
}

impl From<u64> for Id {
    fn from(n: u64) -> Self {
        Id(Repr::Number(itoa::Buffer::new().format(n).into()))
    }
}

impl From<i32> for Id {
    fn from(n: i32) -> Self {
        Id::from(i64::from(n))
    }
}

impl From<u32> for Id {
    fn from(n: u32) -> Self {
        Id::from(u64::from(n))
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id(Repr::String(s.into()))
    }
}

impl From<String> for Id {
    fn from(s: String) -> Self {
        Id(Repr::String(s.into()))
    }
}

/// The id as JSON text: `null`, the number's exact text, or a quoted string.
impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::new();
        self.write_json(&mut out);
        f.write_str(&String::from_utf8_lossy(&out))
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Id({self})")
    }
}

impl Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Repr::Null => serializer.serialize_unit(),
            Repr::String(s) => serializer.serialize_str(s),
            Repr::Number(n) => {
                // Integers go through the serializer's own integer support, so
                // any serializer understands them; other numbers are written as
                // raw JSON text, which keeps them exact with serde_json.
                if let Ok(i) = n.parse::<i64>() {
                    serializer.serialize_i64(i)
                } else if let Ok(u) = n.parse::<u64>() {
                    serializer.serialize_u64(u)
                } else {
                    RawValue::from_string(n.to_string())
                        .map_err(serde::ser::Error::custom)?
                        .serialize(serializer)
                }
            }
        }
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IdVisitor;
        impl<'de> serde::de::Visitor<'de> for IdVisitor {
            type Value = Id;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, a number or null")
            }
            fn visit_unit<E>(self) -> Result<Id, E> {
                Ok(Id::NULL)
            }
            fn visit_none<E>(self) -> Result<Id, E> {
                Ok(Id::NULL)
            }
            fn visit_i64<E>(self, v: i64) -> Result<Id, E> {
                Ok(Id::from(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Id, E> {
                Ok(Id::from(v))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Id, E> {
                // Only reached for fractional ids outside serde_json's raw path.
                let text = serde_json::to_string(&v).map_err(E::custom)?;
                Id::from_number_text(&text).ok_or_else(|| E::custom("id is not a finite number"))
            }
            fn visit_str<E>(self, v: &str) -> Result<Id, E> {
                Ok(Id::from(v))
            }
            fn visit_string<E>(self, v: String) -> Result<Id, E> {
                Ok(Id::from(v))
            }
        }
        deserializer.deserialize_any(IdVisitor)
    }
}

/// Decodes JSON string text (with its quotes), borrowing nothing.
fn decode_json_str(text: &str) -> Option<Text> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    if !inner.contains('\\') {
        return Some(inner.into());
    }
    serde_json::from_str::<String>(text).ok().map(Text::from)
}

/// Whether `text` is a JSON number per RFC 8259:
/// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
fn is_json_number(text: &[u8]) -> bool {
    fn digits(s: &[u8]) -> usize {
        s.iter().take_while(|b| b.is_ascii_digit()).count()
    }
    let mut i = usize::from(text.first() == Some(&b'-'));
    match text.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i += digits(&text[i..]),
        _ => return false,
    }
    if text.get(i) == Some(&b'.') {
        let n = digits(&text[i + 1..]);
        if n == 0 {
            return false;
        }
        i += 1 + n;
    }
    if matches!(text.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(text.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let n = digits(&text[i..]);
        if n == 0 {
            return false;
        }
        i += n;
    }
    i == text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn classifies_raw_values() {
        let cases: &[(&str, Option<&str>)] = &[
            ("1", Some("1")),
            ("-0", Some("-0")),
            ("1.50", Some("1.50")),
            ("1e400", Some("1e400")),
            (
                "123456789012345678901234567890",
                Some("123456789012345678901234567890"),
            ),
            (r#""abc""#, Some(r#""abc""#)),
            (r#""\u00e9\n""#, Some("\"\u{e9}\\n\"")),
            ("null", Some("null")),
            ("true", None),
            ("[1]", None),
            ("{}", None),
        ];
        for (input, expected) in cases {
            let got = Id::from_raw(&raw(input)).map(|id| id.to_string());
            assert_eq!(got.as_deref(), *expected, "input {input}");
        }
    }

    #[test]
    fn ids_compare_by_their_text_inline_or_not() {
        use std::collections::HashSet;
        // Around the longest text kept inline, both ways of making an id.
        let texts: Vec<String> = (20..=24).flat_map(|n| ["a".repeat(n), "b".repeat(n)]).collect();
        let made: Vec<Id> = texts.iter().map(|t| Id::from(t.as_str())).collect();
        let read: Vec<Id> = texts
            .iter()
            .map(|t| Id::from_raw(&raw(&format!("\"{t}\""))).unwrap())
            .collect();
        assert_eq!(made, read);
        let set: HashSet<&Id> = made.iter().collect();
        assert!(read.iter().all(|id| set.contains(id)));
        for (a, x) in texts.iter().zip(&made) {
            assert_eq!(x.as_str(), Some(a.as_str()));
            for (b, y) in texts.iter().zip(&made) {
                assert_eq!(x.cmp(y), a.cmp(b), "{a} against {b}");
            }
        }
        let long = "9".repeat(40);
        assert_eq!(
            Id::from_number_text(&long).unwrap().as_number_text(),
            Some(long.as_str())
        );
        assert_eq!(Id::from(String::from("é")).to_string(), "\"é\"");
    }

    #[test]
    fn validates_number_text() {
        for ok in [
            "0",
            "-1",
            "1.5",
            "1e5",
            "1E+5",
            "-0.0e-0",
            "99999999999999999999999",
        ] {
            assert!(Id::from_number_text(ok).is_some(), "{ok}");
        }
        for bad in ["", "-", "01", "1.", ".5", "1e", "+1", "1x", "NaN", "0x10"] {
            assert!(Id::from_number_text(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn serde_round_trip_keeps_big_numbers() {
        let id = Id::from_number_text("123456789012345678901234567890").unwrap();
        assert_eq!(
            serde_json::to_string(&id).unwrap(),
            "123456789012345678901234567890"
        );
        assert_eq!(serde_json::to_string(&Id::from(-5)).unwrap(), "-5");
        assert_eq!(serde_json::to_string(&Id::NULL).unwrap(), "null");
        let back: Id = serde_json::from_str(r#""x""#).unwrap();
        assert_eq!(back, Id::from("x"));
        assert_eq!(Id::from(42).as_i64(), Some(42));
    }
}
