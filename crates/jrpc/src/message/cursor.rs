//! A forward reader over a frame's bytes, for the readers that take the
//! usual frames without serde's machinery (jrpc's own, and jrpc-mcp's for
//! the usual `tools/call`).
//!
//! It reads plain JSON only — strings without escapes, ids that are plain
//! strings or numbers, arrays and objects validated by serde — and says
//! `None` for anything else, so that such a reader can leave the frame to
//! the general path.

use serde_json::value::RawValue;

use super::Id;

/// A position in a JSON text's bytes.
///
/// ```
/// use jrpc::message::Cursor;
///
/// let mut at = Cursor::new(br#" {"id": 7, "params": [1, 2]}"#);
/// at.skip_ws();
/// at.expect(b'{').unwrap();
/// assert_eq!(at.plain_str(), Some("id"));
/// at.member_value().unwrap();
/// assert_eq!(at.id().and_then(|id| id.as_i64()), Some(7));
/// assert_eq!(at.after_member(), Some(true));
/// at.skip_ws();
/// assert_eq!(at.plain_bytes(), Some(&b"params"[..]));
/// at.member_value().unwrap();
/// // Nested in the frame's own object (depth 1), at most 128 deep.
/// assert_eq!(at.nested(1, 128).map(|raw| raw.get()), Some("[1, 2]"));
/// assert_eq!(at.after_member(), Some(false));
/// assert!(at.at_end());
/// ```
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    bytes: &'a [u8],
    /// The bytes as text, when they were checked to be UTF-8 as a whole:
    /// pieces are then sliced without checking them again.
    text: Option<&'a str>,
    i: usize,
}

impl<'a> Cursor<'a> {
    /// At the start of `bytes`, which are checked to be UTF-8 piece by
    /// piece, as they are read.
    #[inline]
    pub fn new(bytes: &'a [u8]) -> Self {
        Cursor {
            bytes,
            text: None,
            i: 0,
        }
    }

    /// At the start of `text`.
    #[inline]
    pub fn of_text(text: &'a str) -> Self {
        Cursor {
            bytes: text.as_bytes(),
            text: Some(text),
            i: 0,
        }
    }

    /// Whether everything has been read.
    #[inline]
    pub fn at_end(&self) -> bool {
        self.i == self.bytes.len()
    }

