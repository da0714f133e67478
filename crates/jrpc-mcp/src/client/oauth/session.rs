//! One client's authorization with one MCP server: the token it sends,
//! and what it does when the server refuses it (`401`: refresh, else log
//! in; `403 insufficient_scope`: ask again for more scopes).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use url::Url;

use super::challenge::{split_scopes, Challenge};
use super::config::{Config, Grant};
use super::discovery::{self, ServerMetadata};
use super::dpop::{self, DpopKey, NonceFrom};
use super::error::{printable, OAuthError};
use super::grant::{self, ClientAuth};
use super::store::{Credentials, RegisteredClient, Tokens};
use super::{fetch, pkce};

/// The authorization of one client with one MCP server.
pub(crate) struct Session {
    config: Arc<Config>,
    server: Url,
    /// The server's URL as given: the store's key.
    key: String,
    /// What is held now: the token sent with each request.
    current: Mutex<Option<Credentials>>,
    /// One renewal at a time: requests refused together wait for the one
    /// that runs, then use its token.
    renewing: tokio::sync::Mutex<Renewal>,
    /// How many renewals have finished, read before waiting for the lock.
    finished: std::sync::atomic::AtomicU64,
    /// The key tokens are bound to, when the authorization server binds
    /// them (DPoP): kept with the credentials.
    dpop: Mutex<Option<Arc<DpopKey>>>,
    /// Whether the MCP server takes DPoP-bound tokens (its challenge or its
    /// metadata said so): a bound token is asked for only then, since a
    /// server that does not take them could not use it.
    resource_dpop: std::sync::atomic::AtomicBool,
}

/// What one renewal leaves for the next.
#[derive(Default)]
struct Renewal {
    /// The scopes asked for last: a step-up asks for these and the new
    /// ones together, so nothing granted before is lost.
    requested: Vec<String>,
    /// The last renewal that failed (its number, why): requests that
    /// waited for it fail with it rather than start one each.
    failed: Option<(u64, OAuthError)>,
}

/// The JWT-bearer grant's type (RFC 7523 §2.1).
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// The headers that authorize one request.
pub(crate) struct Authorization {
    /// `Authorization`.
    pub(crate) authorization: HeaderValue,
    /// `DPoP`, for a DPoP-bound token.
    pub(crate) proof: Option<HeaderValue>,
}

/// What a renewal did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewed {
    /// Another request (or another process, through the store) renewed
    /// the token meanwhile.
    Elsewhere,
    /// The token was refreshed.
    Refreshed,
    /// A new token came from the authorization flow.
    Authorized,
}

