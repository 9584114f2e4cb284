"""toolgraph as an MCP server: ``/mcp`` driven by the official SDK's own client (list,
search, call), and refused without the key."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator

import httpx
import httpx2
import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import ServerThread, StartProxy
from tests.mcp.conftest import Brain, ServeMcp, plan_oslo_weather

KEY = "sk-master-0123456789"


@pytest.fixture
def proxy(start_proxy: StartProxy) -> ServerThread:
    return start_proxy(master_key=KEY, upstream_api_key="sk-upstream-0123456789")


@contextlib.asynccontextmanager
async def connected(proxy: ServerThread) -> AsyncIterator[Client]:
    """The SDK's client on ``/mcp`` (entered and left in the test's own task, as the
    SDK's task groups require: a fixture's teardown runs in another)."""
    headers = {"authorization": f"Bearer {KEY}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120.0)) as http,
        Client(streamable_http_client(f"{proxy.url}/mcp", http_client=http), cache=None) as mcp,
    ):
        yield mcp


def text_of(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


async def test_the_catalog_is_searched_and_called_through_its_tools(proxy: ServerThread) -> None:
    async with connected(proxy) as client:
        await search_and_call(client)


async def search_and_call(client: Client) -> None:
    listed = await client.list_tools()
    assert sorted(tool.name for tool in listed.tools) == [
        "call_tool",
        "plan",
        "run",
        "search_tools",
    ]
    found = await client.call_tool(
        "search_tools", {"query": "cross product of two vectors", "k": 3}
    )
    assert not found.is_error, found
    hits = json.loads(text_of(found))
    assert hits[0]["name"] == "vector_operation"
    assert "properties" in hits[0]["parameters"]
    called = await client.call_tool(
        "call_tool", {"name": "evaluate_expression", "arguments": {"expression": "6 * 7"}}
    )
    assert not called.is_error, called
    assert json.loads(text_of(called))["value"] == 42


async def test_an_unknown_tool_is_an_error_result(proxy: ServerThread) -> None:
    async with connected(proxy) as client:
        result = await client.call_tool("call_tool", {"name": "no_such_tool", "arguments": {}})
    assert result.is_error
    assert "no tool 'no_such_tool' in the catalog" in text_of(result)


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-key"])
def test_a_missing_or_wrong_key_is_refused(proxy: ServerThread, authorization: str | None) -> None:
    headers = {"accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["authorization"] = authorization
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    response = httpx.post(f"{proxy.url}/mcp", json=body, headers=headers, timeout=30)
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


async def test_plan_shows_the_dag_and_run_answers_with_its_trace(
    serve_mcp: ServeMcp, brain: Brain
) -> None:
    proxy = serve_mcp(master_key=KEY, upstream_api_key="sk-upstream-0123456789")
    plan_oslo_weather(brain)
    ask = {"request": "What is the weather in Oslo?", "model": "fake-model"}
    async with connected(proxy) as client:
        unnamed = await client.call_tool("plan", {"request": "What is the weather in Oslo?"})
        assert unnamed.is_error
        assert "name the model" in text_of(unnamed)
        planned = await client.call_tool("plan", ask)
        assert not planned.is_error, planned
        plan = json.loads(text_of(planned))
        calls = {call["id"]: call for call in plan["calls"]}
        assert calls["s1"]["tool"] == "test_lookup_city"
        assert (calls["s2"]["tool"], calls["s2"]["needs"]) == ("test_forecast", ["s1"])
        assert all(decision["reason"] for decision in plan["decisions"])
        plan_oslo_weather(brain)
        ran = await client.call_tool("run", ask)
    assert not ran.is_error, ran
    result = json.loads(text_of(ran))
    assert "Sunny at 59.91" in result["answer"]
    async with httpx.AsyncClient(headers={"authorization": f"Bearer {KEY}"}) as http:
        read = await http.get(f"{proxy.url}/v1/toolgraph/traces/{result['trace_id']}", timeout=30)
    found = read.json()
    assert [(c["tool"], c["outcome"]) for c in found["calls"]] == [
        ("test_lookup_city", "ok"),
        ("test_forecast", "ok"),
    ]
