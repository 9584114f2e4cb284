"""The console's catalog search and ``/mcp``'s ``search_tools`` read a request's clauses as
the planner does (``retriever.clauses``), and read the whole text alone with it off."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import ServerThread, StartProxy
from tests.mcp.test_endpoint import KEY, connected, text_of
from tests.orchestrate.conftest import seed_catalog
from tests.retriever.client_tools import client_tools

#: The whole text lands on the weather: no translation tool is among its first ten in a
#: catalog of select mode's 300 client tools, while its second clause asks for one.
WEATHER_THEN_TRANSLATION = (
    "What's the weather forecast in Lisbon today, and also translate hello into Portuguese"
)


@pytest.fixture(params=[True, False], ids=["clauses", "whole-text"])
def proxy(start_proxy: StartProxy, request: pytest.FixtureRequest) -> ServerThread:
    seed_catalog([tool["function"] for tool in client_tools()])
    return start_proxy(
        master_key=KEY,
        upstream_api_key="sk-upstream-0123456789",
        retriever={"clauses": request.param},
        orchestrate={"gate": False},  # the gate would embed the 300 tools once more
    )


def translations(names: list[str]) -> list[str]:
    return [name for name in names if name.endswith("_translation")]


def clauses_on(proxy: ServerThread) -> bool:
    return proxy.settings.retriever.clauses


def test_the_consoles_search_finds_the_tool_a_later_clause_asks_for(proxy: ServerThread) -> None:
    response = httpx.get(
        f"{proxy.url}/v1/toolgraph/catalog/search",
        params={"q": WEATHER_THEN_TRANSLATION, "k": 5},
        headers={"authorization": f"Bearer {KEY}"},
        timeout=300,
    )
    assert response.status_code == 200, response.text
    found = response.json()
    for method in ("hybrid", "dense"):
        names = [hit["name"] for hit in found[method]]
        assert names[0] == "get_weather_forecast", method
        assert bool(translations(names)) is clauses_on(proxy), method


async def test_mcp_search_tools_finds_the_tool_a_later_clause_asks_for(
    proxy: ServerThread,
) -> None:
    async with connected(proxy) as client:
        result = await client.call_tool("search_tools", {"query": WEATHER_THEN_TRANSLATION, "k": 5})
    assert not result.is_error, result
    names = [hit["name"] for hit in json.loads(text_of(result))]
    assert names[0] == "get_weather_forecast"
    assert bool(translations(names)) is clauses_on(proxy)
