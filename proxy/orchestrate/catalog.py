"""The catalog orchestrate mode plans over: graph store, index, planner, memory.

Loaded once, on the first orchestrate request (or at start-up with
``orchestrate.preload``), in a worker thread: the embedding model comes from
select mode's service (one copy in memory), the built-in tool pack is written into
the graph store when it is missing or has changed, and the Qdrant collection is
brought in step with the store (only changed tools are embedded) before the
in-process index is loaded from it. The long-term plan memory uses the same
Qdrant client (local mode allows one client per folder), and every call to it runs
on the client's own thread: local mode is not thread-safe, and the memory is read
and written while requests run. Readiness searches both collections once
(:meth:`CatalogService.check`), so a store that no longer works takes the process
out of rotation.

The tool registry calls :meth:`CatalogService.changed` after every write; the next
request re-syncs the index first.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_store.models import Tool
from graph_store.store import GraphStore, open_store
from proxy.config import Settings
from proxy.errors import ToolgraphError
from proxy.select.service import SelectService
from proxy.tools.catalog import builtin_tools

if TYPE_CHECKING:  # loaded with the catalog, so that passthrough never imports them
    from proxy.plan.memory import PlanMemory
    from proxy.plan.planner import RequestPlanner
    from retriever.embedder import Encoder
    from retriever.owned_client import OwnedClient
    from retriever.qdrant_store import QdrantCatalog

log = logging.getLogger(__name__)


class CatalogUnavailable(ToolgraphError):
    status = 503
    type = "server_error"
    code = "catalog_unavailable"


@dataclass(frozen=True, slots=True)
class Catalog:
    store: GraphStore
    planner: RequestPlanner
    tools: dict[str, Tool]  # by name: what the executor may call

    @property
    def memory(self) -> PlanMemory | None:
        return self.planner.memory


class CatalogService:
    """``store``: the graph store, when the app has opened it already (for the registry);
    else it is opened with the first load, so that start-up never waits on Neo4j.
    The service closes it either way."""

    def __init__(
        self, settings: Settings, select: SelectService, store: GraphStore | None = None
    ) -> None:
        self._settings = settings
        self.store = store
        self._select = select
        self._catalog: Catalog | None = None
        self._stale = True
        self._lock = asyncio.Lock()
        self._client: OwnedClient | None = None  # opened by the first load
        self._index: QdrantCatalog | None = None
        self._memory: PlanMemory | None = None

    def changed(self) -> None:
        """The store's tools changed: re-sync the index before the next plan."""
        self._stale = True

    async def get(self) -> Catalog:
        if self._catalog is not None and not self._stale:
            return self._catalog
        encoder = await self._select.encoder()
        async with self._lock:
            if self._catalog is None or self._stale:
                try:
                    self._catalog = await asyncio.to_thread(self._load, encoder)
                except Exception as exc:  # Qdrant, Neo4j or the disk: tried again next time
                    log.warning("the catalog could not be loaded", exc_info=True)
                    raise CatalogUnavailable(
                        f"the tool catalog could not be loaded: {type(exc).__name__}: {exc}"
                    ) from None
                self._stale = False
        return self._catalog

    async def check(self) -> None:
        """Readiness: one search of the catalog's collection and of the plan memory's,
        once loaded (before, the first request loads them); raises when one fails."""
        client, index = self._client, self._index
        if self._catalog is None or client is None or index is None:
            return
        from retriever.qdrant_store import probe  # loaded with the catalog: no import here

        await client.run(lambda c: probe(c, index.collection, index.dim))
        if self._memory is not None:
            await self._memory.probe()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self.store is not None:
            self.store.close()

    def _load(self, encoder: Encoder) -> Catalog:
        from proxy.plan.candidates import CandidateFinder, weights_from
        from proxy.plan.memory import PlanMemory
        from proxy.plan.planner import RequestPlanner
        from retriever.catalog import build_index, load_index
        from retriever.qdrant_store import QdrantCatalog, collection_name, open_client

        settings = self._settings
        if self.store is None:
            self.store = open_store(settings)
        store = self.store
        if settings.orchestrate.builtin_tools:
            self._seed_builtin_tools(store)
        if self._client is None:
            self._client = open_client(settings.data_dir, settings.qdrant_url)
        name = collection_name(settings.retriever.catalog, encoder.name)
        qdrant = self._index = QdrantCatalog(self._client, name, encoder.dim)
        tools = store.list_tools()
        report = build_index(tools, encoder, qdrant, settings.retriever, progress=False)
        log.info("catalog index: %s", report.summary())
        index = load_index(qdrant, settings.retriever)
        if self._memory is None:
            memory = PlanMemory(
                self._client, settings.planner.memory_collection, encoder.dim, settings.secrets()
            )
            memory.create()
            self._memory = memory
        planner = settings.planner
        finder = CandidateFinder(self.store, index, weights_from(planner), mode=planner.graph_mode)
        return Catalog(
            self.store,
            RequestPlanner(finder, encoder, planner, self._memory),
            {tool.name: tool for tool in tools},
        )

    @staticmethod
    def _seed_builtin_tools(store: GraphStore) -> None:
        missing = [tool for tool in builtin_tools() if store.get_tool(tool.name) != tool]
        if missing:
            store.upsert_tools(missing)
            log.info(
                "built-in tools written to the catalog: %s", ", ".join(t.name for t in missing)
            )
