"""The catalog the proxy would serve, made ready for the shell's commands.

``toolgraph catalog list/show``, ``graph …``, ``index build`` and ``search`` read the
graph store. The proxy's catalog is more than what was imported into it: each load
writes the packs' tools the settings give (built-in, ``packs.database``,
``packs.knowledge_graph``) and every MCP server's listing into the store, and leaves
out the tools of an MCP server that is not connected. :func:`served_catalog` does the
same before such a command runs, with the same settings, so that the command sees
what the proxy would serve: it seeds the packs, starts the MCP servers (the settings'
and those added through the registry API) for as long as their first connection
attempt takes, writes their listings, and says in one line on stderr why a server is
left out. It returns the names of the tools the proxy would leave out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import TextIO

from graph_store.store import GraphStore, open_store
from proxy.catalog.packs import seed_packs
from proxy.config import Settings
from proxy.execute.egress import EgressPolicy
from proxy.mcp.catalog import is_mcp_tool
from proxy.mcp.registered import configured_servers
from proxy.mcp.sources import McpSources


def served_catalog(settings: Settings, err: TextIO) -> frozenset[str]:
    """Bring the store to the catalog the proxy would load; the names of the tools it
    would leave out (an MCP server's that did not connect). Raises the store's
    :class:`~graph_store.errors.GraphStoreError` and
    :class:`~proxy.errors.StoreUnavailable` (Redis's server list)."""
    store = open_store(settings.data_dir, settings.neo4j_uri)
    try:
        seed_packs(store, settings)
        return asyncio.run(_sync_mcp_servers(settings, store, err))
    finally:
        store.close()


async def _sync_mcp_servers(settings: Settings, store: GraphStore, err: TextIO) -> frozenset[str]:
    # As the proxy: MCP sources exist with configured servers, or an admin key (which
    # lets servers be added through the API); without either, nothing is left out.
    if not (settings.mcp_servers or settings.admin_key):
        return frozenset()
    servers = await configured_servers(settings)
    policy = EgressPolicy.from_settings(settings.executor)
    mcp = McpSources(servers, settings.executor.call_timeout, store, policy=policy)
    with _quiet_connections():
        mcp.start()
        try:
            await mcp.settled()
            connected = set(mcp.connected())
        finally:
            await mcp.aclose()
    for connection in mcp.connections():
        if connection.name not in connected:
            why = connection.failure or "it did not connect"
            print(f"toolgraph: MCP server {connection.name} is left out: {why}", file=err)
    tools = await asyncio.to_thread(store.list_tools)
    return frozenset(
        tool.name for tool in tools if is_mcp_tool(tool) and tool.provenance.file not in connected
    )


@contextlib.contextmanager
def _quiet_connections() -> Iterator[None]:
    """The connections' log held back (tracebacks included): the command says why a
    server is left out in one line of its own."""
    logger = logging.getLogger("proxy.mcp.connection")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
