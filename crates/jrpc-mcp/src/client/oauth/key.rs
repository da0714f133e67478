//! A client's private key, for `private_key_jwt` (RFC 7523 §2.2): the
//! client proves who it is at the token endpoint with an assertion it
//! signs, instead of a secret it sends.

use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _, RsaKeyPair};

use super::error::OAuthError;

/// A private key that signs client assertions: ES256 (P-256), RS256 or
/// EdDSA (Ed25519), read from PKCS#8 (PEM or DER).
pub struct ClientKey {
    key: Signer,
    pub(crate) kid: Option<String>,
}

enum Signer {
    Es256(EcdsaKeyPair),
    Rs256(RsaKeyPair),
    EdDsa(Ed25519KeyPair),
}

impl std::fmt::Debug for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientKey")
            .field("alg", &self.alg())
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl ClientKey {
    /// A key from a PKCS#8 PEM document (`-----BEGIN PRIVATE KEY-----`).
    pub fn from_pem(pem: &str) -> Result<ClientKey, OAuthError> {
        use base64::Engine as _;
        let body: String = pem
            .lines()
            .map(str::trim)
            .skip_while(|line| !line.starts_with("-----BEGIN"))
            .skip(1)
            .take_while(|line| !line.starts_with("-----END"))
            .collect();
        if body.is_empty() {
            return Err(OAuthError::Key("not a PEM document".into()));
        }
        let der = base64::engine::general_purpose::STANDARD
            .decode(body)
            .map_err(|e| OAuthError::Key(format!("the PEM body is not base64: {e}")))?;
        ClientKey::from_pkcs8_der(&der)
    }

    /// A key from PKCS#8 DER: P-256, RSA or Ed25519.
    pub fn from_pkcs8_der(der: &[u8]) -> Result<ClientKey, OAuthError> {
        let rng = SystemRandom::new();
        let key = if let Ok(key) =
            EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
        {
            Signer::Es256(key)
        } else if let Ok(key) = RsaKeyPair::from_pkcs8(der) {
            Signer::Rs256(key)
        } else if let Ok(key) = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der) {
            Signer::EdDsa(key)
        } else {
            return Err(OAuthError::Key(
                "not a PKCS#8 P-256, RSA or Ed25519 private key".into(),
            ));
        };
        Ok(ClientKey { key, kid: None })
    }

    /// Names the key in the assertion's header (`kid`).
    pub fn kid(mut self, kid: impl Into<String>) -> Self {
        self.kid = Some(kid.into());
        self
    }

    /// The JOSE algorithm the key signs with.
    pub fn alg(&self) -> &'static str {
        match self.key {
            Signer::Es256(_) => "ES256",
            Signer::Rs256(_) => "RS256",
            Signer::EdDsa(_) => "EdDSA",
        }
    }

    /// The public half, for a test's verifier: the raw key (an
    /// uncompressed point, the RSA `RSAPublicKey` DER, the Ed25519 bytes).
    pub fn public_key(&self) -> Vec<u8> {
        match &self.key {
            Signer::Es256(key) => key.public_key().as_ref().to_vec(),
            Signer::Rs256(key) => key.public_key().as_ref().to_vec(),
            Signer::EdDsa(key) => key.public_key().as_ref().to_vec(),
        }
    }

    pub(crate) fn sign(&self, message: &[u8]) -> Result<Vec<u8>, OAuthError> {
        let rng = SystemRandom::new();
        let failed = |_| OAuthError::Key("signing failed".into());
        Ok(match &self.key {
            Signer::Es256(key) => key.sign(&rng, message).map_err(failed)?.as_ref().to_vec(),
            Signer::Rs256(key) => {
                let mut signature = vec![0; key.public().modulus_len()];
                key.sign(&signature::RSA_PKCS1_SHA256, &rng, message, &mut signature)
                    .map_err(failed)?;
                signature
            }
            Signer::EdDsa(key) => key.sign(message).as_ref().to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_es256_key_signs_what_its_public_half_verifies() {
        let rng = SystemRandom::new();
        let der = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        use base64::Engine as _;
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(der.as_ref())
        );
        let key = ClientKey::from_pem(&pem).unwrap().kid("k1");
        assert_eq!(key.alg(), "ES256");
        let assertion = key.assertion("client", "http://as/token").unwrap();
        let (input, signature) = assertion.rsplit_once('.').unwrap();
        let signature = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(signature)
            .unwrap();
        signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, key.public_key())
            .verify(input.as_bytes(), &signature)
            .unwrap();
        let claims = input.split('.').nth(1).unwrap();
        let claims: serde_json::Value = serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(claims)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(claims["iss"], "client");
        assert_eq!(claims["sub"], "client");
        assert_eq!(claims["aud"], "http://as/token");
        assert!(ClientKey::from_pem("nothing").is_err());
        assert!(ClientKey::from_pkcs8_der(b"junk").is_err());
    }
}
