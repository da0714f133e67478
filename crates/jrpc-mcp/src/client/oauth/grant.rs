//! The token endpoint (RFC 6749 §3.2, OAuth 2.1 §3.2): exchanging an
//! authorization code, refreshing, the client credentials grant; how the
//! client authenticates there (`none`, `client_secret_basic`,
//! `client_secret_post`, `private_key_jwt`); and dynamic registration
//! (RFC 7591).

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use http::{header, HeaderMap, HeaderValue, StatusCode};
use serde_json::{json, Value};

use super::discovery::ServerMetadata;
use super::dpop::{self, DpopKey, NonceFrom};
use super::error::{printable, OAuthError};
use super::key::ClientKey;
use super::store::{now_secs, RegisteredClient, Tokens};
use super::{fetch, pkce};

/// Who the client is at the token endpoint, and how it proves it.
pub(crate) struct ClientAuth<'a> {
    pub(crate) client_id: &'a str,
    pub(crate) secret: Option<&'a str>,
    /// What the registration said, or what the user asked.
    pub(crate) method: Option<&'a str>,
    pub(crate) key: Option<&'a ClientKey>,
    /// The key the tokens are to be bound to (DPoP), when the server binds
    /// them.
    pub(crate) dpop: Option<&'a DpopKey>,
}

impl ClientAuth<'_> {
    /// The method used with `server`: a key signs an assertion
    /// (`private_key_jwt`); a secret goes the way the registration said,
    /// else `client_secret_basic` when the server takes it (its default,
    /// RFC 8414 §2), else `client_secret_post`; no secret is `none`.
    fn method(&self, server: &ServerMetadata) -> &'static str {
        if self.key.is_some() {
            return "private_key_jwt";
        }
        if self.secret.is_none() {
            return "none";
        }
        match self.method {
            Some("client_secret_post") => return "client_secret_post",
            Some("client_secret_basic") => return "client_secret_basic",
            _ => {}
        }
        let supports = |method: &str| {
            server
                .token_endpoint_auth_methods_supported
                .as_ref()
                .map_or(true, |methods| methods.iter().any(|m| m == method))
        };
        if !supports("client_secret_basic") && supports("client_secret_post") {
            "client_secret_post"
        } else {
            "client_secret_basic"
        }
    }

    /// Adds the client's authentication to a token request.
    fn apply(
        &self,
        server: &ServerMetadata,
        form: &mut Vec<(&'static str, String)>,
        headers: &mut HeaderMap,
    ) -> Result<(), OAuthError> {
        match self.method(server) {
            "client_secret_basic" => {
                headers.insert(
                    header::AUTHORIZATION,
                    basic(self.client_id, self.secret.unwrap_or_default())?,
                );
            }
            "client_secret_post" => {
                form.push(("client_id", self.client_id.to_owned()));
                form.push(("client_secret", self.secret.unwrap_or_default().to_owned()));
            }
            "private_key_jwt" => {
                let key = self.key.expect("private_key_jwt is chosen only with a key");
                form.push(("client_id", self.client_id.to_owned()));
                form.push((
                    "client_assertion_type",
                    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".to_owned(),
                ));
                form.push(("client_assertion", key.assertion(self.client_id, &server.issuer)?));
            }
            _ => form.push(("client_id", self.client_id.to_owned())),
        }
        Ok(())
    }
}

/// `Basic` client authentication (RFC 6749 §2.3.1: id and secret each
/// form-encoded before they are joined).
pub(crate) fn basic(client_id: &str, secret: &str) -> Result<HeaderValue, OAuthError> {
    let encode = |v: &str| url::form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>();
    let pair = format!("{}:{}", encode(client_id), encode(secret));
    let mut value = HeaderValue::from_str(&format!("Basic {}", STANDARD.encode(pair)))
        .map_err(|e| OAuthError::Http(e.to_string()))?;
    value.set_sensitive(true);
    Ok(value)
}

