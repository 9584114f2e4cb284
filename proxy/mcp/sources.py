"""Every configured MCP server, as a tool source for the catalog and a way to call tools.

:class:`McpSources` starts one :class:`~proxy.mcp.connection.McpConnection` per
server in ``mcp_servers``. Each listing is written into the graph store
(:func:`~proxy.mcp.catalog.sync_server`, in a worker thread) and ``on_change`` is
told, so that the catalog loads again; a server that goes away keeps its tools in the
store, and :meth:`McpSources.available` says they cannot run until it is back, so the
catalog leaves them out of what the planner sees. :meth:`McpSources.invoke` is the
executor's way to call an ``mcp://`` endpoint. Without a store (``toolgraph tools
call``), listings are read but written nowhere: the sources only call tools.

Each worker process runs its own copy of every stdio server: sessions are not shared
between processes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from urllib.parse import unquote, urlsplit

from pydantic import JsonValue

from graph_store.ingest.mcp import SCHEME
from graph_store.models import Tool
from graph_store.store import GraphStore
from proxy.config import McpServerSettings
from proxy.errors import Conflict, NotFound, ToolError
from proxy.execute.egress import EgressPolicy
from proxy.mcp.catalog import SyncReport, is_mcp_tool, sync_server
from proxy.mcp.connection import McpConnection
from proxy.mcp.probe import probe_server

log = logging.getLogger(__name__)

OnChange = Callable[[], Awaitable[None]]


async def _nothing() -> None:
    pass


class McpSources:
    def __init__(
        self,
        servers: Sequence[McpServerSettings],
        call_timeout: float,
        store: GraphStore | None,
        on_change: OnChange | None = None,
        policy: EgressPolicy | None = None,
    ) -> None:
        self._store = store
        self.on_change = on_change or _nothing
        self._call_timeout = call_timeout
        self._policy = policy or EgressPolicy()
        self._connections = {server.name: self._connection(server) for server in servers}
        self._ending: set[McpConnection] = set()  # removed or stopped, not closed yet
        self._writing = asyncio.Lock()

    def _connection(self, server: McpServerSettings) -> McpConnection:
        return McpConnection(server, self._call_timeout, self._on_tools, self._policy)

    def start(self) -> None:
        """Connect to every server in the background."""
        for connection in self._connections.values():
            connection.start()

    async def aclose(self) -> None:
        """End every session (a stdio server's process with it), those a cancelled
        :meth:`remove` or :meth:`stop` left closing too."""
        ending = [*self._connections.values(), *self._ending]
        await asyncio.gather(*(c.aclose() for c in ending))

    async def settled(self) -> None:
        """Wait until every server's first connection attempt has ended, either way."""
        await asyncio.gather(*(c.tried.wait() for c in self._connections.values()))

    @property
    def loading(self) -> bool:
        return not all(c.tried.is_set() for c in self._connections.values())

    def connections(self) -> list[McpConnection]:
        return list(self._connections.values())

    async def add(self, server: McpServerSettings) -> McpConnection:
        """Start ``server`` and wait for its first connection attempt (at most its
        ``connect_timeout``); a server that is down stays added and is retried."""
        connection = self.launch(server)
        await connection.tried.wait()
        return connection

    def launch(self, server: McpServerSettings) -> McpConnection:
        """Start ``server`` in the background."""
        if server.name in self._connections:
            raise Conflict(f"an MCP server named {server.name!r} exists", param="name")
        if server.url is not None:
            self._policy.check_host(urlsplit(server.url).hostname or "")
        connection = self._connections[server.name] = self._connection(server)
        connection.start()
        return connection

    async def probe(self, server: McpServerSettings) -> list[JsonValue]:
        """``server``'s listing over a session of its own, closed after; nothing is kept."""
        if server.name in self._connections:
            raise Conflict(f"an MCP server named {server.name!r} exists", param="name")
        if server.url is not None:
            self._policy.check_host(urlsplit(server.url).hostname or "")
        return await probe_server(server, self._policy)

    async def stop(self, name: str) -> None:
        """End server ``name``'s session and leave its tools in the store (another
        worker removed it, and deleted them)."""
        await self._end(name)
        await self.on_change()

    async def _end(self, name: str) -> None:
        connection = self._connections.pop(self._known(name))
        self._ending.add(connection)
        await connection.aclose()
        self._ending.discard(connection)  # not when cancelled: aclose() ends it then

    async def remove(self, name: str) -> int:
        """Stop server ``name`` and delete its tools; how many were deleted. A call it
        is running fails (the session ends under it)."""
        await self._end(name)
        report = await self._write(name, [])
        await self.on_change()
        return report.deleted

    async def sync(self, name: str) -> SyncReport:
        """Read server ``name``'s listing now and write it into the store."""
        listing = await self._connections[self._known(name)].list_now()
        report = await self._write(name, listing)
        await self.on_change()
        return report

    def _known(self, name: str) -> str:
        if name not in self._connections:
            raise NotFound(
                f"no MCP server named {name!r}", param="name", code="mcp_server_not_found"
            )
        return name

    def connected(self) -> list[str]:
        return [name for name, c in self._connections.items() if c.connected]

    def available(self, tool: Tool) -> bool:
        """Whether ``tool`` can run now: any tool not from MCP, or one whose server is
        configured and connected."""
        if not is_mcp_tool(tool):
            return True
        connection = self._connections.get(tool.provenance.file)
        return connection is not None and connection.connected

    async def invoke(self, tool: Tool, arguments: Mapping[str, JsonValue]) -> JsonValue:
        server, name = _target(tool)
        connection = self._connections.get(server)
        if connection is None:
            raise ToolError(f"{tool.name}: no MCP server named {server} is configured")
        return await connection.call(name, arguments)

    async def _on_tools(self, server: str, listing: list[JsonValue] | None) -> None:
        if server not in self._connections:  # removed while it was listing
            return
        if listing is not None:
            report = await self._write(server, listing)
            log.info(
                "MCP server %s synced: %d tools written, %d deleted, %d edges, %d errors",
                server,
                report.written,
                report.deleted,
                report.edges,
                len(report.errors),
            )
        await self.on_change()

    async def _write(self, server: str, listing: list[JsonValue]) -> SyncReport:
        store = self._store
        if store is None:
            return SyncReport()
        async with self._writing:  # one writer: two syncs would race on the edges
            return await asyncio.to_thread(sync_server, store, server, listing)


def _target(tool: Tool) -> tuple[str, str]:
    """(server, the tool's own name) of an ``mcp://server/tool`` endpoint."""
    url = tool.endpoint.url if tool.endpoint else ""
    if not url.startswith(SCHEME):
        raise ToolError(f"{tool.name} has no MCP endpoint", param=tool.name)
    parts = urlsplit(url)
    return parts.netloc, unquote(parts.path.removeprefix("/"))
