"""A small MCP server over stdio, written with the official SDK, for the tests.

    python -m tests.mcp.server [--silent] [--tools N] [--http]

Tools: ``lookup_city`` (structured output with an output schema, read-only),
``forecast`` (text; its latitude and longitude are ``lookup_city``'s outputs),
``reject`` (an ``isError`` result, marked destructive), ``crash`` (the process exits
in the middle of the call), ``slow`` (says ``sleeping`` as progress, then answers after
``seconds``), ``cancellations`` (how many ``slow`` calls the client cancelled, once
there is one), ``grow`` (adds a tool, ``late_tool``, and says so with
``notifications/tools/list_changed``) and ``meet`` (waits at the test's rendezvous on a
loopback ``port`` and answers what the rendezvous said: calls that must overlap). The
listing comes two tools a page. ``--silent`` starts and never answers anything, not
even ``initialize``; ``--tools N`` adds N generated tools (``record_0000``…, each
answering its arguments back), listed 100 a page (``python -m eval.bench_mcp``).
``--http`` serves the same over streamable HTTP at ``/mcp`` on a free loopback port,
which it prints once it listens.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import Any

import anyio
import uvicorn
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server

PAGE = 2
CITIES = {"oslo": (59.91, 10.75), "bergen": (60.39, 5.32)}
_OBJECT: dict[str, Any] = {"type": "object"}


def _tool(name: str, description: str, properties: dict[str, Any], **extra: Any) -> types.Tool:
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    return types.Tool(name=name, description=description, input_schema=schema, **extra)


TOOLS = [
    _tool(
        "lookup_city",
        "Find a city's coordinates (latitude and longitude) by its name.",
        {"city": {"type": "string", "description": "The city's name."}},
        output_schema={
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "latitude": {"type": "number", "description": "The city's latitude."},
                "longitude": {"type": "number", "description": "The city's longitude."},
            },
            "required": ["city", "latitude", "longitude"],
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    _tool(
        "forecast",
        "The weather forecast at a latitude and longitude.",
        {
            "latitude": {"type": "number", "description": "Latitude of the place."},
            "longitude": {"type": "number", "description": "Longitude of the place."},
        },
    ),
    _tool(
        "reject",
        "Delete a record (always refused).",
        {"record": {"type": "string"}},
        annotations=types.ToolAnnotations(destructive_hint=True),
    ),
    _tool("crash", "Stop the server in the middle of the call.", {}),
    _tool("slow", "Answer after some seconds.", {"seconds": {"type": "number"}}),
    _tool("cancellations", "How many slow calls the client cancelled (waits for one).", {}),
    _tool("grow", "Add a tool to this server.", {}),
    _tool(
        "meet",
        "Wait at a rendezvous on a loopback port until the others arrive.",
        {"port": {"type": "integer", "description": "The rendezvous's port."}},
    ),
]
CANCELLED: list[str] = []  # slow calls cancelled by notifications/cancelled
CANCELLED_ONE: list[anyio.Event] = []  # made in the server's loop
LATE = _tool("late_tool", "A tool added while the server runs.", {})


def _text(text: str) -> list[types.ContentBlock]:
    return [types.TextContent(text=text)]


def _generated(count: int) -> list[types.Tool]:
    return [
        _tool(
            f"record_{i:04d}",
            f"Fetch record {i} of the archive by its key.",
            {"key": {"type": "string", "description": "The record's key."}},
        )
        for i in range(count)
    ]


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    start = int(params.cursor) if params is not None and params.cursor else 0
    end = start + (100 if len(TOOLS) > 100 else PAGE)
    cursor = str(end) if end < len(TOOLS) else None
    return types.ListToolsResult(tools=TOOLS[start:end], next_cursor=cursor)


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    arguments = params.arguments or {}
    name = params.name
    if name == "lookup_city":
        city = str(arguments.get("city", "")).lower()
        if city not in CITIES:
            return types.CallToolResult(content=_text(f"no city named {city}"), is_error=True)
        latitude, longitude = CITIES[city]
        found = {"city": city, "latitude": latitude, "longitude": longitude}
        return types.CallToolResult(content=_text(json.dumps(found)), structured_content=found)
    if name == "forecast":
        where = f"{arguments.get('latitude')}, {arguments.get('longitude')}"
        return types.CallToolResult(content=_text(f"Sunny at {where}, 21 °C"))
    if name == "reject":
        return types.CallToolResult(content=_text("records cannot be deleted"), is_error=True)
    if name == "crash":
        os._exit(3)
    if name == "slow":
        await ctx.session.report_progress(0, message="sleeping")  # the call has arrived
        try:
            await anyio.sleep(float(arguments.get("seconds", 0)))
        except anyio.get_cancelled_exc_class():
            CANCELLED.append(params.name)
            CANCELLED_ONE[0].set()
            raise
        return types.CallToolResult(content=_text("done"))
    if name == "cancellations":
        with anyio.move_on_after(30):
            await CANCELLED_ONE[0].wait()
        return types.CallToolResult(content=_text(str(len(CANCELLED))))
    if name == "grow":
        if LATE not in TOOLS:
            TOOLS.append(LATE)
        await ctx.session.send_tool_list_changed()
        return types.CallToolResult(content=_text("grown"))
    if name == "meet":
        return types.CallToolResult(content=_text(await _meet(int(arguments["port"]))))
    if name == "late_tool":
        return types.CallToolResult(content=_text("late"))
    if name.startswith("record_"):
        return types.CallToolResult(content=_text(json.dumps({"record": name, **arguments})))
    raise ValueError(f"no tool {name}")


async def _meet(port: int) -> str:
    """Arrive at the rendezvous on ``port``; the line it answers (``together``, or
    ``alone`` when the others did not come in time)."""
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        heard = BufferedByteReceiveStream(stream)
        return (await heard.receive_until(b"\n", 64)).decode()


def _server() -> Server[Any]:
    CANCELLED_ONE.append(anyio.Event())
    return Server("toolgraph-test", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve() -> None:
    server = _server()
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read, write):
        await server.run(read, write, options)


async def serve_http() -> None:
    listening = socket.create_server(("127.0.0.1", 0))
    print(listening.getsockname()[1], flush=True)  # the parent reads it: it may connect now
    config = uvicorn.Config(_server().streamable_http_app(), log_level="warning")
    await uvicorn.Server(config).serve(sockets=[listening])


def main() -> None:
    if "--silent" in sys.argv:
        while True:  # reads nothing, answers nothing; ends when the client kills it
            time.sleep(3600)
    if "--tools" in sys.argv:
        TOOLS.extend(_generated(int(sys.argv[sys.argv.index("--tools") + 1])))
    anyio.run(serve_http if "--http" in sys.argv else serve)


if __name__ == "__main__":
    main()
