"""A request never waits on the graph store on the event loop: a catalog's tool record,
read from the store the first time a plan names it, is read in a worker thread, and so
is every read of a catalog load, while readiness goes on answering from the catalog
installed before."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from pathlib import Path

from graph_store.embedded import InProcessStore
from graph_store.models import Tool
from proxy.catalog.loaded import StoredTools
from proxy.catalog.service import CatalogService
from proxy.config import ExecutorSettings, load_settings
from proxy.encoder.service import EncoderService
from proxy.execute.plan import PlanNode, ToolPlan
from proxy.execute.scheduler import Outcome
from proxy.execute.service import ToolExecutor
from proxy.tools.packs.math.catalog import builtin_tools

#: How long a blocked read waits to be let go before it gives up (only a failing test
#: ever waits this long: the loop, if free, lets it go at once).
GIVE_UP = 60.0


class BlockingStore(InProcessStore):
    """The embedded store, whose reads named in ``held`` wait until the test lets them
    go: a store behind a slow network, held still."""

    def __init__(
        self, directory: Path, loop: asyncio.AbstractEventLoop, held: Iterable[str]
    ) -> None:
        super().__init__(directory)
        self.held = set(held)
        self._loop = loop
        self.reading = asyncio.Event()
        self.go = threading.Event()
        self.readers: list[int] = []
        self.let_go: list[bool] = []

    def get_tool(self, key: str) -> Tool | None:
        self._wait("get_tool")
        return super().get_tool(key)

    def list_tools(self, category: str | None = None) -> list[Tool]:
        self._wait("list_tools")
        return super().list_tools(category)

    def _wait(self, read: str) -> None:
        if read not in self.held:
            return
        self.readers.append(threading.get_ident())
        self._loop.call_soon_threadsafe(self.reading.set)
        self.let_go.append(self.go.wait(GIVE_UP))


async def test_a_tool_read_from_the_store_leaves_the_loop_free(tmp_path: Path) -> None:
    store = BlockingStore(tmp_path, asyncio.get_running_loop(), held={"get_tool"})
    store.upsert_tools(builtin_tools())
    tools = StoredTools(store, store.names())
    plan = ToolPlan(
        nodes=(PlanNode(id="s1", tool="evaluate_expression", arguments={"expression": "6*7"}),)
    )
    executor = ToolExecutor(ExecutorSettings(sandbox_timeout=5))
    try:
        running = asyncio.create_task(executor.execute(plan, tools, model=None))
        await store.reading.wait()  # the loop turns while the read waits
        store.go.set()  # only a free loop gets here before the read gives up
        executed = await running
    finally:
        await executor.aclose()
    assert store.let_go == [True]  # let go by the loop, not given up
    assert threading.get_ident() not in store.readers
    assert executed.run.records["s1"].outcome is Outcome.OK
    assert "42" in executed.compressed["s1"].text


async def test_a_catalog_load_held_by_the_store_leaves_readiness_answering(
    tmp_path: Path,
) -> None:
    settings = load_settings(data_dir=tmp_path, planner={"memory_k": 0})
    store = BlockingStore(tmp_path / "store", asyncio.get_running_loop(), held=())
    encoders = EncoderService(settings.retriever)
    catalog = CatalogService(settings, encoders, store)
    try:
        first = await catalog.get()
        store.held = {"list_tools"}
        catalog.changed()  # a registry write: the next request loads again
        loading = asyncio.create_task(catalog.get())
        await store.reading.wait()  # the load waits on the store, in its thread
        await catalog.check()  # readiness answers meanwhile, from the load installed
        assert not loading.done()
        store.go.set()
        second = await loading
    finally:
        store.go.set()
        await catalog.aclose()
        encoders.close()
    assert store.let_go
    assert all(store.let_go)  # every held read let go by the loop, none given up
    assert threading.get_ident() not in store.readers
    assert second is not first
    assert set(second.tools) == set(first.tools)


async def test_a_request_that_goes_away_leaves_its_catalog_load_to_finish(
    tmp_path: Path,
) -> None:
    settings = load_settings(data_dir=tmp_path, planner={"memory_k": 0})
    store = BlockingStore(tmp_path / "store", asyncio.get_running_loop(), held={"list_tools"})
    encoders = EncoderService(settings.retriever)
    catalog = CatalogService(settings, encoders, store)
    try:
        request = asyncio.create_task(catalog.get())
        await store.reading.wait()
        request.cancel()  # the client went away while the first load read the store
        store.go.set()
        await catalog.settle()  # the load goes on, and installs the catalog it read
        reads = len(store.let_go)
        loaded = await catalog.get()
    finally:
        store.go.set()
        await catalog.aclose()
        encoders.close()
    assert request.cancelled()
    assert reads
    assert all(store.let_go)
    assert len(store.let_go) == reads  # one load: the next request found it installed
    assert {tool.name for tool in builtin_tools()} <= set(loaded.tools)
