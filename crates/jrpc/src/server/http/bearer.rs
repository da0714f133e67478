//! The HTTP side: a tower layer that takes the bearer token of each
//! request (`Authorization: Bearer …`, RFC 6750 §2.1: the header only),
//! has it verified, and refuses with the status and `WWW-Authenticate`
//! header the RFC gives. A refused token gets the same answer whatever was
//! wrong with it, so a refusal teaches an attacker nothing.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use tower::{Layer, Service};

use super::exchange::{error_response, ErrorBody};
use super::layers::{Gate as _, RateLimit};
use crate::auth::{AccessToken, Dpop, TokenError, TokenVerifier};
use crate::context::Scopes;
use crate::message::{codes, Error};

/// Requires a bearer token that a [`TokenVerifier`] accepts on every
/// request (but the paths [`exempt`](Self::exempt)ed), granting every
/// scope of [`require_scopes`](Self::require_scopes):
///
/// - no token: `401`, `WWW-Authenticate: Bearer` (with `resource_metadata`
///   and `scope` when set), and a `-32004 Unauthorized` error body;
/// - a token refused, or one that cannot be checked now: `401`,
///   `Bearer error="invalid_token"`, always the same body;
/// - a token without a required scope: `403`,
///   `Bearer error="insufficient_scope", scope="…"`;
/// - a token in the query string (`?access_token=`): `400`,
///   `Bearer error="invalid_request"`.
///
/// A request let through carries the token's [`AccessToken`], the
/// caller's [`Identity`](crate::context::Identity) (its subject) and its [`Scopes`] in its
/// extensions, and so does every call it makes.
#[derive(Clone)]
pub struct BearerAuth {
    verifier: Arc<dyn TokenVerifier>,
    required: Arc<[String]>,
    resource_metadata: Option<Arc<str>>,
    exempt: Arc<[String]>,
    /// Refused requests are charged to the client here, so that tokens
    /// cannot be guessed faster than calls can be made.
    charge: Option<RateLimit>,
    /// DPoP-bound tokens, when accepted.
    dpop: Option<Dpop>,
}

impl std::fmt::Debug for BearerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerAuth")
            .field("required", &self.required)
            .field("resource_metadata", &self.resource_metadata)
            .field("exempt", &self.exempt)
            .finish_non_exhaustive()
    }
}

/// Why a request was refused, and how to say so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// No token at all.
    Missing,
    /// A token, not good here.
    Invalid,
    /// A good token without these scopes.
    Scope(String),
    /// A token somewhere it must not be.
    Request(&'static str),
    /// Tokens cannot be checked now (the issuer's keys cannot be fetched):
    /// `503` with `Retry-After`, not `401` — a client told its good token
    /// is invalid would log in again, in a loop.
    Unavailable,
    /// A DPoP-bound token whose proof is missing or not good for this
    /// request.
    Proof,
    /// A DPoP proof without the server's current nonce.
    UseNonce,
}

/// The signature algorithms DPoP proofs may use, as challenges name them.
const DPOP_ALGS: &str = "ES256 ES384 RS256 RS384 RS512 PS256 PS384 PS512 EdDSA";

/// A token as a request presents it.
struct Presented {
    token: String,
    /// The `DPoP` proof, when the token came as `Authorization: DPoP`.
    proof: Option<Result<String, ()>>,
    method: String,
    authority: String,
    path: String,
}

/// How long a client waits before asking again while tokens cannot be
/// checked.
const RETRY_UNAVAILABLE_SECS: u64 = 5;

impl BearerAuth {
    /// Tokens checked by `verifier`.
    pub fn new(verifier: impl TokenVerifier) -> Self {
        BearerAuth {
            verifier: Arc::new(verifier),
            required: Arc::new([]),
            resource_metadata: None,
            exempt: Arc::new([]),
            charge: None,
            dpop: None,
        }
    }

