//! Modern requests' envelopes, read once per client rather than once per
//! request.
//!
//! A 2026-07-28 client sends the same `_meta` envelope (its revision, its
//! capabilities, who it is) with every request. Reading it is a third of
//! what reading a `tools/call` costs (three long keys, three owned strings,
//! a capabilities object); comparing its text with the last one read costs
//! a few dozen instructions. So the last envelope read is kept beside its
//! text, and a request whose `_meta` is the same text, byte for byte,
//! shares it. Anything else is read as usual and becomes the one kept —
//! unless it carries a progress token, which differs from request to
//! request.

use std::sync::{Arc, Mutex, MutexGuard};

use jrpc::message::RawValue;

use crate::types::RequestEnvelope;

/// The last envelope read, with its text.
#[derive(Debug, Default)]
pub(crate) struct Envelopes {
    last: Mutex<Option<Kept>>,
}

/// An envelope kept, with its text and how deep that text nests (`1` for
/// an object of scalars).
#[derive(Debug)]
struct Kept {
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
        let envelope = Arc::new(serde_json::from_str::<RequestEnvelope>(text)?);
        if envelope.progress_token.is_none() {
            *self.last() = Some(Kept {
                text: text.into(),
                depth: depth(text),
                envelope: Arc::clone(&envelope),
            });
        }
        Ok(envelope)
    }

    /// The envelope kept, when `text` is its text byte for byte.
    fn known(&self, text: &str) -> Option<Arc<RequestEnvelope>> {
        match &*self.last() {
            Some(kept) if *kept.text == *text => Some(Arc::clone(&kept.envelope)),
            _ => None,
        }
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
        match &*self.last() {
            Some(kept) if kept.depth <= max_depth && bytes.starts_with(kept.text.as_bytes()) => {
                Some((kept.text.len(), Arc::clone(&kept.envelope)))
            }
            _ => None,
        }
    }

    fn last(&self) -> MutexGuard<'_, Option<Kept>> {
        // Nothing is left half-done under the lock: a panic elsewhere
        // cannot have broken what it holds.
        self.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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

    #[test]
    fn other_text_is_read_on_its_own_and_kept_in_its_place() {
        let envelopes = Envelopes::default();
        let first = envelopes.read(&raw(ENVELOPE)).unwrap();
        // The same envelope written otherwise is read again, not matched.
        let spaced = ENVELOPE.replace(",", ", ");
        let other = envelopes.read(&raw(&spaced)).unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(*first, *other);
        let b = ENVELOPE.replace(r#""name":"a""#, r#""name":"b""#);
        let b1 = envelopes.read(&raw(&b)).unwrap();
        assert_eq!(b1.client_info.as_ref().unwrap().name, "b");
        assert!(Arc::ptr_eq(&b1, &envelopes.read(&raw(&b)).unwrap()));
        // The first is no longer kept.
        assert!(!Arc::ptr_eq(&first, &envelopes.read(&raw(ENVELOPE)).unwrap()));
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
        for bad in ["5", "{}", r#"{"io.modelcontextprotocol/protocolVersion":1}"#] {
            assert!(envelopes.read(&raw(bad)).is_err(), "{bad}");
        }
        assert!(Arc::ptr_eq(&kept, &envelopes.read(&raw(ENVELOPE)).unwrap()));
    }
}
