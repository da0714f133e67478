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
use common::{text, Served, JRPC};
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
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let header = URL_SAFE_NO_PAD.encode(json!({"alg": "EdDSA", "kid": "k1", "typ": "at+jwt"}).to_string());
    let claims = json!({"iss": issuer, "aud": audience, "sub": "alice", "scope": scope, "exp": now + 300});
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
