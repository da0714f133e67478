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
//! takes the place of the one kept longest — unless it carries a progress
//! token, which differs from request to request, or its text is longer
//! than [`KEPT_LEN`].

use std::sync::{Arc, Mutex, MutexGuard};

use jrpc::message::RawValue;

use crate::types::RequestEnvelope;

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
    /// Only Streamable HTTP's reader of the usual call looks at it.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    depth: usize,
    envelope: Arc<RequestEnvelope>,
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
        if envelope.progress_token.is_none() && text.len() <= KEPT_LEN {
            let kept = KeptEnvelope {
                text: text.into(),
                depth: depth(text),
                envelope: Arc::clone(&envelope),
            };
            // What it replaces is dropped once the lock is released.
            let _replaced = self.kept().keep(kept);
        }
        Ok(envelope)
    }

    /// The envelope kept whose text is `text` byte for byte.
    pub(crate) fn known(&self, text: &str) -> Option<Arc<RequestEnvelope>> {
        let kept = self.kept();
        let found = kept.envelopes.iter().find(|kept| *kept.text == *text)?;
        Some(Arc::clone(&found.envelope))
    }

    /// The envelope kept and the length of its text, when `bytes` begin
    /// with that text and it nests at most `max_depth` deep. Those bytes
    /// are then a JSON object whose end is the text's end (the text was
    /// valid JSON when it was read): nothing more needs looking at.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn known_prefix(
        &self,
        bytes: &[u8],
        max_depth: usize,
    ) -> Option<(usize, Arc<RequestEnvelope>)> {
        let kept = self.kept();
        let found = kept
            .envelopes
            .iter()
            .find(|kept| kept.depth <= max_depth && bytes.starts_with(kept.text.as_bytes()))?;
        Some((found.text.len(), Arc::clone(&found.envelope)))
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

    #[test]
    fn an_envelope_with_a_progress_token_is_not_kept() {
        let envelopes = Envelopes::default();
        let kept = envelopes.read(&raw(ENVELOPE)).unwrap();
        let with_token = format!(r#"{},"progressToken":7}}"#, &ENVELOPE[..ENVELOPE.len() - 1]);
        let one = envelopes.read(&raw(&with_token)).unwrap();
        assert!(one.progress_token.is_some());
        assert!(!Arc::ptr_eq(&one, &envelopes.read(&raw(&with_token)).unwrap()));
        // What was kept before is kept still.
        assert!(Arc::ptr_eq(&kept, &envelopes.read(&raw(ENVELOPE)).unwrap()));
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
}
