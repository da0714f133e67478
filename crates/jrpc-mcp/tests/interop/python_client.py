"""The official MCP Python SDK as a client of `jrpc mcp serve`, over stdio
and over Streamable HTTP.

    python python_client.py PATH/TO/jrpc

Uses every tool, resource and prompt of the demo server, progress,
cancellation, sampling, elicitation (accept, decline, cancel), roots and
logging: over stdio with the SDK's default connect (it probes
`server/discover`, gets -32601 and falls back to `initialize`) and with the
legacy handshake only, then over Streamable HTTP (`jrpc mcp serve --http`).
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

# ping and logging are deprecated from 2026-07-28 on; this server speaks
# 2025-11-25, where they are current.
warnings.filterwarnings("ignore", message=".*(deprecated|removed) as of 2026-07-28.*")

JRPC = sys.argv[1] if len(sys.argv) > 1 else "jrpc"
EXPECTED_TOOLS = {"add", "echo", "sleep", "sample", "elicit", "list_roots", "fail"}
ROOTS = ["file:///tmp/project-a", "file:///tmp/project-b"]


class Checks:
    def __init__(self, label: str) -> None:
        self.label = label
        self.count = 0

    def __call__(self, condition: bool, what: str) -> None:
        if not condition:
            raise AssertionError(f"[{self.label}] {what}")
        self.count += 1


class Callbacks:
    """What the client answers when the server asks."""

    def __init__(self) -> None:
        self.elicit_action = "accept"
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.sampled: list[str] = []

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


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def session(mode: str, server) -> int:
    check = Checks(mode if isinstance(server, StdioServerParameters) else f"http, {mode}")
    callbacks = Callbacks()
    async with Client(
        server,
        mode=mode,
        sampling_callback=callbacks.sampling,
        elicitation_callback=callbacks.elicitation,
        list_roots_callback=callbacks.roots,
        logging_callback=callbacks.logging,
    ) as client:
        # The handshake.
        check(client.server_info is not None and client.server_info.name == "jrpc-demo", "serverInfo.name")
        check(bool(client.server_info.version), "serverInfo.version")
        caps = client.server_capabilities
        check(caps.tools is not None, "tools capability")
        check(caps.resources is not None, "resources capability")
        check(caps.prompts is not None, "prompts capability")
        check(caps.logging is not None, "logging capability")
        check(client.protocol_version == "2025-11-25", f"protocol version {client.protocol_version}")
        await client.send_ping()

        # Tools.
        tools = (await client.list_tools()).tools
        names = {tool.name for tool in tools}
        check(names == EXPECTED_TOOLS, f"tool names {names}")
        for tool in tools:
            check(tool.input_schema.get("type") == "object", f"{tool.name} inputSchema type object")
        add_tool = next(tool for tool in tools if tool.name == "add")
        check(add_tool.output_schema is not None, "add has an outputSchema")

        result = await client.call_tool("add", {"a": 2, "b": 40})
        check(not result.is_error, "add succeeds")
        check(text_of(result) == "42", f"add text {text_of(result)!r}")
        check(result.structured_content == {"result": 42}, f"add structured {result.structured_content}")
        result = await client.call_tool("add", {"a": 1.5, "b": 2})
        check(text_of(result) == "3.5", f"add of floats {text_of(result)!r}")
        bad = await client.call_tool("add", {"a": "two", "b": 40})
        check(bad.is_error, "add with a bad argument is an error result")

        result = await client.call_tool("echo", {"text": "hello, world"})
        check(text_of(result) == "hello, world", "echo")

        result = await client.call_tool("fail", {})
        check(result.is_error is True and text_of(result), "fail gives isError with a text")

        try:
            result = await client.call_tool("no_such_tool", {})
            check(result.is_error is True, "unknown tool: isError or -32602")
        except MCPError as e:
            check(e.code == -32602, f"unknown tool code {e.code}")

        # Logging: after debug, echo logs.
        await client.set_logging_level("debug")
        before = len(callbacks.logs)
        await client.call_tool("echo", {"text": "log me"})
        with anyio.fail_after(5):
            while len(callbacks.logs) == before:
                await anyio.sleep(0.01)
        check(callbacks.logs[-1].level == "debug", f"log level {callbacks.logs[-1].level}")
        await client.set_logging_level("error")
        before = len(callbacks.logs)
        await client.call_tool("echo", {"text": "quiet"})
        await anyio.sleep(0.2)
        check(len(callbacks.logs) == before, "no debug logs after setLevel error")

        # Progress.
        progress: list[tuple[float, float | None]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, total))

        result = await client.call_tool("sleep", {"ms": 400}, progress_callback=on_progress)
        check(text_of(result) == "slept 400", f"sleep text {text_of(result)!r}")
        check(len(progress) >= 4, f"progress notifications {len(progress)}")
        values = [value for value, _ in progress]
        check(all(b > a for a, b in zip(values, values[1:])), f"progress increases {values}")
        check(all(total == 400 for _, total in progress), "progress total is ms")

        # Cancellation: the SDK gives up after its timeout and sends
        # notifications/cancelled; the session goes on.
        started = time.monotonic()
        try:
            await client.call_tool("sleep", {"ms": 20000}, read_timeout_seconds=0.5)
            check(False, "a 20 s sleep finished within a 0.5 s timeout")
        except Exception:
            pass
        check(time.monotonic() - started < 5, "the timed-out call returned")
        result = await client.call_tool("echo", {"text": "still here"})
        check(text_of(result) == "still here", "the session works after a cancellation")

        # Sampling.
        result = await client.call_tool("sample", {"prompt": "What is 2+2?"})
        check(not result.is_error, f"sample: {text_of(result)}")
        check(text_of(result) == "sampled: What is 2+2?", f"sample text {text_of(result)!r}")

        # Elicitation.
        for action, expected in [("accept", "hello Ada"), ("decline", "declined"), ("cancel", "cancelled")]:
            callbacks.elicit_action = action
            result = await client.call_tool("elicit", {"message": "Who are you?"})
            check(text_of(result) == expected, f"elicit {action}: {text_of(result)!r}")
        schema = callbacks.elicit_params.requested_schema
        check(list(schema["properties"]) == ["name"], f"elicit schema {schema}")
        check(schema["properties"]["name"]["type"] == "string", "elicit name is a string")

        # Roots.
        result = await client.call_tool("list_roots", {})
        check(text_of(result) == "\n".join(ROOTS), f"list_roots {text_of(result)!r}")

        # Resources.
        resources = (await client.list_resources()).resources
        check([str(r.uri) for r in resources] == ["demo://greeting"], f"resources {resources}")
        check(resources[0].mime_type == "text/plain", "greeting is text/plain")
        templates = (await client.list_resource_templates()).resource_templates
        check([t.uri_template for t in templates] == ["demo://echo/{text}"], f"templates {templates}")
        read = await client.read_resource("demo://greeting")
        check(read.contents[0].text == "hello", "greeting reads hello")
        read = await client.read_resource("demo://echo/abc")
        check(read.contents[0].text == "abc", "template reads its variable")
        try:
            await client.read_resource("demo://nothing-here")
            check(False, "an unknown resource was read")
        except MCPError as e:
            check(e.code == -32002, f"unknown resource code {e.code}")

        # Prompts.
        prompts = (await client.list_prompts()).prompts
        check([p.name for p in prompts] == ["greet"], f"prompts {prompts}")
        arguments = prompts[0].arguments or []
        check([(a.name, a.required) for a in arguments] == [("name", True)], f"greet arguments {arguments}")
        prompt = await client.get_prompt("greet", {"name": "Grace"})
        check(prompt.messages[0].role == "user", "greet is a user message")
        check("Grace" in prompt.messages[0].content.text, "greet names the person")
        try:
            await client.get_prompt("greet", {})
            check(False, "greet without its required argument")
        except MCPError as e:
            check(e.code == -32602, f"missing argument code {e.code}")
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
    stdio = StdioServerParameters(command=JRPC, args=["mcp", "serve", "--stdio"])
    for mode in ("auto", "legacy"):
        count = await session(mode, stdio)
        print(f"python SDK over stdio ({mode} connect): {count} checks passed")
        total += count
    process, url = start_http_server()
    try:
        for mode in ("auto", "legacy"):
            count = await session(mode, url)
            print(f"python SDK over Streamable HTTP ({mode} connect): {count} checks passed")
            total += count
    finally:
        process.terminate()
        process.wait(timeout=20)
    print(f"python SDK interop: {total} checks passed")


if __name__ == "__main__":
    anyio.run(main)
