"""Learning end to end: an orchestrated run, and a select-mode answer, teach their own
tenant alone, which the admin API and ``toolgraph learning`` inspect, export and reset
and the console's tool page shows to that tenant
(the admin key required, bad input answered in OpenAI's error shape); with learning off
nothing is recorded."""

from __future__ import annotations

import time
from typing import Any

import httpx
import openai
import pytest

from proxy.cli import main
from proxy.tenancy import tenant_of
from testing.brain import Brain, plan_of
from testing.fake_upstream import FakeToolCall, FakeUpstream, Script
from tests.conftest import ServerThread, StartProxy, closed_after_test
from tests.orchestrate.conftest import ORCHESTRATE, user
from tests.retriever.client_tools import client_tools

ADMIN = "sk-admin-0123456789"
KEY_A = "sk-learner-a-0123456789"
KEY_B = "sk-learner-b-0123456789"
PATH = "/v1/toolgraph/learning"
EDGE = {"source": "calculate_derivative", "target": "evaluate_expression"}


def teach(brain: Brain) -> None:
    """A plan of two steps, the second fed by the first."""
    brain.plan = plan_of(
        ("Differentiate x**3 with respect to x at x = 2", []),
        ("Multiply that derivative by pi", ["s1"]),
    )
    brain.tools = {"Differentiate": "calculate_derivative", "Multiply": "evaluate_expression"}
    brain.arguments = {
        "Differentiate": {"expression": "x**3", "variable": "x", "at": 2},
        "Multiply": {"expression": "12*pi"},
    }


def orchestrate(server: ServerThread, key: str) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0, timeout=300)
    closed_after_test(client).chat.completions.create(
        model="fake-model", messages=user("What is 3x² at 2, times pi?"), extra_body=ORCHESTRATE
    )


def admin(server: ServerThread, method: str, path: str, key: str = ADMIN) -> httpx.Response:
    auth = {"authorization": f"Bearer {key}"}
    return httpx.request(method, f"{server.url}{PATH}{path}", headers=auth, timeout=30)


def learned(server: ServerThread, tenant: str, edges: int) -> dict[str, Any]:
    """The tenant's state once it holds ``edges`` edges: the write runs after the answer."""
    for _ in range(200):
        state: dict[str, Any] = admin(server, "GET", f"/{tenant}").json()
        if len(state["edges"]) >= edges:
            return state
        time.sleep(0.05)
    return state


@pytest.fixture
def proxy(start_proxy: StartProxy) -> ServerThread:
    return start_proxy(admin_key=ADMIN, learning={"enabled": True})


def test_a_run_teaches_its_tenant_alone_which_the_admin_api_exports_and_resets(
    proxy: ServerThread,
    brain: Brain,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    teach(brain)
    orchestrate(proxy, KEY_A)
    mine, other = tenant_of(KEY_A), tenant_of(KEY_B)
    state = learned(proxy, mine, 1)
    assert state["edges"] == [{**EDGE, "succeeded": 1, "failed": 0}]
    served = {(s["tool"], s["succeeded"]) for s in state["served"]}
    assert {(EDGE["source"], 1), (EDGE["target"], 1)} <= served  # the queries they served
    assert state["enabled"] is True
    assert admin(proxy, "GET", f"/{other}").json()["edges"] == []
    # the console's tool page shows the asking client's learned edges, and no other's
    pages = {
        key: httpx.get(
            f"{proxy.url}/v1/toolgraph/catalog/tools/calculate_derivative",
            headers={"authorization": f"Bearer {key}"},
            timeout=30,
        ).json()
        for key in (KEY_A, KEY_B)
    }
    assert pages[KEY_A]["learned"] == [{"direction": "out", **state["edges"][0]}]
    assert pages[KEY_B]["learned"] == []
    listed = admin(proxy, "GET", "").json()
    assert listed["data"] == [{"tenant": mine, "enabled": True}]
    monkeypatch.setenv("TOOLGRAPH_ADMIN_KEY", ADMIN)
    assert main(["learning", "show", mine, "--proxy", proxy.url]) == 0
    assert "calculate_derivative -> evaluate_expression: 1 ok, 0 failed" in capsys.readouterr().out
    reset = admin(proxy, "DELETE", f"/{mine}").json()
    held = len(state["edges"]) + len(state["picks"]) + len(state["served"])
    assert (reset["deleted"], reset["counts"]) == (True, held)
    assert admin(proxy, "GET", f"/{mine}").json()["edges"] == []


def test_the_learning_api_takes_the_admin_key_and_names_bad_input(proxy: ServerThread) -> None:
    assert admin(proxy, "GET", "", key=KEY_A).status_code == 401
    bad = admin(proxy, "GET", "/not-a-tenant")
    assert bad.status_code == 400
    assert bad.json()["error"]["param"] == "tenant"
    assert bad.json()["error"]["type"] == "invalid_request_error"
    unknown = admin(proxy, "DELETE", "/vk_0123456789abcdef")
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "key_not_found")


def test_with_learning_off_a_run_records_nothing(start_proxy: StartProxy, brain: Brain) -> None:
    server = start_proxy(admin_key=ADMIN)
    teach(brain)
    orchestrate(server, KEY_A)
    orchestrate(server, KEY_A)  # the first run's writes have ended by the second's answer
    assert admin(server, "GET", "").json() == {"object": "list", "enabled": False, "data": []}


@pytest.mark.parametrize("stream", [False, True])
def test_select_mode_records_which_forwarded_tools_the_model_called(
    proxy: ServerThread, upstream: FakeUpstream, stream: bool
) -> None:
    upstream.enqueue(Script(tool_calls=(FakeToolCall("get_weather_forecast", '{"city": "Oslo"}'),)))
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=KEY_A, max_retries=0, timeout=60)
    answer = closed_after_test(client).chat.completions.create(
        model="gpt-x",
        messages=user("Will it snow in Oslo on Friday?"),
        tools=client_tools(),
        stream=stream,
        extra_body={"toolgraph": {"mode": "select", "top_k": 4}},
    )
    if stream:
        assert [chunk for chunk in answer]  # type: ignore[union-attr]  # read to its end
    forwarded = [tool["function"]["name"] for tool in upstream.requests[-1].body["tools"]]
    tenant = tenant_of(KEY_A)
    for _ in range(200):  # the write runs after the answer
        state = admin(proxy, "GET", f"/{tenant}").json()
        if state["select"]:
            break
        time.sleep(0.05)
    uses = {use["tool"]: (use["called"], use["not_called"]) for use in state["select"]}
    called = "get_weather_forecast"
    assert uses == {name: (1, 0) if name == called else (0, 1) for name in forwarded}
    assert admin(proxy, "GET", f"/{tenant_of(KEY_B)}").json()["select"] == []
