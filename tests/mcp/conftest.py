"""MCP fixtures: the tests' own stdio server (tests/mcp/server.py), started through the
proxy's MCP sources over an in-process graph store."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from eval.brain import Brain
from eval.fake_upstream import FakeUpstream
from graph_store.memory import InProcessStore
from proxy.config import McpServer
from proxy.mcp.sources import McpSources
from tests.conftest import ServerThread

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


@pytest.fixture
def brain(upstream: FakeUpstream) -> Brain:
    """The fake upstream's scripted answers to each of orchestrate mode's prompts."""
    brain = Brain()
    upstream.responder = brain
    return brain


def wait_connected(server: ServerThread) -> None:
    """Until the proxy's MCP servers have had their first connection attempt."""
    deadline = time.monotonic() + 120
    while httpx.get(f"{server.url}/readyz", timeout=10).json()["checks"].get("mcp") != "ok":
        if time.monotonic() > deadline:
            raise RuntimeError("the MCP servers did not connect")
        time.sleep(0.05)
