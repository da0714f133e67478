//! `jrpc mcp login|logout` and the OAuth flow of the client commands,
//! against `jrpc mcp serve --oauth-issuer` and an authorization server of
//! the test's own (PKCE checked, codes bound to their redirect, an expired
//! first token so that a refresh must happen). The browser is curl,
//! following the redirects as a browser would (`$BROWSER`).

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use common::{mcp_serve, text, JRPC};
use ring::signature::{Ed25519KeyPair, KeyPair};
use serde_json::json;

/// What the authorization server saw: one line per request it served.
type Log = Arc<Mutex<Vec<String>>>;

/// A pending authorization: what its code stands for.
struct Grant {
    challenge: String,
    redirect_uri: String,
    resource: String,
    scope: String,
}

/// An authorization server on a thread: metadata, keys, dynamic
/// registration, the authorization endpoint (which redirects at once, as
/// a logged-in user's consent would) and the token endpoint. Its URL and
/// its log.
fn authorization_server() -> (String, Log) {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).unwrap();
    let key = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let metadata = json!({"issuer": url, "jwks_uri": format!("{url}/jwks"),
        "authorization_endpoint": format!("{url}/authorize"), "token_endpoint": format!("{url}/token"),
        "registration_endpoint": format!("{url}/register"), "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": true, "token_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": ["mcp", "offline_access"]});
    let jwks = json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k1",
        "x": URL_SAFE_NO_PAD.encode(key.public_key().as_ref())}]});
    let log: Log = Arc::default();
    let seen = Arc::clone(&log);
    let issuer = url.clone();
    std::thread::spawn(move || {
        let mut grants: HashMap<String, Grant> = HashMap::new();
        // Each registered client's scopes: asking for others is refused
        // (`invalid_scope`), as authorization servers do.
        let mut registered: HashMap<String, String> = HashMap::new();
        let mut refreshable: HashMap<String, (String, String)> = HashMap::new();
        let mut issued = 0;
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let Some((target, body)) = read_request(&mut stream) else {
                continue;
            };
            let (path, query) = target.split_once('?').unwrap_or((&target, ""));
            let params: HashMap<String, String> = form(if query.is_empty() { &body } else { query });
            seen.lock().unwrap().push(match params.get("grant_type") {
                Some(grant) => format!("{path} {grant}"),
                None => path.to_owned(),
            });
            let json_reply =
                |status: &str, body: serde_json::Value| (status.to_owned(), None, body.to_string());
            let (status, location, body) = match path {
                "/.well-known/oauth-authorization-server" => json_reply("200 OK", metadata.clone()),
                "/jwks" => json_reply("200 OK", jwks.clone()),
                "/register" => {
                    let document: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                    let scope = document["scope"].as_str().unwrap_or_default().to_owned();
                    let id = format!("jrpc-dyn-{}", registered.len() + 1);
                    seen.lock().unwrap().push(format!("registered {scope}"));
                    registered.insert(id.clone(), scope);
                    json_reply(
                        "201 Created",
                        json!({"client_id": id, "token_endpoint_auth_method": "none"}),
                    )
                }
                "/authorize"
                    if registered.get(&params["client_id"]).is_some_and(|allowed| {
                        !params
                            .get("scope")
                            .map(String::as_str)
                            .unwrap_or_default()
                            .split(' ')
                            .all(|s| {
                                s.is_empty() || s == "offline_access" || allowed.split(' ').any(|a| a == s)
                            })
                    }) =>
                {
                    let back = format!(
                        "{}?error=invalid_scope&state={}&iss={}",
                        params["redirect_uri"],
                        encode(&params["state"]),
                        encode(&issuer)
                    );
                    ("302 Found".to_owned(), Some(back), String::new())
                }
                "/authorize" => {
                    let code = format!("code-{}", grants.len());
                    grants.insert(
                        code.clone(),
                        Grant {
                            challenge: params["code_challenge"].clone(),
                            redirect_uri: params["redirect_uri"].clone(),
                            resource: params["resource"].clone(),
                            scope: params.get("scope").cloned().unwrap_or_default(),
                        },
                    );
                    let back = format!(
                        "{}?code={code}&state={}&iss={}",
                        params["redirect_uri"],
                        encode(&params["state"]),
                        encode(&issuer)
                    );
                    ("302 Found".to_owned(), Some(back), String::new())
                }
                "/token" => {
                    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
                    let tokens = match params.get("grant_type").map(String::as_str) {
                        Some("authorization_code") => grants
                            .remove(&params["code"])
                            .filter(|g| {
                                let digest = ring::digest::digest(
                                    &ring::digest::SHA256,
                                    params["code_verifier"].as_bytes(),
                                );
                                URL_SAFE_NO_PAD.encode(digest) == g.challenge
                                    && params["redirect_uri"] == g.redirect_uri
                                    && params["resource"] == g.resource
                            })
                            .map(|g| (g.resource, g.scope)),
                        Some("refresh_token") => refreshable.remove(&params["refresh_token"]),
                        _ => None,
                    };
                    match tokens {
                        Some((resource, scope)) => {
                            issued += 1;
                            // The first token is born expired: the client
                            // must refresh it when the server refuses it.
                            let exp = if issued == 1 { now - 120 } else { now + 300 };
                            let refresh = format!("refresh-{issued}");
                            refreshable.insert(refresh.clone(), (resource.clone(), scope.clone()));
                            let access = jwt(&key, &issuer, &resource, &scope, exp);
                            json_reply(
                                "200 OK",
                                json!({"access_token": access, "token_type": "Bearer",
                                "expires_in": 300, "refresh_token": refresh, "scope": scope}),
                            )
                        }
                        None => json_reply("400 Bad Request", json!({"error": "invalid_grant"})),
                    }
                }
                _ => json_reply("404 Not Found", json!({})),
            };
            let location = location.map(|l| format!("Location: {l}\r\n")).unwrap_or_default();
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\n{location}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, log)
}