    /// Accepts DPoP-bound tokens (RFC 9449) as `dpop` says: beside bearer
    /// tokens, or only them. A bound token (`cnf.jkt`) comes as
    /// `Authorization: DPoP <token>` with a `DPoP` proof of the key it is
    /// bound to; sent as a bearer token, it is refused. Refusals say
    /// `WWW-Authenticate: DPoP error="invalid_dpop_proof"` (or
    /// `invalid_token`, or `use_dpop_nonce` with a `DPoP-Nonce`), all with
    /// the same body.
    ///
    /// ```
    /// use jrpc::auth::{Dpop, JwtVerifier};
    /// use jrpc::server::http::BearerAuth;
    ///
    /// let verifier = JwtVerifier::builder("https://auth.example.com").audience("https://mcp.example.com/").build();
    /// let bearer = BearerAuth::new(verifier).dpop(Dpop::require().origin("https://mcp.example.com"));
    /// ```
    pub fn dpop(mut self, dpop: Dpop) -> Self {
        self.dpop = Some(dpop);
        self
    }

    /// Charges every refused request to `limit` (the one calls are charged
    /// to, say): a client guessing tokens is slowed down as one making
    /// calls is, and gets `429` once over its budget.
    pub fn charge_refusals(mut self, limit: RateLimit) -> Self {
        self.charge = Some(limit);
        self
    }

