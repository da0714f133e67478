//! Enterprise-managed authorization (SEP-990, the Identity Assertion
//! Authorization Grant): the user signed in to the enterprise's identity
//! provider once; the client trades that ID token there for an identity
//! assertion grant (ID-JAG) for the MCP server's authorization server (a
//! token exchange, RFC 8693), then the ID-JAG at that server for an access
//! token (the JWT-bearer grant, RFC 7523). No browser, no consent screen:
//! the enterprise's policy decides.

use http::{header, HeaderMap, StatusCode};

use super::error::OAuthError;
use super::fetch;
use super::token_source::TokenSource;

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";

/// The enterprise's identity provider, and the user's ID token from it.
///
/// ```
/// use jrpc_mcp::client::oauth::{EnterpriseIdp, OAuthClient, TokenSource};
///
/// let idp = EnterpriseIdp::new("https://idp.example.com/oauth2/token", TokenSource::Env("ID_TOKEN".into()))
///     .client_id("mcp-host");
/// let oauth = OAuthClient::builder()
///     .client_id("mcp-host-at-the-as")
///     .client_secret("…")
///     .enterprise(idp)
///     .build();
/// ```
#[derive(Debug, Clone)]
pub struct EnterpriseIdp {
    token_endpoint: String,
    id_token: TokenSource,
    client_id: Option<String>,
    client_secret: Option<String>,
}

impl EnterpriseIdp {
    /// The identity provider's token endpoint, and where the user's ID
    /// token is.
    pub fn new(token_endpoint: impl Into<String>, id_token: TokenSource) -> Self {
        EnterpriseIdp {
            token_endpoint: token_endpoint.into(),
            id_token,
            client_id: None,
            client_secret: None,
        }
    }

    /// The client id this client has at the identity provider.
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = Some(id.into());
        self
    }

    /// Its secret there (a confidential client: `client_secret_basic`).
    pub fn client_secret(mut self, secret: impl Into<String>) -> Self {
        self.client_secret = Some(secret.into());
        self
    }

    /// Trades the ID token for an ID-JAG for the authorization server
    /// `audience` (its issuer), to reach `resource`.
    pub(crate) async fn identity_assertion(
        &self,
        audience: &str,
        resource: &str,
        scope: Option<&str>,
    ) -> Result<String, OAuthError> {
        super::discovery::secure(&self.token_endpoint, "the identity provider's token endpoint")?;
        let id_token = self.id_token.read()?;
        let mut form = vec![
            ("grant_type", TOKEN_EXCHANGE.to_owned()),
            ("requested_token_type", ID_JAG.to_owned()),
            ("subject_token", id_token),
            ("subject_token_type", ID_TOKEN.to_owned()),
            ("audience", audience.to_owned()),
            ("resource", resource.to_owned()),
        ];
        if let Some(scope) = scope {
            form.push(("scope", scope.to_owned()));
        }
        let mut headers = HeaderMap::new();
        match (&self.client_id, &self.client_secret) {
            (Some(id), Some(secret)) => {
                headers.insert(header::AUTHORIZATION, super::grant::basic(id, secret)?);
            }
            (Some(id), None) => form.push(("client_id", id.clone())),
            _ => {}
        }
        let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let answer = fetch::post_form(&self.token_endpoint, headers, &pairs).await?;
        let body = answer.json();
        let text = |name: &str| body.as_ref()?.get(name)?.as_str().map(str::to_owned);
        if answer.status != StatusCode::OK {
            return Err(OAuthError::Server {
                at: "identity provider".into(),
                status: answer.status.as_u16(),
                error: text("error").unwrap_or_else(|| format!("HTTP {}", answer.status)),
                description: text("error_description"),
            });
        }
        let issued = text("issued_token_type").unwrap_or_default();
        if issued != ID_JAG {
            return Err(OAuthError::Refused(format!(
                "the identity provider issued a {issued:?}, not an identity assertion grant ({ID_JAG})"
            )));
        }
        text("access_token")
            .filter(|t| !t.is_empty())
            .ok_or_else(|| OAuthError::Http("the identity provider's answer has no access_token".into()))
    }
}
