//! Modern requests' envelopes, read once per kind of client rather than
//! once per request.
//!
//! A 2026-07-28 client sends the same `_meta` envelope (its revision, its
//! capabilities, who it is) with every request, and the clients of one
//! application send the same one as each other. Reading it is a third of
//! what reading a `tools/call` costs (three long keys, three owned strings,
//! a capabilities object); comparing its text with one read before costs a
//! few dozen instructions. So the last [`KEPT`] envelopes a server read
//! (on any of its connections and endpoints) are kept beside their text, and a request whose `_meta` is one of those texts,
//! byte for byte, shares its envelope. Anything else is read as usual and
//! takes the place of the one kept longest, unless its text is longer than
//! [`KEPT_LEN`].
//!
//! A client listening to progress sends a fresh `progressToken` in every
//! request's `_meta`. Written as the envelope's last member, as clients
//! write it (`…,"progressToken":7}`), the text without it is what is kept,
//! and a request whose `_meta` is a kept text with a token so appended gets
//! a copy of that envelope carrying its token: the token is read, not the
//! envelope.

use std::sync::{Arc, Mutex, MutexGuard};

use jrpc::message::RawValue;

use crate::types::{ProgressToken, RequestEnvelope};

/// How many envelopes are kept: more kinds of client than that, taking
/// turns, read theirs every time (as they would without this).
pub(crate) const KEPT: usize = 16;

/// The longest envelope text kept, in bytes (a usual one is 150 to 400).
pub(crate) const KEPT_LEN: usize = 4096;

/// The envelopes read last, with their text.
#[derive(Debug, Default)]
pub(crate) struct Envelopes {
    kept: Mutex<Kept>,
}

/// The envelopes kept, and which one a new one replaces when all
/// [`KEPT`] places are taken.
#[derive(Debug, Default)]
struct Kept {
    envelopes: Vec<KeptEnvelope>,
    next: usize,
}

/// An envelope kept, with its text and how deep that text nests (`1` for
/// an object of scalars).
#[derive(Debug)]
struct KeptEnvelope {
    text: Box<str>,
    /// Streamable HTTP's reader of the usual call takes a kept text
    /// only within its depth limit.
    depth: usize,
    envelope: Arc<RequestEnvelope>,
    /// Whether a request may append a progress token to the text: no
    /// member of it names one.
    appendable: bool,
}

impl Envelopes {
    /// The envelope `meta` holds (a request's `params._meta`, as it came).
    pub(crate) fn read(&self, meta: &RawValue) -> Result<Arc<RequestEnvelope>, serde_json::Error> {
        let text = meta.get();
        if let Some(envelope) = self.known(text) {
            return Ok(envelope);
        }
        // serde would read a struct from an array too: an envelope is an
        // object (and so is what is kept, which `known_prefix` relies on).
        if !text.starts_with('{') {
            return Err(serde::de::Error::custom("the envelope must be a JSON object"));
        }
        let envelope = Arc::new(serde_json::from_str::<RequestEnvelope>(text)?);
        // With a progress token, the text without it is kept (when the
        // token is its last member): no other member named a token (serde
        // refuses a field given twice, escaped or not), so that text reads
        // as this envelope without its token, and a token may be appended
        // to it. An envelope read without a token may still name one that
        // was ignored (`null`, `1.5`: see `lenient_token`), as it is or
        // escaped: none may be appended to its text.
        let keep = match &envelope.progress_token {
            None => {
                let appendable = !text.contains("progressToken") && !text.contains('\\');
                Some((text.into(), Arc::clone(&envelope), appendable))
            }
            Some(_) => last_token(text.as_bytes()).map(|(at, _)| {
                let without: Box<str> = format!("{}}}", &text[..at]).into();
                let mut bare = RequestEnvelope::clone(&envelope);
                bare.progress_token = None;
                (without, Arc::new(bare), true)
            }),
        };
        if let Some((text, envelope, appendable)) = keep.filter(|(text, _, _)| text.len() <= KEPT_LEN) {
            let kept = KeptEnvelope {
                depth: depth(&text),
                text,
                envelope,
                appendable,
            };
            // What it replaces is dropped once the lock is released.
            let _replaced = self.kept().keep(kept);
        }
        Ok(envelope)
    }

    /// The envelope of `text` when it is a kept text, or one with a
    /// progress token appended.
    pub(crate) fn known(&self, text: &str) -> Option<Arc<RequestEnvelope>> {
        match self.known_prefix(text.as_bytes(), usize::MAX)? {
            (len, envelope) if len == text.len() => Some(envelope),
            _ => None,
        }
    }

