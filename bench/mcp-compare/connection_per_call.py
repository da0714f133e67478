#!/usr/bin/env python3
"""POSTs one request per new TCP connection, N times, and checks each answer.

    connection_per_call.py URL N BODY [HEADER: VALUE ...]

The load for bench/mcp-compare/callgrind-per-connection.sh: the client's
own cost does not count there (only the server runs under callgrind), so
plain sockets do. Each connection sends its request with `Connection:
close`, reads the response to its end (Content-Length, or chunked) and
closes. Exits non-zero on any answer that is not 200.
"""
import socket
import sys
from urllib.parse import urlsplit


def read_response(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("closed before the response head")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    if b"content-length" in headers:
        length = int(headers[b"content-length"])
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                raise RuntimeError("closed within the body")
            rest += chunk
    else:
        # Chunked or close-delimited: read to the end of the connection.
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
    return status


def main():
    url, n, body = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
    extra = [h.encode() for h in sys.argv[4:]]
    parts = urlsplit(url)
    path = parts.path or "/"
    head = [
        b"POST " + path.encode() + b" HTTP/1.1",
        b"Host: " + parts.netloc.encode(),
        b"Content-Type: application/json",
        b"Content-Length: " + str(len(body)).encode(),
        b"Connection: close",
    ] + extra
    request = b"\r\n".join(head) + b"\r\n\r\n" + body
    for _ in range(n):
        with socket.create_connection((parts.hostname, parts.port)) as sock:
            sock.sendall(request)
            status = read_response(sock)
            if status != 200:
                sys.exit(f"HTTP {status}")


if __name__ == "__main__":
    main()
