"""`jrpc mcp list|call|read|prompt` against a server written with the
official Python SDK, over stdio and Streamable HTTP, in both eras: found
out (the SDK's server is dual-era: 2026-07-28) and pinned to the legacy
handshake (`--protocol-version legacy`).

    python cli_against_python.py PATH/TO/jrpc
"""

import json
import os
import socket
import subprocess
import sys
import time

JRPC = sys.argv[1]
SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_server.py")
checks = 0


def jrpc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([JRPC, "mcp", *args], capture_output=True, text=True, timeout=60)


ERAS = [([], "2026-07-28"), (["--protocol-version", "legacy"], "2025-11-25")]
era: list[str] = []


def check(target: list[str], tail: list[str], args: list[str], code: int, expect: str) -> None:
    global checks
    done = jrpc(*args[:1], *target, *args[1:], *era, *tail)
    where = "stdio" if tail else "http"
    assert done.returncode == code, f"[{where}] {args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert expect in done.stdout, f"[{where}] {args}: {expect!r} not in {done.stdout!r}\n{done.stderr}"
    checks += 1


def suite(target: list[str], tail: list[str]) -> None:
    global era, checks
    for era, version in ERAS:
        suite_in(target, tail)
        # The revision spoken, as `list --json` says it.
        listed = jrpc("list", *target, "tools", "--json", *era, *tail)
        assert listed.returncode == 0, listed.stderr
        spoken = json.loads(listed.stdout)["protocolVersion"]
        assert spoken == version, f"{era}: spoke {spoken}, expected {version}"
        checks += 1


def suite_in(target: list[str], tail: list[str]) -> None:
    check(target, tail, ["call", "add", "a=2", "b=40"], 0, "42")
    check(target, tail, ["call", "shout", "text=hi there"], 0, "HI THERE")
    check(target, tail, ["list"], 0, "add")
    check(target, tail, ["list", "resources"], 0, "note://hello")
    check(target, tail, ["list", "prompts"], 0, "greet")
    check(target, tail, ["read", "note://hello"], 0, "hello from python")
    check(target, tail, ["prompt", "greet", "name=Ada"], 0, "Ada")
    # Bad arguments: the SDK answers with a failed result (isError).
    check(target, tail, ["call", "add", "a=two", "b=1"], 1, "")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    suite([], ["--", sys.executable, SERVER])
    print(f"jrpc mcp against the Python SDK over stdio: {checks} checks passed")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, SERVER, "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the Python SDK server did not start"
                time.sleep(0.1)
        before = checks
        suite([f"http://127.0.0.1:{port}/mcp"], [])
        print(f"jrpc mcp against the Python SDK over Streamable HTTP: {checks - before} checks passed")
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
