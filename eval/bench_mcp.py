"""MCP servers as tool sources: catalog sync time and the cost of a call through toolgraph.

    python -m eval.bench_mcp               # 1,000 tools, 1,000 calls each way a transport
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
difference; the ``http_`` figures are the same calls with the same server served over
streamable HTTP on a free loopback port (``tests/mcp/server.py --http``). Progress goes
to stderr. Results: printed, and ``eval/results/bench_mcp.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from graph_store.embedded import InProcessStore
from proxy.config import ExecutorSettings, McpServerSettings
from proxy.execute.egress import EgressPolicy
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

    server = McpServerSettings(
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


@contextlib.asynccontextmanager
async def http_server() -> AsyncIterator[str]:
    """The tests' server over streamable HTTP on a free loopback port; its endpoint."""
    process = await asyncio.create_subprocess_exec(
        *server_argv(0),
        "--http",
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    assert process.stdout is not None
    port = int(await process.stdout.readline())
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        await process.wait()


def stdio_pair() -> tuple[McpServerSettings, Client]:
    """toolgraph's configuration of the stdio server, and the SDK's own client of it."""
    server = McpServerSettings(
        name="bench", command=server_argv(0), env={"PYTHONPATH": str(ROOT)}, cwd=ROOT
    )
    params = StdioServerParameters(
        command=sys.executable, args=server_argv(0)[1:], env={"PYTHONPATH": str(ROOT)}
    )
    return server, Client(params, mode="legacy", cache=None)


def http_pair(url: str) -> tuple[McpServerSettings, Client]:
    """toolgraph's configuration of the HTTP server at ``url``, and the SDK's own client."""
    return McpServerSettings(name="bench", url=url), Client(
        streamable_http_client(url), mode="legacy", cache=None
    )


async def measure_calls(
    calls: int, folder: Path, server: McpServerSettings, client: Client, label: str
) -> dict[str, float]:
    """``calls`` calls each way, interleaved one by one: the SDK's ``client`` directly,
    then toolgraph's session to ``server`` (loopback allowed, as
    ``executor.allow_private_networks`` does)."""
    store = InProcessStore.open(folder / "graph")
    policy = EgressPolicy.from_settings(ExecutorSettings(allow_private_networks=True))
    mcp = McpSources([server], 30.0, store, policy=policy)
    mcp.start()
    await mcp.settled()
    tool = store.get_tool("bench_forecast")
    assert tool is not None, f"{label}: the server's tools were not stored"
    arguments = {"latitude": 59.91, "longitude": 10.75}
    direct: list[float] = []
    through: list[float] = []
    async with client:
        await client.list_tools()
        for done in range(1, calls + 1):
            started = time.perf_counter()
            await client.call_tool("forecast", arguments)
            direct.append(time.perf_counter() - started)
            started = time.perf_counter()
            await mcp.invoke(tool, arguments)
            through.append(time.perf_counter() - started)
            _progress(label, done, calls)
    await mcp.aclose()
    return {
        "direct_p50_ms": _ms(direct, 50),
        "direct_p99_ms": _ms(direct, 99),
        "toolgraph_p50_ms": _ms(through, 50),
        "toolgraph_p99_ms": _ms(through, 99),
        "added_p50_ms": _ms(through, 50) - _ms(direct, 50),
    }


def _progress(label: str, done: int, total: int) -> None:
    if done % 100 == 0 or done == total:
        print(f"{label}: {done}/{total} calls each way", file=sys.stderr, flush=True)


async def measure_http_calls(calls: int, folder: Path) -> dict[str, float]:
    async with http_server() as url:
        server, client = http_pair(url)
        measured = await measure_calls(calls, folder, server, client, "http")
    return {f"http_{key}": value for key, value in measured.items()}


def _ms(samples: list[float], percentile: int) -> float:
    return statistics.quantiles(samples, n=100)[percentile - 1] * 1000


async def run(tools: int, calls: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as folder:
        sync = await measure_sync(tools, Path(folder) / "sync")
        listed = await measure_listing(tools)
        call = await measure_calls(calls, Path(folder) / "calls", *stdio_pair(), "stdio")
        http = await measure_http_calls(calls, Path(folder) / "http")
    return {
        "tools": tools,
        "calls": calls,
        "load_average": os.getloadavg()[0],
        "cpus": os.cpu_count(),
        **sync,
        "listed_s": listed,
        **call,
        **http,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 tools, 200 calls")
    args = parser.parse_args()
    tools, calls = (200, 200) if args.quick else (1000, 1000)
    result = asyncio.run(run(tools, calls))
    print(json.dumps(result, indent=2))
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "bench_mcp.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
