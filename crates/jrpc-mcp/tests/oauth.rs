//! The Streamable HTTP endpoint with OAuth: a tool sees who calls and what
//! the token grants, in both eras, and a token without a tool's scope is
//! refused before the tool runs.

use std::time::Duration;

use jrpc::auth::{AccessToken, BoxFuture, TokenError, TokenVerifier};
use jrpc_mcp::client::{McpClient, ProtocolChoice};
use jrpc_mcp::http::{HttpOptions, OAuth};
use jrpc_mcp::server::{McpContext, McpServer, NoArgs, ToolError};
use serde_json::json;

/// Tokens named after their holder: `token-NAME` grants `mcp`,
/// `writer-NAME` grants `mcp` and `mcp:write`.
struct Named;

impl TokenVerifier for Named {
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<AccessToken, TokenError>> {
        Box::pin(async move {
            if let Some(name) = token.strip_prefix("token-") {
                Ok(AccessToken::new(name, ["mcp"]))
            } else if let Some(name) = token.strip_prefix("writer-") {
                Ok(AccessToken::new(name, ["mcp", "mcp:write"]))
            } else {
                Err(TokenError::Invalid("unknown".into()))
            }
        })
    }
}

fn server() -> McpServer {
    McpServer::builder("oauth", "1")
        .tool(
            "whoami",
            "Who calls, with what",
            |_: NoArgs, cx: McpContext| async move {
                let scopes: Vec<&str> = cx.scopes().map(|s| s.iter().collect()).unwrap_or_default();
                Ok::<_, ToolError>(format!(
                    "{} {}",
                    cx.identity().map(|i| i.name()).unwrap_or("nobody"),
                    scopes.join(",")
                ))
            },
        )
        .tool("write", "Needs mcp:write", |_: NoArgs, _: McpContext| async {
            Ok::<_, ToolError>("written")
        })
        .build()
}

