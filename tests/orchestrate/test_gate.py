"""The no-tool gate in orchestrate mode, through the SDK: a request no tool serves is
answered without planning; one a tool serves is planned as before."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import ServerThread, StartProxy
from tests.orchestrate.conftest import ORCHESTRATE, Brain, sdk, stream_parts, trace, user

CHIT_CHAT = "Thanks, that helps a lot!"
QUESTION = "Evaluate the expression 2*pi*50 numerically."
#: Stages only planning and tools ask the upstream about.
PLANNING = ("decompose", "pick", "reflect", "arguments")
#: Seconds the SDK waits: the first request loads the catalog, slow on a busy machine.
WAIT = 300


@pytest.fixture
def gated(start_proxy: StartProxy) -> ServerThread:
    """The LLM planner, so that a planned request shows in the upstream's prompts."""
    return start_proxy(planner={"policy": "llm"}, orchestrate={"gate": True})


def ask(server: ServerThread, text: str) -> tuple[str, dict[str, Any]]:
    raw = sdk(server, timeout=WAIT).chat.completions.with_raw_response.create(
        model="fake-model", messages=user(text), extra_body=ORCHESTRATE
    )
    answer = raw.parse().choices[0].message.content or ""
    return answer, trace(server, raw.headers["x-toolgraph-trace-id"])


def test_chit_chat_is_answered_without_planning(gated: ServerThread, brain: Brain) -> None:
    answer, recorded = ask(gated, CHIT_CHAT)
    assert answer == "Answer from the results: none"
    assert [stage for stage, _ in brain.prompts] == ["answer"]
    assert recorded["gate"]["decision"] == "no_tool"
    assert 0 <= recorded["gate"]["score"] < 0.5
    assert "plan" not in recorded
    assert recorded["calls"] == []
    assert "gate" in recorded["timings"]
    assert "plan" not in recorded["timings"]


def test_a_streamed_chit_chat_turn_skips_planning_too(gated: ServerThread, brain: Brain) -> None:
    stream = sdk(gated, timeout=WAIT).chat.completions.create(
        model="fake-model", messages=user(CHIT_CHAT), stream=True, extra_body=ORCHESTRATE
    )
    content, _, _ = stream_parts(iter(stream))
    assert content == "Answer from the results: none"
    assert not any(stage in PLANNING for stage, _ in brain.prompts)


def test_a_tool_request_is_still_planned_and_run(gated: ServerThread, brain: Brain) -> None:
    brain.one_step(QUESTION, "2*pi*50", "evaluate_expression", {"expression": "2*pi*50"})
    answer, recorded = ask(gated, QUESTION)
    assert recorded["gate"]["decision"] == "tool"
    assert recorded["gate"]["score"] >= 0.5
    assert brain.asked["decompose"] == 1
    (call,) = recorded["calls"]
    assert call["tool"] == "evaluate_expression"
    assert call["outcome"] == "ok"
    assert "314.15" in answer


def test_with_the_gate_off_chit_chat_is_planned(start_proxy: StartProxy, brain: Brain) -> None:
    server = start_proxy(planner={"policy": "graph"}, orchestrate={"gate": False})
    _, recorded = ask(server, CHIT_CHAT)
    assert "gate" not in recorded
    assert recorded["plan"]["policy"] == "graph"
