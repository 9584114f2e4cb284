"""The small MCP server the console's add-a-server test adds, written with the official SDK.

    python -m tests.console.weather_mcp                 stdio
    python -m tests.console.weather_mcp --http          streamable HTTP at /mcp on a
                                                        free port, which it prints once
                                                        it listens; 401 without KEY's bearer

Two tools: ``forecast`` and ``sunrise``, for a city.
"""

from __future__ import annotations

import socket
import sys

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

#: The bearer key the HTTP server wants in an ``Authorization`` header.
KEY = "weather-key-0123"

server = MCPServer("weather")


@server.tool()
def forecast(city: str) -> str:
    """Tomorrow's weather forecast for a city."""
    return f"{city}: light rain, 9 degrees"


@server.tool()
def sunrise(city: str) -> str:
    """The time of tomorrow's sunrise in a city."""
    return f"{city}: 07:42"


class BearerOnly:
    """An ASGI app that lets through only requests with KEY's bearer header."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers", []))
        if scope["type"] == "http" and headers.get(b"authorization") != f"Bearer {KEY}".encode():
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"a bearer key is needed"})
            return
        await self.app(scope, receive, send)


def serve_http() -> None:
    listening = socket.create_server(("127.0.0.1", 0))
    print(listening.getsockname()[1], flush=True)  # the parent reads it: it may connect now
    config = uvicorn.Config(BearerOnly(server.streamable_http_app()), log_level="warning")
    uvicorn.Server(config).run(sockets=[listening])


def main(argv: list[str]) -> None:
    if argv[:1] == ["--http"]:
        serve_http()
    else:
        server.run("stdio")


if __name__ == "__main__":
    main(sys.argv[1:])