    /// What is left to read.
    #[inline]
    pub fn rest(&self) -> &'a [u8] {
        self.bytes.get(self.i..).unwrap_or_default()
    }

    /// Past `n` more bytes (what the caller has read from
    /// [`rest`](Self::rest) on its own), at most to the end.
    #[inline]
    pub fn skip(&mut self, n: usize) {
        self.i = self.i.saturating_add(n).min(self.bytes.len());
    }

    /// Past any JSON whitespace.
    #[inline]
    pub fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.i) {
            self.i += 1;
        }
    }

    /// The next byte, read.
    #[inline]
    fn next_byte(&mut self) -> Option<u8> {
        let byte = *self.bytes.get(self.i)?;
        self.i += 1;
        Some(byte)
    }

    /// Reads `byte`; `None` if the next byte is another.
    #[inline]
    pub fn expect(&mut self, byte: u8) -> Option<()> {
        (self.next_byte()? == byte).then_some(())
    }

    /// Past the `:` after a member's key, and the whitespace around it.
    #[inline]
    pub fn member_value(&mut self) -> Option<()> {
        self.skip_ws();
        self.expect(b':')?;
        self.skip_ws();
        Some(())
    }

    /// Past what follows a member's value in an object: `Some(true)` when
    /// a `,` says another member comes, `Some(false)` at the object's `}`.
    #[inline]
    pub fn after_member(&mut self) -> Option<bool> {
        self.skip_ws();
        match self.next_byte()? {
            b',' => Some(true),
            b'}' => Some(false),
            _ => None,
        }
    }

    /// A string without escapes or control characters, its quotes dropped.
    #[inline]
    pub fn plain_str(&mut self) -> Option<&'a str> {
        let start = self.i + 1;
        let bytes = self.plain_bytes()?;
        self.text_of(start, start + bytes.len())
    }

    /// The bytes of a string without escapes or control characters, its
    /// quotes dropped, not checked to be UTF-8: for comparing with a key
    /// or a value known in advance.
    #[inline]
    pub fn plain_bytes(&mut self) -> Option<&'a [u8]> {
        self.expect(b'"')?;
        let start = self.i;
        loop {
            match self.next_byte()? {
                b'"' => break,
                // An escape or a control character: for the general path.
                b'\\' | 0..=0x1f => return None,
                _ => {}
            }
        }
        self.bytes.get(start..self.i - 1)
    }

    /// An id: a plain string or a JSON number (`null` and anything else
    /// are for the general path).
    pub fn id(&mut self) -> Option<Id> {
        if self.bytes.get(self.i) == Some(&b'"') {
            return Some(Id::plain_string(self.plain_str()?));
        }
        let start = self.i;
        while let Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') = self.bytes.get(self.i) {
            self.i += 1;
        }
        Id::from_number_text(self.text_of(start, self.i)?)
    }

    /// A value of any kind: an array or object as [`nested`](Self::nested)
    /// reads it, or a scalar, validated by serde.
    pub fn value(&mut self, depth: usize, max_depth: usize) -> Option<&'a RawValue> {
        let start = self.i;
        match self.bytes.get(self.i)? {
            b'[' | b'{' => return self.nested(depth, max_depth),
            b'"' => {
                self.i += 1;
                self.skip_string()?;
            }
            _ => {
                while let Some(byte) = self.bytes.get(self.i) {
                    if matches!(byte, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    self.i += 1;
                }
            }
        }
        serde_json::from_str(self.text_of(start, self.i)?).ok()
    }

    /// An array or object inside arrays or objects `depth` deep (the
    /// frame's own object is depth 1), nesting at most `max_depth` deep in
    /// all, validated by serde (a value it refuses is for the general path,
    /// which says why).
    pub fn nested(&mut self, depth: usize, max_depth: usize) -> Option<&'a RawValue> {
        let start = self.i;
        self.skip_nested(depth, max_depth)?;
        serde_json::from_str(self.text_of(start, self.i)?).ok()
    }

    /// Past an array or object as [`nested`](Self::nested) reads it, found
    /// by its brackets and strings only, not validated: its bytes, for the
    /// caller to validate (a valid value ends where they say).
    pub fn skip_nested(&mut self, depth: usize, max_depth: usize) -> Option<&'a [u8]> {
        if !matches!(self.bytes.get(self.i), Some(b'[' | b'{')) {
            return None;
        }
        let start = self.i;
        let mut at = depth;
        loop {
            match self.next_byte()? {
                b'[' | b'{' => {
                    at = at.checked_add(1)?;
                    if at > max_depth {
                        return None;
                    }
                }
                b']' | b'}' => {
                    at -= 1;
                    if at == depth {
                        break;
                    }
                }
                b'"' => self.skip_string()?,
                _ => {}
            }
        }
        self.bytes.get(start..self.i)
    }

    /// Past the rest of a string whose opening quote has been read,
    /// escapes and all.
    fn skip_string(&mut self) -> Option<()> {
        loop {
            match self.next_byte()? {
                b'"' => return Some(()),
                b'\\' => {
                    self.next_byte()?;
                }
                _ => {}
            }
        }
    }

    /// The bytes from `start` to `end` as text.
    #[inline]
    fn text_of(&self, start: usize, end: usize) -> Option<&'a str> {
        match self.text {
            Some(text) => text.get(start..end),
            None => std::str::from_utf8(self.bytes.get(start..end)?).ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_of_bytes_are_checked_to_be_text() {
        let bytes = b"\"a\xffb\" \"\xc3\xa9\"";
        let mut at = Cursor::new(bytes);
        assert_eq!(at.plain_str(), None);
        let mut at = Cursor::new(bytes);
        at.skip(6);
        at.skip_ws();
        assert_eq!(at.plain_str(), Some("é"));
        assert!(at.at_end());
        at.skip(10);
        assert_eq!(at.rest(), &b""[..]);
    }

    #[test]
    fn nested_values_keep_to_the_depth_they_are_given() {
        let text = r#"{"a":[[1]],"b":"]}"}"#;
        assert_eq!(Cursor::of_text(text).nested(0, 3).map(RawValue::get), Some(text));
        assert_eq!(Cursor::of_text(text).nested(1, 3).map(RawValue::get), None);
        assert_eq!(Cursor::of_text(text).nested(1, 4).map(RawValue::get), Some(text));
        // What serde refuses is refused.
        assert!(Cursor::of_text(r#"{"a":01}"#).nested(0, 8).is_none());
        assert!(Cursor::new(b"[\"\xff\"]").nested(0, 8).is_none());
    }
}