    /// Scopes every token must grant.
    pub fn require_scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let mut required: Vec<String> = self.required.to_vec();
        required.extend(scopes.into_iter().map(Into::into));
        self.required = required.into();
        self
    }

    /// The URL of this resource's protected resource metadata (RFC 9728),
    /// named in every `WWW-Authenticate` header so that a client can find
    /// where to get a token.
    pub fn resource_metadata(mut self, url: impl Into<String>) -> Self {
        self.resource_metadata = Some(url.into().into());
        self
    }

    /// Lets requests for `path` through without a token (a health check,
    /// the metadata document).
    pub fn exempt(mut self, path: impl Into<String>) -> Self {
        let mut exempt = self.exempt.to_vec();
        exempt.push(path.into());
        self.exempt = exempt.into();
        self
    }

    /// The scopes every token must grant.
    pub fn required_scopes(&self) -> &[String] {
        &self.required
    }

    /// Checks the token of a request (its URI and headers): its grant, or
    /// the response refusing it. For services that check tokens themselves
    /// (with scopes of their own per request, say) rather than through the
    /// layer.
    pub async fn check<B: ErrorBody>(
        &self,
        method: &http::Method,
        uri: &http::Uri,
        headers: &http::HeaderMap,
    ) -> Result<AccessToken, Response<B>> {
        let granted = match self.presented(method, uri, headers) {
            Ok(presented) => self.verified(&presented).await,
            Err(refused) => Err(refused),
        };
        granted.map_err(|refused| self.refusal(&refused))
    }

    /// The token (and proof) of a request, taken out before anything is
    /// awaited (a request's body need not be `Sync`).
    fn presented(
        &self,
        method: &http::Method,
        uri: &http::Uri,
        headers: &http::HeaderMap,
    ) -> Result<Presented, Refused> {
        if query_has_token(uri.query()) {
            return Err(Refused::Request(
                "send the token in the Authorization header, not the URL",
            ));
        }
        let (scheme, token) = authorization(headers).ok_or(Refused::Missing)?;
        let proof = if scheme.eq_ignore_ascii_case("bearer") {
            None
        } else if scheme.eq_ignore_ascii_case("dpop") && self.dpop.is_some() {
            // Exactly one proof (RFC 9449 §4.3).
            let mut proofs = headers.get_all("dpop").iter();
            Some(match (proofs.next(), proofs.next()) {
                (Some(proof), None) => proof.to_str().map(str::to_owned).map_err(|_| ()),
                _ => Err(()),
            })
        } else {
            return Err(Refused::Missing);
        };
        let authority = uri
            .authority()
            .map(|a| a.as_str().to_owned())
            .or_else(|| headers.get(header::HOST)?.to_str().ok().map(str::to_owned))
            .unwrap_or_default();
        Ok(Presented {
            token: token.to_owned(),
            proof,
            method: method.as_str().to_owned(),
            authority,
            path: uri.path().to_owned(),
        })
    }

    async fn verified(&self, presented: &Presented) -> Result<AccessToken, Refused> {
        let token = self.verified_token(&presented.token).await?;
        let bound = token
            .claims
            .get("cnf")
            .and_then(|cnf| cnf.get("jkt"))
            .and_then(serde_json::Value::as_str);
        match (&self.dpop, &presented.proof, bound) {
            // A bound token is good only with its proof.
            (_, None, Some(_)) => {
                tracing::debug!("a DPoP-bound token was sent as a bearer token");
                Err(Refused::Invalid)
            }
            (Some(dpop), None, None) if dpop.is_required() => Err(Refused::Invalid),
            (Some(_), Some(_), None) => {
                tracing::debug!("a bearer token was sent as DPoP");
                Err(Refused::Invalid)
            }
            (Some(dpop), Some(proof), Some(jkt)) => {
                let proof = proof.as_deref().map_err(|()| Refused::Proof)?;
                let request = (
                    presented.method.as_str(),
                    presented.authority.as_str(),
                    presented.path.as_str(),
                );
                match dpop.check(proof, request, &presented.token, jkt).await {
                    Ok(()) => Ok(token),
                    Err(crate::auth::dpop::ProofRefused::Invalid(why)) => {
                        tracing::debug!(why, "DPoP proof refused");
                        Err(Refused::Proof)
                    }
                    Err(crate::auth::dpop::ProofRefused::UseNonce) => Err(Refused::UseNonce),
                    Err(crate::auth::dpop::ProofRefused::Unavailable(why)) => {
                        tracing::warn!(%why, "DPoP proof not checked");
                        Err(Refused::Unavailable)
                    }
                }
            }
            _ => Ok(token),
        }
    }

    async fn verified_token(&self, token: &str) -> Result<AccessToken, Refused> {
        let token = self.verifier.verify(token).await.map_err(|e| match &e {
            TokenError::Unavailable(_) => {
                tracing::warn!("bearer token not checked: {e}");
                Refused::Unavailable
            }
            _ => {
                tracing::debug!("bearer token refused: {e}");
                Refused::Invalid
            }
        })?;
        if self.required.iter().any(|s| !token.has_scope(s)) {
            return Err(Refused::Scope(self.required.join(" ")));
        }
        Ok(token)
    }

    /// The response for a refusal: status, `WWW-Authenticate`, body.
    pub(crate) fn refusal<B: ErrorBody>(&self, refused: &Refused) -> Response<B> {
        if self.dpop.is_some() {
            if let Some(response) = self.dpop_refusal(refused) {
                return response;
            }
        }
        match refused {
            Refused::Missing => {
                let scope = (!self.required.is_empty()).then(|| self.required.join(" "));
                self.respond(
                    StatusCode::UNAUTHORIZED,
                    None,
                    scope.as_deref(),
                    "send Authorization: Bearer <token>",
                )
            }
            Refused::Invalid | Refused::Proof | Refused::UseNonce => {
                self.respond(StatusCode::UNAUTHORIZED, Some("invalid_token"), None, INVALID)
            }
            Refused::Scope(needed) => self.insufficient_scope(needed, "the token lacks a scope this needs"),
            Refused::Request(why) => {
                self.respond(StatusCode::BAD_REQUEST, Some("invalid_request"), None, why)
            }
            Refused::Unavailable => {
                // No challenge: nothing about the token is wrong.
                let error = Error::new(codes::SERVER_BUSY, "Service unavailable").with_data(
                    "tokens cannot be checked now: the authorization server's keys cannot be fetched",
                );
                let mut response: Response<B> = error_response(StatusCode::SERVICE_UNAVAILABLE, error);
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_UNAVAILABLE_SECS));
                response
            }
        }
    }

    /// A refusal where DPoP is accepted: `DPoP` challenges (beside the
    /// `Bearer` one while bearer tokens are accepted too), the same body
    /// for every token or proof refused. `None` leaves it to the bearer
    /// refusals (a scope, a bad request, an outage).
    fn dpop_refusal<B: ErrorBody>(&self, refused: &Refused) -> Option<Response<B>> {
        let dpop = self.dpop.as_ref()?;
        let (error, nonce) = match refused {
            Refused::Missing => (None, None),
            Refused::Invalid => (Some("invalid_token"), None),
            Refused::Proof => (Some("invalid_dpop_proof"), None),
            Refused::UseNonce => (Some("use_dpop_nonce"), dpop.fresh_nonce()),
            _ => return None,
        };
        let mut params = vec![format!("algs=\"{DPOP_ALGS}\"")];
        if let Some(error) = error {
            params.insert(0, format!("error=\"{error}\""));
        }
        if let Some(url) = &self.resource_metadata {
            params.push(format!("resource_metadata=\"{}\"", quoted(url)));
        }
        let data = if matches!(refused, Refused::Missing) {
            "send Authorization: DPoP <token> with a DPoP proof"
        } else {
            INVALID
        };
        let error_body = Error::new(codes::UNAUTHORIZED, "Unauthorized").with_data(data);
        let mut response: Response<B> = error_response(StatusCode::UNAUTHORIZED, error_body);
        let headers = response.headers_mut();
        // While bearer tokens are accepted too, a client without a token
        // may use either.
        if matches!(refused, Refused::Missing) && !dpop.is_required() {
            let mut bearer = String::from("Bearer");
            if let Some(url) = &self.resource_metadata {
                bearer.push_str(&format!(" resource_metadata=\"{}\"", quoted(url)));
            }
            if let Ok(value) = HeaderValue::from_str(&bearer) {
                headers.append(header::WWW_AUTHENTICATE, value);
            }
        }
        if let Ok(value) = HeaderValue::from_str(&format!("DPoP {}", params.join(", "))) {
            headers.append(header::WWW_AUTHENTICATE, value);
        }
        if let Some(value) = nonce.and_then(|n| HeaderValue::from_str(&n).ok()) {
            headers.insert("dpop-nonce", value);
        }
        Some(response)
    }

    /// `403` with `Bearer error="insufficient_scope", scope="…"`: what a
    /// client steps up with. `scope` is every scope to ask for (space
    /// separated); `why` goes in the error body's `data`. For checks of
    /// your own (a scope per tool, say).
    pub fn insufficient_scope<B: ErrorBody>(&self, scope: &str, why: &str) -> Response<B> {
        self.respond(
            StatusCode::FORBIDDEN,
            Some("insufficient_scope"),
            Some(scope),
            why,
        )
    }

    /// A refusal with its challenge, its parameters in the order the MCP
    /// specification's examples give: the error, then (for a scope
    /// refusal) the scope, then where the metadata is, then the scope to
    /// ask for on a first request.
    fn respond<B: ErrorBody>(
        &self,
        status: StatusCode,
        error: Option<&str>,
        scope: Option<&str>,
        data: &str,
    ) -> Response<B> {
        let mut params = Vec::new();
        if let Some(error) = error {
            params.push(format!("error=\"{error}\""));
        }
        let scope = scope.map(|scope| format!("scope=\"{}\"", quoted(scope)));
        let stepping_up = status == StatusCode::FORBIDDEN;
        if stepping_up {
            params.extend(scope.clone());
        }
        if let Some(url) = &self.resource_metadata {
            params.push(format!("resource_metadata=\"{}\"", quoted(url)));
        }
        if !stepping_up {
            params.extend(scope);
        }
        let mut challenge = String::from("Bearer");
        if !params.is_empty() {
            challenge.push(' ');
            challenge.push_str(&params.join(", "));
        }
        let message = if stepping_up { "Forbidden" } else { "Unauthorized" };
        let error = Error::new(codes::UNAUTHORIZED, message).with_data(data);
        let mut response: Response<B> = error_response(status, error);
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }

    fn exempted<T>(&self, request: &Request<T>) -> bool {
        self.exempt.iter().any(|p| p == request.uri().path())
    }
}

