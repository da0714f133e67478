"""An MCP server written with the official Python SDK (MCPServer), for
`jrpc mcp` to drive in the tests.

    python python_server.py [--era ERA]                 # stdio
    python python_server.py [--era ERA] --http PORT     # Streamable HTTP at http://127.0.0.1:PORT/mcp

ERA is `dual` (the default: the SDK as it is, serving 2026-07-28 requests and
the 2025-11-25 `initialize` handshake), `legacy` (a 2025-11-25-only server)
or `modern` (a 2026-07-28-only one); see `era_gate` and `HttpEraGate`.
"""

import argparse
import json
from collections import Counter
from typing import Annotated

import anyio
import uvicorn
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import (
    AcceptedElicitation, Context, Elicit, ElicitationResult, ListRoots, MCPServer, Resolve, Sample,
)
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http import EventMessage, EventStore
from mcp.shared.exceptions import MCPError
from mcp_types import (
    HEADER_MISMATCH, METHOD_NOT_FOUND, PROTOCOL_VERSION_META_KEY, UNSUPPORTED_PROTOCOL_VERSION,
    CreateMessageResult, EmptyResult, ListRootsResult, ResourceUpdatedNotification,
    ResourceUpdatedNotificationParams, SamplingMessage, SubscribeRequestParams, TextContent,
    ToolListChangedNotification, UnsubscribeRequestParams,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

ERA = "dual"
COUNTER = "note://counter"
state = {"counter": 0, "cancelled": 0}
seen_methods: Counter[str] = Counter()
peers: dict[str, object] = {}  # legacy connection -> its latest ServerSession
subscribers: dict[str, set[str]] = {}  # resource URI -> legacy connections


def peer_key(ctx) -> str | None:
    """A stdio process is one connection; over HTTP the Mcp-Session-Id names it."""
    return "stdio" if ctx.request is None else ctx.request.headers.get("mcp-session-id")


async def era_gate(ctx, call_next):
    """Counts every request by method, then refuses what the chosen era does not speak."""
    if ctx.request_id is None:
        return await call_next(ctx)
    seen_methods[ctx.method] += 1
    # On the handshake loop `protocol_version` is the connection's: the envelope is the tell.
    meta = (ctx.params or {}).get("_meta") or {}
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or PROTOCOL_VERSION_META_KEY in meta
    if ERA == "legacy" and (modern or ctx.method == "server/discover"):
        raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=ctx.method)
    if ERA == "modern" and not modern:
        # What the SDK answers `initialize` on a stdio connection locked modern: name our versions.
        requested = str((ctx.params or {}).get("protocolVersion", ctx.protocol_version))
        data = {"supported": list(MODERN_PROTOCOL_VERSIONS), "requested": requested}
        raise MCPError(code=UNSUPPORTED_PROTOCOL_VERSION, message="This server speaks only 2026-07-28", data=data)
    if not modern and ctx.method != "initialize" and (key := peer_key(ctx)):
        peers[key] = ctx.session
    result = await call_next(ctx)
    if ctx.method == "initialize" and isinstance(result, dict):
        # bump() does send tools/list_changed; the SDK derives this from NotificationOptions,
        # which its HTTP session manager cannot be given.
        result.setdefault("capabilities", {}).setdefault("tools", {})["listChanged"] = True
    return result


