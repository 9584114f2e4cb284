"""A request never waits on the graph store on the event loop: a catalog's tool record,
read from the store the first time a plan names it, is read in a worker thread."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from graph_store.embedded import InProcessStore
from graph_store.models import Tool
from proxy.config import ExecutorSettings
from proxy.execute.plan import PlanNode, ToolPlan
from proxy.execute.scheduler import Outcome
from proxy.execute.service import ToolExecutor
from proxy.orchestrate.catalog import StoredTools
from proxy.tools.packs.math.catalog import builtin_tools

#: How long a blocked read waits to be let go before it gives up (only a failing test
#: ever waits this long: the loop, if free, lets it go at once).
GIVE_UP = 60.0


class BlockingStore(InProcessStore):
    """The embedded store, whose tool reads wait until the test lets them go: a store
    behind a slow network, held still."""

    def __init__(self, directory: Path, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(directory)
        self._loop = loop
        self.reading = asyncio.Event()
        self.go = threading.Event()
        self.readers: list[int] = []
        self.let_go: list[bool] = []

    def get_tool(self, key: str) -> Tool | None:
        self.readers.append(threading.get_ident())
        self._loop.call_soon_threadsafe(self.reading.set)
        self.let_go.append(self.go.wait(GIVE_UP))
        return super().get_tool(key)


async def test_a_tool_read_from_the_store_leaves_the_loop_free(tmp_path: Path) -> None:
    store = BlockingStore(tmp_path, asyncio.get_running_loop())
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
