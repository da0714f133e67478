//! The Streamable HTTP endpoint as the client sends to it: the HTTP
//! client for its URL and, with OAuth, the token that goes with every
//! request, renewed when the server refuses it.

#[cfg(feature = "oauth")]
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method};
use jrpc::client::HttpClient;
use jrpc::CallError;

/// Where every request of a client over HTTP goes.
#[derive(Clone)]
pub(crate) struct Endpoint {
    http: HttpClient,
    #[cfg(feature = "oauth")]
    oauth: Option<Arc<super::oauth::Session>>,
}

impl Endpoint {
    pub(crate) fn new(http: HttpClient) -> Self {
        Endpoint {
            http,
            #[cfg(feature = "oauth")]
            oauth: None,
        }
    }

    /// Authorizes every request with `session`'s token.
    #[cfg(feature = "oauth")]
    pub(crate) fn with_oauth(mut self, session: super::oauth::Session) -> Self {
        self.oauth = Some(Arc::new(session));
        self
    }

    /// Sends one request, its body still streaming in the response. With
    /// OAuth: a `401` gets a new token (refreshed, else logged in for)
    /// and the request is sent again, once; a `403 insufficient_scope`
    /// asks for the scopes the server names, a bounded number of times.
    pub(crate) async fn send(
        &self,
        method: Method,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<http::Response<hyper::body::Incoming>, CallError> {
        #[cfg(feature = "oauth")]
        if let Some(session) = &self.oauth {
            return self.send_authorized(session, method, headers, body).await;
        }
        self.http.send_streaming(method, headers, body).await
    }

    #[cfg(feature = "oauth")]
    async fn send_authorized(
        &self,
        session: &super::oauth::Session,
        method: Method,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<http::Response<hyper::body::Incoming>, CallError> {
        use http::StatusCode;
        use http_body_util::BodyExt as _;

        let fail = |e: super::oauth::OAuthError| CallError::Transport(Arc::new(e));
        let (mut logged_in, mut step_ups) = (false, 0);
        loop {
            let mut request_headers = headers.clone();
            let sent = session.bearer();
            if let Some(token) = &sent {
                let value = http::HeaderValue::from_str(&format!("Bearer {token}"))
                    .map_err(|_| CallError::Encode("the access token is not a valid header value".into()))?;
                request_headers.insert(http::header::AUTHORIZATION, value);
            }
            let response = self
                .http
                .send_streaming(method.clone(), request_headers, body.clone())
                .await?;
            let status = response.status();
            let again = match status {
                StatusCode::UNAUTHORIZED => !logged_in,
                StatusCode::FORBIDDEN if insufficient_scope(response.headers()) => {
                    if step_ups >= session.max_step_ups() {
                        return Err(fail(super::oauth::OAuthError::StepUpLimit(step_ups)));
                    }
                    step_ups += 1;
                    true
                }
                _ => false,
            };
            if !again {
                return Ok(response);
            }
            let (parts, refused) = response.into_parts();
            // Read to its end (it is small): the connection is kept.
            let _ = http_body_util::Limited::new(refused, 64 * 1024).collect().await;
            session
                .renew(status, &parts.headers, sent.as_deref())
                .await
                .map_err(fail)?;
            logged_in = logged_in || status == StatusCode::UNAUTHORIZED;
        }
    }
}

/// Whether a `403` is the server asking for more scopes.
#[cfg(feature = "oauth")]
fn insufficient_scope(headers: &HeaderMap) -> bool {
    super::oauth::challenge_error(headers).as_deref() == Some("insufficient_scope")
}
