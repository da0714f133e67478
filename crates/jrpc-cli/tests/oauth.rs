//! `jrpc serve --http ADDR --oauth-issuer URL`: calls need a JWT from that
//! issuer naming the listener's URL as its audience (or `--oauth-audience`)
//! and granting every `--oauth-scope`.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use common::{mcp_serve, text, Served, JRPC};
use ring::signature::{Ed25519KeyPair, KeyPair};
use serde_json::json;

/// An authorization server's metadata and keys, served from a thread
/// until the test ends; its URL.
fn issuer(key: &Ed25519KeyPair) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let metadata = json!({"issuer": url, "jwks_uri": format!("{url}/jwks"),
        "authorization_endpoint": format!("{url}/authorize"), "token_endpoint": format!("{url}/token")});
    let jwks = json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k1",
        "x": URL_SAFE_NO_PAD.encode(key.public_key().as_ref())}]});
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request_line = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            // The rest of the head.
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let path = request_line.split_whitespace().nth(1).unwrap_or("");
            let (status, body) = match path {
                "/.well-known/oauth-authorization-server" => ("200 OK", metadata.to_string()),
                "/jwks" => ("200 OK", jwks.to_string()),
                _ => ("404 Not Found", "{}".to_owned()),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

fn token(key: &Ed25519KeyPair, issuer: &str, audience: &str, scope: &str) -> String {
    token_of("alice", key, issuer, audience, scope)
}

fn token_of(subject: &str, key: &Ed25519KeyPair, issuer: &str, audience: &str, scope: &str) -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let header = URL_SAFE_NO_PAD.encode(json!({"alg": "EdDSA", "kid": "k1", "typ": "at+jwt"}).to_string());
    let claims = json!({"iss": issuer, "aud": audience, "sub": subject, "scope": scope, "exp": now + 300});
    let signed = format!("{header}.{}", URL_SAFE_NO_PAD.encode(claims.to_string()));
    let signature = URL_SAFE_NO_PAD.encode(key.sign(signed.as_bytes()).as_ref());
    format!("{signed}.{signature}")
}

fn call(target: &str, bearer: Option<&str>) -> std::process::Output {
    let mut command = Command::new(JRPC);
    command.args(["call", target, "subtract", "42", "23"]);
    if let Some(token) = bearer {
        command.args(["--bearer", token]);
    }
    command.output().unwrap()
}

#[test]
fn an_oauth_protected_server_takes_tokens_for_its_own_url() {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).unwrap();
    let key = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let issuer = issuer(&key);
    let served = Served::start(&[
        "--http",
        "127.0.0.1:0",
        "--oauth-issuer",
        &issuer,
        "--oauth-scope",
        "rpc",
    ]);
    let (http, ws) = (&served.targets[0], &served.targets[1]);
    let audience = format!("{http}/");
    let good = token(&key, &issuer, &audience, "rpc");
    for target in [http, ws] {
        let out = call(target, Some(&good));
        assert!(out.status.success(), "{target}: {}", text(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "19");
    }
    let refused = [
        ("no token", None),
        (
            "another audience",
            Some(token(&key, &issuer, "http://elsewhere.example/", "rpc")),
        ),
        ("without the scope", Some(token(&key, &issuer, &audience, "read"))),
        (
            "another issuer",
            Some(token(&key, "http://evil.example", &audience, "rpc")),
        ),
    ];
    for (what, bearer) in &refused {
        let out = call(http, bearer.as_deref());
        assert!(!out.status.success(), "{what}: accepted: {}", text(&out));
        let said = String::from_utf8_lossy(&out.stderr).to_string();
        let status = if *what == "without the scope" {
            "403"
        } else {
            "401"
        };
        assert!(said.contains(status), "{what}: {said}");
    }

    // Behind a proxy, the audience is the public URL.
    let public = "https://api.example.com/rpc";
    let proxied = Served::start(&[
        "--http",
        "127.0.0.1:0",
        "--oauth-issuer",
        &issuer,
        "--oauth-audience",
        public,
    ]);
    let out = call(&proxied.targets[0], Some(&token(&key, &issuer, public, "")));
    assert!(out.status.success(), "{}", text(&out));
    let out = call(&proxied.targets[0], Some(&good));
    assert!(
        !out.status.success(),
        "a token for the listener's URL: {}",
        text(&out)
    );
}

