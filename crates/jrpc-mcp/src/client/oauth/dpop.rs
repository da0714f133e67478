//! DPoP (RFC 9449, MCP's SEP-1932): tokens bound to a key the client
//! holds, each request carrying a fresh proof signed with it — `DPoP`
//! header, a JWT of `typ: dpop+jwt` with the public key in its header and
//! `htm`, `htu`, `iat`, `jti` (and `ath`, the token's hash, on resource
//! requests; `nonce` when a server asked for one).
//!
//! One ES256 key per client and authorization server, kept with the
//! tokens (the store writes its files `0600`): a token bound to it is good
//! as long as the key is.

use std::sync::Mutex;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use http::HeaderMap;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair as _, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::json;

use super::error::OAuthError;
use super::store::now_secs;

/// The header a server sends a nonce in.
pub(crate) const NONCE_HEADER: &str = "dpop-nonce";

/// The error a server asks for a nonce with.
pub(crate) const USE_NONCE: &str = "use_dpop_nonce";

/// A key proving possession, with the nonces servers handed out for it.
pub(crate) struct DpopKey {
    key: EcdsaKeyPair,
    pkcs8: Vec<u8>,
    jwk: serde_json::Value,
    /// The last nonce the authorization server gave.
    server_nonce: Mutex<Option<String>>,
    /// The last nonce the MCP server (the resource) gave.
    resource_nonce: Mutex<Option<String>>,
}

impl std::fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpopKey")
            .field("jkt", &self.thumbprint())
            .finish_non_exhaustive()
    }
}

/// Which server a nonce came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NonceFrom {
    AuthorizationServer,
    Resource,
}

impl DpopKey {
    /// A new key.
    pub(crate) fn generate() -> Result<DpopKey, OAuthError> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| OAuthError::Key("cannot make a DPoP key".into()))?;
        DpopKey::from_pkcs8(pkcs8.as_ref())
    }

    /// The key kept as PKCS#8 `der`.
    pub(crate) fn from_pkcs8(der: &[u8]) -> Result<DpopKey, OAuthError> {
        let rng = SystemRandom::new();
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
            .map_err(|_| OAuthError::Key("the kept DPoP key is not a P-256 PKCS#8 key".into()))?;
        // An uncompressed point: 0x04, then x and y, 32 bytes each.
        let point = key.public_key().as_ref();
        let (x, y) = point[1..].split_at(32);
        let jwk = json!({
            "kty": "EC",
            "crv": "P-256",
            "x": URL_SAFE_NO_PAD.encode(x),
            "y": URL_SAFE_NO_PAD.encode(y),
        });
        Ok(DpopKey {
            key,
            pkcs8: der.to_vec(),
            jwk,
            server_nonce: Mutex::default(),
            resource_nonce: Mutex::default(),
        })
    }

    /// The key as it is kept: PKCS#8, base64url.
    pub(crate) fn to_kept(&self) -> String {
        URL_SAFE_NO_PAD.encode(&self.pkcs8)
    }

    /// The key from what [`to_kept`](Self::to_kept) wrote.
    pub(crate) fn from_kept(kept: &str) -> Result<DpopKey, OAuthError> {
        let der = URL_SAFE_NO_PAD
            .decode(kept)
            .map_err(|_| OAuthError::Key("the kept DPoP key is not base64url".into()))?;
        DpopKey::from_pkcs8(&der)
    }

    /// The public key's JWK thumbprint (RFC 7638): what a bound token's
    /// `cnf.jkt` names.
    pub(crate) fn thumbprint(&self) -> String {
        // The same computation the resource server checks bound tokens with.
        jrpc::auth::thumbprint(&self.jwk).unwrap_or_default()
    }

    /// A fresh proof for a request of `method` to `url`: for a resource
    /// request, `access_token` is the token it carries. The nonce the
    /// server last gave is in it.
    pub(crate) fn proof(
        &self,
        method: &str,
        url: &str,
        access_token: Option<&str>,
        from: NonceFrom,
    ) -> Result<String, OAuthError> {
        use sha2::Digest as _;
        let mut jti = [0u8; 16];
        getrandom::fill(&mut jti).map_err(|e| OAuthError::Key(format!("no randomness: {e}")))?;
        let mut claims = json!({
            "jti": URL_SAFE_NO_PAD.encode(jti),
            "htm": method,
            "htu": htu(url),
            "iat": now_secs(),
        });
        if let Some(token) = access_token {
            claims["ath"] = json!(URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(token.as_bytes())));
        }
        if let Some(nonce) = self.nonce(from) {
            claims["nonce"] = json!(nonce);
        }
        let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": self.jwk});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self
            .key
            .sign(&SystemRandom::new(), input.as_bytes())
            .map_err(|_| OAuthError::Key("DPoP signing failed".into()))?;
        Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref())))
    }

    fn slot(&self, from: NonceFrom) -> &Mutex<Option<String>> {
        match from {
            NonceFrom::AuthorizationServer => &self.server_nonce,
            NonceFrom::Resource => &self.resource_nonce,
        }
    }

    fn nonce(&self, from: NonceFrom) -> Option<String> {
        self.slot(from).lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Keeps the nonce `headers` carry (any answer may bring a new one);
    /// whether there was one.
    pub(crate) fn take_nonce(&self, from: NonceFrom, headers: &HeaderMap) -> bool {
        let Some(nonce) = headers
            .get(NONCE_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|n| !n.is_empty())
        else {
            return false;
        };
        *self.slot(from).lock().unwrap_or_else(|p| p.into_inner()) = Some(nonce.to_owned());
        true
    }
}

