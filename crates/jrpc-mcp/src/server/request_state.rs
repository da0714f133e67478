//! `requestState`, sealed: what a multi round-trip request carries from one
//! round to the next (the answers so far and the results of
//! [`McpContext::once`](super::McpContext::once)) travels through the
//! client, so the client could change it. The server signs it with
//! HMAC-SHA256 under a key of its own, binds it to the request (method,
//! target, a digest of the arguments) and to the caller, gives it an expiry,
//! and refuses anything that does not verify.
//!
//! The state is signed, not encrypted: the client can read what it carries
//! (its own answers, and what `once` returned). Keep secrets out of `once`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use jrpc::message::codes::INVALID_PARAMS;
use jrpc::Error;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::types::JsonObject;

type HmacSha256 = Hmac<Sha256>;

/// The token's format, signed with the rest so it cannot be swapped.
const FORMAT: &str = "v1";

/// The most bytes of state a round may carry forward.
pub(crate) const MAX_STATE_LEN: usize = 512 * 1024;

/// The key that signs request state: random per server unless set, so that
/// several processes behind one address can share one.
#[derive(Clone)]
pub(crate) struct StateKey([u8; 32]);

impl StateKey {
    pub(crate) fn random() -> Self {
        let mut key = [0u8; 32];
        if getrandom::fill(&mut key).is_err() {
            // No system randomness: a key from the clock and the process is
            // still unknown to clients, if weaker.
            let seed = format!("{:?}{}", SystemTime::now(), std::process::id());
            key.copy_from_slice(&Sha256::digest(seed.as_bytes()));
        }
        StateKey(key)
    }

    /// A key derived from `secret` (at least 32 bytes).
    pub(crate) fn from_secret(secret: &[u8]) -> Self {
        let mut key = [0u8; 32];
        key.copy_from_slice(&Sha256::digest(
            [b"jrpc-mcp/request-state/v1:".as_slice(), secret].concat(),
        ));
        StateKey(key)
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC takes a key of any length.
        HmacSha256::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!("HMAC accepts any key length"))
    }
}

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(..)")
    }
}

/// What a round's state is bound to: the request it may be echoed on, and
/// who may echo it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Binding {
    /// The method.
    #[serde(rename = "m")]
    pub(crate) method: String,
    /// The tool or prompt name, or the resource URI.
    #[serde(rename = "t")]
    pub(crate) target: String,
    /// A digest of the arguments.
    #[serde(rename = "d")]
    pub(crate) arguments: String,
    /// The authenticated caller, when there is one.
    #[serde(rename = "p", default, skip_serializing_if = "Option::is_none")]
    pub(crate) principal: Option<String>,
}

impl Binding {
    /// The binding of a request for `target` with `arguments` (any JSON
    /// value; its digest is of its canonical form: object keys sorted).
    pub(crate) fn new(
        method: &str,
        target: &str,
        arguments: &impl Serialize,
        principal: Option<&str>,
    ) -> Self {
        // serde_json's maps keep their keys sorted, so the text is canonical.
        let text = serde_json::to_vec(arguments).unwrap_or_default();
        let digest = Sha256::digest(&text);
        Binding {
            method: method.to_owned(),
            target: target.to_owned(),
            arguments: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest[..16]),
            principal: principal.map(str::to_owned),
        }
    }
}

/// What one round hands to the next.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Carried {
    /// Answers the handler has read, by key.
    #[serde(rename = "a", default, skip_serializing_if = "JsonObject::is_empty")]
    pub(crate) answers: JsonObject,
    /// What `McpContext::once` computed, by key.
    #[serde(rename = "o", default, skip_serializing_if = "JsonObject::is_empty")]
    pub(crate) once: JsonObject,
}

#[derive(Serialize, Deserialize)]
struct Payload {
    #[serde(flatten)]
    binding: Binding,
    /// Expiry, in seconds since the Unix epoch.
    #[serde(rename = "e")]
    expires: u64,
    #[serde(flatten)]
    carried: Carried,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The refusal of state that does not verify: the same whatever the reason,
/// which goes to the server's log only.
fn invalid(reason: &str) -> Error {
    tracing::debug!(reason, "requestState refused");
    Error::new(INVALID_PARAMS, "Invalid or expired requestState")
        .with_data(&serde_json::json!({"reason": "invalid_request_state"}))
}

impl StateKey {
    /// `carried`, bound to `binding`, good for `ttl`.
    pub(crate) fn seal(&self, binding: &Binding, carried: Carried, ttl: Duration) -> Result<String, Error> {
        let payload = Payload {
            binding: binding.clone(),
            expires: now_secs().saturating_add(ttl.as_secs().max(1)),
            carried,
        };
        let json =
            serde_json::to_vec(&payload).map_err(|e| Error::internal_error().with_data(&e.to_string()))?;
        if json.len() > MAX_STATE_LEN {
            return Err(Error::internal_error().with_data(&format!(
                "the request's accumulated input is over {MAX_STATE_LEN} bytes"
            )));
        }
        let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let body = engine.encode(&json);
        let mut mac = self.mac();
        mac.update(FORMAT.as_bytes());
        mac.update(b".");
        mac.update(body.as_bytes());
        let tag = engine.encode(mac.finalize().into_bytes());
        Ok(format!("{FORMAT}.{body}.{tag}"))
    }