async fn client(url: &str, token: &str, protocol: ProtocolChoice) -> Result<McpClient, String> {
    McpClient::builder("test", "1")
        .protocol(protocol)
        .header("Authorization", format!("Bearer {token}"))
        .call_timeout(Duration::from_secs(20))
        .connect_http(url)
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn tools_see_the_caller_and_need_their_scopes_in_both_eras() {
    let oauth = OAuth::verifier(Named, "https://auth.example.com")
        .require_scopes(["mcp"])
        .tool_scope("write", "mcp:write");
    let serving = server()
        .serve_http("127.0.0.1:0", HttpOptions::default().oauth(oauth))
        .await
        .unwrap();
    let url = format!("{}/mcp", serving.local_addr());
    for protocol in [ProtocolChoice::Auto, ProtocolChoice::Legacy] {
        let alice = client(&url, "token-alice", protocol.clone()).await.unwrap();
        let who = alice.call_tool("whoami", json!({})).await.unwrap();
        assert_eq!(who.joined_text(), "alice mcp", "{protocol}");
        let refused = alice.call_tool("write", json!({})).await;
        assert!(
            refused.is_err(),
            "{protocol}: write without mcp:write: {refused:?}"
        );
        alice.close().await;
        let writer = client(&url, "writer-bob", protocol.clone()).await.unwrap();
        let written = writer.call_tool("write", json!({})).await.unwrap();
        assert_eq!(written.joined_text(), "written", "{protocol}");
        let who = writer.call_tool("whoami", json!({})).await.unwrap();
        assert_eq!(who.joined_text(), "bob mcp,mcp:write", "{protocol}");
        writer.close().await;
        assert!(
            client(&url, "forged", protocol.clone()).await.is_err(),
            "{protocol}"
        );
    }
    serving.shutdown().await;
}

/// An authorization server on a thread for the `Named` tokens: metadata,
/// registration, an authorization endpoint that consents at once (a 302 to
/// the redirect URI with the code, the state and `iss`) and a token
/// endpoint that gives `writer-alice` when `mcp:write` was asked, else
/// `token-alice` (and `token-robot` to a client with credentials). Its URL
/// and the paths it served.
fn authorization_server() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let metadata = json!({"issuer": url, "authorization_endpoint": format!("{url}/authorize"),
        "token_endpoint": format!("{url}/token"), "registration_endpoint": format!("{url}/register"),
        "code_challenge_methods_supported": ["S256"], "authorization_response_iss_parameter_supported": true,
        // It would bind tokens to a key; the MCP server does not take
        // bound tokens, so the client must not ask for one.
        "dpop_signing_alg_values_supported": ["ES256"]});
    let log = std::sync::Arc::<std::sync::Mutex<Vec<String>>>::default();
    let seen = std::sync::Arc::clone(&log);
    let issuer = url.clone();
    std::thread::spawn(move || {
        let mut scopes = std::collections::HashMap::new();
        // Each registered client's scopes: asking for more is refused, as
        // authorization servers do (`invalid_scope`).
        let mut registered = std::collections::HashMap::<String, String>::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let target = line.split_whitespace().nth(1).unwrap_or("").to_owned();
            let (mut length, mut basic) = (0, false);
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) <= 2 {
                    break;
                }
                let lower = header.to_ascii_lowercase();
                if let Some(value) = lower.strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap_or(0);
                }
                basic |= lower.starts_with("authorization: basic ");
                if lower.starts_with("dpop:") {
                    seen.lock().unwrap().push("a DPoP proof".to_owned());
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let (path, query) = target.split_once('?').unwrap_or((&target, ""));
            let form = if query.is_empty() {
                String::from_utf8_lossy(&body).into_owned()
            } else {
                query.to_owned()
            };
            let param = |name: &str| {
                url::form_urlencoded::parse(form.as_bytes())
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default()
            };
            seen.lock().unwrap().push(path.to_owned());
            let (status, location, reply) = match path {
                "/.well-known/oauth-authorization-server" => ("200 OK", String::new(), metadata.to_string()),
                "/register" => {
                    let document: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                    let scope = document["scope"].as_str().unwrap_or_default().to_owned();
                    let id = format!("dyn{}", registered.len() + 1);
                    seen.lock().unwrap().push(format!("registered {scope}"));
                    registered.insert(id.clone(), scope);
                    ("201 Created", String::new(), json!({"client_id": id}).to_string())
                }
                "/authorize"
                    if registered.get(&param("client_id")).is_some_and(|allowed| {
                        !param("scope")
                            .split(' ')
                            .filter(|s| !s.is_empty())
                            .all(|s| allowed.split(' ').any(|a| a == s))
                    }) =>
                {
                    let back = url::Url::parse_with_params(
                        &param("redirect_uri"),
                        &[
                            ("error", "invalid_scope"),
                            ("state", &param("state")),
                            ("iss", &issuer),
                        ],
                    )
                    .unwrap();
                    ("302 Found", format!("Location: {back}\r\n"), String::new())
                }
                "/authorize" => {
                    let code = format!("c{}", scopes.len());
                    scopes.insert(code.clone(), param("scope"));
                    let back = url::Url::parse_with_params(
                        &param("redirect_uri"),
                        &[
                            ("code", code.as_str()),
                            ("state", &param("state")),
                            ("iss", &issuer),
                        ],
                    )
                    .unwrap();
                    ("302 Found", format!("Location: {back}\r\n"), String::new())
                }
                "/token" => {
                    let token = match param("grant_type").as_str() {
                        "client_credentials" if basic => "token-robot".to_owned(),
                        "authorization_code" => match scopes.get(&param("code")) {
                            Some(scope) if scope.split(' ').any(|s| s == "mcp:write") => {
                                "writer-alice".to_owned()
                            }
                            Some(_) => "token-alice".to_owned(),
                            None => String::new(),
                        },
                        _ => String::new(),
                    };
                    if token.is_empty() {
                        (
                            "400 Bad Request",
                            String::new(),
                            json!({"error": "invalid_grant"}).to_string(),
                        )
                    } else {
                        (
                            "200 OK",
                            String::new(),
                            json!({"access_token": token, "token_type": "Bearer"}).to_string(),
                        )
                    }
                }
                _ => ("404 Not Found", String::new(), "{}".to_owned()),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\n{location}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    (url, log)
}

/// The browser step for a server that consents at once: the redirect it
/// answers with.
struct Redirected;

impl jrpc_mcp::client::oauth::Authorizer for Redirected {
    fn redirect_uri(
        &self,
    ) -> jrpc_mcp::client::oauth::BoxFuture<'_, Result<String, jrpc_mcp::client::oauth::OAuthError>> {
        Box::pin(async { Ok("http://127.0.0.1:9/callback".to_owned()) })
    }

    fn authorize(
        &self,
        url: String,
    ) -> jrpc_mcp::client::oauth::BoxFuture<'_, Result<String, jrpc_mcp::client::oauth::OAuthError>> {
        Box::pin(async move {
            let http = jrpc::client::Client::builder().http(&url).unwrap();
            let response = http
                .send_streaming(http::Method::GET, http::HeaderMap::new(), bytes::Bytes::new())
                .await
                .unwrap();
            Ok(response.headers()[http::header::LOCATION]
                .to_str()
                .unwrap()
                .to_owned())
        })
    }
}

