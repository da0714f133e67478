//! OAuth bearer tokens on the HTTP server, end to end over real sockets: an
//! issuer of our own publishes its metadata and keys, tokens are signed
//! with real keys of every accepted algorithm, and hostile ones (`alg:
//! none`, HS256 signed with the public key, expired, not yet valid, another
//! issuer or audience, an unknown key, a huge token, a token in the URL)
//! are refused, all with the same answer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use http_body_util::BodyExt;
use jrpc::auth::JwtVerifier;
use jrpc::client::Client;
use jrpc::middleware::Authorize;
use jrpc::server::http::route::full_body;
use jrpc::server::http::BearerAuth;
use jrpc::server::http::HttpServer;
use jrpc::server::Serving;
use jrpc::{RequestContext, Router};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair};
use serde_json::{json, Value};

/// A key that signs tokens, and its public half as a JWK.
enum Signer {
    Ec(EcdsaKeyPair),
    Ed(Ed25519KeyPair),
    Rsa(RsaKeyPair),
}

const RSA_KEY: &[u8] = include_bytes!("fixtures/oauth_test_rsa2048.pk8");

impl Signer {
    fn ec() -> Self {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        Signer::Ec(EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap())
    }

    fn ed() -> Self {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
        Signer::Ed(Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap())
    }

    fn rsa() -> Self {
        Signer::Rsa(RsaKeyPair::from_pkcs8(RSA_KEY).unwrap())
    }

    fn jwk(&self, kid: &str) -> Value {
        let b64 = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
        match self {
            Signer::Ec(key) => {
                let point = key.public_key().as_ref();
                json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
                       "x": b64(&point[1..33]), "y": b64(&point[33..])})
            }
            Signer::Ed(key) => {
                json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": b64(key.public_key().as_ref())})
            }
            Signer::Rsa(key) => {
                let components: signature::RsaPublicKeyComponents<Vec<u8>> = key.public().into();
                json!({"kty": "RSA", "kid": kid, "n": b64(&components.n), "e": b64(&components.e)})
            }
        }
    }

    /// A token: `header` (with `alg`) and `claims`, signed.
    fn sign(&self, header: Value, claims: &Value) -> String {
        let alg = header["alg"].as_str().unwrap().to_owned();
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let rng = SystemRandom::new();
        let signature = match self {
            Signer::Ec(key) => key.sign(&rng, signed.as_bytes()).unwrap().as_ref().to_vec(),
            Signer::Ed(key) => key.sign(signed.as_bytes()).as_ref().to_vec(),
            Signer::Rsa(key) => {
                let padding: &dyn signature::RsaEncoding = match alg.as_str() {
                    "RS256" => &signature::RSA_PKCS1_SHA256,
                    "RS512" => &signature::RSA_PKCS1_SHA512,
                    "PS256" => &signature::RSA_PSS_SHA256,
                    other => panic!("{other}"),
                };
                let mut out = vec![0; key.public().modulus_len()];
                key.sign(padding, &rng, signed.as_bytes(), &mut out).unwrap();
                out
            }
        };
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature))
    }
}

/// An authorization server as far as a resource server sees one: its
/// metadata and its key set, which a test can change (key rotation) or take
/// away (an outage).
struct Issuer {
    url: String,
    jwks: Arc<Mutex<Option<Value>>>,
    fetches: Arc<AtomicUsize>,
    _serving: Serving,
}

impl Issuer {
    async fn start(keys: Value) -> Issuer {
        let jwks = Arc::new(Mutex::new(Some(keys)));
        let fetches = Arc::new(AtomicUsize::new(0));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let metadata = json!({
            "issuer": url,
            "authorization_endpoint": format!("{url}/authorize"),
            "token_endpoint": format!("{url}/token"),
            "jwks_uri": format!("{url}/jwks"),
        });
        let (published, counted) = (Arc::clone(&jwks), Arc::clone(&fetches));
        let server = HttpServer::new(Router::new())
            .route("/.well-known/oauth-authorization-server", move |_, _| {
                let body = metadata.to_string();
                async move { json_response(StatusCode::OK, body) }
            })
            .route("/jwks", move |_, _| {
                counted.fetch_add(1, Ordering::SeqCst);
                let keys = published.lock().unwrap().clone();
                async move {
                    match keys {
                        Some(keys) => json_response(StatusCode::OK, keys.to_string()),
                        None => json_response(StatusCode::SERVICE_UNAVAILABLE, "{}".into()),
                    }
                }
            });
        let serving = server.serve_tcp(listener);
        Issuer {
            url,
            jwks,
            fetches,
            _serving: serving,
        }
    }

