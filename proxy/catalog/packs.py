"""The packs' tools written into the graph store, as every catalog load does first."""

from __future__ import annotations

import logging

from graph_store.models import EdgeKind
from graph_store.store import GraphStore
from proxy.config import Settings
from proxy.tools.packs import database as database_pack
from proxy.tools.packs.knowledge_graph.catalog import (
    EDGE_ORIGIN,
    knowledge_graph_edges,
    knowledge_graph_tools,
)
from proxy.tools.packs.math.catalog import builtin_tools

log = logging.getLogger(__name__)


def seed_packs(store: GraphStore, settings: Settings) -> None:
    """Write the packs' tools the settings give (built-in, databases, knowledge graphs)
    that are missing or have changed, and the knowledge-graph pack's preconditions, into
    ``store``: what every catalog load does first (``toolgraph catalog`` too). Blocks."""
    tools = builtin_tools() if settings.orchestrate.builtin_tools else []
    tools += database_pack.configured_tools(settings.packs.database)
    tools += knowledge_graph_tools(settings.packs.knowledge_graph)
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
