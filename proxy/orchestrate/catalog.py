"""The catalog orchestrate mode plans over: graph store, index, planner, memory.

Loaded once, in a worker thread: in the background from start-up with
``orchestrate.preload`` (the default; a request that comes first waits for that load,
and readiness says ``loading`` meanwhile), else by the first orchestrate request. The
embedding model comes from
select mode's service (one copy in memory), the built-in tool pack and the
database pack's tools are written into the graph store when missing or changed,
and the Qdrant collection is brought in step with the store (only changed tools
are embedded) before the in-process index is loaded from it, and the no-tool
gate embeds the tools it weighs a request against (kept in the data folder's
embeddings cache, so a restart embeds nothing). The gate and the planner read the
request through one memory of recent vectors (:mod:`retriever.recent`): a question
costs one forward pass, not one for the gate, one for the plan and one for the plan
memory. The long-term plan memory uses the same
Qdrant client, and every call to it runs on the client's own thread: local mode is
not thread-safe, and the memory is read and written while requests run. Readiness
counts both collections (:meth:`CatalogService.check`), so a store that no
longer works takes the process out of rotation. Local mode allows one client per
folder, so each worker process claims a folder of its own (``qdrant``,
``qdrant-1``…); a folder met empty is filled from the embeddings cache ``toolgraph
index build`` leaves, not by embedding again.

The catalog is loaded again when the store's tools changed: at once after a write
through this process's registry (:meth:`CatalogService.changed`) or a notice from
another process, and at the latest when a request finds the store's version stamp
moved (checked at most every ``orchestrate.catalog_check_interval`` seconds), which
covers writes by other workers and replicas whose notice was lost.

A restart is ready before that sync: each full load leaves a snapshot of the
in-process index in the data folder (:mod:`retriever.snapshot`), and the load at
start-up first serves the store's tools that the snapshot holds unchanged, without
opening Qdrant (importing its client and reading a local collection cost seconds),
with no plan memory yet; the full load (packs, Qdrant sync, memory) then runs in the
background and replaces it. Readiness says ``loading`` until one of the two is
served; ``/readyz`` shows the sync's state beside it (:attr:`CatalogService.sync`).
When the store has not been written since the snapshot (its version stamp is the one
the snapshot was taken at) and no MCP server's tools come and go, the snapshot is
served whole: its BM25 index and the gate's vectors with it, and the executor's tools
read from the store one by one when first called, so that no tool record is parsed
before readiness (:class:`StoredTools`; 8.9 s over 46,661 ToolBench tools).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_store.errors import StoreUnavailable
from graph_store.models import EdgeKind, Tool
from graph_store.store import GraphStore, open_store
from proxy.config import Settings
from proxy.errors import ToolgraphError
from proxy.select.service import SelectService
from proxy.tools.packs.database.catalog import database_tools
from proxy.tools.packs.knowledge_graph.catalog import (
    EDGE_ORIGIN,
    knowledge_graph_edges,
    knowledge_graph_tools,
)
from proxy.tools.packs.math.catalog import builtin_tools

if TYPE_CHECKING:  # loaded with the catalog, so that passthrough never imports them
    from proxy.plan.memory import PlanMemory
    from proxy.plan.planner import RequestPlanner
    from retriever.embedder import Encoder, Vectors
    from retriever.gate.catalog import CatalogGate
    from retriever.index import ToolIndex
    from retriever.owned_client import OwnedClient
    from retriever.qdrant_store import LocalFolder, QdrantCatalog, SyncReport
    from retriever.snapshot import GateVectors, Snapshot

log = logging.getLogger(__name__)


class CatalogUnavailable(ToolgraphError):
    status = 503
    type = "server_error"
    code = "catalog_unavailable"


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
    store: GraphStore
    planner: RequestPlanner
    tools: Mapping[str, Tool]  # by name: what the executor may call
    gate: CatalogGate | None = None  # "does any tool serve this?"; None: orchestrate.gate off

    @property
    def memory(self) -> PlanMemory | None:
        return self.planner.memory


class CatalogService:
    """``store``: the graph store, when the app has opened it already (for the registry);
    else it is opened with the first load, so that start-up never waits on Neo4j.
    The service closes it either way. ``available``: whether a stored tool can run now
    (an MCP server's tools cannot while it is down); the others are left out of the
    index and of what the executor may call."""

    def __init__(
        self,
        settings: Settings,
        select: SelectService,
        store: GraphStore | None = None,
        available: Callable[[Tool], bool] | None = None,
    ) -> None:
        self._settings = settings
        self.store = store
        self._available = available
        self._select = select
        self._catalog: Catalog | None = None
        self._stale = True
        self._version = ""  # the store's version the catalog was loaded at
        self._checked = 0.0  # when a request last compared it with the store's
        self._lock = asyncio.Lock()
        self._client: OwnedClient | None = None  # opened by the first load
        self._folder: LocalFolder | None = None  # the local-mode folder it holds
        self._index: QdrantCatalog | None = None
        self._memory: PlanMemory | None = None
        self._gate_vectors: dict[str, Vectors] = {}  # the gate's tool vectors, kept over reloads
        self._snapshot_current = False  # whether the snapshot on disk is the served catalog
        self._preloading: asyncio.Task[None] | None = None
        self._preload_failure: str | None = None  # why the load at start-up failed
        #: Set once a catalog is served (from the snapshot or the full load), and once
        #: the load at start-up has ended, either way.
        self.served = asyncio.Event()
        self.synced = asyncio.Event()

    def preload(self) -> None:
        """Start loading the catalog, and with it the embedding model, in the background.
        A request that comes first waits for it: it takes the same locks."""
        self._preloading = asyncio.create_task(self._preload())

    @property
    def loading(self) -> bool:
        """Whether the background load is still running with no catalog served yet."""
        running = self._preloading is not None and not self._preloading.done()
        return running and self._catalog is None

    @property
    def sync(self) -> str:
        """The start-up sync in a word: ``running``, ``done``, ``failed`` or ``off``."""
        if self._preloading is None:
            return "off"
        if not self._preloading.done():
            return "running"
        return "failed" if self._preload_failure is not None else "done"

    async def settle(self) -> None:
        """Wait for the background load to end: its thread cannot be stopped, and the
        stores must not close under it (at shutdown)."""
        if self._preloading is not None:
            await self._preloading

    async def _preload(self) -> None:
        started = time.monotonic()
        try:
            await self._serve_snapshot(started)
            catalog = await self._sync()
        except ToolgraphError as exc:  # readiness says so; the next request tries again
            self._preload_failure = exc.message
            log.warning("the catalog could not be loaded at start-up: %s", exc.message)
            return
        except Exception as exc:  # a task's outermost edge: nobody else would see it
            self._preload_failure = f"{type(exc).__name__}: {exc}"
            log.exception("the catalog could not be loaded at start-up")
            return
        finally:
            self.served.set()
            self.synced.set()
        seconds = time.monotonic() - started
        log.info("catalog ready: %d tools, loaded in %.1f s", len(catalog.tools), seconds)

    async def _serve_snapshot(self, started: float) -> None:
        """Serve the tools the index snapshot holds unchanged, when there is one."""
        encoder = await self._select.encoder()
        try:
            found = await asyncio.to_thread(self._load_snapshot, encoder)
        except (StoreUnavailable, OSError) as exc:  # the full load meets it and says so
            log.warning("no catalog from the index snapshot: %s", exc)
            return
        if found is None:
            return
        async with self._lock:
            if self._catalog is None:
                self._catalog, self._version = found
                self._stale, self._checked = False, time.monotonic()
        self.served.set()
        seconds = time.monotonic() - started
        tools = len(found[0].tools)
        log.info("catalog served from the index snapshot: %d tools in %.1f s", tools, seconds)

    async def _sync(self) -> Catalog:
        """The full load, whether or not a catalog is served already."""
        encoder = await self._select.encoder()
        async with self._lock:
            self._stale = False
            return await self._reload(encoder)

    def changed(self) -> None:
        """The store's tools changed: re-sync the index before the next plan."""
        self._stale = True

    async def get(self) -> Catalog:
        catalog = self._catalog
        if catalog is not None and not self._stale and not await self._store_moved():
            return catalog
        encoder = await self._select.encoder()
        async with self._lock:
            catalog = self._catalog
            if catalog is None or self._stale:
                self._stale = False  # a change noticed while loading marks it again
                catalog = await self._reload(encoder)
        return catalog

    async def _reload(self, encoder: Encoder) -> Catalog:
        try:
            catalog, self._version = await asyncio.to_thread(self._load, encoder)
        except Exception as exc:  # Qdrant, Neo4j or the disk: tried again next time
            self._stale = True
            log.warning("the catalog could not be loaded", exc_info=True)
            raise CatalogUnavailable(
                f"the tool catalog could not be loaded: {type(exc).__name__}: {exc}"
            ) from None
        self._catalog, self._checked = catalog, time.monotonic()  # as fresh as a check
        return catalog

    async def _store_moved(self) -> bool:
        """Whether another process wrote the store since the catalog was loaded; asked
        of the store at most once per interval, by one request."""
        now = time.monotonic()
        if self.store is None or now - self._checked < self._interval:
            return False
        self._checked = now
        try:
            version = await asyncio.to_thread(self.store.version)
        except (StoreUnavailable, OSError) as exc:  # planning meets it too, and says so
            log.warning("the catalog's version could not be read: %s", exc)
            return False
        if version != self._version:
            self._stale = True
        return self._stale

    @property
    def _interval(self) -> float:
        return self._settings.orchestrate.catalog_check_interval

    async def check(self) -> None:
        """Readiness: a count of the catalog's collection and of the plan memory's,
        once loaded (before, the first request loads them, unless the load at start-up
        failed); raises when one fails."""
        client, index = self._client, self._index
        if self._catalog is None or client is None or index is None:
            if self._preload_failure is not None:
                raise CatalogUnavailable(self._preload_failure)
            return
        from retriever.qdrant_store import probe  # loaded with the catalog: no import here

        await client.run(lambda c: probe(c, index.collection))
        if self._memory is not None:
            await self._memory.probe()

    async def aclose(self) -> None:
        """:meth:`close` in a worker thread: the Qdrant client finishes its queued
        writes and Neo4j's driver says goodbye over the network."""
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._folder is not None:
            self._folder.release()
        if self.store is not None:
            self.store.close()

    def _load(self, encoder: Encoder) -> tuple[Catalog, str]:
        """The catalog as the store holds it now, and the store's version it was read at."""
        from proxy.plan.memory import PlanMemory
        from retriever.catalog import build_index, load_index
        from retriever.qdrant_store import QdrantCatalog, collection_name

        settings = self._settings
        if self.store is None:
            self.store = open_store(settings.data_dir, settings.neo4j_uri)
        store = self.store
        store.refresh()
        seed_packs(store, settings)
        # Read before the tools: a write landing in between leaves a stamp that differs
        # from the store's, so the next check loads again rather than missing it.
        version = store.version()
        if self._client is None:
            self._client = self._open_client()
        name = collection_name(settings.retriever.catalog, encoder.name)
        qdrant = self._index = QdrantCatalog(self._client, name, encoder.dim)
        cache = None if qdrant.exists() else settings.data_dir / "embeddings"
        tools = store.list_tools()
        if self._available is not None:
            tools = [tool for tool in tools if self._available(tool)]
        report = build_index(
            tools, encoder, qdrant, settings.retriever, cache_dir=cache, progress=False
        )
        log.info("catalog index: %s", report.summary())
        index = self._served_index(report, tools)
        fresh = index is None
        if index is None:
            index = load_index(qdrant, settings.retriever)
        if self._memory is None:
            memory = PlanMemory(
                self._client, settings.planner.memory_collection, encoder.dim, settings.secrets()
            )
            memory.create()
            self._memory = memory
        catalog = self._catalog_of(store, index, tools, encoder, self._memory)
        if fresh or not self._snapshot_current:
            self._save_snapshot(encoder, catalog, version)
        return catalog, version

    def _served_index(self, report: SyncReport, tools: list[Tool]) -> ToolIndex | None:
        """The served catalog's index when the sync changed nothing and it holds exactly
        ``tools`` as they are: reading every vector back out of Qdrant and building BM25
        and the int8 copy again (seconds over 47k tools) would give the same rows."""
        from retriever.documents import catalog_documents

        served = self._catalog
        if served is None or report.added or report.updated or report.removed:
            return None
        index = served.planner.finder.index
        held = {(doc.id, doc.digest) for doc in index.documents}
        wanted = catalog_documents(tools, self._settings.retriever)
        same = len(held) == len(wanted) and held == {(doc.id, doc.digest) for doc in wanted}
        return index if same else None

    def _load_snapshot(self, encoder: Encoder) -> tuple[Catalog, str] | None:
        """The store's tools that the index snapshot holds unchanged, without Qdrant."""
        from retriever.snapshot import read_snapshot, snapshot_key, snapshot_path

        settings = self._settings
        if self.store is None:
            self.store = open_store(settings.data_dir, settings.neo4j_uri)
        store = self.store
        store.refresh()
        version = store.version()
        path = snapshot_path(settings.data_dir, settings.retriever.catalog, encoder.name)
        snapshot = read_snapshot(path)
        if snapshot is None:
            return None
        # Availability is a tool's (its MCP server connected or not): it needs the records.
        if self._available is None and snapshot.key == snapshot_key(version, settings.retriever):
            catalog = self._whole_snapshot(store, snapshot, encoder)
            self._snapshot_current = True
            return catalog, version
        return self._matched_snapshot(store, snapshot, encoder, version)

    def _whole_snapshot(self, store: GraphStore, snapshot: Snapshot, encoder: Encoder) -> Catalog:
        """Every row of a snapshot taken at the store's present version: the store's tools
        are the snapshot's, so no record is read, no document made, no BM25 built."""
        from retriever.snapshot import whole_index

        index = whole_index(snapshot, self._settings.retriever)
        names = [doc.name for doc in index.documents]
        gate = None
        if self._settings.orchestrate.gate:
            if snapshot.gate is not None and len(snapshot.gate.documents) == len(names):
                gate = self._gate(snapshot.gate.documents, snapshot.gate)
            else:  # a snapshot without the gate's vectors: its documents need the records
                gate = self._gate(self._gate_documents(StoredTools(store, names).values()))
        return self._assemble(store, index, StoredTools(store, names), encoder, None, gate)

    def _matched_snapshot(
        self, store: GraphStore, snapshot: Snapshot, encoder: Encoder, version: str
    ) -> tuple[Catalog, str] | None:
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
        return self._catalog_of(store, index, tools, encoder, None), version

    def _save_snapshot(self, encoder: Encoder, catalog: Catalog, version: str) -> None:
        from retriever.snapshot import GateVectors, save_snapshot, snapshot_key, snapshot_path

        settings = self._settings
        path = snapshot_path(settings.data_dir, settings.retriever.catalog, encoder.name)
        gate = catalog.gate
        vectors = None
        if gate is not None:
            view = gate.view
            vectors = GateVectors(
                gate.gate.encoder, gate.documents, view.vectors, list(view.words), list(view.names)
            )
        key = snapshot_key(version, settings.retriever)
        try:
            save_snapshot(path, catalog.planner.finder.index, key=key, gate=vectors)
        except OSError as exc:  # the next start syncs first; this one is served
            log.warning("the index snapshot could not be written: %s", exc)
            return
        self._snapshot_current = True

    def _catalog_of(
        self,
        store: GraphStore,
        index: ToolIndex,
        tools: list[Tool],
        encoder: Encoder,
        memory: PlanMemory | None,
    ) -> Catalog:
        gate = None
        if self._settings.orchestrate.gate:
            gate = self._gate(self._gate_documents(tools))
        return self._assemble(
            store, index, {tool.name: tool for tool in tools}, encoder, memory, gate
        )

    def _assemble(
        self,
        store: GraphStore,
        index: ToolIndex,
        tools: Mapping[str, Tool],
        encoder: Encoder,
        memory: PlanMemory | None,
        gate: CatalogGate | None,
    ) -> Catalog:
        from proxy.plan.candidates import CandidateFinder, weights_from
        from proxy.plan.planner import RequestPlanner
        from retriever.recent import remembering

        planner = self._settings.planner
        remembered = remembering(encoder)
        # Every search of the catalog (a sub-task's, the whole request's, the console's,
        # /mcp's) reads a text's clauses too when the retriever does (retriever.clauses),
        # embedded through the same memory as the question.
        clauses = remembered if self._settings.retriever.clauses else None
        finder = CandidateFinder(
            store, index, weights_from(planner), mode=planner.graph_mode, clauses=clauses
        )
        return Catalog(store, RequestPlanner(finder, remembered, planner, memory), tools, gate)

    def _open_client(self) -> OwnedClient:
        from qdrant_client import QdrantClient

        from retriever.owned_client import OwnedClient
        from retriever.qdrant_store import claim_local_folder, open_client

        settings = self._settings
        if settings.qdrant_url:
            return open_client(settings.data_dir, settings.qdrant_url)
        self._folder = claim_local_folder(settings.data_dir)
        log.info("the catalog's vectors and plan memory are in %s", self._folder.path)
        return OwnedClient(QdrantClient(path=str(self._folder.path)))

    @staticmethod
    def _gate_documents(tools: Iterable[Tool]) -> list[str]:
        from retriever.documents import tool_fields
        from retriever.gate.features import gate_document

        return [gate_document(tool_fields(tool)) for tool in tools]

    def _gate(self, documents: list[str], known: GateVectors | None = None) -> CatalogGate:
        """``known``: the gate's vectors an index snapshot carries, taken when they are of
        the encoder the gate reads."""
        from retriever.embedder import load_encoder
        from retriever.gate.catalog import CatalogGate
        from retriever.gate.model import load_gate
        from retriever.recent import remembering

        # The gate reads the encoder it was fitted on whatever encoder the index uses
        # (the same loaded copy when it is the index's too).
        gate = load_gate()
        encoder = load_encoder(gate.encoder_config(self._settings.retriever))
        words = None
        if known is not None and known.encoder == encoder.name:
            self._gate_vectors.update(zip(known.documents, known.vectors, strict=True))
            if known.documents == documents:
                words = (known.words, known.names)
        self._gate_vectors_from_disk(encoder, documents)
        return CatalogGate(gate, remembering(encoder), documents, self._gate_vectors, words)

    def _gate_vectors_from_disk(self, encoder: Encoder, documents: list[str]) -> None:
        """The gate's vectors of tools this process has not seen, from the embeddings
        cache in the data folder (embedded and left there when absent): a restart embeds
        none of them again, where it used to embed every tool of the catalog."""
        from retriever.bulk import embed_documents

        missing = list(dict.fromkeys(d for d in documents if d not in self._gate_vectors))
        if not missing:
            return
        cache = self._settings.data_dir / "embeddings"
        vectors = embed_documents(encoder, missing, cache_dir=cache, progress=False)
        self._gate_vectors.update(zip(missing, vectors, strict=True))


def seed_packs(store: GraphStore, settings: Settings) -> None:
    """Write the packs' tools the settings give (built-in, databases, knowledge graphs)
    that are missing or have changed, and the knowledge-graph pack's preconditions, into
    ``store``: what every catalog load does first (``toolgraph catalog`` too)."""
    tools = builtin_tools() if settings.orchestrate.builtin_tools else []
    tools += database_tools(settings.packs.database)
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