/// `htu`: the request's URL without its query and fragment (RFC 9449
/// §4.2).
pub(crate) fn htu(url: &str) -> &str {
    let end = url.find(['?', '#']).unwrap_or(url.len());
    &url[..end]
}

/// Whether an authorization server binds tokens to ES256 keys: its
/// metadata lists the algorithm.
pub(crate) fn supported(algorithms: Option<&[String]>) -> bool {
    algorithms.is_some_and(|algs| algs.iter().any(|a| a == "ES256"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};

    fn part(jwt: &str, i: usize) -> serde_json::Value {
        let text = URL_SAFE_NO_PAD.decode(jwt.split('.').nth(i).unwrap()).unwrap();
        serde_json::from_slice(&text).unwrap()
    }

    #[test]
    fn a_proof_is_signed_by_the_key_in_its_header_with_every_claim() {
        let key = DpopKey::generate().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(NONCE_HEADER, "n-1".parse().unwrap());
        assert!(key.take_nonce(NonceFrom::Resource, &headers));
        let proof = key
            .proof(
                "POST",
                "https://mcp.example/mcp?x=1#f",
                Some("tok"),
                NonceFrom::Resource,
            )
            .unwrap();
        let header = part(&proof, 0);
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert!(header["jwk"].get("d").is_none(), "no private key");
        let claims = part(&proof, 1);
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["htu"], "https://mcp.example/mcp");
        assert_eq!(claims["nonce"], "n-1");
        // ath: base64url(SHA-256 of the token).
        use sha2::Digest as _;
        assert_eq!(
            claims["ath"],
            URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(b"tok"))
        );
        assert!((claims["iat"].as_u64().unwrap() as i64 - now_secs() as i64).abs() < 5);
        // Signed by the key in its header.
        let (input, signature) = proof.rsplit_once('.').unwrap();
        let x = URL_SAFE_NO_PAD
            .decode(header["jwk"]["x"].as_str().unwrap())
            .unwrap();
        let y = URL_SAFE_NO_PAD
            .decode(header["jwk"]["y"].as_str().unwrap())
            .unwrap();
        let point = [&[4u8][..], &x, &y].concat();
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
            .verify(input.as_bytes(), &URL_SAFE_NO_PAD.decode(signature).unwrap())
            .unwrap();
        // Fresh each time; the server's nonce only where it was given.
        let again = key
            .proof(
                "POST",
                "https://mcp.example/mcp",
                None,
                NonceFrom::AuthorizationServer,
            )
            .unwrap();
        assert_ne!(part(&again, 1)["jti"], claims["jti"]);
        assert!(part(&again, 1).get("nonce").is_none());
        assert!(part(&again, 1).get("ath").is_none());
    }

    #[test]
    fn the_key_is_kept_and_read_back_with_its_thumbprint() {
        let key = DpopKey::generate().unwrap();
        let back = DpopKey::from_kept(&key.to_kept()).unwrap();
        assert_eq!(key.thumbprint(), back.thumbprint());
        assert_eq!(key.thumbprint().len(), 43);
        assert!(DpopKey::from_kept("not a key").is_err());
    }
}
