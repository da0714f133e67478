//! Finding the authorization server: the MCP server's protected resource
//! metadata (RFC 9728; from the `WWW-Authenticate` challenge, else the
//! well-known URLs in the MCP specification's order), then the
//! authorization server's metadata (RFC 8414, else OpenID discovery, in
//! the specification's order), each checked before it is used.

use serde_json::{Map, Value};
use url::Url;

use super::error::OAuthError;
use super::fetch;

/// An MCP server's protected resource metadata.
#[derive(Debug, Clone)]
pub(crate) struct ResourceMetadata {
    /// `resource`: the server's canonical URL, sent as the `resource`
    /// parameter (RFC 8707).
    pub(crate) resource: String,
    pub(crate) authorization_servers: Vec<String>,
    pub(crate) scopes_supported: Option<Vec<String>>,
    /// The server takes DPoP-bound tokens (RFC 9449 §5.2: it lists proof
    /// algorithms, or requires bound tokens).
    pub(crate) dpop: bool,
}

/// What the client uses of an authorization server's metadata.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServerMetadata {
    pub(crate) issuer: String,
    pub(crate) authorization_endpoint: Option<String>,
    pub(crate) token_endpoint: String,
    pub(crate) registration_endpoint: Option<String>,
    pub(crate) scopes_supported: Option<Vec<String>>,
    pub(crate) code_challenge_methods_supported: Vec<String>,
    pub(crate) token_endpoint_auth_methods_supported: Option<Vec<String>>,
    pub(crate) client_id_metadata_document_supported: bool,
    pub(crate) iss_parameter_supported: bool,
    /// The algorithms DPoP proofs may be signed with: the server binds
    /// tokens to keys (RFC 9449 §5.1).
    pub(crate) dpop_signing_alg_values_supported: Option<Vec<String>>,
}

/// The protected resource metadata of the MCP server at `server`: at
/// `from_challenge` when the server named it, else at
/// `/.well-known/oauth-protected-resource{path}`, then at the root form.
pub(crate) async fn resource_metadata(
    server: &Url,
    from_challenge: Option<&str>,
) -> Result<ResourceMetadata, OAuthError> {
    let places = match from_challenge {
        Some(url) => {
            secure(url, "the protected resource metadata")?;
            vec![url.to_owned()]
        }
        None => well_known_resource_urls(server),
    };
    let mut tried = Vec::new();
    for place in places {
        if let Some(document) = fetch::get_json(&place).await? {
            let metadata = read_resource_metadata(&document)
                .map_err(|why| OAuthError::Discovery(format!("{place}: {why}")))?;
            check_resource(server, &metadata.resource)?;
            return Ok(metadata);
        }
        tried.push(place);
    }
    Err(OAuthError::Discovery(format!(
        "no protected resource metadata for {server} (tried {})",
        tried.join(", ")
    )))
}

/// Where the metadata may be when the challenge does not say, in order.
fn well_known_resource_urls(server: &Url) -> Vec<String> {
    let origin = server.origin().ascii_serialization();
    let path = server.path().trim_end_matches('/');
    let root = format!("{origin}/.well-known/oauth-protected-resource");
    if path.is_empty() {
        vec![root]
    } else {
        vec![format!("{root}{path}"), root]
    }
}

fn read_resource_metadata(document: &Map<String, Value>) -> Result<ResourceMetadata, String> {
    let resource = document
        .get("resource")
        .and_then(Value::as_str)
        .ok_or("no `resource`")?
        .to_owned();
    let authorization_servers = strings(document.get("authorization_servers")).unwrap_or_default();
    if authorization_servers.is_empty() {
        return Err("no `authorization_servers`".into());
    }
    Ok(ResourceMetadata {
        resource,
        authorization_servers,
        scopes_supported: strings(document.get("scopes_supported")),
        dpop: strings(document.get("dpop_signing_alg_values_supported")).is_some_and(|algs| !algs.is_empty())
            || document.get("dpop_bound_access_tokens_required") == Some(&Value::Bool(true)),
    })
}

/// The metadata must be about this server (RFC 9728 §3.3, §7.3): its
/// `resource` the server's URL or a prefix of it (same origin, a path
/// prefix on a `/` boundary); otherwise a server could send the client's
/// token on to another resource's authorization server.
pub(crate) fn check_resource(server: &Url, resource: &str) -> Result<(), OAuthError> {
    let refused = || {
        OAuthError::Refused(format!(
            "the protected resource metadata is for {resource}, not for {server}"
        ))
    };
    let named = Url::parse(resource).map_err(|_| refused())?;
    if named.origin() != server.origin() || named.fragment().is_some() {
        return Err(refused());
    }
    let (named_path, server_path) = (
        named.path().trim_end_matches('/'),
        server.path().trim_end_matches('/'),
    );
    let covered = server_path == named_path
        || server_path
            .strip_prefix(named_path)
            .is_some_and(|rest| rest.starts_with('/'));
    if covered {
        Ok(())
    } else {
        Err(refused())
    }
}