fn jwt(key: &Ed25519KeyPair, issuer: &str, audience: &str, scope: &str, exp: u64) -> String {
    let header = URL_SAFE_NO_PAD.encode(json!({"alg": "EdDSA", "kid": "k1", "typ": "at+jwt"}).to_string());
    let claims = json!({"iss": issuer, "aud": audience, "sub": "alice", "scope": scope, "exp": exp});
    let signed = format!("{header}.{}", URL_SAFE_NO_PAD.encode(claims.to_string()));
    format!(
        "{signed}.{}",
        URL_SAFE_NO_PAD.encode(key.sign(signed.as_bytes()).as_ref())
    )
}

/// The request-target and body of one HTTP/1.1 request.
fn read_request(stream: &mut std::net::TcpStream) -> Option<(String, String)> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let target = line.split_whitespace().nth(1)?.to_owned();
    let mut length = 0;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? <= 2 {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((target, String::from_utf8(body).ok()?))
}

fn form(text: &str) -> HashMap<String, String> {
    text.split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                out.push(u8::from_str_radix(&text[i + 1..i + 3], 16).unwrap_or(b'?'));
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            b => format!("%{b:02X}"),
        })
        .collect()
}

/// `jrpc mcp ARGS` with its state in `state` and curl as the browser.
fn jrpc_mcp(state: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(JRPC)
        .arg("mcp")
        .args(args)
        .env("XDG_STATE_HOME", state)
        .env("BROWSER", "curl -sS -L -o /dev/null")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn login_keeps_tokens_that_later_commands_use_and_refresh() {
    let (issuer, log) = authorization_server();
    let (_server, url) = mcp_serve(&["--oauth-issuer", &issuer, "--oauth-scope", "mcp"]);
    let state = std::env::temp_dir().join(format!("jrpc-mcp-login-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);

    // Not logged in, no one at the terminal: exit 3, saying what to do.
    let out = jrpc_mcp(&state, &["call", &url, "add", "a=2", "b=3", "--no-input"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!("jrpc mcp login {url}")),
        "{}",
        text(&out)
    );

    let out = jrpc_mcp(&state, &["login", &url]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/authorize?"),
        "{}",
        text(&out)
    );
    let files: Vec<_> = std::fs::read_dir(state.join("jrpc/oauth"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let kept = std::fs::read_to_string(&files[0]).unwrap();
    assert!(kept.contains("refresh-1") && kept.contains(&issuer), "{kept}");

    // The token kept is expired: the server refuses it, the client
    // refreshes it, the call goes through (with no one to ask).
    for era in [&[][..], &["--protocol-version", "legacy"][..]] {
        let out = jrpc_mcp(
            &state,
            &[&["call", &url, "add", "a=2", "b=3", "--no-input"][..], era].concat(),
        );
        assert!(out.status.success(), "{era:?}: {}", text(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "5");
    }
    let seen = log.lock().unwrap().clone();
    let count = |what: &str| seen.iter().filter(|l| *l == what).count();
    assert_eq!(count("/register"), 1, "{seen:?}");
    assert_eq!(count("/authorize"), 1, "{seen:?}");
    assert_eq!(count("/token authorization_code"), 1, "{seen:?}");
    assert_eq!(count("/token refresh_token"), 1, "{seen:?}");
    let kept = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        kept.contains("refresh-2"),
        "the refreshed tokens are kept: {kept}"
    );

    let out = jrpc_mcp(&state, &["logout", &url]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!files[0].exists());
    let out = jrpc_mcp(&state, &["list", &url, "--no-input"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let out = jrpc_mcp(&state, &["logout", &url]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not logged in"),
        "{}",
        text(&out)
    );
    let _ = std::fs::remove_dir_all(&state);
}

/// Issue 44: a tool needing a scope the first login did not ask for. The
/// client registered for every scope the server advertises, so the step-up
/// needs no new registration; with no one to ask it names the scope and
/// the command that logs in for it, and `jrpc mcp login --scope` does.
#[test]
fn a_tool_scope_beyond_the_first_login_is_named_and_logged_in_for() {
    let (issuer, log) = authorization_server();
    let (_server, url) = mcp_serve(&[
        "--oauth-issuer",
        &issuer,
        "--oauth-scope",
        "mcp",
        "--oauth-tool-scope",
        "bump=mcp:admin",
    ]);
    let state = std::env::temp_dir().join(format!("jrpc-mcp-step-up-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let out = jrpc_mcp(&state, &["login", &url]);
    assert!(out.status.success(), "{}", text(&out));
    let out = jrpc_mcp(&state, &["call", &url, "add", "a=2", "b=3", "--no-input"]);
    assert!(out.status.success(), "{}", text(&out));

    let out = jrpc_mcp(&state, &["call", &url, "bump", "--no-input"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs scope") && err.contains("mcp:admin"), "{err}");
    assert!(err.contains(&format!("jrpc mcp login {url} --scope")), "{err}");

    let out = jrpc_mcp(&state, &["login", &url, "--scope", "mcp:admin"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = jrpc_mcp(&state, &["call", &url, "bump", "--no-input"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");

    let seen = log.lock().unwrap().clone();
    let registrations: Vec<&String> = seen.iter().filter(|l| l.starts_with("registered")).collect();
    assert_eq!(registrations.len(), 1, "{seen:?}");
    assert!(
        registrations[0].contains("mcp:admin"),
        "registered for what the server advertises: {seen:?}"
    );
    let _ = std::fs::remove_dir_all(&state);
}