impl Session {
    /// The session for the MCP server at `server_url`, with what the store
    /// holds for it.
    pub(crate) fn new(config: Arc<Config>, server_url: &str) -> Result<Session, OAuthError> {
        let server =
            Url::parse(server_url).map_err(|e| OAuthError::Discovery(format!("{server_url}: {e}")))?;
        let key = super::store::store_key(server_url)?;
        let current = config.store.load(&key, None);
        let dpop = current
            .as_ref()
            .and_then(|c| c.dpop_key.as_deref())
            .and_then(|kept| DpopKey::from_kept(kept).ok())
            .map(Arc::new);
        let requested = current
            .as_ref()
            .and_then(|c| c.tokens.as_ref()?.scope.as_deref().map(split_scopes))
            .unwrap_or_default();
        Ok(Session {
            config,
            server,
            key,
            current: Mutex::new(current),
            renewing: tokio::sync::Mutex::new(Renewal {
                requested,
                failed: None,
            }),
            finished: std::sync::atomic::AtomicU64::new(0),
            dpop: Mutex::new(dpop),
            resource_dpop: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// How many times one request may ask for more scopes.
    pub(crate) fn max_step_ups(&self) -> u32 {
        self.config.max_step_ups
    }

    /// The access token to send, when one is held.
    pub(crate) fn bearer(&self) -> Option<String> {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        Some(current.as_ref()?.tokens.as_ref()?.access_token.clone())
    }

    /// The headers that authorize a request of `method` to the MCP server,
    /// made afresh for each attempt: `Authorization: Bearer TOKEN`, or for a
    /// DPoP-bound token `Authorization: DPoP TOKEN` and a new `DPoP` proof
    /// (its own `jti`, the server's latest nonce). `None` while no token is
    /// held.
    pub(crate) fn authorization(&self, method: &Method) -> Result<Option<Authorization>, OAuthError> {
        let (token, bound) = {
            let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
            let Some(tokens) = current.as_ref().and_then(|c| c.tokens.as_ref()) else {
                return Ok(None);
            };
            let bound = tokens
                .token_type
                .as_deref()
                .is_some_and(|t| t.eq_ignore_ascii_case("dpop"));
            (tokens.access_token.clone(), bound)
        };
        let sensitive = |text: String| {
            let mut value = HeaderValue::from_str(&text)
                .map_err(|_| OAuthError::Refused("the access token is not a valid header value".into()))?;
            value.set_sensitive(true);
            Ok::<_, OAuthError>(value)
        };
        let key = if bound { self.dpop_key() } else { None };
        let Some(key) = key else {
            return Ok(Some(Authorization {
                authorization: sensitive(format!("Bearer {token}"))?,
                proof: None,
            }));
        };
        let proof = key.proof(
            method.as_str(),
            self.server.as_str(),
            Some(&token),
            NonceFrom::Resource,
        )?;
        Ok(Some(Authorization {
            authorization: sensitive(format!("DPoP {token}"))?,
            proof: Some(sensitive(proof)?),
        }))
    }

    /// Keeps the DPoP nonce a response of the MCP server carries; whether
    /// it asked for one (`401`, `error="use_dpop_nonce"`) and gave it, so
    /// that the request may go again with it.
    pub(crate) fn dpop_nonce(&self, status: StatusCode, headers: &HeaderMap) -> bool {
        let Some(key) = self.dpop_key() else {
            return false;
        };
        let given = key.take_nonce(NonceFrom::Resource, headers);
        given
            && status == StatusCode::UNAUTHORIZED
            && Challenge::from_headers(headers).and_then(|c| c.error).as_deref() == Some(dpop::USE_NONCE)
    }

    /// Whether the MCP server takes DPoP-bound tokens: its `DPoP` challenge,
    /// or its metadata.
    fn note_dpop(&self, challenge: &Challenge, resource: &discovery::ResourceMetadata) {
        if challenge.dpop || resource.dpop {
            self.resource_dpop
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn dpop_key(&self) -> Option<Arc<DpopKey>> {
        self.dpop.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The key to bind tokens of `metadata`'s server to: none when it does
    /// not bind them; the one held, else a new one.
    fn dpop_for(&self, metadata: &ServerMetadata) -> Result<Option<Arc<DpopKey>>, OAuthError> {
        let resource_takes_it = self.resource_dpop.load(std::sync::atomic::Ordering::Relaxed);
        if !resource_takes_it || !dpop::supported(metadata.dpop_signing_alg_values_supported.as_deref()) {
            return Ok(None);
        }
        let mut held = self.dpop.lock().unwrap_or_else(|p| p.into_inner());
        if held.is_none() {
            *held = Some(Arc::new(DpopKey::generate()?));
        }
        Ok(held.clone())
    }

    /// The server refused a request sent with `sent` (`401`, or `403`
    /// with `insufficient_scope`): gets a token that may do better (a
    /// `401` by refreshing first, when `may_refresh`). `Ok` means send it
    /// again.
    pub(crate) async fn renew(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        sent: Option<&str>,
        may_refresh: bool,
    ) -> Result<Renewed, OAuthError> {
        use std::sync::atomic::Ordering;
        let before = self.finished.load(Ordering::Acquire);
        let mut renewal = self.renewing.lock().await;
        if self.bearer().as_deref() != sent {
            // Another request renewed it while this one waited.
            return Ok(Renewed::Elsewhere);
        }
        if let Some((attempt, error)) = &renewal.failed {
            if *attempt > before {
                // The renewal this request waited for failed: so does it.
                return Err(error.clone());
            }
        }
        if self.adopt_stored(sent) {
            return Ok(Renewed::Elsewhere);
        }
        let outcome = self.renew_now(status, headers, &mut renewal, may_refresh).await;
        let attempt = self.finished.fetch_add(1, Ordering::AcqRel) + 1;
        if let Err(e) = &outcome {
            renewal.failed = Some((attempt, e.clone()));
        }
        outcome
    }

    async fn renew_now(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        renewal: &mut Renewal,
        may_refresh: bool,
    ) -> Result<Renewed, OAuthError> {
        let challenge = Challenge::from_headers(headers).unwrap_or_default();
        if status == StatusCode::FORBIDDEN && self.holds_all(&challenge.scopes()) {
            // The token already has every scope the server names: asking
            // again would get the same token, and the same refusal.
            return Err(OAuthError::Refused(format!(
                "the server refuses a token that has the scopes it asks for ({})",
                challenge
                    .scope
                    .as_deref()
                    .map(printable)
                    .unwrap_or_else(|| "none named".into())
            )));
        }
        if status == StatusCode::UNAUTHORIZED && may_refresh && self.refresh(&challenge).await? {
            return Ok(Renewed::Refreshed);
        }
        self.authorize(&challenge, renewal, status == StatusCode::FORBIDDEN)
            .await
            .map(|()| Renewed::Authorized)
    }

    /// Takes the tokens another process (or session) kept for this server
    /// since `sent` was: a refresh token may have been used (and rotated)
    /// there. Whether there were newer ones.
    fn adopt_stored(&self, sent: Option<&str>) -> bool {
        let Some(held) = self.held() else { return false };
        let Some(stored) = self.config.store.load(&self.key, Some(&held.issuer)) else {
            return false;
        };
        let newer = stored
            .tokens
            .as_ref()
            .is_some_and(|t| Some(t.access_token.as_str()) != sent);
        if newer {
            *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(stored);
        }
        newer
    }

    /// Logs in now: asks the server for its challenge (an unauthenticated
    /// request), then runs the flow.
    pub(crate) async fn login(&self) -> Result<Credentials, OAuthError> {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        let ping = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        let answer = fetch::send(Method::POST, self.server.as_str(), headers, ping).await?;
        let challenge = if answer.status == StatusCode::UNAUTHORIZED {
            Challenge::from_headers(&answer.headers).unwrap_or_default()
        } else {
            // Not refused: look for the metadata where it usually is.
            Challenge::default()
        };
        let mut renewal = self.renewing.lock().await;
        self.authorize(&challenge, &mut renewal, false).await?;
        Ok(self.held().unwrap_or_default())
    }

    /// Whether the token held was granted every one of `scopes` (none
    /// named counts as not held: the server said nothing to go on).
    fn holds_all(&self, scopes: &[String]) -> bool {
        let granted = self
            .held()
            .and_then(|h| h.tokens?.scope)
            .map(|s| split_scopes(&s))
            .unwrap_or_default();
        !scopes.is_empty() && scopes.iter().all(|s| granted.contains(s))
    }

    fn held(&self) -> Option<Credentials> {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Keeps `credentials` as the ones in use, and in the store (with the
    /// DPoP key, when there is one).
    fn keep(&self, mut credentials: Credentials) -> Result<(), OAuthError> {
        if let Some(key) = self.dpop_key() {
            credentials.dpop_key = Some(key.to_kept());
        }
        self.config
            .store
            .save(&self.key, &credentials)
            .map_err(|e| OAuthError::Store(e.to_string()))?;
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(credentials);
        Ok(())
    }

    /// Refreshes the token held, when there is a refresh token; whether
    /// a new token came. A refusal (the refresh token expired or was
    /// revoked) is not an error: the caller logs in again.
    async fn refresh(&self, challenge: &Challenge) -> Result<bool, OAuthError> {
        let Some(held) = self.held() else { return Ok(false) };
        let Some(refresh_token) = held.tokens.as_ref().and_then(|t| t.refresh_token.clone()) else {
            return Ok(false);
        };
        let resource =
            discovery::resource_metadata(&self.server, challenge.resource_metadata.as_deref()).await?;
        self.note_dpop(challenge, &resource);
        if !resource.authorization_servers.contains(&held.issuer) {
            // The server moved to another authorization server: what the
            // old one issued is no good there.
            return Ok(false);
        }
        let metadata = discovery::server_metadata(&held.issuer).await?;
        self.check_bound(&metadata)?;
        let identity = self.identity_for(&metadata, held.client.as_ref());
        let Some((client_id, secret, method)) = identity else {
            return Ok(false);
        };
        let dpop = self.dpop_for(&metadata)?;
        let auth = ClientAuth {
            client_id: &client_id,
            secret: secret.as_deref(),
            method: method.as_deref(),
            key: self.config.key.as_ref(),
            dpop: dpop.as_deref(),
        };
        let form = vec![
            ("grant_type", "refresh_token".to_owned()),
            ("refresh_token", refresh_token.clone()),
            ("resource", resource.resource.clone()),
        ];
        let scope = held.tokens.as_ref().and_then(|t| t.scope.clone());
        match grant::request(&metadata, &auth, form, scope.as_deref()).await {
            Ok(mut tokens) => {
                // RFC 6749 §6: a server may keep the refresh token as it was.
                tokens.refresh_token = tokens.refresh_token.or(Some(refresh_token));
                self.keep(Credentials {
                    tokens: Some(tokens),
                    ..held
                })?;
                tracing::debug!(server = %self.server, "refreshed the access token");
                Ok(true)
            }
            Err(e @ OAuthError::Server { .. }) => {
                tracing::debug!(error = %e, "the refresh was refused; logging in again");
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// A pre-registered client's credentials are good at the server that
    /// issued them only: another one named by the MCP server is refused
    /// rather than sent the secret.
    fn check_bound(&self, metadata: &ServerMetadata) -> Result<(), OAuthError> {
        match &self.config.client_issuer {
            Some(bound) if self.config.client_id.is_some() && *bound != metadata.issuer => {
                Err(OAuthError::Refused(format!(
                    "the server sends this client to {}, but its client id is registered with {bound}",
                    metadata.issuer
                )))
            }
            _ => Ok(()),
        }
    }

    /// The client id (secret, auth method) to use with `metadata`'s
    /// server: the pre-registered one, else one registered there before.
    fn identity_for(
        &self,
        metadata: &ServerMetadata,
        registered: Option<&RegisteredClient>,
    ) -> Option<(String, Option<String>, Option<String>)> {
        let config = &self.config;
        if let Some(id) = &config.client_id {
            return Some((
                id.clone(),
                config.client_secret.clone(),
                config.auth_method.clone(),
            ));
        }
        if metadata.client_id_metadata_document_supported {
            if let Some(url) = &config.metadata_url {
                return Some((url.clone(), None, None));
            }
        }
        let client = registered?;
        Some((
            client.client_id.clone(),
            client.client_secret.clone(),
            client.auth_method.clone(),
        ))
    }

    /// Gets a new token from the authorization server the MCP server
    /// names: discovery, registration when needed, then the grant.
    async fn authorize(
        &self,
        challenge: &Challenge,
        renewal: &mut Renewal,
        step_up: bool,
    ) -> Result<(), OAuthError> {
        let config = &self.config;
        let resource =
            discovery::resource_metadata(&self.server, challenge.resource_metadata.as_deref()).await?;
        self.note_dpop(challenge, &resource);
        let held = self.held();
        // An authorization server this client holds credentials for, when
        // the server lists several; else the first. Issuers are compared
        // as identical strings, as the metadata's `issuer` is to its URL.
        let issuer = held
            .as_ref()
            .and_then(|h| resource.authorization_servers.iter().find(|s| **s == h.issuer))
            .unwrap_or(&resource.authorization_servers[0])
            .clone();
        let metadata = discovery::server_metadata(&issuer).await?;
        self.check_bound(&metadata)?;

        // The scopes: what the client was told to ask for, else what the
        // challenge names, else what the metadata lists, else none. What
        // was asked before of this server stays asked (a step-up adds the
        // challenge's to it), so nothing granted before is lost.
        let challenged = challenge.scopes();
        let mut scopes = match &config.scope {
            Some(scope) => split_scopes(scope),
            None if challenge.scope.is_some() || step_up => challenged.clone(),
            None => resource.scopes_supported.clone().unwrap_or_default(),
        };
        let same_server_as_before = held.as_ref().is_some_and(|h| h.issuer == issuer);
        if step_up || same_server_as_before {
            let mut union = renewal.requested.clone();
            for scope in scopes.into_iter().chain(challenged) {
                if !union.contains(&scope) {
                    union.push(scope);
                }
            }
            if step_up && union.len() == renewal.requested.len() {
                return Err(OAuthError::Refused(format!(
                    "the server refuses a token asked with every scope it names ({})",
                    printable(&union.join(" "))
                )));
            }
            scopes = union;
        }
        let wants_refresh = config.grant == Grant::AuthorizationCode
            && metadata
                .scopes_supported
                .as_ref()
                .is_some_and(|s| s.iter().any(|s| s == "offline_access"));
        if wants_refresh && !scopes.iter().any(|s| s == "offline_access") {
            scopes.push("offline_access".into());
        }
        renewal.requested = scopes.clone();
        let scope = (!scopes.is_empty()).then(|| scopes.join(" "));
        // A client is registered for every scope the resource advertises
        // besides those asked now, so that a later step-up within them
        // needs no new registration (an authorization server may refuse
        // scopes a client was not registered for).
        let mut registering = scopes.clone();
        for advertised in resource.scopes_supported.iter().flatten() {
            if !registering.contains(advertised) {
                registering.push(advertised.clone());
            }
        }
        let register_scope = (!registering.is_empty()).then(|| registering.join(" "));

        let stored = config.store.load(&self.key, Some(&metadata.issuer));
        let (tokens, registered) = match config.grant {
            Grant::ClientCredentials => {
                self.client_credentials(&metadata, &resource.resource, scope.as_deref())
                    .await?
            }
            Grant::JwtBearer => {
                let assertion = config
                    .workload
                    .as_ref()
                    .ok_or_else(|| OAuthError::Key("the JWT-bearer grant needs a workload token".into()))?
                    .read()?;
                self.jwt_bearer(&metadata, &resource.resource, scope.as_deref(), assertion)
                    .await?
            }
            Grant::Enterprise => {
                let idp = config.enterprise.as_ref().ok_or_else(|| {
                    OAuthError::Key("enterprise-managed authorization needs the identity provider".into())
                })?;
                let assertion = idp
                    .identity_assertion(&metadata.issuer, &resource.resource, scope.as_deref())
                    .await?;
                self.jwt_bearer(&metadata, &resource.resource, scope.as_deref(), assertion)
                    .await?
            }
            Grant::AuthorizationCode => {
                self.authorization_code(
                    &metadata,
                    &resource.resource,
                    (scope.as_deref(), register_scope.as_deref()),
                    stored.and_then(|s| s.client),
                    step_up,
                )
                .await?
            }
        };
        self.keep(Credentials {
            issuer: metadata.issuer.clone(),
            client: registered,
            tokens: Some(tokens),
            dpop_key: None,
        })
    }

    /// The client credentials grant (RFC 6749 §4.4).
    async fn client_credentials(
        &self,
        metadata: &ServerMetadata,
        resource: &str,
        scope: Option<&str>,
    ) -> Result<(Tokens, Option<RegisteredClient>), OAuthError> {
        let grant = vec![("grant_type", "client_credentials".to_owned())];
        let needs = "the client credentials grant needs a client id (and a secret or a key)";
        self.machine_grant(metadata, resource, scope, grant, needs).await
    }

    /// The JWT-bearer grant (RFC 7523 §2.1) with `assertion` (a
    /// workload's identity token, or an enterprise's identity assertion
    /// grant).
    async fn jwt_bearer(
        &self,
        metadata: &ServerMetadata,
        resource: &str,
        scope: Option<&str>,
        assertion: String,
    ) -> Result<(Tokens, Option<RegisteredClient>), OAuthError> {
        let grant = vec![("grant_type", JWT_BEARER.to_owned()), ("assertion", assertion)];
        let needs = "the JWT-bearer grant needs the client id the authorization server knows the workload by";
        self.machine_grant(metadata, resource, scope, grant, needs).await
    }

    /// A grant for a program acting for itself, as the pre-registered
    /// client (`needs` says why one is needed when there is none): no
    /// browser, no registration.
    async fn machine_grant(
        &self,
        metadata: &ServerMetadata,
        resource: &str,
        scope: Option<&str>,
        mut form: Vec<(&'static str, String)>,
        needs: &str,
    ) -> Result<(Tokens, Option<RegisteredClient>), OAuthError> {
        let config = &self.config;
        let Some(client_id) = &config.client_id else {
            return Err(OAuthError::Registration(needs.into()));
        };
        let dpop = self.dpop_for(metadata)?;
        let auth = ClientAuth {
            client_id,
            secret: config.client_secret.as_deref(),
            method: config.auth_method.as_deref(),
            key: config.key.as_ref(),
            dpop: dpop.as_deref(),
        };
        form.push(("resource", resource.to_owned()));
        if let Some(scope) = scope {
            form.push(("scope", scope.to_owned()));
        }
        Ok((grant::request(metadata, &auth, form, scope).await?, None))
    }

    /// The authorization code grant with PKCE (OAuth 2.1 §4.1).
    /// `scopes` are those to ask for, and those to register a new client
    /// for (the resource's advertised ones besides).
    async fn authorization_code(
        &self,
        metadata: &ServerMetadata,
        resource: &str,
        (scope, register_scope): (Option<&str>, Option<&str>),
        registered: Option<RegisteredClient>,
        step_up: bool,
    ) -> Result<(Tokens, Option<RegisteredClient>), OAuthError> {
        let config = &self.config;
        let Some(authorizer) = &config.authorizer else {
            return Err(match (step_up, scope) {
                (true, Some(scope)) => OAuthError::ScopeNeeded {
                    server: self.key.clone(),
                    scope: scope.to_owned(),
                },
                _ => OAuthError::LoginNeeded(self.key.clone()),
            });
        };
        // PKCE is how the code is bound to this client: a server that
        // does not say it takes S256 is not used (the MCP specification's
        // MUST).
        if !metadata
            .code_challenge_methods_supported
            .iter()
            .any(|m| m == "S256")
        {
            return Err(OAuthError::Refused(format!(
                "{} does not advertise PKCE with S256 (code_challenge_methods_supported)",
                metadata.issuer
            )));
        }
        let endpoint = metadata.authorization_endpoint.as_deref().ok_or_else(|| {
            OAuthError::Discovery(format!("{} has no authorization_endpoint", metadata.issuer))
        })?;
        let redirect_uri = authorizer.redirect_uri().await?;

        // Who this client is there: pre-registered, registered before
        // (with this redirect URI), a metadata document, or a new
        // registration.
        // A client registered for fewer scopes than asked now is
        // registered again: the authorization server may refuse the rest
        // (`invalid_scope`).
        let registered = registered.filter(|r| {
            r.redirect_uri
                .as_deref()
                .is_some_and(|registered| same_redirect(registered, &redirect_uri))
                && covers(r.scope.as_deref(), scope)
        });
        let (client_id, secret, method, registered) = match self.identity_for(metadata, registered.as_ref()) {
            Some((id, secret, method)) => (id, secret, method, registered),
            None => {
                let Some(endpoint) = &metadata.registration_endpoint else {
                    return Err(OAuthError::Registration(format!(
                        "{} takes no client ID metadata document{} and has no registration endpoint: give a client id",
                        metadata.issuer,
                        if config.metadata_url.is_some() { "" } else { " (none configured)" }
                    )));
                };
                let client = grant::register(
                    endpoint,
                    &config.client_name,
                    Some(&redirect_uri),
                    register_scope.or(scope),
                )
                .await?;
                (
                    client.client_id.clone(),
                    client.client_secret.clone(),
                    client.auth_method.clone(),
                    Some(client),
                )
            }
        };

        let pkce = pkce::Pkce::new().map_err(|e| OAuthError::Authorizer(format!("no randomness: {e}")))?;
        let state =
            pkce::random_token().map_err(|e| OAuthError::Authorizer(format!("no randomness: {e}")))?;
        let mut url = Url::parse(endpoint)
            .map_err(|e| OAuthError::Discovery(format!("authorization_endpoint: {e}")))?;
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &client_id)
                .append_pair("redirect_uri", &redirect_uri)
                .append_pair("code_challenge", &pkce.challenge)
                .append_pair("code_challenge_method", "S256")
                .append_pair("state", &state)
                .append_pair("resource", resource);
            if let Some(scope) = scope {
                query.append_pair("scope", scope);
            }
        }
        let back = authorizer.authorize(url.into()).await?;
        let code = read_authorization_response(&back, metadata, &state)?;
        let dpop = self.dpop_for(metadata)?;

        let auth = ClientAuth {
            client_id: &client_id,
            secret: secret.as_deref(),
            method: method.as_deref(),
            key: config.key.as_ref(),
            dpop: dpop.as_deref(),
        };
        let form = vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", pkce.verifier),
            ("resource", resource.to_owned()),
        ];
        Ok((grant::request(metadata, &auth, form, scope).await?, registered))
    }
}

/// The code of an authorization response (the redirect URL `back`),
/// once it is known to come from `metadata`'s server (RFC 9207 §2.4,
/// before anything else in it is believed, its error included) and to
/// answer this request (`state`).
fn read_authorization_response(
    back: &str,
    metadata: &ServerMetadata,
    state: &str,
) -> Result<String, OAuthError> {
    let url = Url::parse(back).map_err(|e| OAuthError::Authorizer(format!("the redirect {back:?}: {e}")))?;
    let param = |name: &str| {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    match (metadata.iss_parameter_supported, param("iss")) {
        (true, None) => {
            return Err(OAuthError::Refused(format!(
                "the authorization response has no iss, and {} says it sends one",
                metadata.issuer
            )))
        }
        // A simple string comparison: no normalization (RFC 3986 §6.2.1).
        (_, Some(iss)) if iss != metadata.issuer => {
            return Err(OAuthError::Refused(format!(
                "the authorization response comes from {iss:?}, not {:?}",
                metadata.issuer
            )))
        }
        _ => {}
    }
    if param("state").as_deref() != Some(state) {
        return Err(OAuthError::Refused(
            "the authorization response's state is not this request's".into(),
        ));
    }
    if let Some(error) = param("error") {
        return Err(OAuthError::Server {
            at: "authorization endpoint".into(),
            status: 0,
            error: printable(&error),
            description: param("error_description").map(|d| printable(&d)),
        });
    }
    param("code")
        .filter(|c| !c.is_empty())
        .ok_or_else(|| OAuthError::Authorizer("the authorization response has no code".into()))
}

/// Whether a redirect URI registered before serves for `now`: the same,
/// or both on a loopback address differing by port only (RFC 8252 §7.3:
/// servers take any port there, and a loopback authorizer's port is
/// random).
fn same_redirect(registered: &str, now: &str) -> bool {
    if registered == now {
        return true;
    }
    let without_port = |uri: &str| {
        let mut url = Url::parse(uri).ok()?;
        if !matches!(url.host_str(), Some("127.0.0.1" | "[::1]" | "localhost")) {
            return None;
        }
        url.set_port(None).ok()?;
        Some(url)
    };
    matches!((without_port(registered), without_port(now)), (Some(a), Some(b)) if a == b)
}

/// Whether a client registered for `registered` scopes (unknown: `None`)
/// may ask for `asked` (`offline_access`, which servers grant by grant
/// type, needs no registration).
fn covers(registered: Option<&str>, asked: Option<&str>) -> bool {
    let asked: Vec<String> = asked
        .map(split_scopes)
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s != "offline_access")
        .collect();
    if asked.is_empty() {
        return true;
    }
    match registered {
        None => false,
        Some(registered) => {
            let registered = split_scopes(registered);
            asked.iter().all(|s| registered.contains(s))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_is_registered_again_for_scopes_it_was_not_registered_for() {
        for (registered, asked, covered) in [
            (Some("mcp mcp:admin"), Some("mcp"), true),
            (Some("mcp mcp:admin"), Some("mcp:admin mcp offline_access"), true),
            (Some("mcp"), Some("mcp mcp:admin"), false),
            (None, Some("mcp"), false),
            (None, None, true),
            (None, Some("offline_access"), true),
            (Some(""), Some("mcp"), false),
        ] {
            assert_eq!(covers(registered, asked), covered, "{registered:?} {asked:?}");
        }
    }

    #[test]
    fn authorization_responses_are_checked_in_rfc_9207_order() {
        let meta = |supported: bool| ServerMetadata {
            issuer: "https://as.example".into(),
            iss_parameter_supported: supported,
            ..ServerMetadata::default()
        };
        let back = "http://127.0.0.1:1/callback";
        let cases: &[(bool, &str, Result<&str, &str>)] = &[
            (true, "code=c&state=s&iss=https%3A%2F%2Fas.example", Ok("c")),
            (true, "code=c&state=s", Err("no iss")),
            (false, "code=c&state=s", Ok("c")),
            (
                false,
                "code=c&state=s&iss=https%3A%2F%2Fevil.example",
                Err("comes from"),
            ),
            (
                true,
                "code=c&state=s&iss=https%3A%2F%2Fas.example%2F",
                Err("comes from"),
            ),
            (
                true,
                "code=c&state=s&iss=HTTPS%3A%2F%2Fas.example",
                Err("comes from"),
            ),
            (false, "code=c&state=other", Err("state")),
            (false, "code=c", Err("state")),
            (false, "error=access_denied&state=s", Err("access_denied")),
            (
                true,
                "error=access_denied&state=s&iss=https%3A%2F%2Fevil.example",
                Err("comes from"),
            ),
            (false, "state=s", Err("no code")),
        ];
        for (supported, query, expected) in cases {
            let got = read_authorization_response(&format!("{back}?{query}"), &meta(*supported), "s");
            match (got, expected) {
                (Ok(code), Ok(want)) => assert_eq!(&code, want, "{query}"),
                (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{query}: {e}"),
                (got, want) => panic!("{query}: got {got:?}, want {want:?}"),
            }
        }
    }
}
