//! DPoP on the resource server (RFC 9449): a token bound to a key
//! (`cnf.jkt`, the key's thumbprint) is good only with a fresh proof that
//! the caller holds that key — a JWT of `typ: dpop+jwt` in the `DPoP`
//! header, signed by the public key it carries, naming the request
//! (`htm`, `htu`), its time (`iat`), a one-time id (`jti`) and the token's
//! hash (`ath`), and the server's nonce when it asks for one.
//!
//! Nonces are derived, not remembered (a time and its HMAC under the
//! server's key), so that replicas holding the same key accept each
//! other's; used proof ids go to a [`ReplayCache`] (in memory by default,
//! one a fleet shares in its own store).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::Value;

use super::jwk::{Algorithm, Jwk};
use super::token::BoxFuture;

/// The longest proof read.
const MAX_PROOF_LEN: usize = 8 * 1024;

/// Whether DPoP-bound tokens are accepted beside bearer tokens, or
/// required.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DpopMode {
    /// Bearer tokens and DPoP-bound tokens (with their proofs) alike; a
    /// bound token sent as a bearer token is refused.
    Allow,
    /// DPoP-bound tokens only.
    Require,
}

/// Remembers the proofs already used, so that none is accepted twice.
pub trait ReplayCache: Send + Sync + 'static {
    /// Records `id` as used until `until` (seconds since the Unix epoch):
    /// `Ok(true)` the first time, `Ok(false)` when it was used before,
    /// `Err` when the cache cannot tell (refused then, as a replay would be).
    fn first_use<'a>(&'a self, id: &'a str, until: u64) -> BoxFuture<'a, Result<bool, String>>;
}

/// A [`ReplayCache`] in this process's memory, bounded: once full of ids
/// not yet expired, new proofs are refused (never forgotten early, which
/// would let a replay through).
#[derive(Debug)]
pub struct MemoryReplayCache {
    seen: Mutex<HashMap<String, u64>>,
    capacity: usize,
}

impl MemoryReplayCache {
    /// A cache of at most `capacity` ids.
    pub fn new(capacity: usize) -> Self {
        MemoryReplayCache {
            seen: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
        }
    }
}

impl Default for MemoryReplayCache {
    /// 100 000 ids: at a proof per request and a five-minute window, over
    /// 300 requests a second.
    fn default() -> Self {
        MemoryReplayCache::new(100_000)
    }
}

impl ReplayCache for MemoryReplayCache {
    fn first_use<'a>(&'a self, id: &'a str, until: u64) -> BoxFuture<'a, Result<bool, String>> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let result = if seen.contains_key(id) {
            Ok(false)
        } else {
            if seen.len() >= self.capacity {
                let now = now_secs();
                seen.retain(|_, until| *until >= now);
            }
            if seen.len() >= self.capacity {
                Err("too many proofs in the window".to_owned())
            } else {
                seen.insert(id.to_owned(), until);
                Ok(true)
            }
        };
        Box::pin(std::future::ready(result))
    }
}

/// How DPoP proofs are checked: put on a
/// [`BearerAuth`](crate::server::http::BearerAuth) with
/// [`dpop`](crate::server::http::BearerAuth::dpop).
///
/// ```
/// use std::time::Duration;
/// use jrpc::auth::Dpop;
///
/// let dpop = Dpop::require()
///     .window(Duration::from_secs(120))
///     .nonces([7u8; 32]); // replicas given the same key accept each other's nonces
/// assert!(dpop.is_required());
/// ```
#[derive(Clone)]
pub struct Dpop {
    mode: DpopMode,
    window: Duration,
    nonce_key: Option<Arc<ring::hmac::Key>>,
    replay: Arc<dyn ReplayCache>,
    origin: Option<Arc<str>>,
}

impl std::fmt::Debug for Dpop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dpop")
            .field("mode", &self.mode)
            .field("window", &self.window)
            .field("nonces", &self.nonce_key.is_some())
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