/// What every refused token or proof is told: the same, whatever was
/// wrong.
const INVALID: &str = "the token is not valid here";

/// The scheme and token of the one `Authorization` header, when there is
/// exactly one.
fn authorization(headers: &http::HeaderMap) -> Option<(&str, &str)> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return None;
    };
    let (scheme, token) = value.to_str().ok()?.split_once(' ')?;
    let token = token.trim();
    (!token.is_empty()).then_some((scheme, token))
}

/// Whether a query string carries `access_token` (RFC 6750 §2.3, which
/// OAuth 2.1 forbids: URLs end up in logs).
fn query_has_token(query: Option<&str>) -> bool {
    query.is_some_and(|q| {
        q.split('&')
            .any(|pair| pair.split('=').next() == Some("access_token"))
    })
}

/// A value inside a quoted-string: quotes and backslashes escaped.
fn quoted(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"")
}

impl<S> Layer<S> for BearerAuth {
    type Service = BearerService<S>;

    fn layer(&self, inner: S) -> BearerService<S> {
        BearerService {
            auth: self.clone(),
            inner,
        }
    }
}

/// A service behind [`BearerAuth`].
#[derive(Debug, Clone)]
pub struct BearerService<S> {
    auth: BearerAuth,
    inner: S,
}

impl<S, Req, Res> Service<Request<Req>> for BearerService<S>
where
    S: Service<Request<Req>, Response = Response<Res>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    Req: http_body::Body + Send + 'static,
    Res: ErrorBody,
{
    type Response = Response<Res>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Res>, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Req>) -> Self::Future {
        if self.auth.exempted(&request) {
            return Box::pin(self.inner.call(request));
        }
        // The clone is the one that was ready; the one kept is for the next
        // request (tower's usual dance).
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        let auth = self.auth.clone();
        let presented = auth.presented(request.method(), request.uri(), request.headers());
        Box::pin(async move {
            let granted = match presented {
                Ok(presented) => auth.verified(&presented).await,
                Err(refused) => Err(refused),
            };
            match granted {
                Ok(token) => {
                    let extensions = request.extensions_mut();
                    if let Some(identity) = token.identity() {
                        extensions.insert(identity);
                    }
                    extensions.insert(Scopes::new(token.scopes.iter().cloned()));
                    extensions.insert(Arc::new(token));
                    inner.call(request).await
                }
                Err(refused) => {
                    // The body is not read: a request that has one ends
                    // the connection, saying so.
                    let body = request.body();
                    if let Some(over) = auth.charge.as_ref().and_then(|limit| limit.refuse(&request)) {
                        return Ok(super::exchange::refused_unread(body, over.map(Res::from_full)));
                    }
                    Ok(super::exchange::refused_unread(body, auth.refusal(&refused)))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The token of `Authorization: Bearer <token>`, when there is exactly
    /// one such header.
    fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
        authorization(headers)
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token)
    }

    #[test]
    fn tokens_are_taken_from_one_authorization_header_only() {
        let with = |values: &[&str]| {
            let mut headers = http::HeaderMap::new();
            for v in values {
                headers.append(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            }
            headers
        };
        let cases: [(&[&str], Option<&str>); 7] = [
            (&["Bearer abc"], Some("abc")),
            (&["bearer  abc "], Some("abc")),
            (&["Basic abc"], None),
            (&["Bearer"], None),
            (&["Bearer "], None),
            (&["Bearer a", "Bearer b"], None),
            (&[], None),
        ];
        for (values, expected) in cases {
            assert_eq!(bearer_token(&with(values)), expected, "{values:?}");
        }
        for (query, has) in [
            (Some("access_token=x"), true),
            (Some("a=1&access_token"), true),
            (Some("my_access_token=x"), false),
            (None, false),
        ] {
            assert_eq!(query_has_token(query), has, "{query:?}");
        }
    }
}
