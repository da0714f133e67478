//! Bearer tokens for HTTP and WebSocket servers, as an OAuth 2.1 resource
//! server checks them: a [`TokenVerifier`] says whether a token is good
//! and what it grants, [`JwtVerifier`] checks JWT access tokens against
//! their issuer's published keys. The HTTP server's
//! [`BearerAuth`](crate::server::http::BearerAuth) is the tower layer that
//! asks for a token, refuses with `401`/`403` and the `WWW-Authenticate`
//! header RFC 6750 gives, and hands the token's subject and scopes to the
//! calls: this module verifies tokens, the server's layer uses it.
//!
//! ```no_run
//! use jrpc::auth::JwtVerifier;
//! use jrpc::server::http::{BearerAuth, HttpServer};
//!
//! # fn app(router: jrpc::Router) {
//! let verifier = JwtVerifier::builder("https://auth.example.com")
//!     .audience("https://api.example.com/")
//!     .build();
//! let server = HttpServer::new(router).bearer(BearerAuth::new(verifier).require_scopes(["rpc"]));
//! # let _ = server;
//! # }
//! ```
//!
//! A call then sees its caller's [`Identity`](crate::context::Identity)
//! (the token's `sub`) and [`Scopes`](crate::context::Scopes), so that
//! [`Authorize`](crate::middleware::Authorize) can require a scope per
//! method.

pub(crate) mod dpop;
mod introspection;
mod issuer;
mod jwk;
mod jwt;
mod token;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub use dpop::{thumbprint, Dpop, DpopMode, MemoryReplayCache, ReplayCache};
pub use introspection::IntrospectionVerifier;
pub use issuer::metadata_urls;
pub use jwk::JwkSet;
pub use token::{AccessToken, BoxFuture, TokenError, TokenVerifier};

/// Checks JWT access tokens (RFC 9068) issued by one authorization server
/// for one resource: the signature with the issuer's published keys (read
/// from its metadata's `jwks_uri`, cached, fetched again for an unknown
/// key id at most once per [`refetch_cooldown`](JwtVerifierBuilder::refetch_cooldown)),
/// only asymmetric algorithms (RS256/384/512, PS256/384/512, ES256/384,
/// EdDSA), then `iss`, `aud` (must name the resource exactly), `exp`
/// (required) and `nbf`, with a small leeway for clock skew.
#[derive(Clone)]
pub struct JwtVerifier {
    keys: Keys,
    audience: String,
    leeway: Duration,
}

#[derive(Clone)]
enum Keys {
    /// Given once, never fetched.
    Fixed {
        issuer: String,
        keys: Arc<JwkSet>,
    },
    Issuer(Arc<issuer::IssuerKeys>),
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let issuer = match &self.keys {
            Keys::Fixed { issuer, .. } => issuer.clone(),
            Keys::Issuer(keys) => keys.issuer(),
        };
        f.debug_struct("JwtVerifier")
            .field("issuer", &issuer)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

impl JwtVerifier {
    /// A verifier for tokens of `issuer` (its URL, as in its metadata's
    /// `issuer`); set the [`audience`](JwtVerifierBuilder::audience).
    pub fn builder(issuer: impl Into<String>) -> JwtVerifierBuilder {
        JwtVerifierBuilder {
            issuer: issuer.into(),
            audience: String::new(),
            leeway: Duration::from_secs(30),
            jwks_uri: None,
            keys: None,
            cooldown: Duration::from_secs(2),
        }
    }

    /// The audience tokens must name.
    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// Fetches the issuer's metadata and keys soon (half a second from now),
    /// in the background, instead of on the first token: a server learns at
    /// start (a warning
    /// naming the issuer and the error) when its authorization server
    /// cannot be reached, and keeps trying with backoff (1 s, doubling, up
    /// to a minute) until the keys come. Meanwhile tokens are answered
    /// `503` by the bearer layer. Call it within a tokio runtime (outside
    /// one it does nothing); keys given with `keys` need no fetching.
    pub fn warm_up(&self) {
        if let Keys::Issuer(source) = &self.keys {
            source.warm_up();
        }
    }

    async fn check(&self, token: &str) -> Result<AccessToken, TokenError> {
        let parsed = jwt::parse(token).map_err(|e| TokenError::Invalid(e.to_string()))?;
        let (issuer, keys) = match &self.keys {
            Keys::Fixed { issuer, keys } => (issuer.clone(), Arc::clone(keys)),
            Keys::Issuer(source) => {
                let keys = source
                    .keys(parsed.kid.as_deref())
                    .await
                    .map_err(TokenError::Unavailable)?;
                (source.issuer(), keys)
            }
        };
        let expected = jwt::Expected {
            issuer,
            audience: self.audience.clone(),
            leeway: self.leeway,
        };
        jwt::check(&parsed, &keys, &expected, SystemTime::now())
            .map_err(|e| TokenError::Invalid(e.to_string()))
    }
}

impl TokenVerifier for JwtVerifier {
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<AccessToken, TokenError>> {
        Box::pin(self.check(token))
    }
}

/// Settings of a [`JwtVerifier`].
#[derive(Debug, Clone)]
pub struct JwtVerifierBuilder {
    issuer: String,
    audience: String,
    leeway: Duration,
    jwks_uri: Option<String>,
    keys: Option<JwkSet>,
    cooldown: Duration,
}

impl JwtVerifierBuilder {
    /// The resource tokens must be for: `aud` must name it exactly (RFC
    /// 8707's resource indicator, the server's canonical URL).
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = audience.into();
        self
    }

    /// Clock skew allowed on `exp` and `nbf` (default 30 s).
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    /// Where the issuer's keys are, when its metadata is not to be read.
    pub fn jwks_uri(mut self, uri: impl Into<String>) -> Self {
        self.jwks_uri = Some(uri.into());
        self
    }

    /// Fixed keys: nothing is fetched (tests, or keys distributed by hand).
    pub fn keys(mut self, keys: JwkSet) -> Self {
        self.keys = Some(keys);
        self
    }

    /// The least time between two fetches of the key set for a key id it
    /// lacks (default 2 s): a key newly published is accepted within
    /// that, and tokens with made-up key ids cannot make the server hammer
    /// its issuer.
    pub fn refetch_cooldown(mut self, cooldown: Duration) -> Self {
        self.cooldown = cooldown;
        self
    }

    /// The verifier. Nothing is fetched until the first token.
    pub fn build(self) -> JwtVerifier {
        let keys = match self.keys {
            Some(keys) => Keys::Fixed {
                issuer: self.issuer,
                keys: Arc::new(keys),
            },
            None => Keys::Issuer(Arc::new(issuer::IssuerKeys::new(
                self.issuer,
                self.jwks_uri,
                self.cooldown,
            ))),
        };
        JwtVerifier {
            keys,
            audience: self.audience,
            leeway: self.leeway,
        }
    }
}