/// Why a proof was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProofRefused {
    /// Not a good proof for this request (`invalid_dpop_proof`).
    Invalid(&'static str),
    /// No nonce, or a stale one: the server's current nonce goes back
    /// (`use_dpop_nonce`).
    UseNonce,
    /// Whether the proof was used before cannot be told now.
    Unavailable(String),
}

impl Dpop {
    /// Accepts DPoP-bound tokens beside bearer tokens.
    pub fn allow() -> Self {
        Dpop::new(DpopMode::Allow)
    }

    /// Accepts DPoP-bound tokens only.
    pub fn require() -> Self {
        Dpop::new(DpopMode::Require)
    }

    /// DPoP in `mode`: proofs within a minute of now, no nonces, used
    /// proofs remembered in memory.
    pub fn new(mode: DpopMode) -> Self {
        Dpop {
            mode,
            window: Duration::from_secs(60),
            nonce_key: None,
            replay: Arc::new(MemoryReplayCache::default()),
            origin: None,
        }
    }

    /// How far a proof's `iat` may be from now (either way), and how long
    /// its id is remembered: one minute by default.
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window.max(Duration::from_secs(1));
        self
    }

    /// Requires a server nonce in every proof (RFC 9449 §9), derived from
    /// `secret` and the time: replicas given the same secret accept each
    /// other's nonces; a nonce is good for one window.
    pub fn nonces(mut self, secret: [u8; 32]) -> Self {
        // A key of its own, derived from the secret: a secret that serves
        // elsewhere too (a fleet's requestState key) gives nothing away.
        let master = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &secret);
        let derived = ring::hmac::sign(&master, b"jrpc DPoP nonce key");
        self.nonce_key = Some(Arc::new(ring::hmac::Key::new(
            ring::hmac::HMAC_SHA256,
            derived.as_ref(),
        )));
        self
    }

    /// Where used proof ids are kept (a store the replicas share, say).
    pub fn replay_cache(mut self, cache: impl ReplayCache) -> Self {
        self.replay = Arc::new(cache);
        self
    }

    /// The scheme and authority clients are given for this server
    /// (`https://mcp.example.com`), which `htu` may name: behind a proxy,
    /// the request's own `Host` may differ. `htu` naming the request's
    /// `Host` and path (by either scheme) is accepted too.
    pub fn origin(mut self, origin: impl AsRef<str>) -> Self {
        self.origin = Some(origin.as_ref().trim_end_matches('/').into());
        self
    }

    /// Whether an origin was set.
    pub fn has_origin(&self) -> bool {
        self.origin.is_some()
    }

    /// Whether only DPoP-bound tokens are accepted.
    pub fn is_required(&self) -> bool {
        self.mode == DpopMode::Require
    }

    /// A nonce for clients to put in their next proofs, when nonces are
    /// required.
    pub(crate) fn fresh_nonce(&self) -> Option<String> {
        let key = self.nonce_key.as_ref()?;
        Some(nonce_at(key, now_secs()))
    }

    /// Checks `proof` for a request of `method` to `authority` and `path`
    /// carrying `token`, bound to the key of thumbprint `jkt`.
    pub(crate) async fn check(
        &self,
        proof: &str,
        request: (&str, &str, &str),
        token: &str,
        jkt: &str,
    ) -> Result<(), ProofRefused> {
        let (method, authority, path) = request;
        let claims = self.verified_claims(proof, jkt)?;
        let text = |name: &str| claims.get(name).and_then(Value::as_str);
        let jti = text("jti")
            .filter(|j| !j.is_empty() && j.len() <= 256)
            .ok_or(ProofRefused::Invalid("jti"))?;
        if text("htm") != Some(method) {
            return Err(ProofRefused::Invalid("htm"));
        }
        let htu = text("htu").ok_or(ProofRefused::Invalid("htu"))?;
        if !self.htu_names(htu, authority, path) {
            return Err(ProofRefused::Invalid("htu"));
        }
        let iat = claims
            .get("iat")
            .and_then(Value::as_u64)
            .ok_or(ProofRefused::Invalid("iat"))?;
        let now = now_secs();
        if iat.abs_diff(now) > self.window.as_secs() {
            return Err(ProofRefused::Invalid("iat"));
        }
        let ath = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()));
        if text("ath") != Some(ath.as_str()) {
            return Err(ProofRefused::Invalid("ath"));
        }
        if let Some(key) = &self.nonce_key {
            let good = text("nonce").is_some_and(|n| nonce_is_fresh(key, n, now, self.window.as_secs()));
            if !good {
                return Err(ProofRefused::UseNonce);
            }
        }
        // Last: a proof refused for anything else has not been used.
        let id = format!("{jkt}:{jti}");
        match self.replay.first_use(&id, iat + self.window.as_secs()).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(ProofRefused::Invalid("jti used before")),
            Err(e) => Err(ProofRefused::Unavailable(e)),
        }
    }

    /// The proof's claims, once its header, its key (the one `jkt` names)
    /// and its signature are checked.
    fn verified_claims(
        &self,
        proof: &str,
        jkt: &str,
    ) -> Result<serde_json::Map<String, Value>, ProofRefused> {
        if proof.len() > MAX_PROOF_LEN {
            return Err(ProofRefused::Invalid("too long"));
        }
        let mut parts = proof.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(ProofRefused::Invalid("not a JWT"));
        };
        let header = decode_object(header).ok_or(ProofRefused::Invalid("header"))?;
        if header.get("typ").and_then(Value::as_str) != Some("dpop+jwt") {
            return Err(ProofRefused::Invalid("typ"));
        }
        // Asymmetric algorithms only: no `none`, no HMAC.
        let alg = header
            .get("alg")
            .and_then(Value::as_str)
            .and_then(Algorithm::named)
            .ok_or(ProofRefused::Invalid("alg"))?;
        if header.get("crit").is_some() {
            return Err(ProofRefused::Invalid("crit"));
        }
        let jwk_value = header.get("jwk").ok_or(ProofRefused::Invalid("jwk"))?;
        if jwk_value.get("d").is_some() {
            return Err(ProofRefused::Invalid("jwk holds a private key"));
        }
        let jwk = Jwk::read(jwk_value).ok_or(ProofRefused::Invalid("jwk"))?;
        if !jwk.fits(alg) {
            return Err(ProofRefused::Invalid("alg"));
        }
        if thumbprint(jwk_value).as_deref() != Some(jkt) {
            return Err(ProofRefused::Invalid(
                "the key is not the one the token is bound to",
            ));
        }
        let signature = URL_SAFE_NO_PAD
            .decode(signature)
            .map_err(|_| ProofRefused::Invalid("signature"))?;
        let signed = &proof[..header_and_payload_len(proof)];
        if !jwk.verifies(alg, signed.as_bytes(), &signature) {
            return Err(ProofRefused::Invalid("signature"));
        }
        decode_object(payload).ok_or(ProofRefused::Invalid("payload"))
    }

    /// Whether `htu` names this request, without query or fragment: its
    /// path at the configured origin (the URL clients are given), or at the
    /// host the request names (`Host`, by either scheme: the URL the client
    /// used, `localhost` or an address).
    fn htu_names(&self, htu: &str, authority: &str, path: &str) -> bool {
        if htu.contains(['?', '#']) {
            return false;
        }
        let trim = |p: &str| p.trim_end_matches('/').to_owned();
        let at_origin = self
            .origin
            .as_deref()
            .and_then(|origin| htu.strip_prefix(origin))
            .is_some_and(|rest| (rest.is_empty() || rest.starts_with('/')) && trim(rest) == trim(path));
        if at_origin {
            return true;
        }
        let Some(rest) = htu
            .strip_prefix("https://")
            .or_else(|| htu.strip_prefix("http://"))
        else {
            return false;
        };
        let (host, rest_path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        !authority.is_empty() && host.eq_ignore_ascii_case(authority) && trim(rest_path) == trim(path)
    }
}

