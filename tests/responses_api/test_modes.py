"""Select and orchestrate modes on ``/v1/responses``: the same mode services as chat
completions, reached through the translation."""

from __future__ import annotations

import math
from typing import Any

import pytest

from testing.brain import Brain
from testing.fake_upstream import FakeToolCall, FakeUpstream, Script
from tests.conftest import StartProxy
from tests.responses_api.test_translate import chat_requests, sdk
from tests.retriever.client_tools import client_tools

QUESTION = "Evaluate the expression 2*pi*50 numerically."


def flat(tool: dict[str, Any]) -> Any:
    """A chat completions tool in the Responses API's flat form."""
    return {"type": "function", **tool["function"]}


def test_select_mode_trims_the_function_tools(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    upstream.enqueue(Script(tool_calls=(FakeToolCall("get_weather_forecast", '{"city":"Oslo"}'),)))
    # the first select request of a run embeds the 300 tools and may wait for the model
    client = sdk(start_proxy(), timeout=120)

    response = client.responses.create(
        model="gpt-x",
        input="Will it snow in Oslo on Friday?",
        tools=[flat(tool) for tool in client_tools()],
        extra_body={"toolgraph": {"mode": "select", "top_k": 4}},
    )

    (sent,) = chat_requests(upstream)
    names = [tool["function"]["name"] for tool in sent["tools"]]
    assert 1 <= len(names) <= 4
    assert "get_weather_forecast" in names
    assert "toolgraph" not in sent
    (call,) = response.output
    assert call.type == "function_call"
    assert call.name == "get_weather_forecast"
    assert len(response.tools) == len(client_tools())  # the request's own, as OpenAI echoes


@pytest.fixture
def brain(upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch) -> Brain:
    monkeypatch.setenv("TOOLGRAPH_ORCHESTRATE__GATE", "false")  # see tests/orchestrate
    brain = Brain()
    brain.arguments["2*pi*50"] = {"expression": "2*pi*50"}
    upstream.responder = brain
    return brain


def test_orchestrate_mode_streams_progress_as_reasoning_summary(
    start_proxy: StartProxy, brain: Brain
) -> None:
    proxy = start_proxy(upstream_api_key="sk-upstream-0123456789", planner={"policy": "graph"})
    options = {"toolgraph": {"mode": "orchestrate", "progress": True}}

    client = sdk(proxy, timeout=120)  # the catalog loads on the first orchestrate request
    with client.responses.stream(model="fake-model", input=QUESTION, extra_body=options) as s:
        events = list(s)
        final = s.get_final_response()

    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [event.sequence_number for event in events] == list(range(len(events)))
    reasoning, message = final.output
    assert reasoning.type == "reasoning"
    summary = reasoning.summary[0].text
    assert "planning…" in summary
    assert "calling evaluate_expression…" in summary
    assert "response.reasoning_summary_text.delta" in kinds
    assert message.type == "message"
    assert f"{2 * math.pi * 50:.6g}"[:6] in final.output_text
    assert final.usage is not None
    assert final.usage.total_tokens > 0


def test_orchestrate_mode_answers_a_whole_response(start_proxy: StartProxy, brain: Brain) -> None:
    proxy = start_proxy(
        upstream_api_key="sk-upstream-0123456789",
        planner={"policy": "graph"},
        default_mode="orchestrate",
    )

    response = sdk(proxy, timeout=120).responses.create(model="fake-model", input=QUESTION)

    assert f"{2 * math.pi * 50:.6g}"[:6] in response.output_text
    assert response.status == "completed"