    /// What `token` carries, when it is one this key sealed, for the
    /// request `binding` describes, and not expired.
    pub(crate) fn open(&self, token: &str, binding: &Binding) -> Result<Carried, Error> {
        if token.len() > MAX_STATE_LEN * 2 {
            return Err(invalid("too long"));
        }
        let mut parts = token.splitn(3, '.');
        let (Some(format), Some(body), Some(tag)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(invalid("malformed"));
        };
        if format != FORMAT {
            return Err(invalid("unknown format"));
        }
        let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let tag = engine.decode(tag).map_err(|_| invalid("malformed tag"))?;
        let mut mac = self.mac();
        mac.update(FORMAT.as_bytes());
        mac.update(b".");
        mac.update(body.as_bytes());
        mac.verify_slice(&tag).map_err(|_| invalid("signature"))?;
        let json = engine.decode(body).map_err(|_| invalid("malformed body"))?;
        let payload: Payload = serde_json::from_slice(&json).map_err(|_| invalid("malformed payload"))?;
        if payload.expires < now_secs() {
            return Err(invalid("expired"));
        }
        if &payload.binding != binding {
            return Err(invalid("bound to another request or caller"));
        }
        Ok(payload.carried)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn binding(args: serde_json::Value) -> Binding {
        Binding::new("tools/call", "book", &args, None)
    }

    #[test]
    fn state_opens_only_unchanged_for_its_own_request() {
        let key = StateKey::random();
        let mut carried = Carried::default();
        carried.answers.insert(
            "name".into(),
            json!({"action": "accept", "content": {"name": "Ada"}}),
        );
        let b = binding(json!({"b": 1, "a": [1, 2]}));
        let token = key.seal(&b, carried.clone(), Duration::from_secs(60)).unwrap();
        // The same arguments in another key order are the same request.
        assert_eq!(
            key.open(&token, &binding(json!({"a": [1, 2], "b": 1}))).unwrap(),
            carried
        );

        let refused = |token: &str, b: &Binding| key.open(token, b).unwrap_err().code();
        assert_eq!(refused(&format!("{token}-TAMPERED"), &b), INVALID_PARAMS);
        assert_eq!(
            refused(&token, &binding(json!({"a": [1, 2], "b": 2}))),
            INVALID_PARAMS
        );
        assert_eq!(
            refused(
                &token,
                &Binding::new("prompts/get", "book", &json!({"a": [1, 2], "b": 1}), None)
            ),
            INVALID_PARAMS
        );
        assert_eq!(
            refused(
                &token,
                &Binding::new(
                    "tools/call",
                    "book",
                    &json!({"a": [1, 2], "b": 1}),
                    Some("mallory")
                )
            ),
            INVALID_PARAMS
        );
        assert_eq!(refused("v1.e30.AAAA", &b), INVALID_PARAMS);
        assert_eq!(refused("", &b), INVALID_PARAMS);
        // Another server's key does not open it.
        assert!(StateKey::random().open(&token, &b).is_err());
        // A shared secret does.
        let shared = StateKey::from_secret(b"0123456789abcdef0123456789abcdef");
        let token = shared
            .seal(&b, Carried::default(), Duration::from_secs(60))
            .unwrap();
        assert!(StateKey::from_secret(b"0123456789abcdef0123456789abcdef")
            .open(&token, &b)
            .is_ok());
    }

    #[test]
    fn changing_one_byte_of_the_body_breaks_the_signature() {
        let key = StateKey::random();
        let b = binding(json!({}));
        let token = key.seal(&b, Carried::default(), Duration::from_secs(60)).unwrap();
        let (head, tag) = token.rsplit_once('.').unwrap();
        let mut body: Vec<u8> = head.bytes().collect();
        let last = body.len() - 1;
        body[last] = if body[last] == b'A' { b'B' } else { b'A' };
        let forged = format!("{}.{tag}", String::from_utf8(body).unwrap());
        assert!(key.open(&forged, &b).is_err());
    }
}
