//! The endpoint as an OAuth 2.1 resource server, as the MCP
//! specification's authorization chapter has it: its protected resource
//! metadata (RFC 9728) tells clients which authorization server issues its
//! tokens; every request needs a token issued for this resource (RFC 8707
//! audience: no token passthrough); a tool can need a scope of its own, a
//! token without it getting `403 insufficient_scope` so that the client
//! can step up.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use jrpc_mcp::http::{HttpOptions, OAuth};
//!
//! let oauth = OAuth::issuer("https://auth.example.com")
//!     .require_scopes(["mcp"])
//!     .tool_scope("bump", "mcp:write");
//! let options = HttpOptions::default().oauth(oauth);
//! let serving = jrpc_mcp::demo::server().serve_http("127.0.0.1:8000", options).await?;
//! // Metadata at http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp
//! # let _ = serving; Ok(()) }
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Response, Uri};
use jrpc::auth::{AccessToken, JwtVerifier, TokenVerifier};
use jrpc::server::http::route::RouteBody;
use jrpc::server::http::BearerAuth;
use serde::Deserialize;

/// Who issues the tokens, and how they are checked.
#[derive(Clone)]
enum Source {
    /// JWTs from this authorization server, checked against its keys.
    Issuer(String),
    /// Tokens a verifier of your own checks, from these servers.
    Verifier {
        verifier: Arc<dyn TokenVerifier>,
        authorization_servers: Vec<String>,
    },
}

/// OAuth settings of the Streamable HTTP endpoint (see
/// [`HttpOptions::oauth`](super::HttpOptions::oauth)).
#[derive(Clone)]
pub struct OAuth {
    source: Source,
    resource: Option<String>,
    audience: Option<String>,
    required: Vec<String>,
    tool_scopes: Vec<(String, String)>,
    dpop: Option<jrpc::auth::Dpop>,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth")
            .field("resource", &self.resource)
            .field("audience", &self.audience)
            .field("required", &self.required)
            .field("tool_scopes", &self.tool_scopes)
            .finish_non_exhaustive()
    }
}

impl OAuth {
    /// Tokens are JWTs issued by the authorization server at `issuer`,
    /// checked against the keys its metadata publishes.
    pub fn issuer(issuer: impl Into<String>) -> Self {
        Self::from_source(Source::Issuer(issuer.into()))
    }

    /// Tokens are checked by `verifier` (introspection, opaque tokens, ...);
    /// the metadata names `authorization_server` as where to get them.
    pub fn verifier(verifier: impl TokenVerifier, authorization_server: impl Into<String>) -> Self {
        Self::from_source(Source::Verifier {
            verifier: Arc::new(verifier),
            authorization_servers: vec![authorization_server.into()],
        })
    }

    fn from_source(source: Source) -> Self {
        OAuth {
            source,
            resource: None,
            audience: None,
            required: Vec::new(),
            dpop: None,
            tool_scopes: Vec::new(),
        }
    }

    /// The endpoint's canonical URL, as clients reach it (behind a proxy,
    /// its public URL): the metadata's `resource`, and the audience tokens
    /// must name. By default the URL it is served at.
    pub fn resource(mut self, url: impl Into<String>) -> Self {
        self.resource = Some(url.into());
        self
    }

    /// The audience tokens must name, when it is not the resource.
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = Some(audience.into());
        self
    }

    /// Scopes every request's token must grant.
    pub fn require_scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.required.extend(scopes.into_iter().map(Into::into));
        self
    }

    /// A call of `tool` needs `scope` too (several add up).
    pub fn tool_scope(mut self, tool: impl Into<String>, scope: impl Into<String>) -> Self {
        self.tool_scopes.push((tool.into(), scope.into()));
        self
    }

    /// Accepts DPoP-bound tokens (RFC 9449) as `dpop` says, beside bearer
    /// tokens or only them (see
    /// [`BearerAuth::dpop`](jrpc::server::http::BearerAuth::dpop)); proofs
    /// must name the resource URL's scheme and host (unless `dpop` names
    /// an origin of its own).
    pub fn dpop(mut self, dpop: jrpc::auth::Dpop) -> Self {
        self.dpop = Some(dpop);
        self
    }

    /// The resource URL set, if any.
    pub(super) fn resource_url(&self) -> Option<&str> {
        self.resource.as_deref()
    }

    /// The guard for an endpoint whose canonical URL is the resource.
    pub(super) fn guard(&self) -> Result<Guard, String> {
        let resource = self
            .resource
            .clone()
            .ok_or("the OAuth resource URL of the endpoint is not set (OAuth::resource)")?;
        let metadata_url = metadata_url(&resource)?;
        let audience = self.audience.clone().unwrap_or_else(|| resource.clone());
        let (verifier, authorization_servers): (Arc<dyn TokenVerifier>, _) = match &self.source {
            Source::Issuer(issuer) => {
                let verifier = JwtVerifier::builder(issuer.as_str()).audience(audience).build();
                // The issuer's keys fetched at start (within a runtime), so
                // that an unreachable authorization server is said at once.
                verifier.warm_up();
                (Arc::new(verifier), vec![issuer.clone()])
            }
            Source::Verifier {
                verifier,
                authorization_servers,
            } => (Arc::clone(verifier), authorization_servers.clone()),
        };
        let mut scopes_supported = self.required.clone();
        for (_, scope) in &self.tool_scopes {
            if !scopes_supported.contains(scope) {
                scopes_supported.push(scope.clone());
            }
        }
        let mut metadata = serde_json::json!({
            "resource": resource,
            "authorization_servers": authorization_servers,
            "scopes_supported": scopes_supported,
            "bearer_methods_supported": ["header"],
        });
        if let Some(dpop) = &self.dpop {
            // RFC 9449 §5.2 / RFC 9728 §2.
            metadata["dpop_signing_alg_values_supported"] =
                serde_json::json!(["ES256", "ES384", "RS256", "PS256", "EdDSA"]);
            metadata["dpop_bound_access_tokens_required"] = serde_json::json!(dpop.is_required());
        }
        let mut tool_scopes: HashMap<String, Vec<String>> = HashMap::new();
        for (tool, scope) in &self.tool_scopes {
            tool_scopes.entry(tool.clone()).or_default().push(scope.clone());
        }
        let mut bearer = BearerAuth::new(verifier)
            .require_scopes(self.required.iter().cloned())
            .resource_metadata(metadata_url);
        if let Some(dpop) = &self.dpop {
            // Proofs name the endpoint as clients reach it: the resource.
            let origin = resource
                .parse::<Uri>()
                .ok()
                .and_then(|u| Some(format!("{}://{}", u.scheme_str()?, u.authority()?)));
            bearer = bearer.dpop(match origin {
                Some(origin) if !dpop.has_origin() => dpop.clone().origin(origin),
                _ => dpop.clone(),
            });
        }
        Ok(Guard {
            bearer,
            required: self.required.clone(),
            tool_scopes,
            metadata: Bytes::from(metadata.to_string()),
        })
    }
}

