"""An MCP server written with the official Python SDK (MCPServer), for
`jrpc mcp` to drive in the tests.

    python python_server.py                 # stdio
    python python_server.py --http PORT     # Streamable HTTP at http://127.0.0.1:PORT/mcp
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("python-sdk-server")


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


@server.prompt()
def greet(name: str) -> str:
    """Greets someone."""
    return f"Please greet {name} warmly."


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
