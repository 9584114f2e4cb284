"""MCP servers as tool sources, against the tests' own stdio server, one each: a call
past its timeout (cancelled at the server), list_changed, a crash in the middle of a
call, and a server that never answers ``initialize``. The read-only tests share one
server in test_listing.py."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from graph_store.embedded import InProcessStore
from graph_store.models import Tool
from proxy.config import McpServerSettings
from proxy.errors import ToolError, ToolTimeout
from proxy.execute.egress import EgressPolicy
from proxy.mcp.sources import McpSources
from tests.conftest import free_port
from tests.mcp.conftest import Changes, python_server
from tests.mcp.server import TOOLS


def tool(store: InProcessStore, name: str) -> Tool:
    found = store.get_tool(name)
    assert found is not None, name
    return found


async def test_a_call_past_its_timeout_is_a_tool_timeout_and_cancelled_at_the_server(
    store: InProcessStore,
) -> None:
    mcp = McpSources([python_server(call_timeout=0.5)], 30.0, store)
    mcp.start()
    try:
        await asyncio.wait_for(mcp.settled(), 60)
        with pytest.raises(ToolTimeout):
            await mcp.invoke(tool(store, "test_slow"), {"seconds": 60})
        # The server heard notifications/cancelled and stopped the call.
        assert await mcp.invoke(tool(store, "test_cancellations"), {}) == "1"
        # The session is still good for the next call.
        done = await mcp.invoke(tool(store, "test_slow"), {"seconds": 0})
        assert done == "done"
    finally:
        await mcp.aclose()


async def test_list_changed_syncs_the_new_tool(
    sources: McpSources, store: InProcessStore, changes: Changes
) -> None:
    assert store.get_tool("test_late_tool") is None
    await sources.invoke(tool(store, "test_grow"), {})
    await changes.until(lambda: store.get_tool("test_late_tool") is not None)
    assert await sources.invoke(tool(store, "test_late_tool"), {}) == "late"


async def test_a_server_that_crashes_mid_call_fails_the_call_and_comes_back(
    sources: McpSources, store: InProcessStore, changes: Changes
) -> None:
    crash, lookup = tool(store, "test_crash"), tool(store, "test_lookup_city")
    async with asyncio.timeout(60):  # no hang
        with pytest.raises(ToolError, match="went away"):
            await sources.invoke(crash, {})
    # Unavailable, then restarted, relisted and available again; the tools stay stored.
    await changes.until(lambda: not sources.available(lookup))
    assert store.get_tool("test_lookup_city") is not None
    await changes.until(lambda: sources.available(lookup))
    assert (await sources.invoke(lookup, {"city": "bergen"})) == {
        "city": "bergen",
        "latitude": 60.39,
        "longitude": 5.32,
    }


async def test_a_server_that_never_answers_initialize_times_out_unavailable(
    store: InProcessStore,
) -> None:
    changes = Changes()
    mcp = McpSources([python_server("mute", "--silent", connect_timeout=1.0)], 30.0, store, changes)
    mcp.start()
    try:
        async with asyncio.timeout(60):
            await mcp.settled()
        assert mcp.connected() == []
        assert store.list_tools() == []
        stub = tool_stub("mute", "anything")
        assert not mcp.available(stub)
        with pytest.raises(ToolError, match="not connected"):
            await mcp.invoke(stub, {})
    finally:
        await mcp.aclose()


def tool_stub(server: str, name: str) -> Tool:
    from graph_store.ingest.mcp import parse_mcp

    parsed = parse_mcp(server, [{"name": name, "inputSchema": {"type": "object"}}])
    (found,) = parsed.tools
    return found


async def test_a_command_that_cannot_start_leaves_the_server_unavailable(
    store: InProcessStore,
) -> None:
    mcp = McpSources(
        [McpServerSettings(name="nowhere", command=["/nonexistent/mcp-server"])], 30.0, store
    )
    mcp.start()
    try:
        async with asyncio.timeout(60):
            await mcp.settled()
        assert mcp.connected() == []
    finally:
        await mcp.aclose()


async def test_an_http_server_that_refuses_connections_is_unavailable(
    store: InProcessStore,
) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    refusing = McpServerSettings(name="refusing", url=url, connect_timeout=10.0)
    mcp = McpSources([refusing], 30.0, store, policy=EgressPolicy(allow_private=True))
    mcp.start()
    try:
        async with asyncio.timeout(60):
            await mcp.settled()
        assert mcp.connected() == []
    finally:
        await mcp.aclose()


async def test_closing_does_not_wait_for_a_server_still_starting(store: InProcessStore) -> None:
    mute = python_server("mute", "--silent", connect_timeout=600.0)
    mcp = McpSources([mute], 30.0, store)
    mcp.start()
    async with asyncio.timeout(60):  # not the 600 s of its connect timeout
        await mcp.aclose()
    assert mcp.connected() == []


def server_children() -> set[int]:
    """The PIDs of this process's children that run the tests' stdio server."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid, _, rest = stat.read_text().partition(" (")
            fields = rest.rpartition(") ")[2].split()
            argv = (stat.parent / "cmdline").read_bytes()
        except OSError:  # it ended while read
            continue
        if int(fields[1]) == os.getpid() and b"tests.mcp.server" in argv and fields[0] != "Z":
            found.add(int(pid))
    return found


@pytest.mark.parametrize(
    ("connect_timeout", "closed_after"),
    [(0.2, 1.0), (1.5, 0.0)],
    ids=["while-its-timed-out-start-is-stopped", "while-it-starts-past-its-connect-timeout"],
)
async def test_closing_stops_a_server_that_never_answers(
    store: InProcessStore, connect_timeout: float, closed_after: float
) -> None:
    # The SDK gives a stdio server 2 s to exit after its stdin closes, then kills it;
    # neither a close nor the connect timeout may cut that short and leave it running.
    before = server_children()
    mute = python_server("mute", "--silent", connect_timeout=connect_timeout)
    mcp = McpSources([mute], 30.0, store)
    mcp.start()
    started: set[int] = set()
    try:
        async with asyncio.timeout(60):
            # a process that starts sets no event: look for it
            while not (started := server_children() - before):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        await asyncio.sleep(closed_after)
        async with asyncio.timeout(30):
            await mcp.aclose()
        assert server_children() & started == set()
    finally:
        for pid in server_children() & started:
            os.kill(pid, signal.SIGKILL)


async def test_a_server_removed_during_a_call_fails_the_call_and_deletes_its_tools(
    store: InProcessStore, changes: Changes
) -> None:
    mcp = McpSources([python_server()], 30.0, store, changes)
    mcp.start()
    try:
        async with asyncio.timeout(60):
            await mcp.settled()
        slow, city = tool(store, "test_slow"), tool(store, "test_lookup_city")
        call = asyncio.create_task(mcp.invoke(slow, {"seconds": 600}))
        await asyncio.sleep(0)  # the call is sent before the server goes
        assert await mcp.remove("test") == len(TOOLS)
        async with asyncio.timeout(60):  # a guard against a hang, not a measure
            with pytest.raises(ToolError, match="went away during the call"):
                await call
        assert not mcp.available(city)
        assert store.get_tool("test_lookup_city") is None
        with pytest.raises(ToolError, match="no MCP server named test"):
            await mcp.invoke(city, {"city": "Oslo"})
    finally:
        await mcp.aclose()