    /// The envelope kept and the length of its text, when `bytes` begin
    /// with that text and it nests at most `max_depth` deep: those bytes
    /// are then a JSON object whose end is the text's end (the text was
    /// valid JSON when it was read), and nothing more needs looking at.
    /// Or, when `bytes` begin with a kept text whose closing `}` is
    /// replaced by `,"progressToken":` and a string (without escapes) or
    /// an integer, then `}`: a copy of that envelope with the token, and
    /// the length up to that `}`.
    pub(crate) fn known_prefix(
        &self,
        bytes: &[u8],
        max_depth: usize,
    ) -> Option<(usize, Arc<RequestEnvelope>)> {
        let kept = self.kept();
        let mut found = None;
        for kept in kept.envelopes.iter().filter(|kept| kept.depth <= max_depth) {
            let text = kept.text.as_bytes();
            if bytes.starts_with(text) {
                return Some((text.len(), Arc::clone(&kept.envelope)));
            }
            // Without its closing brace (a kept text is an object; one
            // read with whitespace after it is not looked into).
            let Some(open) = text.strip_suffix(b"}") else {
                continue;
            };
            if found.is_none() && kept.appendable && bytes.starts_with(open) {
                found = token_after(&bytes[open.len()..])
                    .map(|(len, token)| (open.len() + len, Arc::clone(&kept.envelope), token));
            }
        }
        drop(kept);
        // The copy is made outside the lock.
        let (len, envelope, token) = found?;
        let mut envelope = RequestEnvelope::clone(&envelope);
        envelope.progress_token = Some(token);
        Some((len, Arc::new(envelope)))
    }

