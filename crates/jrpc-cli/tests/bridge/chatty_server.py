"""A stdio JSON-RPC 2.0 server written apart from jrpc, for `jrpc bridge`
tests: one request at a time, newline-delimited.

Methods: add [a, b]; pid (its process id); notes (the notes received);
progress (sends a `progress` notification, then answers "done"); secret
(an error whose data has members named token and password); ask (asks
its client `client.name` and answers with what it said); unreadable
(answered as a server answers a request it could not read: a parse error
with `"id": null`); hang (never answered); die (exits with status 3
without answering). Notification `note` [text] is remembered.
"""
import json
import os
import sys

notes = []
pending = []  # lines read while waiting for a reply to our own request


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def read():
    if pending:
        return pending.pop(0)
    return sys.stdin.readline()


def ask_client():
    send({"jsonrpc": "2.0", "id": "server-1", "method": "client.name", "params": {"why": "ask"}})
    while True:
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)
        message = json.loads(line)
        if message.get("id") == "server-1" and "method" not in message:
            return message
        pending.append(line)


def serve(message):
    method, params, id_ = message.get("method"), message.get("params"), message.get("id")
    if "id" not in message:
        if method == "note":
            notes.append(params[0])
        return
    if method == "add":
        reply = {"result": params[0] + params[1]}
    elif method == "pid":
        reply = {"result": os.getpid()}
    elif method == "notes":
        reply = {"result": notes}
    elif method == "progress":
        send({"jsonrpc": "2.0", "method": "progress", "params": {"percent": 50}})
        reply = {"result": "done"}
    elif method == "ask":
        answer = ask_client()
        reply = {"result": {"client said": answer.get("result", answer.get("error"))}}
    elif method == "secret":
        reply = {"error": {"code": -32000, "message": "denied", "data": {"token": "abc", "password": "xyz"}}}
    elif method == "unreadable":
        send({"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": None})
        return
    elif method == "hang":
        return
    elif method == "die":
        sys.exit(3)
    else:
        reply = {"error": {"code": -32601, "message": "Method not found", "data": method}}
    send(dict(jsonrpc="2.0", id=id_, **reply))


while True:
    line = read()
    if not line:
        break
    if line.strip():
        serve(json.loads(line))
