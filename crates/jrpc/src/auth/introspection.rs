//! Token introspection (RFC 7662): the authorization server is asked about
//! each token, for tokens a resource server cannot read itself (opaque
//! ones) or must see revoked at once.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method};
use serde_json::Value;

use super::issuer::request_json;
use super::token::{AccessToken, BoxFuture, TokenError, TokenVerifier};

/// Asks the authorization server's introspection endpoint about each
/// token, authenticating as a client (`client_secret_basic`). A token is
/// accepted when the answer says `active`, names this resource in `aud`
/// and, when set, the issuer in `iss`, and has not expired. An endpoint
/// that cannot be reached refuses every token.
///
/// ```
/// use jrpc::auth::IntrospectionVerifier;
///
/// let verifier = IntrospectionVerifier::new("https://auth.example.com/introspect", "my-api", "secret")
///     .audience("https://api.example.com/")
///     .issuer("https://auth.example.com");
/// # let _ = verifier;
/// ```
#[derive(Clone)]
pub struct IntrospectionVerifier {
    endpoint: String,
    authorization: HeaderValue,
    audience: String,
    issuer: Option<String>,
}

impl std::fmt::Debug for IntrospectionVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntrospectionVerifier")
            .field("endpoint", &self.endpoint)
            .field("audience", &self.audience)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

impl IntrospectionVerifier {
    /// Introspection at `endpoint`, as the client `client_id` with
    /// `client_secret`; set the [`audience`](Self::audience).
    pub fn new(endpoint: impl Into<String>, client_id: &str, client_secret: &str) -> Self {
        // RFC 6749 §2.3.1: the id and secret are form-encoded first.
        let credentials = format!("{}:{}", form_encode(client_id), form_encode(client_secret));
        let mut authorization = HeaderValue::from_str(&format!("Basic {}", STANDARD.encode(credentials)))
            .unwrap_or_else(|_| HeaderValue::from_static("Basic"));
        authorization.set_sensitive(true);
        IntrospectionVerifier {
            endpoint: endpoint.into(),
            authorization,
            audience: String::new(),
            issuer: None,
        }
    }

    /// The resource tokens must be for (`aud`, exactly).
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = audience.into();
        self
    }

    /// The issuer an answer's `iss` must name, when it gives one.
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }

    async fn introspect(&self, token: &str) -> Result<AccessToken, TokenError> {
        if token.len() > super::jwt::MAX_TOKEN_LEN {
            return Err(TokenError::Invalid("too long".into()));
        }
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, self.authorization.clone());
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        let body = Bytes::from(format!(
            "token={}&token_type_hint=access_token",
            form_encode(token)
        ));
        let answer = request_json(Method::POST, &self.endpoint, headers, body)
            .await
            .map_err(TokenError::Unavailable)?;
        let Value::Object(claims) = answer else {
            return Err(TokenError::Unavailable(
                "the introspection answer is not an object".into(),
            ));
        };
        self.accept(claims, std::time::SystemTime::now())
    }

    fn accept(
        &self,
        claims: serde_json::Map<String, Value>,
        now: std::time::SystemTime,
    ) -> Result<AccessToken, TokenError> {
        let invalid = |why: &str| Err(TokenError::Invalid(why.into()));
        if claims.get("active") != Some(&Value::Bool(true)) {
            return invalid("not active");
        }
        if self.audience.is_empty() {
            return invalid("no audience is set for this resource");
        }
        if !super::jwt::names_audience(claims.get("aud"), &self.audience) {
            return invalid("aud does not name this resource");
        }
        if let (Some(issuer), Some(iss)) = (&self.issuer, claims.get("iss")) {
            if iss.as_str() != Some(issuer.as_str()) {
                return invalid("iss is not the issuer");
            }
        }
        let now = now
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let expires = claims.get("exp").and_then(Value::as_f64);
        if expires.is_some_and(|exp| now >= exp) {
            return invalid("expired");
        }
        let text = |name: &str| claims.get(name).and_then(Value::as_str).map(str::to_owned);
        let scopes = text("scope")
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        Ok(AccessToken {
            subject: text("sub").or_else(|| text("username")),
            client_id: text("client_id"),
            scopes,
            expires_at: expires.map(|e| e as u64),
            claims,
        })
    }
}

impl TokenVerifier for IntrospectionVerifier {
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<AccessToken, TokenError>> {
        Box::pin(self.introspect(token))
    }
}

/// `application/x-www-form-urlencoded` for one value.
fn form_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => out.push(byte as char),
            b' ' => out.push('+'),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_are_accepted_only_when_active_and_for_this_resource() {
        let verifier = IntrospectionVerifier::new("http://127.0.0.1:1/introspect", "rs", "s")
            .audience("https://rs.example/")
            .issuer("https://as.example");
        let now = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000);
        let base = json!({"active": true, "aud": "https://rs.example/", "iss": "https://as.example",
                          "sub": "alice", "scope": "a b", "exp": 2_000});
        let with = |change: &dyn Fn(&mut Value)| {
            let mut answer = base.clone();
            change(&mut answer);
            answer.as_object().unwrap().clone()
        };
        let cases: [(&str, serde_json::Map<String, Value>, bool); 7] = [
            ("good", with(&|_| {}), true),
            ("inactive", with(&|a| a["active"] = json!(false)), false),
            (
                "active as a string",
                with(&|a| a["active"] = json!("true")),
                false,
            ),
            (
                "another audience",
                with(&|a| a["aud"] = json!("https://other.example/")),
                false,
            ),
            (
                "audience in an array",
                with(&|a| a["aud"] = json!(["x", "https://rs.example/"])),
                true,
            ),
            (
                "another issuer",
                with(&|a| a["iss"] = json!("https://evil.example")),
                false,
            ),
            ("expired", with(&|a| a["exp"] = json!(999)), false),
        ];
        for (what, answer, good) in cases {
            assert_eq!(verifier.accept(answer, now).is_ok(), good, "{what}");
        }
        let token = verifier.accept(with(&|_| {}), now).unwrap();
        assert_eq!(token.subject.as_deref(), Some("alice"));
        assert_eq!(token.scopes, ["a", "b"]);
        assert_eq!(form_encode("a b+c/é"), "a+b%2Bc%2F%C3%A9");
    }
}
