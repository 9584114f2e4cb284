"""The console's JSON endpoints through real HTTP: catalog search by each retriever, a
tool's page with its edges, graph statistics, the metrics overview; and its page."""

from __future__ import annotations

import math
from typing import Any

import httpx
import pytest

from proxy.console.overview import quantile
from tests.conftest import ServerThread, StartProxy
from tests.orchestrate.conftest import ORCHESTRATE, Brain, sdk, seed_catalog, user

KEY = "sk-master-0123456789"
UPSTREAM_KEY = "sk-upstream-secret-0123456789"
AUTH = {"authorization": f"Bearer {KEY}"}


@pytest.fixture
def proxy(start_proxy: StartProxy) -> ServerThread:
    seed_catalog(
        [
            {
                "name": "keyed_lookup",
                "description": "Look a word up in a dictionary service",
                "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
                "x-endpoint": {"method": "GET", "url": f"https://dict.example/?key={UPSTREAM_KEY}"},
            }
        ]
    )
    return start_proxy(planner={"policy": "graph"}, master_key=KEY, upstream_api_key=UPSTREAM_KEY)


def get(server: ServerThread, path: str, **query: Any) -> Any:
    response = httpx.get(f"{server.url}{path}", params=query, headers=AUTH, timeout=300)
    assert response.status_code == 200, response.text
    return response.json()


def test_search_ranks_by_each_retriever_side_by_side(proxy: ServerThread) -> None:
    found = get(proxy, "/v1/toolgraph/catalog/search", q="evaluate a math expression", k=5)
    assert found["query"] == "evaluate a math expression"
    for method in ("hybrid", "bm25", "dense"):
        hits = found[method]
        assert 0 < len(hits) <= 5
        assert "evaluate_expression" in [hit["name"] for hit in hits[:3]], method
        scores = [hit["score"] for hit in hits]
        assert scores == sorted(scores, reverse=True)
    top = next(h for h in found["hybrid"] if h["name"] == "evaluate_expression")
    assert top["description"]


def test_a_tools_page_masks_secrets_and_an_unknown_tool_is_a_404(proxy: ServerThread) -> None:
    page = get(proxy, "/v1/toolgraph/catalog/tools/keyed_lookup")
    assert page["name"] == "keyed_lookup"
    assert page["callable"] is True
    assert page["provenance"]["format"] == "openai"
    assert page["endpoint"]["url"] == "https://dict.example/?key=***"
    assert isinstance(page["edges"], list)
    missing = httpx.get(f"{proxy.url}/v1/toolgraph/catalog/tools/no_such_tool", headers=AUTH)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "tool_not_found"


def test_stats_count_the_catalog(proxy: ServerThread) -> None:
    stats = get(proxy, "/v1/toolgraph/catalog/stats")
    assert stats["tools"] > 1  # the built-in pack and the seeded tool
    assert set(stats["edges"]) == {"SEQUENTIAL", "STRONG_DEP", "WEAK_DEP"}
    assert stats["largest_component"] >= 1


def test_the_overview_counts_what_the_process_served(proxy: ServerThread, brain: Brain) -> None:
    before = get(proxy, "/v1/toolgraph/overview")
    brain.arguments["2*pi"] = {"expression": "2*pi*50"}
    client = sdk(proxy)
    client.api_key = KEY
    client.chat.completions.create(
        model="fake-model", messages=user("Evaluate 2*pi*50 numerically."), extra_body=ORCHESTRATE
    )
    after = get(proxy, "/v1/toolgraph/overview")
    assert after["requests"]["200"] >= before["requests"].get("200", 0) + 1
    assert after["requests_by_mode"]["orchestrate"] >= 1
    assert after["tool_calls"]["ok"] >= before["tool_calls"].get("ok", 0) + 1
    assert after["tools"]["evaluate_expression"] >= 1
    assert after["stage_seconds"]["execute"]["count"] >= 1
    assert after["latency_quantiles"]["0.5"] is not None
    # the overview's own polling is no API request: it does not count itself
    again = get(proxy, "/v1/toolgraph/overview")
    assert sum(again["requests"].values()) == sum(after["requests"].values())


@pytest.mark.parametrize(
    "path",
    [
        "/v1/toolgraph/catalog/search?q=x",
        "/v1/toolgraph/catalog/tools/keyed_lookup",
        "/v1/toolgraph/catalog/stats",
        "/v1/toolgraph/overview",
    ],
)
def test_the_console_api_needs_the_master_key(proxy: ServerThread, path: str) -> None:
    response = httpx.get(f"{proxy.url}{path}", headers={"authorization": "Bearer wrong"})
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


def test_a_bad_search_is_a_400_naming_it(proxy: ServerThread) -> None:
    response = httpx.get(
        f"{proxy.url}/v1/toolgraph/catalog/search", params={"q": "x", "k": 0}, headers=AUTH
    )
    assert response.status_code == 400
    assert "k" in response.json()["error"]["message"]


def test_the_page_and_its_assets_are_served_with_a_strict_policy(proxy: ServerThread) -> None:
    page = httpx.get(f"{proxy.url}/ui")
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert '<script type="module" src="/ui/static/js/app.js">' in page.text
    script = httpx.get(f"{proxy.url}/ui/static/js/app.js")
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    assert httpx.get(f"{proxy.url}/ui/static/nothing.js").status_code == 404


def test_quantiles_come_from_cumulative_buckets() -> None:
    buckets = {0.1: 50.0, 0.5: 90.0, 1.0: 99.0, math.inf: 100.0}
    assert quantile(buckets, 0.5) == 0.1
    assert quantile(buckets, 0.9) == 0.5
    assert quantile(buckets, 0.99) == 1.0
    assert quantile(buckets, 1.0) == 1.0  # in +Inf: the largest finite edge
    assert quantile({math.inf: 0.0}, 0.5) is None
