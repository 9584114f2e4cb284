"""What the console's pages do beyond loading, in a real browser against a real proxy:
the trace list's filters keep what they say, a click on a neighbour in a tool's graph
opens that tool, and the catalog search shows BM25 and dense scores beside hybrid ones.
Each test compares the page with the proxy's own API, so a page that ignored a filter
or showed one ranking three times would fail."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from testing.fake_upstream import FakeToolCall, FakeUpstream, Script
from tests.conftest import ServerThread
from tests.console.conftest import KEY, Console, OpenConsole
from tests.mcp.conftest import python_server
from tests.orchestrate.conftest import ADMIN, ORCHESTRATE, Brain, sdk, user

pytestmark = pytest.mark.timeout(600)


def get(server: ServerThread, path: str, key: str = KEY, **query: Any) -> Any:
    response = httpx.get(
        server.url + path, params=query, headers={"authorization": f"Bearer {key}"}, timeout=60
    )
    assert response.status_code == 200, response.text
    return response.json()


def orchestrate(server: ServerThread, brain: Brain, step: str, tool: str, arguments: Any) -> str:
    """One orchestrated request whose plan is ``step``, run by ``tool``; its trace id."""
    brain.one_step(step, step.split()[0], tool, arguments)
    client = sdk(server)
    client.api_key = KEY
    raw = client.chat.completions.with_raw_response.create(
        model="fake-model", messages=user(step), extra_body=ORCHESTRATE
    )
    return str(raw.headers["x-toolgraph-trace-id"])


def rows(tab: Console) -> Any:
    return tab.page.locator("#trace-list tbody tr")


def filter_by(tab: Console, outcome: str = "", tool: str = "", slower: str = "") -> None:
    tab.page.select_option("#filter-outcome", outcome)
    tab.page.fill("#filter-tool", tool)
    tab.page.fill("#filter-slow", slower)
    tab.page.click("#trace-filters button[type=submit]")


def shows(tab: Console, *trace_ids: str) -> None:
    """The list shows exactly these traces, in this order (newest first). Each row is
    waited for, not read once: two filters in a row can give lists of the same length,
    and the old list is still on the page until the new one replaces it."""
    expect(rows(tab)).to_have_count(len(trace_ids))
    for i, trace_id in enumerate(trace_ids):
        expect(rows(tab).nth(i)).to_have_attribute("data-trace", trace_id)
    expect(rows(tab)).to_have_count(len(trace_ids))


def test_the_trace_list_filters_keep_what_they_say(
    console: OpenConsole, server: ServerThread, brain: Brain
) -> None:
    answered = orchestrate(
        server, brain, "Evaluate 6*7", "evaluate_expression", {"expression": "6*7"}
    )
    asked = orchestrate(
        server,
        brain,
        "Evaluate a formula",
        "evaluate_expression",
        {"missing": ["expression"], "question": "Which formula?"},
    )
    queued = orchestrate(
        server, brain, "Oslo queue length", "oslo_queue", {"label": "oslo", "seconds": 0.5}
    )
    tab = console(server)
    tab.open()
    tab.page.wait_for_selector("#trace-list")
    shows(tab, queued, asked, answered)

    filter_by(tab, outcome="question")
    shows(tab, asked)
    assert tab.page.evaluate("location.hash") == "#/traces?outcome=question"
    filter_by(tab, outcome="answer")
    shows(tab, queued, answered)
    filter_by(tab, tool="oslo_queue")
    shows(tab, queued)
    filter_by(tab, outcome="answer", tool="evaluate_expression")
    shows(tab, answered)
    assert tab.page.input_value("#filter-tool") == "evaluate_expression"  # kept on the page
    filter_by(tab, tool="no_such_tool")
    tab.page.wait_for_selector("#no-traces")

    # "slower than" the second-slowest request keeps the two slowest, whatever they took
    took = {s["id"]: s["seconds"] for s in get(server, "/v1/toolgraph/traces")["data"]}
    slowest = sorted(took, key=took.__getitem__, reverse=True)[:2]
    filter_by(tab, slower=repr(took[slowest[1]]))
    shows(tab, *(t for t in (queued, asked, answered) if t in slowest))
    filter_by(tab)
    shows(tab, queued, asked, answered)
    assert tab.errors == []


def test_a_click_on_a_neighbour_in_the_graph_opens_that_tool(
    console: OpenConsole, server: ServerThread
) -> None:
    # the tests' MCP server: lookup_city's latitude and longitude are forecast's inputs
    added = httpx.post(
        f"{server.url}/v1/toolgraph/mcp/servers",
        json=python_server("test").model_dump(mode="json"),
        headers={"authorization": f"Bearer {ADMIN}"},
        timeout=120,
    )
    assert added.status_code == 201, added.text
    tab = console(server)
    tab.open()
    tab.page.wait_for_selector("#trace-list, #no-traces")
    tab.go("#/tools/test_lookup_city")
    tab.page.wait_for_selector("#neighbourhood")
    assert tab.page.inner_text("h1 code") == "test_lookup_city"
    tab.page.click("#neighbourhood a.graph-node[data-tool=test_forecast] circle")
    expect(tab.page.locator("h1 code")).to_have_text("test_forecast")
    assert tab.page.evaluate("location.hash") == "#/tools/test_forecast"
    # and back along the same edge, seen from its other end
    back = tab.page.locator("#neighbourhood a.graph-node[data-tool=test_lookup_city] circle")
    expect(back).to_have_count(1)
    edges = get(server, "/v1/toolgraph/catalog/tools/test_forecast")["edges"]
    assert any(e["tool"] == "test_lookup_city" and e["direction"] == "in" for e in edges)
    back.click()
    expect(tab.page.locator("h1 code")).to_have_text("test_lookup_city")
    assert tab.errors == []


def test_the_catalog_search_shows_bm25_and_dense_scores_beside_hybrid(
    console: OpenConsole, server: ServerThread
) -> None:
    query = "queue length at the Bergen office"
    ranked = get(server, "/v1/toolgraph/catalog/search", q=query, k=10)
    tab = console(server)
    tab.open()
    tab.page.wait_for_selector("#trace-list, #no-traces")
    tab.go("#/catalog")
    tab.page.fill("#catalog-query", query)
    tab.page.click("#catalog-search button[type=submit]")
    for method in ("hybrid", "bm25", "dense"):
        hits = tab.page.locator(f"#search-results [data-method={method}] li")
        expect(hits).to_have_count(len(ranked[method]))
        shown = [
            (hits.nth(i).locator("a").inner_text(), hits.nth(i).locator(".num").inner_text())
            for i in range(hits.count())
        ]
        wanted = [(hit["name"], f"{hit['score']:.4f}") for hit in ranked[method]]
        assert shown == wanted, method
    # three rankings, not one shown three times: their scores are on different scales
    scores = {tuple(hit["score"] for hit in ranked[m]) for m in ("hybrid", "bm25", "dense")}
    assert len(scores) == 3
    assert ranked["bm25"][0]["name"] == "bergen_queue"
    assert ranked["dense"][0]["name"] == "bergen_queue"
    assert tab.errors == []


def test_the_playground_chats_in_passthrough_and_select_modes_without_a_trace(
    console: OpenConsole, server: ServerThread, upstream: FakeUpstream
) -> None:
    tab = console(server)
    tab.open()
    tab.page.wait_for_selector("#trace-list, #no-traces")
    tab.go("#/playground")
    assert tab.page.is_hidden("#pg-tools")
    tab.page.select_option("#pg-mode", "passthrough")
    say(tab, "Say hello")
    # the fake upstream echoes the last user message, streamed word by word
    assert tab.page.inner_text(".message.assistant.done .content") == "You said: Say hello"

    # select mode sends the request's own tools (the form's); the model's call shows
    tab.page.select_option("#pg-mode", "select")
    assert tab.page.is_visible("#pg-tools")
    upstream.enqueue(Script(tool_calls=(FakeToolCall("get_weather", '{"city": "Oslo"}'),)))
    say(tab, "What is the weather in Oslo?")
    calls = tab.page.locator(".message.assistant.done .tool-calls li")
    expect(calls).to_have_count(1)
    assert calls.inner_text() == 'get_weather({"city": "Oslo"})'
    sent = upstream.requests[-1].body
    assert "get_weather" in [tool["function"]["name"] for tool in sent["tools"]]
    assert tab.page.locator(".trace-link").count() == 0  # only orchestrate leaves a trace
    tab.shot("playground-select")
    assert tab.errors == []


def say(tab: Console, text: str) -> None:
    """Send ``text`` from the playground and wait for its answer to finish."""
    done = tab.page.locator(".message.assistant.done").count()
    tab.page.fill("#pg-input", text)
    tab.page.click("#pg-send")
    expect(tab.page.locator(".message.assistant.done")).to_have_count(done + 1)
