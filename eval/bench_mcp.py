"""MCP servers as tool sources: catalog sync time and the cost of a call through toolgraph.

    python -m eval.bench_mcp               # 1,000 tools, 2,000 calls each way
    python -m eval.bench_mcp --quick       # 200 tools, 200 calls

The tests' stdio server (``tests/mcp/server.py --tools N``, the official SDK) is
started through :class:`proxy.mcp.sources.McpSources` over an in-process graph store:
*sync* is the time from start to the listing stored (process start, ``initialize``,
every page of ``tools/list``, the store's writes and the schema-edge pass), *listed*
the first three alone through the SDK's own client (so sync minus listed is
toolgraph's share), *resync* the time from a tool's call that adds one tool and
sends ``list_changed`` to that tool stored. Calls of one small
tool go one at a time, alternating between the SDK's own client (a session of its
own to the same server) and :meth:`McpSources.invoke` (toolgraph's: a timeout, the
error translation and the output conversion on top); p50 and p99 of each, and the
difference. Results: printed, and ``eval/results/bench_mcp.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from graph_store.memory import InProcessStore
from proxy.config import McpServer
from proxy.mcp.connection import list_tools
from proxy.mcp.sources import McpSources

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "eval" / "results"


def server_argv(tools: int) -> list[str]:
    return [sys.executable, "-m", "tests.mcp.server", "--tools", str(tools)]


async def measure_listing(tools: int) -> float:
    params = StdioServerParameters(
        command=sys.executable, args=server_argv(tools)[1:], env={"PYTHONPATH": str(ROOT)}
    )
    started = time.perf_counter()
    async with Client(params, mode="legacy", cache=None) as client:
        await list_tools(client)
        return time.perf_counter() - started


async def measure_sync(tools: int, folder: Path) -> dict[str, float]:
    store = InProcessStore.open(folder / "graph")
    changes = asyncio.Event()

    async def changed() -> None:
        changes.set()

    server = McpServer(
        name="bench", command=server_argv(tools), env={"PYTHONPATH": str(ROOT)}, cwd=ROOT
    )
    mcp = McpSources([server], 30.0, store, changed)
    started = time.perf_counter()
    mcp.start()
    await mcp.settled()
    synced = time.perf_counter() - started
    assert store.count_tools() >= tools, store.count_tools()
    grow = store.get_tool("bench_grow")
    assert grow is not None
    changes.clear()
    started = time.perf_counter()
    await mcp.invoke(grow, {})  # adds one tool and sends list_changed
    while store.get_tool("bench_late_tool") is None:
        await changes.wait()
        changes.clear()
    resynced = time.perf_counter() - started
    await mcp.aclose()
    return {"sync_s": synced, "resync_s": resynced, "stored": store.count_tools()}


async def measure_calls(calls: int, folder: Path) -> dict[str, float]:
    store = InProcessStore.open(folder / "graph")
    server = McpServer(
        name="bench", command=server_argv(0), env={"PYTHONPATH": str(ROOT)}, cwd=ROOT
    )
    mcp = McpSources([server], 30.0, store)
    mcp.start()
    await mcp.settled()
    tool = store.get_tool("bench_forecast")
    assert tool is not None
    arguments = {"latitude": 59.91, "longitude": 10.75}
    params = StdioServerParameters(
        command=sys.executable, args=server_argv(0)[1:], env={"PYTHONPATH": str(ROOT)}
    )
    direct: list[float] = []
    through: list[float] = []
    async with Client(params, mode="legacy", cache=None) as client:
        await client.list_tools()
        for _ in range(calls):
            started = time.perf_counter()
            await client.call_tool("forecast", arguments)
            direct.append(time.perf_counter() - started)
            started = time.perf_counter()
            await mcp.invoke(tool, arguments)
            through.append(time.perf_counter() - started)
    await mcp.aclose()
    return {
        "direct_p50_ms": _ms(direct, 50),
        "direct_p99_ms": _ms(direct, 99),
        "toolgraph_p50_ms": _ms(through, 50),
        "toolgraph_p99_ms": _ms(through, 99),
        "added_p50_ms": _ms(through, 50) - _ms(direct, 50),
    }


def _ms(samples: list[float], percentile: int) -> float:
    return statistics.quantiles(samples, n=100)[percentile - 1] * 1000


async def run(tools: int, calls: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as folder:
        sync = await measure_sync(tools, Path(folder) / "sync")
        listed = await measure_listing(tools)
        call = await measure_calls(calls, Path(folder) / "calls")
    return {
        "tools": tools,
        "calls": calls,
        "load_average": os.getloadavg()[0],
        "cpus": os.cpu_count(),
        **sync,
        "listed_s": listed,
        **call,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 tools, 200 calls")
    args = parser.parse_args()
    tools, calls = (200, 200) if args.quick else (1000, 2000)
    result = asyncio.run(run(tools, calls))
    print(json.dumps(result, indent=2))
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "bench_mcp.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
