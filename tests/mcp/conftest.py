"""MCP fixtures: the tests' own stdio server (tests/mcp/server.py), started through the
proxy's MCP sources over an in-process graph store."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from graph_store.memory import InProcessStore
from proxy.config import McpServer
from proxy.mcp.sources import McpSources

ROOT = Path(__file__).resolve().parents[2]


def python_server(name: str = "test", *flags: str, **settings: object) -> McpServer:
    """The tests' stdio server as a setting: ``python -m tests.mcp.server FLAGS``."""
    return McpServer(
        name=name,
        command=[sys.executable, "-m", "tests.mcp.server", *flags],
        env={"PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        **settings,  # type: ignore[arg-type]
    )


class Changes:
    """Counts the sources' change notices; a test waits for the next one by event."""

    def __init__(self) -> None:
        self.count = 0
        self._event = asyncio.Event()

    async def __call__(self) -> None:
        self.count += 1
        self._event.set()

    async def until(self, predicate: Callable[[], bool]) -> None:
        async with asyncio.timeout(60):
            while not predicate():
                await self._event.wait()
                self._event.clear()


@pytest.fixture
def store(tmp_path: Path) -> InProcessStore:
    return InProcessStore.open(tmp_path / "graph")


@pytest.fixture
def changes() -> Changes:
    return Changes()


@pytest.fixture
async def sources(store: InProcessStore, changes: Changes) -> AsyncIterator[McpSources]:
    mcp = McpSources([python_server()], 30.0, store, changes)
    mcp.start()
    await asyncio.wait_for(mcp.settled(), 60)
    yield mcp
    await mcp.aclose()
