"""`McpClient` against a server written with the official Python SDK, over
stdio and Streamable HTTP, with the server dual-era and pinned to each era,
and the client finding the era out or pinned to one: every check of
`examples/mcp_client_checks.rs` (calls, input-required rounds, a
subscription, cancellation, the cache, resumption of a broken stream), and
a refusal where client and server share no era.

    python client_against_python.py PATH/TO/mcp_client_checks
"""

import os
import re
import socket
import subprocess
import sys
import time

CHECKS = sys.argv[1]
SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_server.py")

# (server era, client arguments, the revision spoken or None for a refusal)
MATRIX = [
    ("dual", [], "2026-07-28"),
    ("dual", ["--protocol", "legacy"], "2025-11-25"),
    ("dual", ["--protocol", "2026-07-28"], "2026-07-28"),
    ("legacy", [], "2025-11-25"),
    ("legacy", ["--protocol", "2026-07-28"], None),
    ("modern", [], "2026-07-28"),
    ("modern", ["--protocol", "legacy"], None),
]


def run(where: str, era: str, client: list[str], spoken: str | None, target: list[str]) -> int:
    expect = ["--refused"] if spoken is None else ["--expect", spoken]
    done = subprocess.run([CHECKS, *client, *expect, *target], capture_output=True, text=True, timeout=300)
    what = f"[{where}, server {era}, client {' '.join(client) or 'auto'}]"
    assert done.returncode == 0, f"{what}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    passed = re.search(r"^(\d+) checks passed$", done.stdout, re.M)
    assert passed, f"{what}: no count in {done.stdout!r}"
    if spoken is not None and where == "http" and spoken == "2025-11-25":
        assert "resumed" in done.stdout, f"{what}: resumption not checked\n{done.stdout}"
    print(f"{what}: {passed.group(1)} checks passed")
    return int(passed.group(1))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_http(era: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, SERVER, "--era", era, "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            assert server.poll() is None, "the Python SDK server exited"
            assert time.monotonic() < deadline, "the Python SDK server did not start"
            time.sleep(0.1)


def main() -> None:
    total = 0
    for era, client, spoken in MATRIX:
        total += run("stdio", era, client, spoken, ["--", sys.executable, SERVER, "--era", era])
    for era in ("dual", "legacy", "modern"):
        server, url = serve_http(era)
        try:
            for era_of, client, spoken in MATRIX:
                if era_of == era:
                    total += run("http", era, client, spoken, [url])
        finally:
            server.terminate()
            server.wait(timeout=20)
    print(f"McpClient against the Python SDK: {total} checks passed")


if __name__ == "__main__":
    main()
