"""What a load gives: the catalog a request plans over, and the loaded state around it.

Both are frozen: a load runs in a worker thread and hands back one
:class:`LoadedCatalog`, which the service installs in a single assignment, so a
reader on the event loop sees the previous load whole or the new one whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_store.models import Tool
from graph_store.store import GraphStore

if TYPE_CHECKING:  # loaded with the catalog, so that passthrough never imports them
    from proxy.plan.memory import PlanMemory
    from proxy.plan.planner import RequestPlanner
    from retriever.gate.catalog import CatalogGate
    from retriever.qdrant_store import QdrantCatalog


class StoredTools(Mapping[str, Tool]):
    """The catalog's tools by name, each read from the store the first time it is asked
    for: a restart served from the index snapshot parses no tool record up front. A read
    blocks (a Bolt round trip behind Neo4j): callers ask off the event loop
    (:func:`proxy.execute.service.plan_tools`)."""

    def __init__(self, store: GraphStore, names: Iterable[str]) -> None:
        self._store = store
        self._names = dict.fromkeys(names)
        self._read: dict[str, Tool] = {}

    def __getitem__(self, name: str) -> Tool:
        tool = self._read.get(name)
        if tool is None:
            if name not in self._names:
                raise KeyError(name)
            tool = self._store.get_tool(name)
            if tool is None:  # deleted since: the reload that write triggers drops it
                raise KeyError(name)
            self._read[name] = tool
        return tool

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


@dataclass(frozen=True, slots=True)
class Catalog:
    """What a request plans over and the executor may call."""

    store: GraphStore
    planner: RequestPlanner
    tools: Mapping[str, Tool]  # by name: what the executor may call
    gate: CatalogGate | None = None  # "does any tool serve this?"; None: orchestrate.gate off

    @property
    def memory(self) -> PlanMemory | None:
        return self.planner.memory


@dataclass(frozen=True, slots=True)
class LoadedCatalog:
    """One load's result. ``collection``: the catalog's Qdrant collection, None for a
    catalog served from the index snapshot (Qdrant not opened yet, no plan memory);
    ``saved``: whether the snapshot on disk is this catalog's index."""

    catalog: Catalog
    version: str  # the store's version the catalog was read at
    collection: QdrantCatalog | None
    saved: bool
