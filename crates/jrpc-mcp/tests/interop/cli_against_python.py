"""`jrpc mcp list|call|read|prompt` against a server written with the
official Python SDK, over stdio and Streamable HTTP, in both eras: found
out (the SDK's server is dual-era: 2026-07-28) and pinned to the legacy
handshake (`--protocol-version legacy`); and found out, with no flag,
against the server pinned to each era (`python_server.py --era`).

    python cli_against_python.py PATH/TO/jrpc
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

JRPC = sys.argv[1]
SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_server.py")
checks = 0


def jrpc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([JRPC, "mcp", *args], capture_output=True, text=True, timeout=60)


# What the client is told, and the revision it must speak, per server era.
ERAS = {
    "dual": [([], "2026-07-28"), (["--protocol-version", "legacy"], "2025-11-25")],
    "legacy": [([], "2025-11-25")],
    "modern": [([], "2026-07-28")],
}
era: list[str] = []


def check(target: list[str], tail: list[str], args: list[str], code: int, expect: str) -> None:
    global checks
    done = jrpc(*args[:1], *target, *args[1:], *era, *tail)
    where = "stdio" if tail else "http"
    assert done.returncode == code, f"[{where}] {args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert expect in done.stdout, f"[{where}] {args}: {expect!r} not in {done.stdout!r}\n{done.stderr}"
    checks += 1


def suite(target: list[str], tail: list[str], server_era: str) -> None:
    global era, checks
    for era, version in ERAS[server_era]:
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


def watch(url: str) -> None:
    """`jrpc mcp watch` prints a change another client makes, and Ctrl-C ends it with exit 0."""
    global checks
    watcher = subprocess.Popen(
        [JRPC, "mcp", "watch", url, "note://counter"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        # It says on stderr when it is subscribed.
        assert "watching" in watcher.stderr.readline(), "watch did not start"
        bumped = jrpc("call", url, "bump")
        assert bumped.returncode == 0, bumped.stderr
        line = watcher.stdout.readline()
        assert line.strip() == "resources/updated note://counter", f"watch printed {line!r}"
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=20) == 0, f"watch exited {watcher.returncode}: {watcher.stderr.read()}"
        checks += 1
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    for server_era in ERAS:
        before = checks
        suite([], ["--", sys.executable, SERVER, "--era", server_era], server_era)
        print(f"jrpc mcp against the Python SDK ({server_era}) over stdio: {checks - before} checks passed")
    for server_era in ERAS:
        serve_http(server_era)


def serve_http(server_era: str) -> None:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, SERVER, "--era", server_era, "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
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
        url = f"http://127.0.0.1:{port}/mcp"
        suite([url], [], server_era)
        watch(url)
        print(f"jrpc mcp against the Python SDK ({server_era}) over Streamable HTTP: {checks - before} checks passed")
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
