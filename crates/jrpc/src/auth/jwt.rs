//! Checking a JWT access token (RFC 7519, RFC 9068) against a key set:
//! its form, its algorithm, its signature, then its claims.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{Map, Value};

use super::jwk::{Algorithm, JwkSet};
use super::token::AccessToken;

/// The longest token looked at (bytes): a real one is a few hundred bytes
/// to a few KiB; anything past this is refused before it is decoded.
pub(crate) const MAX_TOKEN_LEN: usize = 16 * 1024;

/// What a token must say to be accepted here.
#[derive(Debug, Clone)]
pub(crate) struct Expected {
    /// `iss`, exactly.
    pub(crate) issuer: String,
    /// Named by `aud` (a string, or one of an array), exactly.
    pub(crate) audience: String,
    /// Clock skew allowed on `exp` and `nbf`.
    pub(crate) leeway: Duration,
}

/// Why a token was refused. Never shown to the caller (every refusal looks
/// the same from outside); logged, and used in tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not three base64url parts of JSON, or too long.
    Malformed(&'static str),
    /// `none`, `HS*`, or any algorithm not accepted.
    Algorithm(String),
    /// No key of the set has this id (the set may need fetching again).
    UnknownKey(Option<String>),
    /// No key that fits verifies the signature.
    Signature,
    /// A claim is missing or wrong.
    Claim(&'static str),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Malformed(why) => write!(f, "malformed token: {why}"),
            Refusal::Algorithm(alg) => write!(f, "algorithm {alg:?} is not accepted"),
            Refusal::UnknownKey(Some(kid)) => write!(f, "no key {kid:?} in the issuer's key set"),
            Refusal::UnknownKey(None) => write!(f, "no key in the issuer's key set fits"),
            Refusal::Signature => write!(f, "bad signature"),
            Refusal::Claim(why) => write!(f, "{why}"),
        }
    }
}

/// The parts of a token before its signature is checked.
pub(crate) struct Parsed<'a> {
    pub(crate) alg: Algorithm,
    pub(crate) kid: Option<String>,
    /// `header.payload`, what the signature signs.
    signed: &'a [u8],
    payload: &'a str,
    signature: Vec<u8>,
}

/// Splits and decodes a compact JWS, refusing what cannot be a token we
/// accept.
pub(crate) fn parse(token: &str) -> Result<Parsed<'_>, Refusal> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(Refusal::Malformed("too long"));
    }
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refusal::Malformed("not three parts"));
    };
    let header: Value = decode_json(header).ok_or(Refusal::Malformed("header"))?;
    let alg_name = header
        .get("alg")
        .and_then(Value::as_str)
        .ok_or(Refusal::Malformed("no alg"))?;
    let alg = Algorithm::named(alg_name).ok_or_else(|| Refusal::Algorithm(alg_name.to_owned()))?;
    // Extensions this verifier does not know must not be ignored (RFC 7515 §4.1.11).
    if header.get("crit").is_some() {
        return Err(Refusal::Malformed("crit"));
    }
    let kid = match header.get("kid") {
        None => None,
        Some(Value::String(kid)) => Some(kid.clone()),
        Some(_) => return Err(Refusal::Malformed("kid")),
    };
    let signature = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|_| Refusal::Malformed("signature"))?;
    let signed_len = token.len() - token.rsplit('.').next().map_or(0, str::len) - 1;
    Ok(Parsed {
        alg,
        kid,
        signed: &token.as_bytes()[..signed_len],
        payload,
        signature,
    })
}

pub(crate) fn decode_json(part: &str) -> Option<Value> {
    let bytes = URL_SAFE_NO_PAD.decode(part).ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        object @ Value::Object(_) => Some(object),
        _ => None,
    }
}

/// Whether an `aud` claim (a string, or an array of them) names
/// `audience` exactly.
pub(crate) fn names_audience(aud: Option<&Value>, audience: &str) -> bool {
    match aud {
        Some(Value::String(aud)) => aud == audience,
        Some(Value::Array(auds)) => auds.iter().any(|a| a.as_str() == Some(audience)),
        _ => false,
    }
}

/// Checks a parsed token's signature with `keys`, then its claims.
pub(crate) fn check(
    parsed: &Parsed<'_>,
    keys: &JwkSet,
    expected: &Expected,
    now: SystemTime,
) -> Result<AccessToken, Refusal> {
    let mut fitting = keys.candidates(parsed.kid.as_deref(), parsed.alg).peekable();
    if fitting.peek().is_none() {
        return Err(Refusal::UnknownKey(parsed.kid.clone()));
    }
    if !fitting.any(|key| key.verifies(parsed.alg, parsed.signed, &parsed.signature)) {
        return Err(Refusal::Signature);
    }
    let Some(Value::Object(claims)) = decode_json(parsed.payload) else {
        return Err(Refusal::Malformed("payload"));
    };
    check_claims(claims, expected, now)
}

