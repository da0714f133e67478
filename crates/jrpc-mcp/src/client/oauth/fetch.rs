//! The client's own HTTP requests to authorization servers and metadata
//! documents: one request, bounded in time and size, the answer read whole.

use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use http_body_util::{BodyExt as _, Limited};
use serde_json::Value;

use super::error::OAuthError;

/// The most of an answer read: metadata and token responses are small.
const MAX_ANSWER: usize = 1024 * 1024;
const TIMEOUT: Duration = Duration::from_secs(10);

/// An answer: its status, headers and body.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Answer {
    /// The body as a JSON object, when it is one.
    pub(crate) fn json(&self) -> Option<serde_json::Map<String, Value>> {
        match serde_json::from_slice(&self.body) {
            Ok(Value::Object(map)) => Some(map),
            _ => None,
        }
    }
}

/// Sends one request to `url`.
pub(crate) async fn send(
    method: Method,
    url: &str,
    mut headers: HeaderMap,
    body: Bytes,
) -> Result<Answer, OAuthError> {
    let failed = |why: String| OAuthError::Http(format!("{method} {url}: {why}"));
    let request = async {
        let client = jrpc::client::Client::builder()
            .call_timeout(TIMEOUT)
            .http(url)
            .map_err(|e| failed(e.to_string()))?;
        headers
            .entry(header::ACCEPT)
            .or_insert(HeaderValue::from_static("application/json"));
        let response = client
            .send_streaming(method.clone(), headers, body)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let (parts, body) = response.into_parts();
        let body = Limited::new(body, MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| failed(e.to_string()))?
            .to_bytes();
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    };
    tokio::time::timeout(TIMEOUT, request)
        .await
        .unwrap_or_else(|_| Err(failed(format!("no answer within {TIMEOUT:?}"))))
}

/// GETs a JSON object; `None` for a `404` or anything that is not one
/// (the caller tries the next place).
pub(crate) async fn get_json(url: &str) -> Result<Option<serde_json::Map<String, Value>>, OAuthError> {
    let answer = send(Method::GET, url, HeaderMap::new(), Bytes::new()).await?;
    if answer.status != StatusCode::OK {
        tracing::debug!(%url, status = %answer.status, "no document");
        return Ok(None);
    }
    Ok(answer.json())
}

/// POSTs a form (`application/x-www-form-urlencoded`).
pub(crate) async fn post_form(
    url: &str,
    mut headers: HeaderMap,
    form: &[(&str, &str)],
) -> Result<Answer, OAuthError> {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-www-form-urlencoded"),
    );
    send(Method::POST, url, headers, Bytes::from(body)).await
}

/// POSTs a JSON document.
pub(crate) async fn post_json(url: &str, document: &Value) -> Result<Answer, OAuthError> {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    send(Method::POST, url, headers, Bytes::from(document.to_string())).await
}
