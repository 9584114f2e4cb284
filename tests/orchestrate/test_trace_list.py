"""``GET /v1/toolgraph/traces``: summaries of the latest traces, newest first, filtered
by outcome, tool and duration, behind the master key, through real HTTP."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import ServerThread, StartProxy
from tests.orchestrate.conftest import ORCHESTRATE, Brain, sdk, user

KEY = "sk-master-0123456789"
AUTH = {"authorization": f"Bearer {KEY}"}


@pytest.fixture
def proxy(start_proxy: StartProxy) -> ServerThread:
    return start_proxy(planner={"policy": "graph"}, master_key=KEY)


def orchestrate(server: ServerThread, text: str) -> str:
    client = sdk(server)
    client.api_key = KEY
    raw = client.chat.completions.with_raw_response.create(
        model="fake-model", messages=user(text), extra_body=ORCHESTRATE
    )
    return str(raw.headers["x-toolgraph-trace-id"])


def listed(server: ServerThread, **query: Any) -> list[dict[str, Any]]:
    response = httpx.get(f"{server.url}/v1/toolgraph/traces", params=query, headers=AUTH)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "list"
    data: list[dict[str, Any]] = body["data"]
    return data


def test_the_list_summarises_the_latest_traces_and_filters_them(
    proxy: ServerThread, brain: Brain
) -> None:
    brain.arguments["2*pi"] = {"expression": "2*pi*50"}
    answered = orchestrate(proxy, "Evaluate the expression 2*pi*50 numerically.")
    brain.arguments["3*pi"] = {"missing": ["expression"], "question": "Which formula?"}
    asked = orchestrate(
        proxy, "Evaluate the expression 3*pi numerically, secret sk-master-0123456789."
    )

    both = listed(proxy)
    assert [s["id"] for s in both] == [asked, answered]
    first = both[1]
    assert first["outcome"] == "answer"
    assert first["tools"] == ["evaluate_expression"]
    assert first["failed_calls"] == 0
    assert first["calls"] == [{"node": "s1", "tool": "evaluate_expression", "outcome": "ok"}]
    assert [c["outcome"] for c in both[0]["calls"]] == ["needs_input"]
    assert first["model"] == "fake-model"
    assert first["seconds"] > 0
    assert "2*pi*50" in first["conversation"]
    assert KEY not in str(both)  # masked as in the trace itself

    assert [s["id"] for s in listed(proxy, outcome="question")] == [asked]
    assert [s["id"] for s in listed(proxy, outcome="answer")] == [answered]
    assert [s["id"] for s in listed(proxy, limit=1)] == [asked]
    assert [s["id"] for s in listed(proxy, tool="evaluate_expression", outcome="answer")] == [
        answered
    ]
    assert listed(proxy, tool="no_such_tool") == []
    assert listed(proxy, min_seconds=3600) == []


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ({"limit": 0}, "limit"),
        ({"outcome": "maybe"}, "outcome"),
        ({"min_seconds": -1}, "min_seconds"),
    ],
)
def test_a_bad_filter_is_a_400_naming_it(
    proxy: ServerThread, query: dict[str, Any], param: str
) -> None:
    response = httpx.get(f"{proxy.url}/v1/toolgraph/traces", params=query, headers=AUTH)
    assert response.status_code == 400
    assert param in response.json()["error"]["message"]


def test_the_list_needs_the_master_key(proxy: ServerThread) -> None:
    response = httpx.get(f"{proxy.url}/v1/toolgraph/traces")
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"