    fn kept(&self) -> MutexGuard<'_, Kept> {
        // Nothing is left half-done under the lock: a panic elsewhere
        // cannot have broken what it holds.
        self.kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Kept {
    /// Keeps `new`, in a free place or in place of the one kept longest,
    /// and returns what is to be dropped: the one replaced, or `new` itself
    /// when another request kept the same text meanwhile.
    fn keep(&mut self, new: KeptEnvelope) -> Option<KeptEnvelope> {
        if self.envelopes.iter().any(|kept| kept.text == new.text) {
            return Some(new);
        }
        if self.envelopes.len() < KEPT {
            self.envelopes.push(new);
            return None;
        }
        let at = self.next % KEPT;
        self.next = (at + 1) % KEPT;
        Some(std::mem::replace(&mut self.envelopes[at], new))
    }
}

/// How a progress token is appended to an envelope's members.
const TOKEN_MEMBER: &[u8] = br#","progressToken":"#;

/// The progress token `bytes` begin with, written as the last member of
/// an object (`,"progressToken":TOKEN}`), and the length up to and with the
/// `}`: a string without escapes or control characters, or an integer
/// (JSON's grammar: no leading zero, no fraction, no exponent) that fits
/// a token. Anything else is `None`, for the caller to read in full.
fn token_after(bytes: &[u8]) -> Option<(usize, ProgressToken)> {
    let rest = bytes.strip_prefix(TOKEN_MEMBER)?;
    let len = match rest.first()? {
        b'"' => 2 + rest[1..].iter().position(|b| *b == b'"')?,
        b'-' | b'0'..=b'9' => {
            let digits = rest.iter().skip(usize::from(rest[0] == b'-'));
            usize::from(rest[0] == b'-') + digits.take_while(|b| b.is_ascii_digit()).count()
        }
        _ => return None,
    };
    let token = rest.get(..len)?;
    if rest.get(len) != Some(&b'}') {
        return None;
    }
    let plain = match token[0] {
        b'"' => token.iter().all(|b| *b >= 0x20 && *b != b'\\'),
        // "-", "01", "-01" are not JSON integers.
        _ => {
            let digits = token.strip_prefix(b"-").unwrap_or(token);
            !digits.is_empty() && (digits == b"0" || digits[0] != b'0')
        }
    };
    if !plain {
        return None;
    }
    // serde reads what the general path would (an integer beyond a
    // token's range is not one; the text is UTF-8 or not a token).
    let token = serde_json::from_slice::<ProgressToken>(token).ok()?;
    Some((TOKEN_MEMBER.len() + len + 1, token))
}

/// Where the last member of `text` (an object) begins, when it is a
/// progress token as [`token_after`] reads one, and the token.
fn last_token(text: &[u8]) -> Option<(usize, ProgressToken)> {
    let at = text
        .windows(TOKEN_MEMBER.len())
        .rposition(|window| window == TOKEN_MEMBER)?;
    let (len, token) = token_after(&text[at..])?;
    (at + len == text.len()).then_some((at, token))
}

/// How deep valid JSON `text` nests: its deepest array or object, counting
/// the outermost as 1.
fn depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0, false, false);
    for byte in text.bytes() {
        match (in_string, byte) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (true, b'"') => in_string = false,
            (true, _) => {}
            (false, b'"') => in_string = true,
            (false, b'[' | b'{') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (false, b']' | b'}') => depth = depth.saturating_sub(1),
            (false, _) => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    const ENVELOPE: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"a","version":"1"}}"#;

    #[test]
    fn the_same_text_shares_the_envelope_read_first() {
        let envelopes = Envelopes::default();
        let first = envelopes.read(&raw(ENVELOPE)).unwrap();
        let again = envelopes.read(&raw(ENVELOPE)).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(first.protocol_version, "2026-07-28");
        assert_eq!(first.client_info.as_ref().unwrap().name, "a");
    }

    /// `ENVELOPE` with another client name.
    fn named(name: &str) -> String {
        ENVELOPE.replace(r#""name":"a""#, &format!(r#""name":"{name}""#))
    }

    #[test]
    fn other_text_is_read_on_its_own_and_kept_beside() {
        let envelopes = Envelopes::default();
        let first = envelopes.read(&raw(ENVELOPE)).unwrap();
        // The same envelope written otherwise is read again, not matched.
        let spaced = ENVELOPE.replace(",", ", ");
        let other = envelopes.read(&raw(&spaced)).unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(*first, *other);
        let b = envelopes.read(&raw(&named("b"))).unwrap();
        assert_eq!(b.client_info.as_ref().unwrap().name, "b");
        // Clients taking turns each find their own.
        for _ in 0..3 {
            assert!(Arc::ptr_eq(&b, &envelopes.read(&raw(&named("b"))).unwrap()));
            assert!(Arc::ptr_eq(&first, &envelopes.read(&raw(ENVELOPE)).unwrap()));
        }
    }

    #[test]
    fn the_one_kept_longest_makes_room() {
        let envelopes = Envelopes::default();
        let first = envelopes.read(&raw(&named("0"))).unwrap();
        let second = envelopes.read(&raw(&named("1"))).unwrap();
        for n in 2..KEPT {
            envelopes.read(&raw(&named(&n.to_string()))).unwrap();
        }
        assert!(Arc::ptr_eq(&first, &envelopes.read(&raw(&named("0"))).unwrap()));
        // One more: the first one read goes, the second stays.
        envelopes.read(&raw(&named("new"))).unwrap();
        assert!(!Arc::ptr_eq(&first, &envelopes.read(&raw(&named("0"))).unwrap()));
        // … and came back in the second's place.
        assert!(!Arc::ptr_eq(&second, &envelopes.read(&raw(&named("1"))).unwrap()));
        assert_eq!(envelopes.kept().envelopes.len(), KEPT);
    }

    #[test]
    fn a_long_envelope_is_not_kept() {
        let envelopes = Envelopes::default();
        let long = named(&"x".repeat(KEPT_LEN));
        let one = envelopes.read(&raw(&long)).unwrap();
        assert!(!Arc::ptr_eq(&one, &envelopes.read(&raw(&long)).unwrap()));
        assert!(envelopes.kept().envelopes.is_empty());
        // The longest kept is KEPT_LEN bytes.
        let longest = named(&"x".repeat(KEPT_LEN - ENVELOPE.len() + 1));
        assert_eq!(longest.len(), KEPT_LEN);
        let one = envelopes.read(&raw(&longest)).unwrap();
        assert!(Arc::ptr_eq(&one, &envelopes.read(&raw(&longest)).unwrap()));
    }

    /// `ENVELOPE` with `token` (as written) appended as its last member.
    fn with_token(token: &str) -> String {
        format!(r#"{},"progressToken":{token}}}"#, &ENVELOPE[..ENVELOPE.len() - 1])
    }

    #[test]
    fn an_envelope_with_a_progress_token_is_kept_without_it() {
        let envelopes = Envelopes::default();
        let one = envelopes.read(&raw(&with_token("7"))).unwrap();
        assert_eq!(one.progress_token, Some(ProgressToken::Number(7)));
        // What is kept is the envelope without its token, under its text.
        assert_eq!(envelopes.kept().envelopes.len(), 1);
        assert_eq!(&*envelopes.kept().envelopes[0].text, ENVELOPE);
        let bare = envelopes.read(&raw(ENVELOPE)).unwrap();
        assert_eq!(bare.progress_token, None);
        let without = |envelope: &RequestEnvelope| RequestEnvelope {
            progress_token: None,
            ..envelope.clone()
        };
        assert_eq!(without(&one), *bare);
        assert!(Arc::ptr_eq(&bare, &envelopes.read(&raw(ENVELOPE)).unwrap()));
        // Every other token is read on its own, the envelope not.
        for (text, token) in [
            ("8", ProgressToken::Number(8)),
            ("-3", ProgressToken::Number(-3)),
            ("0", ProgressToken::Number(0)),
            (r#""abc-1""#, ProgressToken::String("abc-1".into())),
            ("\"\"", ProgressToken::String(String::new())),
            ("\"é ✓\"", ProgressToken::String("é ✓".into())),
        ] {
            let got = envelopes
                .known(&with_token(text))
                .unwrap_or_else(|| panic!("{text}"));
            assert_eq!(got.progress_token.as_ref(), Some(&token), "{text}");
            assert_eq!(without(&got), *bare);
            // As the general path reads it.
            let read = serde_json::from_str::<RequestEnvelope>(&with_token(text)).unwrap();
            assert_eq!(*got, read, "{text}");
        }
        assert_eq!(envelopes.kept().envelopes.len(), 1);
    }

    #[test]
    fn a_token_written_otherwise_is_read_in_full() {
        let envelopes = Envelopes::default();
        envelopes.read(&raw(ENVELOPE)).unwrap();
        let appended = |suffix: &str| format!("{}{suffix}", &ENVELOPE[..ENVELOPE.len() - 1]);
        for text in [
            with_token("01"),
            with_token("-"),
            with_token("-01"),
            with_token("1.5"),
            with_token("1e3"),
            with_token("true"),
            with_token("null"),
            with_token(r#""a\"b""#),
            with_token(r#""a\nb""#),
            with_token("\"a\tb\""),
            with_token("99999999999999999999"),
            with_token("{}"),
            appended(r#", "progressToken":1}"#),
            appended(r#","progressToken" :1}"#),
            appended(r#","progressToken":1 }"#),
            appended(r#","progressToken":1"#),
            appended(r#","progressToken":"a"#),
            appended(r#","progressToken":1},"#),
            appended(r#","progressToken":1}}"#),
            appended(r#","progress\u0054oken":1}"#),
            appended(r#","other":1}"#),
        ] {
            assert!(envelopes.known(&text).is_none(), "{text}");
        }
        // Invalid UTF-8 in a string token is not one.
        let mut bytes = with_token("\"a\"").into_bytes();
        let at = bytes.len() - 3;
        bytes[at] = 0xff;
        assert!(envelopes.known_prefix(&bytes, 8).is_none());
        // A prefix is matched only as far as its `}`.
        let body = format!("{}]}}", with_token("5"));
        let (len, envelope) = envelopes.known_prefix(body.as_bytes(), 2).unwrap();
        assert_eq!(len, with_token("5").len());
        assert_eq!(envelope.progress_token, Some(ProgressToken::Number(5)));
        assert!(envelopes.known_prefix(body.as_bytes(), 1).is_none(), "too deep");
    }

    #[test]
    fn a_token_not_last_or_not_plain_keeps_nothing() {
        for text in [
            // Not the last member.
            format!(r#"{{"progressToken":1,{}"#, &ENVELOPE[1..]),
            // Last, but written with an escape.
            with_token(r#""a\u0041""#),
        ] {
            let envelopes = Envelopes::default();
            let one = envelopes.read(&raw(&text)).unwrap();
            assert!(one.progress_token.is_some(), "{text}");
            assert!(envelopes.kept().envelopes.is_empty(), "{text}");
        }
        // A number that is no integer is no token (ignored, as the general
        // path ignores it): the envelope is kept as it came.
        let envelopes = Envelopes::default();
        let one = envelopes.read(&raw(&with_token("1.0"))).unwrap();
        assert_eq!(one.progress_token, None);
        assert_eq!(&*envelopes.kept().envelopes[0].text, with_token("1.0"));
        // A kept text naming a token that was ignored takes none appended:
        // serde refuses the token given twice.
        let appended = |text: &str| format!(r#"{},"progressToken":7}}"#, &text[..text.len() - 1]);
        for text in [
            with_token("1.0"),
            with_token("null"),
            with_token("-0"),
            format!(
                r#"{},"progress\u0054oken":null}}"#,
                &ENVELOPE[..ENVELOPE.len() - 1]
            ),
            format!(r#"{{"progressToken":null,{}"#, &ENVELOPE[1..]),
        ] {
            let envelopes = Envelopes::default();
            let one = envelopes.read(&raw(&text)).unwrap();
            assert_eq!(one.progress_token, None, "{text}");
            assert!(
                Arc::ptr_eq(&one, &envelopes.read(&raw(&text)).unwrap()),
                "kept: {text}"
            );
            let twice = appended(&text);
            assert!(
                serde_json::from_str::<RequestEnvelope>(&twice).is_err(),
                "{twice}"
            );
            assert!(envelopes.known(&twice).is_none(), "{twice}");
            assert!(envelopes.read(&raw(&twice)).is_err(), "{twice}");
        }
        // A token given twice is refused, however it is written.
        let envelopes = Envelopes::default();
        let twice = format!(r#"{{"progress\u0054oken":1,{}"#, &with_token("2")[1..]);
        assert!(envelopes.read(&raw(&twice)).is_err());
    }

    #[test]
    fn a_prefix_is_known_within_its_depth() {
        let envelopes = Envelopes::default();
        assert!(envelopes.known_prefix(ENVELOPE.as_bytes(), 128).is_none());
        let kept = envelopes.read(&raw(ENVELOPE)).unwrap();
        let body = format!("{ENVELOPE}}}}}");
        let (len, envelope) = envelopes.known_prefix(body.as_bytes(), 2).unwrap();
        assert_eq!(len, ENVELOPE.len());
        assert!(Arc::ptr_eq(&kept, &envelope));
        // The envelope's clientInfo is two deep: a limit of one refuses it.
        assert!(envelopes.known_prefix(body.as_bytes(), 1).is_none());
        assert!(envelopes.known_prefix(&body.as_bytes()[1..], 2).is_none());
        assert!(envelopes.known_prefix(&ENVELOPE.as_bytes()[..10], 2).is_none());
    }

    #[test]
    fn depth_counts_brackets_outside_strings() {
        for (text, deepest) in [
            ("1", 0),
            ("{}", 1),
            (r#"{"a":[1,{"b":[]}]}"#, 4),
            (r#"{"a":"[[{{\"[["}"#, 1),
            (r#"[{},[],{"x":{}}]"#, 3),
        ] {
            assert_eq!(depth(text), deepest, "{text}");
        }
    }

    #[test]
    fn what_does_not_read_as_an_envelope_is_an_error_and_changes_nothing() {
        let envelopes = Envelopes::default();
        let kept = envelopes.read(&raw(ENVELOPE)).unwrap();
        for bad in [
            "5",
            "{}",
            r#"{"io.modelcontextprotocol/protocolVersion":1}"#,
            r#"["2026-07-28",{}]"#,
        ] {
            assert!(envelopes.read(&raw(bad)).is_err(), "{bad}");
        }
        assert!(Arc::ptr_eq(&kept, &envelopes.read(&raw(ENVELOPE)).unwrap()));
    }

    proptest::proptest! {
        /// Whatever a kept text, with a token appended or not, is known
        /// as, serde reads the same from it: an envelope naming a token or
        /// not, where and however written.
        #[test]
        fn what_is_known_is_what_serde_reads(
            member in proptest::option::of((
                proptest::sample::select(vec![r#""progressToken""#, r#""progress\u0054oken""#]),
                proptest::sample::select(vec!["1", "null", "1.5", "-0", "true", r#""a""#, "01"]),
            )),
            first in proptest::bool::ANY,
            appended in proptest::option::of(
                proptest::sample::select(vec!["7", r#""t""#, "01", "1.5", "-0", r#""a\"""#]),
            ),
        ) {
            let text = match member {
                None => ENVELOPE.to_owned(),
                Some((key, value)) if first => format!("{{{key}:{value},{}", &ENVELOPE[1..]),
                Some((key, value)) => format!("{},{key}:{value}}}", &ENVELOPE[..ENVELOPE.len() - 1]),
            };
            let envelopes = Envelopes::default();
            let Ok(meta) = RawValue::from_string(text.clone()) else {
                return Ok(());
            };
            if envelopes.read(&meta).is_err() {
                return Ok(());
            }
            let asked = match appended {
                Some(token) => format!(r#"{},"progressToken":{token}}}"#, &text[..text.len() - 1]),
                None => text.clone(),
            };
            if let Some(known) = envelopes.known(&asked) {
                let read = serde_json::from_str::<RequestEnvelope>(&asked);
                proptest::prop_assert!(read.is_ok(), "{} known, serde: {:?}", asked, read);
                proptest::prop_assert_eq!(&*known, &read.unwrap(), "{}", asked);
            }
        }
    }
}
