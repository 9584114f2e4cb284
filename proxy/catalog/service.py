"""The catalog service, on the event loop: when the catalog loads, readiness, closing.

The catalog is loaded in a worker thread (:mod:`proxy.catalog.loader`): in the
background from start-up with ``orchestrate.preload`` (the default; a request that
comes first waits for that load, and readiness says ``loading`` meanwhile), else by
the first orchestrate request. The embedding model comes from the app's encoder
service (:mod:`proxy.encoder.service`: one copy, shared with select mode). A restart
is first served from the index snapshot (:mod:`proxy.catalog.snapshot`) while the full
load runs in the background; readiness says ``loading`` until one of the two is
served, and ``/readyz`` shows the sync's state beside it (:attr:`CatalogService.sync`).

The catalog is loaded again when the store's tools changed: at once after a write
through this process's registry (:meth:`CatalogService.changed`) or a notice from
another process, and at the latest when a request finds the store's version stamp
moved (checked at most every ``orchestrate.catalog_check_interval`` seconds), which
covers writes by other workers and replicas whose notice was lost.

Only the loop writes this service's state. Each load returns one immutable
:class:`~proxy.catalog.loaded.LoadedCatalog`, installed in one assignment, and so are
the store and the Qdrant client the first load opens: readiness
(:meth:`CatalogService.check`, a count of the catalog's collection and of the plan
memory's, so that a store that no longer works takes the process out of rotation)
reads one load whole. A load runs in a task of the service's own, one at a time: a
request that goes away while it waits leaves the load to finish and be installed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from graph_store.errors import StoreUnavailable
from graph_store.models import Tool
from graph_store.store import GraphStore
from proxy.catalog.loaded import Catalog, LoadedCatalog
from proxy.catalog.loader import CatalogLoader, VectorStore
from proxy.config import Settings
from proxy.encoder.service import EncoderService
from proxy.errors import ToolgraphError

if TYPE_CHECKING:
    from proxy.learning.service import Learner
    from retriever.embedder import Encoder

log = logging.getLogger(__name__)
T = TypeVar("T")


class CatalogUnavailable(ToolgraphError):
    status = 503
    type = "server_error"
    code = "catalog_unavailable"


class CatalogService:
    """``store``: the graph store, when the app has opened it already (for the registry);
    else it is opened with the first load, so that start-up never waits on Neo4j.
    The service closes it either way. ``available``: whether a stored tool can run now
    (:class:`~proxy.catalog.loader.CatalogLoader`)."""

    def __init__(
        self,
        settings: Settings,
        encoders: EncoderService,
        store: GraphStore | None = None,
        available: Callable[[Tool], bool] | None = None,
        learner: Learner | None = None,
    ) -> None:
        """``learner``: what plans read of their tenant's traffic (None: nothing)."""
        self._settings = settings
        self._encoders = encoders
        self._loader = CatalogLoader(settings, available, learner)
        self.store = store
        self._vectors: VectorStore | None = None  # opened by the first full load
        self._loaded: LoadedCatalog | None = None
        self._stale = True
        self._checked = 0.0  # when a request last compared the version with the store's
        self._lock = asyncio.Lock()  # one load at a time
        self._loads: set[asyncio.Task[Any]] = set()  # loads a request started
        self._preloading: asyncio.Task[None] | None = None
        self._preload_failure: str | None = None  # why the load at start-up failed
        #: Set once a catalog is served (from the snapshot or the full load), and once
        #: the load at start-up has ended, either way.
        self.served = asyncio.Event()
        self.synced = asyncio.Event()

    def preload(self) -> None:
        """Start loading the catalog, and with it the embedding model, in the background.
        A request that comes first waits for it: it takes the same lock."""
        self._preloading = asyncio.create_task(self._preload())

    @property
    def loading(self) -> bool:
        """Whether the background load is still running with no catalog served yet."""
        running = self._preloading is not None and not self._preloading.done()
        return running and self._loaded is None

    @property
    def sync(self) -> str:
        """The start-up sync in a word: ``running``, ``done``, ``failed`` or ``off``."""
        if self._preloading is None:
            return "off"
        if not self._preloading.done():
            return "running"
        return "failed" if self._preload_failure is not None else "done"

    def changed(self) -> None:
        """The store's tools changed: re-sync the index before the next plan."""
        self._stale = True

    async def get(self) -> Catalog:
        """The catalog to plan over, loaded first when there is none or it is stale."""
        loaded = self._loaded
        if loaded is not None and not self._stale and not await self._store_moved(loaded):
            return loaded.catalog
        return (await self._owned(self._refresh())).catalog

    async def check(self) -> None:
        """Readiness: a count of the catalog's collection and of the plan memory's,
        once loaded (before, the first request loads them, unless the load at start-up
        failed); raises when one fails."""
        loaded = self._loaded
        if loaded is None or loaded.collection is None:
            if self._preload_failure is not None:
                raise CatalogUnavailable(self._preload_failure)
            return
        await loaded.collection.probe()
        if loaded.catalog.memory is not None:
            await loaded.catalog.memory.probe()

    async def settle(self) -> None:
        """Wait for the loads running to end: their threads cannot be stopped, and the
        stores must not close under them (at shutdown)."""
        running = [*self._loads, *([self._preloading] if self._preloading else [])]
        await asyncio.gather(*running, return_exceptions=True)

    async def aclose(self) -> None:
        """:meth:`close` in a worker thread once no load runs: the Qdrant client
        finishes its queued writes and Neo4j's driver says goodbye over the network."""
        await self.settle()
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        if self._vectors is not None:
            self._vectors.close()
        if self.store is not None:
            self.store.close()

    async def _preload(self) -> None:
        started = time.monotonic()
        try:
            await self._serve_snapshot(started)
            loaded = await self._sync()
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
        log.info("catalog ready: %d tools, loaded in %.1f s", len(loaded.catalog.tools), seconds)

    async def _serve_snapshot(self, started: float) -> None:
        """Serve the tools the index snapshot holds unchanged, when there is one."""
        encoder = await self._encoders.encoder()
        async with self._lock:
            if self._loaded is not None:  # a request's full load came first
                return
            try:
                store = await self._opened_store()
                found = await asyncio.to_thread(self._loader.load_snapshot, store, encoder)
            except (StoreUnavailable, OSError) as exc:  # the full load meets it and says so
                log.warning("no catalog from the index snapshot: %s", exc)
                return
            if found is None:
                return
            self._install(found)
        self.served.set()
        seconds = time.monotonic() - started
        tools = len(found.catalog.tools)
        log.info("catalog served from the index snapshot: %d tools in %.1f s", tools, seconds)

    async def _sync(self) -> LoadedCatalog:
        """The full load, whether or not a catalog is served already."""
        encoder = await self._encoders.encoder()
        async with self._lock:
            self._stale = False
            return await self._reload(encoder)

    async def _refresh(self) -> LoadedCatalog:
        """The catalog once no load is needed: loaded now unless a load that ran while
        this one waited for the lock left it fresh."""
        encoder = await self._encoders.encoder()
        async with self._lock:
            loaded = self._loaded
            if loaded is None or self._stale:
                self._stale = False  # a change noticed while loading marks it again
                loaded = await self._reload(encoder)
        return loaded

    async def _reload(self, encoder: Encoder) -> LoadedCatalog:
        """A full load, installed; the lock held."""
        try:
            store = await self._opened_store()
            vectors = await self._opened_vectors(encoder)
            loaded = await asyncio.to_thread(
                self._loader.load, store, vectors, encoder, self._loaded
            )
        except Exception as exc:  # Qdrant, Neo4j or the disk: tried again next time
            self._stale = True
            log.warning("the catalog could not be loaded", exc_info=True)
            raise CatalogUnavailable(
                f"the tool catalog could not be loaded: {type(exc).__name__}: {exc}"
            ) from None
        self._install(loaded)
        return loaded

    def _install(self, loaded: LoadedCatalog) -> None:
        self._loaded, self._checked = loaded, time.monotonic()  # as fresh as a check

    async def _opened_store(self) -> GraphStore:
        """The graph store, opened by the first load that needs it; the lock held."""
        if self.store is None:
            self.store = await asyncio.to_thread(self._loader.open_store)
        return self.store

    async def _opened_vectors(self, encoder: Encoder) -> VectorStore:
        """The Qdrant client and plan memory, opened by the first full load; the lock held."""
        if self._vectors is None:
            self._vectors = await asyncio.to_thread(self._loader.open_vectors, encoder)
        return self._vectors

    async def _owned(self, work: Coroutine[Any, Any, T]) -> T:
        """``work`` in a task of the service's own, awaited: a request that goes away
        while a load runs leaves it to finish and install what it opened, where
        cancelling it halfway would lose a store or client its thread opened."""
        task = asyncio.create_task(work)
        self._loads.add(task)
        task.add_done_callback(self._loads.discard)
        return await asyncio.shield(task)

    async def _store_moved(self, loaded: LoadedCatalog) -> bool:
        """Whether another process wrote the store since the catalog was loaded; asked
        of the store at most once per interval, by one request."""
        now = time.monotonic()
        if now - self._checked < self._settings.orchestrate.catalog_check_interval:
            return False
        self._checked = now
        try:
            version = await asyncio.to_thread(loaded.catalog.store.version)
        except (StoreUnavailable, OSError) as exc:  # planning meets it too, and says so
            log.warning("the catalog's version could not be read: %s", exc)
            return False
        if version != loaded.version:
            self._stale = True
        return self._stale
