"""One MCP server's listing and calls, read-only: one server for the whole module (it
takes seconds to start under load). The tests that change or crash it are in
test_sources.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from graph_store.embedded import InProcessStore
from graph_store.models import EdgeKind, Tool
from proxy.errors import ToolError
from proxy.execute.invocation import Invoker, tool_host
from proxy.mcp.catalog import EDGE_ORIGIN
from proxy.mcp.sources import McpSources
from proxy.tools.builtin import PythonTools
from tests.mcp.conftest import python_server

pytestmark = pytest.mark.asyncio(loop_scope="module")

LISTED = ["cancellations", "crash", "forecast", "grow", "lookup_city", "meet", "reject", "slow"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> InProcessStore:
    return InProcessStore.open(Path(tmp_path_factory.mktemp("graph")))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sources(store: InProcessStore) -> AsyncIterator[McpSources]:
    mcp = McpSources([python_server()], 30.0, store)
    mcp.start()
    await asyncio.wait_for(mcp.settled(), 60)
    yield mcp
    await mcp.aclose()


def tool(store: InProcessStore, name: str) -> Tool:
    found = store.get_tool(name)
    assert found is not None, name
    return found


async def test_every_page_of_the_listing_becomes_tools_with_their_provenance(
    sources: McpSources, store: InProcessStore
) -> None:
    tools = store.list_tools()
    assert sorted(t.original_name for t in tools) == LISTED  # four pages of two
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
    assert tool_host(lookup) == "mcp:test"  # the scheduler's per-host limits: one per server


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


async def test_the_executors_invoker_routes_mcp_endpoints(
    sources: McpSources, store: InProcessStore
) -> None:
    lookup = tool(store, "test_lookup_city")
    found = await Invoker(None, PythonTools(), sources).invoke(lookup, {"city": "bergen"})
    assert found == {"city": "bergen", "latitude": 60.39, "longitude": 5.32}
    with pytest.raises(ToolError, match="no MCP server is configured"):
        await Invoker(None, PythonTools()).invoke(lookup, {"city": "bergen"})
