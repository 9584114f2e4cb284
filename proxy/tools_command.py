"""``toolgraph tools call NAME --arguments JSON [--compress]``: one catalog tool from a shell.

The call goes through the executor exactly as one node of an orchestrate plan would:
the argument check against the tool's schema, the egress policy and credentials of
HTTP tools, the sandbox of the built-in pack, the database pack's read-only checks,
the call timeout, and with ``--compress`` the compressor (truncation only: no model
is asked which fields to keep). The tool is looked up among the packs the settings
give (built-in, ``packs.database``, ``packs.knowledge_graph``) first, then in the
catalog's graph store. A tool from an MCP server is called over a session of its own
to that server (from ``mcp_servers`` or those added through the registry API, under
the egress policy), started for the call and ended after it. The output is printed
as JSON (``--compress``: the compressed text); a failure is one line on stderr and
exit status 1, a tool that does not exist or arguments that are not a JSON object
exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TextIO

from pydantic import JsonValue

from graph_store.models import Tool
from graph_store.store import open_store
from proxy._command import CommandFailed, run_reported
from proxy.config import Settings
from proxy.errors import StoreUnavailable
from proxy.execute.egress import EgressPolicy
from proxy.execute.plan import PlanNode, ToolPlan
from proxy.execute.scheduler import Outcome
from proxy.execute.service import ToolExecutor
from proxy.mcp.catalog import is_mcp_tool
from proxy.mcp.registered import configured_servers
from proxy.mcp.sources import McpSources
from proxy.tools.packs import database as database_pack
from proxy.tools.packs.knowledge_graph.catalog import knowledge_graph_tools
from proxy.tools.packs.math.catalog import builtin_tools

COMMANDS = ("tools",)
_NODE = "call"


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tools = commands.add_parser("tools", help="run catalog tools from a shell")
    actions = tools.add_subparsers(dest="action", required=True)
    call = actions.add_parser("call", help="call one tool through the executor, print its output")
    call.add_argument("name", help="the tool's catalog name")
    call.add_argument("--arguments", default="{}", help="its arguments as a JSON object")
    call.add_argument("--compress", action="store_true", help="print the compressed output")
    call.add_argument("--config", type=Path, help="YAML settings file")
    # main() loads settings with the serve command's overrides; this command has none.
    call.set_defaults(host=None, port=None, workers=None)


def run_command(args: argparse.Namespace, settings: Settings, out: TextIO | None = None) -> int:
    return run_reported("toolgraph", lambda: _run(args, settings), out or sys.stdout)


def _run(args: argparse.Namespace, settings: Settings) -> str:
    arguments = parse_arguments(args.arguments)
    tool = find_tool(settings, args.name)
    return asyncio.run(call_tool(settings, tool, arguments, compress=args.compress))


def parse_arguments(text: str) -> dict[str, JsonValue]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandFailed(f"--arguments is not JSON: {exc}", 2) from None
    if not isinstance(value, dict):
        raise CommandFailed("--arguments must be a JSON object", 2)
    return value


def find_tool(settings: Settings, name: str) -> Tool:
    """``name`` among the packs' tools, else in the catalog's graph store."""
    packs = builtin_tools() if settings.orchestrate.builtin_tools else []
    packs += database_pack.configured_tools(settings.packs.database)
    packs += knowledge_graph_tools(settings.packs.knowledge_graph)
    for tool in packs:
        if tool.name == name:
            return tool
    store = open_store(settings.data_dir, settings.neo4j_uri)
    try:
        found = store.get_tool(name)
    finally:
        store.close()
    if found is None:
        raise CommandFailed(f"no tool named {name} in the catalog or the packs", 2)
    return found


async def call_tool(
    settings: Settings, tool: Tool, arguments: dict[str, JsonValue], *, compress: bool
) -> str:
    """``tool``'s output as JSON text (``compress``: its compressed text), run as one
    node of a plan."""
    plan = ToolPlan(nodes=(PlanNode(id=_NODE, tool=tool.name, arguments=arguments),))
    async with _mcp_session(settings, tool) as mcp:
        executor = ToolExecutor(
            settings.executor,
            mcp=mcp,
            databases=settings.packs.database,
            graphs=settings.packs.knowledge_graph,
        )
        try:
            executed = await executor.execute(plan, {tool.name: tool}, model=None)
        finally:
            await executor.aclose()
    record = executed.run.records[_NODE]
    if record.outcome is not Outcome.OK:
        error = record.error.removeprefix(f"{tool.name}: ")
        raise CommandFailed(f"{tool.name} {record.outcome or 'failed'}: {error}", 1)
    if compress:
        return executed.compressed[_NODE].text
    return json.dumps(record.output, ensure_ascii=False, indent=2)


@contextlib.asynccontextmanager
async def _mcp_session(settings: Settings, tool: Tool) -> AsyncIterator[McpSources | None]:
    """A session to ``tool``'s MCP server for the length of the call (none for a tool
    that is not from MCP); its listing is read but not written to the catalog."""
    if not is_mcp_tool(tool):
        yield None
        return
    name = tool.provenance.file
    try:
        servers = await configured_servers(settings)
    except StoreUnavailable as exc:
        raise CommandFailed(exc.message, 1) from None
    server = next((s for s in servers if s.name == name), None)
    if server is None:
        raise CommandFailed(f"{tool.name} is from MCP server {name}, which is not configured", 1)
    policy = EgressPolicy.from_settings(settings.executor)
    mcp = McpSources([server], settings.executor.call_timeout, None, policy=policy)
    mcp.start()
    try:
        await mcp.settled()
        if not mcp.connected():
            raise CommandFailed(f"MCP server {name} did not connect (see the log above)", 1)
        yield mcp
    finally:
        await mcp.aclose()