hint = CacheHint(ttl_ms=60000)
server = MCPServer(
    "python-sdk-server",
    middleware=[era_gate],
    cache_hints={"tools/list": hint, "prompts/list": hint, "resources/list": hint, "resources/read": hint},
)
# MCPServer has no public handle on its low-level Server, needed to serve
# resources/subscribe (2025-era) and to drive a handshake-only stdio loop.
lowlevel = server._lowlevel_server


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Upper-cases a text."""
    return text.upper()


@server.resource("note://hello", mime_type="text/plain")
def hello() -> str:
    """A greeting."""
    return "hello from python"


@server.resource(COUNTER, mime_type="text/plain")
def counter() -> str:
    """How many times bump() ran."""
    return str(state["counter"])


@server.prompt()
def greet(name: str) -> str:
    """Greets someone."""
    return f"Please greet {name} warmly."


# Client features through the SDK's resolvers: on 2026-07-28 each pending
# question becomes an input_required round, on 2025-11-25 a request mid-call.
class Name(BaseModel):
    name: str


def ask_llm(text: str) -> Sample:
    return Sample([SamplingMessage(role="user", content=TextContent(type="text", text=text))], max_tokens=200)


async def ask_for_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


async def poem_about(topic: str) -> Sample:
    return ask_llm(f"Write a poem about {topic}.")


async def about_name(who: Annotated[Name, Resolve(ask_for_name)]) -> Sample:
    # Needs the elicited name, so it is asked a round later, not batched with it.
    return ask_llm(f"name is {who.name}")


async def client_roots() -> ListRoots:
    return ListRoots()


def sampled(result: CreateMessageResult) -> str:
    blocks = result.content if isinstance(result.content, list) else [result.content]
    return "".join(b.text for b in blocks if isinstance(b, TextContent))


@server.tool()
async def ask_name(answer: Annotated[ElicitationResult[Name], Resolve(ask_for_name)]) -> str:
    """Asks the user for their name (form elicitation)."""
    if not isinstance(answer, AcceptedElicitation):
        raise ToolError(f"declined: the user chose {answer.action}")
    return f"hello {answer.data.name}"


@server.tool()
async def sample_poem(topic: str, poem: Annotated[CreateMessageResult, Resolve(poem_about)]) -> str:
    """Has the client's LLM write a poem about the topic."""
    return sampled(poem)


@server.tool()
async def list_roots(roots: Annotated[ListRootsResult, Resolve(client_roots)]) -> str:
    """The client's root URIs, one a line."""
    return "\n".join(str(root.uri) for root in roots.roots)


@server.tool()
async def ask_twice(
    who: Annotated[Name, Resolve(ask_for_name)], reply: Annotated[CreateMessageResult, Resolve(about_name)]
) -> str:
    """Elicits a name, then samples about it: two rounds."""
    return f"{who.name}: {sampled(reply)}"


async def subscribe(ctx, params: SubscribeRequestParams) -> EmptyResult:
    subscribers.setdefault(str(params.uri), set()).add(peer_key(ctx))
    return EmptyResult()


async def unsubscribe(ctx, params: UnsubscribeRequestParams) -> EmptyResult:
    subscribers.get(str(params.uri), set()).discard(peer_key(ctx))
    return EmptyResult()


lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)


async def tell_legacy(ctx: Context, note, keys) -> None:
    """The caller hears it on its own response stream, other sessions on their standalone one."""
    me = peer_key(ctx.request_context)
    for key in list(keys):
        try:
            if key == me:
                await ctx.session.send_notification(note, related_request_id=ctx.request_context.request_id)
            elif key in peers:
                await peers[key].send_notification(note)
        except Exception:  # a session that went away
            peers.pop(key, None)


@server.tool()
async def bump(ctx: Context) -> str:
    """Increments the counter and says so: resource updated, tools list changed."""
    state["counter"] += 1
    await ctx.notify_resource_updated(COUNTER)  # 2026-07-28: to subscriptions/listen streams
    await ctx.notify_tools_changed()
    updated = ResourceUpdatedNotification(params=ResourceUpdatedNotificationParams(uri=COUNTER))
    await tell_legacy(ctx, updated, subscribers.get(COUNTER, ()))
    await tell_legacy(ctx, ToolListChangedNotification(), peers.keys())
    return str(state["counter"])


@server.tool()
async def slow() -> str:
    """Waits 30 s unless cancelled."""
    try:
        await anyio.sleep(30)
    except anyio.get_cancelled_exc_class():
        state["cancelled"] += 1
        raise
    return "done"


@server.tool()
def cancelled() -> str:
    """How many slow() calls were cancelled."""
    return str(state["cancelled"])