/// A token request of `grant` with `params`, authenticated as `client`.
pub(crate) async fn request(
    server: &ServerMetadata,
    client: &ClientAuth<'_>,
    mut form: Vec<(&'static str, String)>,
    asked_scope: Option<&str>,
) -> Result<Tokens, OAuthError> {
    let mut headers = HeaderMap::new();
    client.apply(server, &mut form, &mut headers)?;
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // With DPoP: a fresh proof on each attempt, and one more attempt when
    // the server asks for a nonce (RFC 9449 §8).
    let mut attempts = 0;
    let answer = loop {
        attempts += 1;
        let mut headers = headers.clone();
        if let Some(key) = client.dpop {
            let proof = key.proof(
                "POST",
                &server.token_endpoint,
                None,
                NonceFrom::AuthorizationServer,
            )?;
            let value = HeaderValue::from_str(&proof)
                .map_err(|_| OAuthError::Key("a DPoP proof is not a header value".into()))?;
            headers.insert("dpop", value);
        }
        let answer = fetch::post_form(&server.token_endpoint, headers, &pairs).await?;
        let Some(key) = client.dpop else { break answer };
        let fresh_nonce = key.take_nonce(NonceFrom::AuthorizationServer, &answer.headers);
        let wants_nonce = answer.status == StatusCode::BAD_REQUEST
            && answer
                .json()
                .and_then(|b| b.get("error").and_then(Value::as_str).map(str::to_owned))
                .as_deref()
                == Some(dpop::USE_NONCE);
        if !(wants_nonce && fresh_nonce && attempts < 2) {
            break answer;
        }
    };
    let body = answer.json();
    if answer.status != StatusCode::OK {
        return Err(refusal(answer.status, body.as_ref(), "token endpoint"));
    }
    let body =
        body.ok_or_else(|| OAuthError::Http("the token endpoint answered with no JSON object".into()))?;
    read_tokens(&body, asked_scope, client.dpop.is_some())
}

/// The tokens of a successful token response (RFC 6749 §5.1).
fn read_tokens(
    body: &serde_json::Map<String, Value>,
    asked_scope: Option<&str>,
    proved: bool,
) -> Result<Tokens, OAuthError> {
    let text = |name: &str| body.get(name).and_then(Value::as_str).map(str::to_owned);
    let access_token = text("access_token")
        .filter(|t| !t.is_empty())
        .ok_or_else(|| OAuthError::Http("the token response has no access_token".into()))?;
    let kind = text("token_type").unwrap_or_default();
    // A DPoP-bound token only when a proof was sent for it (RFC 9449 §5).
    let bound = proved && kind.eq_ignore_ascii_case("dpop");
    if !kind.eq_ignore_ascii_case("bearer") && !bound {
        return Err(OAuthError::Refused(format!(
            "the token response's token_type is {kind:?}, not Bearer{}",
            if proved { " or DPoP" } else { "" }
        )));
    }
    let expires_at = body
        .get("expires_in")
        .and_then(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()))
        .map(|seconds| now_secs().saturating_add(seconds));
    Ok(Tokens {
        access_token,
        refresh_token: text("refresh_token"),
        expires_at,
        // RFC 6749 §5.1: no `scope` means the scope asked for.
        scope: text("scope").or_else(|| asked_scope.map(str::to_owned)),
        token_type: bound.then(|| "DPoP".to_owned()),
    })
}

/// An error answer (RFC 6749 §5.2) as an [`OAuthError`].
fn refusal(status: StatusCode, body: Option<&serde_json::Map<String, Value>>, at: &str) -> OAuthError {
    let text = |name: &str| {
        body.and_then(|b| b.get(name))
            .and_then(Value::as_str)
            .map(printable)
    };
    OAuthError::Server {
        at: at.to_owned(),
        status: status.as_u16(),
        error: text("error").unwrap_or_else(|| format!("HTTP {status}")),
        description: text("error_description"),
    }
}

/// Registers with `endpoint` (RFC 7591) as a native client receiving at
/// `redirect_uri` (none for a client of the client credentials grant).
pub(crate) async fn register(
    endpoint: &str,
    client_name: &str,
    redirect_uri: Option<&str>,
    scope: Option<&str>,
) -> Result<RegisteredClient, OAuthError> {
    let mut document = json!({
        "client_name": client_name,
        "token_endpoint_auth_method": "none",
        // A program on the user's machine receiving on a loopback
        // address: OpenID servers refuse such redirects for "web".
        "application_type": "native",
    });
    match redirect_uri {
        Some(uri) => {
            document["redirect_uris"] = json!([uri]);
            document["grant_types"] = json!(["authorization_code", "refresh_token"]);
            document["response_types"] = json!(["code"]);
        }
        None => {
            document["grant_types"] = json!(["client_credentials"]);
            document["token_endpoint_auth_method"] = json!("client_secret_basic");
        }
    }
    if let Some(scope) = scope {
        document["scope"] = json!(scope);
    }
    let answer = fetch::post_json(endpoint, &document).await?;
    let body = answer.json();
    if !answer.status.is_success() {
        return Err(refusal(answer.status, body.as_ref(), "registration endpoint"));
    }
    let body = body
        .ok_or_else(|| OAuthError::Http("the registration endpoint answered with no JSON object".into()))?;
    let text = |name: &str| body.get(name).and_then(Value::as_str).map(str::to_owned);
    Ok(RegisteredClient {
        client_id: text("client_id")
            .ok_or_else(|| OAuthError::Http("the registration response has no client_id".into()))?,
        client_secret: text("client_secret"),
        redirect_uri: redirect_uri.map(str::to_owned),
        auth_method: text("token_endpoint_auth_method"),
        scope: text("scope").or_else(|| scope.map(str::to_owned)),
    })
}

