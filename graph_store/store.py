"""One interface over the tool catalog and graph, whichever backend holds them.

:class:`GraphStore` is implemented by :class:`graph_store.embedded.InProcessStore` (the
embedded default, persisted under ``data_dir``) and by
:class:`graph_store.neo4j_store.Neo4jStore`; both pass the same tests. Ranking of
neighbours is done here, once, so that both backends answer identically.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from graph_store.models import (
    ALL_KINDS,
    Category,
    Direction,
    Edge,
    EdgeKind,
    Neighbor,
    Tool,
    ToolGroup,
    ToolRef,
)


class GraphStore(Protocol):
    """The catalog (tools, groups, categories) and the Tool→Tool graph.

    Every mutating call is one transaction: it is stored whole or not at all.
    """

    def upsert_tools(self, tools: Sequence[Tool]) -> None:
        """Insert or replace tools by id (names must stay unique)."""

    def delete_tools(self, ids: Collection[str]) -> int:
        """Remove tools and their edges; returns how many existed."""

    def get_tool(self, key: str) -> Tool | None:
        """A tool by id, name or alias."""

    def list_tools(self, category: str | None = None) -> list[Tool]:
        """Every tool (of a category), ordered by name."""

    def count_tools(self) -> int: ...

    def names(self) -> dict[str, str]:
        """Every tool's name, mapped to its id."""

    def groups(self) -> list[ToolGroup]:
        """Every group, ordered by id."""

    def categories(self) -> list[Category]:
        """Every category, ordered by name."""

    def group_of(self, tool_id: str) -> ToolGroup | None: ...

    def upsert_edges(self, edges: Sequence[Edge]) -> None:
        """Insert or replace edges by (src, dst, kind); both ends must exist."""

    def replace_edges(self, origin: str, edges: Sequence[Edge]) -> None:
        """Drop every edge of ``origin`` and store ``edges`` instead (a rebuild)."""

    def edges(self, kind: EdgeKind | None = None) -> list[Edge]:
        """Every edge (of a kind), ordered by (src, dst, kind)."""

    def set_availability(self, scores: Mapping[str, float]) -> None: ...

    def edge_rows(
        self, tool_ids: Collection[str], kinds: Collection[EdgeKind], direction: Direction
    ) -> list[tuple[Edge, ToolRef]]:
        """The raw edges leaving (or entering) ``tool_ids``, with the tool at the other end."""

    def clear(self) -> None: ...

    def version(self) -> str:
        """A stamp of the stored catalog and graph that changes with every write, made
        by this process or by any other sharing the store (workers, replicas)."""

    def refresh(self) -> None:
        """Take in what other processes wrote since this one last read or wrote."""

    def close(self) -> None: ...


def neighbors(
    store: GraphStore,
    tool_ids: Iterable[str],
    kinds: Collection[EdgeKind] = ALL_KINDS,
    *,
    category: str | None = None,
    direction: Direction = "out",
    limit: int | None = None,
) -> list[Neighbor]:
    """Tools one edge away from ``tool_ids``, best first.

    A tool reached several ways appears once, by its best edge: strong before weak
    before sequential, then the heavier edge, then by name. The start tools themselves
    are left out.
    """
    start = set(tool_ids)
    best: dict[str, tuple[_Rank, Edge, ToolRef]] = {}
    outgoing = direction == "out"
    for edge, other in store.edge_rows(start, kinds, direction):
        if other.id in start or (category is not None and other.category != category):
            continue
        rank = (edge.kind.rank, -edge.weight, other.name, edge.src if outgoing else edge.dst)
        held = best.get(other.id)
        if held is None or rank < held[0]:
            best[other.id] = (rank, edge, other)
    # Only the rows returned become objects: a hub's hundreds of edges stay tuples.
    rows = best.values()
    chosen = sorted(rows, key=_first) if limit is None else heapq.nsmallest(limit, rows, key=_first)
    return [
        Neighbor(
            tool_id=other.id,
            name=other.name,
            category=other.category,
            kind=edge.kind,
            weight=edge.weight,
            count=edge.count,
            resource=edge.resource,
            via=rank[3],
        )
        for rank, edge, other in chosen
    ]


_Rank = tuple[int, float, str, str]


def _first(row: tuple[_Rank, Edge, ToolRef]) -> _Rank:
    return row[0]


def expand(
    store: GraphStore,
    tool_ids: Iterable[str],
    hops: int,
    kinds: Collection[EdgeKind] = ALL_KINDS,
    *,
    category: str | None = None,
    direction: Direction = "out",
) -> dict[str, int]:
    """Every tool within ``hops`` edges of ``tool_ids``, with its distance (starts are 0)."""
    distance = {tool: 0 for tool in tool_ids}
    frontier = list(distance)
    for hop in range(1, hops + 1):
        reached = neighbors(store, frontier, kinds, category=category, direction=direction)
        frontier = [n.tool_id for n in reached if n.tool_id not in distance]
        distance.update(dict.fromkeys(frontier, hop))
        if not frontier:
            break
    return distance


@dataclass(frozen=True)
class GraphStats:
    tools: int
    groups: int
    categories: int
    edges: dict[str, int]
    out_degree: dict[int, int] = field(default_factory=dict)
    components: int = 0
    largest_component: int = 0


def graph_stats(store: GraphStore) -> GraphStats:
    """Counts by node and edge type, out-degree histogram, weakly connected components."""
    tools = list(store.names().values())
    all_edges = store.edges()
    by_kind = Counter(edge.kind.value for edge in all_edges)
    out = Counter(edge.src for edge in all_edges)
    parent = {tool: tool for tool in tools}

    def root(node: str) -> str:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for edge in all_edges:
        parent[root(edge.src)] = root(edge.dst)
    sizes = Counter(root(tool) for tool in tools)
    return GraphStats(
        tools=len(tools),
        groups=len(store.groups()),
        categories=len(store.categories()),
        edges={kind.value: by_kind.get(kind.value, 0) for kind in EdgeKind},
        out_degree=dict(sorted(Counter(out.get(tool, 0) for tool in tools).items())),
        components=len(sizes),
        largest_component=max(sizes.values(), default=0),
    )


def open_store(data_dir: Path, neo4j_uri: str | None = None) -> GraphStore:
    """Neo4j when ``neo4j_uri`` is given, else the in-process store under ``data_dir``."""
    if neo4j_uri:
        from graph_store.neo4j_store import Neo4jStore

        return Neo4jStore.from_uri(neo4j_uri)
    from graph_store.embedded import InProcessStore

    return InProcessStore.open(data_dir / "graph")
