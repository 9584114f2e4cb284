"""One server's listing written into the graph store, with the edges it brings.

The store holds what the server lists now: new and changed tools are written, tools
it no longer lists are deleted, and a tool whose name another source's tool holds
is left out (and logged). When anything changed, the schema edges that touch MCP
tools are made again by graph_store's rule pass (an output field of one tool that
fills another's input), under an origin of their own, so that a ``toolgraph graph
build --schema`` and a sync never delete each other's edges.

Blocking: run it in a worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from graph_store.edges.schema_deps import schema_edges
from graph_store.errors import InvalidItem
from graph_store.ingest.catalog import unique_tools
from graph_store.ingest.mcp import FORMAT, parse_mcp
from graph_store.models import Tool
from graph_store.store import GraphStore

log = logging.getLogger(__name__)

#: The origin of the schema edges that join MCP tools to the rest of the catalog.
EDGE_ORIGIN = "mcp_schema"


@dataclass
class SyncReport:
    written: int = 0
    deleted: int = 0
    edges: int = 0
    errors: list[InvalidItem] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.written or self.deleted)


def is_mcp_tool(tool: Tool, server: str | None = None) -> bool:
    provenance = tool.provenance
    return provenance.format == FORMAT and (server is None or provenance.file == server)


def sync_server(store: GraphStore, server: str, listing: Sequence[JsonValue]) -> SyncReport:
    """Make the store hold exactly ``server``'s ``listing``."""
    store.refresh()
    parsed = parse_mcp(server, listing)
    held = {tool.id: tool for tool in store.list_tools() if is_mcp_tool(tool, server)}
    others = {name: id_ for name, id_ in store.names().items() if id_ not in held}
    tools, clashes = unique_tools(parsed.tools, others)
    report = SyncReport(errors=parsed.errors + clashes)
    for problem in report.errors:
        log.warning("MCP server %s: %s: %s", server, problem.item, problem.problem)
    fresh = [tool for tool in tools if held.get(tool.id) != tool]
    gone = set(held) - {tool.id for tool in tools}
    if gone:
        report.deleted = store.delete_tools(gone)
    if fresh:
        store.upsert_tools(fresh)
        report.written = len(fresh)
    if report.changed:
        report.edges = _rebuild_edges(store)
    return report


def _rebuild_edges(store: GraphStore) -> int:
    tools = store.list_tools()
    mcp = {tool.id for tool in tools if is_mcp_tool(tool)}
    edges = [
        edge.model_copy(update={"origin": EDGE_ORIGIN})
        for edge in schema_edges(tools)
        if edge.src in mcp or edge.dst in mcp
    ]
    store.replace_edges(EDGE_ORIGIN, edges)
    return len(edges)