#[tokio::test]
async fn the_client_logs_in_steps_up_for_a_tools_scope_and_renews_once_for_many() {
    use jrpc_mcp::client::oauth::OAuthClient;
    let (issuer, log) = authorization_server();
    let oauth = OAuth::verifier(Named, issuer.clone())
        .require_scopes(["mcp"])
        .tool_scope("write", "mcp:write");
    let serving = server()
        .serve_http("127.0.0.1:0", HttpOptions::default().oauth(oauth))
        .await
        .unwrap();
    let url = format!("{}/mcp", serving.local_addr());
    for protocol in [ProtocolChoice::Auto, ProtocolChoice::Legacy] {
        log.lock().unwrap().clear();
        let login = OAuthClient::builder().authorizer(Redirected).build();
        let client = McpClient::builder("test", "1")
            .protocol(protocol.clone())
            .oauth(login.clone())
            .call_timeout(Duration::from_secs(20))
            .connect_http(&url)
            .await
            .unwrap();
        // Several calls at once on a token that now must step up: one
        // authorization serves them all.
        let calls = (0..4).map(|_| client.call_tool("write", json!({})));
        for written in futures_util::future::join_all(calls).await {
            assert_eq!(written.unwrap().joined_text(), "written", "{protocol}");
        }
        let who = client.call_tool("whoami", json!({})).await.unwrap();
        // A legacy session's facts are its opener's token's (each
        // request's token is what the tool scopes are checked against).
        let expected = match protocol {
            ProtocolChoice::Legacy => "alice mcp",
            _ => "alice mcp,mcp:write",
        };
        assert_eq!(who.joined_text(), expected, "{protocol}");
        let seen = log.lock().unwrap().clone();
        let authorizations = seen.iter().filter(|p| *p == "/authorize").count();
        assert_eq!(
            authorizations, 2,
            "{protocol}: log in, then step up once: {seen:?}"
        );
        assert_eq!(
            seen.iter().filter(|p| *p == "/register").count(),
            1,
            "{protocol}: {seen:?}"
        );
        // Registered for every scope the resource advertises, so that the
        // step-up for the tool's needs no new registration.
        assert!(
            seen.iter().any(|p| p == "registered mcp mcp:write"),
            "{protocol}: {seen:?}"
        );
        assert!(
            !seen.iter().any(|p| p == "a DPoP proof"),
            "{protocol}: no bound token for a server that takes none: {seen:?}"
        );
        let held = login.credentials(&url).unwrap().unwrap();
        assert_eq!(held.issuer, issuer);
        assert_eq!(held.tokens.unwrap().scope.as_deref(), Some("mcp mcp:write"));
        client.close().await;
    }

    // A program acting for itself: the client credentials grant.
    let robot = OAuthClient::builder()
        .client_id("robot")
        .client_secret("s3cret")
        .client_credentials()
        .build();
    let client = McpClient::builder("test", "1")
        .oauth(robot)
        .connect_http(&url)
        .await
        .unwrap();
    let who = client.call_tool("whoami", json!({})).await.unwrap();
    assert_eq!(who.joined_text(), "robot mcp");
    client.close().await;

    // No one to log in: the connect fails saying so.
    let nobody = OAuthClient::builder().build();
    let refused = McpClient::builder("test", "1")
        .oauth(nobody)
        .connect_http(&url)
        .await;
    let Err(error) = refused else {
        panic!("no login, no session")
    };
    assert!(
        matches!(
            error.authorization(),
            Some(jrpc_mcp::client::oauth::OAuthError::LoginNeeded(_))
        ),
        "{error}"
    );
    serving.shutdown().await;
}
