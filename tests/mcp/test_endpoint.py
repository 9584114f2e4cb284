"""toolgraph as an MCP server: ``/mcp`` driven by the official SDK's own client (list,
search, call), and refused without the key."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator

import httpx
import httpx2
import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

from proxy.execute.scheduler import Scheduler
from proxy.tenancy.callers import operator_slot
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


async def test_a_search_query_past_its_length_is_an_error_result(proxy: ServerThread) -> None:
    async with connected(proxy) as client:
        result = await client.call_tool("search_tools", {"query": "convert " * 6500})
    assert result.is_error
    assert "at most 2000 are searched" in text_of(result)


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-key"])
def test_a_missing_or_wrong_key_is_refused(proxy: ServerThread, authorization: str | None) -> None:
    headers = {"accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["authorization"] = authorization
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    response = httpx.post(f"{proxy.url}/mcp", json=body, headers=headers, timeout=30)
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


MCP_HEADERS = {
    "authorization": f"Bearer {KEY}",
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
}


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}, "id must be a string or"),
        ({"jsonrpc": "2.0", "id": [1], "method": "tools/list"}, "not an array"),
        ({"jsonrpc": "2.0", "id": True, "method": "tools/list"}, "not a boolean"),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}, "not a number"),
        ({"jsonrpc": "2.0", "id": 1, "method": 7}, "method must be a non-empty string"),
        ({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}, 'jsonrpc must be "2.0"'),
        ({"jsonrpc": "2.0", "id": 1}, "needs a method"),
        ({"jsonrpc": "2.0", "result": {}}, "needs the id"),
        ([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}], "must be a JSON object"),
        ("hello", "must be a JSON object"),
    ],
)
def test_a_malformed_message_gets_a_json_rpc_error(
    proxy: ServerThread, message: object, problem: str
) -> None:
    response = httpx.post(f"{proxy.url}/mcp", json=message, headers=MCP_HEADERS, timeout=30)
    assert response.status_code == 400
    answer = response.json()
    assert (answer["jsonrpc"], answer["error"]["code"]) == ("2.0", -32600)
    assert problem in answer["error"]["message"]
    request_id = message.get("id") if isinstance(message, dict) else None
    assert answer["id"] == (request_id if type(request_id) is int else None)


def test_json_that_does_not_parse_is_a_parse_error(proxy: ServerThread) -> None:
    response = httpx.post(f"{proxy.url}/mcp", content=b'{"jsonrpc": ', headers=MCP_HEADERS)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700


def test_get_opens_no_stream_on_the_stateless_server(proxy: ServerThread) -> None:
    headers = {**MCP_HEADERS, "accept": "text/event-stream"}
    response = httpx.get(f"{proxy.url}/mcp", headers=headers, timeout=30)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST, DELETE"
    assert response.json()["error"]["message"].startswith("Method Not Allowed")


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


async def hold_slot(
    scheduler: Scheduler, client: str, held: threading.Event, release: threading.Event
) -> None:
    """Take ``client``'s one slot for in-process tools until ``release`` (in the proxy's loop)."""
    async with scheduler.client_slot(client, "local"):
        held.set()
        await asyncio.to_thread(release.wait, 120)


def until_waiting(scheduler: Scheduler, client: str, calling: asyncio.Future[object]) -> None:
    """Until a second call of ``client``'s holds or awaits its limit (or the call ended)."""
    deadline = time.monotonic() + 60  # a bound for a failure, not a figure
    while scheduler.client_calls(client, "local") < 2 and not calling.done():
        if time.monotonic() > deadline:
            raise RuntimeError("call_tool never reached the client's limit")
        time.sleep(0.01)


async def test_call_tool_waits_for_the_clients_slot(start_proxy: StartProxy) -> None:
    proxy = start_proxy(
        master_key=KEY, upstream_api_key="sk-upstream-0123456789", executor={"max_per_client": 1}
    )
    assert proxy.services is not None
    assert proxy.loop is not None
    scheduler = proxy.services.orchestrator.pipeline.executor.scheduler
    client = operator_slot("127.0.0.1")  # the slots of the master key's holder here
    held, release = threading.Event(), threading.Event()
    holder = asyncio.run_coroutine_threadsafe(
        hold_slot(scheduler, client, held, release), proxy.loop
    )
    try:
        assert await asyncio.to_thread(held.wait, 60)
        async with connected(proxy) as mcp:
            arguments = {"name": "evaluate_expression", "arguments": {"expression": "6 * 7"}}
            calling = asyncio.ensure_future(mcp.call_tool("call_tool", arguments))
            # the call reaches the client's limit and waits there for the slot the test holds
            await asyncio.to_thread(until_waiting, scheduler, client, calling)
            assert not calling.done()
            release.set()
            called = await calling
    finally:
        release.set()
        await asyncio.wrap_future(holder)
    assert not called.is_error, called
    assert json.loads(text_of(called))["value"] == 42
    assert scheduler.client_calls(client, "local") == 0
