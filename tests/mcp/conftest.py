"""MCP fixtures: the tests' own stdio server (tests/mcp/server.py), started through the
proxy's MCP sources over an in-process graph store; and the published servers the tests
start (``make mcp-servers``): npm's from tests/mcp/node, PyPI's from tests/mcp/python."""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from graph_store.embedded import InProcessStore
from proxy.config import McpServerSettings
from proxy.mcp.sources import McpSources
from testing.brain import Brain, plan_of
from testing.fake_upstream import FakeUpstream
from tests.conftest import ServerThread, StartProxy, unavailable

ROOT = Path(__file__).resolve().parents[2]
#: npm's MCP servers, installed from tests/mcp/node/package-lock.json.
NODE_MODULES = Path(__file__).parent / "node/node_modules/@modelcontextprotocol"
#: PyPI's MCP servers, installed from tests/mcp/python/requirements.txt.
PYTHON_SITE = Path(__file__).parent / "python/.site"


def node_server(name: str, package: str, *args: str) -> McpServerSettings:
    """npm's ``@modelcontextprotocol/<package>`` run with Debian's ``node``; missing, it
    fails under CI and skips elsewhere."""
    node = shutil.which("node")
    entry = NODE_MODULES / package / "dist/index.js"
    if node is None:
        unavailable("node is not installed (apt-get install nodejs)")
    if not entry.exists():
        unavailable(f"{package} is not installed: run `make mcp-servers`")
    return McpServerSettings(name=name, command=[str(node), str(entry), *args])


def pypi_server(name: str, module: str, *args: str) -> McpServerSettings:
    """PyPI's server ``module`` run with this interpreter (whose ``mcp`` it uses); missing,
    it fails under CI and skips elsewhere."""
    if not (PYTHON_SITE / module).is_dir():
        unavailable(f"{module} is not installed: run `make mcp-servers`")
    return McpServerSettings(
        name=name,
        command=[sys.executable, "-m", module, *args],
        env={"PYTHONPATH": str(PYTHON_SITE)},
    )


def python_server(name: str = "test", *flags: str, **settings: object) -> McpServerSettings:
    """The tests' stdio server as a setting: ``python -m tests.mcp.server FLAGS``."""
    return McpServerSettings(
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


ServeMcp = Callable[..., ServerThread]


@pytest.fixture
def serve_mcp(start_proxy: StartProxy) -> ServeMcp:
    """Starts the proxy with the tests' stdio server, the LLM planner offered 20 tools and
    no gate (``overrides`` added), and returns it once the server has connected."""

    def serve(**overrides: Any) -> ServerThread:
        server = start_proxy(
            mcp_servers=[python_server().model_dump()],
            planner={"policy": "llm", "top_k": 20, "memory_k": 0},
            orchestrate={"gate": False},
            **overrides,
        )
        wait_connected(server)
        return server

    return serve


def plan_oslo_weather(brain: Brain) -> None:
    """Scripts the brain for "the weather in Oslo": the city's coordinates, then the
    forecast at them."""
    brain.plan = plan_of(
        ("Find the coordinates of Oslo", []),
        ("Get the weather forecast at those coordinates", ["s1"]),
    )
    brain.tools = {"coordinates of": "test_lookup_city", "forecast": "test_forecast"}
    brain.arguments = {
        "coordinates of": {"city": "Oslo"},
        "forecast": {"latitude": 59.91, "longitude": 10.75},
    }
