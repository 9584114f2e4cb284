"""An MCP server with thousands of tools, over stdio, written with the official SDK.

    python -m tests.mcp.crowded [--tools N]

N tools (3,000 by default, a multiple of three), listed :data:`PAGE` a page: for each
``i``, ``lookup_<i>`` and ``lookup.<i>`` (one name once folded) and a name of 100
characters, ``archive_archive_…<i>`` (past the 64 OpenAI allows). Three more tools:
``pages`` (how many ``tools/list`` requests it answered), ``change`` (rewrites
``lookup_0000``'s description, drops the long name of ``i = 1``, adds ``late_tool``,
and says so with ``notifications/tools/list_changed``) and ``broken``, whose input
schema is not valid JSON Schema (a property of type ``banana``; the SDK's server checks
only that the root is an object's).
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server

PAGE = 250
LONG = "archive_" * 12
_OBJECT: dict[str, Any] = {"type": "object", "properties": {"key": {"type": "string"}}}
TOOLS: list[types.Tool] = []
LISTED: list[int] = []  # one entry per tools/list request answered


def _tool(name: str, description: str) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema=_OBJECT)


def _generated(count: int) -> list[types.Tool]:
    tools = []
    for i in range(count // 3):
        tools += [
            _tool(f"lookup_{i:04d}", f"Look up entry {i} of the register."),
            _tool(f"lookup.{i:04d}", f"Look up entry {i} of the old register."),
            _tool(f"{LONG}{i:04d}", f"Fetch archive box {i}."),
        ]
    return tools


def _change() -> None:
    TOOLS[0] = _tool("lookup_0000", "Look up entry 0 of the register, rewritten.")
    TOOLS[:] = [tool for tool in TOOLS if tool.name != f"{LONG}0001"]
    TOOLS.append(_tool("late_tool", "A tool added while the server runs."))


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    LISTED.append(1)
    start = int(params.cursor) if params is not None and params.cursor else 0
    end = start + PAGE
    cursor = str(end) if end < len(TOOLS) else None
    return types.ListToolsResult(tools=TOOLS[start:end], next_cursor=cursor)


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    if params.name == "pages":
        return types.CallToolResult(content=[types.TextContent(text=str(len(LISTED)))])
    if params.name == "change":
        _change()
        await ctx.session.send_tool_list_changed()
        return types.CallToolResult(content=[types.TextContent(text="changed")])
    return types.CallToolResult(content=[types.TextContent(text=params.name)])


async def serve() -> None:
    server: Server[Any] = Server("crowded", on_list_tools=list_tools, on_call_tool=call_tool)
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read, write):
        await server.run(read, write, options)


def main() -> None:
    count = int(sys.argv[sys.argv.index("--tools") + 1]) if "--tools" in sys.argv else 3000
    TOOLS.extend(
        [*_generated(count), _tool("pages", "Count listings."), _tool("change", "Change.")]
    )
    broken = {"type": "object", "properties": {"n": {"type": "banana"}}, "required": ["n"]}
    TOOLS.append(types.Tool(name="broken", description="Bad schema.", input_schema=broken))
    anyio.run(serve)


if __name__ == "__main__":
    main()
