//! An authorization server's keys, fetched and kept: its metadata (RFC
//! 8414, else OpenID discovery) names its `jwks_uri`, whose key set is
//! cached, fetched again for a key id it lacks (at most once per
//! cooldown, so unknown ids cannot make us hammer the issuer) and when it
//! has grown old.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use http_body_util::{BodyExt, Limited};
use serde_json::Value;

use super::jwk::JwkSet;

/// The largest metadata document or key set read.
const MAX_DOCUMENT: usize = 1024 * 1024;
/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// A key set older than this is fetched again on the next token.
const MAX_AGE: Duration = Duration::from_secs(10 * 60);

/// The keys as last fetched.
struct Fetched {
    keys: Arc<JwkSet>,
    at: Instant,
}

/// Where the keys come from and what was last fetched.
pub(crate) struct IssuerKeys {
    issuer: String,
    /// Known from the start, or learned from the metadata.
    jwks_uri: RwLock<Option<String>>,
    /// The issuer the metadata names (the configured one, perhaps without
    /// its trailing slash): what `iss` must say.
    confirmed_issuer: RwLock<Option<String>>,
    fetched: RwLock<Option<Fetched>>,
    /// Held while fetching, so that concurrent misses fetch once; records
    /// when the last attempt began.
    attempt: tokio::sync::Mutex<Option<Instant>>,
    cooldown: Duration,
}

impl IssuerKeys {
    pub(crate) fn new(issuer: String, jwks_uri: Option<String>, cooldown: Duration) -> Self {
        IssuerKeys {
            issuer,
            jwks_uri: RwLock::new(jwks_uri),
            confirmed_issuer: RwLock::new(None),
            fetched: RwLock::new(None),
            attempt: tokio::sync::Mutex::new(None),
            cooldown,
        }
    }

    /// The issuer tokens must name: as the metadata says it, once read.
    pub(crate) fn issuer(&self) -> String {
        read(&self.confirmed_issuer)
            .clone()
            .unwrap_or_else(|| self.issuer.clone())
    }

    /// The key set, fetched when there is none yet, when it is old, or when
    /// it lacks `kid`, unless the last attempt is too recent. `Err` when
    /// there are no keys at all (the issuer is unreachable): fail closed.
    pub(crate) async fn keys(&self, kid: Option<&str>) -> Result<Arc<JwkSet>, String> {
        if let Some(keys) = self.current(kid) {
            return Ok(keys);
        }
        let mut attempt = self.attempt.lock().await;
        // Another task may have fetched while this one waited.
        if let Some(keys) = self.current(kid) {
            return Ok(keys);
        }
        let recent = attempt.is_some_and(|at| at.elapsed() < self.cooldown);
        if !recent {
            *attempt = Some(Instant::now());
            if let Err(e) = self.fetch_and_keep().await {
                tracing::warn!(issuer = %self.issuer, "fetching the issuer's keys: {e}");
            }
        }
        // What there is: a kid still unknown is refused by the caller.
        read(&self.fetched)
            .as_ref()
            .map(|f| Arc::clone(&f.keys))
            .ok_or_else(|| format!("no keys from {} yet", self.issuer))
    }

    /// Fetches the key set and keeps it.
    async fn fetch_and_keep(&self) -> Result<(), String> {
        let keys = self.fetch().await?;
        *write(&self.fetched) = Some(Fetched {
            keys: Arc::new(keys),
            at: Instant::now(),
        });
        Ok(())
    }

