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
use crate::auth::{AccessToken, TokenError, TokenVerifier};
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
        }
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
        uri: &http::Uri,
        headers: &http::HeaderMap,
    ) -> Result<AccessToken, Response<B>> {
        let granted = match token_of(uri, headers) {
            Ok(token) => self.verified(&token).await,
            Err(refused) => Err(refused),
        };
        granted.map_err(|refused| self.refusal(&refused))
    }

    async fn verified(&self, token: &str) -> Result<AccessToken, Refused> {
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
            Refused::Invalid => self.respond(
                StatusCode::UNAUTHORIZED,
                Some("invalid_token"),
                None,
                "the token is not valid here",
            ),
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

/// The request's token, taken out before anything is awaited (a request's
/// body need not be `Sync`).
fn token_of(uri: &http::Uri, headers: &http::HeaderMap) -> Result<String, Refused> {
    if query_has_token(uri.query()) {
        return Err(Refused::Request(
            "send the token in the Authorization header, not the URL",
        ));
    }
    bearer_token(headers).map(str::to_owned).ok_or(Refused::Missing)
}

/// The token of `Authorization: Bearer <token>`, when there is exactly one
/// such header.
fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return None;
    };
    let (scheme, token) = value.to_str().ok()?.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
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
        let token = token_of(request.uri(), request.headers());
        Box::pin(async move {
            let granted = match token {
                Ok(token) => auth.verified(&token).await,
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
