"""The packs' tools written into the graph store, as every catalog load does first."""

from __future__ import annotations

import logging

from graph_store.models import EdgeKind, Tool
from graph_store.store import GraphStore
from proxy.config import Settings
from proxy.tools.builtin import BUILTIN_SCHEME
from proxy.tools.packs import database as database_pack
from proxy.tools.packs.knowledge_graph.catalog import (
    EDGE_ORIGIN,
    knowledge_graph_edges,
    knowledge_graph_tools,
)
from proxy.tools.packs.math.catalog import builtin_tools

log = logging.getLogger(__name__)

#: Where the packs' records say they come from: the math pack's ``builtin/<group>.json``,
#: the configured packs' ``packs/<group>.json`` (proxy/tools/packs/configured.py).
PACK_FILES = ("builtin/", "packs/")


def seed_packs(store: GraphStore, settings: Settings) -> None:
    """Write the packs' tools the settings give (built-in, databases, knowledge graphs)
    that are missing or have changed, and the knowledge-graph pack's preconditions, into
    ``store``, and delete the tools of packs the settings no longer give: what every
    catalog load does first (``toolgraph catalog`` too). Blocks."""
    tools = builtin_tools() if settings.orchestrate.builtin_tools else []
    tools += database_pack.configured_tools(settings.packs.database)
    tools += knowledge_graph_tools(settings.packs.knowledge_graph)
    retire_packs(store, {tool.name for tool in tools})
    missing = [tool for tool in tools if store.get_tool(tool.name) != tool]
    if missing:
        store.upsert_tools(missing)
        log.info("pack tools written to the catalog: %s", ", ".join(t.name for t in missing))
    edges = knowledge_graph_edges(settings.packs.knowledge_graph)
    if not edges:
        return
    held = {e.key for e in store.edges(EdgeKind.STRONG_DEP) if e.origin == EDGE_ORIGIN}
    if held != {edge.key for edge in edges}:
        store.replace_edges(EDGE_ORIGIN, edges)


def retire_packs(store: GraphStore, configured: set[str]) -> None:
    """Delete from ``store`` the pack tools not named in ``configured`` (a database or a
    graph taken out of the settings, the built-in tools turned off); never a tool the
    registry, an import or an MCP server wrote. Their edges go with them."""
    gone = [t for t in store.list_tools() if pack_owned(t) and t.name not in configured]
    if gone:
        store.delete_tools([tool.id for tool in gone])
        log.info("pack tools no longer configured, deleted: %s", ", ".join(t.name for t in gone))


def pack_owned(tool: Tool) -> bool:
    """Whether a pack wrote ``tool``: an in-process endpoint and a pack's source file."""
    url = tool.endpoint.url if tool.endpoint else ""
    return url.startswith(BUILTIN_SCHEME) and tool.provenance.file.startswith(PACK_FILES)