impl ClientKey {
    /// A client assertion (RFC 7523 §3) for `audience`: this client as
    /// `iss` and `sub`, valid for 5 minutes, with a fresh `jti`.
    pub(crate) fn assertion(&self, client_id: &str, audience: &str) -> Result<String, OAuthError> {
        let now = now_secs();
        let mut header = json!({"alg": self.alg(), "typ": "JWT"});
        if let Some(kid) = &self.kid {
            header["kid"] = json!(kid);
        }
        let claims = json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now,
            "exp": now + 300,
            "jti": pkce::random_token().map_err(|e| OAuthError::Http(format!("no randomness: {e}")))?,
        });
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self.sign(signing_input.as_bytes())?;
        Ok(format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(methods: Option<&[&str]>) -> ServerMetadata {
        ServerMetadata {
            issuer: "http://as".into(),
            token_endpoint: "http://as/token".into(),
            token_endpoint_auth_methods_supported: methods.map(|m| m.iter().map(|s| s.to_string()).collect()),
            ..ServerMetadata::default()
        }
    }

    #[test]
    fn the_authentication_method_follows_the_secret_the_registration_and_the_server() {
        let with = |secret: Option<&'static str>, method: Option<&'static str>| ClientAuth {
            client_id: "c",
            secret,
            method,
            key: None,
            dpop: None,
        };
        type Case<'a> = (Option<&'a str>, Option<&'a str>, Option<&'a [&'a str]>, &'a str);
        let cases: &[Case] = &[
            (None, None, None, "none"),
            (None, Some("client_secret_basic"), None, "none"),
            (Some("s"), None, None, "client_secret_basic"),
            (
                Some("s"),
                None,
                Some(&["client_secret_post"]),
                "client_secret_post",
            ),
            (
                Some("s"),
                None,
                Some(&["client_secret_post", "client_secret_basic"]),
                "client_secret_basic",
            ),
            (Some("s"), Some("client_secret_post"), None, "client_secret_post"),
            (Some("s"), None, Some(&["private_key_jwt"]), "client_secret_basic"),
        ];
        for (secret, method, supported, expected) in cases {
            assert_eq!(with(*secret, *method).method(&server(*supported)), *expected);
        }
    }

    #[test]
    fn basic_authentication_form_encodes_the_id_and_secret() {
        let auth = ClientAuth {
            client_id: "a b",
            secret: Some("p:w/é"),
            method: None,
            key: None,
            dpop: None,
        };
        let (mut form, mut headers) = (Vec::new(), HeaderMap::new());
        auth.apply(&server(None), &mut form, &mut headers).unwrap();
        assert!(form.is_empty());
        let value = headers[header::AUTHORIZATION].to_str().unwrap();
        let decoded = STANDARD.decode(value.strip_prefix("Basic ").unwrap()).unwrap();
        assert_eq!(String::from_utf8(decoded).unwrap(), "a+b:p%3Aw%2F%C3%A9");
    }

    #[test]
    fn token_responses_are_read_strictly() {
        let read = |v: Value| read_tokens(v.as_object().unwrap(), Some("a b"), false);
        let tokens = read(
            json!({"access_token": "t", "token_type": "bearer", "expires_in": 60, "refresh_token": "r"}),
        )
        .unwrap();
        assert_eq!(tokens.access_token, "t");
        assert_eq!(tokens.refresh_token.as_deref(), Some("r"));
        assert_eq!(tokens.scope.as_deref(), Some("a b"));
        assert!(tokens.expires_at.unwrap() >= now_secs() + 59);
        // A DPoP-bound token only for a request that sent a proof.
        assert!(read(json!({"access_token": "t", "token_type": "DPoP"})).is_err());
        let proved = read_tokens(
            json!({"access_token": "t", "token_type": "DPoP"})
                .as_object()
                .unwrap(),
            None,
            true,
        );
        assert_eq!(proved.unwrap().token_type.as_deref(), Some("DPoP"));
        let bearer = read_tokens(
            json!({"access_token": "t", "token_type": "Bearer"})
                .as_object()
                .unwrap(),
            None,
            true,
        );
        assert_eq!(bearer.unwrap().token_type, None);
        assert!(read(json!({"token_type": "Bearer"})).is_err());
        assert!(read(json!({"access_token": "", "token_type": "Bearer"})).is_err());
    }
}
