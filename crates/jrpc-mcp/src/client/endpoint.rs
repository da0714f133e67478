//! The Streamable HTTP endpoint as the client sends to it: the HTTP
//! client for its URL and, with OAuth, the token that goes with every
//! request, renewed when the server refuses it.

#[cfg(feature = "oauth")]
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method};
use jrpc::client::HttpClient;
use jrpc::CallError;

use super::deadline::Deadline;

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
    /// Each attempt is built afresh (the token it carries); the time a
    /// login takes is given back to `deadline`, the call's, when there is
    /// one.
    pub(crate) async fn send(
        &self,
        method: Method,
        headers: HeaderMap,
        body: Bytes,
        deadline: Option<&Deadline>,
    ) -> Result<http::Response<jrpc::client::ResponseBody>, CallError> {
        #[cfg(feature = "oauth")]
        if let Some(session) = &self.oauth {
            return self
                .send_authorized(session, method, headers, body, deadline)
                .await;
        }
        let _ = deadline;
        self.http.send_streaming(method, headers, body).await
    }

    /// Sends a request nobody waits on (the session's GET stream, its
    /// DELETE): with the token held, but a refusal starts no login (no
    /// browser opening from a background task, or at exit).
    pub(crate) async fn send_in_background(
        &self,
        method: Method,
        #[allow(unused_mut)] mut headers: HeaderMap,
        body: Bytes,
    ) -> Result<http::Response<jrpc::client::ResponseBody>, CallError> {
        #[cfg(feature = "oauth")]
        if let Some(session) = &self.oauth {
            authorize(session, &method, &mut headers)?;
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
        deadline: Option<&Deadline>,
    ) -> Result<http::Response<jrpc::client::ResponseBody>, CallError> {
        use http::StatusCode;
        use http_body_util::BodyExt as _;

        use super::oauth::Renewed;
        let fail = |e: super::oauth::OAuthError| CallError::Transport(Arc::new(e));
        // A 401 may be answered by a refresh, then (if the refreshed token
        // is refused too) by one login; a 403 by `max_step_ups` step-ups;
        // a 401 asking for a DPoP nonce by sending again with it, twice at
        // most.
        let (mut refreshed, mut authorized, mut step_ups, mut nonces) = (false, false, 0, 0);
        // Renewals elsewhere (another request's, another process's) are
        // waited for a few times, not forever.
        let mut rounds = 0;
        loop {
            rounds += 1;
            // Each attempt carries its own proof (DPoP): built here.
            let mut request_headers = headers.clone();
            let sent = session.bearer();
            authorize(session, &method, &mut request_headers)?;
            let response = self
                .http
                .send_streaming(method.clone(), request_headers, body.clone())
                .await?;
            let status = response.status();
            if session.dpop_nonce(status, response.headers()) && nonces < 2 && rounds <= 8 {
                nonces += 1;
                let (_, refused) = response.into_parts();
                let _ = http_body_util::Limited::new(refused, 64 * 1024).collect().await;
                continue;
            }
            let again = match status {
                _ if rounds > 8 => false,
                StatusCode::UNAUTHORIZED => !authorized,
                StatusCode::FORBIDDEN if insufficient_scope(response.headers()) => {
                    if step_ups >= session.max_step_ups() {
                        return Err(fail(super::oauth::OAuthError::StepUpLimit(step_ups)));
                    }
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
            // The call's deadline is held while the token is renewed: a
            // login (this request's, or another's it waited for) is the
            // user's time, not the server's, and is given back; a refresh
            // counts.
            let renewing = deadline.map(Deadline::pause);
            let renewed = session
                .renew(status, &parts.headers, sent.as_deref(), !refreshed)
                .await
                .map_err(fail)?;
            if let (Some(pause), Renewed::Authorized | Renewed::Elsewhere) = (renewing, &renewed) {
                pause.give_back();
            }
            match (status, renewed) {
                (_, Renewed::Elsewhere) => {}
                (StatusCode::FORBIDDEN, _) => step_ups += 1,
                (_, Renewed::Refreshed) => refreshed = true,
                (_, Renewed::Authorized) => authorized = true,
            }
        }
    }
}

/// Puts the token held (and its DPoP proof, for a bound one) on a
/// request; nothing while none is held.
#[cfg(feature = "oauth")]
fn authorize(
    session: &super::oauth::Session,
    method: &Method,
    headers: &mut HeaderMap,
) -> Result<(), CallError> {
    let authorization = session
        .authorization(method)
        .map_err(|e| CallError::Transport(Arc::new(e)))?;
    if let Some(authorization) = authorization {
        headers.insert(http::header::AUTHORIZATION, authorization.authorization);
        if let Some(proof) = authorization.proof {
            headers.insert(http::HeaderName::from_static("dpop"), proof);
        }
    }
    Ok(())
}

/// Whether a `403` is the server asking for more scopes.
#[cfg(feature = "oauth")]
fn insufficient_scope(headers: &HeaderMap) -> bool {
    super::oauth::challenge_error(headers).as_deref() == Some("insufficient_scope")
}
