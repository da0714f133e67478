"""DPoP (RFC 9449) proofs made with PyJWT, a maintained JOSE library, against
`jrpc mcp serve --oauth-dpop require --oauth-dpop-nonce`: an authorization
server of this script's own (its metadata and keys on 127.0.0.1) issues a
token bound to a key (cnf.jkt); a proof without the server's nonce is asked
for one; one with it is let through; hostile proofs (another method,
another URL, a stale iat, a replayed jti, a wrong ath, another key, alg
none, an HMAC proof) are each refused with 401 and one same body.

    python dpop_interop.py PATH/TO/jrpc
"""

import base64
import hashlib
import http.server
import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

import jwt
from cryptography.hazmat.primitives.asymmetric import ec


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def public_jwk(key) -> dict:
    numbers = key.public_key().public_numbers()
    return {
        "kty": "EC",
        "crv": "P-256",
        "x": b64(numbers.x.to_bytes(32, "big")),
        "y": b64(numbers.y.to_bytes(32, "big")),
    }


def thumbprint(jwk: dict) -> str:
    canonical = json.dumps(
        {k: jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"), sort_keys=True
    )
    return b64(hashlib.sha256(canonical.encode()).digest())


def serve_issuer(issuer_key):
    """The authorization server's metadata and keys, from a thread."""
    jwk = dict(public_jwk(issuer_key), kid="k1", alg="ES256", use="sig")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/.well-known/oauth-authorization-server":
                body = {"issuer": url, "jwks_uri": f"{url}/jwks",
                        "authorization_endpoint": f"{url}/authorize", "token_endpoint": f"{url}/token"}
            elif self.path == "/jwks":
                body = {"keys": [jwk]}
            else:
                self.send_response(404)
                self.end_headers()
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return url


def post(url: str, headers: dict):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "dpop-interop", "version": "1"}}}).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def main() -> int:
    jrpc = sys.argv[1]
    issuer_key = ec.generate_private_key(ec.SECP256R1())
    issuer = serve_issuer(issuer_key)
    server = subprocess.Popen(
        [jrpc, "mcp", "serve", "--http", "127.0.0.1:0", "--oauth-issuer", issuer,
         "--oauth-dpop", "require", "--oauth-dpop-nonce"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        deadline = time.time() + 20
        while url is None and time.time() < deadline:
            line = server.stderr.readline()
            match = re.search(r"MCP \(Streamable HTTP\) at (\S+)", line)
            if match:
                url = match.group(1)
        assert url, "jrpc mcp serve did not start"

        holder = ec.generate_private_key(ec.SECP256R1())
        holder_jwk = public_jwk(holder)
        now = int(time.time())
        token = jwt.encode(
            {"iss": issuer, "aud": url, "sub": "alice", "iat": now, "exp": now + 300,
             "cnf": {"jkt": thumbprint(holder_jwk)}},
            issuer_key, algorithm="ES256", headers={"kid": "k1", "typ": "at+jwt"})
        ath = b64(hashlib.sha256(token.encode()).digest())

        def proof(key=holder, jwk=None, algorithm="ES256", **claims):
            payload = {"jti": str(uuid.uuid4()), "htm": "POST", "htu": url, "iat": int(time.time()),
                       "ath": ath}
            payload.update(claims)
            headers = {"typ": "dpop+jwt", "jwk": jwk or holder_jwk}
            return jwt.encode(payload, key, algorithm=algorithm, headers=headers)

        def dpop(p):
            return {"Authorization": f"DPoP {token}", "DPoP": p}

        status, headers, _ = post(url, dpop(proof()))
        lower = {k.lower(): v for k, v in headers.items()}
        assert status == 401 and "use_dpop_nonce" in lower.get("www-authenticate", ""), (status, headers)
        nonce = lower["dpop-nonce"]
        good = proof(nonce=nonce)
        status, _, body = post(url, dpop(good))
        assert status == 200, (status, body)
        print("a PyJWT proof with the server's nonce: 200")

        other = ec.generate_private_key(ec.SECP256R1())
        hostile = {
            "another method": proof(nonce=nonce, htm="GET"),
            "another URL": proof(nonce=nonce, htu=url.replace("/mcp", "/other")),
            "a stale iat": proof(nonce=nonce, iat=int(time.time()) - 3600),
            "a replayed jti": good,
            "a wrong ath": proof(nonce=nonce, ath=b64(b"not the token hash")),
            "another key": proof(key=other, jwk=public_jwk(other), nonce=nonce),
            "alg none": proof(key=None, algorithm="none", nonce=nonce),
            "an HMAC proof": proof(key=b"a shared secret of 32 bytes long!", algorithm="HS256", nonce=nonce),
        }
        bodies = set()
        for what, p in hostile.items():
            status, headers, body = post(url, dpop(p))
            challenge = {k.lower(): v for k, v in headers.items()}.get("www-authenticate", "")
            assert status == 401 and challenge.startswith("DPoP"), (what, status, challenge, body)
            bodies.add(body)
            print(f"{what}: 401 {challenge}")
        assert len(bodies) == 1, f"one body for every refusal, got {bodies}"
        status, _, _ = post(url, {"Authorization": f"Bearer {token}"})
        assert status == 401, "a bound token as a bearer token"
        print("dpop interop: ok")
        return 0
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