#[test]
fn oauth_flags_need_an_http_listener_and_a_url() {
    for (args, named) in [
        (
            &["--tcp", "127.0.0.1:0", "--oauth-issuer", "http://127.0.0.1:1"][..],
            "--oauth-issuer",
        ),
        (
            &["--http", "127.0.0.1:0", "--oauth-issuer", "not a url"][..],
            "--oauth-issuer",
        ),
        (
            &["--http", "127.0.0.1:0", "--oauth-scope", "rpc"][..],
            "--oauth-issuer",
        ),
    ] {
        let out = Command::new(JRPC).arg("serve").args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(named),
            "{args:?}: {}",
            text(&out)
        );
    }
}

/// A raw HTTP/1.1 exchange with `addr`: the whole reply.
fn raw(addr: &str, method: &str, path: &str, headers: &[&str], body: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for header in headers {
        head += &format!("{header}\r\n");
    }
    write!(stream, "{head}Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    let mut reply = String::new();
    std::io::Read::read_to_string(&mut stream, &mut reply).unwrap();
    reply
}

#[test]
fn an_mcp_endpoint_is_an_oauth_resource_server() {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).unwrap();
    let key = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let issuer = issuer(&key);
    let (_server, url) = mcp_serve(&[
        "--oauth-issuer",
        &issuer,
        "--oauth-scope",
        "mcp",
        "--oauth-tool-scope",
        "bump=mcp:write",
    ]);
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let metadata_url = format!("http://{addr}/.well-known/oauth-protected-resource/mcp");
    // The metadata, at the path RFC 9728 gives and at the root form.
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let reply = raw(&addr, "GET", path, &[], "");
        assert!(reply.starts_with("HTTP/1.1 200"), "{path}: {reply}");
        let body: serde_json::Value = serde_json::from_str(reply.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(
            body,
            json!({"resource": url, "authorization_servers": [issuer], "scopes_supported": ["mcp", "mcp:write"],
                   "bearer_methods_supported": ["header"]}),
            "{path}"
        );
    }
    // No token: 401 saying where the metadata is and what scope to ask.
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let post = [
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
    ];
    let reply = raw(&addr, "POST", "/mcp", &post, initialize);
    assert!(reply.starts_with("HTTP/1.1 401"), "{reply}");
    let lower = reply.to_ascii_lowercase();
    let challenge = lower
        .lines()
        .find(|l| l.starts_with("www-authenticate:"))
        .unwrap_or_default();
    assert!(
        challenge.contains(&format!(r#"resource_metadata="{metadata_url}""#)),
        "{challenge}"
    );
    assert!(challenge.contains(r#"scope="mcp""#), "{challenge}");
    // GET and DELETE need one too.
    assert!(raw(&addr, "GET", "/mcp", &["Mcp-Session-Id: x"], "").starts_with("HTTP/1.1 401"));

    let mcp = |token: &str, args: &[&str]| {
        Command::new(JRPC)
            .args(["mcp", "call", &url])
            .args(args)
            .args(["--bearer", token])
            .output()
            .unwrap()
    };
    let good = token(&key, &issuer, &url, "mcp");
    for era in [&[][..], &["--protocol-version", "legacy"][..]] {
        let out = mcp(&good, &[&["add", "a=2", "b=40"][..], era].concat());
        assert!(out.status.success(), "{era:?}: {}", text(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42");
        // A tool with a scope of its own: 403 insufficient_scope.
        let out = mcp(&good, &[&["bump"][..], era].concat());
        assert!(
            !out.status.success(),
            "{era:?}: bump without mcp:write: {}",
            text(&out)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("mcp:write"),
            "{era:?}: {}",
            text(&out)
        );
    }
    let writer = token(&key, &issuer, &url, "mcp mcp:write");
    let out = mcp(&writer, &["bump"]);
    assert!(out.status.success(), "bump with mcp:write: {}", text(&out));
    // The step-up answer names the scopes to ask for.
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bump","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let auth = format!("Authorization: Bearer {good}");
    let headers = [
        &post[..],
        &[
            auth.as_str(),
            "MCP-Protocol-Version: 2026-07-28",
            "Mcp-Method: tools/call",
            "Mcp-Name: bump",
        ],
    ]
    .concat();
    let reply = raw(&addr, "POST", "/mcp", &headers, call);
    assert!(reply.starts_with("HTTP/1.1 403"), "{reply}");
    assert!(
        reply.contains(r#"error="insufficient_scope", scope="mcp mcp:write""#),
        "{reply}"
    );
    // A legacy session is its opener's: another caller's good token does
    // not make its id usable.
    let alice = format!("Authorization: Bearer {good}");
    let bob = format!(
        "Authorization: Bearer {}",
        token_of("bob", &key, &issuer, &url, "mcp")
    );
    let reply = raw(
        &addr,
        "POST",
        "/mcp",
        &[&post[..], &[alice.as_str()]].concat(),
        initialize,
    );
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let session = reply
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("mcp-session-id:")
                .map(|v| v.trim().to_owned())
        })
        .expect("a session id");
    let session = format!("Mcp-Session-Id: {session}");
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let as_bob = [
        &post[..],
        &[bob.as_str(), session.as_str(), "MCP-Protocol-Version: 2025-11-25"],
    ]
    .concat();
    assert!(raw(&addr, "POST", "/mcp", &as_bob, list).starts_with("HTTP/1.1 404"));
    let as_alice = [
        &post[..],
        &[
            alice.as_str(),
            session.as_str(),
            "MCP-Protocol-Version: 2025-11-25",
        ],
    ]
    .concat();
    let reply = raw(&addr, "POST", "/mcp", &as_alice, list);
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    // A token for another resource is refused: no passthrough.
    // It is a transport failure (exit 3) in both eras, as for `jrpc call`.
    let other = token(&key, &issuer, "http://other.example/mcp", "mcp mcp:write");
    for era in [&[][..], &["--protocol-version", "legacy"][..]] {
        let out = mcp(&other, &[&["add", "a=1", "b=1", "--no-input"][..], era].concat());
        assert_eq!(out.status.code(), Some(3), "{era:?}: {}", text(&out));
    }
}

#[test]
fn refused_tokens_spend_the_rate_limit_budget() {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).unwrap();
    let key = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let issuer = issuer(&key);
    let served = Served::start(&[
        "--http",
        "127.0.0.1:0",
        "--oauth-issuer",
        &issuer,
        "--rate-limit",
        "1",
    ]);
    let addr = served.targets[0].trim_start_matches("http://").to_owned();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"subtract","params":[42,23]}"#;
    let guess = |token: &str| {
        let auth = format!("Authorization: Bearer {token}");
        raw(
            &addr,
            "POST",
            "/",
            &["Content-Type: application/json", &auth],
            body,
        )
    };
    // Guessing tokens quickly: refused with 401, then slowed down (429).
    let statuses: Vec<String> = (0..20)
        .map(|i| {
            guess(&format!("guess-{i}"))
                .lines()
                .next()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert!(statuses[0].starts_with("HTTP/1.1 401"), "{statuses:?}");
    assert!(
        statuses.iter().any(|s| s.starts_with("HTTP/1.1 429")),
        "{statuses:?}"
    );
}

/// An authorization server that cannot be reached is said at start (its
/// URL and why), before any token comes, and tried again (issue 44).
#[test]
fn an_unreachable_issuer_is_said_at_start() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let issuer = format!("http://127.0.0.1:{port}");
    let served = Served::start(&["--http", "127.0.0.1:0", "--oauth-issuer", &issuer]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut said = 0;
    while said < 2 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = served
            .log
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no warning about {issuer} within 30 s"));
        if line.contains("cannot be fetched") && line.contains(&issuer) {
            said += 1;
        }
    }
}

/// While tokens cannot be checked the MCP endpoint answers 503, and
/// `jrpc mcp call` exits 3 (a transport failure) in both eras, as
/// `jrpc call` does for an HTTP refusal.
#[test]
fn a_server_that_cannot_check_tokens_is_a_transport_failure() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (_server, url) = mcp_serve(&["--oauth-issuer", &format!("http://127.0.0.1:{port}")]);
    // A well-formed JWT (its keys are what cannot be fetched).
    let part = |json: &str| URL_SAFE_NO_PAD.encode(json);
    let jwt = format!(
        "{}.{}.{}",
        part(r#"{"alg":"EdDSA","kid":"k"}"#),
        part(r#"{"sub":"a"}"#),
        part("sig")
    );
    for era in [&[][..], &["--protocol-version", "legacy"][..]] {
        let out = Command::new(JRPC)
            .args([
                "mcp",
                "call",
                &url,
                "add",
                "a=1",
                "b=2",
                "--no-input",
                "--bearer",
                &jwt,
            ])
            .args(era)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{era:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("503"),
            "{era:?}: {}",
            text(&out)
        );
    }
}

/// `jrpc mcp serve --oauth-issuer … --oauth-dpop require --oauth-dpop-nonce`:
/// the metadata says tokens must be DPoP-bound; a request without one is
/// challenged `DPoP`; a bound token with its proof is asked for a nonce,
/// then let through; the same token as a bearer token is refused.
#[test]
fn an_mcp_endpoint_takes_dpop_bound_tokens_with_their_proofs() {
    use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
    let key = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let issuer = issuer(&key);
    let (_server, url) = mcp_serve(&[
        "--oauth-issuer",
        &issuer,
        "--oauth-dpop",
        "require",
        "--oauth-dpop-nonce",
    ]);
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let reply = raw(&addr, "GET", "/.well-known/oauth-protected-resource/mcp", &[], "");
    let body: serde_json::Value = serde_json::from_str(reply.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["dpop_bound_access_tokens_required"], true, "{body}");

    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let base = [
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
    ];
    let post = |extra: &[String]| {
        let mut headers: Vec<&str> = base.to_vec();
        headers.extend(extra.iter().map(String::as_str));
        raw(&addr, "POST", "/mcp", &headers, initialize)
    };
    let challenge_of = |reply: &str| {
        reply
            .lines()
            .filter(|l| l.to_ascii_lowercase().starts_with("www-authenticate:"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let reply = post(&[]);
    assert!(reply.starts_with("HTTP/1.1 401"), "{reply}");
    let challenges = challenge_of(&reply);
    assert!(
        challenges.iter().all(|c| c.contains("DPoP")),
        "DPoP only: {challenges:?}"
    );

    // The holder's key, the token bound to it.
    let ec = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let ec = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, ec.as_ref(), &rng).unwrap();
    let point = ec.public_key().as_ref().to_vec();
    let jwk = json!({"kty": "EC", "crv": "P-256", "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..])});
    let jkt = jrpc::auth::thumbprint(&jwk).unwrap();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let sign = |header: serde_json::Value, claims: serde_json::Value, signer: &dyn Fn(&[u8]) -> Vec<u8>| {
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signer(signed.as_bytes())))
    };
    let token = sign(
        json!({"alg": "EdDSA", "kid": "k1", "typ": "at+jwt"}),
        json!({"iss": issuer, "aud": url, "sub": "alice", "exp": now + 300, "cnf": {"jkt": jkt}}),
        &|m| key.sign(m).as_ref().to_vec(),
    );
    let proof = |jti: &str, nonce: Option<&str>| {
        let ath = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()));
        let mut claims = json!({"jti": jti, "htm": "POST", "htu": url, "iat": now, "ath": ath});
        if let Some(nonce) = nonce {
            claims["nonce"] = json!(nonce);
        }
        sign(
            json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": jwk}),
            claims,
            &|m| {
                ec.sign(&ring::rand::SystemRandom::new(), m)
                    .unwrap()
                    .as_ref()
                    .to_vec()
            },
        )
    };
    let reply = post(&[
        format!("Authorization: DPoP {token}"),
        format!("DPoP: {}", proof("a", None)),
    ]);
    assert!(reply.starts_with("HTTP/1.1 401"), "{reply}");
    assert!(
        challenge_of(&reply).iter().any(|c| c.contains("use_dpop_nonce")),
        "{reply}"
    );
    let nonce = reply
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .starts_with("dpop-nonce:")
                .then(|| l[11..].trim().to_owned())
        })
        .expect("a DPoP-Nonce");
    let reply = post(&[
        format!("Authorization: DPoP {token}"),
        format!("DPoP: {}", proof("b", Some(&nonce))),
    ]);
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    // The same proof again, and the token as a bearer token: refused.
    let reply = post(&[
        format!("Authorization: DPoP {token}"),
        format!("DPoP: {}", proof("b", Some(&nonce))),
    ]);
    assert!(reply.starts_with("HTTP/1.1 401"), "{reply}");
    let reply = post(&[format!("Authorization: Bearer {token}")]);
    assert!(reply.starts_with("HTTP/1.1 401"), "{reply}");
}