fn check_claims(
    claims: Map<String, Value>,
    expected: &Expected,
    now: SystemTime,
) -> Result<AccessToken, Refusal> {
    if expected.audience.is_empty() {
        return Err(Refusal::Claim("no audience is set for this resource"));
    }
    if claims.get("iss").and_then(Value::as_str) != Some(expected.issuer.as_str()) {
        return Err(Refusal::Claim("iss is not the issuer"));
    }
    if !names_audience(claims.get("aud"), &expected.audience) {
        return Err(Refusal::Claim("aud does not name this resource"));
    }
    let now = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
    let leeway = expected.leeway.as_secs_f64();
    let time = |name: &str| {
        claims
            .get(name)
            .map(|v| v.as_f64().ok_or(Refusal::Claim("a time claim is not a number")))
    };
    let expires = time("exp").ok_or(Refusal::Claim("no exp"))??;
    if now >= expires + leeway {
        return Err(Refusal::Claim("expired"));
    }
    if let Some(not_before) = time("nbf").transpose()? {
        if now + leeway < not_before {
            return Err(Refusal::Claim("not yet valid"));
        }
    }
    let text = |name: &str| claims.get(name).and_then(Value::as_str).map(str::to_owned);
    let scopes = match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(scope)), _) | (None, Some(Value::String(scope))) => {
            scope.split_whitespace().map(str::to_owned).collect()
        }
        (None, Some(Value::Array(scopes))) => scopes
            .iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    Ok(AccessToken {
        subject: text("sub"),
        client_id: text("client_id").or_else(|| text("azp")),
        scopes,
        expires_at: Some(expires as u64),
        claims,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn expected() -> Expected {
        Expected {
            issuer: "https://as.example".into(),
            audience: "https://rs.example/mcp".into(),
            leeway: Duration::from_secs(30),
        }
    }

    const NOW: u64 = 1_800_000_000;

    fn claims(change: impl FnOnce(&mut Value)) -> Map<String, Value> {
        let mut claims = json!({"iss": "https://as.example", "aud": "https://rs.example/mcp",
                                "sub": "alice", "exp": NOW + 60});
        change(&mut claims);
        match claims {
            Value::Object(map) => map,
            _ => unreachable!(),
        }
    }

    fn at(claims: Map<String, Value>, expected: &Expected) -> Result<AccessToken, Refusal> {
        check_claims(claims, expected, UNIX_EPOCH + Duration::from_secs(NOW))
    }

    #[test]
    fn claims_are_checked_with_a_small_leeway() {
        let cases: Vec<(&str, Map<String, Value>, bool)> = vec![
            ("good", claims(|_| {}), true),
            (
                "expired within the leeway",
                claims(|c| c["exp"] = json!(NOW - 29)),
                true,
            ),
            (
                "expired past the leeway",
                claims(|c| c["exp"] = json!(NOW - 30)),
                false,
            ),
            ("exp not a number", claims(|c| c["exp"] = json!("soon")), false),
            (
                "no exp",
                claims(|c| drop(c.as_object_mut().unwrap().remove("exp"))),
                false,
            ),
            (
                "nbf within the leeway",
                claims(|c| c["nbf"] = json!(NOW + 30)),
                true,
            ),
            (
                "nbf past the leeway",
                claims(|c| c["nbf"] = json!(NOW + 31)),
                false,
            ),
            (
                "another issuer",
                claims(|c| c["iss"] = json!("https://as.example/")),
                false,
            ),
            (
                "no issuer",
                claims(|c| drop(c.as_object_mut().unwrap().remove("iss"))),
                false,
            ),
            (
                "audience in an array",
                claims(|c| c["aud"] = json!(["x", "https://rs.example/mcp"])),
                true,
            ),
            (
                "audience with a slash more",
                claims(|c| c["aud"] = json!("https://rs.example/mcp/")),
                false,
            ),
            ("audience not a string", claims(|c| c["aud"] = json!(1)), false),
        ];
        for (what, claims, good) in cases {
            assert_eq!(at(claims, &expected()).is_ok(), good, "{what}");
        }
        let mut unset = expected();
        unset.audience.clear();
        assert!(
            at(claims(|c| c["aud"] = json!("")), &unset).is_err(),
            "no audience set"
        );
    }

    #[test]
    fn scopes_come_from_scope_or_scp() {
        let cases = [
            (json!({"scope": "a  b"}), vec!["a", "b"]),
            (json!({"scp": ["a", "b"]}), vec!["a", "b"]),
            (json!({"scp": "a b"}), vec!["a", "b"]),
            (json!({}), vec![]),
        ];
        for (extra, scopes) in cases {
            let token = at(
                claims(|c| {
                    c.as_object_mut()
                        .unwrap()
                        .extend(extra.as_object().unwrap().clone())
                }),
                &expected(),
            )
            .unwrap();
            assert_eq!(token.scopes, scopes, "{extra}");
            assert_eq!(token.subject.as_deref(), Some("alice"));
        }
    }

    #[test]
    fn malformed_tokens_are_refused_before_any_key_is_used() {
        let b64 = |v: Value| URL_SAFE_NO_PAD.encode(v.to_string());
        let body = b64(json!({}));
        let cases = [
            ("", "not three parts"),
            ("a.b", "not three parts"),
            ("a.b.c.d", "not three parts"),
            (&*format!("{}.{body}.", b64(json!({"alg": "none"}))), "alg"),
            (&*format!("{}.{body}.", b64(json!({"alg": "HS256"}))), "alg"),
            (&*format!("{}.{body}.", b64(json!({"typ": "JWT"}))), "no alg"),
            (
                &*format!("{}.{body}.", b64(json!({"alg": "ES256", "kid": 7}))),
                "kid",
            ),
            (
                &*format!("{}.{body}.!!", b64(json!({"alg": "ES256"}))),
                "signature",
            ),
            (&*format!("{}.{body}.", b64(json!(["alg"]))), "header"),
        ];
        for (token, why) in cases {
            let refused = parse(token).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(refused.contains(why), "{token:?}: {refused}");
        }
        assert!(parse(&"a".repeat(MAX_TOKEN_LEN + 1)).is_err());
    }
}
