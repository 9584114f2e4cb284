"""What the console shows of the catalog: searches by each retriever side by side, a
tool's page with its edges in the tool graph, and the graph's statistics.

No FastAPI here; the router turns these dicts into responses. Every read of the
graph store and every embedding runs in one hop to a thread per call, since both
block (the store may be Neo4j over the network).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Literal, get_args

from pydantic import JsonValue

from graph_store.models import ALL_KINDS, Direction, Tool
from graph_store.store import GraphStore, graph_stats
from proxy.catalog.loaded import Catalog
from proxy.catalog.service import CatalogService
from proxy.errors import NotFound
from retriever.index import Hit

Method = Literal["hybrid", "bm25", "dense"]
METHODS: tuple[Method, ...] = get_args(Method)
#: The edges a tool's page draws per direction (the heaviest; a hub has hundreds).
MAX_EDGES = 40


class CatalogView:
    def __init__(self, catalogs: CatalogService) -> None:
        self._catalogs = catalogs

    async def search(self, query: str, k: int) -> dict[str, JsonValue]:
        """The top ``k`` of ``query`` by each method: hybrid (what the planner uses),
        BM25 alone and dense alone, each hit with its score; the dense side reads the
        query's clauses as the planner's searches do (``retriever.clauses``)."""
        catalog = await self._catalogs.get()
        return await asyncio.to_thread(_search, catalog, query, k)

    async def tool(self, name: str) -> dict[str, JsonValue]:
        """One tool: its record, whether the executor may call it now, its edges."""
        catalog = await self._catalogs.get()
        return await asyncio.to_thread(_tool_page, catalog, name)

    async def stats(self) -> dict[str, JsonValue]:
        catalog = await self._catalogs.get()
        stats = await asyncio.to_thread(graph_stats, catalog.store)
        found: dict[str, JsonValue] = {
            k: v for k, v in dataclasses.asdict(stats).items() if k != "out_degree"
        }
        found["out_degree"] = {str(d): n for d, n in stats.out_degree.items()}
        return found


def _search(catalog: Catalog, query: str, k: int) -> dict[str, JsonValue]:
    planner = catalog.planner
    # The whole text's vector, and its clauses' rows when the planner's searches read them.
    rows = planner.finder.query(query, planner.encoder.encode([query])[0])
    index = planner.finder.index
    found: dict[str, JsonValue] = {"query": query}
    for method in METHODS:
        hits = index.search(rows, query, k, method=method)
        found[method] = [_hit(hit, catalog.tools.get(hit.name)) for hit in hits]
    return found


def _hit(hit: Hit, tool: Tool | None) -> JsonValue:
    return {
        "name": hit.name,
        "category": hit.category,
        "score": round(float(hit.score), 4),
        "description": tool.description if tool else "",
    }


def _tool_page(catalog: Catalog, name: str) -> dict[str, JsonValue]:
    tool = catalog.tools.get(name) or catalog.store.get_tool(name)
    if tool is None:
        raise NotFound(f"no tool {name!r} in the catalog", param="name", code="tool_not_found")
    return {
        "name": tool.name,
        "description": tool.description,
        "category": tool.category,
        "group": tool.group,
        "parameters": tool.parameters,
        "endpoint": tool.endpoint.model_dump(mode="json") if tool.endpoint else None,
        # the format and the item, not the path: the registry's listing keeps paths too
        "provenance": {"format": tool.provenance.format, "item": tool.provenance.item},
        "availability": tool.availability,
        "callable": tool.name in catalog.tools,
        "edges": _edges(catalog.store, tool),
    }


def _edges(store: GraphStore, tool: Tool) -> list[JsonValue]:
    found: list[JsonValue] = []
    directions: tuple[Direction, ...] = ("out", "in")
    for direction in directions:
        rows = store.edge_rows([tool.id], ALL_KINDS, direction)
        rows.sort(key=lambda row: (row[0].kind.rank, -row[0].weight, row[1].name))
        found += [
            {
                "direction": direction,
                "kind": edge.kind.value,
                "weight": round(edge.weight, 4),
                "resource": edge.resource,
                "origin": edge.origin,
                "tool": other.name,
                "category": other.category,
            }
            for edge, other in rows[:MAX_EDGES]
        ]
    return found