    fn publish(&self, keys: Option<Value>) {
        *self.jwks.lock().unwrap() = keys;
    }
}

fn json_response(status: StatusCode, body: String) -> http::Response<jrpc::server::http::route::RouteBody> {
    http::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(full_body(body))
        .unwrap()
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// The claims of a good token for `audience` from `issuer`.
fn claims(issuer: &str, audience: &str, scope: &str) -> Value {
    json!({"iss": issuer, "aud": audience, "sub": "alice", "scope": scope,
           "exp": now() + 300, "iat": now(), "client_id": "cli"})
}

/// Who called, and with what: what a handler sees of the token.
fn router() -> Router {
    Router::new()
        .method("whoami", |(): (), ctx: RequestContext| async move {
            let scopes: Vec<String> = ctx
                .get::<jrpc::context::Scopes>()
                .map(|s| s.iter().map(str::to_owned).collect())
                .unwrap_or_default();
            Ok::<_, jrpc::Error>(json!({
                "identity": ctx.identity().map(|i| i.name().to_owned()),
                "scopes": scopes,
            }))
        })
        .method("admin.reset", |(): ()| async { Ok::<_, jrpc::Error>("reset") })
        .layer(Authorize::new().require_scope("admin.*", "admin"))
}

/// A resource server at `/` whose tokens come from `issuer`, needing the
/// scope `rpc` on every request.
async fn resource(issuer: &Issuer, cooldown: Duration) -> (Serving, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let verifier = JwtVerifier::builder(&issuer.url)
        .audience(&url)
        .refetch_cooldown(cooldown)
        .build();
    let bearer = BearerAuth::new(verifier)
        .require_scopes(["rpc"])
        .resource_metadata(format!("{url}.well-known/oauth-protected-resource"));
    let serving = HttpServer::new(router()).bearer(bearer).serve_tcp(listener);
    (serving, url)
}

struct Answer {
    status: StatusCode,
    challenge: Option<String>,
    retry_after: Option<String>,
    body: Value,
}

async fn post(url: &str, auth: Option<&str>, path_and_query: &str, method: &str) -> Answer {
    let target = format!("{}{}", url.trim_end_matches('/'), path_and_query);
    let client = Client::builder().http(&target).unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    if let Some(auth) = auth {
        headers.insert("authorization", HeaderValue::from_str(auth).unwrap());
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method}).to_string();
    let response = tokio::time::timeout(
        Duration::from_secs(20),
        client.send_streaming(Method::POST, headers, Bytes::from(body)),
    )
    .await
    .expect("an answer in time")
    .expect("an HTTP answer");
    let status = response.status();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let (challenge, retry_after) = (header("www-authenticate"), header("retry-after"));
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Answer {
        status,
        challenge,
        retry_after,
        body,
    }
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[tokio::test]
async fn tokens_of_every_accepted_algorithm_are_let_through_with_their_grant() {
    let (ec, ed, rsa) = (Signer::ec(), Signer::ed(), Signer::rsa());
    let keys = json!({"keys": [ec.jwk("ec"), ed.jwk("ed"), rsa.jwk("rsa"),
        // Keys that cannot sign what is accepted are left out, not fatal.
        {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
        {"kty": "EC", "crv": "P-256", "kid": "enc", "use": "enc", "x": "AA", "y": "AA"}]});
    let issuer = Issuer::start(keys).await;
    let (_serving, url) = resource(&issuer, Duration::from_secs(2)).await;
    let good = claims(&issuer.url, &url, "rpc admin");
    let tokens = [
        (
            "ES256",
            ec.sign(json!({"alg": "ES256", "kid": "ec", "typ": "at+jwt"}), &good),
        ),
        ("EdDSA", ed.sign(json!({"alg": "EdDSA", "kid": "ed"}), &good)),
        ("RS256", rsa.sign(json!({"alg": "RS256", "kid": "rsa"}), &good)),
        ("RS512", rsa.sign(json!({"alg": "RS512", "kid": "rsa"}), &good)),
        ("PS256", rsa.sign(json!({"alg": "PS256", "kid": "rsa"}), &good)),
        // No kid: every key that fits the algorithm is tried.
        ("ES256 without kid", ec.sign(json!({"alg": "ES256"}), &good)),
    ];
    for (what, token) in &tokens {
        let answer = post(&url, Some(&bearer(token)), "/", "whoami").await;
        assert_eq!(answer.status, StatusCode::OK, "{what}: {:?}", answer.body);
        assert_eq!(
            answer.body["result"],
            json!({"identity": "alice", "scopes": ["rpc", "admin"]}),
            "{what}"
        );
    }
    // The key set was fetched once for all of them.
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1);
    // Audience as an array naming this resource; scopes as `scp`.
    let mut listed = claims(&issuer.url, &url, "");
    listed["aud"] = json!(["https://other.example/", url]);
    listed.as_object_mut().unwrap().remove("scope");
    listed["scp"] = json!(["rpc"]);
    let token = ec.sign(json!({"alg": "ES256", "kid": "ec"}), &listed);
    let answer = post(&url, Some(&bearer(&token)), "/", "whoami").await;
    assert_eq!(
        answer.body["result"]["scopes"],
        json!(["rpc"]),
        "{:?}",
        answer.body
    );
    // A method's own scope: admin.* needs `admin`, which this token lacks.
    let answer = post(&url, Some(&bearer(&token)), "/", "admin.reset").await;
    assert_eq!(answer.body["error"]["code"], -32004, "{:?}", answer.body);
    assert!(answer.body["error"]["data"].as_str().unwrap().contains("admin"));
    let admin = ec.sign(json!({"alg": "ES256", "kid": "ec"}), &good);
    let answer = post(&url, Some(&bearer(&admin)), "/", "admin.reset").await;
    assert_eq!(answer.body["result"], "reset", "{:?}", answer.body);
}

#[tokio::test]
async fn hostile_tokens_are_refused_all_alike() {
    let ec = Signer::ec();
    let issuer = Issuer::start(json!({"keys": [ec.jwk("ec")]})).await;
    let (_serving, url) = resource(&issuer, Duration::from_secs(60)).await;
    let good = claims(&issuer.url, &url, "rpc");
    let header = json!({"alg": "ES256", "kid": "ec"});
    let with = |change: &dyn Fn(&mut Value)| {
        let mut claims = good.clone();
        change(&mut claims);
        ec.sign(header.clone(), &claims)
    };
    let unsigned = |alg: &str| {
        let head = URL_SAFE_NO_PAD.encode(json!({"alg": alg, "kid": "ec"}).to_string());
        format!("{head}.{}.", URL_SAFE_NO_PAD.encode(good.to_string()))
    };
    // HS256 with the issuer's public key as the secret: key confusion.
    let confused = {
        let head = URL_SAFE_NO_PAD.encode(json!({"alg": "HS256", "kid": "ec"}).to_string());
        let signed = format!("{head}.{}", URL_SAFE_NO_PAD.encode(good.to_string()));
        let Signer::Ec(key) = &ec else { unreachable!() };
        let secret = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key.public_key().as_ref());
        let tag = ring::hmac::sign(&secret, signed.as_bytes());
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    };
    let other_key = Signer::ec().sign(header.clone(), &good);
    let tampered = {
        let token = ec.sign(header.clone(), &good);
        let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
        let mut claims = good.clone();
        claims["sub"] = json!("mallory");
        parts[1] = URL_SAFE_NO_PAD.encode(claims.to_string());
        parts.join(".")
    };
    let huge = format!("{}.{}", ec.sign(header.clone(), &good), "A".repeat(1024 * 1024));
    let cases: Vec<(&str, String)> = vec![
        ("alg none", unsigned("none")),
        ("alg None", unsigned("None")),
        ("HS256 signed with the public key", confused),
        ("signed by another key", other_key),
        ("claims changed after signing", tampered),
        (
            "unknown kid",
            ec.sign(json!({"alg": "ES256", "kid": "nope"}), &good),
        ),
        ("expired", with(&|c| c["exp"] = json!(now() - 120))),
        ("not yet valid", with(&|c| c["nbf"] = json!(now() + 600))),
        (
            "no exp",
            with(&|c| drop(c.as_object_mut().unwrap().remove("exp"))),
        ),
        (
            "another issuer",
            with(&|c| c["iss"] = json!("https://evil.example")),
        ),
        (
            "another audience",
            with(&|c| c["aud"] = json!("https://other.example/")),
        ),
        (
            "no audience",
            with(&|c| drop(c.as_object_mut().unwrap().remove("aud"))),
        ),
        (
            "audience a prefix",
            with(&|c| c["aud"] = json!(url.trim_end_matches('/'))),
        ),
        ("not a JWT", "opaque-token".into()),
        (
            "crit header",
            ec.sign(json!({"alg": "ES256", "kid": "ec", "crit": ["exp"]}), &good),
        ),
    ];
    let mut bodies = Vec::new();
    for (what, token) in &cases {
        let answer = post(&url, Some(&bearer(token)), "/", "whoami").await;
        assert_eq!(
            answer.status,
            StatusCode::UNAUTHORIZED,
            "{what}: {:?}",
            answer.body
        );
        let challenge = answer.challenge.unwrap_or_default();
        assert!(challenge.starts_with("Bearer "), "{what}: {challenge}");
        assert!(
            challenge.contains(r#"error="invalid_token""#),
            "{what}: {challenge}"
        );
        bodies.push((challenge, answer.body));
    }
    assert!(
        bodies.windows(2).all(|w| w[0] == w[1]),
        "refusals differ: {bodies:#?}"
    );
    // A token too big to look at: refused before it is decoded (by the
    // server's header limit, or by the verifier's).
    let answer = post(&url, Some(&bearer(&huge)), "/", "whoami").await;
    assert!(
        [
            StatusCode::UNAUTHORIZED,
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
        ]
        .contains(&answer.status),
        "a 1 MiB token: {}",
        answer.status
    );
    // Unknown key ids within the cooldown (a minute here) fetch nothing
    // more: made-up ids cannot make the server hammer its issuer.
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn missing_tokens_and_scopes_are_answered_as_rfc_6750_says() {
    let ec = Signer::ec();
    let issuer = Issuer::start(json!({"keys": [ec.jwk("ec")]})).await;
    let (_serving, url) = resource(&issuer, Duration::from_secs(2)).await;
    let metadata = format!(r#"resource_metadata="{url}.well-known/oauth-protected-resource""#);
    // No token: no error code, where to learn more, and the scope needed.
    let answer = post(&url, None, "/", "whoami").await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    let challenge = answer.challenge.unwrap();
    assert!(!challenge.contains("error="), "{challenge}");
    assert!(challenge.contains(r#"scope="rpc""#), "{challenge}");
    assert!(challenge.contains(&metadata), "{challenge}");
    assert_eq!(answer.body["error"]["code"], -32004);
    // Another scheme is no token either.
    let answer = post(&url, Some("Basic YWxpY2U6cHc="), "/", "whoami").await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    // A good token without the server's scope: 403 naming it.
    let token = ec.sign(
        json!({"alg": "ES256", "kid": "ec"}),
        &claims(&issuer.url, &url, "other"),
    );
    let answer = post(&url, Some(&bearer(&token)), "/", "whoami").await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    let challenge = answer.challenge.unwrap();
    assert!(challenge.contains(r#"error="insufficient_scope""#), "{challenge}");
    assert!(challenge.contains(r#"scope="rpc""#), "{challenge}");
    // A token in the URL is refused even when it is good.
    let good = ec.sign(
        json!({"alg": "ES256", "kid": "ec"}),
        &claims(&issuer.url, &url, "rpc"),
    );
    let answer = post(&url, None, &format!("/?access_token={good}"), "whoami").await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(answer.challenge.unwrap().contains(r#"error="invalid_request""#));
    // The health check needs no token.
    let health = Client::builder().http(&format!("{url}health")).unwrap();
    let response = health
        .send_streaming(Method::GET, HeaderMap::new(), Bytes::new())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn keys_rotate_and_an_unreachable_issuer_fails_closed() {
    let (old, new) = (Signer::ec(), Signer::ed());
    let issuer = Issuer::start(json!({"keys": [old.jwk("old")]})).await;
    let (_serving, url) = resource(&issuer, Duration::from_millis(200)).await;
    let good = claims(&issuer.url, &url, "rpc");
    let by_old = old.sign(json!({"alg": "ES256", "kid": "old"}), &good);
    assert_eq!(
        post(&url, Some(&bearer(&by_old)), "/", "whoami").await.status,
        StatusCode::OK
    );
    // The issuer publishes a new key and signs with it: accepted within
    // the cooldown, the key set fetched again.
    issuer.publish(Some(json!({"keys": [old.jwk("old"), new.jwk("new")]})));
    let by_new = new.sign(json!({"alg": "EdDSA", "kid": "new"}), &good);
    let mut accepted = false;
    for _ in 0..50 {
        if post(&url, Some(&bearer(&by_new)), "/", "whoami").await.status == StatusCode::OK {
            accepted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(accepted, "a newly published key was not accepted within 5 s");

    // A resource server whose issuer never answers lets nothing through,
    // and says it cannot check tokens now (503, Retry-After), not that a
    // good token is invalid: a client told that would log in again, in a
    // loop (issue 44).
    let down = Issuer::start(json!({"keys": [old.jwk("old")]})).await;
    down.publish(None);
    let (_serving, url) = resource(&down, Duration::from_millis(200)).await;
    let token = old.sign(
        json!({"alg": "ES256", "kid": "old"}),
        &claims(&down.url, &url, "rpc"),
    );
    let answer = post(&url, Some(&bearer(&token)), "/", "whoami").await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.retry_after.as_deref(), Some("5"));
    assert!(
        answer.challenge.is_none(),
        "no challenge: nothing is wrong with the token"
    );
    assert_eq!(answer.body["error"]["code"], -32007, "{}", answer.body);
    // A malformed token is still invalid: nothing to fetch keys for.
    let answer = post(&url, Some("Bearer not.a.jwt"), "/", "whoami").await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_websocket_upgrade_needs_a_token_and_its_calls_carry_the_grant() {
    let ec = Signer::ec();
    let issuer = Issuer::start(json!({"keys": [ec.jwk("ec")]})).await;
    let (_serving, url) = resource(&issuer, Duration::from_secs(2)).await;
    let ws = url.replacen("http://", "ws://", 1);
    let refused = Client::builder().connect_ws(&ws).await;
    assert!(refused.is_err(), "a WebSocket without a token was accepted");
    let token = ec.sign(
        json!({"alg": "ES256", "kid": "ec"}),
        &claims(&issuer.url, &url, "rpc"),
    );
    let client = Client::builder()
        .header("Authorization", &bearer(&token))
        .connect_ws(&ws)
        .await
        .expect("a WebSocket with a good token");
    let who: Value = client.call("whoami", ()).await.unwrap();
    assert_eq!(who, json!({"identity": "alice", "scopes": ["rpc"]}));

    // The connection ends when its token does.
    let mut short = claims(&issuer.url, &url, "rpc");
    short["exp"] = json!(now() + 2);
    let token = ec.sign(json!({"alg": "ES256", "kid": "ec"}), &short);
    let client = Client::builder()
        .header("Authorization", &bearer(&token))
        .connect_ws(&ws)
        .await
        .expect("a WebSocket with a token good for 2 s");
    let _: Value = client.call("whoami", ()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        match client.call::<Value>("whoami", ()).await {
            Err(e) => {
                assert!(!matches!(e, jrpc::CallError::Timeout(_)), "{e}");
                break;
            }
            Ok(_) => assert!(
                tokio::time::Instant::now() < deadline,
                "still open long after its token expired"
            ),
        }
    }
}

#[tokio::test]
async fn opaque_tokens_are_checked_by_introspection() {
    use jrpc::auth::IntrospectionVerifier;
    // An introspection endpoint that knows one token, and only answers the
    // resource server it knows.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let resource_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", resource_listener.local_addr().unwrap());
    let (as_issuer, as_audience) = (issuer.clone(), url.clone());
    let server = HttpServer::new(Router::new()).route("/introspect", move |request, _| {
        let (iss, aud) = (as_issuer.clone(), as_audience.clone());
        async move {
            let expected = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("rs:s%C3%A9cret"));
            let authorized = request.headers().get("authorization").is_some_and(|v| *v == *expected);
            let body = request.into_body().collect().await.unwrap().to_bytes();
            let form = String::from_utf8_lossy(&body).into_owned();
            if !authorized {
                return json_response(StatusCode::UNAUTHORIZED, "{}".into());
            }
            let answer = if form.contains("token=opaque-good&") {
                json!({"active": true, "aud": aud, "iss": iss, "sub": "carol", "scope": "rpc", "exp": now() + 60})
            } else if form.contains("token=opaque-elsewhere&") {
                json!({"active": true, "aud": "https://other.example/", "iss": iss, "sub": "carol", "scope": "rpc"})
            } else {
                json!({"active": false})
            };
            json_response(StatusCode::OK, answer.to_string())
        }
    });
    let _issuer = server.serve_tcp(listener);
    let verifier = IntrospectionVerifier::new(format!("{issuer}/introspect"), "rs", "sécret")
        .audience(&url)
        .issuer(&issuer);
    let _serving = HttpServer::new(router())
        .bearer(BearerAuth::new(verifier).require_scopes(["rpc"]))
        .serve_tcp(resource_listener);
    let answer = post(&url, Some("Bearer opaque-good"), "/", "whoami").await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(answer.body["result"]["identity"], "carol");
    for token in ["opaque-bad", "opaque-elsewhere"] {
        let answer = post(&url, Some(&bearer(token)), "/", "whoami").await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{token}");
    }
    // The wrong client secret: the endpoint refuses the resource server, so
    // it cannot check tokens: nothing gets through, and it says so (503,
    // not a client's token called invalid).
    let wrong = IntrospectionVerifier::new(format!("{issuer}/introspect"), "rs", "guess").audience(&url);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other = format!("http://{}/", listener.local_addr().unwrap());
    let _other = HttpServer::new(router())
        .bearer(BearerAuth::new(wrong))
        .serve_tcp(listener);
    let answer = post(&other, Some("Bearer opaque-good"), "/", "whoami").await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
}

/// One POST with `headers` (`Authorization`, `DPoP`): status, challenges,
/// the `DPoP-Nonce` given, and the body.
async fn post_headers(
    url: &str,
    extra: &[(&str, String)],
) -> (StatusCode, Vec<String>, Option<String>, Value) {
    let client = Client::builder().http(url).unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    for (name, value) in extra {
        headers.insert(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "whoami"}).to_string();
    let response = client
        .send_streaming(Method::POST, headers, Bytes::from(body))
        .await
        .unwrap();
    let status = response.status();
    let challenges = response
        .headers()
        .get_all("www-authenticate")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    let nonce = response
        .headers()
        .get("dpop-nonce")
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        challenges,
        nonce,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// A DPoP proof by `key` for a POST to `url` carrying `token`.
fn proof(key: &Signer, url: &str, token: &str, nonce: Option<&str>, jti: &str) -> String {
    let ath = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()));
    let mut claims = json!({"jti": jti, "htm": "POST", "htu": url, "iat": now(), "ath": ath});
    if let Some(nonce) = nonce {
        claims["nonce"] = json!(nonce);
    }
    key.sign(
        json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": key.jwk("dpop")}),
        &claims,
    )
}

/// `BearerAuth::dpop` over real sockets: a DPoP-bound token with its proof
/// is let through once per proof; a bound token as a bearer token, an
/// unbound token as DPoP, a replayed or foreign proof are refused with
/// `WWW-Authenticate: DPoP …`, all with the same body; nonces are asked
/// for and honoured.
#[tokio::test]
async fn dpop_bound_tokens_need_their_proofs() {
    use jrpc::auth::Dpop;
    let issuer_key = Signer::ec();
    let issuer = Issuer::start(json!({"keys": [issuer_key.jwk("k")]})).await;
    let serve = |dpop: Dpop| {
        let issuer_url = issuer.url.clone();
        async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}/", listener.local_addr().unwrap());
            let verifier = JwtVerifier::builder(&issuer_url).audience(&url).build();
            let bearer = BearerAuth::new(verifier).dpop(dpop);
            (HttpServer::new(router()).bearer(bearer).serve_tcp(listener), url)
        }
    };
    let (_required, url) = serve(Dpop::require()).await;
    let holder = Signer::ec();
    let jkt = jrpc::auth::thumbprint(&holder.jwk("dpop")).unwrap();
    let mut bound = claims(&issuer.url, &url, "rpc");
    bound["cnf"] = json!({"jkt": jkt});
    let token = issuer_key.sign(json!({"alg": "ES256", "kid": "k"}), &bound);
    let unbound = issuer_key.sign(
        json!({"alg": "ES256", "kid": "k"}),
        &claims(&issuer.url, &url, "rpc"),
    );

    let good = proof(&holder, &url, &token, None, "one");
    let dpop_auth =
        |token: &str, proof: String| vec![("authorization", format!("DPoP {token}")), ("dpop", proof)];
    let (status, _, _, body) = post_headers(&url, &dpop_auth(&token, good.clone())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["identity"], "alice");

    let stranger = Signer::ec();
    type Headers = Vec<(&'static str, String)>;
    let refusals: Vec<(&str, Headers, &str)> = vec![
        ("a replayed proof", dpop_auth(&token, good), "invalid_dpop_proof"),
        (
            "a proof by another key",
            dpop_auth(&token, proof(&stranger, &url, &token, None, "two")),
            "invalid_dpop_proof",
        ),
        (
            "a proof for another URL",
            dpop_auth(&token, proof(&holder, "http://elsewhere/", &token, None, "three")),
            "invalid_dpop_proof",
        ),
        (
            "no proof",
            vec![("authorization", format!("DPoP {token}"))],
            "invalid_dpop_proof",
        ),
        (
            "the bound token as a bearer token",
            vec![("authorization", format!("Bearer {token}"))],
            "invalid_token",
        ),
        (
            "an unbound token as DPoP",
            dpop_auth(&unbound, proof(&holder, &url, &unbound, None, "four")),
            "invalid_token",
        ),
        (
            "a bearer token where DPoP is required",
            vec![("authorization", format!("Bearer {unbound}"))],
            "invalid_token",
        ),
    ];
    let mut bodies = Vec::new();
    for (what, headers, error) in refusals {
        let (status, challenges, _, body) = post_headers(&url, &headers).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}");
        assert!(
            challenges
                .iter()
                .any(|c| c.starts_with("DPoP") && c.contains(&format!("error=\"{error}\""))),
            "{what}: {challenges:?}"
        );
        bodies.push(body);
    }
    assert!(
        bodies.windows(2).all(|w| w[0] == w[1]),
        "one body for every refusal: {bodies:?}"
    );

    // With nonces: asked for, then honoured.
    let (_with_nonces, url) = serve(Dpop::require().nonces([3; 32])).await;
    let mut bound = claims(&issuer.url, &url, "rpc");
    bound["cnf"] = json!({"jkt": jkt});
    let token = issuer_key.sign(json!({"alg": "ES256", "kid": "k"}), &bound);
    let (status, challenges, nonce, _) =
        post_headers(&url, &dpop_auth(&token, proof(&holder, &url, &token, None, "n1"))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        challenges.iter().any(|c| c.contains("use_dpop_nonce")),
        "{challenges:?}"
    );
    let nonce = nonce.expect("a DPoP-Nonce");
    let (status, _, _, body) = post_headers(
        &url,
        &dpop_auth(&token, proof(&holder, &url, &token, Some(&nonce), "n2")),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // A WebSocket's proof is on its upgrade request: `htm` GET.
    let upgrade = |proof: String| {
        let addr = url.trim_start_matches("http://").trim_end_matches('/').to_owned();
        let token = token.clone();
        async move {
            let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
            let request = format!(
                "GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                 Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
                 Authorization: DPoP {token}\r\nDPoP: {proof}\r\n\r\n"
            );
            tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes())
                .await
                .unwrap();
            let mut head = vec![0u8; 12];
            tokio::io::AsyncReadExt::read_exact(&mut stream, &mut head)
                .await
                .unwrap();
            String::from_utf8_lossy(&head).into_owned()
        }
    };
    let ws_proof = |htm: &str, jti: &str, nonce: &str| {
        let ath = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()));
        let claims = json!({"jti": jti, "htm": htm, "htu": url, "iat": now(), "ath": ath, "nonce": nonce});
        holder.sign(
            json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": holder.jwk("dpop")}),
            &claims,
        )
    };
    assert_eq!(upgrade(ws_proof("GET", "ws1", &nonce)).await, "HTTP/1.1 101");
    assert_eq!(upgrade(ws_proof("POST", "ws2", &nonce)).await, "HTTP/1.1 401");

    // Where DPoP is allowed, bearer tokens still pass, and a request
    // without a token is offered both schemes.
    let (_allowed, url) = serve(Dpop::allow()).await;
    let unbound = issuer_key.sign(
        json!({"alg": "ES256", "kid": "k"}),
        &claims(&issuer.url, &url, "rpc"),
    );
    let (status, _, _, _) = post_headers(&url, &[("authorization", format!("Bearer {unbound}"))]).await;
    assert_eq!(status, StatusCode::OK);
    let (status, challenges, _, _) = post_headers(&url, &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        challenges.iter().any(|c| c.starts_with("Bearer")),
        "{challenges:?}"
    );
    assert!(challenges.iter().any(|c| c.starts_with("DPoP")), "{challenges:?}");
}
