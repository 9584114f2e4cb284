"""A request of one clause that names two operations of the one tool chosen for it is
decomposed after all: one call of the tool would do only one of them."""

from __future__ import annotations

from typing import Any

import pytest

from testing.brain import Brain
from tests.conftest import ServerThread, StartProxy
from tests.orchestrate.conftest import ORCHESTRATE, sdk, trace, user

COMPOSED = "What is the angle between [1, 0, 0] and the cross product of [0, 1, 0] and [0, 0, 1]?"
SINGLE = "What is the angle between [1, 0, 0] and [0, 1, 0]?"


@pytest.fixture
def proxy(start_proxy: StartProxy, brain: Brain) -> ServerThread:
    brain.sort = "one"
    brain.tools = {"angle": "vector_operation", "cross": "vector_operation"}
    brain.arguments = {
        "operation cross": {"operation": "cross", "a": [0, 1, 0], "b": [0, 0, 1]},
        "operation angle": {"operation": "angle", "a": [1, 0, 0], "b": [1, 0, 0]},
        "angle between": {"operation": "angle", "a": [1, 0, 0], "b": [0, 1, 0]},
    }
    return start_proxy(planner={"profile": "small", "pick": "llm", "memory_k": 0})


def ask(proxy: ServerThread, question: str) -> dict[str, Any]:
    raw = sdk(proxy).chat.completions.with_raw_response.create(
        model="fake-model", messages=user(question), extra_body=ORCHESTRATE
    )
    return trace(proxy, raw.headers["x-toolgraph-trace-id"])


def test_two_operations_of_the_one_tool_become_two_calls_innermost_first(
    proxy: ServerThread, brain: Brain
) -> None:
    found = ask(proxy, COMPOSED)
    assert brain.asked["decompose"] == 0  # the steps come from the schema, not the model
    calls = found["calls"]
    assert [call["arguments"]["operation"] for call in calls] == ["cross", "angle"]
    assert [call["tool"] for call in calls] == ["vector_operation", "vector_operation"]
    assert calls[0]["output"]["result"] == [1.0, 0.0, 0.0]  # (0,1,0) x (0,0,1)
    assert (
        "triage: one tool call, but the request names 2 of vector_operation's operations "
        "(cross, angle): one step each"
    ) in found["plan"]["notes"]
    steps = found["plan"]["subtasks"]
    assert [step["needs"] for step in steps] == [[], ["s1"]]
    assert steps[1]["text"].startswith("Step 2 of 2, the operation angle on the result of s1")


def test_one_operation_named_stays_one_call(proxy: ServerThread, brain: Brain) -> None:
    found = ask(proxy, SINGLE)
    assert brain.asked["decompose"] == 0
    assert [call["arguments"]["operation"] for call in found["calls"]] == ["angle"]
