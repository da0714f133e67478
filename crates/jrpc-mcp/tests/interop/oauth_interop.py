"""OAuth 2.1 with real parts: a real authorization server (oidc-provider,
authorization_server.sh), `jrpc mcp serve --http --oauth-issuer` as the
resource server, and two clients that log in through it:

- the official Python SDK's OAuth client (dynamic registration, PKCE,
  the resource parameter, RFC 9207 iss) calls a tool;
- `jrpc mcp login`, its browser curl (following the redirects, with its
  cookies), then `jrpc mcp call --no-input` with the tokens it kept.

And the resource server's refusals: no token (401 with the metadata URL),
a token for another resource, a tampered token, the client credentials
grant of a pre-registered client (accepted).

    python oauth_interop.py [PATH/TO/jrpc]

Prints `ok NAME` or `FAIL NAME: why` per check; exits 0 only when all pass.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.parse
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

ROOT = Path(__file__).resolve().parents[4]
JRPC = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target/debug/jrpc")
failures: list[str] = []
passed = 0


def check(name: str, ok: bool, why: str = "") -> None:
    global passed
    if ok:
        passed += 1
        print(f"ok {name}")
    else:
        failures.append(name)
        print(f"FAIL {name}: {why}")


def start(command: list[str], pattern: str, stream: str) -> tuple[subprocess.Popen, str]:
    """Starts a process; the first match of `pattern` in its stdout or stderr."""
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE if stream == "stdout" else subprocess.DEVNULL,
        stderr=subprocess.PIPE if stream == "stderr" else subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    pipe = process.stdout if stream == "stdout" else process.stderr
    for line in pipe:
        found = re.search(pattern, line)
        if found:
            return process, found.group(1)
    raise AssertionError(f"{command[0]} did not print {pattern!r}")


class Memory:
    """The SDK's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class HeadlessBrowser:
    """Follows the authorization URL's redirects (keeping cookies) until
    one points at the redirect URI: what a browser would have opened."""

    def __init__(self, redirect_uri: str) -> None:
        self.redirect_uri = redirect_uri
        self.landed: str | None = None

    async def open(self, url: str) -> None:
        async with httpx2.AsyncClient(follow_redirects=False, timeout=10) as http:
            for _ in range(10):
                response = await http.get(url)
                location = response.headers.get("location")
                if location is None:
                    raise AssertionError(f"{url}: HTTP {response.status_code} without a redirect")
                url = urllib.parse.urljoin(str(response.url), location)
                if url.startswith(self.redirect_uri):
                    self.landed = url
                    return
        raise AssertionError("too many redirects")

    async def callback(self) -> AuthorizationCodeResult:
        assert self.landed, "the browser did not land on the redirect URI"
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.landed).query))
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))


async def python_sdk_logs_in(url: str) -> None:
    redirect_uri = "http://127.0.0.1:8765/callback"
    browser = HeadlessBrowser(redirect_uri)
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="python-sdk-interop",
            redirect_uris=[redirect_uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            application_type="native",
        ),
        storage=Memory(),
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            tools = await client.list_tools()
            check("python sdk: tools listed after logging in", any(t.name == "add" for t in tools.tools), str(tools))
            result = await client.call_tool("add", {"a": 2, "b": 3})
            text = "".join(getattr(c, "text", "") for c in result.content)
            check("python sdk: add 2 3 through the token", text == "5", text)


def post(url: str, token: str | None) -> httpx2.Response:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    return httpx2.post(url, headers=headers, json=body, timeout=10)


def client_credentials(issuer: str, resource: str) -> str:
    metadata = httpx2.get(f"{issuer}/.well-known/openid-configuration", timeout=10).json()
    response = httpx2.post(
        metadata["token_endpoint"],
        data={"grant_type": "client_credentials", "resource": resource, "scope": "mcp:tools"},
        auth=("jrpc-test-client", "jrpc-test-secret"),
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return response.json()["access_token"]


def refusals(issuer: str, url: str) -> None:
    response = post(url, None)
    challenge = response.headers.get("www-authenticate", "")
    check("no token: 401 naming the metadata", response.status_code == 401 and "resource_metadata=" in challenge,
          f"{response.status_code} {challenge}")
    metadata_url = re.search(r'resource_metadata="([^"]+)"', challenge)
    if metadata_url:
        document = httpx2.get(metadata_url.group(1), timeout=10).json()
        check("the metadata names the authorization server and the resource",
              document.get("authorization_servers") == [issuer] and document.get("resource") == url, str(document))
    token = client_credentials(issuer, url)
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    check("client credentials: a JWT for this resource", claims.get("aud") == url, str(claims))
    response = post(url, token)
    check("client credentials: accepted", response.status_code == 200, f"{response.status_code} {response.text[:200]}")
    other = client_credentials(issuer, "http://127.0.0.1:1/mcp")
    response = post(url, other)
    check("a token for another resource: 401 invalid_token",
          response.status_code == 401 and 'error="invalid_token"' in response.headers.get("www-authenticate", ""),
          f"{response.status_code} {response.headers}")
    head, payload, signature = token.split(".")
    flipped = signature[:-2] + ("A" if signature[-2] != "A" else "B") + signature[-1]
    response = post(url, f"{head}.{payload}.{flipped}")
    check("a tampered token: 401", response.status_code == 401, str(response.status_code))


def jrpc_logs_in(url: str) -> None:
    with tempfile.TemporaryDirectory() as state:
        jar = Path(state) / "cookies"
        env = dict(os.environ, XDG_STATE_HOME=state,
                   BROWSER=f"curl -sS -L -c {jar} -b {jar} -o /dev/null")
        out = subprocess.run([JRPC, "mcp", "call", url, "add", "a=1", "b=1", "--no-input"],
                             env=env, capture_output=True, text=True, timeout=60)
        check("jrpc mcp call --no-input before logging in: exit 3", out.returncode == 3 and "jrpc mcp login" in out.stderr,
              f"{out.returncode} {out.stderr}")
        out = subprocess.run([JRPC, "mcp", "login", url], env=env, capture_output=True, text=True, timeout=60)
        check("jrpc mcp login through oidc-provider", out.returncode == 0, out.stderr)
        files = list((Path(state) / "jrpc" / "oauth").glob("*.json"))
        check("the tokens are kept, readable by the user alone",
              len(files) == 1 and (files[0].stat().st_mode & 0o777) == 0o600, str(files))
        for era in ([], ["--protocol-version", "legacy"]):
            out = subprocess.run([JRPC, "mcp", "call", url, "add", "a=20", "b=22", "--no-input", *era],
                                 env=env, capture_output=True, text=True, timeout=60)
            check(f"jrpc mcp call with the kept token {era}", out.returncode == 0 and out.stdout.strip() == "42",
                  f"{out.returncode} {out.stdout} {out.stderr}")


async def main() -> int:
    as_process, issuer = start(["bash", "crates/jrpc-mcp/tests/interop/authorization_server.sh"], r"^issuer (\S+)", "stdout")
    server = None
    try:
        server, url = start([JRPC, "mcp", "serve", "--http", "127.0.0.1:0", "--oauth-issuer", issuer,
                             "--oauth-scope", "mcp:tools"], r"at (http://\S+/mcp)", "stderr")
        refusals(issuer, url)
        with anyio.fail_after(60):
            await python_sdk_logs_in(url)
        jrpc_logs_in(url)
    finally:
        for process in (server, as_process):
            if process is not None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
    print(f"{passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
