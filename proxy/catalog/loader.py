"""The catalog's loads, in a worker thread: each returns one immutable catalog.

A full load writes the built-in tool pack and the database and knowledge-graph packs'
tools into the graph store when missing or changed, brings the Qdrant collection in
step with the store (only changed tools are embedded) and loads the in-process index
from it. The long-term plan memory uses the same Qdrant client, and every call to it
runs on the client's own thread: local mode is not thread-safe, and the memory is
read and written while requests run. Local mode allows one client per folder, so
each worker process claims a folder of its own (``qdrant``, ``qdrant-1``…); a folder
met empty is filled from the embeddings cache ``toolgraph index build`` leaves, not
by embedding again.

The loader keeps nothing a reader on the event loop looks at: what it opens (the
store, the Qdrant client) and what it loads (:class:`~proxy.catalog.loaded.LoadedCatalog`)
it returns, and the service installs each in one assignment.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_store.models import Tool
from graph_store.store import GraphStore, open_store
from proxy.catalog.assembly import Assembler
from proxy.catalog.loaded import LoadedCatalog
from proxy.catalog.packs import seed_packs
from proxy.catalog.snapshot import Snapshots
from proxy.config import Settings

if TYPE_CHECKING:  # loaded with the catalog, so that passthrough never imports them
    from proxy.learning.service import Learner
    from proxy.plan.memory import PlanMemory
    from retriever.embedder import Encoder
    from retriever.index import ToolIndex
    from retriever.owned_client import OwnedClient
    from retriever.qdrant_store import LocalFolder, SyncReport

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class VectorStore:
    """The Qdrant client the catalog's collection and the plan memory share, opened once
    per process; ``folder``: the local-mode folder it holds (None with ``qdrant_url``)."""

    client: OwnedClient
    folder: LocalFolder | None
    memory: PlanMemory

    def close(self) -> None:
        """Finish the client's queued writes and let the folder go. Blocks."""
        self.client.close()
        if self.folder is not None:
            self.folder.release()


class CatalogLoader:
    """``available``: whether a stored tool can run now (an MCP server's tools cannot
    while it is down); the others are left out of the index and of what the executor
    may call. Every method blocks: the service calls them in a worker thread."""

    def __init__(
        self,
        settings: Settings,
        available: Callable[[Tool], bool] | None,
        learner: Learner | None = None,
    ) -> None:
        self._settings = settings
        self._available = available
        self._assembler = Assembler(settings, learner)
        self._snapshots = Snapshots(settings, self._assembler, available)

    def open_store(self) -> GraphStore:
        return open_store(self._settings.data_dir, self._settings.neo4j_uri)

    def open_vectors(self, encoder: Encoder) -> VectorStore:
        """The Qdrant client and the plan memory's collection, created when missing."""
        from proxy.plan.memory import PlanMemory

        settings = self._settings
        client, folder = self._open_client()
        try:
            collection = settings.planner.memory_collection
            memory = PlanMemory(client, collection, encoder.dim, settings.secrets())
            memory.create()
        except BaseException:
            client.close()
            if folder is not None:
                folder.release()
            raise
        return VectorStore(client, folder, memory)

    def load_snapshot(self, store: GraphStore, encoder: Encoder) -> LoadedCatalog | None:
        """The catalog the index snapshot serves before the first full load, if any."""
        return self._snapshots.load(store, encoder)

    def load(
        self,
        store: GraphStore,
        vectors: VectorStore,
        encoder: Encoder,
        served: LoadedCatalog | None,
    ) -> LoadedCatalog:
        """The catalog as the store holds it now; ``served``: the catalog served so far,
        whose index is kept when the sync changed nothing."""
        from retriever.catalog import build_index, load_index
        from retriever.qdrant_store import QdrantCatalog, collection_name

        settings = self._settings
        store.refresh()
        seed_packs(store, settings)
        # Read before the tools: a write landing in between leaves a stamp that differs
        # from the store's, so the next check loads again rather than missing it.
        version = store.version()
        name = collection_name(settings.retriever.catalog, encoder.name)
        qdrant = QdrantCatalog(vectors.client, name, encoder.dim)
        cache = None if qdrant.exists() else settings.data_dir / "embeddings"
        tools = store.list_tools()
        if self._available is not None:
            tools = [tool for tool in tools if self._available(tool)]
        report = build_index(
            tools, encoder, qdrant, settings.retriever, cache_dir=cache, progress=False
        )
        log.info("catalog index: %s", report.summary())
        index = self._served_index(served, report, tools)
        fresh = index is None
        if index is None:
            index = load_index(qdrant, settings.retriever)
        catalog = self._assembler.catalog_of(store, index, tools, encoder, vectors.memory)
        saved = served is not None and served.saved and not fresh
        if not saved:
            saved = self._snapshots.save(encoder, catalog, version)
        return LoadedCatalog(catalog, version, qdrant, saved)

    def _served_index(
        self, served: LoadedCatalog | None, report: SyncReport, tools: list[Tool]
    ) -> ToolIndex | None:
        """The served catalog's index when the sync changed nothing and it holds exactly
        ``tools`` as they are: reading every vector back out of Qdrant and building BM25
        and the int8 copy again (seconds over 47k tools) would give the same rows."""
        from retriever.documents import catalog_documents

        if served is None or report.changed:
            return None
        index = served.catalog.planner.finder.index
        if (index.extra is not None) != self._settings.retriever.expand_documents:
            return None  # served from a snapshot without the question rows, or with them
        held = {(doc.id, doc.digest) for doc in index.documents}
        wanted = catalog_documents(tools, self._settings.retriever)
        same = len(held) == len(wanted) and held == {(doc.id, doc.digest) for doc in wanted}
        return index if same else None

    def _open_client(self) -> tuple[OwnedClient, LocalFolder | None]:
        from qdrant_client import QdrantClient

        from retriever.owned_client import OwnedClient
        from retriever.qdrant_store import claim_local_folder, open_client

        settings = self._settings
        if settings.qdrant_url:
            return open_client(settings.data_dir, settings.qdrant_url), None
        folder = claim_local_folder(settings.data_dir)
        log.info("the catalog's vectors and plan memory are in %s", folder.path)
        try:
            return OwnedClient(QdrantClient(path=str(folder.path))), folder
        except BaseException:
            folder.release()
            raise