/// Where the metadata of `resource` is (RFC 9728 §3.1): the well-known
/// path inserted between its host and its path.
pub(super) fn metadata_url(resource: &str) -> Result<String, String> {
    let uri: Uri = resource
        .parse()
        .map_err(|e| format!("resource {resource:?}: {e}"))?;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(format!("resource {resource:?} is not an absolute URL"));
    };
    let path = uri.path().trim_end_matches('/');
    Ok(format!(
        "{scheme}://{authority}/.well-known/oauth-protected-resource{path}"
    ))
}

/// The paths the metadata is served at for an endpoint at `path`: the form
/// RFC 9728 gives, and the root one clients also try.
pub(super) fn metadata_paths(path: &str) -> Vec<String> {
    let path = path.trim_end_matches('/');
    let mut paths = vec![format!("/.well-known/oauth-protected-resource{path}")];
    if !path.is_empty() {
        paths.push("/.well-known/oauth-protected-resource".to_owned());
    }
    paths
}

/// An endpoint's checks, made once from its [`OAuth`].
pub(super) struct Guard {
    bearer: BearerAuth,
    required: Vec<String>,
    tool_scopes: HashMap<String, Vec<String>>,
    /// The protected resource metadata document.
    pub(super) metadata: Bytes,
}

/// What the per-tool check needs of a message.
#[derive(Deserialize)]
struct Call {
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<CallParams>,
}

#[derive(Deserialize)]
struct CallParams {
    #[serde(default)]
    name: Option<String>,
}

impl Guard {
    /// The request's grant, or the refusal to answer with.
    pub(super) async fn admit(
        &self,
        method: &http::Method,
        uri: &Uri,
        headers: &HeaderMap,
    ) -> Result<AccessToken, Response<RouteBody>> {
        self.bearer.check(method, uri, headers).await
    }

    /// A refusal when a message of `body` (one, or a batch) calls a tool
    /// whose scopes `grant` lacks: `403 insufficient_scope` naming every
    /// scope the call needs, so that the client can ask for them.
    pub(super) fn tools_allowed(&self, grant: &AccessToken, body: &[u8]) -> Option<Response<RouteBody>> {
        if self.tool_scopes.is_empty() {
            return None;
        }
        let calls: Vec<Call> = match serde_json::from_slice::<serde_json::Value>(body) {
            Ok(serde_json::Value::Array(items)) => items
                .into_iter()
                .filter_map(|item| serde_json::from_value(item).ok())
                .collect(),
            Ok(item) => serde_json::from_value(item).ok().into_iter().collect(),
            Err(_) => return None,
        };
        for call in calls {
            if call.method.as_deref() != Some("tools/call") {
                continue;
            }
            let Some(name) = call.params.and_then(|p| p.name) else {
                continue;
            };
            let Some(needed) = self.tool_scopes.get(&name) else {
                continue;
            };
            if needed.iter().all(|scope| grant.has_scope(scope)) {
                continue;
            }
            // The scopes to ask for: the server's own, this tool's and
            // those the token has, so a step up loses nothing.
            let mut scopes = self.required.clone();
            for scope in needed.iter().chain(&grant.scopes) {
                if !scopes.contains(scope) {
                    scopes.push(scope.clone());
                }
            }
            let scopes = scopes.join(" ");
            let why = format!("the tool {name} needs the scope {scopes}");
            return Some(self.bearer.insufficient_scope(&scopes, &why));
        }
        None
    }

    /// The metadata document as a response.
    pub(super) fn metadata_response(&self) -> Response<RouteBody> {
        let mut response = Response::new(jrpc::server::http::route::full_body(self.metadata.clone()));
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_found_where_rfc_9728_puts_it() {
        let cases = [
            (
                "http://127.0.0.1:8000/mcp",
                "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp",
            ),
            (
                "https://api.example.com/",
                "https://api.example.com/.well-known/oauth-protected-resource",
            ),
            (
                "https://api.example.com",
                "https://api.example.com/.well-known/oauth-protected-resource",
            ),
            (
                "https://x.example/a/mcp/",
                "https://x.example/.well-known/oauth-protected-resource/a/mcp",
            ),
        ];
        for (resource, url) in cases {
            assert_eq!(metadata_url(resource).unwrap(), url);
        }
        assert!(metadata_url("/mcp").is_err());
        assert_eq!(
            metadata_paths("/mcp"),
            [
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(metadata_paths("/"), ["/.well-known/oauth-protected-resource"]);
    }
}
