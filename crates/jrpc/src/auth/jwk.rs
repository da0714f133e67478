//! JSON Web Keys (RFC 7517): the public keys an issuer signs its tokens
//! with, and the signature algorithms accepted for them. Only asymmetric
//! algorithms exist here, so a token can never be checked with a shared
//! secret (no `none`, no `HS*`: no key confusion).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::Value;

/// A signature algorithm a token may use (RFC 7518, RFC 8037).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Algorithm {
    Rs256,
    Rs384,
    Rs512,
    Ps256,
    Ps384,
    Ps512,
    Es256,
    Es384,
    EdDsa,
}

impl Algorithm {
    /// The algorithm a JOSE header names; `None` for any other (`none`,
    /// `HS256`, ...).
    pub(crate) fn named(name: &str) -> Option<Self> {
        Some(match name {
            "RS256" => Self::Rs256,
            "RS384" => Self::Rs384,
            "RS512" => Self::Rs512,
            "PS256" => Self::Ps256,
            "PS384" => Self::Ps384,
            "PS512" => Self::Ps512,
            "ES256" => Self::Es256,
            "ES384" => Self::Es384,
            "EdDSA" => Self::EdDsa,
            _ => return None,
        })
    }
}

/// One public key of a set.
#[derive(Debug, Clone)]
pub(crate) struct Jwk {
    pub(crate) kid: Option<String>,
    /// The one algorithm the key is for, when the set says.
    alg: Option<Algorithm>,
    key: PublicKey,
}

#[derive(Debug, Clone)]
enum PublicKey {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// An uncompressed point (`0x04 || x || y`) on P-256 or P-384.
    Ec {
        p384: bool,
        point: Vec<u8>,
    },
    Ed25519(Vec<u8>),
}

impl Jwk {
    /// Reads one key of a set; `None` for a key that cannot sign what we
    /// accept (an encryption key, an unknown type or curve, a bad field).
    pub(crate) fn read(key: &Value) -> Option<Jwk> {
        let field = |name: &str| key.get(name).and_then(Value::as_str);
        let bytes = |name: &str| field(name).and_then(|v| URL_SAFE_NO_PAD.decode(v).ok());
        if field("use").is_some_and(|u| u != "sig") {
            return None;
        }
        let alg = match field("alg") {
            Some(name) => Some(Algorithm::named(name)?),
            None => None,
        };
        let public = match (field("kty")?, field("crv")) {
            ("RSA", _) => PublicKey::Rsa {
                n: bytes("n")?,
                e: bytes("e")?,
            },
            ("EC", Some(curve @ ("P-256" | "P-384"))) => {
                let (x, y) = (bytes("x")?, bytes("y")?);
                let size = if curve == "P-256" { 32 } else { 48 };
                if x.len() != size || y.len() != size {
                    return None;
                }
                let mut point = Vec::with_capacity(1 + 2 * size);
                point.push(0x04);
                point.extend_from_slice(&x);
                point.extend_from_slice(&y);
                PublicKey::Ec {
                    p384: curve == "P-384",
                    point,
                }
            }
            ("OKP", Some("Ed25519")) => PublicKey::Ed25519(bytes("x")?),
            _ => return None,
        };
        Some(Jwk {
            kid: field("kid").map(str::to_owned),
            alg,
            key: public,
        })
    }

    /// Whether this key may check a signature made with `alg`.
    pub(crate) fn fits(&self, alg: Algorithm) -> bool {
        if self.alg.is_some_and(|own| own != alg) {
            return false;
        }
        use Algorithm::*;
        matches!(
            (&self.key, alg),
            (
                PublicKey::Rsa { .. },
                Rs256 | Rs384 | Rs512 | Ps256 | Ps384 | Ps512
            ) | (PublicKey::Ec { p384: false, .. }, Es256)
                | (PublicKey::Ec { p384: true, .. }, Es384)
                | (PublicKey::Ed25519(_), EdDsa)
        )
    }

    /// Whether `signature` over `message` was made with this key and `alg`
    /// (which the caller has checked [`fits`](Self::fits)).
    pub(crate) fn verifies(&self, alg: Algorithm, message: &[u8], signature: &[u8]) -> bool {
        use Algorithm::*;
        let checked = match &self.key {
            PublicKey::Rsa { n, e } => {
                let params: &signature::RsaParameters = match alg {
                    Rs256 => &signature::RSA_PKCS1_2048_8192_SHA256,
                    Rs384 => &signature::RSA_PKCS1_2048_8192_SHA384,
                    Rs512 => &signature::RSA_PKCS1_2048_8192_SHA512,
                    Ps256 => &signature::RSA_PSS_2048_8192_SHA256,
                    Ps384 => &signature::RSA_PSS_2048_8192_SHA384,
                    Ps512 => &signature::RSA_PSS_2048_8192_SHA512,
                    _ => return false,
                };
                RsaPublicKeyComponents { n, e }.verify(params, message, signature)
            }
            PublicKey::Ec { p384, point } => {
                let params = if *p384 {
                    &signature::ECDSA_P384_SHA384_FIXED
                } else {
                    &signature::ECDSA_P256_SHA256_FIXED
                };
                UnparsedPublicKey::new(params, point).verify(message, signature)
            }
            PublicKey::Ed25519(x) => {
                UnparsedPublicKey::new(&signature::ED25519, x).verify(message, signature)
            }
        };
        checked.is_ok()
    }
}

/// A key set, as an issuer publishes it at its `jwks_uri`.
///
/// ```
/// let set = jrpc::auth::JwkSet::from_json(r#"{"keys": [{"kty": "OKP", "crv": "Ed25519",
///     "kid": "k1", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#).unwrap();
/// assert_eq!(set.len(), 1);
/// ```
#[derive(Debug, Clone, Default)]
pub struct JwkSet {
    keys: Vec<Jwk>,
}

impl JwkSet {
    /// Reads a key set (`{"keys": [...]}`), keeping the keys that can check
    /// an accepted signature and leaving out the others (encryption keys,
    /// symmetric keys, unknown curves).
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        let value: Value = serde_json::from_str(text)?;
        Ok(Self::from_value(&value))
    }

    pub(crate) fn from_value(value: &Value) -> Self {
        let keys = value
            .get("keys")
            .and_then(Value::as_array)
            .map(|keys| keys.iter().filter_map(Jwk::read).collect())
            .unwrap_or_default();
        JwkSet { keys }
    }

    /// How many usable keys the set has.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether a key of this id is in the set.
    pub(crate) fn has(&self, kid: &str) -> bool {
        self.keys.iter().any(|k| k.kid.as_deref() == Some(kid))
    }

    /// The keys that may check a token signed with `alg` under `kid` (all
    /// that fit, when the token names none).
    pub(crate) fn candidates<'a>(
        &'a self,
        kid: Option<&'a str>,
        alg: Algorithm,
    ) -> impl Iterator<Item = &'a Jwk> + 'a {
        self.keys
            .iter()
            .filter(move |k| kid.map_or(true, |kid| k.kid.as_deref() == Some(kid)) && k.fits(alg))
    }
}