@server.tool()
def seen(method: str) -> str:
    """How many requests with this JSON-RPC method this process has received (this call included)."""
    return str(seen_methods[method])


@server.tool()
async def drop_stream(ctx: Context) -> str:
    """Closes its own SSE stream mid-call (2025-era HTTP); the client resumes with Last-Event-ID."""
    await ctx.close_sse_stream()  # a no-op where streams are not resumable (stdio, 2026-07-28)
    await anyio.sleep(0.5)
    return "resumed"


class MemoryEventStore(EventStore):
    """Keeps every SSE event so a dropped stream can be replayed; an id is a position."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    async def store_event(self, stream_id, message):
        self.events.append((stream_id, message))
        return str(len(self.events))

    async def replay_events_after(self, last_event_id, send_callback):
        if not last_event_id.isdigit() or not 0 < int(last_event_id) <= len(self.events):
            return None
        stream = self.events[int(last_event_id) - 1][0]
        for at, (sid, message) in enumerate(self.events[int(last_event_id):], int(last_event_id) + 1):
            if sid == stream and message is not None:
                await send_callback(EventMessage(message, str(at)))
        return stream


class HttpEraGate:
    """The HTTP half of --era, ahead of the SDK's routing on MCP-Protocol-Version."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        headers = scope.get("headers", [])
        version = next((v.decode() for k, v in headers if k == b"mcp-protocol-version"), None)
        modern = version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS
        if scope["type"] == "http" and ERA == "legacy" and modern:
            # A 2025 server has no modern entry: without the header the SDK's legacy
            # transport answers as one does (400 "Missing session ID" when sessionless).
            scope = {**scope, "headers": [(k, v) for k, v in headers if k != b"mcp-protocol-version"]}
        elif scope["type"] == "http" and ERA == "modern" and not modern:
            return await refuse_legacy(scope, receive, send, version)
        await self.app(scope, receive, send)


async def refuse_legacy(scope, receive, send, version: str | None) -> None:
    """What a 2026-07-28-only server answers 2025 traffic (streamable-http: Backward Compatibility)."""
    if scope["method"] != "POST":
        return await Response(status_code=405, headers={"Allow": "POST"})(scope, receive, send)
    try:
        request = json.loads(await Request(scope, receive).body())
    except ValueError:
        request = None
    supported = list(MODERN_PROTOCOL_VERSIONS)
    if version is None:  # the required header is missing (e.g. `initialize`); still name our versions
        message = f"Missing MCP-Protocol-Version header; this server speaks {', '.join(supported)}"
        error = {"code": HEADER_MISMATCH, "message": message, "data": {"supported": supported}}
    else:
        data = {"supported": supported, "requested": version}
        error = {"code": UNSUPPORTED_PROTOCOL_VERSION, "message": "Unsupported protocol version", "data": data}
    request_id = request.get("id") if isinstance(request, dict) else None
    await JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error}, status_code=400)(scope, receive, send)


async def serve_stdio() -> None:
    if ERA != "legacy":
        return await server.run_stdio_async()
    # The SDK's stdio entry serves both eras; its handshake-only loop is a 2025 server.
    async with stdio_server() as (read, write), lowlevel.lifespan(lowlevel) as lifespan_state:
        await serve_loop(lowlevel, read, write, lifespan_state=lifespan_state)


def main() -> None:
    global ERA
    parser = argparse.ArgumentParser()
    parser.add_argument("--era", choices=["dual", "modern", "legacy"], default="dual")
    parser.add_argument("--http", type=int, metavar="PORT")
    args = parser.parse_args()
    ERA = args.era
    if args.http is None:
        return anyio.run(serve_stdio)
    # Resumable 2025-era streams: every event kept, clients told to come back after 200 ms.
    app = server.streamable_http_app(event_store=MemoryEventStore(), retry_interval=200)
    app.add_middleware(HttpEraGate)
    uvicorn.run(app, host="127.0.0.1", port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