/// The JWK thumbprint (RFC 7638) of a public key: the SHA-256 of its
/// required members in lexical order, base64url.
pub fn thumbprint(jwk: &Value) -> Option<String> {
    let field = |name: &str| jwk.get(name).and_then(Value::as_str);
    let members: Vec<(&str, &str)> = match field("kty")? {
        "EC" => vec![
            ("crv", field("crv")?),
            ("kty", "EC"),
            ("x", field("x")?),
            ("y", field("y")?),
        ],
        "RSA" => vec![("e", field("e")?), ("kty", "RSA"), ("n", field("n")?)],
        "OKP" => vec![("crv", field("crv")?), ("kty", "OKP"), ("x", field("x")?)],
        _ => return None,
    };
    let mut canonical = String::from("{");
    for (i, (name, value)) in members.iter().enumerate() {
        if i > 0 {
            canonical.push(',');
        }
        canonical.push_str(&serde_json::to_string(name).ok()?);
        canonical.push(':');
        canonical.push_str(&serde_json::to_string(value).ok()?);
    }
    canonical.push('}');
    Some(URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes())))
}

fn header_and_payload_len(jwt: &str) -> usize {
    jwt.rfind('.').unwrap_or(0)
}

/// A base64url JSON object (a JWT's header or claims), as JWTs are read.
fn decode_object(part: &str) -> Option<serde_json::Map<String, Value>> {
    match super::jwt::decode_json(part)? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// A nonce for time `at`: the time and its HMAC, base64url.
fn nonce_at(key: &ring::hmac::Key, at: u64) -> String {
    let stamp = at.to_be_bytes();
    let tag = ring::hmac::sign(key, &stamp);
    let mut bytes = stamp.to_vec();
    bytes.extend_from_slice(tag.as_ref());
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Whether `nonce` was made with `key` within `window` seconds of `now`.
fn nonce_is_fresh(key: &ring::hmac::Key, nonce: &str, now: u64, window: u64) -> bool {
    let Ok(bytes) = URL_SAFE_NO_PAD.decode(nonce) else {
        return false;
    };
    if bytes.len() != 8 + 32 {
        return false;
    }
    let (stamp, tag) = bytes.split_at(8);
    let Ok(at) = <[u8; 8]>::try_from(stamp).map(u64::from_be_bytes) else {
        return false;
    };
    // `verify` compares in constant time.
    ring::hmac::verify(key, stamp, tag).is_ok() && at <= now + 1 && now.saturating_sub(at) <= window
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{EcdsaKeyPair, KeyPair as _, ECDSA_P256_SHA256_FIXED_SIGNING};
    use serde_json::json;

    struct Key {
        pair: EcdsaKeyPair,
        jwk: Value,
    }

    impl Key {
        fn new() -> Key {
            let rng = SystemRandom::new();
            let der = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
            let pair =
                EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der.as_ref(), &rng).unwrap();
            let point = pair.public_key().as_ref().to_vec();
            let jwk = json!({"kty": "EC", "crv": "P-256",
                "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..])});
            Key { pair, jwk }
        }

        fn jkt(&self) -> String {
            thumbprint(&self.jwk).unwrap()
        }

        fn sign(&self, header: &Value, claims: &Value) -> String {
            let input = format!(
                "{}.{}",
                URL_SAFE_NO_PAD.encode(header.to_string()),
                URL_SAFE_NO_PAD.encode(claims.to_string())
            );
            let signature = self.pair.sign(&SystemRandom::new(), input.as_bytes()).unwrap();
            format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
        }
    }

    const TOKEN: &str = "eyJ.the.token";

    fn claims(jti: &str) -> Value {
        json!({"jti": jti, "htm": "POST", "htu": "https://mcp.example/mcp", "iat": now_secs(),
               "ath": URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, TOKEN.as_bytes()))})
    }

    fn header(key: &Key) -> Value {
        json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": key.jwk})
    }

    async fn check(dpop: &Dpop, proof: &str, jkt: &str) -> Result<(), ProofRefused> {
        dpop.check(proof, ("POST", "mcp.example", "/mcp"), TOKEN, jkt)
            .await
    }

    #[tokio::test]
    async fn a_good_proof_is_accepted_once() {
        let key = Key::new();
        let dpop = Dpop::require();
        let proof = key.sign(&header(&key), &claims("a"));
        assert_eq!(check(&dpop, &proof, &key.jkt()).await, Ok(()));
        assert_eq!(
            check(&dpop, &proof, &key.jkt()).await,
            Err(ProofRefused::Invalid("jti used before"))
        );
    }

    #[tokio::test]
    async fn hostile_proofs_are_refused() {
        let key = Key::new();
        let other = Key::new();
        let dpop = Dpop::require();
        let with = |change: &dyn Fn(&mut Value)| {
            let mut c = claims(&format!("{:?}", std::time::Instant::now()));
            change(&mut c);
            c
        };
        let b64 = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
        let cases: Vec<(&str, String)> = vec![
            (
                "a wrong method",
                key.sign(&header(&key), &with(&|c| c["htm"] = json!("GET"))),
            ),
            (
                "a wrong URL",
                key.sign(
                    &header(&key),
                    &with(&|c| c["htu"] = json!("https://mcp.example/other")),
                ),
            ),
            (
                "another host",
                key.sign(
                    &header(&key),
                    &with(&|c| c["htu"] = json!("https://evil.example/mcp")),
                ),
            ),
            (
                "a query in htu",
                key.sign(
                    &header(&key),
                    &with(&|c| c["htu"] = json!("https://mcp.example/mcp?x")),
                ),
            ),
            (
                "a stale iat",
                key.sign(&header(&key), &with(&|c| c["iat"] = json!(now_secs() - 3600))),
            ),
            (
                "an iat ahead",
                key.sign(&header(&key), &with(&|c| c["iat"] = json!(now_secs() + 3600))),
            ),
            (
                "a wrong ath",
                key.sign(&header(&key), &with(&|c| c["ath"] = json!("AAAA"))),
            ),
            (
                "no ath",
                key.sign(
                    &header(&key),
                    &with(&|c| {
                        c.as_object_mut().unwrap().remove("ath");
                    }),
                ),
            ),
            (
                "no jti",
                key.sign(
                    &header(&key),
                    &with(&|c| {
                        c.as_object_mut().unwrap().remove("jti");
                    }),
                ),
            ),
            ("another key", other.sign(&header(&other), &with(&|_| {}))),
            (
                "a key swapped in the header",
                other.sign(&header(&key), &with(&|_| {})),
            ),
            (
                "a wrong typ",
                key.sign(
                    &json!({"typ": "JWT", "alg": "ES256", "jwk": key.jwk}),
                    &with(&|_| {}),
                ),
            ),
            (
                "alg none",
                format!(
                    "{}.{}.",
                    b64(&json!({"typ": "dpop+jwt", "alg": "none", "jwk": key.jwk})),
                    b64(&with(&|_| {}))
                ),
            ),
            ("an HMAC proof", {
                let h = json!({"typ": "dpop+jwt", "alg": "HS256", "jwk": key.jwk});
                let input = format!("{}.{}", b64(&h), b64(&with(&|_| {})));
                let hkey = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"secret");
                format!(
                    "{input}.{}",
                    URL_SAFE_NO_PAD.encode(ring::hmac::sign(&hkey, input.as_bytes()).as_ref())
                )
            }),
            ("a private key in the header", {
                let mut jwk = key.jwk.clone();
                jwk["d"] = json!("AAAA");
                key.sign(
                    &json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": jwk}),
                    &with(&|_| {}),
                )
            }),
            ("a signature cut", {
                let good = key.sign(&header(&key), &with(&|_| {}));
                good[..good.len() - 4].to_owned()
            }),
            ("not a JWT", "abc".to_owned()),
        ];
        for (what, proof) in cases {
            let refused = check(&dpop, &proof, &key.jkt()).await;
            assert!(
                matches!(refused, Err(ProofRefused::Invalid(_))),
                "{what}: {refused:?}"
            );
        }
    }

    #[tokio::test]
    async fn nonces_are_asked_for_checked_and_shared_by_replicas_with_one_key() {
        let key = Key::new();
        let one = Dpop::require().nonces([9; 32]);
        let two = Dpop::require().nonces([9; 32]);
        let stranger = Dpop::require().nonces([1; 32]);
        // No nonce: ask for one.
        let proof = key.sign(&header(&key), &claims("n0"));
        assert_eq!(check(&one, &proof, &key.jkt()).await, Err(ProofRefused::UseNonce));
        // One replica's nonce is good at the other, not at a stranger.
        let nonce = one.fresh_nonce().unwrap();
        let mut c = claims("n1");
        c["nonce"] = json!(nonce);
        assert_eq!(
            check(&two, &key.sign(&header(&key), &c), &key.jkt()).await,
            Ok(())
        );
        c["jti"] = json!("n2");
        assert_eq!(
            check(&stranger, &key.sign(&header(&key), &c), &key.jkt()).await,
            Err(ProofRefused::UseNonce)
        );
        // A stale nonce is asked again.
        let hmac = one.nonce_key.clone().unwrap();
        c["nonce"] = json!(nonce_at(&hmac, now_secs() - 3600));
        c["jti"] = json!("n3");
        assert_eq!(
            check(&one, &key.sign(&header(&key), &c), &key.jkt()).await,
            Err(ProofRefused::UseNonce)
        );
    }

    #[test]
    fn htu_names_the_request_at_the_origin_given_or_at_its_host() {
        let dpop = Dpop::require().origin("https://mcp.example.com/");
        let names = |htu: &str, host: &str| dpop.htu_names(htu, host, "/mcp");
        assert!(
            names("https://mcp.example.com/mcp", "10.0.0.5:8000"),
            "the origin given"
        );
        assert!(
            names("http://localhost:8000/mcp", "localhost:8000"),
            "the Host the client named"
        );
        assert!(
            names("http://localhost:8000/mcp/", "localhost:8000"),
            "a trailing slash"
        );
        for (htu, host) in [
            ("https://mcp.example.com.evil/mcp", "x"),
            ("https://mcp.example.com/other", "x"),
            ("http://localhost:8000/mcp", "127.0.0.1:8000"),
            ("https://evil.example/mcp", "localhost:8000"),
            ("https://mcp.example.com/mcp?x=1", "x"),
            ("mcp.example.com/mcp", "mcp.example.com"),
        ] {
            assert!(!names(htu, host), "{htu} with Host {host}");
        }
    }

    #[test]
    fn thumbprints_follow_rfc_7638() {
        // RFC 7638 §3.1's example key and thumbprint.
        let jwk = json!({"kty": "RSA", "e": "AQAB", "alg": "RS256", "kid": "2011-04-29",
            "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"});
        assert_eq!(
            thumbprint(&jwk).unwrap(),
            "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
        );
    }

    #[tokio::test]
    async fn the_replay_cache_is_bounded_and_forgets_expired_ids_only() {
        let cache = MemoryReplayCache::new(2);
        let later = now_secs() + 60;
        assert_eq!(cache.first_use("a", later).await, Ok(true));
        assert_eq!(cache.first_use("a", later).await, Ok(false));
        assert_eq!(cache.first_use("b", now_secs() - 1).await, Ok(true));
        // Full: the expired one goes, the live one stays.
        assert_eq!(cache.first_use("c", later).await, Ok(true));
        assert_eq!(cache.first_use("a", later).await, Ok(false));
        assert!(cache.first_use("d", later).await.is_err(), "full of live ids");
    }
}