/// The metadata of the authorization server `issuer`, from the first of
/// its well-known URLs that has it; its `issuer` must be `issuer`.
pub(crate) async fn server_metadata(issuer: &str) -> Result<ServerMetadata, OAuthError> {
    secure(issuer, "the authorization server")?;
    // Where RFC 8414 and OpenID discovery put it, in the MCP
    // specification's order (shared with the resource server's side).
    let places = jrpc::auth::metadata_urls(issuer).map_err(OAuthError::Discovery)?;
    for place in &places {
        let Some(document) = fetch::get_json(place).await? else {
            continue;
        };
        let metadata = read_server_metadata(&document)
            .map_err(|why| OAuthError::Discovery(format!("{place}: {why}")))?;
        // RFC 8414 §3.3: the document's issuer is identical to the one
        // the URL was made from, or it must not be used (a mix-up attack
        // otherwise). Compared as strings, as the MCP specification says.
        if metadata.issuer != issuer {
            return Err(OAuthError::Refused(format!(
                "the metadata at {place} names issuer {:?}, not {issuer:?}",
                metadata.issuer
            )));
        }
        for endpoint in [
            metadata.authorization_endpoint.as_deref(),
            Some(metadata.token_endpoint.as_str()),
            metadata.registration_endpoint.as_deref(),
        ]
        .into_iter()
        .flatten()
        {
            secure(endpoint, "an endpoint of the authorization server")?;
        }
        return Ok(metadata);
    }
    Err(OAuthError::Discovery(format!(
        "no authorization server metadata for {issuer} (tried {})",
        places.join(", ")
    )))
}

/// Authorization servers are spoken to over HTTPS only (the MCP
/// specification's MUST: codes, verifiers, secrets and tokens travel
/// there), or over plain HTTP to this machine (a server on a loopback
/// address: development, tests).
pub(crate) fn secure(url: &str, what: &str) -> Result<(), OAuthError> {
    let parsed = Url::parse(url).map_err(|e| OAuthError::Discovery(format!("{what} {url:?}: {e}")))?;
    let loopback = match parsed.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(OAuthError::Refused(format!(
            "{what} is at {url}: only https (or http to this machine) is used for authorization"
        ))),
    }
}

fn read_server_metadata(document: &Map<String, Value>) -> Result<ServerMetadata, String> {
    let text = |name: &str| document.get(name).and_then(Value::as_str).map(str::to_owned);
    Ok(ServerMetadata {
        issuer: text("issuer").ok_or("no `issuer`")?,
        authorization_endpoint: text("authorization_endpoint"),
        token_endpoint: text("token_endpoint").ok_or("no `token_endpoint`")?,
        registration_endpoint: text("registration_endpoint"),
        scopes_supported: strings(document.get("scopes_supported")),
        code_challenge_methods_supported: strings(document.get("code_challenge_methods_supported"))
            .unwrap_or_default(),
        token_endpoint_auth_methods_supported: strings(document.get("token_endpoint_auth_methods_supported")),
        client_id_metadata_document_supported: document
            .get("client_id_metadata_document_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        iss_parameter_supported: document
            .get("authorization_response_iss_parameter_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        dpop_signing_alg_values_supported: strings(document.get("dpop_signing_alg_values_supported")),
    })
}

fn strings(value: Option<&Value>) -> Option<Vec<String>> {
    Some(
        value?
            .as_array()?
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_metadata_is_looked_for_in_the_specifications_order() {
        let at = |u: &str| well_known_resource_urls(&Url::parse(u).unwrap());
        assert_eq!(
            at("https://example.com/public/mcp"),
            [
                "https://example.com/.well-known/oauth-protected-resource/public/mcp",
                "https://example.com/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(
            at("http://127.0.0.1:8080/"),
            ["http://127.0.0.1:8080/.well-known/oauth-protected-resource"]
        );
    }

    #[test]
    fn authorization_urls_must_be_https_or_on_this_machine() {
        for ok in [
            "https://as.example/t",
            "http://127.0.0.1:9000",
            "http://127.9.9.9/x",
            "http://localhost:8080/",
            "http://[::1]:1/",
        ] {
            assert!(secure(ok, "x").is_ok(), "{ok}");
        }
        for refused in [
            "http://as.example/",
            "http://10.0.0.1/",
            "http://localhost.evil.example/",
            "file:///etc/passwd",
            "javascript:alert(1)",
            "not a url",
        ] {
            assert!(secure(refused, "x").is_err(), "{refused}");
        }
    }

    #[test]
    fn only_metadata_about_this_server_is_used() {
        let server = Url::parse("https://mcp.example.com/api/mcp").unwrap();
        for ok in [
            "https://mcp.example.com/api/mcp",
            "https://mcp.example.com/api/mcp/",
            "https://mcp.example.com/api",
            "https://mcp.example.com",
            "https://MCP.example.com:443/",
        ] {
            assert!(check_resource(&server, ok).is_ok(), "{ok}");
        }
        for refused in [
            "https://evil.example.com/api/mcp",
            "http://mcp.example.com/api/mcp",
            "https://mcp.example.com:8443/api/mcp",
            "https://mcp.example.com/ap",
            "https://mcp.example.com/api/mcp/other",
            "https://mcp.example.com/other",
            "not a url",
        ] {
            assert!(check_resource(&server, refused).is_err(), "{refused}");
        }
    }
}
