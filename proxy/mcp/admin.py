"""The registry's MCP servers, without HTTP: add, list, remove and sync them.

A stdio server is a command run on the proxy's host, so the API adds one only when
``mcp_registry_commands`` is set: the admin key alone does not give a shell; nor does it
read the proxy's environment (``mcp_header_env``, see :mod:`proxy.mcp.permits`, which
is checked again wherever a kept server is started).
Servers from the settings file are listed and synced but never added or removed
here (the file is the operator's: edit it and restart); a server added here starts
at once, is kept in a :class:`~proxy.mcp.registered.ServerList` and comes back
after a restart. An HTTP server's host must pass the tools' egress policy when it is
added, as on every connection after. Removing a server ends its session (a call it
is running fails) and deletes its tools; a server that is merely down keeps them.

Every add and remove is announced (``announce``, set once the notices exist: a
notice through Redis to the other workers and replicas, see
:mod:`proxy.orchestrate.notices`); a process that hears one calls
:meth:`McpRegistry.heard`, and :meth:`McpRegistry.follow` makes its servers match the
list again: it starts the kept servers it does not run and stops the ones no longer
kept, leaving their tools to the worker that deleted them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from pydantic import JsonValue

from graph_store.ingest.mcp import parse_mcp
from graph_store.models import Tool
from graph_store.store import GraphStore
from proxy.config import McpServerSettings
from proxy.errors import Conflict, Forbidden, ToolgraphError
from proxy.mcp.catalog import SyncReport, is_mcp_tool
from proxy.mcp.connection import McpConnection
from proxy.mcp.permits import Permits
from proxy.mcp.registered import ServerList
from proxy.mcp.sources import McpSources

log = logging.getLogger(__name__)

Announce = Callable[[], Awaitable[None]]


async def _alone() -> None:
    pass


class McpRegistry:
    def __init__(
        self,
        sources: McpSources,
        kept: ServerList,
        fixed: Sequence[str],
        store: GraphStore,
        *,
        permits: Permits | None = None,
        announce: Announce = _alone,
    ) -> None:
        self._permits = permits or Permits()
        self._sources = sources
        self._kept = kept
        self._fixed = frozenset(fixed)
        self._store = store
        self.announce = announce
        self._writing = asyncio.Lock()
        self._heard = asyncio.Event()

    async def add(self, server: McpServerSettings) -> dict[str, JsonValue]:
        async with self._writing:
            self._check_allowed(server)
            connection = await self._sources.add(server)
            try:
                await self._kept.put(server)
            except ToolgraphError:  # not kept: not run either
                await self._sources.remove(server.name)
                raise
        await self.announce()
        return (await self._summaries([connection]))[0]

    async def check(self, server: McpServerSettings) -> dict[str, JsonValue]:
        """What adding ``server`` would bring, read over a session of its own: the
        catalog name, MCP name and description of each tool, and the items refused."""
        self._check_allowed(server)
        listing = await self._sources.probe(server)
        parsed = parse_mcp(server.name, listing)
        return {
            "object": "mcp_server.check",
            **_describe(server),
            "tools": [
                {"name": t.name, "mcp_name": t.original_name, "description": t.description}
                for t in parsed.tools
            ],
            "refused": [f"{e.item}: {e.problem}" for e in parsed.errors],
        }

    def _check_allowed(self, server: McpServerSettings) -> None:
        if server.name in self._fixed:
            raise Conflict(f"MCP server {server.name!r} is in the settings file", param="name")
        self._permits.check(server)

    async def servers(self) -> list[dict[str, JsonValue]]:
        return await self._summaries(self._sources.connections())

    async def remove(self, name: str) -> int:
        """Stop and forget server ``name``; how many of its tools were deleted."""
        async with self._writing:
            if name in self._fixed:
                raise Forbidden(
                    f"MCP server {name!r} is in the settings file: remove it there",
                    param="name",
                    code="mcp_server_fixed",
                )
            deleted = await self._sources.remove(name)
            await self._kept.remove(name)
        await self.announce()
        return deleted

    def heard(self) -> None:
        """Another process may have changed the list: :meth:`follow` reads it."""
        self._heard.set()

    async def follow(self) -> None:
        """Until cancelled: each time :meth:`heard` is called, match the list."""
        while True:
            await self._heard.wait()
            self._heard.clear()
            try:
                await self.reconcile()
            except ToolgraphError as exc:  # the next notice, or resubscription, tries again
                log.warning("the MCP server list could not be followed: %s", exc.message)
            except Exception:  # a task's outermost edge: nobody else would see it
                log.exception("the MCP server list could not be followed")

    async def reconcile(self) -> None:
        """Run exactly the kept servers (and the settings file's): start the ones this
        process does not run, stop the ones no longer kept, restart a changed one."""
        async with self._writing:
            kept = {s.name: s for s in await self._kept.load() if s.name not in self._fixed}
            running = {
                c.name: c.server for c in self._sources.connections() if c.name not in self._fixed
            }
            for name, server in running.items():
                if kept.get(name) != server:
                    log.info("MCP server %s is no longer kept: stopping it here", name)
                    await self._sources.stop(name)
            for server in self._permits.allowed(kept.values(), "the kept list"):
                if running.get(server.name) != server:
                    self._launch(server)

    def _launch(self, server: McpServerSettings) -> None:
        log.info("MCP server %s was added by another process: starting it", server.name)
        try:
            self._sources.launch(server)
        except ToolgraphError as exc:  # its host is now outside the egress policy
            log.warning("MCP server %s is not started here: %s", server.name, exc.message)

    async def sync(self, name: str) -> SyncReport:
        return await self._sources.sync(name)

    async def _summaries(self, connections: list[McpConnection]) -> list[dict[str, JsonValue]]:
        tools = await asyncio.to_thread(self._read_tools)
        return [self._summary(c, sum(is_mcp_tool(t, c.name) for t in tools)) for c in connections]

    def _read_tools(self) -> list[Tool]:
        self._store.refresh()  # what other workers wrote
        return self._store.list_tools()

    def _summary(self, connection: McpConnection, tools: int) -> dict[str, JsonValue]:
        server = connection.server
        return {
            "object": "mcp_server",
            **_describe(server),
            "source": "settings" if server.name in self._fixed else "registry",
            "connected": connection.connected,
            "tools": tools,
        }


def _describe(server: McpServerSettings) -> dict[str, JsonValue]:
    return {
        "name": server.name,
        "transport": "stdio" if server.url is None else "http",
        # the command or URL only: env and header values may be keys
        "target": server.url or " ".join(server.command),
    }
