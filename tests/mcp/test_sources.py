"""MCP servers as tool sources, against the tests' own stdio server: the listing synced
into the store (every page, names, schemas, hints, edges), calls, errors, list_changed,
a crash in the middle of a call, and a server that never answers ``initialize``."""

from __future__ import annotations

import asyncio

import pytest

from graph_store.memory import InProcessStore
from graph_store.models import EdgeKind, Tool
from proxy.errors import ToolError, ToolTimeout
from proxy.mcp.catalog import EDGE_ORIGIN
from proxy.mcp.sources import McpSources
from tests.mcp.conftest import Changes, python_server

LISTED = ["crash", "forecast", "grow", "lookup_city", "reject", "slow"]


def tool(store: InProcessStore, name: str) -> Tool:
    found = store.get_tool(name)
    assert found is not None, name
    return found


async def test_every_page_of_the_listing_becomes_tools_with_their_provenance(
    sources: McpSources, store: InProcessStore
) -> None:
    tools = store.list_tools()
    assert sorted(t.original_name for t in tools) == LISTED  # three pages of two
    lookup = tool(store, "test_lookup_city")
    assert lookup.endpoint is not None
    assert lookup.endpoint.url == "mcp://test/lookup_city"
    assert lookup.provenance.format == "mcp"
    assert lookup.provenance.file == "test"
    assert lookup.provenance.hints == {"readOnlyHint": True}
    assert tool(store, "test_reject").provenance.hints == {"destructiveHint": True}
    assert lookup.required_params() == ["city"]
    assert lookup.response_schema is not None
    assert "latitude" in str(lookup.response_schema)
    assert all(sources.available(t) for t in tools)


async def test_the_output_schema_joins_tools_by_an_edge(
    sources: McpSources, store: InProcessStore
) -> None:
    lookup, forecast = tool(store, "test_lookup_city"), tool(store, "test_forecast")
    edges = [e for e in store.edges() if e.src == lookup.id and e.dst == forecast.id]
    assert [e.kind for e in edges] == [EdgeKind.STRONG_DEP]
    assert edges[0].origin == EDGE_ORIGIN


async def test_structured_and_text_content_become_the_output(
    sources: McpSources, store: InProcessStore
) -> None:
    found = await sources.invoke(tool(store, "test_lookup_city"), {"city": "Oslo"})
    assert found == {"city": "oslo", "latitude": 59.91, "longitude": 10.75}
    text = await sources.invoke(tool(store, "test_forecast"), {"latitude": 1, "longitude": 2})
    assert text == "Sunny at 1, 2, 21 °C"


async def test_an_error_result_is_a_tool_error_with_the_servers_text(
    sources: McpSources, store: InProcessStore
) -> None:
    with pytest.raises(ToolError, match="records cannot be deleted") as caught:
        await sources.invoke(tool(store, "test_reject"), {"record": "r1"})
    assert caught.value.code == "mcp_tool_error"


async def test_one_session_serves_concurrent_calls(
    sources: McpSources, store: InProcessStore
) -> None:
    lookup = tool(store, "test_lookup_city")
    found = await asyncio.gather(
        *(sources.invoke(lookup, {"city": city}) for city in ["oslo", "bergen"] * 5)
    )
    assert [f["city"] for f in found] == ["oslo", "bergen"] * 5  # type: ignore[index,call-overload]


async def test_a_call_past_its_timeout_is_a_tool_timeout(store: InProcessStore) -> None:
    mcp = McpSources([python_server(call_timeout=0.5)], 30.0, store)
    mcp.start()
    try:
        await asyncio.wait_for(mcp.settled(), 60)
        with pytest.raises(ToolTimeout):
            await mcp.invoke(tool(store, "test_slow"), {"seconds": 60})
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
        async with asyncio.timeout(60):  # closing kills the mute process, no hang
            await mcp.aclose()


def tool_stub(server: str, name: str) -> Tool:
    from graph_store.ingest.mcp import parse_mcp

    parsed = parse_mcp(server, [{"name": name, "inputSchema": {"type": "object"}}])
    (found,) = parsed.tools
    return found
