"""The official MCP Python SDK as a client of `jrpc mcp serve`, in every mode
it connects in, over stdio and over Streamable HTTP.

    python python_client.py PATH/TO/jrpc
    python python_client.py --url http://HOST:PORT/PATH   (a server already running)

Modes: pinned to 2026-07-28 (stateless requests with the `_meta` envelope),
`legacy` (the 2025-11-25 `initialize` session) and `auto` (the SDK probes
`server/discover`; this server answers it, so the SDK goes on modern). Each
uses every demo tool, resource and prompt: progress, cancellation, sampling,
elicitation (accept, decline, cancel) and roots (in 2026-07-28 through
`input_required` results the SDK answers with the same callbacks), logging
(opted in per request in 2026-07-28, `logging/setLevel` in legacy), and the
change notifications of `demo://counter` when `bump` counts it up
(`subscriptions/listen` in 2026-07-28, `resources/subscribe` in legacy).
Exits non-zero on the first failed check.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import warnings

import anyio
import mcp.types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated

# ping, logging and subscribe are deprecated from 2026-07-28 on; the legacy
# sessions use them on purpose.
warnings.filterwarnings("ignore", message=".*(deprecated|removed) as of 2026-07-28.*")

# With --url, only that Streamable HTTP endpoint is checked (the demo
# server mounted elsewhere: examples/mcp_in_axum.rs).
URL = sys.argv[sys.argv.index("--url") + 1] if "--url" in sys.argv else None
JRPC = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "--url" else "jrpc"
EXPECTED_TOOLS = {"add", "echo", "sleep", "sample", "elicit", "list_roots", "fail", "bump"}
ROOTS = ["file:///tmp/project-a", "file:///tmp/project-b"]
MODES = ("2026-07-28", "legacy", "auto")


class Checks:
    def __init__(self, label: str) -> None:
        self.label = label
        self.count = 0

    def __call__(self, condition: bool, what: str) -> None:
        if not condition:
            raise AssertionError(f"[{self.label}] {what}")
        self.count += 1


class Callbacks:
    """What the client answers when the server asks, and what it hears."""

    def __init__(self) -> None:
        self.elicit_action = "accept"
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.sampled: list[str] = []
        self.updated: list[str] = []

    async def sampling(self, context, params: types.CreateMessageRequestParams):
        content = params.messages[0].content
        text = content.text if isinstance(content, types.TextContent) else str(content)
        self.sampled.append(text)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"sampled: {text}"),
            model="interop-test-model",
            stop_reason="endTurn",
        )

    async def elicitation(self, context, params):
        self.elicit_params = params
        if self.elicit_action == "accept":
            return types.ElicitResult(action="accept", content={"name": "Ada"})
        return types.ElicitResult(action=self.elicit_action)

    async def roots(self, context):
        return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in ROOTS])

    async def logging(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    async def message(self, message) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.updated.append(str(message.params.uri))


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def client(server, mode: str, callbacks: Callbacks, log_level: str | None = None) -> Client:
    return Client(
        server,
        mode=mode,
        sampling_callback=callbacks.sampling,
        elicitation_callback=callbacks.elicitation,
        list_roots_callback=callbacks.roots,
        logging_callback=callbacks.logging,
        message_handler=callbacks.message,
        log_level=log_level,
    )


async def counter(client: Client) -> int:
    read = await client.read_resource("demo://counter", cache_mode="bypass")
    return int(read.contents[0].text)


async def session(mode: str, server, transport: str) -> int:
    check = Checks(f"{transport}, {mode}")
    modern = mode != "legacy"
    callbacks = Callbacks()
    async with client(server, mode, callbacks) as c:
        # Who the server is, and which revision it speaks: pinned to
        # 2026-07-28 the SDK asks nothing first, so it asks here.
        if mode == "2026-07-28":
            raw = await c.session.send_discover("2026-07-28")
            c.session.adopt(types.DiscoverResult.model_validate(raw))
        if modern:
            discovered = c.session.discover_result
            check("2026-07-28" in discovered.supported_versions, f"supportedVersions {discovered.supported_versions}")
            check(discovered.ttl_ms is not None and discovered.cache_scope in ("public", "private"), "discover's cache hints")
        check(c.server_info is not None and c.server_info.name == "jrpc-demo", "serverInfo.name")
        check(bool(c.server_info.version), "serverInfo.version")
        caps = c.server_capabilities
        check(caps.tools is not None and caps.resources is not None and caps.prompts is not None, "capabilities")
        check(caps.resources.subscribe is True, "resources.subscribe")
        expected = "2026-07-28" if modern else "2025-11-25"
        check(c.protocol_version == expected, f"protocol version {c.protocol_version}")
        if not modern:
            await c.send_ping()

        # Tools.
        tools = (await c.list_tools()).tools
        names = {tool.name for tool in tools}
        check(names == EXPECTED_TOOLS, f"tool names {names}")
        for tool in tools:
            check(tool.input_schema.get("type") == "object", f"{tool.name} inputSchema type object")
        add_tool = next(tool for tool in tools if tool.name == "add")
        check(add_tool.output_schema is not None, "add has an outputSchema")

        result = await c.call_tool("add", {"a": 2, "b": 40})
        check(not result.is_error, "add succeeds")
        check(text_of(result) == "42", f"add text {text_of(result)!r}")
        check(result.structured_content == {"result": 42}, f"add structured {result.structured_content}")
        result = await c.call_tool("add", {"a": 1.5, "b": 2})
        check(text_of(result) == "3.5", f"add of floats {text_of(result)!r}")
        bad = await c.call_tool("add", {"a": "two", "b": 40})
        check(bad.is_error, "add with a bad argument is an error result")

        result = await c.call_tool("echo", {"text": "hello, world"})
        check(text_of(result) == "hello, world", "echo")

        result = await c.call_tool("fail", {})
        check(result.is_error is True and text_of(result), "fail gives isError with a text")

        try:
            result = await c.call_tool("no_such_tool", {})
            check(result.is_error is True, "unknown tool: isError or -32602")
        except MCPError as e:
            check(e.code == -32602, f"unknown tool code {e.code}")

        # Logging: legacy sessions set a level; modern requests opt in each.
        before = len(callbacks.logs)
        if not modern:
            await c.set_logging_level("debug")
        await c.call_tool("echo", {"text": "log me"})
        if modern:
            await anyio.sleep(0.2)
            check(len(callbacks.logs) == before, "no log messages without a logLevel in _meta")
        else:
            with anyio.fail_after(5):
                while len(callbacks.logs) == before:
                    await anyio.sleep(0.01)
            check(callbacks.logs[-1].level == "debug", f"log level {callbacks.logs[-1].level}")
            await c.set_logging_level("error")
            before = len(callbacks.logs)
            await c.call_tool("echo", {"text": "quiet"})
            await anyio.sleep(0.2)
            check(len(callbacks.logs) == before, "no debug logs after setLevel error")

        # Progress.
        progress: list[tuple[float, float | None]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, total))

        result = await c.call_tool("sleep", {"ms": 400}, progress_callback=on_progress)
        check(text_of(result) == "slept 400", f"sleep text {text_of(result)!r}")
        check(len(progress) >= 4, f"progress notifications {len(progress)}")
        values = [value for value, _ in progress]
        check(all(b > a for a, b in zip(values, values[1:])), f"progress increases {values}")
        check(all(total == 400 for _, total in progress), "progress total is ms")

        # Cancellation: the SDK gives up after its timeout (closing the
        # request's stream, or sending notifications/cancelled); the
        # connection goes on.
        started = time.monotonic()
        try:
            await c.call_tool("sleep", {"ms": 20000}, read_timeout_seconds=0.5)
            check(False, "a 20 s sleep finished within a 0.5 s timeout")
        except Exception:
            pass
        check(time.monotonic() - started < 5, "the timed-out call returned")
        result = await c.call_tool("echo", {"text": "still here"})
        check(text_of(result) == "still here", "the connection works after a cancellation")

        # Sampling, elicitation and roots: requests to the client (legacy),
        # input_required results the SDK answers and retries (modern).
        result = await c.call_tool("sample", {"prompt": "What is 2+2?"})
        check(not result.is_error, f"sample: {text_of(result)}")
        check(text_of(result) == "sampled: What is 2+2?", f"sample text {text_of(result)!r}")
        for action, expected in [("accept", "hello Ada"), ("decline", "declined"), ("cancel", "cancelled")]:
            callbacks.elicit_action = action
            result = await c.call_tool("elicit", {"message": "Who are you?"})
            check(text_of(result) == expected, f"elicit {action}: {text_of(result)!r}")
        schema = callbacks.elicit_params.requested_schema
        check(list(schema["properties"]) == ["name"], f"elicit schema {schema}")
        check(schema["properties"]["name"]["type"] == "string", "elicit name is a string")
        result = await c.call_tool("list_roots", {})
        check(text_of(result) == "\n".join(ROOTS), f"list_roots {text_of(result)!r}")

        # Resources.
        resources = (await c.list_resources()).resources
        uris = [str(r.uri) for r in resources]
        check(uris == ["demo://greeting", "demo://counter"], f"resources {uris}")
        check(all(r.mime_type == "text/plain" for r in resources), "resources are text/plain")
        templates = (await c.list_resource_templates()).resource_templates
        check([t.uri_template for t in templates] == ["demo://echo/{text}"], f"templates {templates}")
        read = await c.read_resource("demo://greeting")
        check(read.contents[0].text == "hello", "greeting reads hello")
        read = await c.read_resource("demo://echo/abc")
        check(read.contents[0].text == "abc", "template reads its variable")
        try:
            await c.read_resource("demo://nothing-here")
            check(False, "an unknown resource was read")
        except MCPError as e:
            expected_code = -32602 if modern else -32002
            check(e.code == expected_code, f"unknown resource code {e.code}")

        # The counter: bump counts it up and announces the update.
        start = await counter(c)
        if modern:
            async with c.listen(resource_subscriptions=["demo://counter"]) as subscription:
                check(list(subscription.honored.resource_subscriptions or []) == ["demo://counter"],
                      f"honoured {subscription.honored}")
                result = await c.call_tool("bump", {})
                check(text_of(result) == str(start + 1), f"bump {text_of(result)!r}")
                with anyio.fail_after(5):
                    event = await subscription.__anext__()
                check(event == ResourceUpdated(uri="demo://counter"), f"listen event {event}")
        else:
            await c.subscribe_resource("demo://counter")
            result = await c.call_tool("bump", {})
            check(text_of(result) == str(start + 1), f"bump {text_of(result)!r}")
            with anyio.fail_after(5):
                while "demo://counter" not in callbacks.updated:
                    await anyio.sleep(0.01)
            check(True, "resources/updated for demo://counter")
        check(await counter(c) == start + 1, "the counter reads its new value")

        # Prompts.
        prompts = (await c.list_prompts()).prompts
        check([p.name for p in prompts] == ["greet"], f"prompts {prompts}")
        arguments = prompts[0].arguments or []
        check([(a.name, a.required) for a in arguments] == [("name", True)], f"greet arguments {arguments}")
        prompt = await c.get_prompt("greet", {"name": "Grace"})
        check(prompt.messages[0].role == "user", "greet is a user message")
        check("Grace" in prompt.messages[0].content.text, "greet names the person")
        try:
            await c.get_prompt("greet", {})
            check(False, "greet without its required argument")
        except MCPError as e:
            check(e.code == -32602, f"missing argument code {e.code}")

    if modern:
        # A client that opts in to logs gets those at its level and above.
        callbacks = Callbacks()
        async with client(server, mode, callbacks, log_level="debug") as c:
            await c.call_tool("echo", {"text": "log me"})
            with anyio.fail_after(5):
                while not callbacks.logs:
                    await anyio.sleep(0.01)
            check(callbacks.logs[-1].level == "debug", f"log level {callbacks.logs[-1].level}")
        callbacks = Callbacks()
        async with client(server, mode, callbacks, log_level="error") as c:
            await c.call_tool("echo", {"text": "quiet"})
            await anyio.sleep(0.2)
            check(not callbacks.logs, "no debug logs for a request at logLevel error")
    return check.count


def start_http_server() -> tuple[subprocess.Popen, str]:
    """`jrpc mcp serve --http 127.0.0.1:0`, and the URL it prints."""
    process = subprocess.Popen(
        [JRPC, "mcp", "serve", "--http", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        found = re.search(r"at (http://\S+/mcp)", line)
        if found:
            return process, found.group(1)
    process.kill()
    raise AssertionError("jrpc mcp serve --http did not say where it listens")


async def main() -> None:
    total = 0
    if URL is not None:
        for mode in MODES:
            count = await session(mode, URL, "http")
            print(f"python SDK over Streamable HTTP at {URL} ({mode}): {count} checks passed")
            total += count
        print(f"python SDK interop: {total} checks passed")
        return
    stdio = StdioServerParameters(command=JRPC, args=["mcp", "serve", "--stdio"])
    for mode in MODES:
        count = await session(mode, stdio, "stdio")
        print(f"python SDK over stdio ({mode}): {count} checks passed")
        total += count
    process, url = start_http_server()
    try:
        for mode in MODES:
            count = await session(mode, url, "http")
            print(f"python SDK over Streamable HTTP ({mode}): {count} checks passed")
            total += count
    finally:
        process.terminate()
        process.wait(timeout=20)
    print(f"python SDK interop: {total} checks passed")


if __name__ == "__main__":
    anyio.run(main)
