"""The console in a real browser: Debian's chromium driven by Playwright, against a real
proxy aimed at the fake upstream. Few tests, each waiting for what it needs to see.

The screenshots in docs/console.md come from these tests:
``CONSOLE_SCREENSHOTS=proxy/console/screenshots pytest tests/console/test_browser.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from testing.brain import plan_of
from tests.conftest import ServerThread, StartProxy
from tests.console.conftest import OpenConsole
from tests.orchestrate.conftest import ADMIN, Brain, LocalTools, http_tool

#: A tool's output that would run script if the console ever parsed data as HTML.
HOSTILE = "<img src=x onerror=window.pwned=1>oslo"
REQUEST = "How long are the queues at the Oslo and Bergen offices, and what is their sum?"

#: Loading the encoder and indexing the catalog has taken minutes at load 15.
pytestmark = pytest.mark.timeout(600)


def plan_two_lookups_and_a_sum(brain: Brain) -> None:
    brain.plan = plan_of(
        ("Get the queue length at the Oslo office", []),
        ("Get the queue length at the Bergen office", []),
        ("Add the two queue lengths", ["s1", "s2"]),
    )
    brain.tools = {"Oslo": "oslo_queue", "Bergen": "bergen_queue", "Add": "evaluate_expression"}
    brain.arguments = {
        "Oslo": {"label": HOSTILE, "seconds": 0.5},
        "Bergen": {"label": "bergen", "seconds": 0.5},
        "Add": {"expression": "12 + 30"},
    }


#: Tokens the fake upstream reports per stage (prompt, completion): no two alike, so the
#: trace page's table shows which call each number belongs to.
STAGE_TOKENS = {
    "decompose": (311, 31),
    "pick": (212, 21),
    "reflect": (57, 5),
    "fields": (76, 7),
    "arguments": (113, 11),
    "answer": (419, 41),
}


#: Each page of the console, and what shows once it is drawn.
PAGES = [
    ("#/overview", "#overview .tile"),
    ("#/traces", "#trace-list, #no-traces"),
    ("#/catalog?q=queue%20length", "#search-results [data-method=dense] li"),
    ("#/tools/tromso_queue", "#recent-calls, h1 code"),
    ("#/playground", "#pg-input"),
    ("#/add", "#mcp-form, #tool-spec"),
    ("#/keys", "#key-form"),
]


def box(page: Any, selector: str) -> dict[str, float]:
    found: dict[str, float] = page.locator(selector).bounding_box()
    return found


def test_a_streamed_orchestrate_chat_then_its_plan_and_timeline(
    console: OpenConsole, server: ServerThread, brain: Brain
) -> None:
    plan_two_lookups_and_a_sum(brain)
    brain.usage = dict(STAGE_TOKENS)
    tab = console(server)
    tab.open()
    tab.page.wait_for_selector("#trace-list, #no-traces")
    tab.go("#/playground")
    tab.page.select_option("#pg-mode", "orchestrate")
    tab.page.fill("#pg-input", REQUEST)
    tab.page.click("#pg-send")
    tab.page.wait_for_selector(".message.assistant.done")
    progress = tab.page.inner_text("#pg-progress")
    assert "calling oslo_queue, bergen_queue, evaluate_expression" in progress
    answer = tab.page.inner_text(".message.assistant.done .content")
    assert "42" in answer
    assert HOSTILE in answer  # the tool's output, quoted in the answer, shown as text
    tab.shot("playground")
    link = tab.page.get_attribute(".trace-link", "href")
    assert link is not None
    assert link.startswith("#/traces/")
    # the answer, its progress and its trace link stay when the person leaves and comes
    # back, and when the page reloads (the tab's sessionStorage)
    tab.go("#/overview")
    tab.page.wait_for_selector("#overview .tile")
    tab.go("#/playground")
    still_there(tab.page, link)
    tab.page.reload()
    still_there(tab.page, link)

    tab.page.click(".trace-link")
    tab.page.wait_for_selector("#plan-graph .plan-node")
    nodes = tab.page.locator("#plan-graph .plan-node")
    assert [nodes.nth(i).get_attribute("data-tool") for i in range(nodes.count())] == [
        "oslo_queue",
        "bergen_queue",
        "evaluate_expression",
    ]
    # the candidates each step saw, its choice marked
    tab.page.click(".decision[data-subtask=s1] summary")
    assert "oslo_queue" in tab.page.inner_text(".decision[data-subtask=s1] tr.chosen")
    bars = tab.page.locator("#timeline .bar")
    assert [bars.nth(i).get_attribute("data-tool") for i in range(bars.count())] == [
        "oslo_queue",
        "bergen_queue",
        "evaluate_expression",
    ]
    oslo, bergen, add = (
        box(tab.page, f"#timeline .bar[data-node={n}]") for n in ("s1", "s2", "s3")
    )
    # the two lookups ran at once: their bars overlap on the time axis; the sum after both
    assert oslo["x"] < bergen["x"] + bergen["width"]
    assert bergen["x"] < oslo["x"] + oslo["width"]
    assert add["x"] >= max(oslo["x"] + oslo["width"], bergen["x"] + bergen["width"]) - 1
    assert tab.page.locator("#timeline .bar.critical").count() >= 2
    assert tab.page.locator("#section-calls details.call").count() == 3
    # each upstream call with the tokens the fake upstream reported for its stage
    calls = upstream_calls(tab.page)
    assert {"decompose", "pick", "arguments", "answer"} <= {purpose for purpose, *_ in calls}
    assert ("pick", "s2", *STAGE_TOKENS["pick"]) in calls
    assert ("arguments", "oslo_queue", *STAGE_TOKENS["arguments"]) in calls
    assert all(tuple(tokens) == STAGE_TOKENS[purpose] for purpose, _, *tokens in calls)
    tab.shot("trace")
    assert HOSTILE in tab.page.text_content("#section-calls details.call[data-node=s1]")
    assert tab.page.evaluate("window.pwned === undefined")
    # on a phone the page does not scroll sideways: the graph and tables scroll in place
    tab.page.set_viewport_size({"width": 390, "height": 844})
    assert tab.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    tab.page.set_viewport_size({"width": 1280, "height": 860})

    # the tool's page lists its recent calls with their own outcomes
    trace_id = link.removeprefix("#/traces/")
    tab.go("#/tools/oslo_queue")
    call = tab.page.wait_for_selector(f"#recent-calls li[data-trace='{trace_id}'] .badge")
    assert (call.get_attribute("data-node"), call.inner_text()) == ("s1", "ok")

    tab.go("#/traces")
    tab.page.wait_for_selector("#trace-list tbody tr")
    assert "oslo_queue" in tab.page.inner_text("#trace-list tbody tr")
    tab.shot("traces")
    # signing out forgets the chat with the keys: the next person to sign in sees none
    tab.page.click("#sign-out")
    tab.open()
    tab.page.wait_for_selector("#trace-list")
    tab.go("#/playground")
    tab.page.wait_for_selector("#pg-input")
    assert tab.page.locator(".message").count() == 0
    assert tab.errors == []


def still_there(page: Any, link: str) -> None:
    """The playground shows the request, its answer with its progress and its trace link."""
    page.wait_for_selector(".message.assistant.done .trace-link")
    assert page.get_attribute(".trace-link", "href") == link
    assert "42" in page.inner_text(".message.assistant.done .content")
    assert "calling oslo_queue" in page.inner_text(".message.assistant.done .progress")
    assert page.inner_text(".message.user .content") == REQUEST


def upstream_calls(page: Any) -> list[tuple[Any, ...]]:
    """(purpose, about, prompt tokens, completion tokens) of each row of the trace page's
    upstream calls."""
    rows = page.locator("#upstream-calls tbody tr")
    return [
        (
            row.get_attribute("data-purpose"),
            row.get_attribute("data-about"),
            int(row.locator("td.prompt").inner_text()),
            int(row.locator("td.completion").inner_text()),
        )
        for row in (rows.nth(i) for i in range(rows.count()))
    ]


def test_a_tool_added_through_the_form_is_found_and_has_a_page(
    console: OpenConsole, server: ServerThread, local_tools: LocalTools
) -> None:
    tab = console(server)
    tab.open()
    tab.page.wait_for_selector("#trace-list, #no-traces")
    tab.go("#/add")
    spec = http_tool(
        "tromso_queue", "Queue length at the Tromso office", f"{local_tools.url}/sleep"
    )
    tab.page.fill("#admin-key", ADMIN)
    tab.page.fill("#tool-spec", json.dumps([spec]))
    tab.page.fill("#tool-test-args", '{"tromso_queue": {"label": "tromso"}}')
    tab.page.click("#tool-check")
    tab.page.wait_for_selector("#tool-result li[data-tool=tromso_queue] .badge.passed")
    tab.shot("add-tool")
    tab.page.click("#tool-save")
    tab.page.wait_for_selector("#tool-result li[data-tool=tromso_queue] a")

    tab.go("#/catalog?q=queue%20length%20at%20the%20Tromso%20office")
    tab.page.wait_for_selector("#search-results [data-method=hybrid] li")
    hybrid = tab.page.inner_text("#search-results [data-method=hybrid] li:first-child")
    assert "tromso_queue" in hybrid
    tab.shot("catalog")
    tab.page.click("#search-results [data-method=hybrid] li:first-child a")
    tab.page.wait_for_selector("h1 code")
    assert tab.page.inner_text("h1 code") == "tromso_queue"
    assert "registry" in tab.page.inner_text(".facts") or "openai" in tab.page.inner_text(".facts")
    tab.shot("tool")

    tab.go("#/overview")
    tab.page.wait_for_selector("#overview .tile")
    tab.shot("overview")
    # on a phone no page scrolls sideways: wide graphs and tables scroll in place
    tab.page.set_viewport_size({"width": 390, "height": 844})
    for route, drawn in PAGES:
        tab.go(route)
        tab.page.wait_for_selector(drawn)
        width = tab.page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], (route, width)
    assert tab.errors == []


def test_a_wrong_key_sees_nothing(console: OpenConsole, server: ServerThread) -> None:
    tab = console(server)
    tab.open("sk-not-the-key")
    tab.page.wait_for_selector("#sign-in .error")
    assert "Incorrect API key" in tab.page.inner_text("#sign-in .error")
    tab.go("#/traces")
    tab.page.wait_for_selector("#sign-in")
    assert tab.page.locator("#trace-list").count() == 0
    assert all("401" in error or "status of 401" in error for error in tab.errors)


def test_the_console_works_on_a_proxy_without_a_key(
    console: OpenConsole, start_proxy: StartProxy
) -> None:
    """An open proxy refuses cross-site pages, foreign hosts and non-JSON bodies: its own
    console, same-origin and JSON, reads and chats as before."""
    server = start_proxy(upstream_api_key="sk-upstream-0123456789")
    tab = console(server)
    tab.open("")
    tab.page.wait_for_selector("#trace-list, #no-traces")
    tab.go("#/playground")
    tab.page.select_option("#pg-mode", "passthrough")
    tab.page.fill("#pg-input", "hello from the console")
    tab.page.click("#pg-send")
    tab.page.wait_for_selector(".message.assistant.done")
    assert "You said: hello from the console" in tab.page.inner_text(".message.assistant.done")
    tab.go("#/overview")
    tab.page.wait_for_selector("#overview .tile")
    assert tab.errors == []