    /// Fetches the metadata and keys now, in the background, rather than
    /// on the first token; when they cannot be had, says so (naming the
    /// issuer and why) and tries again with backoff until they come or the
    /// keys are dropped. Outside a tokio runtime, does nothing (the first
    /// token fetches them).
    pub(crate) fn warm_up(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let keys = Arc::downgrade(self);
        runtime.spawn(async move {
            // A moment first: a server's own start-up lines (where it
            // listens) come before what this says.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let mut delay = Duration::from_secs(1);
            loop {
                let Some(source) = keys.upgrade() else { return };
                let outcome = {
                    let mut attempt = source.attempt.lock().await;
                    // A token's lookup may have fetched them meanwhile.
                    if source.current(None).is_some() {
                        return;
                    }
                    *attempt = Some(Instant::now());
                    source.fetch_and_keep().await
                };
                match outcome {
                    Ok(()) => return,
                    Err(e) => tracing::warn!(
                        issuer = %source.issuer,
                        "the authorization server's keys cannot be fetched ({e}); until they are, \
                         tokens are answered 503; trying again in {delay:?}"
                    ),
                }
                drop(source);
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(60));
            }
        });
    }

    /// The cached set, when it is fresh and has `kid`.
    fn current(&self, kid: Option<&str>) -> Option<Arc<JwkSet>> {
        let fetched = read(&self.fetched);
        let fetched = fetched.as_ref()?;
        let fresh = fetched.at.elapsed() < MAX_AGE;
        let has = kid.map_or(true, |kid| fetched.keys.has(kid));
        (fresh && has).then(|| Arc::clone(&fetched.keys))
    }

    async fn fetch(&self) -> Result<JwkSet, String> {
        let known = read(&self.jwks_uri).clone();
        let jwks_uri = match known {
            Some(uri) => uri,
            None => {
                let (issuer, uri) = self.discover().await?;
                *write(&self.confirmed_issuer) = Some(issuer);
                *write(&self.jwks_uri) = Some(uri.clone());
                uri
            }
        };
        let set = fetch_json(&jwks_uri).await?;
        let keys = JwkSet::from_value(&set);
        if keys.is_empty() {
            return Err(format!("{jwks_uri} has no usable signing key"));
        }
        Ok(keys)
    }

    /// Reads the issuer's metadata where RFC 8414 and OpenID Connect
    /// Discovery put it, in the order the MCP specification gives, and
    /// returns the issuer it names and its `jwks_uri`.
    async fn discover(&self) -> Result<(String, String), String> {
        let mut last = String::new();
        for url in metadata_urls(&self.issuer)? {
            match fetch_json(&url).await {
                Ok(metadata) => {
                    let named = metadata.get("issuer").and_then(Value::as_str).unwrap_or_default();
                    if named.trim_end_matches('/') != self.issuer.trim_end_matches('/') {
                        return Err(format!("{url} names issuer {named:?}, not {:?}", self.issuer));
                    }
                    let Some(jwks_uri) = metadata.get("jwks_uri").and_then(Value::as_str) else {
                        return Err(format!("{url} has no jwks_uri"));
                    };
                    return Ok((named.to_owned(), jwks_uri.to_owned()));
                }
                Err(e) => last = e,
            }
        }
        Err(format!(
            "no authorization server metadata for {}: {last}",
            self.issuer
        ))
    }
}

/// Where an issuer's metadata may be: for `https://as.example/tenant`,
/// `/.well-known/oauth-authorization-server/tenant`,
/// `/.well-known/openid-configuration/tenant` and
/// `/tenant/.well-known/openid-configuration`; for an issuer without a
/// path, the first two without one. The order RFC 8414 §3.1 and §5 and
/// the MCP specification give, for clients as well.
pub fn metadata_urls(issuer: &str) -> Result<Vec<String>, String> {
    let uri: http::Uri = issuer.parse().map_err(|e| format!("issuer {issuer:?}: {e}"))?;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(format!("issuer {issuer:?} is not an absolute URL"));
    };
    if uri.query().is_some() {
        return Err(format!("issuer {issuer:?} has a query"));
    }
    let origin = format!("{scheme}://{authority}");
    let path = uri.path().trim_end_matches('/');
    Ok(if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    })
}

/// GETs a JSON document, bounded in time and size.
pub(crate) async fn fetch_json(url: &str) -> Result<Value, String> {
    request_json(Method::GET, url, HeaderMap::new(), Bytes::new()).await
}

/// Sends a request whose answer is a JSON document (`200` only), bounded
/// in time and size.
pub(crate) async fn request_json(
    method: Method,
    url: &str,
    mut headers: HeaderMap,
    body: Bytes,
) -> Result<Value, String> {
    let fetch = async {
        let client = crate::client::Client::builder()
            .http(url)
            .map_err(|e| format!("{url}: {e}"))?;
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        let response = client
            .send_streaming(method, headers, body)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        if response.status() != StatusCode::OK {
            return Err(format!("{url}: HTTP {}", response.status()));
        }
        let body = Limited::new(response.into_body(), MAX_DOCUMENT)
            .collect()
            .await
            .map_err(|e| format!("{url}: {e}"))?
            .to_bytes();
        serde_json::from_slice(&body).map_err(|e| format!("{url}: not JSON: {e}"))
    };
    tokio::time::timeout(FETCH_TIMEOUT, fetch)
        .await
        .unwrap_or_else(|_| Err(format!("{url}: no answer within {FETCH_TIMEOUT:?}")))
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_looked_for_where_the_specifications_put_it() {
        let cases: [(&str, &[&str]); 3] = [
            (
                "https://as.example",
                &[
                    "https://as.example/.well-known/oauth-authorization-server",
                    "https://as.example/.well-known/openid-configuration",
                ],
            ),
            (
                "https://as.example/",
                &[
                    "https://as.example/.well-known/oauth-authorization-server",
                    "https://as.example/.well-known/openid-configuration",
                ],
            ),
            (
                "http://127.0.0.1:9000/tenant/1",
                &[
                    "http://127.0.0.1:9000/.well-known/oauth-authorization-server/tenant/1",
                    "http://127.0.0.1:9000/.well-known/openid-configuration/tenant/1",
                    "http://127.0.0.1:9000/tenant/1/.well-known/openid-configuration",
                ],
            ),
        ];
        for (issuer, urls) in cases {
            assert_eq!(metadata_urls(issuer).unwrap(), urls, "{issuer}");
        }
        for bad in ["as.example", "/path", "https://as.example/?q=1"] {
            assert!(metadata_urls(bad).is_err(), "{bad}");
        }
    }
}
