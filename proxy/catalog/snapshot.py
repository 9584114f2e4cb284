"""A restart is ready before the catalog's sync: served from the index snapshot.

Each full load leaves a snapshot of the in-process index in the data folder
(:mod:`retriever.snapshot`), and the load at start-up first serves the store's tools
that the snapshot holds unchanged, without opening Qdrant (importing its client and
reading a local collection cost seconds), with no plan memory yet; the full load
(packs, Qdrant sync, memory) then runs in the background and replaces it.

When the store has not been written since the snapshot (its version stamp is the one
the snapshot was taken at) and no MCP server's tools come and go, the snapshot is
served whole: its BM25 index and the gate's vectors with it, and the executor's tools
read from the store one by one when first called, so that no tool record is parsed
before readiness (:class:`~proxy.catalog.loaded.StoredTools`; 8.9 s over 46,661
ToolBench tools). Everything here blocks: it runs in the loader's worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from graph_store.models import Tool
from graph_store.store import GraphStore
from proxy.catalog.assembly import Assembler, gate_documents
from proxy.catalog.loaded import Catalog, LoadedCatalog, StoredTools
from proxy.config import Settings

if TYPE_CHECKING:  # loaded with the catalog, so that passthrough never imports them
    from retriever.embedder import Encoder
    from retriever.snapshot import Snapshot

log = logging.getLogger(__name__)


class Snapshots:
    """The data folder's index snapshot for ``settings``; ``available`` as the loader's."""

    def __init__(
        self,
        settings: Settings,
        assembler: Assembler,
        available: Callable[[Tool], bool] | None,
    ) -> None:
        self._settings = settings
        self._assembler = assembler
        self._available = available

    def load(self, store: GraphStore, encoder: Encoder) -> LoadedCatalog | None:
        """The store's tools that the index snapshot holds unchanged, without Qdrant;
        None without a snapshot, or with none of its rows still in the store."""
        from retriever.snapshot import read_snapshot, snapshot_key

        store.refresh()
        version = store.version()
        snapshot = read_snapshot(self._path(encoder))
        if snapshot is None:
            return None
        # Availability is a tool's (its MCP server connected or not): it needs the records.
        key = snapshot_key(version, self._settings.retriever)
        if self._available is None and snapshot.key == key:
            catalog = self._whole(store, snapshot, encoder)
            return LoadedCatalog(catalog, version, collection=None, saved=True)
        matched = self._matched(store, snapshot, encoder)
        if matched is None:
            return None
        return LoadedCatalog(matched, version, collection=None, saved=False)

    def save(self, encoder: Encoder, catalog: Catalog, version: str) -> bool:
        """Leave ``catalog``'s index (and its gate's vectors) for the next start; whether
        it was written."""
        from retriever.snapshot import GateVectors, save_snapshot, snapshot_key

        gate = catalog.gate
        vectors = None
        if gate is not None:
            view = gate.view
            vectors = GateVectors(
                gate.gate.encoder, gate.documents, view.vectors, list(view.words), list(view.names)
            )
        key = snapshot_key(version, self._settings.retriever)
        try:
            save_snapshot(self._path(encoder), catalog.planner.finder.index, key=key, gate=vectors)
        except OSError as exc:  # the next start syncs first; this one is served
            log.warning("the index snapshot could not be written: %s", exc)
            return False
        return True

    def _path(self, encoder: Encoder) -> Path:
        from retriever.snapshot import snapshot_path

        settings = self._settings
        return snapshot_path(settings.data_dir, settings.retriever.catalog, encoder.name)

    def _whole(self, store: GraphStore, snapshot: Snapshot, encoder: Encoder) -> Catalog:
        """Every row of a snapshot taken at the store's present version: the store's tools
        are the snapshot's, so no record is read, no document made, no BM25 built."""
        from retriever.snapshot import whole_index

        index = whole_index(snapshot, self._settings.retriever)
        tools = StoredTools(store, [doc.name for doc in index.documents])
        gate = None
        if self._settings.orchestrate.gate:
            known = snapshot.gate
            if known is not None and len(known.documents) == len(tools):
                gate = self._assembler.gate(known.documents, known)
            else:  # a snapshot without the gate's vectors: its documents need the records
                gate = self._assembler.gate(gate_documents(tools.values()))
        return self._assembler.catalog(store, index, tools, encoder, None, gate)

    def _matched(self, store: GraphStore, snapshot: Snapshot, encoder: Encoder) -> Catalog | None:
        """The rows of ``snapshot`` whose tool is in the store unchanged (read record by
        record): the store was written since, or MCP tools may be down."""
        from retriever.documents import catalog_documents
        from retriever.snapshot import load_snapshot

        tools = store.list_tools()
        if self._available is not None:
            tools = [tool for tool in tools if self._available(tool)]
        documents = catalog_documents(tools, self._settings.retriever)
        index = load_snapshot(snapshot, documents, self._settings.retriever)
        if index is None:
            return None
        held = {doc.id for doc in index.documents}
        tools = [tool for tool in tools if tool.id in held]
        return self._assembler.catalog_of(store, index, tools, encoder, None)
